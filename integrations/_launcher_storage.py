"""Optuna storages for many processes: ``make_storage`` opens SQLite (WAL), PostgreSQL, MySQL
or journal files whose trials are claimed once and whose dead workers' trials are retried.

The rules (a trial's owner process, the claim trigger on SQLite, when a trial is stale) are in
``docs/integrations/launcher.md``; the Optuna privates they need are in ``_launcher_shim.py``.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import warnings
from collections.abc import Callable
from numbers import Real
from typing import Any

import optuna
from optuna.study import Study
from optuna.trial import FrozenTrial

from transfersearch.errors import Allowed, Interval, TransferSearchError, check_int, check_value
from transfersearch.integrations import _launcher_shim as shim
from transfersearch.integrations._launcher_shim import RetryOnce
from transfersearch.integrations._trial_claims import claim_once_on_sqlite
from transfersearch.redact import redact_url

__all__ = ["TIMEOUT", "make_storage"]

#: What a storage's ``timeout`` may be: seconds (``math.inf``: wait forever).
TIMEOUT = Allowed(
    Interval(Real, 0, None, closed="neither", finite=False), fix="A number of seconds, e.g. 60."
)


def make_storage(
    url: str,
    *,
    heartbeat_interval: int | None = 60,
    grace_period: int | None = None,
    max_retry: int | None = 3,
    timeout: float = 60.0,
    must_exist: bool = False,
) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url`` that fails and retries the trials of dead workers.

    * ``sqlite:///proxy.db``, ``postgresql://user@host:5432/db``, ``mysql://...``: an
      ``RDBStorage`` whose trials name the process that runs them (host, pid) and heartbeat every
      ``heartbeat_interval`` seconds from the moment they are created or claimed. A RUNNING
      trial whose process on this host is gone is failed by the next trial any worker starts;
      one whose process lives and is a launcher worker is never failed, however late its
      heartbeat on a loaded machine; any other (another host's, or a notebook's ``study.ask()``
      never told: only a worker heartbeats a trial before its objective runs) is failed once its
      heartbeat, or its start, is older than ``grace_period`` (default 2 × interval). A failed trial is re-enqueued with the same parameters and rung
      up to ``max_retry`` times (``RetryHeartbeatStaleTrialCallback``), by one process only.
      Each enqueued trial (a retry, ``enqueue_trial``, a Ctrl-C rerun) is run by exactly one
      process: a SQLite file gets a trigger that makes Optuna's claim atomic (PostgreSQL and
      MySQL lock the row). A plain ``postgresql://`` URL uses psycopg 3 (SQLAlchemy 2.1's
      default; ``pip install 'psycopg[binary]'``). SQLite waits up to ``timeout`` s for a lock
      and runs in WAL mode with ``synchronous=NORMAL``: readers never block the writer and a
      commit costs no fsync, so several workers on one file keep up; a killed process loses
      nothing (an OS crash may lose the last commits). Keep the file on a local disk (WAL needs
      shared memory).
    * ``journal:///path/to/file.log`` or a path ending in ``.log``: a ``JournalStorage`` on a
      file (many processes on one machine or a shared file system). Optuna gives journal storages
      no heartbeat, so a killed worker's trial stays RUNNING; it is not counted by the fit.

    Args:
        must_exist: open an existing study file only (for reading results): a SQLite or journal
            file that does not exist is an error instead of a new, empty file.

    Raises:
        TransferSearchError: a URL that is not a database URL or names an unknown database, a
            SQLite path whose directory does not exist or that is not a SQLite file, a missing
            file with ``must_exist``, a database driver that is not installed, a database that
            cannot be opened, or a non-positive heartbeat/grace period.
    """
    if not isinstance(url, str) or not url:
        raise TransferSearchError(
            f"`storage` must be a URL such as 'sqlite:///proxy.db', but got {url!r}."
        )
    check_value("timeout", timeout, TIMEOUT)
    if url.startswith("journal://") or url.endswith(".log"):
        path = url[len("journal://") :] if url.startswith("journal://") else url
        _check_file(redact_url(url), path, must_exist=must_exist, sqlite=False)
        from optuna.storages.journal import JournalFileBackend

        backend = JournalFileBackend(path)
        return optuna.storages.JournalStorage(backend)
    for name, value in (
        ("heartbeat_interval", heartbeat_interval),
        ("grace_period", grace_period),
        ("max_retry", max_retry),
    ):
        _check_optional_int(name, value, low=0 if name == "max_retry" else 1)
    shown, is_file_sqlite = _check_database_url(url, must_exist=must_exist)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": timeout}
    kwargs = (
        {}
        if heartbeat_interval is None
        else _heartbeat(heartbeat_interval, grace_period, max_retry)
    )
    storage = _open_rdb(url, shown, engine_kwargs, kwargs)
    if is_file_sqlite:
        import sqlalchemy

        sqlalchemy.event.listen(storage.engine, "connect", _sqlite_pragmas)
        storage.engine.dispose()  # connections opened before the listener get closed
        if not must_exist:  # a read-only open writes nothing, not even the trigger
            claim_once_on_sqlite(storage.engine)
    return storage


def _heartbeat(interval: int, grace_period: int | None, max_retry: int | None) -> dict[str, Any]:
    """The RDBStorage keywords for a heartbeat every ``interval`` s whose stale trials are failed
    and retried once each (:class:`RetryOnce`) up to ``max_retry`` times."""
    retry_class = getattr(
        optuna.storages,
        "RetryHeartbeatStaleTrialCallback",
        optuna.storages.RetryFailedTrialCallback,
    )
    with warnings.catch_warnings():  # asked for on the user's behalf: no warning about it
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        stale = retry_class(max_retry=max_retry)
    retry: Callable[[Study, FrozenTrial], None] = RetryOnce(stale)
    parameters = inspect.signature(optuna.storages.RDBStorage).parameters
    key = (
        "heartbeat_stale_trial_callback"
        if "heartbeat_stale_trial_callback" in parameters
        else "failed_trial_callback"
    )
    return {
        "heartbeat_interval": interval,
        "grace_period": grace_period or 2 * interval,
        key: retry,
    }


def _open_rdb(
    url: str, shown: str, engine_kwargs: dict[str, Any], kwargs: dict[str, Any]
) -> optuna.storages.RDBStorage:
    """Open the RDBStorage; a missing driver or a database that cannot be opened is a
    TransferSearchError naming the URL (password hidden)."""
    import sqlalchemy

    try:
        storage: optuna.storages.RDBStorage = shim.open_rdb_storage(
            url, engine_kwargs=engine_kwargs, **kwargs
        )
    except ImportError as exc:
        raise TransferSearchError(
            f"cannot open storage {shown!r}: its database driver is not installed ({exc}). For a "
            "plain postgresql:// URL: pip install 'psycopg[binary]'; or name the driver, e.g. "
            "postgresql+psycopg2://."
        ) from exc
    except (sqlalchemy.exc.SQLAlchemyError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        password = sqlalchemy.engine.make_url(url).password
        if password:
            reason = reason.replace(str(password), "***")
        raise TransferSearchError(
            f"cannot open storage {shown!r}: {reason}. Check the URL, that the database server "
            "runs, and the credentials."
        ) from exc
    return storage


def _check_optional_int(name: str, value: Any, *, low: int) -> None:
    """``value`` is None or an int >= ``low`` (not a bool, not a string)."""
    if value is not None:
        check_int(
            name, value, minimum=low, fix=f"Pass e.g. {name}=10 (seconds or a count), or None."
        )


def _check_file(url: str, path: str, *, must_exist: bool, sqlite: bool) -> None:
    """A storage file's directory exists; with ``must_exist`` the file too; with ``sqlite`` an
    existing, non-empty file is a SQLite database."""

    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise TransferSearchError(
            f"storage {url!r} names the directory {target!r}; give a file inside it, e.g. "
            f"{os.path.join(target, 'proxy.db')!r}."
        )
    if not os.path.exists(target):
        if must_exist:
            raise TransferSearchError(
                f"storage {url!r}: the file {target!r} does not exist. Check the path (a study "
                "is read from the file its workers wrote)."
            )
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            raise TransferSearchError(
                f"storage {url!r}: the directory {folder!r} does not exist. Create it or fix "
                "the path."
            )
        return
    if sqlite and os.path.getsize(target) > 0:
        # Ask SQLite, not open(): closing any descriptor of a database file drops every POSIX
        # lock this process holds on it, and SQLite connections here may hold some.
        import sqlite3

        try:
            with contextlib.closing(sqlite3.connect(f"file:{target}?mode=ro", uri=True)) as db:
                db.execute("PRAGMA schema_version").fetchone()
        except sqlite3.DatabaseError as exc:
            if "not a database" not in str(exc):
                return  # locked or busy: a real database that SQLAlchemy will wait for
            raise TransferSearchError(
                f"storage {url!r}: {target!r} is not a SQLite database. Give the path of the "
                "study's .db file, or a new file name."
            ) from None


def _check_database_url(url: str, *, must_exist: bool) -> tuple[str, bool]:
    """Validate a SQLAlchemy database URL; returns it with the password hidden and whether it
    is a SQLite file (not in-memory)."""
    import sqlalchemy
    from sqlalchemy.engine import make_url

    hint = (
        "Use e.g. 'sqlite:///proxy.db', 'postgresql://user@host:5432/db' or "
        "'journal:///path/to/proxy.log'."
    )
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise TransferSearchError(
            f"storage {redact_url(url)!r} is not a database URL. {hint}"
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    try:
        parsed.get_dialect()
    except sqlalchemy.exc.NoSuchModuleError:
        raise TransferSearchError(
            f"storage {shown!r} names an unknown database {parsed.drivername!r}. {hint}"
        ) from None
    if parsed.get_backend_name() != "sqlite":
        return shown, False
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return shown, False
    _check_file(shown, database, must_exist=must_exist, sqlite=True)
    return shown, True


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()

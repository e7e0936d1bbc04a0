"""Who runs a trial: one process per claimed trial, and whether that process still lives.

Shared by :class:`~transfersearch.integrations.optuna.TransferSampler` (which makes a plain
``sqlite:///`` URL claim its trials once) and the launcher's storage
(:func:`~transfersearch.integrations.launcher.make_storage`), which records each trial's owner
process so that a dead worker is known from its pid, never guessed from a late heartbeat. Design
notes: ``docs/integrations/launcher.md``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CLAIM_ATTR",
    "OWNER_ATTR",
    "WORKER_KEY",
    "claim_once_on_sqlite",
    "is_registered_worker",
    "owner_alive",
    "owner_record",
]

logger = logging.getLogger("transfersearch.integrations.launcher.claims")

#: System attribute of a failed trial naming the process that retries it (``host:pid``).
CLAIM_ATTR = "transfersearch:retried-by"
#: System attribute of a RUNNING trial naming the process that runs it (:func:`owner_record`).
OWNER_ATTR = "transfersearch:owner"
#: Prefix of the study system attributes that register the launcher's workers on a study
#: (``<prefix><host>:<pid>`` -> the owner record). Only a registered worker's trial is spared
#: the heartbeat rule while its process lives: any other process's (a notebook's ``study.ask()``)
#: is failed once it has gone the grace period without a heartbeat.
WORKER_KEY = "transfersearch:worker:"

#: The SQLite trigger that makes Optuna's own claim of a WAITING trial atomic (see
#: :func:`claim_once_on_sqlite`). Optuna reads the trial ``FOR UPDATE`` before it writes RUNNING;
#: SQLite ignores ``FOR UPDATE``, so two processes could both read WAITING and both run the
#: trial, and two reapers could both fail one stale trial. The trigger refuses, inside the
#: write, a RUNNING over anything but WAITING and any change of a finished trial's state; Optuna
#: takes the refusal (an IntegrityError) as "another process got it" and moves on. It names
#: Optuna's table ``trials`` and its ``state`` column: Optuna's schema, not a Python private.
_TRIGGER = "transfersearch_claim_once"
_TRIGGER_SQL = f"""
CREATE TRIGGER IF NOT EXISTS {_TRIGGER} BEFORE UPDATE OF state ON trials
WHEN (NEW.state = 'RUNNING' AND OLD.state <> 'WAITING')
  OR (OLD.state IN ('COMPLETE', 'PRUNED', 'FAIL') AND NEW.state <> OLD.state)
BEGIN
  SELECT RAISE(ABORT, 'transfersearch: this trial was claimed or finished by another process');
END
"""


def claim_once_on_sqlite(engine: Any) -> bool:
    """Install the claim trigger in a SQLite file database (once; it stays in the file, so every
    process that opens the file afterwards claims exactly once, whatever opened it).

    Returns:
        True where the database now has it; False for another database (PostgreSQL and MySQL
        honour ``FOR UPDATE``: Optuna's claim is atomic there already), an in-memory one (one
        process), or a file that could not be written (logged).
    """
    import sqlalchemy

    database = engine.url.database or ""
    if engine.dialect.name != "sqlite" or database in ("", ":memory:") or "mode=memory" in database:
        return False
    query = sqlalchemy.text("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = :n")
    try:
        with engine.connect() as connection:
            if connection.execute(query, {"n": _TRIGGER}).first() is not None:
                return True
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text(_TRIGGER_SQL))
    except sqlalchemy.exc.SQLAlchemyError as exc:
        logger.warning(
            "could not install the claim trigger in %s (%s); until a process that can write "
            "the file installs it, two processes may both run one enqueued trial",
            database,
            str(exc).splitlines()[0][:160],
        )
        return False
    logger.info("installed the claim trigger in %s: each enqueued trial runs once", database)
    return True


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """The process's state letter and start time in clock ticks since boot (Linux ``/proc``),
    or None: with the pid the start time names one process, not a later one reusing the pid."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])  # fields 3 and 22 of proc(5)
    return None


def owner_record() -> dict[str, Any]:
    """What :data:`OWNER_ATTR` holds: this process (host, pid, start time). A retry or a
    re-enqueued trial is made without its failed trial's owner."""
    pid = os.getpid()
    stat = _proc_stat(pid)
    start = None if stat is None else stat[1]
    return {"host": socket.gethostname(), "pid": pid, "start": start}


def is_registered_worker(owner: Any, study_attrs: Mapping[str, Any]) -> bool:
    """Whether an :data:`OWNER_ATTR` record names a launcher worker registered on the study
    whose system attributes are ``study_attrs`` (:data:`WORKER_KEY`)."""
    if not isinstance(owner, Mapping):
        return False
    return f"{WORKER_KEY}{owner.get('host')}:{owner.get('pid')}" in study_attrs


def owner_alive(owner: Any) -> bool | None:
    """Whether the process in an :data:`OWNER_ATTR` record still runs: True or False for a
    process of this host (its pid and start time), None where that cannot be known (another
    host, or no record)."""
    if not isinstance(owner, Mapping):
        return None
    if owner.get("host") != socket.gethostname():
        return None
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc: the pid exists
    state, start = stat
    # A zombie ("Z", killed but not yet waited for) is dead; a new process with the old pid too.
    return state not in ("Z", "X") and owner.get("start") in (None, start)

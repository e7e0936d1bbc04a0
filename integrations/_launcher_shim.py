"""Every private Optuna name the launcher's storage touches, in one module (one comment per use).

The sampler's own few are in ``_optuna_shim.py``. What each group here is for: the trials of
dead workers (:class:`RetryOnce`, :meth:`ClaimingRDBStorage._get_stale_trial_ids`), the storage's
trial claims, owners and schema creation (:class:`ClaimingRDBStorage`, :func:`study_lock`,
:func:`open_rdb_storage`), and one count per state (:func:`count_states`). Why each is needed
rather than Optuna's public API: ``docs/integrations/launcher.md``.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import json
import logging
import os
import random
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import optuna
import sqlalchemy
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from transfersearch.integrations._optuna_shim import rdb_backend, storage_of, trial_id
from transfersearch.integrations._trial_claims import (
    CLAIM_ATTR,
    OWNER_ATTR,
    is_registered_worker,
    owner_alive,
    owner_record,
)

__all__ = [
    "BudgetSpent",
    "ClaimingRDBStorage",
    "RetryOnce",
    "count_states",
    "open_rdb_storage",
    "study_lock",
]

logger = logging.getLogger("transfersearch.integrations.launcher.stale")


def _models() -> Any:
    # optuna.storages._rdb.models (private): the RDB schema's tables, no public twin. Used for
    # the three writes Optuna's public methods cannot make atomic (a claim with its owner, a
    # retry claimed once) and two reads they make per trial (counts, owners with heartbeats).
    from optuna.storages._rdb import models

    return models


# ----------------------------------------------------------------------------------------------
# Dead workers
# ----------------------------------------------------------------------------------------------
def claim_retry(backend: RDBStorage, key: int) -> bool:
    """True in exactly one process: the first to store :data:`CLAIM_ATTR` on the trial."""
    owner = json.dumps(f"{socket.gethostname()}:{os.getpid()}")
    # trial_system_attributes has UNIQUE(trial_id, key), so a plain INSERT (not Optuna's
    # read-then-write upsert, set_trial_system_attr) is an atomic claim on every database.
    table = _models().TrialSystemAttributeModel.__table__
    try:
        with backend.engine.begin() as connection:
            connection.execute(
                sqlalchemy.insert(table).values(trial_id=key, key=CLAIM_ATTR, value_json=owner)
            )
    except sqlalchemy.exc.IntegrityError:
        return False
    return True


class RetryOnce:
    """A heartbeat-stale trial callback that retries a trial only in the process that claims it,
    and hands the retry its failed trial without the owner (the retry gets its own).

    Optuna calls the storage's callback in every process that failed the trial; on SQLite the
    claim trigger already lets one process fail it, and this makes one retry per stale trial on
    any database, also when a callback is called by hand.
    """

    def __init__(self, retry: Callable[[optuna.Study, FrozenTrial], None]) -> None:
        self._retry = retry

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        backend = rdb_backend(storage_of(study))
        if backend is not None and not claim_retry(backend, trial_id(trial)):
            logger.info("trial %d went stale; another worker retries it", trial.number)
            return
        logger.info("trial %d went stale (its worker died); retrying it", trial.number)
        inherited = copy.copy(trial)  # a shallow copy: never change the caller's trial
        inherited.system_attrs = {
            k: v for k, v in trial.system_attrs.items() if k not in (OWNER_ATTR, CLAIM_ATTR)
        }
        self._retry(study, inherited)


# ----------------------------------------------------------------------------------------------
# Claims: a WAITING trial run once, a fresh trial only within the budget, the schema made once
# ----------------------------------------------------------------------------------------------
class BudgetSpent(RuntimeError):
    """Raised from ``study.ask()`` when a worker's trial gate refuses a new trial: the study
    already holds (or is running) as many trials as it should."""


#: How often opening a storage is retried when another process is creating the same schema at
#: that moment (``UNIQUE constraint failed: alembic_version``, ``DuplicateTable``): a retry
#: finds the tables made, so one or two suffice; five covers a crowd of starting processes.
SCHEMA_ATTEMPTS = 5
#: Words of the database errors a concurrent schema creation raises (SQLite, PostgreSQL, MySQL).
_SCHEMA_RACE = ("already exists", "unique constraint", "duplicate", "alembic_version")


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # the schema stores naive UTC


class ClaimingRDBStorage(RDBStorage):
    """Optuna's ``RDBStorage`` whose trials name the process that runs them.

    * A trial this process creates or claims records its owner (:data:`OWNER_ATTR`: host, pid,
      start time) in the same transaction; a launcher worker (:attr:`beats_from_creation`)
      heartbeats it every ``heartbeat_interval`` from then on (Optuna's own heartbeat starts
      only with the objective). A RUNNING trial is stale (:meth:`_get_stale_trial_ids`) when its
      owner is a process of this host that is gone, however fresh its heartbeat, and never while
      that process lives *and is a worker registered on the study*, however late its heartbeat
      on a loaded machine. Any other trial, whoever created it (another host's, or a notebook's
      ``study.ask()`` never told), is judged by the heartbeat: stale once ``grace_period``
      seconds pass without one (counted from its start when it never sent one).
    * A WAITING trial (enqueued, or a dead worker's retry) becomes RUNNING by one conditional
      ``UPDATE ... WHERE state = 'WAITING'`` with its owner: exactly one process gets it.
    * A fresh trial (``study.ask()`` with nothing waiting) is created through :attr:`trial_gate`
      when one is set: a context manager that holds a study-wide lock (:func:`study_lock`) and
      yields whether the study still wants a trial; if not, :class:`BudgetSpent` is raised and no
      trial is created. Counting and creating under one lock is what makes a worker pool stop at
      exactly ``n_trials``.
    """

    trial_gate: Callable[[], contextlib.AbstractContextManager[bool]] | None = None
    #: Whether this process heartbeats its trials from their creation: a launcher worker's
    #: storage (set by ``run_worker``), not a notebook's, whose ``study.ask()`` would otherwise
    #: look alive for as long as the notebook stays open.
    beats_from_creation: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._owned: set[int] = set()
        self._beating: threading.Event | None = None

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        state["_owned"], state["_beating"] = set(), None  # a copy owns no trial
        return state

    # Owners and heartbeats --------------------------------------------------------------------
    def _own(self, key: int) -> None:
        """Heartbeat ``key`` every interval until this process finishes it (no beat at once:
        that would cost a commit per trial; another host judges a trial without one by its
        start, after the grace period of two intervals)."""
        self._owned.add(key)
        interval = self.heartbeat_interval
        if interval is None or not self.beats_from_creation:
            return
        if self._beating is None:
            self._beating = threading.Event()
            thread = threading.Thread(
                target=self._beat_loop,
                args=(interval, self._beating),
                name="transfersearch-owner-heartbeat",
                daemon=True,
            )
            thread.start()

    def _beat(self, key: int) -> None:
        try:
            self.record_heartbeat(key)
        except Exception as exc:  # a late beat is judged by the owner's pid; go on
            logger.info("heartbeat of trial id %d not recorded (%s)", key, exc)

    def _beat_loop(self, interval: int, stop: threading.Event) -> None:
        while not stop.wait(interval):
            for key in list(self._owned):
                self._beat(key)

    def _owner_template(self) -> FrozenTrial:
        """A fresh RUNNING trial carrying this process as its owner."""
        return FrozenTrial(
            number=0, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(),
            datetime_complete=None, params={}, distributions={}, user_attrs={},
            system_attrs={OWNER_ATTR: owner_record()}, intermediate_values={}, trial_id=0,
        )  # fmt: skip

    def set_trial_attrs(
        self, trial_id: int, user: Mapping[str, Any], system: Mapping[str, Any]
    ) -> None:
        """Several user and system attributes of a trial in one transaction (Optuna commits each
        attribute on its own: on a busy SQLite file every commit waits for the write lock)."""
        from optuna.storages._rdb.storage import _create_scoped_session  # private: its commit

        models = _models()  # the attribute tables Optuna's upsert below takes
        with _create_scoped_session(self.scoped_session, True) as session:
            for model, attrs in (
                (models.TrialUserAttributeModel, user),
                (models.TrialSystemAttributeModel, system),
            ):
                for key, value in attrs.items():
                    # RDBStorage._set_trial_attr_without_commit: Optuna's upsert of one attribute
                    self._set_trial_attr_without_commit(session, model, trial_id, key, value)

    # Overrides --------------------------------------------------------------------------------
    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        if state == TrialState.RUNNING and values is None:
            claimed = self._claim(trial_id)
            if claimed:
                self._own(trial_id)
            return claimed
        try:
            return super().set_trial_state_values(trial_id, state, values)
        finally:
            if state.is_finished():
                self._owned.discard(trial_id)

    def _claim(self, key: int) -> bool:
        models = _models()
        trials: Any = models.TrialModel.__table__
        attrs: Any = models.TrialSystemAttributeModel.__table__
        owner = json.dumps(owner_record())
        # One transaction: no moment exists in which a claimed trial names no owner.
        with self.engine.begin() as connection:
            claimed = connection.execute(
                sqlalchemy.update(trials)
                .where(trials.c.trial_id == key, trials.c.state == TrialState.WAITING)
                .values(state=TrialState.RUNNING, datetime_start=_utcnow())
            ).rowcount
            if claimed == 1:
                mine = (attrs.c.trial_id == key) & (attrs.c.key == OWNER_ATTR)
                connection.execute(sqlalchemy.delete(attrs).where(mine))
                connection.execute(
                    sqlalchemy.insert(attrs).values(trial_id=key, key=OWNER_ATTR, value_json=owner)
                )
        if claimed == 1:
            return True
        # Lost: someone else runs it (False), or it is finished (Optuna raises, as upstream).
        self.check_trial_is_updatable(key, self.get_trial(key).state)
        return False

    def _create_new_trial(  # overrides the private hook _CachedStorage.create_new_trial calls
        self, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        if template_trial is not None:  # enqueue_trial / add_trial: not run by this process
            return super()._create_new_trial(study_id, template_trial)
        gate = self.trial_gate
        with gate() if gate is not None else contextlib.nullcontext(True) as wanted:
            if not wanted:
                raise BudgetSpent("the study holds its trials; no new trial was created")
            # Optuna's own template path: the owner is written in the creating transaction.
            created = super()._create_new_trial(study_id, self._owner_template())
        self._own(created._trial_id)
        return created

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        # Overrides the private hook optuna.storages.fail_stale_trials calls (public function).
        interval = self.heartbeat_interval or 1
        grace = timedelta(seconds=self.grace_period or 2 * interval)
        # The schema's tables: Optuna has no public read of heartbeats, and reading every
        # running trial's system attributes one by one would cost a query per trial.
        models = _models()
        trials: Any = models.TrialModel.__table__
        beats: Any = models.TrialHeartbeatModel.__table__
        attrs: Any = models.TrialSystemAttributeModel.__table__
        query = (
            sqlalchemy.select(trials.c.trial_id, trials.c.datetime_start, beats.c.heartbeat)
            .select_from(trials.outerjoin(beats, beats.c.trial_id == trials.c.trial_id))
            .where(trials.c.study_id == study_id, trials.c.state == TrialState.RUNNING)
        )
        with self.engine.connect() as connection:
            rows = connection.execute(query).all()
        if not rows:
            return []
        workers = self.get_study_system_attrs(study_id)
        with self.engine.connect() as connection:
            now = connection.execute(sqlalchemy.select(sqlalchemy.func.now())).scalar()
            owners: dict[int, str] = dict(
                connection.execute(
                    sqlalchemy.select(attrs.c.trial_id, attrs.c.value_json).where(
                        attrs.c.key == OWNER_ATTR,
                        attrs.c.trial_id.in_([row.trial_id for row in rows]),
                    )
                ).all()
            )
        now = now.replace(tzinfo=None) if isinstance(now, datetime) else _utcnow()
        stale = []
        for key, started, beat in rows:
            owner = json.loads(owners[key]) if key in owners else None
            worker = is_registered_worker(owner, workers)
            if _stale(owner, started, beat, now, grace, worker=worker):
                stale.append(key)
        return stale


def _stale(
    owner: Mapping[str, Any] | None,
    started: datetime | None,
    beat: datetime | None,
    now: datetime,
    grace: timedelta,
    *,
    worker: bool,
) -> bool:
    """Whether a RUNNING trial's process is gone, or silent past the grace period (see
    :class:`ClaimingRDBStorage`)."""
    alive = owner_alive(owner)
    if alive is False:
        logger.warning(
            "trial's owner pid %s on this host is gone; failing its trial",
            owner and owner["pid"],
        )
        return True
    if alive and worker:
        return False  # a live worker's trial: never failed, however late its beat under load
    # Another host's trial, or a live process of this host that is not a worker (a notebook's
    # study.ask()): Optuna's heartbeat rule, counted from the start when it never beat.
    if beat is not None:
        stale = now - beat > grace
    else:
        stale = owner is not None and started is not None and _utcnow() - started > grace
    if stale and alive:
        logger.warning(
            "trial's owner pid %s on this host lives but is no worker of this study and sent no "
            "heartbeat for %d s (the grace period): failing its trial",
            owner and owner["pid"],
            grace.total_seconds(),
        )
    return stale


def open_rdb_storage(url: str, **kwargs: Any) -> ClaimingRDBStorage:
    """A :class:`ClaimingRDBStorage`, retried when a concurrent process is creating the same
    schema (two launchers started at once on a new database)."""
    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            with warnings.catch_warnings():
                # make_storage asks for the heartbeat on the user's behalf: no warning about it.
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return ClaimingRDBStorage(url, **kwargs)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            text = str(exc).lower()
            if attempt == SCHEMA_ATTEMPTS or not any(word in text for word in _SCHEMA_RACE):
                raise
            delay = random.uniform(0.05, 0.25) * attempt
            logger.info(
                "another process is creating the storage's tables (%s); retrying in %.2f s",
                text.splitlines()[0][:120],
                delay,
            )
            time.sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises


def count_states(storage: RDBStorage, key: int) -> dict[TrialState, int]:
    """The number of trials of study ``key`` in each state: one aggregate query (reading the
    trials themselves costs a query per table and a FrozenTrial per trial)."""
    # The schema's trials table: Optuna's public get_n_trials counts one state per call and
    # get_all_trials builds every trial; the gate counts before each trial it creates.
    table: Any = _models().TrialModel.__table__
    query = (
        sqlalchemy.select(table.c.state, sqlalchemy.func.count())
        .where(table.c.study_id == key)
        .group_by(table.c.state)
    )
    with storage.engine.connect() as connection:
        return {
            TrialState[str(getattr(s, "name", s))]: int(n) for s, n in connection.execute(query)
        }


@contextlib.contextmanager
def study_lock(storage: RDBStorage, key: int, *, shared: bool = False) -> Iterator[bool]:
    """A lock shared by every process using ``storage``'s study ``key``: a PostgreSQL advisory
    lock, MySQL's ``GET_LOCK``, or for a SQLite file an ``flock`` on ``<file>.transfersearch.lock``
    beside it (SQLite is one machine's storage). The database's public means, no Optuna private.

    With ``shared``, a shared lock (many holders, none while an exclusive one is held) where the
    database has one (PostgreSQL, SQLite); yields whether it is shared (False: MySQL, whose
    ``GET_LOCK`` has no shared mode, yields without locking; take the exclusive lock then)."""
    engine = storage.engine
    dialect = engine.dialect.name
    name = f"transfersearch-study-{key}"
    if dialect == "postgresql":
        number = int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big", signed=True)
        mode = "_shared" if shared else ""
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text(f"SELECT pg_advisory_lock{mode}(:k)"), {"k": number})
            try:
                yield shared
            finally:
                connection.execute(
                    sqlalchemy.text(f"SELECT pg_advisory_unlock{mode}(:k)"), {"k": number}
                )
                connection.commit()
        return
    if dialect in ("mysql", "mariadb"):
        if shared:
            yield False
            return
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT GET_LOCK(:n, 600)"), {"n": name})
            try:
                yield False
            finally:
                connection.execute(sqlalchemy.text("SELECT RELEASE_LOCK(:n)"), {"n": name})
        return
    database = engine.url.database or ""
    if dialect != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        yield shared  # one process (in-memory) or a database this knows no lock for
        return
    # Not the database file itself: closing any descriptor of it drops SQLite's POSIX locks.
    path = f"{os.path.abspath(database)}.transfersearch.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield shared
    finally:
        os.close(fd)

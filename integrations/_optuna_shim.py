"""Every private Optuna name transfersearch touches, in one module (one comment per use).

A new Optuna version that renames one of these breaks here and nowhere else. What each group is
for: the storage's keys of a study and a trial (:func:`storage_of`, :func:`study_id`,
:func:`trial_id`), a live trial's system attributes (:func:`system_attrs`,
:func:`set_system_attr`), the filtered study a base sampler sees (:class:`StudyView`), dead
workers' trials (:func:`fail_silent_trials`, :class:`RetryOnce`, :func:`heartbeat_enabled`), the
storage's trial claims and schema creation (:class:`ClaimingRDBStorage`, :func:`study_lock`,
:func:`open_rdb_storage`), an interrupted trial (:func:`interrupted_by_user`), and seeding a copied
sampler (:func:`seed_sampler`).
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
import sys
import time
import warnings
from collections.abc import Callable, Container, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import optuna
import sqlalchemy
from optuna.storages import RDBStorage
from optuna.trial import TrialState

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.study import Study
    from optuna.trial import FrozenTrial, Trial

__all__ = [
    "CLAIM_ATTR",
    "BudgetSpent",
    "ClaimingRDBStorage",
    "RetryOnce",
    "StudyView",
    "count_states",
    "fail_silent_trials",
    "heartbeat_enabled",
    "interrupted_by_user",
    "open_rdb_storage",
    "rdb_backend",
    "seed_sampler",
    "set_system_attr",
    "set_trial_attrs",
    "storage_of",
    "study_id",
    "study_lock",
    "system_attrs",
    "trial_id",
    "view",
]

logger = logging.getLogger("transfersearch.integrations.optuna.stale")

#: System attribute of a failed trial naming the process that retries it (``host:pid``).
CLAIM_ATTR = "transfersearch:retried-by"


# ----------------------------------------------------------------------------------------------
# Keys and attributes
# ----------------------------------------------------------------------------------------------
def storage_of(study: optuna.Study) -> BaseStorage:
    """The storage a study runs on."""
    return study._storage  # Study._storage: no public accessor; samplers write attrs through it


def study_id(study: optuna.Study) -> int:
    """The storage's key of a study."""
    return study._study_id  # Study._study_id: the key every storage method takes


def trial_id(trial: Trial | FrozenTrial) -> int:
    """The storage's key of a trial (unique across studies, unlike ``trial.number``)."""
    return trial._trial_id  # Trial/FrozenTrial._trial_id: the key storage methods take


def system_attrs(trial: Trial | FrozenTrial) -> Mapping[str, Any]:
    """A trial's system attributes; a live Trial reads them from its storage (fresh values)."""
    from optuna.trial import FrozenTrial

    if isinstance(trial, FrozenTrial):
        return trial.system_attrs
    return trial.storage.get_trial_system_attrs(trial_id(trial))


def set_system_attr(study: optuna.Study, trial: Trial | FrozenTrial, key: str, value: Any) -> None:
    """Write a system attribute (Optuna's public ``set_system_attr`` on trials was removed)."""
    storage_of(study).set_trial_system_attr(trial_id(trial), key, value)


def set_trial_attrs(
    study: optuna.Study,
    trial: Trial | FrozenTrial,
    user: Mapping[str, Any] | None = None,
    system: Mapping[str, Any] | None = None,
) -> None:
    """Write user and system attributes of a trial: one transaction on a
    :class:`ClaimingRDBStorage` (what :func:`make_storage` opens), one call per key elsewhere.
    A live ``Trial``'s own copy of its attributes is not updated."""
    user, system = user or {}, system or {}
    if not user and not system:
        return
    storage = storage_of(study)
    key = trial_id(trial)
    backend = rdb_backend(storage)
    if isinstance(backend, ClaimingRDBStorage):
        backend.set_trial_attrs(key, user, system)
        return
    for name, value in user.items():
        storage.set_trial_user_attr(key, name, value)
    for name, value in system.items():
        storage.set_trial_system_attr(key, name, value)


def heartbeat_enabled(study: optuna.Study) -> bool:
    """Whether the study's storage heartbeats its running trials."""
    from optuna.storages._heartbeat import is_heartbeat_enabled  # private module, no public twin

    return bool(is_heartbeat_enabled(storage_of(study)))


# ----------------------------------------------------------------------------------------------
# The study a base sampler or pruner sees
# ----------------------------------------------------------------------------------------------
class StudyView:
    """A study whose trial lists are filtered (and optionally rewritten) by ``select``; every
    other attribute is the study's own.

    Optuna's samplers read a study's trials through the private ``Study._get_trials(deepcopy,
    states, use_cache)`` (TPE, GP) as well as the public ``get_trials`` and ``trials``, so the view
    overrides all three, and forwards everything else with ``__getattr__``.

    Args:
        study: the study.
        select: trials of the study (every state) -> the trials the view shows; it must not
            mutate them (copy one before changing it).
    """

    def __init__(
        self, study: optuna.Study, select: Callable[[list[FrozenTrial]], list[FrozenTrial]]
    ) -> None:
        self._study = study
        self._select = select

    def _get_trials(  # mirrors the private Study._get_trials that Optuna's samplers call
        self,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
        use_cache: bool = False,
    ) -> list[FrozenTrial]:
        everything = self._study._get_trials(  # Study._get_trials: the samplers' cached read
            deepcopy=deepcopy, states=None, use_cache=use_cache
        )
        chosen = self._select(everything)
        return chosen if states is None else [t for t in chosen if t.state in states]

    def get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)


def view(study: Study, select: Callable[[list[FrozenTrial]], list[FrozenTrial]]) -> Study:
    """:class:`StudyView` typed as a Study for the samplers and pruners it is handed to."""
    return cast("Study", StudyView(study, select))


# ----------------------------------------------------------------------------------------------
# Dead workers
# ----------------------------------------------------------------------------------------------
def rdb_backend(storage: Any) -> RDBStorage | None:
    """The RDBStorage behind ``storage`` (None for journal and in-memory storages)."""
    # optuna.storages._CachedStorage (what a Study holds) keeps the RDBStorage in `_backend`.
    backend = getattr(storage, "_backend", storage)
    return backend if isinstance(backend, RDBStorage) else None


def claim_retry(backend: RDBStorage, key: int) -> bool:
    """True in exactly one process: the first to store :data:`CLAIM_ATTR` on the trial."""
    from optuna.storages._rdb import models  # private: the RDB schema (no public twin)

    owner = json.dumps(f"{socket.gethostname()}:{os.getpid()}")
    # Optuna's schema: trial_system_attributes has UNIQUE(trial_id, key), so a plain INSERT (not
    # Optuna's read-then-write upsert) is an atomic claim on SQLite, PostgreSQL and MySQL alike.
    table = models.TrialSystemAttributeModel.__table__
    try:
        with backend.engine.begin() as connection:
            connection.execute(
                sqlalchemy.insert(table).values(trial_id=key, key=CLAIM_ATTR, value_json=owner)
            )
    except sqlalchemy.exc.IntegrityError:
        return False
    return True


class RetryOnce:
    """A heartbeat-stale trial callback that retries a trial only in the process that claims it.

    Optuna calls the storage's callback in every process that saw the trial go stale; wrapping
    ``RetryHeartbeatStaleTrialCallback`` in this makes one retry per stale trial.
    """

    def __init__(self, retry: Callable[[optuna.Study, FrozenTrial], None]) -> None:
        self._retry = retry

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        backend = rdb_backend(storage_of(study))
        if backend is not None and not claim_retry(backend, trial_id(trial)):
            logger.info("trial %d went stale; another worker retries it", trial.number)
            return
        logger.info("trial %d went stale (its worker died); retrying it", trial.number)
        self._retry(study, trial)


def fail_silent_trials(study: optuna.Study, grace_period: float) -> list[int]:
    """Fail the RUNNING trials that never sent a heartbeat and started over ``grace_period`` s
    ago, and hand each to the storage's stale-trial callback (the retry). Returns their numbers.

    ``datetime_start`` is written by the creating process's clock, so across machines the grace
    period must exceed the clocks' skew.
    """
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.storages._rdb import models  # private: the RDB schema (no public twin)
    from sqlalchemy.orm import Session

    storage = storage_of(study)
    backend = rdb_backend(storage)
    if backend is None or backend.get_heartbeat_interval() is None:
        return []
    # Optuna's schema: a trial's heartbeats are rows of trial_heartbeats (TrialModel.heartbeats).
    trial_model: Any = models.TrialModel
    heartbeat_model: Any = models.TrialHeartbeatModel
    with Session(backend.engine) as session:
        silent = (
            session.query(trial_model)
            .outerjoin(heartbeat_model, heartbeat_model.trial_id == trial_model.trial_id)
            .filter(trial_model.study_id == study_id(study))
            .filter(trial_model.state == TrialState.RUNNING)
            .filter(heartbeat_model.trial_id.is_(None))
            .all()
        )
        # TrialModel.datetime_start: naive local time (Optuna 5 stores UTC and converts).
        rows = [(trial.trial_id, trial.datetime_start) for trial in silent]
    cutoff = datetime.now() - timedelta(seconds=grace_period)
    failed = []
    for key, started in rows:
        if started is None or started > cutoff:
            continue
        try:
            if not storage.set_trial_state_values(key, state=TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:
            continue  # another process finished or failed it first
        trial = copy.deepcopy(storage.get_trial(key))
        logger.warning(
            "trial %d has been RUNNING since %s without a heartbeat (its worker died before the "
            "first one); failed it",
            trial.number,
            started,
        )
        failed.append(trial.number)
        callback = backend.get_heartbeat_stale_trial_callback()
        if callback is not None:
            callback(study, trial)
    return failed


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


class ClaimingRDBStorage(RDBStorage):
    """Optuna's ``RDBStorage`` with two claims made atomic, on SQLite as on PostgreSQL.

    * A WAITING trial (enqueued, or a dead worker's retry) becomes RUNNING by one conditional
      ``UPDATE ... WHERE state = 'WAITING'``: exactly one process gets it. Optuna's own claim reads
      the row ``FOR UPDATE``, which SQLite ignores, so two processes could both run it.
    * A fresh trial (``study.ask()`` with nothing waiting) is created through :attr:`trial_gate`
      when one is set: a context manager that holds a study-wide lock (:func:`study_lock`) and
      yields whether the study still wants a trial; if not, :class:`BudgetSpent` is raised and no
      trial is created. Counting and creating under one lock is what makes a worker pool stop at
      exactly ``n_trials``.
    """

    trial_gate: Callable[[], contextlib.AbstractContextManager[bool]] | None = None

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        if state != TrialState.RUNNING or values is not None:
            return super().set_trial_state_values(trial_id, state, values)
        from optuna.storages._rdb import models  # private: the RDB schema (no public twin)

        table: Any = models.TrialModel.__table__
        started = datetime.now(UTC).replace(tzinfo=None)  # the schema stores naive UTC
        with self.engine.begin() as connection:
            claimed = connection.execute(
                sqlalchemy.update(table)
                .where(table.c.trial_id == trial_id, table.c.state == TrialState.WAITING)
                .values(state=TrialState.RUNNING, datetime_start=started)
            ).rowcount
        if claimed == 1:
            return True
        # Lost: someone else runs it (False), or it is finished (Optuna raises, as upstream).
        self.check_trial_is_updatable(trial_id, self.get_trial(trial_id).state)
        return False

    def set_trial_attrs(
        self, trial_id: int, user: Mapping[str, Any], system: Mapping[str, Any]
    ) -> None:
        """Several user and system attributes of a trial in one transaction (Optuna commits each
        attribute on its own: on a busy SQLite file every commit waits for the write lock)."""
        from optuna.storages._rdb import models  # private: the RDB schema (no public twin)
        from optuna.storages._rdb.storage import _create_scoped_session  # private: its commit

        with _create_scoped_session(self.scoped_session, True) as session:
            for model, attrs in (
                (models.TrialUserAttributeModel, user),
                (models.TrialSystemAttributeModel, system),
            ):
                for key, value in attrs.items():
                    # RDBStorage._set_trial_attr_without_commit: Optuna's upsert of one attribute
                    self._set_trial_attr_without_commit(session, model, trial_id, key, value)

    def _create_new_trial(  # overrides the private hook _CachedStorage.create_new_trial calls
        self, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        gate = self.trial_gate
        if template_trial is not None or gate is None:
            return super()._create_new_trial(study_id, template_trial)
        with gate() as wanted:
            if not wanted:
                raise BudgetSpent("the study holds its trials; no new trial was created")
            return super()._create_new_trial(study_id, template_trial)


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
    from optuna.storages._rdb import models  # private: the RDB schema (no public twin)

    table: Any = models.TrialModel.__table__
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
def study_lock(storage: RDBStorage, key: int) -> Iterator[None]:
    """A lock shared by every process using ``storage``'s study ``key``: a PostgreSQL advisory
    lock, MySQL's ``GET_LOCK``, or for a SQLite file an ``flock`` on ``<file>.transfersearch.lock``
    beside it (SQLite is one machine's storage)."""
    engine = storage.engine
    dialect = engine.dialect.name
    name = f"transfersearch-study-{key}"
    if dialect == "postgresql":
        number = int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big", signed=True)
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": number})
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": number})
                connection.commit()
        return
    if dialect in ("mysql", "mariadb"):
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT GET_LOCK(:n, 600)"), {"n": name})
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT RELEASE_LOCK(:n)"), {"n": name})
        return
    database = engine.url.database or ""
    if dialect != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        yield  # one process (in-memory) or a database this knows no lock for
        return
    # Not the database file itself: closing any descriptor of it drops SQLite's POSIX locks.
    path = f"{os.path.abspath(database)}.transfersearch.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------
# An interrupted trial
# ----------------------------------------------------------------------------------------------
def interrupted_by_user() -> bool:
    """True inside a sampler's ``after_trial`` when the trial failed because the objective was
    interrupted (``KeyboardInterrupt``: Ctrl-C, SIGINT), not because it raised or diverged.

    Optuna tells the sampler only the state (FAIL); the exception is the local ``func_err`` of
    ``optuna.study._optimize._run_trial``, the frame that called ``study.tell`` in this thread.
    """
    frame = sys._getframe(1)  # sys._getframe: the documented way to walk the caller's stack
    while frame is not None:
        code = frame.f_code
        # optuna.study._optimize._run_trial (private): its local func_err holds the exception.
        if code.co_name == "_run_trial" and frame.f_globals.get("__name__") == (
            "optuna.study._optimize"
        ):
            return isinstance(frame.f_locals.get("func_err"), KeyboardInterrupt)
        frame = frame.f_back  # type: ignore[assignment]
    return False


# ----------------------------------------------------------------------------------------------
# Seeding
# ----------------------------------------------------------------------------------------------
def seed_sampler(sampler: Any, seed: int) -> bool:
    """Seed an Optuna sampler's random generator (and its fallback sampler's); False where it
    has none this knows of (Random, TPE, GP and NSGA samplers keep one)."""
    seeded = False
    # Optuna's samplers keep a LazyRandomState in `_rng`, whose `.rng` is a np.random.RandomState.
    state = getattr(getattr(sampler, "_rng", None), "rng", None)
    if isinstance(state, np.random.RandomState):
        state.seed(seed)
        seeded = True
    # TPE keeps a RandomSampler for its startup trials in `_random_sampler`; others name it
    # `_independent_sampler`.
    for name in ("_random_sampler", "_independent_sampler"):
        inner = getattr(sampler, name, None)
        if inner is not None and inner is not sampler:
            seeded = seed_sampler(inner, seed) or seeded
    return seeded

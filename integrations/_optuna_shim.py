"""The Optuna internals transfersearch touches, in one place (one comment per use).

* Dead workers' trials (:func:`fail_silent_trials`, :class:`RetryOnce`): Optuna fails a RUNNING
  trial only once it has a stale heartbeat, so a worker killed between creating a trial and its
  first heartbeat leaves the trial RUNNING forever; and two workers that fail the same stale trial
  at once both retry it (SQLite reads outside the writing transaction). Here a trial with no
  heartbeat past the grace period is failed too, and a retry is made only by the process whose
  claim on the failed trial is stored first (a plain INSERT under Optuna's UNIQUE(trial_id, key)).
* Seeding a copied base sampler (:func:`seed_sampler`): Optuna's samplers offer only
  ``reseed_rng()`` (fresh OS entropy); a reproducible per-rung copy needs a seed.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import optuna
    from optuna.storages import RDBStorage
    from optuna.trial import FrozenTrial

__all__ = ["CLAIM_ATTR", "RetryOnce", "fail_silent_trials", "rdb_backend", "seed_sampler"]

logger = logging.getLogger("transfersearch.integrations.optuna.stale")

#: System attribute of a failed trial naming the process that retries it (``host:pid``).
CLAIM_ATTR = "transfersearch:retried-by"


def rdb_backend(storage: Any) -> RDBStorage | None:
    """The RDBStorage behind ``storage`` (None for journal and in-memory storages)."""
    from optuna.storages import RDBStorage

    # optuna.storages._CachedStorage (what a Study holds) keeps the RDBStorage in `_backend`.
    backend = getattr(storage, "_backend", storage)
    return backend if isinstance(backend, RDBStorage) else None


def claim_retry(backend: RDBStorage, trial_id: int) -> bool:
    """True in exactly one process: the first to store :data:`CLAIM_ATTR` on the trial."""
    import sqlalchemy
    from optuna.storages._rdb import models

    owner = json.dumps(f"{socket.gethostname()}:{os.getpid()}")
    # Optuna's schema: trial_system_attributes has UNIQUE(trial_id, key), so a plain INSERT (not
    # Optuna's read-then-write upsert) is an atomic claim on SQLite, PostgreSQL and MySQL alike.
    table = models.TrialSystemAttributeModel.__table__
    try:
        with backend.engine.begin() as connection:
            connection.execute(
                sqlalchemy.insert(table).values(trial_id=trial_id, key=CLAIM_ATTR, value_json=owner)
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
        backend = rdb_backend(study._storage)  # Study._storage: the storage the study runs on
        if backend is not None and not claim_retry(backend, trial._trial_id):
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
    from optuna.storages._rdb import models
    from optuna.trial import TrialState
    from sqlalchemy.orm import Session

    storage = study._storage  # Study._storage: the storage the study runs on
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
            .filter(trial_model.study_id == study._study_id)  # Study._study_id: its storage key
            .filter(trial_model.state == TrialState.RUNNING)
            .filter(heartbeat_model.trial_id.is_(None))
            .all()
        )
        # TrialModel.datetime_start: naive local time (Optuna 5 stores UTC and converts).
        rows = [(trial.trial_id, trial.datetime_start) for trial in silent]
    cutoff = datetime.now() - timedelta(seconds=grace_period)
    failed = []
    for trial_id, started in rows:
        if started is None or started > cutoff:
            continue
        try:
            if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:
            continue  # another process finished or failed it first
        trial = copy.deepcopy(storage.get_trial(trial_id))
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

"""Every private Optuna name the sampler and the reader touch, in one module (one comment per use).

A new Optuna version that renames one of these breaks here (or, for the launcher's storage, in
``_launcher_shim.py``) and nowhere else. What each group is for: the storage's keys of a study and
a trial (:func:`storage_of`, :func:`study_id`, :func:`trial_id`), a live trial's system
attributes (:func:`system_attrs`, :func:`set_system_attr`, :func:`set_trial_attrs`), the filtered
study a base sampler sees (:class:`StudyView`), the RDB storage behind a study
(:func:`rdb_backend`, :func:`heartbeat_enabled`), an interrupted trial
(:func:`interrupted_by_user`), and seeding a copied sampler (:func:`seed_sampler`).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Container, Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import optuna
from optuna.storages import InMemoryStorage, RDBStorage
from optuna.trial import Trial, TrialState

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = [
    "StudyView",
    "heartbeat_enabled",
    "interrupted_by_user",
    "rdb_backend",
    "seed_sampler",
    "set_system_attr",
    "set_trial_attrs",
    "set_user_attrs",
    "storage_of",
    "study_id",
    "system_attrs",
    "trial_id",
    "view",
]


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


#: Whether InMemoryStorage has the private steps :func:`_write_in_memory` repeats (else each key
#: is written by its public writer; the instance's ``_lock`` and a live trial's
#: ``_cached_frozen_trial`` are checked where they are used: an Optuna without them takes the
#: public path).
_IN_MEMORY_WRITES = all(
    callable(getattr(InMemoryStorage, n, None)) for n in ("_get_trial", "_set_trial")
)


def set_trial_attrs(
    study: optuna.Study,
    trial: Trial | FrozenTrial,
    user: Mapping[str, Any] | None = None,
    system: Mapping[str, Any] | None = None,
) -> None:
    """Write user and system attributes of a trial: one transaction on the launcher's storage
    (``make_storage``'s, which has ``set_trial_attrs``), one copy of the trial on the in-memory
    storage, one call per key elsewhere. A live ``Trial``'s own copy of its attributes is not
    updated."""
    user, system = user or {}, system or {}
    if not user and not system:
        return
    storage = storage_of(study)
    key = trial_id(trial)
    write_all = getattr(rdb_backend(storage), "set_trial_attrs", None)
    if write_all is not None:
        write_all(key, user, system)
        return
    if type(storage) is InMemoryStorage and _IN_MEMORY_WRITES and hasattr(storage, "_lock"):
        _write_in_memory(storage, key, user, system)
        return
    for name, value in user.items():
        storage.set_trial_user_attr(key, name, value)
    for name, value in system.items():
        storage.set_trial_system_attr(key, name, value)


def set_user_attrs(trial: Trial, attrs: Mapping[str, Any]) -> None:
    """``trial.set_user_attr(key, value)`` for each key in order, with one copy of the trial on
    the in-memory storage (the live trial's own copy updated as ``set_user_attr`` updates it)."""
    if not attrs:
        return
    storage = getattr(trial, "storage", None)
    private = _IN_MEMORY_WRITES and hasattr(storage, "_lock")
    private = private and hasattr(trial, "_cached_frozen_trial")
    if type(trial) is not Trial or type(storage) is not InMemoryStorage or not private:
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        return
    _write_in_memory(storage, trial_id(trial), attrs, {})
    # Trial._cached_frozen_trial: the live trial's copy, which Trial.set_user_attr also updates
    trial._cached_frozen_trial.user_attrs.update(attrs)


def _write_in_memory(
    storage: InMemoryStorage, key: int, user: Mapping[str, Any], system: Mapping[str, Any]
) -> None:
    """What ``set_trial_user_attr`` and ``set_trial_system_attr`` do for each key (check that
    the trial exists and is running, store a copy of it with a copy of its attributes and the
    new value), done once for all the keys: the same trial stored, the same errors."""
    # InMemoryStorage._lock, _get_trial (checks the id), _set_trial: its per-key writers' steps
    with storage._lock:
        stored = storage._get_trial(key)
        storage.check_trial_is_updatable(key, stored.state)
        stored = copy.copy(stored)
        if user:
            stored.user_attrs = {**stored.user_attrs, **user}
        if system:
            stored.system_attrs = {**stored.system_attrs, **system}
        storage._set_trial(key, stored)


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
# The RDB storage behind a study
# ----------------------------------------------------------------------------------------------
def rdb_backend(storage: Any) -> RDBStorage | None:
    """The RDBStorage behind ``storage`` (None for journal and in-memory storages)."""
    # optuna.storages._CachedStorage (what a Study holds) keeps the RDBStorage in `_backend`.
    backend = getattr(storage, "_backend", storage)
    return backend if isinstance(backend, RDBStorage) else None


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

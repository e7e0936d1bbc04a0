"""Optuna integration: a sampler that walks a proxy ladder and carries what it learns upward.

.. code-block:: python

    import optuna, transfersearch as ts
    from transfersearch.integrations.optuna import TransferSampler

    sampler = TransferSampler(space, ladder, base_sampler=optuna.samplers.TPESampler(seed=0))
    study = optuna.create_study(storage="sqlite:///proxy.db", study_name="proxy",
                                sampler=sampler, load_if_exists=True)

    def objective(trial):
        scale, hp = sampler.suggest(trial)   # the trial's rung and its concrete hyperparameters
        return train(scale, hp)

    study.optimize(objective, n_trials=120)
    result = ts.extrapolate(study, target=ts.Scale(width=4096, dataset_size=1e7, batch_size=256))

How a trial is planned (all decisions are made by :class:`~transfersearch.ladder.TransferPlanner`,
the same code the Ray Tune adapter uses):

* ``before_trial`` picks the rung with :meth:`TransferPlanner.assign_rung` from the trials in
  storage (running, complete, pruned and failed-by-the-objective count: a diverged trial cost
  compute; a dead worker's trial does not, it is retried), stores it in
  the trial's system attributes (``"transfersearch:rung"``) so it is decided once, and records
  ``rung``, ``scale.<name>`` and ``transfer`` (where the coordinates came from) as user attributes.
  With several workers two trials may see the same counts; a budget then overshoots by at most the
  number of workers.
* Law gating (``gate_on_law=True``, the default; matters only with several workers or
  ``n_jobs``): a rung from the third cheapest on is not started while its law is pending, i.e.
  while the trials that would give two other rungs ``min_trials`` finished trials are still
  RUNNING. An Optuna worker cannot wait, so the trial is detoured to the cheapest lower rung that
  has started fewer than ``detour_limit`` (default 2) times its budget, and records the rung it
  was kept from as the user attribute ``detoured_from``. The detours overshoot the lower rungs'
  budgets by the cheap trials that fit into the wait (the gate opens when the running trials
  finish; a rung never goes past ``detour_limit`` × its budget, after which the trial runs
  without the law), and the study needs that many more trials to fill the larger rungs. A
  RUNNING trial of a dead worker keeps the gate closed until the heartbeat fails it. Trials
  that run one at a time are never gated.
* Once two other rungs have optimum estimates, :meth:`TransferPlanner.propose` returns the law's
  predicted optimum (``law-point``) or a draw around it (``law-neighbourhood``);
  ``sample_relative`` returns those coordinates. Otherwise the base sampler decides and sees only
  the trials of its own rung (a filtered view of the study), so TPE or GP never mixes the loss
  landscapes of different scales. Each rung gets its own copy of the base sampler, because
  samplers keep per-study state (search-space cursors, fitted kernels) between calls.
* :meth:`TransferSampler.suggest` turns the coordinates into real Optuna parameters (with the
  space's distributions) and concrete per-group hyperparameters, recorded as ``hp.lr`` and
  ``hp.weight_decay`` (hidden group, PyTorch's coupled convention) and ``hp`` (every group,
  betas, eps, steps, ...) user attributes, so ``study.trials_dataframe()`` and optuna-dashboard
  show them.

Faults: a trial returning NaN is marked FAIL by Optuna and read back as a diverged observation
(``state="failed"``); it uses up its rung's budget, and its rung's base sampler sees it as a
COMPLETE trial with the worst value of the rung, so TPE or GP learns to stay off the cliff. A
trial failed by the storage heartbeat (its worker died) is left out of the fit, and
:func:`make_storage` retries it. Use :class:`RungPruner` to make a pruner compare trials within
one rung. :func:`launch_workers` (and ``python -m transfersearch.integrations.optuna
workers``) runs one worker process per GPU slot on one study.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import inspect
import logging
import math
import os
import threading
from collections.abc import Callable, Container, Mapping, Sequence
from numbers import Real
from typing import Any, cast

import numpy as np

try:
    import optuna
    from optuna.distributions import (
        BaseDistribution,
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )
    from optuna.pruners import BasePruner
    from optuna.samplers import BaseSampler
    from optuna.study import Study
    from optuna.trial import FrozenTrial, Trial, TrialState
except ImportError as exc:  # pragma: no cover - exercised only without optuna
    raise ImportError(
        "transfersearch.integrations.optuna needs Optuna: pip install 'transfersearch[optuna]' "
        f"({exc})."
    ) from exc

from transfersearch.errors import TransferSearchError
from transfersearch.integrations._optuna_shim import RetryOnce, seed_sampler
from transfersearch.integrations._optuna_space import record_space
from transfersearch.ladder import Proposal, TransferPlanner
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.space import Choice, Distribution, Float, Hyperparameters, Int, TransferSpace

__all__ = [
    "RUNG_ATTR",
    "RungPruner",
    "TransferSampler",
    "WorkerSlot",
    "detect_gpus",
    "hyperparameter_attrs",
    "launch_workers",
    "main",
    "make_storage",
    "observations_from_study",
    "plan_slots",
    "to_optuna_distribution",
]

#: System attribute holding a trial's rung (index into the cost-ordered ladder).
RUNG_ATTR = "transfersearch:rung"
#: System attribute set when the objective (not the heartbeat) finished a trial as FAIL.
_TOLD_ATTR = "transfersearch:told-fail"
_COUNTED_STATES = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)

logger = logging.getLogger("transfersearch.integrations.optuna")


# ----------------------------------------------------------------------------------------------
# Distributions
# ----------------------------------------------------------------------------------------------
def to_optuna_distribution(dist: Distribution) -> BaseDistribution:
    """The Optuna distribution of a transfersearch coordinate distribution.

    ``Float(low, high, log)`` → ``FloatDistribution(low, high, log=log)``;
    ``Int(low, high, log, step)`` → ``IntDistribution(low, high, log=log, step=step)``;
    ``Choice(choices)`` → ``CategoricalDistribution(choices)``.

    Raises:
        TransferSearchError: ``dist`` is not a Float, Int or Choice.
    """
    if isinstance(dist, Float):
        return FloatDistribution(float(dist.low), float(dist.high), log=dist.log)
    if isinstance(dist, Int):
        return IntDistribution(dist.low, dist.high, log=dist.log, step=dist.step)
    if isinstance(dist, Choice):
        return CategoricalDistribution(dist.choices)
    raise TransferSearchError(
        f"cannot convert {dist!r} to an Optuna distribution: use ts.Float, ts.Int or ts.Choice."
    )


def _suggest(trial: Trial, name: str, dist: Distribution) -> Any:
    """Suggest one coordinate through Optuna's public API (same distribution as the conversion)."""
    if isinstance(dist, Float):
        return trial.suggest_float(name, float(dist.low), float(dist.high), log=dist.log)
    if isinstance(dist, Int):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    return trial.suggest_categorical(name, dist.choices)


# ----------------------------------------------------------------------------------------------
# The per-rung view a base sampler or pruner sees
# ----------------------------------------------------------------------------------------------
def _system_attrs(trial: Trial | FrozenTrial) -> Mapping[str, Any]:
    """A trial's system attributes (a live Trial reads them from its storage)."""
    if isinstance(trial, FrozenTrial):
        return trial.system_attrs
    return trial.storage.get_trial_system_attrs(trial._trial_id)


def _rung_of(trial: FrozenTrial) -> int | None:
    rung = trial.system_attrs.get(RUNG_ATTR)
    return None if rung is None else int(rung)


class _RungView:
    """A study as seen from one rung: ``get_trials``/``_get_trials``/``trials`` keep only the
    trials of ``rung``; every other attribute is the study's own.

    With ``failed_as_worst`` (the base sampler's view), a trial the objective failed (it returned
    NaN, i.e. diverged, or raised) appears as COMPLETE with the worst value seen (see
    :func:`_worst_value`), so TPE or GP learns to avoid its region instead of never hearing of it.
    """

    def __init__(self, study: Study, rung: int, *, failed_as_worst: bool = False) -> None:
        self._study = study
        self._rung = rung
        self._failed_as_worst = failed_as_worst

    def _get_trials(
        self,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
        use_cache: bool = False,
    ) -> list[FrozenTrial]:
        if not self._failed_as_worst or (states is not None and TrialState.COMPLETE not in states):
            trials = self._study._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)
            return [t for t in trials if t.system_attrs.get(RUNG_ATTR) == self._rung]
        # Fetch the FAIL trials too: the told ones stand in as COMPLETE.
        everything = self._study._get_trials(deepcopy=deepcopy, states=None, use_cache=use_cache)
        worst = _worst_value(everything, self._rung, self._study.direction)
        result = []
        for trial in everything:
            if trial.system_attrs.get(RUNG_ATTR) != self._rung:
                continue
            if worst is not None and _told_fail(trial):
                trial = copy.copy(trial)  # never change the study's (cached) trial
                trial.state = TrialState.COMPLETE
                trial.values = [worst]
            if states is None or trial.state in states:
                result.append(trial)
        return result

    def get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)


def _rung_view(study: Study, rung: int, *, failed_as_worst: bool = False) -> Study:
    """``study`` restricted to the trials of ``rung`` (typed as a Study for its users)."""
    return cast(Study, _RungView(study, rung, failed_as_worst=failed_as_worst))


def _told_fail(trial: FrozenTrial) -> bool:
    """True for a FAIL the objective decided (NaN = diverged, or an exception), not a heartbeat."""
    return trial.state == TrialState.FAIL and bool(trial.system_attrs.get(_TOLD_ATTR, False))


def _worst_value(
    trials: Sequence[FrozenTrial], rung: int, direction: optuna.study.StudyDirection
) -> float | None:
    """The worst finite COMPLETE value on ``rung`` (the study's worst where the rung has none;
    None where no trial completed): what a failed trial is told to the base sampler as.

    The worst value, not a penalty beyond it: it ranks a diverged point last without inventing a
    scale, so TPE puts it among the bad trials and a GP sees a plateau, not a cliff of made-up
    height.
    """
    pick = max if direction == optuna.study.StudyDirection.MINIMIZE else min
    for own_rung_only in (True, False):
        values = [
            float(t.values[0])
            for t in trials
            if t.state == TrialState.COMPLETE
            and t.values
            and math.isfinite(t.values[0])
            and (not own_rung_only or t.system_attrs.get(RUNG_ATTR) == rung)
        ]
        if values:
            return pick(values)
    return None


# ----------------------------------------------------------------------------------------------
# Observations
# ----------------------------------------------------------------------------------------------
def _numeric_params(params: Mapping[str, Any]) -> dict[str, float]:
    return {
        name: float(value)
        for name, value in params.items()
        if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    }


def _observation(trial: FrozenTrial, scale: Mapping[str, float]) -> Observation:
    """One finished trial as an Observation (its raw value; NaN for FAIL or a missing value)."""
    if trial.state == TrialState.COMPLETE:
        value, state = float(trial.values[0]), "complete"
    elif trial.state == TrialState.PRUNED:
        last = trial.values[0] if trial.values else math.nan
        value, state = float(last), "pruned"
    else:
        value, state = math.nan, "failed"
    return Observation(scale=scale, params=_numeric_params(trial.params), value=value, state=state)


def _died(trial: FrozenTrial) -> bool:
    """True for a FAIL that the heartbeat (a dead worker), not the objective, decided."""
    return (
        trial.state == TrialState.FAIL
        and RUNG_ATTR in trial.system_attrs
        and not trial.system_attrs.get(_TOLD_ATTR, False)
    )


def observations_from_study(study: Study) -> list[Observation]:
    """The trials of a study run with :class:`TransferSampler`, as observations.

    Reads the ``scale.<name>`` user attributes the sampler wrote and the trial's numeric
    parameters (the coordinates). States: COMPLETE → ``"complete"`` (its value), FAIL →
    ``"failed"`` (value NaN: it crashed or returned NaN, i.e. diverged), PRUNED → ``"pruned"``
    (its last intermediate value); RUNNING and WAITING trials are skipped, and so are trials the
    storage heartbeat failed because their worker died (their retry stands for them). Values are
    as stored: for a ``maximize`` study pass ``direction="maximize"`` to the fit.

    Raises:
        TransferSearchError: the study is multi-objective, or it has finished trials but none
            carries ``scale.*`` user attributes.
    """
    if study._is_multi_objective():
        raise TransferSearchError(
            f"study {study.study_name!r} has {len(study.directions)} objectives; transfersearch "
            "fits one metric. Use a single-objective study."
        )
    trials = study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    )
    result: list[Observation] = []
    for trial in trials:
        scale = {k[6:]: v for k, v in trial.user_attrs.items() if k.startswith("scale.")}
        if not scale or _died(trial):
            continue
        result.append(_observation(trial, scale))
    if trials and not result:
        raise TransferSearchError(
            f"none of the {len(trials)} finished trials of study {study.study_name!r} records a "
            "scale (user attributes 'scale.<name>'). Run the study with TransferSampler, or set "
            "trial.set_user_attr('scale.width', ...) for each scale variable."
        )
    return result


# ----------------------------------------------------------------------------------------------
# Hyperparameters as user attributes
# ----------------------------------------------------------------------------------------------
def hyperparameter_attrs(hp: Hyperparameters) -> dict[str, Any]:
    """The user attributes recording ``hp``: three writes per trial, readable in a dashboard.

    ``hp.lr`` and ``hp.weight_decay``: the hidden group's learning rate and weight decay (PyTorch's
    coupled convention), as numbers so they sort and plot; ``hp``: the rest of
    :meth:`Hyperparameters.to_dict` (per-group lr / weight_decay / independent_wd, betas, eps,
    batch size, total steps, EMA momentum, notes, pass-through extras) as one JSON object. Scale
    and coordinates are left out: they are the trial's ``scale.*`` attributes and parameters.
    """
    data = hp.to_dict()
    rest = {
        k: v for k, v in data.items() if k not in ("scale", "coordinates", "lr", "weight_decay")
    }
    return {"hp.lr": data["lr"], "hp.weight_decay": data["weight_decay"], "hp": rest}


# ----------------------------------------------------------------------------------------------
# The sampler
# ----------------------------------------------------------------------------------------------
class TransferSampler(BaseSampler):
    """An Optuna sampler that assigns each trial a proxy rung and transfers the fitted optimum.

    It wraps ``base_sampler`` and forwards every hook to it (as Optuna's ``PartialFixedSampler``
    does), handing it a view of the study that holds only the trial's own rung. It intervenes in
    two places: ``before_trial`` assigns the rung (detouring to a cheaper rung while the law of
    the next one is pending, see the module docstring), and ``sample_relative`` returns the law's
    proposal when :meth:`TransferPlanner.propose` makes one.

    Args:
        space: the :class:`~transfersearch.TransferSpace` whose swept coordinates become Optuna
            parameters (same names, distributions from :func:`to_optuna_distribution`).
        ladder: the proxy scales; rungs are indexed in cost order (``sampler.ladder``).
        base_sampler: the sampler used where the law makes no proposal (default
            ``optuna.samplers.TPESampler()``).
        **planner_kwargs: passed to :class:`~transfersearch.ladder.TransferPlanner`
            (``trials_per_rung``, ``cost``, ``min_trials``, ``focus``, ``seed``, ``transfer``,
            ``gate_on_law``, ``detour_limit``, ...).
            Not ``direction``: the planner takes it from the study (``study.direction``) when
            each trial is planned, so a ``maximize`` study transfers the maximum.

    Raises:
        TransferSearchError: a bad space, ladder or planner option (``direction`` among them);
            ``base_sampler`` is not an Optuna sampler.
    """

    def __init__(
        self,
        space: TransferSpace,
        ladder: Sequence[Scale | Mapping[str, float]],
        base_sampler: BaseSampler | None = None,
        **planner_kwargs: Any,
    ) -> None:
        if base_sampler is not None and not isinstance(base_sampler, BaseSampler):
            raise TransferSearchError(
                f"`base_sampler` must be an optuna.samplers.BaseSampler, but got {base_sampler!r}. "
                "Pass e.g. optuna.samplers.TPESampler(seed=0)."
            )
        if "direction" in planner_kwargs:
            raise TransferSearchError(
                f"TransferSampler takes the direction from the study, but got "
                f"direction={planner_kwargs['direction']!r}. Drop it and create the study with "
                "optuna.create_study(direction='maximize') for a maximised metric."
            )
        options = set(inspect.signature(TransferPlanner).parameters) - {"space", "ladder"}
        for name in planner_kwargs:
            if name not in options:
                close = difflib.get_close_matches(name, sorted(options), n=1)
                also = f" Did you mean {close[0]!r}?" if close else ""
                raise TransferSearchError(
                    f"TransferSampler got an unknown keyword {name!r}.{also} It takes space, "
                    f"ladder, base_sampler and the planner's options: {', '.join(sorted(options))}."
                )
        self._planner = TransferPlanner(space, ladder, **planner_kwargs)
        self._base_sampler = base_sampler or optuna.samplers.TPESampler()
        # One base sampler per rung: samplers keep per-study state (search-space cursors, fitted
        # kernels, constant-liar caches) that must not carry over between landscapes.
        self._template = copy.deepcopy(self._base_sampler)
        self._rung_samplers: dict[int, BaseSampler] = {}
        self._distributions = {
            name: to_optuna_distribution(dist) for name, dist in space.distributions.items()
        }
        self._proposals: dict[int, Proposal] = {}
        self._observations: dict[int, Observation] = {}
        self._lock = threading.Lock()
        self._space_stored: set[str] = set()  # studies already holding the space

    # Read-only views ------------------------------------------------------------------------
    @property
    def planner(self) -> TransferPlanner:
        """The shared rung policy and law (framework-free)."""
        return self._planner

    @property
    def space(self) -> TransferSpace:
        """The swept space."""
        return self._planner.space

    @property
    def ladder(self) -> tuple[Scale, ...]:
        """The rungs, cheapest first."""
        return self._planner.ladder

    @property
    def base_sampler(self) -> BaseSampler:
        """The wrapped sampler (it serves the first rung used; others get copies of it)."""
        return self._base_sampler

    def rung_sampler(self, rung: int) -> BaseSampler:
        """The base sampler that serves ``rung``: ``base_sampler`` for the first rung used, a
        copy of its initial state for each other rung, so no state crosses landscapes.

        A copy gets its own random stream, or it would replay the first rung's draws: seeded
        from (``seed``, rung) when the sampler has an explicit ``seed`` (reproducible), else from
        fresh OS entropy (``reseed_rng()``).
        """
        with self._lock:
            sampler = self._rung_samplers.get(rung)
            if sampler is None:
                if self._rung_samplers:
                    sampler = copy.deepcopy(self._template)
                    self._seed_copy(sampler, rung)
                else:
                    sampler = self._base_sampler
                self._rung_samplers[rung] = sampler
            return sampler

    def _seed_copy(self, sampler: BaseSampler, rung: int) -> None:
        seed = self._planner.seed
        if seed is not None:
            derived = int(np.random.SeedSequence([seed, rung]).generate_state(1)[0])
            if seed_sampler(sampler, derived):
                logger.debug("rung %d: base sampler copy seeded with %d", rung, derived)
                return
            logger.info(
                "rung %d: %s has no random generator transfersearch can seed; reseeded from OS "
                "entropy (this rung's draws are not reproducible)",
                rung,
                type(sampler).__name__,
            )
        sampler.reseed_rng()

    @property
    def distributions(self) -> dict[str, BaseDistribution]:
        """The Optuna distribution of each swept coordinate."""
        return dict(self._distributions)

    # The user's entry point -------------------------------------------------------------------
    def rung(self, trial: Trial | FrozenTrial) -> int:
        """The rung assigned to ``trial``.

        Raises:
            TransferSearchError: the trial was not started by a study using this sampler.
        """
        proposal = self._proposals.get(trial._trial_id)
        if proposal is not None:
            return proposal.rung
        rung = _system_attrs(trial).get(RUNG_ATTR)
        if rung is None:
            raise TransferSearchError(
                f"trial {trial.number} has no rung: its study does not use this TransferSampler. "
                "Create the study with sampler=<the TransferSampler>."
            )
        return int(rung)

    def suggest(self, trial: Trial, *, record: bool = True) -> tuple[Scale, Hyperparameters]:
        """Suggest every swept coordinate and return the trial's scale and hyperparameters.

        Args:
            trial: the running trial.
            record: also store the concrete hyperparameters as user attributes
                (:func:`hyperparameter_attrs`).

        Returns:
            ``(scale, hp)``: the rung's Scale and ``space.concretize(coordinates, scale)``.
        """
        scale = self.ladder[self.rung(trial)]
        coords = {
            name: _suggest(trial, name, dist) for name, dist in self.space.distributions.items()
        }
        hp = self.space.concretize(coords, scale)
        if record:
            for key, value in hyperparameter_attrs(hp).items():
                trial.set_user_attr(key, value)
        return scale, hp

    def hyperparameters(self, trial: FrozenTrial) -> Hyperparameters:
        """The concrete hyperparameters a finished trial used (e.g. ``study.best_trial``)."""
        coords = {name: trial.params[name] for name in self.space.distributions}
        return self.space.concretize(coords, self.ladder[self.rung(trial)])

    # Hooks --------------------------------------------------------------------------------------
    def reseed_rng(self) -> None:
        self._base_sampler.reseed_rng()
        self._template.reseed_rng()
        for sampler in self._rung_samplers.values():
            if sampler is not self._base_sampler:
                sampler.reseed_rng()
        self._planner.reseed()

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        if study._is_multi_objective():
            raise TransferSearchError(
                f"TransferSampler fits one metric, but study {study.study_name!r} has "
                f"{len(study.directions)} objectives. Use a single-objective study."
            )
        if study.study_name not in self._space_stored and record_space(study, self.space):
            self._space_stored.add(study.study_name)  # read back by ts.stored_space(study)
        proposal, detoured_from = self._plan(study, trial)
        self._proposals[trial._trial_id] = proposal
        storage, trial_id = study._storage, trial._trial_id
        if trial.system_attrs.get(RUNG_ATTR) != proposal.rung:
            storage.set_trial_system_attr(trial_id, RUNG_ATTR, proposal.rung)
        attrs: dict[str, Any] = {"rung": proposal.rung, "transfer": proposal.source}
        if detoured_from is not None:
            attrs["detoured_from"] = detoured_from
        attrs.update({f"scale.{k}": v for k, v in self.ladder[proposal.rung].items()})
        for key, value in attrs.items():
            if trial.user_attrs.get(key) != value:
                storage.set_trial_user_attr(trial_id, key, value)
        view = _rung_view(study, proposal.rung, failed_as_worst=True)
        self.rung_sampler(proposal.rung).before_trial(view, trial)

    def _plan(self, study: Study, trial: FrozenTrial) -> tuple[Proposal, int | None]:
        """Decide the trial's rung (once) and where its coordinates come from; also the rung the
        law gate kept the trial from (None: not detoured)."""
        fixed_rung = trial.system_attrs.get(RUNG_ATTR, trial.user_attrs.get("rung"))
        if fixed_rung is not None:
            rung = int(fixed_rung)
            if not 0 <= rung < len(self.ladder):
                raise TransferSearchError(
                    f"trial {trial.number} asks for rung={rung!r}, but the ladder has "
                    f"{len(self.ladder)} rungs (0..{len(self.ladder) - 1})."
                )
        trials = study._get_trials(deepcopy=False, use_cache=False)
        counts = [0] * len(self.ladder)
        running = [0] * len(self.ladder)
        for other in trials:
            other_rung = other.system_attrs.get(RUNG_ATTR)
            if other.number != trial.number and other_rung is not None:
                if other.state in _COUNTED_STATES or _told_fail(other):
                    counts[other_rung] += 1
                if other.state == TrialState.RUNNING:
                    running[other_rung] += 1
        if fixed_rung is not None:
            # A retried or enqueued trial keeps its rung and its parameters.
            source = "retry" if "failed_trial" in trial.system_attrs else "enqueued"
            if trial.params or trial.system_attrs.get("fixed_params"):
                return Proposal(rung, {}, source), None
        maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
        self._planner.direction = "maximize" if maximize else "minimize"
        observations = self._planner_observations(trials)
        detoured_from = None
        if fixed_rung is None:
            rung = self._planner.assign_rung(counts, observations=observations, running=running)
            budget_rung = self._planner.assign_rung(counts)
            detoured_from = budget_rung if budget_rung != rung else None
        return self._planner.propose(rung, observations, counts[rung]), detoured_from

    def _planner_observations(self, trials: Sequence[FrozenTrial]) -> list[Observation]:
        """Finished trials as observations for the planner, with their raw values (the planner
        knows the study's direction).

        Finished trials never change, so each is converted once and cached by trial id.
        """
        result = []
        with self._lock:
            for trial in trials:
                if not trial.state.is_finished() or _died(trial):
                    continue
                cached = self._observations.get(trial._trial_id)
                if cached is None:
                    rung = _rung_of(trial)
                    if rung is None or not 0 <= rung < len(self.ladder):
                        continue
                    cached = _observation(trial, self.ladder[rung])
                    self._observations[trial._trial_id] = cached
                result.append(cached)
        return result

    def _proposal(self, study: Study, trial: FrozenTrial) -> Proposal:
        proposal = self._proposals.get(trial._trial_id)
        if proposal is None:  # the trial began elsewhere (e.g. ask() in another process)
            rung = study._storage.get_trial_system_attrs(trial._trial_id).get(RUNG_ATTR)
            proposal = Proposal(0 if rung is None else int(rung), {}, "base")
            self._proposals[trial._trial_id] = proposal
        return proposal

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        proposal = self._proposal(study, trial)
        view = _rung_view(study, proposal.rung, failed_as_worst=True)
        search_space = self.rung_sampler(proposal.rung).infer_relative_search_space(view, trial)
        for name in proposal.params:
            if name in self._distributions:
                search_space[name] = self._distributions[name]
        return search_space

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        proposal = self._proposal(study, trial)
        proposed = {
            name: _cast(value, search_space[name])
            for name, value in proposal.params.items()
            if name in search_space
        }
        rest = {name: dist for name, dist in search_space.items() if name not in proposed}
        view = _rung_view(study, proposal.rung, failed_as_worst=True)
        base = self.rung_sampler(proposal.rung)
        params = base.sample_relative(view, trial, rest) if rest else {}
        params.update(proposed)
        return params

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        rung = self._proposal(study, trial).rung
        base = self.rung_sampler(rung)
        return base.sample_independent(
            _rung_view(study, rung, failed_as_worst=True), trial, param_name, param_distribution
        )

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        proposal = self._proposal(study, trial)
        if state == TrialState.FAIL:
            study._storage.set_trial_system_attr(trial._trial_id, _TOLD_ATTR, True)
        try:
            view = _rung_view(study, proposal.rung, failed_as_worst=True)
            self.rung_sampler(proposal.rung).after_trial(view, trial, state, values)
        finally:
            self._proposals.pop(trial._trial_id, None)


def _cast(value: float, dist: BaseDistribution) -> Any:
    if isinstance(dist, IntDistribution):
        return round(value)
    if isinstance(dist, FloatDistribution):
        return float(value)
    return value


# ----------------------------------------------------------------------------------------------
# Pruning within a rung
# ----------------------------------------------------------------------------------------------
class RungPruner(BasePruner):
    """Wrap a pruner so that it compares a trial only with trials of the same rung.

    Losses of different proxy scales are not comparable (a small model's "median" curve would
    prune every large one), so ``RungPruner(optuna.pruners.MedianPruner())`` hands the wrapped
    pruner the same per-rung view the base sampler gets. Works with pruners that read the study
    through ``get_trials`` (Median, Percentile, SuccessiveHalving, Threshold, Patient, Wilcoxon);
    use HyperbandPruner unwrapped.
    """

    def __init__(self, pruner: BasePruner) -> None:
        if not isinstance(pruner, BasePruner):
            raise TransferSearchError(
                f"`pruner` must be an optuna.pruners.BasePruner, but got {pruner!r}."
            )
        self._pruner = pruner

    def prune(self, study: Study, trial: FrozenTrial) -> bool:
        rung = trial.system_attrs.get(RUNG_ATTR)
        if rung is None:
            return self._pruner.prune(study, trial)
        return self._pruner.prune(_rung_view(study, int(rung)), trial)


# ----------------------------------------------------------------------------------------------
# Storages
# ----------------------------------------------------------------------------------------------
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
      ``RDBStorage`` with a heartbeat every ``heartbeat_interval`` seconds; a RUNNING trial whose
      heartbeat is older than ``grace_period`` (default 2 × interval) is failed by the next trial
      any worker starts, and re-enqueued with the same parameters and rung up to ``max_retry``
      times (``RetryHeartbeatStaleTrialCallback``), by one process only: the first to claim the
      failed trial (system attribute ``"transfersearch:retried-by"``). A plain ``postgresql://``
      URL uses psycopg 3 (SQLAlchemy 2.1's default; ``pip install 'psycopg[binary]'``). SQLite
      waits up to ``timeout`` s for a lock and runs in WAL mode with ``synchronous=NORMAL``:
      readers never block the writer and a commit costs no fsync, so several workers on one file
      keep up; a killed process loses nothing (an OS crash may lose the last commits). Keep the
      file on a local disk (WAL needs shared memory).
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
    if url.startswith("journal://") or url.endswith(".log"):
        path = url[len("journal://") :] if url.startswith("journal://") else url
        _check_file(url, path, must_exist=must_exist, sqlite=False)
        from optuna.storages.journal import JournalFileBackend

        backend = JournalFileBackend(path)
        return optuna.storages.JournalStorage(backend)
    if heartbeat_interval is not None and heartbeat_interval < 1:
        raise TransferSearchError(
            f"`heartbeat_interval` must be >= 1 second, but got {heartbeat_interval=}."
        )
    if grace_period is not None and grace_period < 1:
        raise TransferSearchError(f"`grace_period` must be >= 1 second, but got {grace_period=}.")
    shown, is_file_sqlite = _check_database_url(url, must_exist=must_exist)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": timeout}
    kwargs: dict[str, Any] = {}
    if heartbeat_interval is not None:
        retry_class = getattr(
            optuna.storages,
            "RetryHeartbeatStaleTrialCallback",
            optuna.storages.RetryFailedTrialCallback,
        )
        retry: Callable[[Study, FrozenTrial], None] = RetryOnce(retry_class(max_retry=max_retry))
        parameters = inspect.signature(optuna.storages.RDBStorage).parameters
        key = (
            "heartbeat_stale_trial_callback"
            if "heartbeat_stale_trial_callback" in parameters
            else "failed_trial_callback"
        )
        kwargs = {
            "heartbeat_interval": heartbeat_interval,
            "grace_period": grace_period or 2 * heartbeat_interval,
            key: retry,
        }
    import sqlalchemy

    try:
        storage = optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, **kwargs)
    except ImportError as exc:
        raise TransferSearchError(
            f"cannot open storage {shown!r}: its database driver is not installed ({exc}). For a "
            "plain postgresql:// URL: pip install 'psycopg[binary]'; or name the driver, e.g. "
            "postgresql+psycopg2://."
        ) from exc
    except (sqlalchemy.exc.SQLAlchemyError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TransferSearchError(
            f"cannot open storage {shown!r}: {reason}. Check the URL, that the database server "
            "runs, and the credentials."
        ) from exc
    if is_file_sqlite:
        sqlalchemy.event.listen(storage.engine, "connect", _sqlite_pragmas)
        storage.engine.dispose()  # connections opened before the listener get closed
    return storage


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
        raise TransferSearchError(f"storage {url!r} is not a database URL. {hint}") from None
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


# The worker launcher lives in a private module; it imports this one lazily.
from transfersearch.integrations._optuna_workers import (  # noqa: E402
    WorkerSlot,
    detect_gpus,
    launch_workers,
    main,
    plan_slots,
)

if __name__ == "__main__":
    # Import the canonical module so that the objective's module and the CLI share one class.
    import sys

    from transfersearch.integrations.optuna import main as canonical_main

    sys.exit(canonical_main())

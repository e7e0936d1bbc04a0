"""Optuna adapter: a sampler that walks a proxy ladder and carries what it learns upward.

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

Rung policy, law gating, per-rung base samplers and how failed trials are told are described in
``docs/design.md``; the worker launcher and its storages are :mod:`transfersearch.integrations.launcher`
(``make_storage`` and ``launch_workers`` are still importable from here); Optuna's privates are
used in ``_optuna_shim.py`` only.
"""

from __future__ import annotations

import copy
import logging
import operator
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, cast

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
from transfersearch.integrations import _optuna_shim as shim
from transfersearch.integrations._optuna_shim import seed_sampler
from transfersearch.integrations._optuna_space import record_ladder, record_space, study_space
from transfersearch.integrations._optuna_trials import (
    FAIL_KIND_ATTR,
    INTERRUPTED_ATTR,
    RUNG_ATTR,
    TOLD_ATTR,
    StudyTally,
    died,
    fail_kind,
    observation,
    told_diverged,
    worst_value,
)
from transfersearch.integrations._per_rung import PerRung
from transfersearch.integrations._trial_claims import CLAIM_ATTR, OWNER_ATTR, claim_once_on_sqlite
from transfersearch.ladder import PlannerOptions, Proposal, TransferPlanner
from transfersearch.observations import Observation
from transfersearch.readers import register_reader
from transfersearch.scale import Scale
from transfersearch.space import Choice, Distribution, Float, Hyperparameters, Int, TransferSpace
from transfersearch.sweep import Direction, Sweep

__all__ = [
    "RUNG_ATTR",
    "RungPruner",
    "TransferSampler",
    "hyperparameter_attrs",
    "observations_from_study",
    "sweep_from_study",
    "to_optuna_distribution",
]

logger = logging.getLogger(__name__)


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
def _rung_view(study: Study, rung: int, *, failed_as_worst: bool = False) -> Study:
    """``study`` restricted to the trials of ``rung``.

    With ``failed_as_worst`` (the base sampler's view), a trial that diverged (its objective
    returned NaN) appears as COMPLETE with the worst value seen (see
    :func:`~transfersearch.integrations._optuna_trials.worst_value`), so TPE or GP learns to
    avoid its region instead of never hearing of it. A trial that crashed (it raised: an
    out-of-memory error, a lost node) stays FAIL, which base samplers skip: a crash says nothing
    about the loss at its configuration.
    """

    def select(trials: list[FrozenTrial]) -> list[FrozenTrial]:
        own = [t for t in trials if t.system_attrs.get(RUNG_ATTR) == rung]
        if not failed_as_worst or not any(told_diverged(t) for t in own):
            return own
        worst = worst_value(trials, rung, study.direction)
        if worst is None:
            return own
        shown = []
        for trial in own:
            if told_diverged(trial):
                trial = copy.copy(trial)  # never change the study's (cached) trial
                trial.state = TrialState.COMPLETE
                trial.values = [worst]
            shown.append(trial)
        return shown

    viewed: Study = shim.view(study, select)
    return viewed


# ----------------------------------------------------------------------------------------------
# Observations
# ----------------------------------------------------------------------------------------------
def observations_from_study(study: Study) -> list[Observation]:
    """The trials of a study run with :class:`TransferSampler`, as observations.

    Reads the ``scale.<name>`` user attributes the sampler wrote and the trial's numeric
    parameters (the coordinates). States: COMPLETE → ``"complete"`` (its value; ±inf is a
    divergence), FAIL → ``"complete"`` with value NaN (diverged) when the objective returned NaN,
    ``"failed"`` (crashed: ``Observation.crashed``) when it raised — Optuna stores FAIL for both,
    the sampler records which (system attribute ``transfersearch:fail-kind``; a FAIL without it is
    read as a crash) — PRUNED → ``"pruned"`` (its last intermediate value); RUNNING and WAITING
    trials are skipped, and so are trials the storage heartbeat failed because their worker died
    and trials interrupted by Ctrl-C (user attribute ``transfersearch:interrupted``): neither
    diverged nor crashed, and a retry stands for each. Values are as stored:
    :func:`sweep_from_study` carries the study's direction with them.

    Raises:
        TransferSearchError: the study is multi-objective, or it has finished trials but none
            carries ``scale.*`` user attributes.
    """
    if len(study.directions) > 1:
        raise TransferSearchError(
            f"study {study.study_name!r} has {len(study.directions)} objectives; transfersearch "
            "fits one metric. Use a single-objective study."
        )
    trials = study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    )
    result: list[Observation] = []
    scaled = unmarked = 0
    for trial in trials:
        scale = {k[6:]: v for k, v in trial.user_attrs.items() if k.startswith("scale.")}
        scaled += bool(scale)
        if not scale or died(trial):
            continue  # a dead worker's or an interrupted trial: its retry stands for it
        result.append(observation(trial, scale))
        unmarked += trial.state == TrialState.FAIL and FAIL_KIND_ATTR not in trial.system_attrs
    if trials and not scaled:
        raise TransferSearchError(
            f"none of the {len(trials)} finished trials of study {study.study_name!r} records a "
            "scale (user attributes 'scale.<name>'). Run the study with TransferSampler, or set "
            "trial.set_user_attr('scale.width', ...) for each scale variable."
        )
    if unmarked:
        logger.info(
            "%d FAIL trials of study %r do not record whether they raised or returned NaN (%s: "
            "written by TransferSampler since issue 27); read as crashes, not divergences",
            unmarked,
            study.study_name,
            FAIL_KIND_ATTR,
        )
    return result


def sweep_from_study(study: Study) -> Sweep:
    """A study run with :class:`TransferSampler` as a :class:`~transfersearch.Sweep`.

    The observations are :func:`observations_from_study`'s; the space is the one the sampler
    stored on the study (None where it stored none: a custom rule); the direction is the study's.

    Raises:
        TransferSearchError: as :func:`observations_from_study`, or a stored space that cannot
            be read.
    """
    observations = observations_from_study(study)
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    direction: Direction = "maximize" if maximize else "minimize"
    return Sweep(tuple(observations), space=study_space(study), direction=direction)


register_reader("optuna", sweep_from_study)  # read_sweep(study) reads with it


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
def _check_rungs_concretize(space: TransferSpace, ladder: Sequence[Scale]) -> None:
    """Concretize one point of the space at every rung, as each trial will: a rung the space
    cannot serve (a scale variable the ladder varies that the base scale lacks) is an error at
    construction, naming the rung and the fix, not a failed trial at the first ``suggest``.

    Raises:
        TransferSearchError: the first rung the space cannot concretize.
    """
    probe = {name: _middle(dist) for name, dist in space.distributions.items()}
    for rung, scale in enumerate(ladder):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the probe's hyperparameters are not used
                space.concretize(probe, scale)
        except TransferSearchError as exc:
            varied = sorted(
                name for name in scale if len({s.get(name) for s in ladder if name in s}) > 1
            )
            raise TransferSearchError(
                f"TransferSampler: rung {rung} {scale!r} of the ladder cannot be served by this "
                f"space: {exc} The ladder varies {varied}; the space's base scale must give "
                "each of them."
            ) from None


#: How the progress log names where a trial's coordinates come from (Proposal.source).
_SOURCE_TEXT = {
    "base": "coordinates from the base sampler",
    "law-point": "coordinates at the law's predicted optimum",
    "law-neighbourhood": "coordinates around the law's predicted optimum",
}


def _scale_text(scale: Scale) -> str:
    return ", ".join(f"{name}={value:g}" for name, value in scale.items())


def _middle(dist: Distribution) -> Any:
    """A value inside ``dist``: the (geometric, for log) middle of a range, a Choice's first."""
    if isinstance(dist, Float):
        low, high = float(dist.low), float(dist.high)
        return (low * high) ** 0.5 if dist.log else (low + high) / 2
    if isinstance(dist, Int):
        return dist.low
    if isinstance(dist, Choice):
        return dist.choices[0]
    return dist  # pragma: no cover - the space admits only the three


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
        **planner_kwargs: the planner's options
            (:meth:`~transfersearch.ladder.PlannerOptions.from_kwargs`: ``trials_per_rung``, ``cost``, ``min_trials``, ``focus``, ``seed``, ``transfer``,
            ``gate_on_law``, ``detour_limit``, ``diverged_beyond``, ...).
            Not ``direction``: the sampler takes it from the study (``study.direction``) the
            first time it plans a trial, and keeps it (a ``maximize`` study transfers the
            maximum); a study of the other direction is then refused.

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
        options = PlannerOptions.from_kwargs(**planner_kwargs)  # names a misspelt option
        planner = TransferPlanner(space, ladder, options=options)
        _check_rungs_concretize(planner.space, planner.ladder)
        base = base_sampler or optuna.samplers.TPESampler()
        self._rungs: PerRung[BaseSampler] = PerRung(
            planner,
            base,
            seed=planner.seed,
            seed_copy=seed_sampler,
            reseed=operator.methodcaller("reseed_rng"),
            share_first=True,
        )
        self._base_sampler = base
        self._distributions = {
            name: to_optuna_distribution(dist) for name, dist in space.distributions.items()
        }
        self._proposals: dict[int, Proposal] = {}
        self._tallies: dict[tuple[int, str], StudyTally] = {}
        self._lock = threading.Lock()
        self._space_stored: set[str] = set()  # studies already holding the space
        self._ladder_checked: set[str] = set()  # studies whose stored ladder matches this one
        self._claims_checked: set[int] = set()  # storages (ids) whose claims are made exact
        self._law_started: set[tuple[tuple[int, str], int]] = set()  # (study, rung) announced

    # Read-only views ------------------------------------------------------------------------
    @property
    def planner(self) -> TransferPlanner:
        """The shared rung policy and law (framework-free)."""
        planner: TransferPlanner = self._rungs.planner
        return planner

    @property
    def space(self) -> TransferSpace:
        """The swept space."""
        return self.planner.space

    @property
    def ladder(self) -> tuple[Scale, ...]:
        """The rungs, cheapest first."""
        return self.planner.ladder

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
        return cast(BaseSampler, self._rungs.base(rung))  # never None: there is a template

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
        proposal = self._proposals.get(shim.trial_id(trial))
        if proposal is not None:
            return proposal.rung
        rung = shim.system_attrs(trial).get(RUNG_ATTR)
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
        if record:  # trial.set_user_attr for each, one write on the in-memory storage
            shim.set_user_attrs(trial, hyperparameter_attrs(hp))
        return scale, hp

    def hyperparameters(self, trial: FrozenTrial) -> tuple[Scale, Hyperparameters]:
        """``(scale, hp)`` a finished trial ran with (e.g. ``study.best_trial``): what
        :meth:`suggest` returned to it, and what the Ray adapter's ``hyperparameters(config)``
        returns for a Tune trial."""
        scale = self.ladder[self.rung(trial)]
        coordinates = {name: trial.params[name] for name in self.space.distributions}
        return scale, self.space.concretize(coordinates, scale)

    # Hooks --------------------------------------------------------------------------------------
    def reseed_rng(self, seed: int | None = None) -> None:
        """Restart the random streams of the base samplers and the planner: from fresh entropy
        (Optuna's hook, e.g. ``n_jobs``), or from streams derived from ``seed`` (each launcher
        worker gets its own seed, so workers of a seeded sampler do not repeat each other)."""
        self._rungs.reseed(seed)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        if len(study.directions) > 1:
            raise TransferSearchError(
                f"TransferSampler fits one metric, but study {study.study_name!r} has "
                f"{len(study.directions)} objectives. Use a single-objective study."
            )
        if study.study_name not in self._ladder_checked:  # once per study and process
            try:
                record_ladder(study, self.ladder)
            except TransferSearchError:  # Optuna made the trial already: not left RUNNING
                shim.storage_of(study).set_trial_state_values(shim.trial_id(trial), TrialState.FAIL)
                raise
            self._ladder_checked.add(study.study_name)
        if study.study_name not in self._space_stored and record_space(study, self.space):
            self._space_stored.add(study.study_name)  # read back by ts.stored_space(study)
        self._claim_once(study)
        proposal, detoured_from = self._plan(study, trial)
        self._proposals[shim.trial_id(trial)] = proposal
        system = (
            {} if trial.system_attrs.get(RUNG_ATTR) == proposal.rung else {RUNG_ATTR: proposal.rung}
        )
        attrs: dict[str, Any] = {"rung": proposal.rung, "transfer": proposal.source}
        if detoured_from is not None:
            attrs["detoured_from"] = detoured_from
        attrs.update({f"scale.{k}": v for k, v in self.ladder[proposal.rung].items()})
        user = {k: v for k, v in attrs.items() if trial.user_attrs.get(k) != v}
        shim.set_trial_attrs(study, trial, user=user, system=system)  # one commit, not seven
        view = _rung_view(study, proposal.rung, failed_as_worst=True)
        self.rung_sampler(proposal.rung).before_trial(view, trial)

    def _claim_once(self, study: Study) -> None:
        """Make the study's SQLite file claim each enqueued trial once (its trigger,
        :func:`~transfersearch.integrations._trial_claims.claim_once_on_sqlite`), whatever
        opened it: the README's plain ``sqlite:///`` URL as well as ``make_storage``'s. Once per
        storage in this process; the trigger stays in the file for every later process."""
        backend = shim.rdb_backend(shim.storage_of(study))
        if backend is None or id(backend) in self._claims_checked:
            return
        self._claims_checked.add(id(backend))
        claim_once_on_sqlite(backend.engine)

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
            if trial.params or trial.system_attrs.get("fixed_params"):
                # A retried or enqueued trial keeps its rung and its parameters.
                source = "retry" if "failed_trial" in trial.system_attrs else "enqueued"
                logger.debug("trial %d keeps rung %d (%s)", trial.number, rung, source)
                return Proposal(rung, {}, source), None
        with self._lock:
            self._bind(study)
            key = (id(shim.storage_of(study)), study.study_name)
            tally = self._tallies.get(key)
            if tally is None:
                tally = self._tallies[key] = StudyTally(self.ladder)
            tally.update(study.get_trials(deepcopy=False))
            proposal, detoured_from = self._rungs.plan(
                tally, exclude=trial.number, rung=None if fixed_rung is None else rung
            )
            planned = cast(Proposal, proposal)  # never None: plan() did not wait
            if trial.system_attrs.get("fixed_params"):  # enqueued without a rung: it runs its own
                planned = Proposal(planned.rung, {}, "enqueued")  # parameters, not the plan's
            self._log_progress(key, trial.number, planned, detoured_from, tally)
            return planned, detoured_from

    def _log_progress(
        self,
        key: tuple[int, str],
        number: int,
        proposal: Proposal,
        detoured_from: int | None,
        tally: StudyTally,
    ) -> None:
        """Say at INFO where trial ``number`` goes and how far its rung is (``study.optimize``
        prints nothing of the kind), and, once per rung, when law-guided sampling starts there
        (a rung whose start passed while INFO was off is not announced later)."""
        rung, budgets = proposal.rung, self.planner.budgets
        starts = proposal.source.startswith("law") and (key, rung) not in self._law_started
        if starts:
            self._law_started.add((key, rung))
        if not logger.isEnabledFor(logging.INFO):  # the messages' counts and texts: not needed
            return
        nth = tally.counts(exclude=number).started[rung] + 1
        detour = "" if detoured_from is None else f", detoured from rung {detoured_from}"
        logger.info(
            "trial %d: rung %d (%s), its trial %d of %d%s; %s",
            number,
            rung,
            _scale_text(self.ladder[rung]),
            nth,
            budgets[rung],
            detour,
            _SOURCE_TEXT.get(proposal.source, proposal.source),
        )
        if starts:
            logger.info(
                "rung %d: law-guided sampling starts with trial %d: the optimum-vs-scale law "
                "fitted on the cheaper rungs proposes its coordinates (%s)",
                rung,
                number,
                proposal.source,
            )
        if nth == budgets[rung]:
            logger.info("rung %d: trial %d uses the last of its budget of %d", rung, number, nth)

    def _bind(self, study: Study) -> None:
        """Give the planner the study's direction, once; a study of the other one is refused."""
        maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
        self._rungs.bind(
            "maximize" if maximize else "minimize",
            refuse=lambda planned, asked: (
                f"this TransferSampler plans for a {planned} study, but study "
                f"{study.study_name!r} is to {asked}. Use one sampler per direction."
            ),
        )

    def _proposal(self, study: Study, trial: FrozenTrial) -> Proposal:
        key = shim.trial_id(trial)
        proposal = self._proposals.get(key)
        if proposal is None:  # the trial began elsewhere (e.g. ask() in another process)
            rung = shim.system_attrs(trial).get(RUNG_ATTR)
            if rung is None:
                rung = shim.storage_of(study).get_trial_system_attrs(key).get(RUNG_ATTR)
            proposal = Proposal(0 if rung is None else int(rung), {}, "base")
            self._proposals[key] = proposal
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
        distributions = self.space.distributions
        proposed = {
            name: distributions[name].snap(value)
            for name, value in proposal.params.items()
            if name in search_space and name in distributions
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
        if state == TrialState.FAIL and shim.interrupted_by_user():
            # Ctrl-C: no verdict on these hyperparameters. Not told to the base sampler, no
            # budget used, no observation; run again with the same parameters on the next start.
            self._requeue_interrupted(study, trial)
            self._proposals.pop(shim.trial_id(trial), None)
            return
        if state == TrialState.FAIL:
            shim.set_system_attr(study, trial, TOLD_ATTR, True)
            shim.set_system_attr(study, trial, FAIL_KIND_ATTR, fail_kind())  # raised or NaN
        try:
            view = _rung_view(study, proposal.rung, failed_as_worst=True)
            self.rung_sampler(proposal.rung).after_trial(view, trial, state, values)
        finally:
            self._proposals.pop(shim.trial_id(trial), None)

    def _requeue_interrupted(self, study: Study, trial: FrozenTrial) -> None:
        """Mark ``trial`` interrupted (user attribute :data:`INTERRUPTED_ATTR`) and enqueue its
        rerun: same parameters, rung and user attributes, Optuna's retry bookkeeping
        (``failed_trial``, ``retry_history``), so the next ``optimize`` (or worker) runs it first."""
        storage = shim.storage_of(study)
        storage.set_trial_user_attr(shim.trial_id(trial), INTERRUPTED_ATTR, True)
        system_attrs = {
            k: v
            for k, v in trial.system_attrs.items()
            if k not in (TOLD_ATTR, CLAIM_ATTR, OWNER_ATTR)  # the rerun gets its own owner
        }
        system_attrs["failed_trial"] = system_attrs.get("failed_trial", trial.number)
        system_attrs["retry_history"] = [*system_attrs.get("retry_history", ()), trial.number]
        study.add_trial(
            optuna.trial.create_trial(
                state=TrialState.WAITING,
                params=trial.params,
                distributions=trial.distributions,
                user_attrs={k: v for k, v in trial.user_attrs.items() if k != INTERRUPTED_ATTR},
                system_attrs=system_attrs,
            )
        )
        logger.info(
            "trial %d was interrupted (rung %s); re-enqueued with the same parameters",
            trial.number,
            system_attrs.get(RUNG_ATTR),
        )


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
# The launcher's names, where they were before it had a module of its own
# ----------------------------------------------------------------------------------------------
_LAUNCHER_NAMES = frozenset(
    {"WorkerSlot", "detect_gpus", "launch_workers", "lease_units", "main", "make_storage",
     "plan_slots", "resolve_packing"}
)  # fmt: skip


def __getattr__(name: str) -> Any:
    """``from transfersearch.integrations.optuna import make_storage`` (or ``launch_workers``,
    ...) keeps working: the launcher lives in :mod:`transfersearch.integrations.launcher`."""
    if name in _LAUNCHER_NAMES:
        from transfersearch.integrations import launcher

        return getattr(launcher, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    # `python -m transfersearch.integrations.optuna workers ...` (the name before the launcher
    # had its own module) runs the launcher's command line, through the canonical modules.
    import sys

    from transfersearch.integrations.launcher import main as launcher_main

    sys.exit(launcher_main())

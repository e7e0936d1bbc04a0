"""The proxy ladder: which rung each trial runs on, and where the fitted law says to look.

One implementation for both adapters (the Optuna sampler and the Ray Tune searcher):
:meth:`TransferPlanner.assign_rung` returns a :class:`RungDecision` (budget order, with law
gating for concurrent trials) and :meth:`TransferPlanner.propose` a :class:`Proposal` (the law's
point, a draw around it, or "leave it to the base sampler"). The planner joins two parts: the
budgets and rungs (:class:`~transfersearch.schedule.RungSchedule`) and the fitted laws
(:class:`~transfersearch.law_cache.LawCache`); its options are one :class:`PlannerOptions`. The
policy and its reasons are in ``docs/design.md``; decisions are logged to
``logging.getLogger("transfersearch.ladder")``.

    >>> from transfersearch import synthetic
    >>> planner = TransferPlanner(synthetic.make_space(), synthetic.LADDER, seed=0)
    >>> planner.assign_rung([0, 0, 0, 0])
    RungDecision(rung=0, detoured_from=None, wait=False)
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtri_exp

from transfersearch.cost import cost_function
from transfersearch.errors import (
    POSITIVE,
    Allowed,
    Boolean,
    Function,
    Interval,
    Options,
    TransferSearchError,
    TransferSearchWarning,
    check_int,
    check_table,
    options_from,
)
from transfersearch.fitting.options import OPTIONS as FIT_OPTIONS
from transfersearch.law_cache import FitAttempt, LawCache, LawPrediction
from transfersearch.ledger import complete_counts
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.schedule import Counts, RungDecision, RungSchedule
from transfersearch.space import Float, Int, TransferSpace
from transfersearch.sweep import Direction

__all__ = [
    "OPTIONS",
    "FitAttempt",
    "LawPrediction",
    "PlannerOptions",
    "Proposal",
    "RungDecision",
    "TransferPlanner",
]

#: The version of :meth:`TransferPlanner.state_dict`'s layout; a saved state of another is refused.
STATE_VERSION = 1


@dataclass(frozen=True)
class Proposal:
    """What the planner suggests for one trial.

    ``params`` holds the coordinates to use (empty: let the base sampler choose all), ``source`` is
    "law-point", "law-neighbourhood" or "base".
    """

    rung: int
    params: Mapping[str, float]
    source: str


@dataclass(frozen=True)
class PlannerOptions:
    """The planner's options, checked once when made; copy with :func:`dataclasses.replace`.

        >>> options = PlannerOptions(min_trials=4)
        >>> dataclasses.replace(options, focus=0.5).min_trials
        4

    Attributes:
        trials_per_rung: budget per rung: an int for all, a sequence (in cost order), or None for
            the default: ``first_rungs_trials`` for the two cheapest rungs and
            ``later_rungs_trials`` for the others (the law needs fewer there).
        cost: relative cost of a scale (default :func:`~transfersearch.cost.default_cost`).
        first_rungs_trials: the default budget of the two cheapest rungs.
        later_rungs_trials: the default budget of the other rungs.
        min_trials: finished trials a rung needs before its optimum enters the law.
        focus: probability that a later trial on a law-guided rung is drawn around the prediction
            instead of by the base sampler.
        min_spread: the smallest spread (in natural-log units for log coordinates, as a fraction of
            the range otherwise) of the neighbourhood, so it never collapses to a point.
        n_bootstrap: deprecated since 0.4 and ignored (the law's uncertainty is the one model's
            posterior); giving it warns.
        seed: seed of the planner's random draws (an int >= 0: reproducible). None (the
            default): fresh OS entropy, so independent processes draw different
            neighbourhood points instead of the same ones.
        transfer: False turns the law off: every proposal defers to the base sampler, so each rung
            is searched independently (the baseline that transfer is measured against).
        refit_growth: the law is refitted for a rung when a new rung qualifies or a fitted
            rung's finished trials (the predicted rung's own among them) have grown by this
            factor since the last fit (1.0: on every
            new trial). Refits then grow logarithmically with the study, not linearly. After a
            refit that left the neighbourhood in place the next one waits for the square of the
            last factor, up to 4 (:class:`~transfersearch.law_cache.LawCache`); one that moved
            it brings the factor back to this one.
        direction: ``"minimize"`` (default) or ``"maximize"`` the observations' values, which
            are the raw metric; passed to :func:`transfersearch.extrapolate`. Fixed for a
            planner's life (:meth:`TransferPlanner.replace` makes one for the other direction).
        gate_on_law: hold back a law-using rung whose law is pending (see
            :meth:`TransferPlanner.assign_rung`); only matters when trials run concurrently.
            False: the plain budget order.
        detour_limit: a lower rung takes detoured trials until it has started this many times
            its budget (>= 1; 1: no detour, a trial that cannot wait runs without the law).
        diverged_beyond: a finite value past this, on the metric's worse side, counts as a
            diverged run in the law's fits, as NaN does (:class:`~transfersearch.FitOptions`'s
            option of that name: a loss that blew up without reaching NaN). None (default): NaN
            and ±inf do, and values far past the rest of their rung (read as blow-ups, as
            ``extrapolate`` reads them); ``math.inf``: every finite value is fitted.

    Raises:
        TransferSearchError: a bad budget, count, probability, spread, seed, switch, growth
            factor, direction or detour limit (the message names the option and a fix).
    """

    trials_per_rung: int | tuple[int, ...] | None = None
    cost: Callable[[Scale], float] | None = None
    first_rungs_trials: int = 16
    later_rungs_trials: int = 8
    min_trials: int = 6
    focus: float = 0.75
    min_spread: float = 0.15
    n_bootstrap: int | None = None
    seed: int | None = None
    transfer: bool = True
    refit_growth: float = 1.25
    direction: Direction = "minimize"
    gate_on_law: bool = True
    detour_limit: float = 2.0
    diverged_beyond: float | None = None

    def __post_init__(self) -> None:
        self._set("trials_per_rung", _check_budgets(self.trials_per_rung))
        for name, value in check_table(OPTIONS, self).items():
            self._set(name, value)
        if self.n_bootstrap is not None:
            check_table(DEPRECATED, self)
            warnings.warn(
                "n_bootstrap is deprecated and ignored since transfersearch 0.4: the law's "
                "uncertainty is the one model's posterior. Drop the argument.",
                DeprecationWarning,
                stacklevel=3,
            )

    def _set(self, name: str, value: object) -> None:
        """Store the checked (normalised) value on the frozen instance."""
        object.__setattr__(self, name, value)

    @classmethod
    def from_kwargs(cls, options: PlannerOptions | None = None, /, **kwargs: Any) -> PlannerOptions:
        """``options`` (default: the defaults) with ``kwargs`` replacing its fields; an unknown
        keyword is refused, naming the closest option.

        Raises:
            TransferSearchError: an unknown keyword, ``options`` not a PlannerOptions, or a value
                :class:`PlannerOptions` refuses.
        """
        return options_from(
            cls,
            options,
            kwargs,
            unknown="the planner has no option {name!r}",
            fix="Pass e.g. PlannerOptions(min_trials=6), or the options as keywords.",
        )


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(PlannerOptions))

#: What each option but ``trials_per_rung`` may be (:func:`_check_budgets` checks that one).
OPTIONS: Mapping[str, Allowed] = {
    "cost": Allowed(None, Function("a function of a Scale")),
    "first_rungs_trials": Allowed(Interval(Integral, 1)),
    "later_rungs_trials": Allowed(Interval(Integral, 1)),
    "min_trials": Allowed(Interval(Integral, 1), fix="E.g. min_trials=6."),
    "focus": Allowed(Interval(Real, 0, 1), fix="It is a probability, e.g. 0.75."),
    "min_spread": Allowed(
        POSITIVE,
        fix="Write e.g. 0.15 (natural-log units for log coordinates, a fraction of the range else).",
    ),
    "seed": Allowed(
        None,
        Interval(Integral, 0),
        fix="Pass e.g. seed=0 for reproducible draws, or leave it out for fresh ones per process.",
    ),
    "transfer": Allowed(Boolean(), fix="False searches each rung independently (no law)."),
    "refit_growth": Allowed(
        Interval(Real, 1), fix="Write e.g. 1.25 (refit when a rung's trials grew by 25%)."
    ),
    "direction": Allowed(Options("minimize", "maximize")),
    "gate_on_law": Allowed(Boolean(), fix="False assigns rungs in plain budget order."),
    "detour_limit": Allowed(
        Interval(Real, 1, finite=False), fix="E.g. 2.0 (1: no detour to a lower rung)."
    ),
    "diverged_beyond": FIT_OPTIONS["diverged_beyond"],
}
#: The deprecated options, checked only when given.
DEPRECATED: Mapping[str, Allowed] = {
    "n_bootstrap": Allowed(Interval(Integral, 0), fix="Drop it: it is ignored."),
}

_BUDGET_FIX = "Give an int per rung (in cost order), e.g. trials_per_rung=16 or [16, 16, 8]."


def _check_budgets(trials_per_rung: object) -> int | tuple[int, ...] | None:
    """None, one int >= 1, or a tuple of them (the count per rung is checked with the ladder)."""
    if trials_per_rung is None:
        return None
    if isinstance(trials_per_rung, (int, bool, float, str)) or not isinstance(
        trials_per_rung, Sequence
    ):
        return check_int("trials_per_rung", trials_per_rung, minimum=1, fix=_BUDGET_FIX)
    return tuple(
        check_int("trials_per_rung", b, minimum=1, fix=_BUDGET_FIX) for b in trials_per_rung
    )


def _warn_if_never_transfers(budgets: Sequence[int], options: PlannerOptions) -> None:
    """Warn, naming ``min_trials``, when no rung's law can ever be fitted: a rung's law needs
    two other rungs with ``min_trials`` complete trials each, and the budgets give too few
    (``trials_per_rung=4`` with the default ``min_trials=6``: every trial stays ``"base"``)."""
    if not options.transfer or len(budgets) < 3:
        return  # fewer than three rungs: no rung has two others, whatever min_trials is
    enough = [budget >= options.min_trials for budget in budgets]
    if any(sum(enough) - ok >= 2 for ok in enough):
        return
    warnings.warn(
        f"no rung can ever transfer: a rung's law needs two other rungs with min_trials="
        f"{options.min_trials} complete trials each, but the budgets per rung are "
        f"{list(budgets)}, so every trial samples the base box (transfer == 'base'). Pass "
        f"min_trials={sorted(budgets)[-2]} or fewer, give two rungs at least "
        f"{options.min_trials} trials each (trials_per_rung=), or transfer=False to say that "
        "each rung is searched on its own.",
        TransferSearchWarning,
        stacklevel=4,
    )


class TransferPlanner:
    """Rung assignment and law-guided proposals over a ladder of proxy scales.

    Args:
        space: the :class:`TransferSpace` whose coordinates are swept.
        ladder: the proxy scales (order does not matter; rungs are indexed in cost order).
        options: the :class:`PlannerOptions` (None: the defaults, changed by ``kwargs``).
        **kwargs: options by name (``min_trials=6``, ``focus=0.5`` ...), as :class:`PlannerOptions`
            fields; given with ``options``, they change those.

    Attributes:
        options: the planner's :class:`PlannerOptions` (fixed for its life; see :meth:`replace`).
        ladder: the proxy scales in cost order; ``costs`` and ``budgets`` in the same order.

    Raises:
        TransferSearchError: an empty ladder, duplicate scales, a budget per rung of the wrong
            length, costs that are not positive, an unknown option or a value
            :class:`PlannerOptions` refuses.
    """

    def __init__(
        self,
        space: TransferSpace,
        ladder: Sequence[Scale | Mapping[str, float]],
        options: PlannerOptions | None = None,
        **kwargs: Any,
    ) -> None:
        self.options = PlannerOptions.from_kwargs(options, **kwargs)
        if not isinstance(space, TransferSpace):
            raise TransferSearchError(f"`space` must be a TransferSpace, but got {space!r}.")
        self.space = space
        self.cost: Callable[[Scale], float] = cost_function(self.options.cost)
        self._schedule = RungSchedule.build(ladder, self.options)
        self._laws = LawCache(space, self._schedule.ladder, self.options)
        self._rng = np.random.default_rng(self.options.seed)
        _warn_if_never_transfers(self._schedule.budgets, self.options)

    @property
    def ladder(self) -> tuple[Scale, ...]:
        """The proxy scales, cheapest first."""
        return self._schedule.ladder

    @property
    def costs(self) -> tuple[float, ...]:
        """Each rung's cost (cost order)."""
        return self._schedule.costs

    @property
    def budgets(self) -> tuple[int, ...]:
        """Each rung's trial budget (cost order); assigning one per rung changes them."""
        return self._schedule.budgets

    @budgets.setter
    def budgets(self, budgets: Sequence[int]) -> None:
        given = PlannerOptions(trials_per_rung=tuple(budgets), cost=self.cost)
        schedule = RungSchedule.build(self.ladder, given)
        self._schedule = dataclasses.replace(self._schedule, budgets=schedule.budgets)

    @property
    def seed(self) -> int | None:
        """The seed the planner's random draws started from (see :class:`PlannerOptions`)."""
        return self.options.seed

    @property
    def direction(self) -> Direction:
        """Whether the law looks for the smallest (``"minimize"``) or largest metric."""
        return self.options.direction

    def replace(self, **changes: Any) -> TransferPlanner:
        """A planner with the same space, ladder and options except ``changes`` (e.g.
        ``direction="maximize"``), continuing this one's random stream.

        Raises:
            TransferSearchError: an unknown option, or a value :class:`PlannerOptions` refuses.
        """
        options = PlannerOptions.from_kwargs(self.options, **changes)
        planner = TransferPlanner(self.space, self.ladder, options)
        if "seed" not in changes:
            planner.load_state_dict(self.state_dict())
        return planner

    @property
    def fit_attempts(self) -> tuple[FitAttempt, ...]:
        """Every fit of the law so far, failed ones with their error (see :class:`FitAttempt`)."""
        return self._laws.attempts

    @property
    def suggested_rung(self) -> Scale | None:
        """The rung to add to the ladder, when the latest law fit found scale variables moving
        together over its rungs (``Extrapolation.collinearity``): the corner of the ladder's box
        that separates them best. None when the fitted rungs separate every variable.

        The planner cannot run a rung the ladder lacks; it logs the suggestion (INFO, logger
        ``transfersearch.ladder``) when it first appears. Add it with
        ``TransferSampler(space, ladder + [planner.suggested_rung], ...)`` in the next study.
        """
        return self._laws.suggested_rung

    # ------------------------------------------------------------------------------------------
    def rung_of(self, scale: Scale | Mapping[str, float]) -> int:
        """The index of ``scale`` in the (cost-ordered) ladder."""
        return self._schedule.rung_of(scale)

    def assign_rung(
        self,
        started: Counts,
        *,
        observations: Sequence[Observation] | None = None,
        running: Counts | None = None,
        wait: bool = False,
    ) -> RungDecision:
        """The rung for the next trial, given how many trials each rung has started.

        The budget order: the cheapest rung with budget left; past every budget, the rung with
        the smallest used fraction (cheapest on ties). With ``gate_on_law`` and ``observations``
        given, a rung from the third cheapest on whose law is pending (:meth:`law_pending`) is
        held back: with ``wait=True`` the decision is to wait (ask again when a trial finishes),
        else the trial detours to the cheapest lower rung that has started fewer than
        ``detour_limit`` × its budget and is not itself waiting for its law; when every lower
        rung is saturated the trial stays on the rung and runs without the law. Sequential use
        (nothing ``running``) never gates.

        Args:
            started: trials per rung (mapping rung -> count, or a sequence in cost order) that
                are running or finished, not the failed ones that will be retried.
            observations: the finished trials (any rung, any state), for :meth:`law_pending`; a
                :class:`~transfersearch.ledger.TrialLedger` keeps this O(rungs) per call.
            running: trials per rung now running (the trial being planned not among them).
            wait: whether the caller can wait.

        Returns:
            The :class:`RungDecision`.
        """
        if observations is None:
            return self._schedule.assign(started)
        complete = complete_counts(observations)

        def pending(rung: int, in_flight: Sequence[int]) -> bool:
            return self._law_pending(rung, complete, in_flight)

        return self._schedule.assign(started, pending=pending, running=running, wait=wait)

    def law_pending(self, rung: int, observations: Sequence[Observation], running: Counts) -> bool:
        """Whether the law for ``rung`` is not available now but will be once running trials end.

        The law needs two rungs other than ``rung`` with at least ``min_trials`` complete trials
        (see :meth:`prediction`). It is pending when fewer than two qualify now, but at least two
        would if every trial now ``running`` on them completed. Always False with ``transfer``
        off or no numeric coordinate (no law to wait for). A pending law can still fail to open
        (running trials may fail or the fit may fail); the rung then runs without it.

        Args:
            rung: the rung a trial would run on (cost order).
            observations: the finished trials (any rung, any state).
            running: trials per rung now running (mapping rung -> count, or a sequence).
        """
        in_flight = self._schedule.per_rung(running)
        return self._law_pending(rung, complete_counts(observations), in_flight)

    def _law_pending(
        self, rung: int, complete: Mapping[Scale, int], in_flight: Sequence[int]
    ) -> bool:
        return self.options.transfer and self._laws.pending(rung, complete, in_flight)

    def prediction(self, rung: int, observations: Sequence[Observation]) -> LawPrediction | None:
        """The law's predicted optimum at ``rung`` and its spread (log units for log coordinates).

        Uses rungs other than ``rung`` that have at least ``min_trials`` complete trials; needs two
        such rungs. Once ``rung`` has complete trials of its own they are fitted too, and the
        prediction is that rung's own optimum, which its trials inform as well as the law
        (docs/science.md §7.5). Returns None when the law is not available yet or the fit fails; a failed
        fit is logged (logger ``transfersearch.ladder``) and recorded in :attr:`fit_attempts`,
        and is retried once the source rungs have grown by ``refit_growth``.

        Args:
            rung: the rung to predict for.
            observations: the finished trials (any rung, any state); a
                :class:`~transfersearch.ledger.TrialLedger` makes the check before a refit
                O(rungs) instead of O(trials).

        Returns:
            The :class:`~transfersearch.law_cache.LawPrediction` (``center, spread``), or None.
        """
        return self._laws.prediction(rung, observations)

    def propose(
        self, rung: int, observations: Sequence[Observation], started_at_rung: int
    ) -> Proposal:
        """Coordinates for the next trial at ``rung`` (empty params: defer to the base sampler).

        The first trial at a law-guided rung runs at the law's point; a later one, with
        probability ``focus``, at a normal draw around it (in log space for a log coordinate).

        Args:
            rung: the rung the trial runs on.
            observations: every finished trial so far (any rung; failed and diverged included).
            started_at_rung: trials already started at this rung before this one.
        """
        predicted = self.prediction(rung, observations) if self.options.transfer else None
        if predicted is None:
            return Proposal(rung, {}, "base")
        distributions = self.space.distributions
        if started_at_rung == 0:
            params = {n: distributions[n].snap(v) for n, v in predicted.center.items()}
            return Proposal(rung, params, "law-point")
        if self._rng.random() >= self.options.focus:
            return Proposal(rung, {}, "base")
        return Proposal(rung, self._neighbour(predicted), "law-neighbourhood")

    def _neighbour(self, predicted: LawPrediction) -> dict[str, float]:
        """One draw around the law's point from the normal truncated to the space's box (in log
        space for a log coordinate), snapped to the space: the rung's optimum as the law has it,
        restricted to where trials can run. A point past the box's edge puts the draws near
        that edge, inside it (clipped, they all ran at the edge itself, the same trial again)."""
        params = {}
        for name, value in predicted.center.items():
            dist = self.space.distributions[name]
            assert isinstance(dist, (Float, Int))  # the law models Float and Int coordinates
            logged = dist.log and value > 0
            to_axis: Callable[[float], float] = math.log if logged else float
            centre, sd = to_axis(value), predicted.spread[name]
            low, high = to_axis(dist.low), to_axis(dist.high)
            draw = centre
            if sd > 0 and high > low:
                u = float(self._rng.random())
                draw = centre + sd * truncated_normal((low - centre) / sd, (high - centre) / sd, u)
            params[name] = dist.snap(math.exp(draw) if logged else draw)
        return params

    def reseed(self, seed: int | None = None) -> None:
        """Restart the planner's random draws from ``seed`` (None: fresh OS entropy).

        Parallel workers that each hold a copy of one planner call this so that their
        neighbourhood draws differ.
        """
        self._rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Explicit, versioned state (the random generator's); the rest is configuration."""
        return {"version": STATE_VERSION, "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        version = state.get("version")
        if version != STATE_VERSION:
            raise TransferSearchError(
                f"planner state version {version!r} is not supported (expected {STATE_VERSION})."
            )
        self._rng.bit_generator.state = state["rng"]


def truncated_normal(a: float, b: float, u: float) -> float:
    """The standard normal truncated to ``[a, b]`` at quantile ``u`` ∈ [0, 1) (inverse CDF), in
    log probabilities so that an interval far in a tail (``a = 40``) keeps its precision: the
    lower tail as it is, the upper one mirrored into it."""
    if a + b > 0:  # mostly in the upper tail: mirror it
        return -truncated_normal(-b, -a, 1.0 - u)
    log_a, log_b = float(log_ndtr(a)), float(log_ndtr(b))
    log_width = log_b + math.log1p(-math.exp(log_a - log_b)) if log_b > log_a else log_a
    log_p = float(np.logaddexp(log_a, math.log(u) + log_width)) if u > 0 else log_a
    return float(min(max(float(ndtri_exp(log_p)), a), b))


def _planner_signature() -> inspect.Signature:
    """``TransferPlanner(space, ladder, options=None, *, <each PlannerOptions field>)``: what
    ``**kwargs`` takes, spelt out for :func:`inspect.signature`, ``help()`` and editors."""
    own = list(inspect.signature(TransferPlanner.__init__).parameters.values())[1:4]
    fields = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
        for f in dataclasses.fields(PlannerOptions)
    ]
    return inspect.Signature([*own, *fields])


TransferPlanner.__signature__ = _planner_signature()  # type: ignore[attr-defined]

"""The planner's law cache: the optimum-vs-scale law fitted per rung, refitted as the rungs grow.

:class:`LawCache` is the law half of :class:`~transfersearch.ladder.TransferPlanner`: which rungs
may feed the law for a rung (:meth:`LawCache.sources`), whether that law is pending on running
trials, the fit itself (:func:`~transfersearch.fitting.fit_sweep` on the source rungs' trials), its
:class:`LawPrediction` with the neighbourhood's spread, every :class:`FitAttempt`, and the rung a
collinear ladder lacks. The law is the one of ``docs/science.md`` §7; the refit policy is in
``docs/design.md``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from transfersearch.cost import cost_function
from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.engine import fit_sweep
from transfersearch.fitting.options import FitOptions
from transfersearch.ledger import complete_counts
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.space import Float, Int, TransferSpace
from transfersearch.sweep import Sweep

if TYPE_CHECKING:
    from transfersearch.fitting.result import Collinearity, Extrapolation
    from transfersearch.ladder import PlannerOptions

__all__ = ["FitAttempt", "LawCache", "LawPrediction"]

#: The planner's one logger: its decisions are found under this name whichever part made them.
logger = logging.getLogger("transfersearch.ladder")

#: Source rungs the law needs: a power law in scale has a slope and an intercept to fit.
MIN_SOURCE_RUNGS = 2

#: The coverage of the law's interval whose half-width is the neighbourhood's spread: ±1σ.
SPREAD_COVERAGE = 0.68

#: A refit that leaves the neighbourhood in place (its centre moved by at most this fraction of
#: the spread, the spread changed by at most this fraction, per coordinate) has *settled*: the
#: next refit of that rung's law waits for the square of the growth the last one waited for.
SETTLED = 0.1

#: The largest growth a settled law waits for before its next refit (``refit_growth`` when that
#: is larger): a law is never kept past four times the trials it was fitted on.
MAX_SETTLED_GROWTH = 4.0

#: What a failing fit may raise and the planner survives: bad data for the law (too few usable
#: trials, a degenerate design) or a numerical failure. Anything else is a bug and propagates.
_FIT_ERRORS: tuple[type[BaseException], ...] = (
    TransferSearchError,
    ValueError,
    np.linalg.LinAlgError,
    ArithmeticError,  # FloatingPointError, OverflowError, ZeroDivisionError
)


class LawPrediction(NamedTuple):
    """The law's optimum at a rung and how far around it to look.

    Unpacks as ``center, spread = prediction``.

    Attributes:
        center: the predicted optimum per numeric coordinate (natural units).
        spread: the neighbourhood's standard deviation per coordinate: natural-log units for a
            log coordinate, natural units otherwise; never below the planner's ``min_spread``.
    """

    center: dict[str, float]
    spread: dict[str, float]


@dataclass(frozen=True)
class FitAttempt:
    """One fit of the optimum-vs-scale law for a rung, as the planner ran it.

    Attributes:
        rung: the rung the law predicts for.
        trials: complete trials per source rung that went into the fit.
        error: why the fit failed (``"ExceptionType: message"``); None when it succeeded.
        diagnostics: what the fit found (``Extrapolation.diagnostics``; each also logged).
    """

    rung: int
    trials: Mapping[Scale, int]
    error: str | None
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the fit succeeded."""
        return self.error is None

    @property
    def warnings(self) -> tuple[str, ...]:
        """The diagnostics :func:`transfersearch.extrapolate` warns of (``act``), as
        ``"TransferSearchWarning: <message>"``."""
        name = TransferSearchWarning.__name__
        return tuple(f"{name}: {d.message}" for d in self.diagnostics if d.act)


class _Fitted(NamedTuple):
    """The last fit of one rung's law: complete trials per fitted rung, the prediction, and the
    growth of a fitted rung that triggers the next refit."""

    counts: dict[Scale, int]
    prediction: LawPrediction | None
    growth: float


class LawCache:
    """The law fitted for each rung, kept until its source rungs have grown enough to refit.

    The refit schedule (:meth:`prediction`): a rung's law is refitted when the set of rungs it
    fits changes or one of them has grown by a factor since the last fit. The factor starts at
    ``refit_growth``; after a refit whose prediction *settled* (the neighbourhood's centre moved
    by at most :data:`SETTLED` of its spread and the spread changed by at most that fraction, in
    every coordinate) it is squared, up to :data:`MAX_SETTLED_GROWTH`, and after one that moved
    it is ``refit_growth`` again. A law that keeps moving is refitted every 1.25x; one that has
    stopped moving costs a few fits however long the study runs.

    Args:
        space: the swept space; its Float and Int coordinates are the law's parameters.
        ladder: the rungs in cost order.
        options: the planner's options; the cache reads ``cost`` (passed to the fit),
            ``min_trials`` (complete trials a rung needs to be a source of the law),
            ``min_spread`` (the neighbourhood's smallest spread, see :class:`LawPrediction`),
            ``seed`` (the fit's; None: 0, so that the law is the same in every process),
            ``refit_growth``, ``direction`` and ``diverged_beyond`` (passed to the fit).

    Attributes:
        fit_options: the options of every fit of the law, made once.
    """

    def __init__(
        self, space: TransferSpace, ladder: tuple[Scale, ...], options: PlannerOptions
    ) -> None:
        self.space = space
        self.ladder = ladder
        self.options = options
        self.cost: Callable[[Scale], float] = cost_function(options.cost)
        self.names = [n for n, d in space.distributions.items() if isinstance(d, (Float, Int))]
        # rung -> its last fit (complete trials per fitted rung, prediction, next growth)
        self._cache: dict[int, _Fitted] = {}
        self._attempts: list[FitAttempt] = []
        self._suggested: Scale | None = None
        self.fit_options = FitOptions(
            params=tuple(self.names),
            seed=0 if options.seed is None else options.seed,
            diverged_beyond=options.diverged_beyond,
        )

    @property
    def attempts(self) -> tuple[FitAttempt, ...]:
        """Every fit so far, in order."""
        return tuple(self._attempts)

    @property
    def suggested_rung(self) -> Scale | None:
        """The separating rung the latest fit found missing (None: none missing)."""
        return self._suggested

    def sources(self, rung: int, complete: Mapping[Scale, int]) -> dict[Scale, int]:
        """The rungs other than ``rung`` with at least ``min_trials`` complete trials (the law
        needs two of them)."""
        target = self.ladder[rung]
        return {s: n for s, n in complete.items() if s != target and n >= self.options.min_trials}

    def pending(self, rung: int, complete: Mapping[Scale, int], in_flight: Sequence[int]) -> bool:
        """Whether fewer than two rungs feed the law for ``rung`` now but two would once the
        trials ``in_flight`` (per rung, cost order) completed. False with no numeric coordinate."""
        if not self.names:
            return False
        if len(self.sources(rung, complete)) >= MIN_SOURCE_RUNGS:
            return False
        target = self.ladder[rung]
        merged = {s: n for s, n in complete.items() if s != target}
        for other, count in enumerate(in_flight):
            if other != rung and count > 0:
                scale = self.ladder[other]
                merged[scale] = merged.get(scale, 0) + count
        return sum(n >= self.options.min_trials for n in merged.values()) >= MIN_SOURCE_RUNGS

    def prediction(self, rung: int, observations: Sequence[Observation]) -> LawPrediction | None:
        """The law's prediction at ``rung``, from the cache unless a fitted rung is new or has
        grown by the rung's refit factor (``refit_growth``, squared after each refit that
        settled, see the class docstring); None when fewer than two other rungs qualify or the
        fit failed.

        Once ``rung`` has complete trials of its own, they are fitted too: the one
        model then predicts that rung's own optimum, which its trials inform as well as the law
        (docs/science.md §7.5), so the neighbourhood follows what the rung itself shows."""
        if not self.names:
            return None
        complete = complete_counts(observations)
        counts = self.sources(rung, complete)
        if len(counts) < MIN_SOURCE_RUNGS:
            return None
        target = self.ladder[rung]
        if complete.get(target, 0):
            counts[target] = complete[target]
        cached = self._cache.get(rung)
        same_rungs = cached is not None and set(cached.counts) == set(counts)
        if cached is not None and same_rungs:
            last, growth = cached.counts, cached.growth
            if all(n < growth * last[s] or n == last[s] for s, n in counts.items()):
                return cached.prediction
        result = self._fit(rung, [o for o in observations if o.scale in counts], counts)
        growth = self.options.refit_growth
        if cached is not None and same_rungs and self._settled(cached.prediction, result):
            growth = min(cached.growth**2, max(MAX_SETTLED_GROWTH, growth))
            logger.debug("the law for rung %d settled; next refit at %.3g x", rung, growth)
        self._cache[rung] = _Fitted(counts, result, growth)
        return result

    def _settled(self, before: LawPrediction | None, after: LawPrediction | None) -> bool:
        """Whether a refit left the neighbourhood in place: both fits succeeded, and in every
        coordinate the centre moved by at most :data:`SETTLED` of the spread (log units for a
        log coordinate, as the draws are made) and the spread changed by at most that fraction."""
        if before is None or after is None:
            return False
        for name in self.names:
            old, new = before.spread[name], after.spread[name]
            if not (old > 0 and new > 0) or abs(new - old) > SETTLED * old:
                return False
            dist = self.space.distributions[name]
            a, b = before.center[name], after.center[name]
            logged = getattr(dist, "log", False) and a > 0 and b > 0
            moved = abs(math.log(b / a)) if logged else abs(b - a)
            if not moved <= SETTLED * new:
                return False
        return True

    def _fit(
        self, rung: int, usable: list[Observation], counts: Mapping[Scale, int]
    ) -> LawPrediction | None:
        """Fit the law on ``usable`` and predict at ``rung``; a failure is logged and recorded,
        and so are the fit's diagnostics (INFO for those a user of ``extrapolate`` is warned
        of, DEBUG for the rest)."""
        sweep = Sweep(tuple(usable), self.space, self.options.direction, self.cost)
        try:
            fit = fit_sweep(sweep, self.ladder[rung], self.fit_options, walk_forward=False)
            self._note_collinearity(fit.collinearity)
            result = self._predicted(fit)
        except _FIT_ERRORS as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._log_failure(rung, error, counts)
            self._attempts.append(FitAttempt(rung, dict(counts), error))
            return None
        attempt = FitAttempt(rung, dict(counts), None, fit.diagnostics)
        for message in attempt.warnings:
            logger.info("the law fit for rung %d warned: %s", rung, message)
        for diagnostic in fit.diagnostics:
            if not diagnostic.act:
                logger.debug("the law fit for rung %d noted: %s", rung, diagnostic.message)
        self._attempts.append(attempt)
        logger.debug("the law for rung %d predicts %s", rung, result)
        return result

    def _predicted(self, fit: Extrapolation) -> LawPrediction:
        """The fit's point and the neighbourhood's spread from its interval."""
        bounds = fit.interval(SPREAD_COVERAGE)
        spread = {n: self._spread(n, float(bounds[n][0]), float(bounds[n][1])) for n in self.names}
        return LawPrediction({n: float(fit.params[n]) for n in self.names}, spread)

    def _log_failure(self, rung: int, error: str, counts: Mapping[Scale, int]) -> None:
        sources = {self.ladder.index(s) if s in self.ladder else s: n for s, n in counts.items()}
        logger.warning(
            "the law for rung %d failed to fit (%s); complete trials per source rung: %s. "
            "Its trials go to the base sampler until those rungs grow by %g x",
            rung,
            error,
            sources,
            self.options.refit_growth,
        )

    def _note_collinearity(self, found: Collinearity | None) -> None:
        """Keep (and log once) the rung that would separate scale variables moving together."""
        suggested = None if found is None else found.suggested_scale
        if found is not None and suggested is not None and suggested != self._suggested:
            logger.info(
                "scale variables %s move together over the fitted rungs (|corr| %.3f): their "
                "exponents come from the prior. A rung at %r would separate them.",
                " and ".join(found.variables),
                found.correlation,
                suggested,
            )
        self._suggested = suggested

    def _spread(self, name: str, low: float, high: float) -> float:
        """Half the interval ``[low, high]``, in log units for a log coordinate, at least
        ``min_spread`` (times the range for a linear coordinate)."""
        dist = self.space.distributions[name]
        assert isinstance(dist, (Float, Int))  # self.names holds Float and Int coordinates only
        if dist.log and low > 0 and high > 0:
            return max(0.5 * math.log(high / low), self.options.min_spread)
        return max(0.5 * (high - low), self.options.min_spread * (dist.high - dist.low))

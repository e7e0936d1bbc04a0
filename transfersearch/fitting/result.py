"""The typed results of :func:`transfersearch.extrapolate` and :func:`transfersearch.validate`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from transfersearch._summary_text import summary_text
from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.findings import Collinearity
from transfersearch.fitting.laws import PowerLaw
from transfersearch.fitting.onemodel import Fold
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.portfolio import DEFAULT_SEED, Portfolio, choose_candidates
from transfersearch.fitting.target import TargetLoss
from transfersearch.scale import Scale
from transfersearch.sweep import Direction

if TYPE_CHECKING:
    from transfersearch.space import Hyperparameters, TransferSpace

__all__ = ["Collinearity", "Extrapolation", "Validation"]


def _exp(value: float) -> float:
    """``exp`` that gives ``inf`` past the float range (an interval that wide says "unknown")."""
    return math.exp(value) if value < _LOG_MAX else math.inf


_LOG_MAX = math.log(np.finfo(np.float64).max)


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise TransferSearchError(f"`level` must be in (0, 1), e.g. 0.9, but got level={level!r}.")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


@dataclass(frozen=True, eq=False)
class Extrapolation:
    """The predicted optimum at the target scale, and the evidence behind it.

    Attributes:
        target: the scale predicted for.
        params: the decision: the point of least posterior expected loss at the target, a
            diverged run charged :attr:`divergence_cost` (natural units). Use this for the big
            run.
        law_params: the law's posterior-mean point (natural units); a linear parameter whose
            trials are all ≥ 0 is held at ≥ 0 there, as in its interval.
        laws: each parameter's law (posterior mean and covariance of intercept and exponents).
        optima: the per-rung optima read off the one model, cheapest rung first.
        model: ``"drift"`` (the drift prior's scale integrated over) or ``"constant"``.
        model_scores: the mean walk-forward regret of the model (named as :attr:`model`) and of
            copying the costliest training rung's best trial (``"copy"``), metric units (NaN: no
            fold).
        walk_forward: the folds behind the scores (each rung predicted from cheaper ones).
        selection_reason: the method, in words.
        scale_variables: the scale variables the laws use.
        log_params: parameters fitted in log space.
        stderr: the posterior-predictive spread of the target's optimum — half its central
            68% interval, the standard deviation for a normal posterior — fitted coordinates (log
            for log parameters), calibrated walk-forward.
        samples: (n, d) posterior-predictive draws of the target's optimum, fitted coordinates
            (calibrated; a non-negative linear parameter's draws held at ≥ 0).
        calibration: the factor walk-forward put on the predictive spread, at its posterior's
            maximum (each draw in :attr:`samples` takes its own factor from that posterior;
            1 where the target is one of the fitted rungs: its own posterior is not
            calibrated).
        decision_shift: ``params − law_params`` in fitted coordinates.
        collinearity: scale variables the ladder moves together, or None.
        extrapolation_decades: distance from the target to the nearest rung, log10 units.
        ladder_span_decades: the largest distance between two rungs, log10 units.
        direction: ``"minimize"`` or ``"maximize"``.
        space: the :class:`~transfersearch.space.TransferSpace` the sweep stored, or None.
        p_diverge: the posterior probability that a run at ``params`` diverges (0 when no
            trial diverged). docs/science.md §8.
        p_diverge_law: the same at ``law_params``.
        divergence_cost: the loss the decision charges a diverged run (metric units).
        n_crashed: trials that crashed (raised) and were left out of the fit.
        stable_up_to: the largest value of each parameter that a stable trial reached at the
            costliest rung (natural units).
        target_loss: the decision's objective (posterior draws), used by :meth:`candidates`.
        target_from_ladder: scale variables the caller's target left out that never varied over
            the ladder, kept at the ladder's value (already in ``target``).
        duplicates_collapsed: exact copies among the observations, each counted once.
        diagnostics: what the fit found worth saying, in the order found; ``act=True`` ones are
            what :func:`transfersearch.extrapolate` warns about.
    """

    target: Scale
    params: dict[str, float]
    law_params: dict[str, float]
    laws: dict[str, PowerLaw]
    optima: tuple[ScaleOptimum, ...]
    model: str
    model_scores: dict[str, float]
    walk_forward: tuple[Fold, ...]
    selection_reason: str
    scale_variables: tuple[str, ...]
    log_params: tuple[str, ...]
    stderr: dict[str, float]
    samples: FloatArray = field(repr=False)
    calibration: float
    decision_shift: dict[str, float]
    collinearity: Collinearity | None
    extrapolation_decades: float
    ladder_span_decades: float
    direction: Direction
    space: TransferSpace | None = field(default=None, repr=False)
    p_diverge: float = 0.0
    p_diverge_law: float = 0.0
    divergence_cost: float = 0.0
    n_crashed: int = 0
    stable_up_to: dict[str, float] = field(default_factory=dict)
    target_loss: TargetLoss | None = field(default=None, repr=False)
    target_from_ladder: dict[str, float] = field(default_factory=dict)
    duplicates_collapsed: int = 0
    diagnostics: tuple[Diagnostic, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v:.4g}" for k, v in self.params.items())
        return f"Extrapolation(target={self.target!r}, params={{{params}}}, model={self.model!r})"

    def interval(self, level: float = 0.9) -> dict[str, tuple[float, float]]:
        """Central interval of the target optimum per parameter, natural units: the quantiles
        of the calibrated posterior-predictive draws (:attr:`samples`). Where the target is one
        of the fitted rungs, they are that rung's own posterior optimum, which its trials
        inform (docs/science.md §7.5): :attr:`law_params`, the line through every rung, may then
        lie outside it.

        Raises:
            TransferSearchError: ``level`` is not in (0, 1).
        """
        _check_level(level)
        result: dict[str, tuple[float, float]] = {}
        for j, name in enumerate(self.laws):
            column = self.samples[:, j] if self.samples.size else np.zeros(0)
            column = column[np.isfinite(column)]
            if len(column) < 2:  # no spread to read: the law's point, natural units
                result[name] = (self.law_params[name], self.law_params[name])
                continue
            low, high = (float(q) for q in np.quantile(column, [0.5 - level / 2, 0.5 + level / 2]))
            if name in self.log_params:
                result[name] = (_exp(low), _exp(high))
            else:
                result[name] = (low, high)
        return result

    @property
    def expected_loss(self) -> float:
        """The decision's expected loss above the target's own optimum, over the posterior
        (metric units, positive = worse; docs/science.md §9): ``mean_s L_s(params)``. Each
        draw's own optimum loses 0, so this is the expected value of perfect information about
        the target's optimum — the most that more trials of any kind could save there. NaN
        without a target loss model."""
        if self.target_loss is None:
            return math.nan
        return self.target_loss.expected_loss(self.target_loss.decision)

    def varied_exponents(self, name: str) -> dict[str, float]:
        """``name``'s law exponents over the scale variables the ladder varied (one it held
        constant has only its prior's exponent, which the target may still move along)."""
        return {
            variable: exponent
            for variable, exponent in self.laws[name].exponents.items()
            if len({o.scale[variable] for o in self.optima}) > 1
        }

    def hyperparameters(self, space: TransferSpace | None = None) -> Hyperparameters:
        """Concrete hyperparameters at the target: ``space.concretize(self.params, self.target)``,
        each :class:`~transfersearch.space.Int` coordinate first moved to its grid
        (:meth:`~transfersearch.space.TransferSpace.on_grid`).

        Args:
            space: the space the sweep used; default the one stored with the study or experiment
                (:attr:`space`).

        Raises:
            TransferSearchError: no space given and none stored with the source.
        """
        chosen = space if space is not None else self.space
        if chosen is None:
            raise TransferSearchError(
                "this result has no TransferSpace: its source stored none (only a study run with "
                "TransferSampler or an experiment run with TransferSearch does). Pass the space "
                "the sweep used: res.hyperparameters(space)."
            )
        return chosen.concretize(chosen.on_grid(self.params), self.target)

    def candidates(
        self,
        k: int,
        *,
        space: TransferSpace | None = None,
        seed: int = DEFAULT_SEED,
        n_draws: int | None = None,
    ) -> Portfolio:
        """The ``k`` target runs that minimise the expected best loss among them.

        ``E[min_i L(x_i)]`` over the posterior draws of the target's optimum, curvature and
        divergence law, a diverged run charged :attr:`divergence_cost` (docs/science.md §9):
        the decision's own objective, so ``k = 1`` is :attr:`params`. Deterministic for a
        given ``seed``.

        Args:
            k: how many runs (1–3 is typical for big runs).
            space: concretise each run with this space (default :attr:`space`; none: the
                runs carry no hyperparameters).
            seed: seed of the starting points.
            n_draws: deprecated and ignored (the draws are the fit's own).

        Returns:
            A :class:`~transfersearch.fitting.portfolio.Portfolio` (iterable of
            :class:`~transfersearch.fitting.portfolio.Candidate`).

        Raises:
            TransferSearchError: ``k`` is not a positive integer, or the result carries no
                loss model (it was not made by :func:`~transfersearch.extrapolate`).
        """
        if self.target_loss is None:
            raise TransferSearchError(
                "this result carries no target loss model (target_loss is None): candidates() "
                "needs a result made by transfersearch.extrapolate(). Re-run extrapolate()."
            )
        chosen = space if space is not None else self.space
        return choose_candidates(self.target_loss, self.target, k, seed=seed, space=chosen)

    def summary(self) -> str:
        """A few lines: the decision, the model and why, each parameter's decision, law point and
        90% interval, the divergence risk and cost, crashed trials, then the :attr:`diagnostics`
        that ask nothing of the user, in order (rendered by ``transfersearch._summary_text``)."""
        return summary_text(self)


@dataclass(frozen=True, eq=False)
class Validation:
    """Leave-the-largest-scale-out check, with the walk-forward table of the full fit.

    Attributes:
        held_out: the scale predicted (the costliest rung by default).
        predicted: the decision predicted there from the other rungs.
        observed: the held-out rung's optimum (read off the valley fitted to every rung).
        log_error: ``log(predicted / observed)`` for log parameters, ``predicted − observed`` else.
        relative_error: ``predicted / observed − 1`` for log parameters, ``predicted − observed``.
        within_interval: whether the observed optimum lies in the prediction's 90% interval.
        regret: metric excess of the prediction on the held-out rung's fitted surface.
        relative_regret: ``regret / |observed best value|``.
        walk_forward: the walk-forward folds of the fit without the held-out rung.
        extrapolation: the fit without the held-out rung.
        held_out_optimum: the held-out rung's optimum.
    """

    held_out: Scale
    predicted: dict[str, float]
    observed: dict[str, float]
    log_error: dict[str, float]
    relative_error: dict[str, float]
    within_interval: dict[str, bool]
    regret: float | None
    relative_regret: float | None
    walk_forward: tuple[Fold, ...]
    extrapolation: Extrapolation = field(repr=False)
    held_out_optimum: ScaleOptimum = field(repr=False)

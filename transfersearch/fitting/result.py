"""The typed results of :func:`transfersearch.extrapolate` and :func:`transfersearch.validate`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.boundary import StabilityBoundary
from transfersearch.fitting.coords import FloatArray, to_fitted
from transfersearch.fitting.decision import TargetLoss
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.findings import INDENTED_KINDS
from transfersearch.fitting.laws import PowerLaw
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.portfolio import DEFAULT_SEED, N_DRAWS, Portfolio, choose_candidates
from transfersearch.fitting.selection import Fold
from transfersearch.scale import Scale
from transfersearch.sweep import Direction

if TYPE_CHECKING:
    from transfersearch.space import Hyperparameters, TransferSpace

__all__ = ["Collinearity", "Extrapolation", "Validation"]


@dataclass(frozen=True)
class Collinearity:
    """Scale variables that move together along the ladder.

    Attributes:
        variables: the variables involved.
        correlation: the largest absolute correlation of their logs over the rungs.
        suggested_scale: the extra rung (a corner of the ladder's box) that would separate them
            best: the one that most raises the smallest singular value of the centred log-scales.
    """

    variables: tuple[str, ...]
    correlation: float
    suggested_scale: Scale


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
        params: the decision: the point minimising the expected target loss under the prediction's
            uncertainty and the valley's shape (natural units). Use this for the big run.
        law_params: the chosen model's point prediction (natural units).
        laws: the chosen model's law per parameter.
        optima: the per-rung optima (read off the pooled valley), cheapest rung first.
        model: the model walk-forward validation kept.
        model_scores: each candidate's weighted mean walk-forward regret (metric units; NaN when
            too few rungs to validate).
        walk_forward: the folds behind the scores.
        selection_reason: why ``model`` was kept, in words.
        scale_variables: the scale variables the laws use.
        log_params: parameters fitted in log space.
        stderr: predictive standard error of each law point, fitted coordinates (log for log
            parameters): the larger of the law's own (covariance and scatter) and the resampling
            spread.
        samples: (n, d) predictions of the by-rung bootstrap, fitted coordinates.
        stability: the bootstrap standard deviation of each prediction, fitted coordinates.
        unstable: parameters whose bootstrap swing (90%) exceeds the law's own 90% interval.
        decision_shift: ``params − law_params`` in fitted coordinates.
        collinearity: scale variables the ladder moves together, or None.
        extrapolation_decades: distance from the target to the nearest rung, log10 units.
        ladder_span_decades: the largest distance between two rungs, log10 units.
        direction: ``"minimize"`` or ``"maximize"``.
        space: the :class:`~transfersearch.space.TransferSpace` the sweep stored (a study run with
            ``TransferSampler``, an experiment run with ``TransferSearch``; see
            :func:`transfersearch.stored_space`), or None.
        boundary: the stability boundary of each parameter whose trials diverged on one side
            (:class:`~transfersearch.fitting.boundary.StabilityBoundary`: the censored law, its
            prediction at the target, ``p_diverge(x)``); empty when no trial diverged.
        boundary_shift: how far the boundary moved the decision back from the valley's own
            (fitted coordinates; 0 where it did not): included in ``decision_shift``.
        p_diverge: the probability that a run at ``params`` diverges (every boundary; 0 when
            no trial diverged). docs/science.md §8.
        p_diverge_law: the same at ``law_params``.
        stable_up_to: the largest value of each parameter that a stable trial reached at the
            costliest rung (natural units): any boundary there lies above it.
        target_loss: what the decision knows about the target's loss (prediction, valley,
            boundaries), used by :meth:`candidates`.
        target_from_ladder: scale variables the caller's target left out that never varied over
            the ladder, kept at the ladder's value (already in ``target``).
        duplicates_collapsed: exact copies among the observations (same scale, parameters and
            value), each counted once (:func:`transfersearch.observations.collapse_duplicates`).
        diagnostics: what the fit found worth saying
            (:class:`~transfersearch.fitting.diagnostics.Diagnostic`: rungs left out or fallen
            back, a far target, ...), in the order found; ``act=True`` ones are what
            :func:`transfersearch.extrapolate` warns about.
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
    stability: dict[str, float]
    unstable: tuple[str, ...]
    decision_shift: dict[str, float]
    collinearity: Collinearity | None
    extrapolation_decades: float
    ladder_span_decades: float
    direction: Direction
    space: TransferSpace | None = field(default=None, repr=False)
    boundary: dict[str, StabilityBoundary] = field(default_factory=dict)
    boundary_shift: dict[str, float] = field(default_factory=dict)
    p_diverge: float = 0.0
    p_diverge_law: float = 0.0
    stable_up_to: dict[str, float] = field(default_factory=dict)
    target_loss: TargetLoss | None = field(default=None, repr=False)
    target_from_ladder: dict[str, float] = field(default_factory=dict)
    duplicates_collapsed: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()

    def interval(self, level: float = 0.9) -> dict[str, tuple[float, float]]:
        """Central interval of the target optimum per parameter, natural units.

        Around the law's point; each side the wider of ``z·stderr`` and the bootstrap percentile.

        Raises:
            TransferSearchError: ``level`` is not in (0, 1).
        """
        z = _check_level(level)
        result: dict[str, tuple[float, float]] = {}
        for j, name in enumerate(self.laws):
            point = self._coord(name)
            below = above = z * self.stderr[name]
            column = self.samples[:, j] if self.samples.size else np.zeros(0)
            column = column[np.isfinite(column)]
            if len(column) >= 2:
                low_q, high_q = np.quantile(column, [0.5 - level / 2.0, 0.5 + level / 2.0])
                below = max(below, point - float(low_q))
                above = max(above, float(high_q) - point)
            low, high = point - below, point + above
            if name in self.log_params:
                result[name] = (_exp(low), _exp(high))
            else:
                result[name] = (low, high)
        return result

    def _coord(self, name: str) -> float:
        return to_fitted(self.law_params[name], name in self.log_params)

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
        n_draws: int = N_DRAWS,
    ) -> Portfolio:
        """The ``k`` target runs that minimise the expected best loss among them.

        ``E[min_i L(x_i)]`` under the prediction's uncertainty (the optimum ``N(law, stderr²)``,
        each stability boundary ``N(b̂, sd²)``) and the valley's shape, a diverged run
        charged the sweep's worst excess (docs/science.md §9). ``k = 1`` is :attr:`params`;
        every run keeps the decision's stability limits. Deterministic for a given ``seed``.

        Args:
            k: how many runs (1–3 is typical for big runs).
            space: concretise each run with this space (default :attr:`space`; none: the
                runs carry no hyperparameters).
            seed: seed of the draws.
            n_draws: draws of the optimum and boundaries.

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
        return choose_candidates(self.target_loss, k, seed=seed, n_draws=n_draws, space=chosen)

    def summary(self) -> str:
        """A few lines: the decision, the model and why, how the decision differs from the law,
        then the :attr:`diagnostics` that ask nothing of the user (unstable parameters, collinear
        scale variables, rungs' edges and bounds, stability boundaries), in order."""
        lines = [
            f"target {self.target!r}: {self.extrapolation_decades:.2g} decades beyond the ladder "
            f"(which spans {self.ladder_span_decades:.2g}); model {self.model!r} "
            f"({self.selection_reason})."
        ]
        if self.target_from_ladder:
            kept = ", ".join(f"{k}={v:g}" for k, v in self.target_from_ladder.items())
            lines.append(
                f"kept from the ladder: {kept} (not in the target given, and never varied over "
                "the ladder); give another value in the target to move it."
            )
        if self.duplicates_collapsed:
            lines.append(
                f"{self.duplicates_collapsed} exact duplicate observation(s) (same scale, "
                "parameters and value) counted once: a copy is not a replicate."
            )
        if self.walk_forward:
            scores = ", ".join(f"{k} {v:.3g}" for k, v in self.model_scores.items())
            lines.append(f"walk-forward regret over {len(self.walk_forward)} fold(s): {scores}.")
        else:
            lines.append(
                f"not validated: too few rungs to validate ({len(self.optima)}; walk-forward "
                "predicts a rung from two or more cheaper ones that vary the way it moves). Add a "
                "rung to validate the model."
            )
        for name in self.params:
            shift = self.decision_shift[name] - self.boundary_shift.get(name, 0.0)
            lines.append(
                f"  {name}: decision {self.params[name]:.4g}, law {self.law_params[name]:.4g}"
                + (
                    f" (moved {shift:+.3g} in {'log ' if name in self.log_params else ''}units "
                    "toward the gentler wall: the valley is asymmetric and the prediction "
                    "uncertain)"
                    if abs(shift) > 1e-12
                    else ""
                )
            )
        for note in self.diagnostics:
            if not note.act:  # the act=True ones are the warnings extrapolate() raised
                indent = "  " if note.kind in INDENTED_KINDS else ""
                lines.append(indent + note.message)
        return "\n".join(lines)


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

"""The typed results of :func:`transfersearch.extrapolate` and :func:`transfersearch.validate`."""

from __future__ import annotations

import math
from collections.abc import Sequence
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

__all__ = [
    "Collinearity",
    "Extrapolation",
    "RungValue",
    "Validation",
    "leverage_shares",
    "variance_removed",
]


def _exp(value: float) -> float:
    """``exp`` that gives ``inf`` past the float range (an interval that wide says "unknown")."""
    return math.exp(value) if value < _LOG_MAX else math.inf


_LOG_MAX = math.log(np.finfo(np.float64).max)


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise TransferSearchError(f"`level` must be in (0, 1), e.g. 0.9, but got level={level!r}.")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


@dataclass(frozen=True)
class RungValue:
    """What more trials at one rung would buy at the target (:meth:`Extrapolation.trials_value`,
    docs/science.md §9.1). Fractions are of the target's predictive variance (``stderr²``) per
    parameter (``by_param``); ``share`` and ``removed`` weigh the parameters with a finite spread
    by their part of the expected loss that spread causes, ``½ H_jj stderr_j²`` (the valley's
    curvature; equal weights where it is not known), so they are fractions of that loss.

    Attributes:
        scale: the rung.
        n_trials: its complete finite trials now.
        extra: the trials added at it in the what-if (the same number at every rung).
        share: ``h_r² · var_r``: the part of the target's variance that this rung's optimum's
            error accounts for (to first order).
        removed: the part that ``extra`` more trials there would remove (``var_r`` shrunk by
            ``n/(n + extra)``, the line refitted): more than ``share`` where the refitted line
            leans on the rung more, at most the rungs' shares together.
        by_param: per parameter, ``(share, removed)``.
    """

    scale: Scale
    n_trials: int
    extra: int
    share: float
    removed: float
    by_param: dict[str, tuple[float, float]]


def _design(log_scales: FloatArray, target: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``[1, ℓ − ℓ̄]`` per rung and at the target (ℓ̄ the rungs' mean; centring only conditions)."""
    rows = np.asarray(log_scales, dtype=np.float64)
    rows = rows[:, None] if rows.ndim == 1 else rows
    centre = rows.mean(axis=0)
    ones = np.ones((rows.shape[0], 1))
    point = np.concatenate([[1.0], np.ravel(target) - centre])
    return np.hstack([ones, rows - centre]), point


def _prediction_variance(design: FloatArray, point: FloatArray, variances: FloatArray) -> float:
    """``x_tᵀ (XᵀWX)⁺ x_t``, ``W = diag(1/var)`` (an infinite variance weighs nothing)."""
    weights = np.where(np.isfinite(variances), 1.0 / variances, 0.0)
    inverse = np.linalg.pinv(design.T @ (weights[:, None] * design), rcond=1e-10)
    return float(point @ inverse @ point)


def _clean(variances: FloatArray) -> FloatArray:
    """Variances as the leverage reads them: NaN or negative → inf (no information), 0 floored
    at a tiny fraction of the largest finite one (a rung known exactly would pin the line)."""
    v = np.asarray(variances, dtype=np.float64).copy()
    v[~(v >= 0)] = np.inf
    finite = np.isfinite(v)
    if finite.any():
        floor = max(float(v[finite].max()) * 1e-12, 1e-300)
        v[finite] = np.maximum(v[finite], floor)
    return v


def leverage_shares(
    log_scales: FloatArray, variances: FloatArray, target: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Each rung's leverage on the line's prediction at ``target`` and its share of its variance.

    The line is the weighted least-squares fit of the rungs' optima on ``x = [1, ℓ − ℓ̄]`` (ℓ the
    log scale variables, one row per rung), ``W = diag(1/var_r)``; its prediction at ``x_t`` is
    ``Σ_r h_r y_r`` with ``h_r = x_tᵀ (XᵀWX)⁺ x_r w_r`` (pseudo-inverse: collinear or unvaried
    scale variables leave the direction they cannot identify out), so its variance is
    ``Σ_r h_r² var_r = x_tᵀ (XᵀWX)⁺ x_t`` and ``h_r² var_r`` is rung ``r``'s share
    (docs/science.md §9.1).

    Args:
        log_scales: (R, m) log scale variables per rung.
        variances: (R,) variance of each rung's optimum (``inf``: the rung says nothing).
        target: (m,) log scale variables of the target.

    Returns:
        ``(h, share)``, each (R,); a rung with infinite variance has ``h = share = 0``.
    """
    design, point = _design(log_scales, target)
    v = _clean(variances)
    weights = np.where(np.isfinite(v), 1.0 / v, 0.0)
    inverse = np.linalg.pinv(design.T @ (weights[:, None] * design), rcond=1e-10)
    leverage = (design @ (inverse @ point)) * weights
    share = np.where(weights > 0, leverage**2 * np.where(np.isfinite(v), v, 0.0), 0.0)
    return leverage, share


def variance_removed(
    log_scales: FloatArray, variances: FloatArray, target: FloatArray, shrink: FloatArray
) -> FloatArray:
    """Per rung ``r``, how much the line's variance at ``target`` falls when ``var_r`` alone is
    multiplied by ``shrink[r]`` (``n_r / (n_r + k_r)`` for ``k_r`` more trials): ``V(var) −
    V(var with var_r · shrink_r)``, ``V = x_tᵀ (XᵀWX)⁺ x_t`` (:func:`leverage_shares`)."""
    design, point = _design(log_scales, target)
    v = _clean(variances)
    before = _prediction_variance(design, point, v)
    removed = np.zeros(len(v))
    for r in range(len(v)):
        if not np.isfinite(v[r]) or not 0.0 <= shrink[r] < 1.0:
            continue
        after = v.copy()
        after[r] = max(v[r] * shrink[r], 1e-300)
        removed[r] = max(before - _prediction_variance(design, point, after), 0.0)
    return removed


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

    def trials_value(self, extra: int | None = None) -> tuple[RungValue, ...]:
        """Which rung more trials would buy most at the target (docs/science.md §9.1).

        To first order the target's optimum is a weighted least-squares line through the
        rungs' optima in log scale (:func:`leverage_shares`): rung ``r`` accounts for
        ``h_r² · var_r`` of its variance (``h_r`` its leverage on the prediction, ``var_r`` the
        variance of its optimum, the diagonal of :attr:`ScaleOptimum.covariance`), and ``k``
        more trials there shrink ``var_r`` by ``n_r / (n_r + k)``. Each rung's numbers are
        fractions of the target's predictive variance (``stderr²``, the line's part scaled by
        the :attr:`calibration`), weighed over the parameters with a finite spread by their part
        of the expected loss, ``½ H_jj stderr_j²`` (:class:`RungValue`); what the
        rungs' shares leave is the law's extrapolation, prior and drift, which no trial on these
        rungs removes. The same ``k`` shrinks a thin rung's variance by more (``n/(n + k)``);
        where that pays depends on its leverage. Cost per trial is not weighed. A target that
        is a rung reads that rung's own posterior (leverage 1).

        Args:
            extra: trials added at a rung in the what-if, the same at every rung (default: the
                rungs' median count). The same budget at each rung is what compares them:
                doubling each rung's own count would hand the densest rung the most trials.

        Returns:
            One :class:`RungValue` per rung, in :attr:`optima` order; empty where nothing can be
            said (no rung, no finite spread, a scale that is not positive).

        Raises:
            TransferSearchError: ``extra`` is not a positive integer.
        """
        if extra is not None and (
            isinstance(extra, bool) or not isinstance(extra, int) or extra < 1
        ):
            raise TransferSearchError(f"`extra` must be a positive integer, but got {extra!r}.")
        logs, target = self._log_scales()
        if logs is None or target is None:
            return ()
        own = np.all(np.isclose(logs, target, rtol=0.0, atol=1e-9), axis=1)
        counts = np.array([o.n_trials for o in self.optima], dtype=np.float64)
        typical = max(1.0, float(np.round(np.median(counts)))) if extra is None else extra
        added = np.full(len(counts), float(typical))
        shrink = np.where(counts > 0, counts / np.maximum(counts + added, 1.0), 1.0)
        factor = 1.0 if own.any() or not self.calibration > 0 else float(self.calibration) ** 2
        factor = factor if math.isfinite(factor) else 1.0
        by_param: dict[str, tuple[FloatArray, FloatArray]] = {}
        for name in self.laws:
            spread = self.stderr.get(name, math.nan)
            variances = np.array([_rung_variance(o, name) for o in self.optima])
            if own.any():  # the target is a rung: its own posterior, the others do not enter
                variances[~own] = np.inf
            if not (math.isfinite(spread) and spread > 0) or not np.isfinite(variances).any():
                continue
            _, share = leverage_shares(logs, variances, target)
            removed = variance_removed(logs, variances, target, shrink)
            total = max(spread**2, factor * float(share.sum()))
            by_param[name] = (factor * share / total, factor * removed / total)
        if not by_param:
            return ()
        weights = self._loss_weights(list(by_param))
        return tuple(
            RungValue(
                scale=o.scale,
                n_trials=o.n_trials,
                extra=int(added[r]),
                share=float(np.average([s[r] for s, _ in by_param.values()], weights=weights)),
                removed=float(np.average([m[r] for _, m in by_param.values()], weights=weights)),
                by_param={n: (float(s[r]), float(m[r])) for n, (s, m) in by_param.items()},
            )
            for r, o in enumerate(self.optima)
        )

    def _loss_weights(self, names: Sequence[str]) -> FloatArray:
        """Each parameter's part of the expected loss its spread causes at the target, to second
        order: ``½ H_jj stderr_j²`` (the valley's curvature, shared by every rung, times the
        predictive variance; the cross terms left out), docs/science.md §9.1. Equal weights where
        the curvature is not known or not finite and positive for every one of ``names``."""
        hessians = [o for o in self.optima if o.hessian is not None]
        equal = np.ones(len(names))
        if not hessians:
            return equal
        optimum = hessians[0]
        hessian = np.asarray(optimum.hessian, dtype=np.float64)
        try:
            curvature = np.array([hessian[k, k] for k in map(optimum.names.index, names)])
        except ValueError:  # a parameter the valley does not hold
            return equal
        weights: FloatArray = 0.5 * curvature * np.array([self.stderr[n] ** 2 for n in names])
        if not (np.all(np.isfinite(weights)) and np.all(weights > 0)):
            return equal
        return weights

    def _log_scales(self) -> tuple[FloatArray | None, FloatArray | None]:
        """The rungs' and the target's ln scale variables (None where one is missing or not
        positive)."""
        variables = self.scale_variables
        points = [o.scale for o in self.optima]
        try:
            values = np.array([[float(p[v]) for v in variables] for p in [*points, self.target]])
        except (KeyError, TypeError, ValueError, TransferSearchError):
            return None, None
        if not len(points) or not variables or not (np.isfinite(values) & (values > 0)).all():
            return None, None
        logs = np.log(values)
        return logs[:-1], logs[-1]

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


def _rung_variance(optimum: ScaleOptimum, name: str) -> float:
    """The variance of ``name``'s optimum at a rung (``inf`` where the rung does not have it)."""
    if name not in optimum.names:
        return math.inf
    index = optimum.names.index(name)
    value = float(np.asarray(optimum.covariance)[index, index])
    return value if value >= 0 else math.inf


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

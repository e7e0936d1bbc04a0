"""Per-scale optimum estimation and optimum-vs-scale power laws.

Two steps, both weighted least squares in *fitted coordinates*: ``log(p)`` for a log parameter
(learning rate, weight decay, τ, batch size: every positive parameter by default) and ``p`` itself
for a linear one.

1. :func:`estimate_optimum` — at one scale, a local quadratic model with interactions,
   ``f(u) = c + gᵀu + ½ uᵀHu``, fitted jointly over all swept coordinates to the best region of the
   trials (the ``k ≈ 2.5·√n`` lowest finite values, never fewer than ``2·n_coef + 2``, weighted
   ``1 − ¾t²`` by their normalised rank in value ``t``). Restricting the fit to the best region
   keeps divergence cliffs and the far walls of asymmetric valleys out of it; diverged trials
   (NaN / inf / failed) bound the region, because the optimum is confined to the box spanned by the
   finite trials (a box-constrained minimisation of the quadratic when the unconstrained one falls
   outside). Uncertainty: the delta method on ``u* = −H⁻¹g`` with the coefficients' sandwich
   covariance ``s²(AᵀWA)⁻¹``, floored at a tenth of the typical trial spacing. With too few finite
   trials for the quadratic it falls back to the best trial and says so.
2. :func:`fit_power_law` — for one parameter, the log-linear law
   ``coord* = intercept + Σ_k exponent_k · log(scale_k)``, i.e. ``p* = coefficient · Π scale_k^e_k``
   for a log parameter, fitted by weighted least squares with weights ``1 / stderr²`` of the optima
   (covariance inflated by the Birge ratio ``χ²/dof`` when the optima scatter more than their
   errors). Exponents may be fixed from theory; constant or collinear scale variables are dropped
   with a warning; with ``simplify`` an exponent whose 90% interval covers 0 is set to 0 (backward
   elimination), because fitting a drift that is not there costs more than missing a small one.

The joint model (one valley drifting with scale, shared curvature) lives in :mod:`transfersearch.
extrapolate` and reuses the pieces here. This follows Step Law's log-linear regression of optima on
scale (Li et al. 2025, SCIENCE.md §6) but replaces its grid argmin by the local quadratic.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation, TransferSearchWarning, as_observations
from transfersearch.scale import Scale

__all__ = [
    "Direction",
    "PowerLaw",
    "ScaleOptimum",
    "estimate_optimum",
    "fit_power_law",
    "resolve_log_params",
]

Direction = Literal["minimize", "maximize"]
FloatArray = NDArray[np.float64]

#: z-value of a two-sided 90% interval: an exponent with |estimate| < 1.645·stderr is shrunk to 0.
_Z90 = 1.6448536269514722
#: stderr floor, as a fraction of the typical trial spacing per coordinate.
_FLOOR_FRACTION = 0.1
#: A local model claiming an improvement over the best trial larger than this fraction of the value
#: spread it was fitted over (and than :data:`_DEPTH_NOISE` residual standard deviations) is
#: rejected; see :func:`_implausible`.
_DEPTH_FRACTION = 1.0
_DEPTH_NOISE = 3.0
#: A minimiser whose leverage exceeds this multiple of the largest fitted trial's is rejected.
_LEVERAGE_RATIO = 10.0

Method = Literal["quadratic", "fallback", "fallback-implausible"]


# ------------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ScaleOptimum:
    """The estimated optimum at one scale.

    Attributes:
        scale: where the trials ran.
        params: the estimated optimal parameters, in natural units.
        coords: the same in fitted coordinates (``log(p)`` for log parameters).
        stderr: standard error of each fitted coordinate (log-space for log parameters; ``inf`` for
            a parameter that was not swept at this scale).
        covariance: covariance of the fitted coordinates, in the order of ``names``.
        names: parameter order of ``covariance`` and ``hessian``.
        log_params: names fitted in log space.
        value: the model's best metric (in the user's direction), or the best trial's.
        hessian: curvature of the local model in fitted coordinates (minimisation sign), or None
            for a fallback estimate.
        n_trials: complete trials with a finite value at this scale.
        n_diverged: diverged (NaN, inf, failed) trials at this scale.
        n_used: trials inside the best region the quadratic was fitted to.
        method: ``"quadratic"`` (local quadratic model), ``"fallback"`` (best trial: too few
            trials for the model) or ``"fallback-implausible"`` (the model's minimum was not
            supported by the trials, see :func:`estimate_optimum`: the rank-weighted mean of the
            best trials, with their spread as stderr).
        at_boundary: the optimum was pulled onto the edge of the region the trials cover.
    """

    scale: Scale
    params: dict[str, float]
    coords: dict[str, float]
    stderr: dict[str, float]
    covariance: FloatArray
    names: tuple[str, ...]
    log_params: tuple[str, ...]
    value: float
    hessian: FloatArray | None
    n_trials: int
    n_diverged: int
    n_used: int
    method: Method
    at_boundary: bool

    def regret(self, params: Mapping[str, float]) -> float | None:
        """The local model's metric excess at ``params`` over its optimum, ``½ δᵀHδ`` (≥ 0).

        Args:
            params: a point in natural units with every name in :attr:`names`.

        Returns:
            The regret in metric units, or None for a fallback estimate (no local model).

        Raises:
            TransferSearchError: a name is missing or a log parameter is not positive.
        """
        if self.hessian is None:
            return None
        delta = np.empty(len(self.names))
        for index, name in enumerate(self.names):
            if name not in params:
                raise TransferSearchError(
                    f"regret() needs every parameter {list(self.names)}, but {name!r} is missing."
                )
            value = float(params[name])
            if name in self.log_params:
                if not value > 0.0:
                    raise TransferSearchError(
                        f"`{name}` is fitted in log space and must be > 0, but got {value!r}."
                    )
                value = math.log(value)
            delta[index] = value - self.coords[name]
        finite = np.isfinite(np.diag(self.hessian))
        sub = self.hessian[np.ix_(finite, finite)]
        return float(max(0.0, 0.5 * delta[finite] @ sub @ delta[finite]))


@dataclass(frozen=True, eq=False)
class PowerLaw:
    """A fitted optimum-vs-scale law for one parameter.

    For a log parameter ``p* = coefficient · Π_k scale_k ** exponents[k]``; for a linear one
    ``p* = intercept + Σ_k exponents[k] · log(scale_k)``.

    Attributes:
        param: the parameter.
        log_space: whether the law is fitted to ``log(p*)``.
        intercept: the fitted coordinate at scale 1 (``log(coefficient)`` for a log parameter).
        exponents: exponent per scale variable, including fixed ones and ones shrunk to 0.
        fixed: scale variables whose exponent was given, not fitted.
        shrunk: scale variables whose exponent the data did not support and was set to 0.
        names: order of ``covariance``: ``"intercept"`` then the fitted exponents.
        covariance: covariance of (intercept, fitted exponents).
        r_squared: weighted R² of the law on the per-scale optima (NaN when undefined).
        chi2_per_dof: weighted residual χ² per degree of freedom (NaN with no dof).
        n_scales: number of per-scale optima the law was fitted to.
    """

    param: str
    log_space: bool
    intercept: float
    exponents: dict[str, float]
    fixed: tuple[str, ...]
    shrunk: tuple[str, ...]
    names: tuple[str, ...]
    covariance: FloatArray
    r_squared: float
    chi2_per_dof: float
    n_scales: int

    @property
    def coefficient(self) -> float:
        """``exp(intercept)`` for a log parameter, else the intercept."""
        return math.exp(self.intercept) if self.log_space else self.intercept

    @property
    def stderr(self) -> dict[str, float]:
        """Standard error of the intercept and each fitted exponent."""
        diag = np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))
        return {name: float(value) for name, value in zip(self.names, diag, strict=True)}

    def predict_coord(self, scale: Mapping[str, float]) -> tuple[float, float]:
        """The law's fitted coordinate at ``scale`` and its standard error.

        Raises:
            TransferSearchError: ``scale`` lacks a scale variable the law needs.
        """
        target = scale if isinstance(scale, Scale) else Scale(scale)
        needed = sorted(self.exponents)
        target.require(*needed, purpose=f"predict {self.param!r} from its power law")
        logs = {name: math.log(target[name]) for name in needed}
        value = self.intercept + sum(self.exponents[n] * logs[n] for n in needed)
        gradient = np.array([1.0] + [logs[n] for n in self.names[1:]])
        variance = float(gradient @ self.covariance @ gradient)
        return value, math.sqrt(max(variance, 0.0))

    def predict(self, scale: Mapping[str, float]) -> float:
        """The predicted optimum at ``scale``, in natural units.

        Raises:
            TransferSearchError: ``scale`` lacks a scale variable the law needs.
        """
        value, _ = self.predict_coord(scale)
        return math.exp(value) if self.log_space else value


# ------------------------------------------------------------------------------------------------
# Coordinates
# ------------------------------------------------------------------------------------------------
def resolve_log_params(
    observations: Sequence[Observation],
    params: Sequence[str],
    log_params: Iterable[str] | None,
) -> tuple[str, ...]:
    """Which parameters are fitted in log space.

    Default: every parameter whose observed values are all > 0 (lr, weight decay, τ and batch size
    are log quantities). ``log_params`` overrides: exactly those names are log.

    Raises:
        TransferSearchError: ``log_params`` names an unknown parameter, or a log parameter has a
            non-positive value.
    """
    if log_params is None:
        return tuple(
            p for p in params if all(o.params[p] > 0.0 for o in observations if p in o.params)
        )
    chosen = tuple(log_params) if not isinstance(log_params, str) else (log_params,)
    unknown = [p for p in chosen if p not in params]
    if unknown:
        raise TransferSearchError(
            f"log_params names {unknown}, which are not in params={list(params)}. "
            "List only fitted parameters."
        )
    for p in chosen:
        for obs in observations:
            value = obs.params.get(p)
            if value is not None and value <= 0.0:
                raise TransferSearchError(
                    f"`{p}` is a log coordinate, but a trial at {obs.scale!r} has {p}={value!r} "
                    "<= 0. Fix the trial, or fit it linearly: leave it out of log_params."
                )
    return chosen


def _check_direction(direction: str) -> float:
    if direction == "minimize":
        return 1.0
    if direction == "maximize":
        return -1.0
    raise TransferSearchError(
        f"`direction` must be 'minimize' or 'maximize', but got direction={direction!r}."
    )


def _to_arrays(
    observations: Sequence[Observation],
    params: Sequence[str],
    log_params: Sequence[str],
    sign: float,
) -> tuple[FloatArray, FloatArray]:
    """Fitted coordinates (n, d) and minimisation-sign values (NaN for diverged); pruned dropped."""
    rows = [o for o in observations if o.state != "pruned"]
    coords = np.empty((len(rows), len(params)))
    values = np.empty(len(rows))
    for i, obs in enumerate(rows):
        for j, name in enumerate(params):
            try:
                raw = obs.params[name]
            except KeyError:
                raise TransferSearchError(
                    f"a trial at {obs.scale!r} lacks parameter {name!r} (it has "
                    f"{sorted(obs.params)}). Record every swept parameter, or drop {name!r} from "
                    "params."
                ) from None
            coords[i, j] = math.log(raw) if name in log_params else raw
        values[i] = sign * obs.value if obs.usable else math.nan
    return coords, values


# ------------------------------------------------------------------------------------------------
# Local quadratic (array core, shared with extrapolate and the bootstrap)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Local:
    coords: FloatArray  # (d,) fitted coordinates of the optimum
    covariance: FloatArray  # (d, d)
    value: float  # minimisation sign
    hessian: FloatArray | None  # (d, d) in fitted coordinates
    n_trials: int
    n_diverged: int
    n_used: int
    method: Method
    at_boundary: bool
    rejected: _Rejected | None = None


@dataclass(frozen=True, eq=False)
class _Rejected:
    """A local model's optimum that :func:`_implausible` did not trust (minimisation sign)."""

    coords: FloatArray  # (d,) the model's minimiser, fitted coordinates
    value: float  # the model's value there
    best: float  # the best trial's value
    spread: float  # value spread of the fitted trials
    residual: float  # residual standard deviation of the fit
    leverage_ratio: float  # h(u*) / max_i h(u_i)
    reason: str  # which test failed, in words


def _n_coef(dims: int) -> int:
    return 1 + dims + dims * (dims + 1) // 2


def _region_size(n_finite: int, dims: int) -> int:
    """How many of the best trials the local model is fitted to (room for the cubic terms)."""
    return int(_region_sizes(np.array([n_finite]), dims)[0])


def _region_sizes(n_finite: NDArray[np.int64], dims: int) -> NDArray[np.int64]:
    """:func:`_region_size` for many trial counts at once (resamples)."""
    least = 2 * (_n_coef(dims) + dims) + 2
    grown = np.ceil(2.5 * np.sqrt(n_finite)).astype(np.int64)
    return np.minimum(n_finite, np.maximum(least, grown)).astype(np.int64)


def _rank_weights(t: FloatArray) -> FloatArray:
    """Weight ``1 − ¾t²`` of a trial at normalised rank-in-value ``t`` ∈ [0, 1] of its region."""
    return 1.0 - 0.75 * t * t


def _select(values: FloatArray, size: int) -> tuple[NDArray[np.intp], FloatArray]:
    """Indices of the ``size`` lowest finite values and their weights ``1 − ¾t²``."""
    if size < len(values):
        index = np.argpartition(values, size - 1)[:size]
    else:
        index = np.arange(len(values))
    chosen = values[index]
    low = float(chosen.min())
    span = float(chosen.max()) - low
    t = (chosen - low) / span if span > 0.0 else np.zeros_like(chosen)
    return index, _rank_weights(t)


def _region_weights(
    counts: FloatArray, values: FloatArray, size: NDArray[np.int64] | int
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Weights of each resample's best region, as :func:`_select` gives them, from draw counts.

    A resample is a count of draws per trial. Its best region is its ``size`` best draws: with the
    trials ranked best first, every draw of a trial is in while fewer than ``size`` draws rank
    above it, and the boundary trial is in with the draws that still fit. Each draw in the region
    weighs ``1 − ¾t²``, ``t`` its normalised rank in value within the resample's region.

    Args:
        counts: (B, M) draws of each of the M best-ranked trials in each of B resamples.
        values: (M,) their values, ascending.
        size: region size, one for all resamples or (B,).

    Returns:
        (B, M) weights (draws × rank weight) and (B,) whether the region fits in these M trials.
    """
    limit = np.broadcast_to(np.asarray(size, dtype=np.float64), counts.shape[:1])
    before = np.cumsum(counts, axis=1) - counts
    freq = np.clip(np.minimum(counts, limit[:, None] - before), 0.0, None)
    complete = freq.sum(axis=1) >= limit
    present = freq > 0
    y_best = np.where(present, values[None, :], np.inf).min(axis=1)
    y_last = np.where(present, values[None, :], -np.inf).max(axis=1)
    span = y_last - y_best
    safe = np.where(span > 0, span, 1.0)
    t = np.clip((values[None, :] - y_best[:, None]) / safe[:, None], 0.0, 1.0)
    return freq * _rank_weights(t), complete


def _design(u: FloatArray) -> FloatArray:
    """Columns 1, u_j, u_j·u_l (j ≤ l)."""
    n, dims = u.shape
    cols = [np.ones(n)]
    cols.extend(u[:, j] for j in range(dims))
    for j in range(dims):
        for k in range(j, dims):
            cols.append(u[:, j] * u[:, k])
    return np.column_stack(cols)


def _unpack(theta: FloatArray, dims: int) -> tuple[float, FloatArray, FloatArray]:
    """(c, g, H) from quadratic coefficients, with f = c + gᵀu + ½uᵀHu."""
    const = float(theta[0])
    grad = np.array(theta[1 : 1 + dims])
    n_quad = dims * (dims + 1) // 2
    hess = _hessians(theta[None, 1 + dims : 1 + dims + n_quad], dims)[0]
    return const, grad, hess


def _hessians(quad: FloatArray, dims: int) -> FloatArray:
    """(B, d, d) Hessians from (B, d(d+1)/2) coefficients of u_j·u_l (j ≤ l): H_jj = 2q_jj."""
    hess = np.empty((quad.shape[0], dims, dims))
    pos = 0
    for j in range(dims):
        for k in range(j, dims):
            if j == k:
                hess[:, j, j] = 2.0 * quad[:, pos]
            else:
                hess[:, j, k] = hess[:, k, j] = quad[:, pos]
            pos += 1
    return hess


def _box_minimise(
    grad: FloatArray, hess: FloatArray, low: FloatArray, high: FloatArray, start: FloatArray
) -> FloatArray:
    """Minimise gᵀu + ½uᵀHu over the box [low, high] by cyclic coordinate descent."""
    u = np.clip(start, low, high)
    for _ in range(50):
        previous = u.copy()
        for j in range(len(u)):
            rest = grad[j] + hess[j] @ u - hess[j, j] * u[j]
            if hess[j, j] > 0.0:
                u[j] = min(max(-rest / hess[j, j], low[j]), high[j])
            else:
                f_low = rest * low[j] + 0.5 * hess[j, j] * low[j] ** 2
                f_high = rest * high[j] + 0.5 * hess[j, j] * high[j] ** 2
                u[j] = low[j] if f_low <= f_high else high[j]
        if np.max(np.abs(u - previous)) < 1e-10:
            break
    return u


def _fallback(
    coords: FloatArray, values: FloatArray, finite: NDArray[np.bool_], spacing: FloatArray
) -> _Local:
    dims = coords.shape[1]
    good = np.flatnonzero(finite)
    best = good[int(np.argmin(values[good]))]
    stderr = np.where(spacing > 0.0, spacing / 2.0, np.inf)
    return _Local(
        coords=coords[best].copy(),
        covariance=np.diag(stderr**2) if dims else np.zeros((0, 0)),
        value=float(values[best]),
        hessian=None,
        n_trials=len(good),
        n_diverged=int(len(values) - len(good)),
        n_used=1,
        method="fallback",
        at_boundary=False,
    )


def _implausible(depth: float, spread: float, residual: float, leverage_ratio: float) -> str | None:
    """Why a fitted local model's minimum is not supported by its trials, or None when it is.

    Two tests, both read off the weighted least-squares fit itself:

    * Depth. With the fitted trials filling the model's sublevel set ``{f < f* + V}`` (``V`` the
      spread of their values), the trial nearest the minimum lies ``D = y_best − f*`` above it,
      with ``P(D > qV) = (1 − q^{d/2})^k`` for ``k`` trials in ``d`` dimensions and ``D ≤ V``
      always: a minimum deeper below the best trial than the whole value spread the model was
      fitted to is a claim no fitted trial makes — the model extrapolates a valley nobody sampled.
      (``q = 1``, not smaller: a sweep that covers one side of the optimum only fills half the
      set, and honest one-sided fits reach ``D ≈ ½V``.) Noise can spread a flat region over a few
      residual standard deviations ``s``, so the depth must also exceed ``3s``.
    * Support. The leverage ``h(u) = x(u)ᵀ(AᵀWA)⁻¹x(u)`` of the design row at the minimiser is the
      prediction variance there in units of ``s²``. A minimiser with ``h(u*) > maxᵢ h(uᵢ)`` lies
      outside the ellipsoid that holds every fitted trial (the regressor-variable hull; Montgomery,
      Peck & Vining, *Introduction to Linear Regression Analysis*, §3.8 "hidden extrapolation"):
      its location is an extrapolation of the model, typically a box corner or a valley running
      out of the sampled region. A step outside is normal for a minimum just past the best
      trials — and the rule, not the exception, on a rung whose trials a law-guided sampler
      clustered around a prediction that was slightly off — so the test rejects only
      ``h(u*) > 10·maxᵢ h(uᵢ)`` (prediction stderr above √10 ≈ 3.2× the worst fitted trial's).
      Calibrated by measurement: at 3× the Optuna sampler's synthetic-law test lost its transfer
      (correct extrapolations at ratios 3.1–16 on clustered rungs were rejected for a worse mean
      of the best trials); at 10× those are kept and the clustered-valley test cases (ratios in
      the hundreds and more) are still caught.

    Args:
        depth: ``D``, the best fitted trial's value minus the model's minimum.
        spread: ``V``, the fitted trials' value spread.
        residual: ``s``, the fit's residual standard deviation.
        leverage_ratio: ``h(u*) / maxᵢ h(uᵢ)``.

    Returns:
        The failed test in words, or None.
    """
    if depth > max(_DEPTH_FRACTION * spread, _DEPTH_NOISE * residual):
        return (
            f"its minimum lies {depth:.4g} below the best trial, more than "
            f"{_DEPTH_FRACTION:g}x the fitted trials' value spread ({spread:.4g}) and "
            f"{_DEPTH_NOISE:g}x the residual scale ({residual:.4g})"
        )
    if leverage_ratio > _LEVERAGE_RATIO:
        return (
            f"its minimiser lies outside the fitted trials (leverage {leverage_ratio:.3g}x the "
            f"largest of the trials', above {_LEVERAGE_RATIO:g}x): an extrapolation"
        )
    return None


def _fallback_implausible(
    coords: FloatArray,
    values: FloatArray,
    finite: NDArray[np.bool_],
    spacing: FloatArray,
    rejected: _Rejected,
) -> _Local:
    """The rank-weighted mean of the best ``⌈√n⌉`` trials, with their spread as covariance.

    The covariance is the weighted covariance of those trials' coordinates (not of their mean:
    where among them the optimum lies is the uncertainty) plus half the trial spacing squared on
    the diagonal, so the laws weigh this scale as little as its good trials are tight.
    """
    dims = coords.shape[1]
    good = np.flatnonzero(finite)
    size = min(len(good), max(dims + 2, math.ceil(math.sqrt(len(good)))))
    chosen, weights = _select(values[good], size)
    rows = good[chosen]
    weights = weights / weights.sum()
    centre = weights @ coords[rows]
    deviation = coords[rows] - centre
    covariance = (deviation * weights[:, None]).T @ deviation
    swept = spacing > 0.0
    covariance = covariance + np.diag(np.where(swept, (spacing / 2.0) ** 2, 0.0))
    covariance[~swept, ~swept] = np.inf
    return _Local(
        coords=centre,
        covariance=covariance,
        value=float(values[good].min()),
        hessian=None,
        n_trials=len(good),
        n_diverged=int(len(values) - len(good)),
        n_used=len(rows),
        method="fallback-implausible",
        at_boundary=False,
        rejected=rejected,
    )


def _fit_local(coords: FloatArray, values: FloatArray) -> _Local:
    """Local quadratic optimum from fitted coordinates and minimisation-sign values (NaN=diverged).

    Raises:
        TransferSearchError: no trial has a finite value.
    """
    finite = np.isfinite(values)
    n_finite = int(finite.sum())
    if n_finite == 0:
        raise TransferSearchError(
            f"all {len(values)} trials at this scale diverged, failed or were pruned: there is no "
            "finite value to locate an optimum. Add trials at lower learning rates."
        )
    dims = coords.shape[1]
    good = coords[finite]
    low_box = good.min(axis=0)
    high_box = good.max(axis=0)
    extent = high_box - low_box
    swept = extent > 1e-12 * np.maximum(1.0, np.abs(high_box))
    n_swept = int(swept.sum())
    spacing = np.where(swept, extent / max(n_finite, 1) ** (1.0 / max(n_swept, 1)), 0.0)
    size = _region_size(n_finite, n_swept)
    if n_swept == 0 or n_finite < _n_coef(n_swept) + 2:
        return _fallback(coords, values, finite, spacing)

    finite_index = np.flatnonzero(finite)
    chosen, weights = _select(values[finite_index], size)
    rows = finite_index[chosen]
    best = rows[int(np.argmin(values[rows]))]
    center = coords[best, swept]
    width = extent[swept]
    u = (coords[np.ix_(rows, np.flatnonzero(swept))] - center) / width
    low_u = (low_box[swept] - center) / width
    high_u = (high_box[swept] - center) / width
    # The values' offset does not matter; centre them for conditioning.
    offset = float(values[best])
    sqrt_w = np.sqrt(weights)
    target = (values[rows] - offset) * sqrt_w
    fit = None
    if len(rows) >= 2 * (_n_coef(n_swept) + n_swept) + 2:
        fit = _solve_local(u, target, sqrt_w, low_u, high_u, cubic=True)
    if fit is None:
        fit = _solve_local(u, target, sqrt_w, low_u, high_u, cubic=False)
    if fit is None:  # pragma: no cover - the quadratic always has a box minimiser
        return _fallback(coords, values, finite, spacing)
    u_star, const, hess_star, cov_theta, jac, at_boundary, sigma2, lev_star, lev_max = fit
    best_value = const + offset
    spread = float(values[rows].max()) - offset
    residual = math.sqrt(sigma2)
    leverage_ratio = lev_star / lev_max if lev_max > 0.0 else math.inf
    reason = _implausible(offset - best_value, spread, residual, leverage_ratio)
    if reason is not None:
        model_coords = good.mean(axis=0)
        model_coords[swept] = center + width * u_star
        rejected = _Rejected(
            model_coords, best_value, offset, spread, residual, leverage_ratio, reason
        )
        return _fallback_implausible(coords, values, finite, spacing, rejected)
    floor = _FLOOR_FRACTION * spacing[swept] / width
    if jac is not None and not at_boundary:
        cov_u = jac @ cov_theta @ jac.T
        var_u = np.maximum(np.diag(cov_u), floor**2)
        scale_fix = np.sqrt(var_u / np.maximum(np.diag(cov_u), 1e-300))
        cov_u = cov_u * np.outer(scale_fix, scale_fix)
    else:
        # On the edge or without a minimum, the quadratic says little: use the trial spacing.
        cov_u = np.diag(np.maximum((spacing[swept] / width) ** 2, floor**2))
    # Cap at the swept range itself: the optimum is somewhere in the box.
    cap = np.ones(n_swept)
    diag = np.diag(cov_u)
    shrink = np.sqrt(np.minimum(cap, diag) / np.maximum(diag, 1e-300))
    cov_u = cov_u * np.outer(shrink, shrink)

    full_coords = good.mean(axis=0)
    full_coords[swept] = center + width * u_star
    full_cov = np.zeros((dims, dims))
    swept_index = np.flatnonzero(swept)
    full_cov[np.ix_(swept_index, swept_index)] = cov_u * np.outer(width, width)
    full_hess = np.full((dims, dims), np.inf)
    full_hess[np.ix_(swept_index, swept_index)] = hess_star / np.outer(width, width)
    for j in np.flatnonzero(~swept):
        full_cov[j, j] = np.inf
    return _Local(
        coords=full_coords,
        covariance=full_cov,
        value=best_value,
        hessian=full_hess,
        n_trials=n_finite,
        n_diverged=int(len(values) - n_finite),
        n_used=len(rows),
        method="quadratic",
        at_boundary=at_boundary,
    )


_Solved = tuple[
    FloatArray, float, FloatArray, FloatArray, FloatArray | None, bool, float, float, float
]


def _solve_local(
    u: FloatArray,
    target: FloatArray,
    sqrt_w: FloatArray,
    low_u: FloatArray,
    high_u: FloatArray,
    *,
    cubic: bool,
) -> _Solved | None:
    """Weighted fit of the local model in standardised coordinates and its minimiser.

    The model is ``c + gᵀu + ½uᵀHu`` plus, with ``cubic``, diagonal terms ``Σ_j κ_j u_j³`` that
    capture asymmetric valleys (steeper above the optimum than below). The minimiser is found by
    Newton's method from the quadratic one; the delta method gives its covariance:
    ``J = −H(u*)⁻¹ ∂∇f/∂θ``. Returns None when the cubic model has no interior minimum (the caller
    then refits without cubic terms).

    Returns:
        (u*, f(u*), H(u*), cov(θ), J or None, at_boundary, s², h(u*), max_i h(u_i)): the
        residual variance ``s²`` and the
        leverages ``xᵀ(AᵀWA)⁻¹x`` of the model's design row at the minimiser and the largest at a
        fitted trial (see :func:`_implausible`).
    """
    dims = u.shape[1]
    design = _design(u)
    if cubic:
        design = np.column_stack([design, u**3])
    weighted = design * sqrt_w[:, None]
    theta = np.asarray(np.linalg.lstsq(weighted, target, rcond=None)[0], dtype=np.float64)
    n_quad = _n_coef(dims)
    const, grad, hess = _unpack(theta[:n_quad], dims)
    kappa = theta[n_quad:] if cubic else np.zeros(dims)
    eigen = np.linalg.eigvalsh(hess)
    positive = bool(eigen.min() > 1e-9 * max(1.0, float(np.abs(eigen).max())))
    u_star: FloatArray
    at_boundary = True
    if positive:
        u_star = np.asarray(-np.linalg.solve(hess, grad), dtype=np.float64)
        if cubic:
            for _ in range(30):
                hess_u = hess + np.diag(6.0 * kappa * u_star)
                if np.linalg.eigvalsh(hess_u).min() <= 0.0:
                    return None
                step = np.linalg.solve(hess_u, grad + hess @ u_star + 3.0 * kappa * u_star**2)
                u_star = u_star - step
                if float(np.max(np.abs(step))) < 1e-10:
                    break
            else:
                return None
            if np.linalg.eigvalsh(hess + np.diag(6.0 * kappa * u_star)).min() <= 0.0:
                return None
        if np.all(u_star >= low_u) and np.all(u_star <= high_u):
            at_boundary = False
        elif cubic:
            return None
        else:
            u_star = _box_minimise(grad, hess, low_u, high_u, np.zeros(dims))
    elif cubic:
        return None
    else:
        u_star = _box_minimise(grad, hess, low_u, high_u, np.zeros(dims))
    hess_star = hess + np.diag(6.0 * kappa * u_star)
    value = (
        const
        + float(grad @ u_star)
        + 0.5 * float(u_star @ hess @ u_star)
        + float(kappa @ u_star**3)
    )
    dof = max(len(target) - design.shape[1], 1)
    residual = target - weighted @ theta
    sigma2 = float(residual @ residual) / dof
    gram_inv = np.linalg.pinv(weighted.T @ weighted)
    cov_theta = sigma2 * gram_inv
    jac = None
    if not at_boundary:
        jac = _optimum_jacobian(hess_star, u_star, dims, cubic)
    row = _design(u_star[None, :])
    if cubic:
        row = np.column_stack([row, u_star[None, :] ** 3])
    leverage_star = float(row[0] @ gram_inv @ row[0])
    leverage_max = float(np.max(np.einsum("ij,jk,ik->i", design, gram_inv, design)))
    return (
        u_star,
        value,
        hess_star,
        cov_theta,
        jac,
        at_boundary,
        sigma2,
        leverage_star,
        leverage_max,
    )


def _optimum_jacobian(
    hess_star: FloatArray, u_star: FloatArray, dims: int, cubic: bool
) -> FloatArray:
    """d u*/d θ = −H(u*)⁻¹ ∂∇f/∂θ for θ = (c, g, q_jl[, κ_j]), H_jj = 2q_jj, H_jl = q_jl."""
    columns = _n_coef(dims) + (dims if cubic else 0)
    d_grad = np.zeros((dims, columns))
    d_grad[:, 1 : 1 + dims] = np.eye(dims)
    pos = 1 + dims
    for j in range(dims):
        for k in range(j, dims):
            if j == k:
                d_grad[j, pos] = 2.0 * u_star[j]
            else:
                d_grad[j, pos] = u_star[k]
                d_grad[k, pos] = u_star[j]
            pos += 1
    if cubic:
        for j in range(dims):
            d_grad[j, pos + j] = 3.0 * u_star[j] ** 2
    return np.asarray(-np.linalg.solve(hess_star, d_grad), dtype=np.float64)


def _to_optimum(
    local: _Local,
    scale: Scale,
    params: Sequence[str],
    log_params: Sequence[str],
    sign: float,
) -> ScaleOptimum:
    stderr = np.sqrt(np.diag(local.covariance))
    return ScaleOptimum(
        scale=scale,
        params={
            p: (math.exp(c) if p in log_params else float(c))
            for p, c in zip(params, local.coords, strict=True)
        },
        coords={p: float(c) for p, c in zip(params, local.coords, strict=True)},
        stderr={p: float(s) for p, s in zip(params, stderr, strict=True)},
        covariance=local.covariance,
        names=tuple(params),
        log_params=tuple(p for p in params if p in log_params),
        value=sign * local.value,
        hessian=local.hessian,
        n_trials=local.n_trials,
        n_diverged=local.n_diverged,
        n_used=local.n_used,
        method=local.method,
        at_boundary=local.at_boundary,
    )


def implausible_message(
    local: _Local,
    scale: Scale,
    params: Sequence[str],
    log_params: Sequence[str],
    sign: float,
) -> str:
    """Why ``local`` (method ``"fallback-implausible"``) rejected its model, with the numbers."""
    rejected = local.rejected
    if rejected is None:  # pragma: no cover - only called for rejected models
        return ""

    def where(point: FloatArray) -> str:
        return ", ".join(
            f"{name}={math.exp(c) if name in log_params else float(c):.4g}"
            for name, c in zip(params, point, strict=True)
        )

    return (
        f"at {scale!r} the local model predicts {sign * rejected.value:.4g} at "
        f"({where(rejected.coords)}) while the best trial is {sign * rejected.best:.4g}: "
        f"{rejected.reason}. Not trusted: using the rank-weighted mean of the best "
        f"{local.n_used} trials ({where(local.coords)}) with their spread as stderr "
        "(method='fallback-implausible'). Sample around that point to settle the optimum."
    )


def estimate_optimum(
    observations: Any,
    params: Sequence[str],
    *,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    warn: bool = True,
) -> ScaleOptimum:
    """Estimate the optimum of the trials at one scale with a local quadratic model.

    Method (see the module docstring): fit ``f(u) = c + gᵀu + ½uᵀHu`` with all interactions, in
    fitted coordinates (log for log parameters), to the best ~2.5·√n finite trials weighted by rank
    in value; minimise it inside the box spanned by the finite trials; the standard error comes from
    the delta method on ``u* = −H⁻¹g``. Diverged runs (NaN, inf, failed) only bound the region;
    pruned runs are ignored. With fewer finite trials than the quadratic needs (``n_coef + 2``),
    return the best trial with a stderr of half the trial spacing (``method="fallback"``).

    The model's minimum is not trusted when the trials do not support it (:func:`_implausible`):
    (1) it lies below the best trial by more than the fitted trials' whole value spread ``V`` and
    three residual standard deviations ``s`` — no fitted trial supports such a drop; or (2) its
    leverage ``x(u*)ᵀ(AᵀWA)⁻¹x(u*)`` exceeds three times every fitted trial's, i.e. the minimiser
    lies well outside the trials' regressor-variable hull and is an extrapolation (Montgomery,
    Peck & Vining, §3.8). Then the estimate is the ``1 − ¾t²`` rank-weighted mean of the best
    ``⌈√n⌉`` trials with their weighted covariance (plus half the spacing squared) as its
    covariance (``method="fallback-implausible"``): a wide stderr, so power laws weigh that scale
    little.

    Args:
        observations: trials at a single scale (any source :func:`as_observations` reads).
        params: the swept parameters to locate jointly.
        direction: ``"minimize"`` (default) or ``"maximize"`` the value.
        log_params: names fitted in log space (default: every all-positive parameter).
        warn: warn (TransferSearchWarning) when falling back to the best trial or rejecting the
            local model as implausible (the warning names the scale and the numbers).

    Returns:
        A :class:`ScaleOptimum`.

    Raises:
        TransferSearchError: no observations, more than one scale, an empty or unknown ``params``,
            a trial lacks a parameter, a non-positive value on a log coordinate, or every trial
            diverged.
    """
    sign = _check_direction(direction)
    obs = as_observations(observations, params=params)
    names = _check_params(params)
    if not obs:
        raise TransferSearchError(
            "estimate_optimum() got no observations. Pass the trials of one scale."
        )
    scales = {o.scale for o in obs}
    if len(scales) > 1:
        raise TransferSearchError(
            f"estimate_optimum() takes trials of one scale, but got {len(scales)} scales "
            f"({sorted(map(repr, scales))[:3]}...). Group them by scale first, or call "
            "extrapolate()."
        )
    logs = resolve_log_params(obs, names, log_params)
    coords, values = _to_arrays(obs, names, logs, sign)
    if len(values) == 0:
        raise TransferSearchError(
            "every trial at this scale was pruned: no value to locate an optimum."
        )
    local = _fit_local(coords, values)
    if warn and local.method == "fallback":
        warnings.warn(
            f"only {local.n_trials} finite trials at {obs[0].scale!r}, fewer than the "
            f"{_n_coef(len(names)) + 2} a quadratic in {len(names)} parameters needs: using the "
            "best trial (method='fallback'). Add trials for a better estimate.",
            TransferSearchWarning,
            stacklevel=2,
        )
    if warn and local.method == "fallback-implausible":
        warnings.warn(
            implausible_message(local, obs[0].scale, names, logs, sign),
            TransferSearchWarning,
            stacklevel=2,
        )
    return _to_optimum(local, obs[0].scale, names, logs, sign)


def _check_params(params: Sequence[str]) -> tuple[str, ...]:
    if isinstance(params, str):
        raise TransferSearchError(
            f"`params` must be a list of names, but got the string {params!r}. "
            f"Write params=[{params!r}]."
        )
    names = tuple(params)
    if not names:
        raise TransferSearchError(
            "`params` is empty. Name the swept parameters to fit, e.g. params=['lr']."
        )
    bad = [p for p in names if not isinstance(p, str) or not p]
    if bad or len(set(names)) != len(names):
        raise TransferSearchError(
            f"`params` must be distinct non-empty names, but got {list(names)}."
        )
    return names


# ------------------------------------------------------------------------------------------------
# Power laws
# ------------------------------------------------------------------------------------------------
def identifiable_variables(
    log_scales: FloatArray,
    names: Sequence[str],
) -> tuple[list[int], list[str]]:
    """Greedy choice of scale-variable columns that are neither constant nor collinear.

    Returns:
        The kept column indices and a message per dropped variable.
    """
    kept: list[int] = []
    notes: list[str] = []
    centred = log_scales - log_scales.mean(axis=0)
    for k, name in enumerate(names):
        if float(np.ptp(log_scales[:, k])) < 1e-9:
            notes.append(f"{name!r} is constant over the ladder")
            continue
        trial = centred[:, [*kept, k]]
        singular = np.linalg.svd(trial / np.linalg.norm(trial, axis=0), compute_uv=False)
        if singular.min() < 1e-6 * singular.max():
            others = [names[i] for i in kept]
            notes.append(
                f"{name!r} is collinear with {others} over the ladder"
                if others
                else f"{name!r} cannot be identified"
            )
            continue
        kept.append(k)
    return kept, notes


def _wls_law(
    z: FloatArray,
    variance: FloatArray,
    log_scales: FloatArray,
    free: Sequence[int],
) -> tuple[FloatArray, FloatArray, float, float]:
    """Weighted least squares of z on [1, log_scales[:, free]] (centred for conditioning).

    Returns:
        (beta, covariance, r_squared, chi2_per_dof), beta = (intercept at log-scale 0, exponents).
    """
    n = len(z)
    var = np.where(np.isfinite(variance) & (variance > 0), variance, np.nan)
    if np.all(np.isnan(var)):
        var = np.ones(n)
    else:
        var = np.where(np.isnan(var), np.nanmax(var) * 1e6, var)
    weights = 1.0 / var
    means = (weights @ log_scales[:, list(free)]) / weights.sum() if free else np.zeros(0)
    design = np.column_stack([np.ones(n), log_scales[:, list(free)] - means])
    sqrt_w = np.sqrt(weights)
    a_w = design * sqrt_w[:, None]
    beta_c, *_ = np.linalg.lstsq(a_w, z * sqrt_w, rcond=None)
    cov_c = np.linalg.pinv(a_w.T @ a_w)
    residual = z - design @ beta_c
    chi2 = float(weights @ residual**2)
    dof = n - design.shape[1]
    chi2_dof = chi2 / dof if dof > 0 else math.nan
    if dof > 0 and chi2_dof > 1.0:
        cov_c = cov_c * chi2_dof
    z_mean = float(weights @ z) / float(weights.sum())
    total = float(weights @ (z - z_mean) ** 2)
    r2 = 1.0 - chi2 / total if total > 0.0 and free else math.nan
    # Back to the uncentred intercept: a = a_c − Σ e_k m_k.
    transform = np.eye(design.shape[1])
    transform[0, 1:] = -means
    beta = transform @ beta_c
    cov = transform @ cov_c @ transform.T
    return beta, cov, r2, chi2_dof


def fit_law_arrays(
    param: str,
    log_space: bool,
    z: FloatArray,
    variance: FloatArray,
    log_scales: FloatArray,
    variables: Sequence[str],
    fixed: Mapping[str, float],
    simplify: bool,
) -> PowerLaw:
    """Fit one law from arrays: z (S,), its variance (S,), log-scales (S, K) named ``variables``.

    Fixed exponents are subtracted first; the rest are fitted and, with ``simplify``, shrunk to 0
    one at a time (smallest |t| first) while their 90% interval covers 0.
    """
    shifted = z.copy()
    for k, name in enumerate(variables):
        if name in fixed:
            shifted = shifted - fixed[name] * log_scales[:, k]
    free = [k for k, name in enumerate(variables) if name not in fixed]
    shrunk: list[str] = []
    while True:
        beta, cov, r2, chi2_dof = _wls_law(shifted, variance, log_scales, free)
        if not simplify or not free:
            break
        se = np.sqrt(np.clip(np.diag(cov)[1:], 1e-300, None))
        t = np.abs(beta[1:]) / se
        weakest = int(np.argmin(t))
        if t[weakest] >= _Z90:
            break
        shrunk.append(variables[free[weakest]])
        free = free[:weakest] + free[weakest + 1 :]
    exponents = {name: 0.0 for name in variables}
    exponents.update({name: float(fixed[name]) for name in variables if name in fixed})
    for position, k in enumerate(free):
        exponents[variables[k]] = float(beta[1 + position])
    return PowerLaw(
        param=param,
        log_space=log_space,
        intercept=float(beta[0]),
        exponents=exponents,
        fixed=tuple(name for name in variables if name in fixed),
        shrunk=tuple(shrunk),
        names=("intercept", *(variables[k] for k in free)),
        covariance=cov,
        r_squared=r2,
        chi2_per_dof=chi2_dof,
        n_scales=len(z),
    )


def fit_power_law(
    optima: Sequence[ScaleOptimum],
    param: str,
    *,
    scale_variables: Sequence[str] | None = None,
    fixed_exponents: Mapping[str, float] | None = None,
    simplify: bool = True,
) -> PowerLaw:
    """Fit ``p* = coefficient · Π scale_k ** e_k`` (log-linear) to the optima of one parameter.

    Weighted least squares of the optimum's fitted coordinate on ``log(scale_k)``, weights
    ``1/stderr²``; covariance inflated by ``χ²/dof`` when above 1. Scale variables that are
    constant or collinear over the optima are dropped with a warning.

    Args:
        optima: per-scale optima (from :func:`estimate_optimum`), at least two distinct scales.
        param: the parameter whose law to fit.
        scale_variables: scale names to regress on (default: those every optimum's scale has).
        fixed_exponents: exponents given by theory, e.g. ``{"dataset_size": 0.0}``.
        simplify: shrink to 0 each fitted exponent whose 90% interval covers 0.

    Returns:
        A :class:`PowerLaw`.

    Raises:
        TransferSearchError: fewer than two scales, an unknown parameter or scale variable, or a
            fixed exponent that is not a finite number.
    """
    if len({o.scale for o in optima}) < 2:
        raise TransferSearchError(
            f"a power law needs optima at two or more scales, but got {len(optima)}. "
            "Run trials at another scale."
        )
    missing = [o.scale for o in optima if param not in o.coords]
    if missing:
        raise TransferSearchError(
            f"parameter {param!r} is not in the optima at {missing[:3]}. Fit it in "
            "estimate_optimum(params=...)."
        )
    variables = _common_variables(
        [o.scale for o in optima], scale_variables, purpose="fit the power law"
    )
    fixed = check_fixed_exponents(param, fixed_exponents or {}, variables)
    log_scales = np.log(np.array([[o.scale[v] for v in variables] for o in optima]))
    kept, notes = identifiable_variables(log_scales, variables)
    free_names = [variables[k] for k in kept]
    for note in notes:
        if not any(v in note for v in fixed):
            warnings.warn(
                f"dropping scale variable {note}: its exponent cannot be fitted.",
                TransferSearchWarning,
                stacklevel=2,
            )
    used = [v for v in variables if v in free_names or v in fixed]
    columns = [variables.index(v) for v in used]
    z = np.array([o.coords[param] for o in optima])
    variance = np.array([o.stderr[param] ** 2 for o in optima])
    return fit_law_arrays(
        param,
        param in optima[0].log_params,
        z,
        variance,
        log_scales[:, columns],
        used,
        fixed,
        simplify,
    )


def _common_variables(
    scales: Sequence[Scale], requested: Sequence[str] | None, *, purpose: str
) -> list[str]:
    if requested is not None:
        if isinstance(requested, str):
            raise TransferSearchError(
                f"`scale_variables` must be a list of names, but got the string {requested!r}. "
                f"Write scale_variables=[{requested!r}]."
            )
        for scale in scales:
            scale.require(*requested, purpose=purpose)
        return list(dict.fromkeys(requested))
    common = set(scales[0])
    for scale in scales[1:]:
        common &= set(scale)
    return sorted(common)


def check_fixed_exponents(
    param: str, fixed: Mapping[str, float], variables: Sequence[str]
) -> dict[str, float]:
    """Validate one parameter's fixed exponents: known scale variables, finite numbers.

    Raises:
        TransferSearchError: an unknown scale variable or a non-finite exponent.
    """
    checked: dict[str, float] = {}
    for name, value in fixed.items():
        if name not in variables:
            raise TransferSearchError(
                f"fixed_exponents[{param!r}] names scale variable {name!r}, which not every "
                f"trial's scale has (common variables: {list(variables)}). Fix the name or add "
                "it to every Scale."
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise TransferSearchError(
                f"fixed_exponents[{param!r}][{name!r}] must be a finite number, but got {value!r}."
            )
        checked[name] = float(value)
    return checked


# ------------------------------------------------------------------------------------------------
# Batched bootstrap of one scale's optimum (the hot path of extrapolate's intervals)
# ------------------------------------------------------------------------------------------------
def bootstrap_optima(
    coords: FloatArray, values: FloatArray, n_resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Optimum coordinates refitted on ``n_resamples`` resamples (with replacement) of the trials.

    Same model as :func:`estimate_optimum` (local quadratic with diagonal cubic terms fitted to the
    best region), solved for all resamples at once. A resample is a multinomial count per trial, so
    its best region is the best-ranked trials up to ``size`` draws, and its fit is the weighted fit
    with those counts as frequency weights: stacked normal equations and a batched Newton step,
    in coordinates centred on the best trial and scaled by the full swept range (the model is
    invariant to both). Resamples the batch cannot settle (no interior minimum inside the trials'
    box) are refitted one by one with the full method; one with no finite trial gives NaN.

    Args:
        coords: (n, d) fitted coordinates of one scale's trials.
        values: (n,) minimisation-sign values, NaN for diverged trials.
        n_resamples: how many resamples.
        rng: the random generator.

    Returns:
        (n_resamples, d) optimum coordinates.
    """
    n, dims = coords.shape
    out = np.full((n_resamples, dims), np.nan)
    finite_all = np.isfinite(values)
    n_finite = int(finite_all.sum())
    size = _region_size(n_finite, dims)
    n_cols = _n_coef(dims) + dims
    # Draw counts for the best-ranked trials only; the rest are lumped into one category (exact).
    order = np.argsort(np.where(finite_all, values, np.inf), kind="stable")
    span_rows = min(n_finite, 3 * size + 40)
    top = order[:span_rows]
    probabilities = np.full(span_rows + 1, 1.0 / n)
    probabilities[-1] = max(0.0, 1.0 - span_rows / n)
    drawn = rng.multinomial(n, probabilities, size=n_resamples)
    todo = np.ones(n_resamples, dtype=bool)
    extent = np.ptp(coords[finite_all], axis=0) if n_finite else np.zeros(dims)
    if n_finite >= 2 * n_cols + 2 and size >= 2 * n_cols + 2 and np.all(extent > 0):
        ranked = order[:n_finite]
        y = values[top]
        weights, complete = _region_weights(drawn[:, :span_rows].astype(np.float64), y, size)
        low = coords[finite_all].min(axis=0)
        high = coords[finite_all].max(axis=0)
        center = coords[ranked[0]]
        u = (coords[top] - center) / extent
        design = np.column_stack([_design(u), u**3])  # (M, p)
        gram = np.matmul((weights[:, :, None] * design[None]).transpose(0, 2, 1), design)
        rhs = weights @ (design * (y - y[0])[:, None])
        ok = complete & np.all(np.isfinite(rhs), axis=1)
        gram[~ok] = np.eye(gram.shape[1])
        rhs[~ok] = 0.0
        low_u = (low - center) / extent
        high_u = (high - center) / extent
        with np.errstate(all="ignore"):
            try:
                theta = np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]
                grad = theta[:, 1 : 1 + dims]
                pos = _n_coef(dims)
                hess = _hessians(theta[:, 1 + dims : pos], dims)
                kappa = theta[:, pos : pos + dims]
                eye = np.eye(dims)
                u_star = -np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
                for _ in range(12):
                    hess_u = hess + eye * (6.0 * kappa * u_star)[:, None, :]
                    g_u = grad + np.einsum("bjk,bk->bj", hess, u_star) + 3 * kappa * u_star**2
                    u_star = u_star - np.linalg.solve(hess_u, g_u[:, :, None])[:, :, 0]
                hess_u = hess + eye * (6.0 * kappa * u_star)[:, None, :]
                g_u = grad + np.einsum("bjk,bk->bj", hess, u_star) + 3 * kappa * u_star**2
                positive = np.linalg.eigvalsh(hess_u).min(axis=1) > 0
                inside = np.all((u_star >= low_u) & (u_star <= high_u), axis=1)
                settled = np.max(np.abs(g_u), axis=1) < 1e-8 * np.maximum(
                    1.0, np.max(np.abs(grad), axis=1)
                )
                good = ok & positive & inside & settled & np.all(np.isfinite(u_star), axis=1)
                out[good] = center + extent * u_star[good]
                todo = ~good
            except np.linalg.LinAlgError:
                todo = np.ones(n_resamples, dtype=bool)
    others = order[span_rows:]
    for b in np.flatnonzero(todo):
        rest = rng.choice(others, int(drawn[b, -1])) if len(others) else np.zeros(0, np.intp)
        sample = np.concatenate([np.repeat(top, drawn[b, :span_rows]), rest]).astype(np.intp)
        sample_values = values[sample]
        if not np.isfinite(sample_values).any():
            continue
        out[b] = _fit_local(coords[sample], sample_values).coords
    return out

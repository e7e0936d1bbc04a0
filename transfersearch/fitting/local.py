"""The optimum of one scale's trials alone: a local quadratic model (:func:`estimate_optimum`).

``f(u) = c + gᵀu + ½uᵀHu`` (plus diagonal cubic terms when the trials allow), in fitted
coordinates, fitted to the best region of the trials (the ``k ≈ 2.5·√n`` lowest finite values,
weighted ``1 − ¾t²`` by normalised rank ``t``) and minimised inside the box the finite trials span.
A minimum the trials do not support is rejected (:func:`implausible_reason`). ``extrapolate()``
pools the rungs instead (:mod:`.surface`); this is the per-scale tool and the fallback for a rung
the pooled valley cannot hold.
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
from transfersearch.fitting.coords import (
    Direction,
    FloatArray,
    check_direction,
    check_params,
    observation_arrays,
    resolve_log_params,
)
from transfersearch.fitting.quadratic import (
    n_coef,
    quadratic_design,
    region_size,
    select_region,
    unpack_quadratic,
)
from transfersearch.observations import TransferSearchWarning, as_observations
from transfersearch.scale import Scale

__all__ = [
    "LocalFit",
    "Method",
    "ScaleOptimum",
    "estimate_optimum",
    "fit_local",
    "implausible_message",
    "to_optimum",
]

#: stderr floor, as a fraction of the typical trial spacing per coordinate: a noise-free bowl
#: would otherwise claim an exact optimum, yet nothing is known between trials.
FLOOR_FRACTION = 0.1
#: A local model claiming an improvement over the best trial larger than this fraction of the value
#: spread it was fitted over (and than :data:`DEPTH_NOISE` residual standard deviations) is
#: rejected; see :func:`implausible_reason`.
DEPTH_FRACTION = 1.0
DEPTH_NOISE = 3.0
#: A minimiser whose leverage exceeds this multiple of the largest fitted trial's is rejected.
LEVERAGE_RATIO = 10.0
#: A curvature eigenvalue counts as positive above this fraction of the largest one: relative, so
#: a metric reported in any unit (a loss × 1e-12 included) gives the same optimum.
POSITIVE_CURVATURE = 1e-9
#: Relative tolerance below which a coordinate counts as not swept (its range is rounding noise).
SWEPT_TOLERANCE = 1e-12

Method = Literal["quadratic", "fallback", "fallback-implausible", "pooled"]


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
            best trials, with their spread as stderr) or ``"pooled"`` (read off the valley fitted
            over every rung at once, :mod:`transfersearch.fitting.surface`).
        at_boundary: the optimum was pulled onto the edge of the region the trials cover.
        wall: extra curvature above the optimum per coordinate (fitted coordinates, minimisation
            sign): the valley is ``½δᵀHδ + ½Σ_j wall_j·max(δ_j, 0)²``; zeros when symmetric.
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
    wall: FloatArray | None = None

    def regret(self, params: Mapping[str, float]) -> float | None:
        """The model's metric excess at ``params`` over its optimum, ``½δᵀHδ`` (+ the wall term), ≥ 0.

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
            delta[index] = value
        return self.regret_coords(delta)

    def regret_coords(self, point: FloatArray) -> float | None:
        """:meth:`regret` at a point given in fitted coordinates (order of :attr:`names`)."""
        if self.hessian is None:
            return None
        delta = np.asarray(point, dtype=np.float64) - np.array([self.coords[n] for n in self.names])
        finite = np.isfinite(np.diag(self.hessian))
        sub = self.hessian[np.ix_(finite, finite)]
        step = delta[finite]
        excess = 0.5 * float(step @ sub @ step)
        if self.wall is not None:
            above = np.clip(step, 0.0, None)
            excess += 0.5 * float(self.wall[finite] @ above**2)
        return float(max(0.0, excess))


# ------------------------------------------------------------------------------------------------
# Coordinates
# ------------------------------------------------------------------------------------------------
# ------------------------------------------------------------------------------------------------
# Local quadratic (array core, shared with extrapolate and the bootstrap)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class LocalFit:
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
    """A local model's optimum that :func:`implausible_reason` did not trust (minimisation sign)."""

    coords: FloatArray  # (d,) the model's minimiser, fitted coordinates
    value: float  # the model's value there
    best: float  # the best trial's value
    spread: float  # value spread of the fitted trials
    residual: float  # residual standard deviation of the fit
    leverage_ratio: float  # h(u*) / max_i h(u_i)
    reason: str  # which test failed, in words


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
) -> LocalFit:
    dims = coords.shape[1]
    good = np.flatnonzero(finite)
    best = good[int(np.argmin(values[good]))]
    stderr = np.where(spacing > 0.0, spacing / 2.0, np.inf)
    return LocalFit(
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


def implausible_reason(
    depth: float, spread: float, residual: float, leverage_ratio: float
) -> str | None:
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
    if depth > max(DEPTH_FRACTION * spread, DEPTH_NOISE * residual):
        return (
            f"its minimum lies {depth:.4g} below the best trial, more than "
            f"{DEPTH_FRACTION:g}x the fitted trials' value spread ({spread:.4g}) and "
            f"{DEPTH_NOISE:g}x the residual scale ({residual:.4g})"
        )
    if leverage_ratio > LEVERAGE_RATIO:
        return (
            f"its minimiser lies outside the fitted trials (leverage {leverage_ratio:.3g}x the "
            f"largest of the trials', above {LEVERAGE_RATIO:g}x): an extrapolation"
        )
    return None


def _fallback_implausible(
    coords: FloatArray,
    values: FloatArray,
    finite: NDArray[np.bool_],
    spacing: FloatArray,
    rejected: _Rejected,
) -> LocalFit:
    """The rank-weighted mean of the best ``⌈√n⌉`` trials, with their spread as covariance.

    The covariance is the weighted covariance of those trials' coordinates (not of their mean:
    where among them the optimum lies is the uncertainty) plus half the trial spacing squared on
    the diagonal, so the laws weigh this scale as little as its good trials are tight.
    """
    dims = coords.shape[1]
    good = np.flatnonzero(finite)
    size = min(len(good), max(dims + 2, math.ceil(math.sqrt(len(good)))))
    chosen, weights = select_region(values[good], size)
    rows = good[chosen]
    weights = weights / weights.sum()
    centre = weights @ coords[rows]
    deviation = coords[rows] - centre
    covariance = (deviation * weights[:, None]).T @ deviation
    swept = spacing > 0.0
    covariance = covariance + np.diag(np.where(swept, (spacing / 2.0) ** 2, 0.0))
    covariance[~swept, ~swept] = np.inf
    return LocalFit(
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


def fit_local(coords: FloatArray, values: FloatArray) -> LocalFit:
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
    swept = extent > SWEPT_TOLERANCE * np.maximum(1.0, np.abs(high_box))
    n_swept = int(swept.sum())
    spacing = np.where(swept, extent / max(n_finite, 1) ** (1.0 / max(n_swept, 1)), 0.0)
    size = region_size(n_finite, n_swept)
    if n_swept == 0 or n_finite < n_coef(n_swept) + 2:
        return _fallback(coords, values, finite, spacing)

    finite_index = np.flatnonzero(finite)
    chosen, weights = select_region(values[finite_index], size)
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
    if len(rows) >= 2 * (n_coef(n_swept) + n_swept) + 2:
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
    reason = implausible_reason(offset - best_value, spread, residual, leverage_ratio)
    if reason is not None:
        model_coords = good.mean(axis=0)
        model_coords[swept] = center + width * u_star
        rejected = _Rejected(
            model_coords, best_value, offset, spread, residual, leverage_ratio, reason
        )
        return _fallback_implausible(coords, values, finite, spacing, rejected)
    floor = FLOOR_FRACTION * spacing[swept] / width
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
    return LocalFit(
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
        fitted trial (see :func:`implausible_reason`).
    """
    dims = u.shape[1]
    design = quadratic_design(u)
    if cubic:
        design = np.column_stack([design, u**3])
    weighted = design * sqrt_w[:, None]
    theta = np.asarray(np.linalg.lstsq(weighted, target, rcond=None)[0], dtype=np.float64)
    n_quad = n_coef(dims)
    const, grad, hess = unpack_quadratic(theta[:n_quad], dims)
    kappa = theta[n_quad:] if cubic else np.zeros(dims)
    eigen = np.linalg.eigvalsh(hess)
    positive = bool(eigen.min() > POSITIVE_CURVATURE * float(np.abs(eigen).max()))
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
    row = quadratic_design(u_star[None, :])
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
    columns = n_coef(dims) + (dims if cubic else 0)
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


def to_optimum(
    local: LocalFit,
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
    local: LocalFit,
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

    The model's minimum is not trusted when the trials do not support it (:func:`implausible_reason`):
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
    sign = check_direction(direction)
    obs = as_observations(observations, params=params)
    names = check_params(params)
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
    coords, values = observation_arrays(obs, names, logs, sign)
    if len(values) == 0:
        raise TransferSearchError(
            "every trial at this scale was pruned: no value to locate an optimum."
        )
    local = fit_local(coords, values)
    if warn and local.method == "fallback":
        warnings.warn(
            f"only {local.n_trials} finite trials at {obs[0].scale!r}, fewer than the "
            f"{n_coef(len(names)) + 2} a quadratic in {len(names)} parameters needs: using the "
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
    return to_optimum(local, obs[0].scale, names, logs, sign)

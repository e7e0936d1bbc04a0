"""The optimum of one scale's trials alone: a local quadratic model (:func:`locate_optimum`).

``f(u) = c + gᵀu + ½uᵀHu`` (plus diagonal cubic terms when the trials allow), in fitted
coordinates, fitted to the best region of the trials (the ``k ≈ 2.5·√n`` lowest finite values,
weighted ``1 − ¾t²`` by normalised rank ``t``) and minimised inside the box the finite trials span.
A minimum the trials do not support is rejected (:func:`implausible_reason`). ``extrapolate()``
pools the rungs instead (:mod:`.surface`); this is the per-scale tool and the fallback for a rung
the pooled valley cannot hold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import (
    FloatArray,
    check_direction,
    check_params,
    observation_arrays,
    resolve_log_params,
    to_natural,
)
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.optimum import LocalFit, RejectedModel, ScaleOptimum, to_optimum
from transfersearch.fitting.quadratic import (
    gradient_jacobian,
    min_cubic_trials,
    min_quadratic_trials,
    n_coef,
    quadratic_design,
    region_size,
    select_region,
    unpack_quadratic,
)
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.sweep import Direction

__all__ = [
    "fit_local",
    "implausible_message",
    "implausible_reason",
    "locate_optimum",
]

#: stderr floor, as a fraction of the typical trial spacing per coordinate: a noise-free bowl
#: would otherwise claim an exact optimum, yet nothing is known between trials.
FLOOR_FRACTION = 0.1
#: A fallback's stderr per swept coordinate, as a fraction of the typical trial spacing: the best
#: trial is within about half a spacing of the optimum (the resolution of a grid).
FALLBACK_SPACING_FRACTION = 0.5
#: The largest stderr of a local model's optimum, as a fraction of the swept range: whatever the
#: model says, the optimum is somewhere in the box the trials span.
RANGE_CAP = 1.0
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
#: Newton steps for the cubic model's minimiser, started at the quadratic part's: from there it
#: converges in 2–7 (measured on the bowls and valleys of tests/test_fit.py); still moving after
#: this many, the cubic model has no nearby minimum and the quadratic alone is refitted.
CUBIC_NEWTON_STEPS = 30
#: Sweeps of the box minimiser's cyclic coordinate descent (2–16 on the edge optima of
#: tests/test_fit.py): a bound for slow zig-zagging along a narrow valley, after which the point
#: the sweeps reached (inside the box) is kept.
BOX_SWEEPS = 50
#: Both minimisers stop once no coordinate moves by more than this, in standardised coordinates
#: (the box is 1 wide): far below any trial spacing.
STEP_TOLERANCE = 1e-10
#: Keeps the variance rescalings of :func:`_optimum_covariance` from dividing 0 by 0; any variance
#: that matters is far above it.
VARIANCE_GUARD = 1e-300
#: A local model minimised on its box's edge says "past this edge" only when its slope there lies
#: beyond this many standard errors of 0 (the one-sided 95% normal quantile, the usual level for a
#: one-sided claim); nearer, noise may have put the minimiser on the edge and the optimum is
#: anywhere in the box (:data:`RANGE_CAP`). The same level as the pooled valley's edge bounds
#: (:data:`transfersearch.fitting.rungs.EDGE_BOUND_Z`).
EDGE_SLOPE_Z = 1.6448536269514722


# ------------------------------------------------------------------------------------------------
# Local quadratic (array core, shared with extrapolate and the bootstrap)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Box:
    """Where one scale's finite trials lie, in fitted coordinates (:func:`_box`)."""

    finite: NDArray[np.bool_]  # (n,) trials with a finite value
    low: FloatArray  # (d,) the box the finite trials span
    high: FloatArray  # (d,)
    extent: FloatArray  # (d,) high − low
    swept: NDArray[np.bool_]  # (d,) coordinates the finite trials vary
    spacing: FloatArray  # (d,) typical trial spacing, 0 where not swept
    mean: FloatArray  # (d,) the finite trials' mean: where an unswept coordinate is reported

    @property
    def n_finite(self) -> int:
        return int(self.finite.sum())

    @property
    def n_swept(self) -> int:
        return int(self.swept.sum())


@dataclass(frozen=True, eq=False)
class _Region:
    """The best region's trials, in the swept coordinates standardised as ``u = (x − center)/width``
    (:func:`_region`); values relative to the best fitted trial's, weighted by rank."""

    rows: NDArray[np.intp]  # (m,) indices of the fitted trials
    u: FloatArray  # (m, d_swept)
    target: FloatArray  # (m,) √w·(value − offset)
    sqrt_w: FloatArray  # (m,) √w, the rank weights' roots
    low: FloatArray  # (d_swept,) the box, standardised
    high: FloatArray  # (d_swept,)
    center: FloatArray  # (d_swept,) the best fitted trial's coordinates
    width: FloatArray  # (d_swept,) the box's extent
    offset: float  # the best fitted trial's value
    spread: float  # the fitted trials' value spread, max − offset


@dataclass(frozen=True, eq=False)
class _LocalModel:
    """The weighted fit of the local model and its minimiser, standardised (:func:`_solve_local`).

    Values are relative to :attr:`_Region.offset`. The leverages ``xᵀ(AᵀWA)⁻¹x`` of the model's
    design row feed :func:`implausible_reason`.
    """

    minimiser: FloatArray  # (d,) u*
    value: float  # f(u*)
    hessian: FloatArray  # (d, d) H(u*), with the cubic terms' curvature there
    coef_cov: FloatArray  # cov(θ) = s²(AᵀWA)⁻¹
    jacobian: FloatArray | None  # ∂u*/∂θ (delta method); None when u* is on the box's edge
    at_boundary: bool  # u* was constrained to the box
    edge_resolved: NDArray[np.bool_]  # (d,) False: on the edge, its slope there within noise of 0
    residual_var: float  # s², the weighted residual variance
    leverage: float  # h(u*), at the minimiser
    leverage_max: float  # maxᵢ h(uᵢ), over the fitted trials


class _Minimum(NamedTuple):
    """A model's minimiser (standardised) and whether the box constrained it."""

    point: FloatArray
    at_boundary: bool


def fit_local(coords: FloatArray, values: FloatArray) -> LocalFit:
    """Local quadratic optimum from fitted coordinates and minimisation-sign values (NaN=diverged).

    The method is :func:`locate_optimum`'s. In steps: the box the finite trials span
    (:func:`_box`); their best region, standardised (:func:`_region`); the local model and its
    minimiser (:func:`_fit_model`); the plausibility check (:func:`_rejection`); the optimum and
    its covariance in every coordinate (:func:`_quadratic_fit`).

    Args:
        coords: (n, d) the trials in fitted coordinates.
        values: (n,) their values in the minimisation sign; NaN or inf for a diverged trial.

    Returns:
        A :class:`LocalFit` with method ``"quadratic"``, ``"fallback"`` (no coordinate swept, or
        fewer finite trials than :func:`min_quadratic_trials` of the swept ones) or
        ``"fallback-implausible"``.

    Raises:
        TransferSearchError: no trial has a finite value.
    """
    box = _box(coords, values)
    if box.n_swept == 0 or box.n_finite < min_quadratic_trials(box.n_swept):
        return _fallback(coords, values, box.finite, box.spacing)
    region = _region(coords, values, box)
    model = _fit_model(region)
    if model is None:  # pragma: no cover - the quadratic always has a box minimiser
        return _fallback(coords, values, box.finite, box.spacing)
    rejected = _rejection(model, region, box)
    if rejected is not None:
        return _fallback_implausible(coords, values, box.finite, box.spacing, rejected)
    return _quadratic_fit(model, region, box, len(values))


def _box(coords: FloatArray, values: FloatArray) -> _Box:
    """The box the finite trials span, which coordinates they sweep, and their typical spacing
    ``extent / n^{1/d_swept}``.

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
    good = coords[finite]
    low = good.min(axis=0)
    high = good.max(axis=0)
    extent = high - low
    swept = extent > SWEPT_TOLERANCE * np.maximum(1.0, np.abs(high))
    n_swept = int(swept.sum())
    spacing = np.where(swept, extent / max(n_finite, 1) ** (1.0 / max(n_swept, 1)), 0.0)
    return _Box(finite, low, high, extent, swept, spacing, good.mean(axis=0))


def _fallback(
    coords: FloatArray, values: FloatArray, finite: NDArray[np.bool_], spacing: FloatArray
) -> LocalFit:
    """The best trial, with :data:`FALLBACK_SPACING_FRACTION` of the trial spacing as stderr."""
    dims = coords.shape[1]
    good = np.flatnonzero(finite)
    best = good[int(np.argmin(values[good]))]
    stderr = np.where(spacing > 0.0, FALLBACK_SPACING_FRACTION * spacing, np.inf)
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


def _region(coords: FloatArray, values: FloatArray, box: _Box) -> _Region:
    """The :func:`region_size` best finite trials, their rank weights, and the swept coordinates
    standardised about the best of them by the box's extent."""
    finite_index = np.flatnonzero(box.finite)
    chosen, weights = select_region(values[finite_index], region_size(box.n_finite, box.n_swept))
    rows = finite_index[chosen]
    best = rows[int(np.argmin(values[rows]))]
    center = coords[best, box.swept]
    width = box.extent[box.swept]
    # The values' offset does not matter; centre them for conditioning.
    offset = float(values[best])
    sqrt_w = np.sqrt(weights)
    return _Region(
        rows=rows,
        u=(coords[np.ix_(rows, np.flatnonzero(box.swept))] - center) / width,
        target=(values[rows] - offset) * sqrt_w,
        sqrt_w=sqrt_w,
        low=(box.low[box.swept] - center) / width,
        high=(box.high[box.swept] - center) / width,
        center=center,
        width=width,
        offset=offset,
        spread=float(values[rows].max()) - offset,
    )


def _fit_model(region: _Region) -> _LocalModel | None:
    """The model with diagonal cubic terms when the region has :func:`min_cubic_trials` and it has
    an interior minimum, else the quadratic alone."""
    fit = None
    if len(region.rows) >= min_cubic_trials(region.u.shape[1]):
        fit = _solve_local(region, cubic=True)
    if fit is None:
        fit = _solve_local(region, cubic=False)
    return fit


def _solve_local(region: _Region, *, cubic: bool) -> _LocalModel | None:
    """Weighted fit of the local model in standardised coordinates and its minimiser.

    The model is ``c + gᵀu + ½uᵀHu`` plus, with ``cubic``, diagonal terms ``Σ_j κ_j u_j³`` that
    capture asymmetric valleys (steeper above the optimum than below). The minimiser is found by
    :func:`_locate_minimum`; the delta method gives its covariance: ``J = −H(u*)⁻¹ ∂∇f/∂θ``
    (:func:`_optimum_jacobian`). Returns None when the cubic model has no interior minimum (the
    caller then refits without cubic terms).
    """
    dims = region.u.shape[1]
    design = _local_design(region.u, cubic)
    weighted = design * region.sqrt_w[:, None]
    theta = np.asarray(np.linalg.lstsq(weighted, region.target, rcond=None)[0], dtype=np.float64)
    n_quad = n_coef(dims)
    const, grad, hess = unpack_quadratic(theta[:n_quad], dims)
    kappa = theta[n_quad:] if cubic else np.zeros(dims)
    minimum = _locate_minimum(grad, hess, kappa, region.low, region.high, cubic=cubic)
    if minimum is None:
        return None
    u_star = minimum.point
    hess_star = hess + np.diag(6.0 * kappa * u_star)
    value = (
        const
        + float(grad @ u_star)
        + 0.5 * float(u_star @ hess @ u_star)
        + float(kappa @ u_star**3)
    )
    dof = max(len(region.target) - design.shape[1], 1)
    residual = region.target - weighted @ theta
    sigma2 = float(residual @ residual) / dof
    gram_inv = np.linalg.pinv(weighted.T @ weighted)
    row = _local_design(u_star[None, :], cubic)[0]
    slope = grad + hess @ u_star + 3.0 * kappa * u_star**2
    resolved = _edge_resolved(
        slope, _slope_jacobian(u_star, cubic), sigma2 * gram_inv, minimum, region
    )
    return _LocalModel(
        minimiser=u_star,
        value=value,
        hessian=hess_star,
        coef_cov=sigma2 * gram_inv,
        edge_resolved=resolved,
        jacobian=None if minimum.at_boundary else _optimum_jacobian(hess_star, u_star, cubic),
        at_boundary=minimum.at_boundary,
        residual_var=sigma2,
        leverage=float(row @ gram_inv @ row),
        leverage_max=float(np.max(np.einsum("ij,jk,ik->i", design, gram_inv, design))),
    )


def _local_design(u: FloatArray, cubic: bool) -> FloatArray:
    """Columns of the local model at the rows of ``u``: :func:`quadratic_design`, then, with
    ``cubic``, ``u_j³``."""
    design = quadratic_design(u)
    return np.column_stack([design, u**3]) if cubic else design


def _locate_minimum(
    grad: FloatArray,
    hess: FloatArray,
    kappa: FloatArray,
    low: FloatArray,
    high: FloatArray,
    *,
    cubic: bool,
) -> _Minimum | None:
    """The minimiser of ``gᵀu + ½uᵀHu + Σ_j κ_j u_j³`` over the box ``[low, high]``.

    With ``H`` positive definite (:data:`POSITIVE_CURVATURE`) the start is ``−H⁻¹g``, refined by
    :func:`_cubic_newton` with ``cubic``; a minimiser inside the box is kept. Otherwise the
    quadratic (``κ = 0``) is minimised on the box (:func:`_box_minimise`) and the result is marked
    ``at_boundary``, while the cubic model gives None: it has no interior minimum.
    """
    dims = len(grad)
    eigen = np.linalg.eigvalsh(hess)
    positive = bool(eigen.min() > POSITIVE_CURVATURE * float(np.abs(eigen).max()))
    if positive:
        u_star = np.asarray(-np.linalg.solve(hess, grad), dtype=np.float64)
        if cubic:
            refined = _cubic_newton(grad, hess, kappa, u_star)
            if refined is None:
                return None
            u_star = refined
        if np.all(u_star >= low) and np.all(u_star <= high):
            return _Minimum(u_star, at_boundary=False)
    if cubic:
        return None
    return _Minimum(_box_minimise(grad, hess, low, high, np.zeros(dims)), at_boundary=True)


def _cubic_newton(
    grad: FloatArray, hess: FloatArray, kappa: FloatArray, start: FloatArray
) -> FloatArray | None:
    """Newton's method on ``∇f(u) = g + Hu + 3κ∘u² = 0`` from ``start``.

    Returns:
        The minimiser, or None when the curvature ``H(u) = H + 6·diag(κ∘u)`` is not positive
        definite at an iterate or at the end, or the steps do not fall below
        :data:`STEP_TOLERANCE` within :data:`CUBIC_NEWTON_STEPS`.
    """
    u_star = start
    for _ in range(CUBIC_NEWTON_STEPS):
        hess_u = hess + np.diag(6.0 * kappa * u_star)
        if np.linalg.eigvalsh(hess_u).min() <= 0.0:
            return None
        step = np.linalg.solve(hess_u, grad + hess @ u_star + 3.0 * kappa * u_star**2)
        u_star = u_star - step
        if float(np.max(np.abs(step))) < STEP_TOLERANCE:
            break
    else:
        return None
    if np.linalg.eigvalsh(hess + np.diag(6.0 * kappa * u_star)).min() <= 0.0:
        return None
    return u_star


def _box_minimise(
    grad: FloatArray, hess: FloatArray, low: FloatArray, high: FloatArray, start: FloatArray
) -> FloatArray:
    """Minimise gᵀu + ½uᵀHu over the box [low, high] by cyclic coordinate descent."""
    u = np.clip(start, low, high)
    for _ in range(BOX_SWEEPS):
        previous = u.copy()
        for j in range(len(u)):
            rest = grad[j] + hess[j] @ u - hess[j, j] * u[j]
            if hess[j, j] > 0.0:
                u[j] = min(max(-rest / hess[j, j], low[j]), high[j])
            else:
                f_low = rest * low[j] + 0.5 * hess[j, j] * low[j] ** 2
                f_high = rest * high[j] + 0.5 * hess[j, j] * high[j] ** 2
                u[j] = low[j] if f_low <= f_high else high[j]
        if np.max(np.abs(u - previous)) < STEP_TOLERANCE:
            break
    return u


def _optimum_jacobian(hess_star: FloatArray, u_star: FloatArray, cubic: bool) -> FloatArray:
    """``∂u*/∂θ = −H(u*)⁻¹ ∂∇f/∂θ`` for ``θ = (c, g, q_jl[, κ_j])``, ``H_jj = 2q_jj``, ``H_jl = q_jl``.

    ``∂∇f/∂g = I``, ``∂∇f/∂q`` is :func:`gradient_jacobian`, ``∂∇f/∂κ = diag(3u²)``.
    """
    return np.asarray(-np.linalg.solve(hess_star, _slope_jacobian(u_star, cubic)), dtype=np.float64)


def _slope_jacobian(u: FloatArray, cubic: bool) -> FloatArray:
    """``∂∇f(u)/∂θ``: ``I`` for ``g``, :func:`gradient_jacobian` for ``q``, ``diag(3u²)`` for ``κ``."""
    dims = len(u)
    n_quad = n_coef(dims)
    d_grad = np.zeros((dims, n_quad + (dims if cubic else 0)))
    d_grad[:, 1 : 1 + dims] = np.eye(dims)
    d_grad[:, 1 + dims : n_quad] = gradient_jacobian(u)
    if cubic:
        d_grad[:, n_quad:] = np.diag(3.0 * u**2)
    return d_grad


def _edge_resolved(
    slope: FloatArray, d_grad: FloatArray, coef_cov: FloatArray, minimum: _Minimum, region: _Region
) -> NDArray[np.bool_]:
    """Per coordinate: False where the minimiser sits on the box's edge yet the model's slope there
    is within :data:`EDGE_SLOPE_Z` of its standard errors of 0 — the data do not say on which side
    of the edge the optimum lies (docs/science.md §7.1); True elsewhere."""
    resolved = np.ones(len(slope), dtype=bool)
    if not minimum.at_boundary:
        return resolved
    sd = np.sqrt(np.maximum(np.diag(d_grad @ coef_cov @ d_grad.T), 0.0))
    u = minimum.point
    on_edge = np.isclose(u, region.low, atol=STEP_TOLERANCE) | np.isclose(
        u, region.high, atol=STEP_TOLERANCE
    )
    resolved[on_edge] = np.abs(slope[on_edge]) > EDGE_SLOPE_Z * sd[on_edge]
    return resolved


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
      ``h(u*) > 10·maxᵢ h(uᵢ)`` (prediction stderr above √10 ≈ 3.2× the worst fitted trial's):
      correct extrapolations on such clustered rungs reach ratios of 3.1–16, while the
      clustered-valley cases of ``tests/test_fit.py`` reach hundreds and more.

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


def _rejection(model: _LocalModel, region: _Region, box: _Box) -> RejectedModel | None:
    """The model's optimum with the reason :func:`implausible_reason` gives for distrusting it, or
    None when the trials support it."""
    best_value = model.value + region.offset
    residual = math.sqrt(model.residual_var)
    leverage_ratio = model.leverage / model.leverage_max if model.leverage_max > 0.0 else math.inf
    reason = implausible_reason(region.offset - best_value, region.spread, residual, leverage_ratio)
    if reason is None:
        return None
    return RejectedModel(
        coords=_embed(model.minimiser, region, box),
        value=best_value,
        best=region.offset,
        spread=region.spread,
        residual=residual,
        leverage_ratio=leverage_ratio,
        reason=reason,
    )


def _fallback_implausible(
    coords: FloatArray,
    values: FloatArray,
    finite: NDArray[np.bool_],
    spacing: FloatArray,
    rejected: RejectedModel,
) -> LocalFit:
    """The rank-weighted mean of the best ``max(d + 2, ⌈√n⌉)`` trials, their spread as covariance.

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
    covariance = covariance + np.diag(
        np.where(swept, (FALLBACK_SPACING_FRACTION * spacing) ** 2, 0.0)
    )
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


def _quadratic_fit(model: _LocalModel, region: _Region, box: _Box, n_trials: int) -> LocalFit:
    """The model's optimum in every coordinate, out of standardised ones: swept coordinates from
    ``u*`` and :func:`_optimum_covariance`; an unswept one at the trials' mean with an infinite
    variance and curvature (nothing is known about it)."""
    cov_u = _optimum_covariance(model, box.spacing[box.swept], region.width)
    dims = len(box.swept)
    swept_index = np.flatnonzero(box.swept)
    full_cov = np.zeros((dims, dims))
    full_cov[np.ix_(swept_index, swept_index)] = cov_u * np.outer(region.width, region.width)
    full_hess = np.full((dims, dims), np.inf)
    full_hess[np.ix_(swept_index, swept_index)] = model.hessian / np.outer(
        region.width, region.width
    )
    for j in np.flatnonzero(~box.swept):
        full_cov[j, j] = np.inf
    return LocalFit(
        coords=_embed(model.minimiser, region, box),
        covariance=full_cov,
        value=model.value + region.offset,
        hessian=full_hess,
        n_trials=box.n_finite,
        n_diverged=int(n_trials - box.n_finite),
        n_used=len(region.rows),
        method="quadratic",
        at_boundary=model.at_boundary,
    )


def _optimum_covariance(model: _LocalModel, spacing: FloatArray, width: FloatArray) -> FloatArray:
    """Covariance of the minimiser ``u*``, standardised.

    Inside the box: the delta method ``J cov(θ) Jᵀ``, each stderr raised to at least the floor
    (:data:`FLOOR_FRACTION` of the trial spacing), correlations kept. On the box's edge the
    quadratic says little: a stderr of one trial spacing where the model's slope at the edge is
    resolved (beyond :data:`EDGE_SLOPE_Z` of its standard errors), else the cap: noise alone may
    have put the minimiser there. Either way each stderr is then capped at
    :data:`RANGE_CAP` times the swept range, again keeping the correlations.

    Args:
        model: the fitted local model.
        spacing: (d_swept,) typical trial spacing of the swept coordinates, in fitted units.
        width: (d_swept,) their range, which standardises them.
    """
    floor = FLOOR_FRACTION * spacing / width
    if model.jacobian is not None:
        cov_u = model.jacobian @ model.coef_cov @ model.jacobian.T
        var_u = np.maximum(np.diag(cov_u), floor**2)
        scale_fix = np.sqrt(var_u / np.maximum(np.diag(cov_u), VARIANCE_GUARD))
        cov_u = cov_u * np.outer(scale_fix, scale_fix)
    else:
        # on the edge: a trial spacing of doubt where the slope there says the optimum is past
        # it; where the slope is within noise of 0, the optimum is anywhere in the box (the cap)
        doubt = np.where(model.edge_resolved, (spacing / width) ** 2, RANGE_CAP**2)
        cov_u = np.diag(np.maximum(doubt, floor**2))
    cap = np.full(len(width), RANGE_CAP**2)
    diag = np.diag(cov_u)
    shrink = np.sqrt(np.minimum(cap, diag) / np.maximum(diag, VARIANCE_GUARD))
    return np.asarray(cov_u * np.outer(shrink, shrink), dtype=np.float64)


def _embed(u: FloatArray, region: _Region, box: _Box) -> FloatArray:
    """A standardised point of the swept coordinates in all of them, fitted units: ``center +
    width·u``, and the finite trials' mean in an unswept coordinate."""
    point = box.mean.copy()
    point[box.swept] = region.center + region.width * u
    return np.asarray(point, dtype=np.float64)


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
            f"{name}={to_natural(c, name in log_params):.4g}"
            for name, c in zip(params, point, strict=True)
        )

    return (
        f"at {scale!r} the local model predicts {sign * rejected.value:.4g} at "
        f"({where(rejected.coords)}) while the best trial is {sign * rejected.best:.4g}: "
        f"{rejected.reason}. Not trusted: using the rank-weighted mean of the best "
        f"{local.n_used} trials ({where(local.coords)}) with their spread as stderr "
        "(method='fallback-implausible'). Sample around that point to settle the optimum."
    )


def locate_optimum(
    observations: Sequence[Observation],
    params: Sequence[str],
    *,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
) -> tuple[ScaleOptimum, tuple[Diagnostic, ...]]:
    """The optimum of the trials at one scale, by a local quadratic model, and what to report.

    Method (see the module docstring): fit ``f(u) = c + gᵀu + ½uᵀHu`` with all interactions, in
    fitted coordinates (log for log parameters), to the best ~2.5·√n finite trials weighted by rank
    in value; minimise it inside the box spanned by the finite trials; the standard error comes from
    the delta method on ``u* = −H⁻¹g``. Diverged runs (NaN, inf, failed) only bound the region;
    pruned runs are ignored. With fewer finite trials than the quadratic needs (``n_coef + 2``),
    the estimate is the best trial with a stderr of half the trial spacing
    (:data:`FALLBACK_SPACING_FRACTION`, ``method="fallback"``).

    The model's minimum is not trusted when the trials do not support it (:func:`implausible_reason`):
    (1) it lies below the best trial by more than the fitted trials' whole value spread ``V`` and
    three residual standard deviations ``s`` — no fitted trial supports such a drop; or (2) its
    leverage ``x(u*)ᵀ(AᵀWA)⁻¹x(u*)`` exceeds :data:`LEVERAGE_RATIO` (10) times every fitted
    trial's, i.e. the minimiser lies well outside the trials' regressor-variable hull and is an
    extrapolation (Montgomery, Peck & Vining, §3.8). Then the estimate is the ``1 − ¾t²``
    rank-weighted mean of the best ``max(d + 2, ⌈√n⌉)`` trials with their weighted covariance
    (plus half the spacing squared) as its covariance (``method="fallback-implausible"``): a wide
    stderr, so power laws weigh that scale little.

    Args:
        observations: trials at a single scale.
        params: the swept parameters to locate jointly.
        direction: ``"minimize"`` (default) or ``"maximize"`` the value.
        log_params: names fitted in log space (default: every all-positive parameter).

    Returns:
        The optimum, and a ``"fallback"`` :class:`Diagnostic` (``act=True``, naming the scale and
        the numbers) when the estimate fell back to the best trial or rejected the local model as
        implausible; no diagnostic otherwise.

    Raises:
        TransferSearchError: no observations, more than one scale, an empty or unknown ``params``,
            a trial lacks a parameter, a non-positive value on a log coordinate, or every trial
            diverged.
    """
    sign = check_direction(direction)
    names = check_params(params)
    obs = list(observations)
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
    scale = obs[0].scale
    optimum = to_optimum(local, scale, names, logs, sign)
    return optimum, _fallback_diagnostics(local, scale, names, logs, sign)


def _fallback_diagnostics(
    local: LocalFit, scale: Scale, names: tuple[str, ...], logs: Sequence[str], sign: float
) -> tuple[Diagnostic, ...]:
    """The record of a fallback (too few trials, or an implausible model) at ``scale``."""
    if local.method == "fallback":
        message = (
            f"only {local.n_trials} finite trials at {scale!r}, fewer than the "
            f"{min_quadratic_trials(len(names))} a quadratic in {len(names)} parameters needs: using the "
            "best trial (method='fallback'). Add trials for a better estimate."
        )
    elif local.method == "fallback-implausible":
        message = implausible_message(local, scale, names, logs, sign)
    else:
        return ()
    return (Diagnostic(kind="fallback", message=message, act=True, scale=scale),)

"""One valley over every rung at once, so noisy rungs borrow strength from their neighbours.

The surrogate (docs/science.md §7.1), in standardised fitted coordinates ``u``::

    f_s(u) = c_s + ½(u − μ_s)ᵀH(u − μ_s) + ½ Σ_j b_j · max(u_j − μ_sj, 0)²

Each rung ``s`` has its own depth ``c_s`` and centre ``μ_s``; the curvature ``H`` and the extra
curvature ``b`` of the upper walls (a divergence cliff in the learning rate makes ``b > 0``) are
shared. Writing ``g_s = −Hμ_s`` makes the symmetric part linear in its coefficients — per-rung
offsets and linear terms, shared quadratic terms — so it is one weighted least-squares solve over
the best region of every rung (:func:`transfersearch.fitting.quadratic.select_region`). The wall
term is linear given the centres; it is refitted with the centres from the previous pass until
they stop moving (a fixed-point iteration, :data:`WALL_TOLERANCE`). A rung with 8 trials then estimates only its ``1 + d`` own numbers
instead of a whole quadratic, which is what lets per-rung optima carry a law.

The centres' covariance is the delta method on ``μ_s = −H⁻¹g_s`` (noise) plus the quadratic's
misfit, read from how far the centres move when the regions double, net of noise (a Hausman
contrast, :func:`_misfit_variance`). The misfit splits in two: the part that differs between rungs
joins each centre's covariance; the part they share (one valley shape) is
``Valley.shared_bias_var``, which a prediction carries but the drift does not. On the skewed
valleys of ``tests/test_fit.py`` (``skewed_rungs``) the delta method alone gives centre z-scores
of rms 5.8, with both misfit parts rms 1.5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from transfersearch.fitting.coords import FloatArray
from transfersearch.fitting.local import POSITIVE_CURVATURE
from transfersearch.fitting.quadratic import gradient_jacobian, hessians, select_region

__all__ = ["RungTrials", "Valley", "fit_valley", "pooled_region_size", "unvaried_coordinates"]

#: The wall's fixed-point iteration (centres → wall columns → refit) stops once no centre moves by
#: more than this, in standardised coordinates (the pooled trials span 1): far below any trial
#: spacing. It converges linearly (a 3× steeper upper wall needs ~10 plain passes), so every third
#: pass takes Aitken's Δ² step (docs/science.md §7.2).
WALL_TOLERANCE = 1e-5
#: At most this many passes (the iteration is a contraction on every valley measured; the cap only
#: bounds a pathological one, whose last pass is kept).
WALL_MAX_PASSES = 100
#: A coordinate's wall is kept only where its coefficient exceeds this many standard errors (the
#: Wald statistic of a nested term); otherwise that wall is refitted as 0. The wall's column is
#: nearly collinear with each rung's own linear terms, so an unsupported wall mostly adds variance:
#: measured on 5-rung symmetric 2-D valleys with 10–16 noisy trials per rung (tests/test_fit.py
#: ``valley_rungs``), an always-on wall doubled the centres' error (0.06 → 0.03 at noise 0.02,
#: 0.23 → 0.14 at noise 0.1) and lost to fitting each rung alone; at 2 SE walls of 1–3× the
#: curvature are still found and the centres are no worse than with the wall always on.
WALL_Z = 2.0
#: The misfit check refits the valley on regions this many times larger (see
#: :func:`_misfit_variance`).
MISFIT_GROWTH = 2.0
#: Numerical floor of a centre's standard error, as a fraction of the rung's trial spacing. The
#: delta method and the misfit contrast carry the real uncertainty; the floor only keeps an exactly
#: quadratic surface (standard errors ~1e-14) from making the law's likelihood singular.
POOLED_FLOOR = 1e-3
#: How far past the edge of its trials a rung's centre is still read off the valley, in units of
#: the rung's own swept range: the quadratic's shape is measured over about one range (the best
#: region), and an extrapolation by more than that is a guess of the wall's form. Beyond it the
#: rung says only "past this edge" (a censored observation, docs/science.md §7.1). The same
#: one-range bound as :data:`transfersearch.fitting.local.RANGE_CAP`.
EXTRAPOLATION_LIMIT = 1.0
#: Newton steps for a rung's minimiser of the piecewise-quadratic valley (exact after the active
#: set settles; two or three steps in practice).
NEWTON_STEPS = 20


@dataclass(frozen=True, eq=False)
class RungTrials:
    """One rung's trials in fitted coordinates (minimisation sign; NaN for a diverged trial)."""

    coords: FloatArray  # (n, d)
    values: FloatArray  # (n,)


@dataclass(frozen=True, eq=False)
class Valley:
    """The pooled valley, in fitted coordinates and the minimisation sign.

    Attributes:
        pooled: which rungs the valley holds (a rung needs ``d + 1`` finite trials that span
            every coordinate: with the curvature shared, its depth and centre are ``1 + d``
            numbers; two trials place a 1-D centre).
        centers: (S, d) each rung's optimum (NaN rows for rungs not pooled). Never clipped to
            the trials' box: a centre past the edge is the valley's extrapolation, its variance
            at least the squared distance past the edge (docs/science.md §7.1); past
            :data:`EXTRAPOLATION_LIMIT` ranges it is held at that limit and ``censored``.
        center_cov: (S, d, d) covariance of each centre.
        depths: (S,) the valley's value at each centre.
        hessian: (d, d) the shared curvature.
        wall: (d,) extra curvature above the optimum, per coordinate.
        at_boundary: (S,) the centre lies outside the box the rung's finite trials span.
        past_edge: (S, d) how far each centre lies past its rung's box, signed (+ above the
            upper edge, − below the lower one, 0 inside), fitted units.
        censored: (S, d) +1 where the rung only says "above its upper edge" (the centre lay
            more than :data:`EXTRAPOLATION_LIMIT` ranges past it), −1 "below its lower edge",
            0 otherwise.
        edges: (S, d) the edge a censored coordinate is bounded by (NaN elsewhere).
        n_used: (S,) trials of each rung inside its best region.
        residual: the fit's residual standard deviation (metric units).
        reach: (d,) how far each rung's best region extends from its centre, the median over
            rungs of the region's half-width: the valley's shape is measured that far and no
            further (the decision's shift is held within it). NaN without covariance.
        shared_bias_var: (d,) variance of a bias every centre shares (the quadratic's misfit
            to the valley's shape, see :func:`_misfit_variance`; 0 without covariance). It
            leaves the drift alone but a prediction carries it.
    """

    pooled: NDArray[np.bool_]
    centers: FloatArray
    center_cov: FloatArray
    depths: FloatArray
    hessian: FloatArray
    wall: FloatArray
    at_boundary: NDArray[np.bool_]
    n_used: NDArray[np.int64]
    residual: float
    reach: FloatArray
    shared_bias_var: FloatArray
    past_edge: FloatArray
    censored: NDArray[np.int8]
    edges: FloatArray


def _placeable(rung: RungTrials) -> bool:
    """Whether the valley can place this rung's centre: ``d + 1`` finite trials whose coordinates
    span every direction (``[1, x]`` of full column rank), since with the curvature shared the
    rung's own unknowns are its depth and its ``d`` linear terms."""
    finite = np.isfinite(rung.values)
    dims = rung.coords.shape[1]
    if int(finite.sum()) < dims + 1:
        return False
    if int(finite.sum()) >= 2 * dims + 3:  # a full best region: the fit's own rank decides
        return True
    good = rung.coords[finite]
    centred = good - good.mean(axis=0)
    return bool(np.linalg.matrix_rank(centred.T @ centred) == dims)


def pooled_region_size(n_finite: int, dims: int) -> int:
    """Best-region size of one rung in the pooled fit: ``≈ 2.5·√n``, at least ``2d + 3``.

    A rung only places its own offset and centre (``1 + d`` numbers), so it needs fewer trials
    than a whole local quadratic; ``2.5·√n`` keeps the far walls out as the rung grows.
    """
    return int(min(n_finite, max(2 * dims + 3, math.ceil(2.5 * math.sqrt(n_finite)))))


@dataclass(frozen=True, eq=False)
class _Rows:
    """The stacked best regions: standardised coordinates, rung index, values, weights."""

    u: FloatArray  # (m, d)
    rung: NDArray[np.intp]  # (m,) position among the pooled rungs
    target: FloatArray  # (m,) value minus the rung's best
    sqrt_w: FloatArray  # (m,)
    best: FloatArray  # (S_pooled,) each pooled rung's best value
    low: FloatArray  # (S_pooled, d) box of each rung's finite trials, standardised
    high: FloatArray
    spacing: FloatArray  # (S_pooled, d) typical trial spacing, standardised


def _stack(
    rungs: Sequence[RungTrials], pooled: NDArray[np.bool_], grow: float = 1.0
) -> tuple[_Rows, FloatArray, FloatArray] | None:
    """The best region of each pooled rung (``grow`` times the usual size), standardised by the
    pooled finite trials."""
    dims = rungs[0].coords.shape[1]
    kept = [r for r, keep in zip(rungs, pooled, strict=True) if keep]
    finite_of = [np.flatnonzero(np.isfinite(r.values)) for r in kept]
    goods = [r.coords[f] for r, f in zip(kept, finite_of, strict=True)]
    boxes = [(g.min(axis=0), g.max(axis=0)) for g in goods]
    count = sum(len(f) for f in finite_of)
    center = sum(g.sum(axis=0) for g in goods) / count
    width = np.max([b[1] for b in boxes], axis=0) - np.min([b[0] for b in boxes], axis=0)
    if np.any(width <= 0.0):
        return None
    blocks_u, blocks_s, blocks_y, blocks_w = [], [], [], []
    best, low, high, spacing = [], [], [], []
    for position, (rung, finite, (lo, hi)) in enumerate(zip(kept, finite_of, boxes)):
        size = min(len(finite), math.ceil(grow * pooled_region_size(len(finite), dims)))
        chosen, weights = select_region(rung.values[finite], size)
        picked = finite[chosen]
        top = float(rung.values[picked].min())
        blocks_u.append((rung.coords[picked] - center) / width)
        blocks_s.append(np.full(len(picked), position))
        blocks_y.append(rung.values[picked] - top)
        blocks_w.append(weights)
        best.append(top)
        low.append((lo - center) / width)
        high.append((hi - center) / width)
        spacing.append((hi - lo) / width / max(len(finite), 1) ** (1.0 / dims))
    rows = _Rows(
        u=np.vstack(blocks_u),
        rung=np.concatenate(blocks_s).astype(np.intp),
        target=np.concatenate(blocks_y),
        sqrt_w=np.sqrt(np.concatenate(blocks_w)),
        best=np.array(best),
        low=np.array(low),
        high=np.array(high),
        spacing=np.array(spacing),
    )
    return rows, center, width


def _design(rows: _Rows, n_rungs: int, anchors: FloatArray | None) -> FloatArray:
    """Columns: per-rung offset, per-rung linear u_j, shared u_j·u_l (j ≤ l), shared walls."""
    m, dims = rows.u.shape
    offsets = np.zeros((m, n_rungs))
    offsets[np.arange(m), rows.rung] = 1.0
    linear = np.zeros((m, n_rungs * dims))
    for j in range(dims):
        linear[np.arange(m), rows.rung * dims + j] = rows.u[:, j]
    quad = [rows.u[:, j] * rows.u[:, k] for j in range(dims) for k in range(j, dims)]
    columns = [offsets, linear, np.column_stack(quad)]
    if anchors is not None:
        above = np.clip(rows.u - anchors[rows.rung], 0.0, None)
        columns.append(0.5 * above**2)
    return np.column_stack(columns)


def _minimise(
    grads: FloatArray, hess: FloatArray, wall: FloatArray, anchors: FloatArray
) -> FloatArray:
    """Solve ``g_s + Hu + b∘max(u − a_s, 0) = 0`` for every rung ``s`` at once, by Newton's
    method on the active set (``grads`` and ``anchors`` are (S, d); the result is (S, d))."""
    u = np.asarray(-np.linalg.solve(hess, grads.T).T, dtype=np.float64)
    for _ in range(NEWTON_STEPS):
        active = (u > anchors).astype(np.float64)
        gradient = grads + u @ hess + wall * active * (u - anchors)
        curvature = hess[None, :, :] + (wall * active)[:, :, None] * np.eye(len(wall))
        step = np.linalg.solve(curvature, gradient[:, :, None])[:, :, 0]
        u = u - step
        if float(np.max(np.abs(step))) < 1e-12:
            break
    return u


def _positive(matrix: FloatArray) -> bool:
    eigen = np.linalg.eigvalsh(matrix)
    return bool(
        np.all(np.isfinite(eigen)) and eigen.min() > POSITIVE_CURVATURE * np.abs(eigen).max()
    )


@dataclass(frozen=True, eq=False)
class _Solved:
    theta: FloatArray
    grads: FloatArray  # (S, d)
    hess: FloatArray
    wall: FloatArray
    centers: FloatArray  # (S, d) standardised
    design: FloatArray  # weighted
    gram: FloatArray  # design.T @ design


def _solve(rows: _Rows, n_rungs: int, anchors: FloatArray | None) -> _Solved | None:
    dims = rows.u.shape[1]
    design: FloatArray = np.asarray(
        _design(rows, n_rungs, anchors) * rows.sqrt_w[:, None], dtype=np.float64
    )
    if design.shape[0] <= design.shape[1]:
        return None
    target = rows.target * rows.sqrt_w
    gram = design.T @ design
    # Normal equations: the design is tall and well scaled (standardised u); a wall column with no
    # trial above any centre is all zero, so it gets a unit diagonal and a zero coefficient.
    empty = np.diag(gram) <= 0.0
    gram[empty, empty] = 1.0
    try:
        theta = np.linalg.solve(gram, design.T @ target)
    except np.linalg.LinAlgError:
        theta = np.asarray(np.linalg.lstsq(design, target, rcond=None)[0], dtype=np.float64)
    start = n_rungs
    coef: FloatArray = np.asarray(theta, dtype=np.float64)
    grads: FloatArray = coef[start : start + n_rungs * dims].reshape(n_rungs, dims)
    n_quad = dims * (dims + 1) // 2
    quad: FloatArray = coef[start + n_rungs * dims : start + n_rungs * dims + n_quad]
    hess: FloatArray = hessians(quad[None, :], dims)[0]
    wall: FloatArray = (
        coef[start + n_rungs * dims + n_quad :] if anchors is not None else np.zeros(dims)
    )
    if not _positive(hess + np.diag(np.minimum(wall, 0.0))):
        return None
    if anchors is None:
        centers = -np.linalg.solve(hess, grads.T).T
    else:
        centers = _minimise(grads, hess, wall, anchors)
    centers = np.asarray(centers, dtype=np.float64)
    design64: FloatArray = np.asarray(design, dtype=np.float64)
    return _Solved(
        coef,
        grads,
        hess,
        wall,
        np.asarray(centers, dtype=np.float64),
        design64,
        np.asarray(gram, dtype=np.float64),
    )


def _center_covariance(solved: _Solved, rows: _Rows, n_rungs: int) -> FloatArray:
    """Delta method: ``∂μ_s/∂θ = −H̄⁻¹ ∂∇f/∂θ`` with ``H̄ = H + ½diag(b)`` (the wall is half-on at
    the optimum), the coefficients' covariance ``s²(AᵀWA)⁻¹``."""
    dims = rows.u.shape[1]
    design = solved.design
    residual = rows.target * rows.sqrt_w - design @ solved.theta
    dof = max(design.shape[0] - design.shape[1], 1)
    sigma2 = float(residual @ residual) / dof
    cov_theta = sigma2 * np.linalg.pinv(solved.gram, hermitian=True)
    inverse = np.linalg.inv(solved.hess + 0.5 * np.diag(solved.wall))
    out = np.empty((n_rungs, dims, dims))
    quad_start = n_rungs + n_rungs * dims
    quad_stop = quad_start + dims * (dims + 1) // 2
    for s in range(n_rungs):
        d_grad = np.zeros((dims, design.shape[1]))
        d_grad[:, n_rungs + s * dims : n_rungs + (s + 1) * dims] = np.eye(dims)
        d_grad[:, quad_start:quad_stop] = gradient_jacobian(solved.centers[s])
        jac = -inverse @ d_grad
        out[s] = jac @ cov_theta @ jac.T
    return out


def fit_valley(
    rungs: Sequence[RungTrials],
    *,
    with_covariance: bool = True,
    walls: NDArray[np.bool_] | None = None,
    unvaried: NDArray[np.bool_] | None = None,
) -> Valley | None:
    """Fit the pooled valley to the rungs' trials.

    Args:
        rungs: each rung's trials in fitted coordinates (all with the same parameters).
        with_covariance: compute the centres' covariance (NaN otherwise: a bootstrap resample
            needs only the centres).
        walls: per coordinate, whether the valley has an upper wall; default: decided from the
            data (:data:`WALL_Z`). A bootstrap resample passes the full fit's choice (``wall !=
            0``): the choice is a model decision, not a quantity to redraw, and skipping the
            test halves the resample's solves.
        unvaried: per coordinate, whether no trial varies it (:func:`unvaried_coordinates`);
            default computed here (a resample passes the full fit's, as for ``walls``).

    Returns:
        The :class:`Valley`, or None when fewer than two rungs can be pooled, a coordinate is not
        swept, or the shared curvature has no minimum (the caller falls back to per-rung fits).
    """
    held = unvaried_coordinates(rungs) if unvaried is None else unvaried
    if held.any() and not held.all():
        return _without(rungs, held, with_covariance, walls)
    pooled = np.array([_placeable(r) for r in rungs])
    if pooled.sum() < 2:
        return None
    fitted = _fit_region(rungs, pooled, 1.0, walls)
    if fitted is None:
        return None
    solved, rows, center, width = fitted
    misfit = None
    if with_covariance:
        wider = _fit_region(rungs, pooled, MISFIT_GROWTH, walls)
        if wider is not None:
            misfit = _misfit_variance(solved, rows, wider[0], wider[1])
    return _valley(solved, rows, pooled, center, width, with_covariance, misfit)


def unvaried_coordinates(rungs: Sequence[RungTrials]) -> NDArray[np.bool_]:
    """(d,) coordinates no finite trial of any rung varies (a recorded, never-swept parameter)."""
    finite = [r.coords[np.isfinite(r.values)] for r in rungs if np.isfinite(r.values).any()]
    good = np.vstack(finite)
    spread = np.ptp(good, axis=0)
    return np.asarray(spread <= 1e-12 * np.maximum(1.0, np.abs(good).max(axis=0)), dtype=bool)


def _without(
    rungs: Sequence[RungTrials],
    held: NDArray[np.bool_],
    with_covariance: bool,
    walls: NDArray[np.bool_] | None,
) -> Valley | None:
    """The valley of the varied coordinates; a never-varied one is dropped from the fit and
    reported at its one value with an infinite variance and curvature (nothing is known about its
    optimum: the convention of a coordinate a rung does not sweep)."""
    keep = ~held
    sub = [RungTrials(r.coords[:, keep], r.values) for r in rungs]
    inner = fit_valley(
        sub,
        with_covariance=with_covariance,
        walls=None if walls is None else walls[keep],
        unvaried=np.zeros(int(keep.sum()), dtype=bool),
    )
    if inner is None:
        return None
    total, dims = len(rungs), len(held)
    value = np.vstack([r.coords[np.isfinite(r.values)] for r in rungs])[0]

    def widen(part: FloatArray, fill: float) -> FloatArray:
        out = np.full((total, dims), fill)
        out[:, keep] = part
        return out

    centers = widen(inner.centers, np.nan)
    centers[np.ix_(inner.pooled, held)] = value[held]
    cov = np.zeros((total, dims, dims))
    cov[np.ix_(np.arange(total), keep, keep)] = inner.center_cov
    cov[:, held, held] = np.inf
    hessian = np.full((dims, dims), np.inf)
    hessian[np.ix_(keep, keep)] = inner.hessian
    wall = np.zeros(dims)
    wall[keep] = inner.wall
    vector = np.zeros(dims)
    reach = np.zeros(dims)
    reach[keep] = inner.reach
    vector[keep] = inner.shared_bias_var
    censored = np.zeros((total, dims), dtype=np.int8)
    censored[:, keep] = inner.censored
    return replace(
        inner,
        centers=centers,
        center_cov=cov,
        hessian=hessian,
        wall=wall,
        reach=reach,
        shared_bias_var=vector,
        past_edge=widen(inner.past_edge, 0.0),
        censored=censored,
        edges=widen(inner.edges, np.nan),
    )


def _fit_region(
    rungs: Sequence[RungTrials],
    pooled: NDArray[np.bool_],
    grow: float,
    walls: NDArray[np.bool_] | None,
) -> tuple[_Solved, _Rows, FloatArray, FloatArray] | None:
    """The symmetric fit, then the walls that the data support (or ``walls`` when given)."""
    dims = rungs[0].coords.shape[1]
    stacked = _stack(rungs, pooled, grow)
    if stacked is None:
        return None
    rows, center, width = stacked
    n_rungs = int(pooled.sum())
    solved = _solve(rows, n_rungs, None)
    if solved is None:
        return None
    if walls is not None:
        walled = _with_walls(solved, rows, n_rungs, walls) if walls.any() else solved
        return walled, rows, center, width
    walled = _with_walls(solved, rows, n_rungs, np.ones(dims, dtype=bool))
    keep = _supported_walls(walled, rows)
    if not keep.all():
        walled = _with_walls(solved, rows, n_rungs, keep) if keep.any() else solved
    return walled, rows, center, width


def _misfit_variance(
    solved: _Solved, rows: _Rows, wider: _Solved, wider_rows: _Rows
) -> tuple[FloatArray, FloatArray]:
    """Per coordinate, the squared bias of the centres that the quadratic's misfit causes:
    (the part that differs between rungs, the part they share).

    A surrogate that is right near the optimum gives the same centres from a wider region; where
    the valley is not quadratic (a skewed wall, a flattening plateau) the centres move as the
    region grows, by ``δ_s = μ_s(k) − μ_s(2k)``. For nested regions the noise part of ``E[δ²]``
    is ``Var μ_k − Var μ_2k`` (the wider estimator is the more efficient one, so their covariance
    is ``Var μ_2k``: a Hausman contrast). The mean ``δ̄`` over rungs is a bias every rung shares
    (one valley shape): it moves every optimum alike, so it leaves the drift and the rungs'
    comparisons alone and only adds to a prediction's uncertainty. The spread of ``δ_s`` about
    ``δ̄`` is each rung's own bias, independent between rungs. Each part is net of its noise.
    """
    n_rungs = solved.centers.shape[0]
    narrow_var = np.array([np.diag(c) for c in _center_covariance(solved, rows, n_rungs)])
    wide_var = np.array([np.diag(c) for c in _center_covariance(wider, wider_rows, n_rungs)])
    noise = np.clip(narrow_var - wide_var, 0.0, None).mean(axis=0)
    delta = solved.centers - wider.centers
    mean = delta.mean(axis=0)
    shared = np.clip(mean**2 - noise / n_rungs, 0.0, None)
    spread = ((delta - mean) ** 2).sum(axis=0) / max(n_rungs - 1, 1)
    own = np.clip(spread - noise, 0.0, None)
    return np.asarray(own, dtype=np.float64), np.asarray(shared, dtype=np.float64)


def _with_walls(symmetric: _Solved, rows: _Rows, n_rungs: int, walls: NDArray[np.bool_]) -> _Solved:
    """The fixed-point wall refit from the symmetric fit, with walls only on ``walls``.

    A coordinate without a wall is anchored above every trial: its column is all zero and
    :func:`_solve` gives it a zero coefficient.
    """
    beyond = rows.u.max(axis=0) + 1.0
    solved = symmetric
    anchors = symmetric.centers
    history: list[FloatArray] = []
    for _ in range(WALL_MAX_PASSES):
        refit = _solve(rows, n_rungs, np.where(walls, anchors, beyond))
        if refit is None:
            break
        solved = refit
        if float(np.max(np.abs(refit.centers - anchors))) < WALL_TOLERANCE:
            break
        history.append(anchors)
        if len(history) == 2:
            # Aitken's Δ² on each centre (Steffensen's method): the iteration converges
            # linearly, and the extrapolated anchors land near the fixed point in one step
            first, second, third = history[0], history[1], refit.centers
            curve = third - 2.0 * second + first
            usable = np.abs(curve) > 1e-12
            jump = (third - second) ** 2 / np.where(usable, curve, 1.0)
            anchors = np.where(usable, third - jump, third)
            history = []
        else:
            anchors = refit.centers
    return solved


def _supported_walls(solved: _Solved, rows: _Rows) -> NDArray[np.bool_]:
    """Per coordinate: the wall coefficient exceeds :data:`WALL_Z` standard errors."""
    dims = rows.u.shape[1]
    if not np.any(solved.wall):  # the symmetric fit: no wall columns
        return np.zeros(dims, dtype=bool)
    residual = rows.target * rows.sqrt_w - solved.design @ solved.theta
    dof = max(solved.design.shape[0] - solved.design.shape[1], 1)
    sigma2 = float(residual @ residual) / dof
    variance = sigma2 * np.diag(np.linalg.pinv(solved.gram, hermitian=True))[-dims:]
    stderr = np.sqrt(np.clip(variance, 0.0, None))
    return np.asarray(np.abs(solved.wall) > WALL_Z * stderr, dtype=bool)


def _valley(
    solved: _Solved,
    rows: _Rows,
    pooled: NDArray[np.bool_],
    center: FloatArray,
    width: FloatArray,
    with_covariance: bool,
    misfit: tuple[FloatArray, FloatArray] | None,
) -> Valley:
    """The :class:`Valley` in fitted coordinates, out of the standardised fit: each pooled rung's
    centre (held at :data:`EXTRAPOLATION_LIMIT` past its edge), covariance, depth and bounds."""
    n_rungs, dims = solved.centers.shape
    inside = np.clip(solved.centers, rows.low, rows.high)
    past = solved.centers - inside  # signed distance past the box, standardised
    cov_u = _pooled_covariance(solved, rows, with_covariance, misfit, past)
    boundary = np.any(np.abs(past) > 1e-12, axis=1)
    limit = EXTRAPOLATION_LIMIT * (rows.high - rows.low)
    censored = np.where(past > limit, 1, np.where(past < -limit, -1, 0)).astype(np.int8)
    # an extrapolation past the limit is held there: the rung then says only "past this edge"
    placed = np.clip(solved.centers, rows.low - limit, rows.high + limit)
    total = len(pooled)
    centers = np.full((total, dims), np.nan)
    covs = np.full((total, dims, dims), np.nan)
    depths = np.full(total, np.nan)
    at_boundary = np.zeros(total, dtype=bool)
    n_used = np.zeros(total, dtype=np.int64)
    past_edge = np.zeros((total, dims))
    censored_all = np.zeros((total, dims), dtype=np.int8)
    edges = np.full((total, dims), np.nan)
    where = np.flatnonzero(pooled)
    for s, index in enumerate(where):
        u = placed[s]
        past_edge[index] = past[s] * width
        censored_all[index] = censored[s]
        edge = np.where(censored[s] > 0, rows.high[s], rows.low[s])
        edges[index] = np.where(censored[s] != 0, center + width * edge, np.nan)
        centers[index] = center + width * u
        covs[index] = cov_u[s] * np.outer(width, width)
        depths[index] = rows.best[s] + _value(solved, s, u)
        at_boundary[index] = boundary[s]
        n_used[index] = int((rows.rung == s).sum())
    design = solved.design
    residual = rows.target * rows.sqrt_w - design @ solved.theta
    dof = max(design.shape[0] - design.shape[1], 1)
    return Valley(
        pooled=pooled,
        centers=centers,
        center_cov=covs,
        depths=depths,
        hessian=solved.hess / np.outer(width, width),
        wall=solved.wall / width**2,
        at_boundary=at_boundary,
        n_used=n_used,
        residual=math.sqrt(float(residual @ residual) / dof),
        reach=_reach(rows, n_rungs) * width if with_covariance else np.full(dims, np.nan),
        shared_bias_var=(misfit[1] if misfit is not None else np.zeros(dims)) * width**2,
        past_edge=past_edge,
        censored=censored_all,
        edges=edges,
    )


def _pooled_covariance(
    solved: _Solved,
    rows: _Rows,
    with_covariance: bool,
    misfit: tuple[FloatArray, FloatArray] | None,
    past: FloatArray,
) -> FloatArray:
    """(S, d, d) the pooled centres' covariance, standardised: the delta method
    (:func:`_center_covariance`) plus each rung's own misfit, every sd at least
    :data:`POOLED_FLOOR` of a trial spacing, or a whole spacing past the edge (NaN without
    covariance)."""
    n_rungs, dims = solved.centers.shape
    if with_covariance:
        cov_u = _center_covariance(solved, rows, n_rungs)
        if misfit is not None:
            cov_u = cov_u + np.diag(misfit[0])[None, :, :]
    else:
        cov_u = np.full((n_rungs, dims, dims), np.nan)
    floor = (POOLED_FLOOR * rows.spacing) ** 2
    for s in range(n_rungs):
        # past the edge the delta method's variance grows with the distance (the centre is an
        # extrapolation of the fitted slope and curvature); at least a trial spacing of doubt
        # there, as no trial brackets it (docs/science.md §7.1, which gives the z-scores this
        # was checked against on the box_drift scenarios).
        least = np.where(np.abs(past[s]) > 1e-12, rows.spacing[s] ** 2, floor[s])
        diag = np.diag(cov_u[s])
        fix = np.sqrt(np.maximum(diag, least) / np.maximum(diag, 1e-300))
        cov_u[s] = cov_u[s] * np.outer(fix, fix)
    return cov_u


def _reach(rows: _Rows, n_rungs: int) -> FloatArray:
    """Median over rungs of each best region's half-width per coordinate (standardised)."""
    half = [np.ptp(rows.u[rows.rung == s], axis=0) / 2.0 for s in range(n_rungs)]
    return np.asarray(np.median(np.array(half), axis=0), dtype=np.float64)


def _value(solved: _Solved, s: int, u: FloatArray) -> float:
    """The fitted value (above the rung's best trial) at ``u``, symmetric part only."""
    n_rungs = solved.centers.shape[0]
    return (
        float(solved.theta[s] + solved.grads[s] @ u + 0.5 * u @ solved.hess @ u) if n_rungs else 0.0
    )

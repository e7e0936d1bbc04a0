"""The decision under uncertainty: the point that minimises the expected target loss.

docs/science.md §7.8. With the target optimum ``x* ~ N(μ, diag σ²)`` (the law's prediction) and the
valley ``L = ½δᵀHδ + ½Σ_j b_j·max(δ_j, 0)²`` (``δ = x − x*``, ``b_j > 0``: the upper wall is
steeper, e.g. a divergence cliff in the learning rate), the expected excess at ``x = μ + m`` is

    E[L] = ½mᵀHm + ½tr(HΣ) + ½Σ_j b_j·E[max(δ_j, 0)²],  δ_j ~ N(m_j, σ_j²),
    E[max(δ, 0)²] = (m² + σ²)Φ(m/σ) + mσφ(m/σ).

Its gradient is ``Hm + b∘(mΦ(m/σ) + σφ(m/σ))`` and its Hessian ``H + diag(b∘Φ(m/σ))``; Newton's
method from ``m = 0`` converges in a few steps. A symmetric valley gives ``m = 0`` (the spread only
adds ``½tr(HΣ)``); a steeper upper wall moves the decision down, the further the wider ``σ``.

Then the stability boundaries (:mod:`.boundary`, docs/science.md §8): a run at ``x`` diverges
with probability ``P(b < x)`` under the boundary's posterior predictive at the target (upper side;
``≈ Φ((x − b̂)/sd_b)``). The decision keeps the chance that any boundary is crossed at most :data:`MAX_P_DIVERGE`
(independent boundaries: ``1 − Π_j(1 − p_j)``; the binding ones share what the others leave,
:func:`boundary_share`), i.e. ``x`` at most its share's quantile of the predictive
(``b̂ − 1.64·sd_b`` for one Gaussian boundary); a point the valley alone would place past that is
moved back to it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr

from transfersearch.fitting.boundary import StabilityBoundary, boundary_rungs, fit_boundaries
from transfersearch.fitting.coords import FloatArray, natural_params, to_fitted
from transfersearch.observations import Observation
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.fitting.result import Extrapolation
    from transfersearch.fitting.rungs import Ladder

__all__ = [
    "MAX_P_DIVERGE",
    "MAX_SHIFT_SD",
    "TargetLoss",
    "boundary_share",
    "expected_excess",
    "p_diverge",
    "safe_shift",
    "stability_limits",
    "with_stability",
]

logger = logging.getLogger(__name__)

#: The decision never moves more than this many predictive standard deviations from the law's
#: point, nor further than the valley's trials reach from its optimum (``reach``): beyond either the
#: valley's shape is extrapolated, and a vague prediction would push the decision off the map.
MAX_SHIFT_SD = 2.0
_NEWTON_STEPS = 30
#: The largest chance that the recommended run diverges. A diverged big run wastes the whole run
#: (users afford 1–3), while stepping back from the boundary costs only the valley's ``½h·δ²``; at
#: 5% one big run in twenty is lost, and the step back from ``b̂`` is ``1.64·sd_b``. All
#: boundaries together stay within it (each gets ``MAX_P_DIVERGE / m``).
MAX_P_DIVERGE = 0.05


def _hinge_moments(shift: FloatArray, sd: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(E[δ₊²], E[δ₊], P(δ > 0)) for δ ~ N(shift, sd²), elementwise; sd = 0 is a point mass."""
    safe = np.where(sd > 0.0, sd, 1.0)
    ratio = shift / safe
    cdf = np.where(sd > 0.0, ndtr(ratio), (shift > 0).astype(np.float64))
    pdf = np.where(sd > 0.0, np.exp(-0.5 * ratio**2) / math.sqrt(2.0 * math.pi), 0.0)
    first = shift * cdf + sd * pdf
    second = (shift**2 + sd**2) * cdf + shift * sd * pdf
    return second, first, cdf


def expected_excess(
    shift: FloatArray, sd: FloatArray, hessian: FloatArray, wall: FloatArray
) -> float:
    """``E[L]`` at ``μ + shift``, the ``½tr(HΣ)`` term included."""
    second, _, _ = _hinge_moments(shift, sd)
    quad = 0.5 * float(shift @ hessian @ shift) + 0.5 * float(np.diag(hessian) @ sd**2)
    return quad + 0.5 * float(wall @ second)


def safe_shift(
    sd: FloatArray, hessian: FloatArray, wall: FloatArray, reach: FloatArray | None = None
) -> FloatArray:
    """The ``m`` minimising ``E[L]`` (see the module docstring), within ±:data:`MAX_SHIFT_SD`·σ
    and within ±``reach``.

    Args:
        sd: (d,) predictive standard deviations of the optimum, fitted coordinates.
        hessian: (d, d) the valley's curvature, fitted coordinates (``inf`` rows: not swept).
        wall: (d,) the extra upper-wall curvature.
        reach: (d,) how far the valley's trials extend from its optimum, fitted coordinates
            (:attr:`transfersearch.fitting.surface.Valley.reach`); default no such limit.

    Returns:
        (d,) the shift from the law's point (0 where a coordinate is not swept).
    """
    dims = len(sd)
    shift = np.zeros(dims)
    swept = np.isfinite(np.diag(hessian)) & np.isfinite(sd)
    if not swept.any() or not np.any(wall[swept] != 0.0):
        return shift
    hess = hessian[np.ix_(swept, swept)]
    b, s = wall[swept], sd[swept]
    limit = MAX_SHIFT_SD * s if reach is None else np.minimum(MAX_SHIFT_SD * s, reach[swept])
    m = np.zeros(int(swept.sum()))
    for _ in range(_NEWTON_STEPS):
        _, first, cdf = _hinge_moments(m, s)
        gradient = hess @ m + b * first
        curvature = hess + np.diag(b * cdf)
        step = np.linalg.solve(curvature, gradient)
        m = np.clip(m - step, -limit, limit)
        if float(np.max(np.abs(step))) < 1e-12:
            break
    shift[swept] = m
    return shift


def boundary_share(
    point: FloatArray,
    boundaries: Sequence[StabilityBoundary],
    columns: Sequence[int],
    p_max: float = MAX_P_DIVERGE,
) -> float:
    """The chance ``q`` each boundary may take so that a run at ``point`` moved back onto the
    binding limits diverges with probability ``p_max`` at most.

    The boundaries are independent: ``1 − Π_j(1 − p_j) ≤ p_max``. Those whose ``p_j`` at ``point``
    is already below the share keep it; the ``k`` others share the rest equally,
    ``q = 1 − ((1 − p_max) / Π_free(1 − p_j))^(1/k)`` (``p_max`` for one boundary; with none
    binding, ``q = p_max``).
    """
    risks = sorted(b.p_diverge(float(point[c])) for b, c in zip(boundaries, columns, strict=True))
    if not risks:
        return p_max
    for free in range(len(risks), -1, -1):  # the ``free`` smallest risks stay where they are
        kept = math.prod(1.0 - r for r in risks[:free])
        binding = len(risks) - free
        if binding == 0:
            if 1.0 - kept <= p_max:
                return p_max
            continue
        share = 1.0 - ((1.0 - p_max) / kept) ** (1.0 / binding) if kept > 1.0 - p_max else 0.0
        if free == 0 or risks[free - 1] <= share:
            return max(share, 0.0)
    return p_max / len(risks)


def stability_limits(
    dims: int,
    boundaries: Sequence[StabilityBoundary],
    columns: Sequence[int],
    p_max: float = MAX_P_DIVERGE,
    point: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(lower, upper) limits per coordinate (fitted) keeping ``P(diverge) ≤ p_max``.

    Each boundary gets the share :func:`boundary_share` of the risk at ``point`` (the valley's
    decision; without it ``p_max / m``, the union bound over ``m`` boundaries): an upper boundary
    caps its coordinate at that quantile of its predictive (``b̂ − z·sd_b`` for a Gaussian one,
    ``z = Φ⁻¹(1 − share)``), a lower one floors it at the ``1 − share`` quantile. Coordinates
    without a boundary are unlimited (±inf).
    """
    lower, upper = np.full(dims, -math.inf), np.full(dims, math.inf)
    if point is None:
        share = p_max / max(len(boundaries), 1)
    else:
        share = boundary_share(point, boundaries, columns, p_max)
    for boundary, column in zip(boundaries, columns, strict=True):
        edge = boundary.limit(share)
        if boundary.side == "upper":
            upper[column] = min(upper[column], edge)
        else:
            lower[column] = max(lower[column], edge)
    return lower, upper


def p_diverge(
    coords: FloatArray, boundaries: Sequence[StabilityBoundary], columns: Sequence[int]
) -> float:
    """``1 − Π_j(1 − p_j)``: the chance that a run at ``coords`` (fitted) crosses any boundary,
    the boundaries taken as independent; 0 with none."""
    stable = 1.0
    for boundary, column in zip(boundaries, columns, strict=True):
        stable *= 1.0 - boundary.p_diverge(float(coords[column]))
    return 1.0 - stable


@dataclass(frozen=True, eq=False)
class TargetLoss:
    """What the decision knows about the target's loss, in fitted coordinates.

    Attributes:
        names: the parameters.
        log_params: those fitted in log space.
        target: the target scale.
        mean: (d,) the law's point (the optimum's mean).
        sd: (d,) its predictive standard deviation (the result's ``stderr``).
        hessian: (d, d) the valley's curvature (minimisation sign; ``inf`` rows: not swept).
        wall: (d,) the valley's extra upper-wall curvature.
        decision: (d,) the single-run decision (``res.params``).
        lower, upper: (d,) the region the decision may use (the stability limits; ±inf).
        boundaries: the stability boundaries, with :attr:`columns` their parameters' columns.
        columns: the column of each boundary.
        worst_excess: the loss charged to a run that diverges: the largest excess over its
            rung's best that a finite trial reached in the sweep (metric units).
        span: (d,) how far the sweep reached around each rung's trials, the median over rungs of
            half the range of the stable trials (fitted coordinates): the valley's shape is
            measured that far, so no candidate run lies further from the law's point (None: no
            such limit).
    """

    names: tuple[str, ...]
    log_params: tuple[str, ...]
    target: Scale
    mean: FloatArray
    sd: FloatArray
    hessian: FloatArray
    wall: FloatArray
    decision: FloatArray
    lower: FloatArray
    upper: FloatArray
    boundaries: tuple[StabilityBoundary, ...]
    columns: tuple[int, ...]
    worst_excess: float
    span: FloatArray | None = None

    @property
    def swept(self) -> FloatArray:
        """Columns the valley measured (finite curvature and prediction)."""
        return np.asarray(np.isfinite(np.diag(self.hessian)) & np.isfinite(self.sd))

    def natural(self, coords: FloatArray) -> dict[str, float]:
        return natural_params(self.names, coords, self.log_params)

    def expected_regret(self, coords: FloatArray) -> float:
        """``E[L(x) − L(x*)]`` at ``coords`` if the run does not diverge (metric units)."""
        swept = self.swept
        if not swept.any():
            return 0.0
        return expected_excess(
            (coords - self.mean)[swept],
            self.sd[swept],
            self.hessian[np.ix_(swept, swept)],
            self.wall[swept],
        )

    def p_diverge(self, coords: FloatArray) -> float:
        """Probability that a run at ``coords`` diverges (any boundary)."""
        return p_diverge(coords, self.boundaries, self.columns)


def _shape(result: Extrapolation, dims: int) -> tuple[FloatArray, FloatArray]:
    """The valley's curvature and walls: the pooled valley's (every optimum carries it), else the
    costliest rung's own quadratic; NaN where none is known."""
    for optimum in reversed(result.optima):
        if optimum.hessian is not None:
            wall = optimum.wall if optimum.wall is not None else np.zeros(dims)
            return np.asarray(optimum.hessian, dtype=np.float64), np.asarray(wall, dtype=np.float64)
    return np.full((dims, dims), np.nan), np.zeros(dims)


def with_stability(
    result: Extrapolation, ladder: Ladder, observations: Sequence[Observation]
) -> Extrapolation:
    """``result`` with its stability boundaries fitted, the decision kept within them, and the
    target's loss model (:class:`TargetLoss`) that ``candidates()`` uses.

    The valley's decision ``law + decision_shift`` is clipped to :func:`stability_limits`
    (whichever is safer); ``boundary_shift`` records the step back, ``p_diverge`` the chance that
    the decision diverges (``p_diverge_law``: the law's point). docs/science.md §8.
    """
    names = ladder.names
    boundaries = _boundaries(result, ladder, observations)
    fits = tuple(boundaries.values())
    columns = tuple(names.index(n) for n in boundaries)
    law = np.array([to_fitted(result.law_params[n], n in ladder.logs) for n in names])
    valley = law + np.array([result.decision_shift[n] for n in names])
    lower, upper = stability_limits(len(names), fits, columns, point=valley)
    decision = np.clip(valley, lower, upper)
    back = decision - valley
    for name, step in zip(names, back, strict=True):
        if step != 0.0:
            logger.info(
                "%s: the valley's decision lay past the stability limit; moved back by %.3g "
                "(fitted units)",
                name,
                step,
            )
    hessian, wall = _shape(result, len(names))
    last = ladder.trials[-1]
    finite = np.isfinite(last.values)
    loss = TargetLoss(
        names=names,
        log_params=ladder.logs,
        target=result.target,
        mean=law,
        sd=np.array([result.stderr[n] for n in names]),
        hessian=hessian,
        wall=wall,
        decision=decision,
        lower=lower,
        upper=upper,
        boundaries=fits,
        columns=columns,
        worst_excess=_worst_excess(ladder),
        span=_span(ladder),
    )
    return replace(
        result,
        params=loss.natural(decision),
        decision_shift={n: float(v) for n, v in zip(names, decision - law, strict=True)},
        boundary=dict(boundaries),
        boundary_shift={n: float(v) for n, v in zip(names, back, strict=True)},
        p_diverge=p_diverge(decision, fits, columns),
        p_diverge_law=p_diverge(law, fits, columns),
        stable_up_to=loss.natural(last.coords[finite].max(axis=0)) if finite.any() else {},
        target_loss=loss,
    )


def _boundaries(
    result: Extrapolation, ladder: Ladder, observations: Sequence[Observation]
) -> dict[str, StabilityBoundary]:
    """Every parameter's stability boundary, predicted at the result's target (docs/science.md
    §8; :func:`~transfersearch.fitting.boundary.fit_boundaries`)."""
    rungs = boundary_rungs(
        ladder.scales,
        [t.coords for t in ladder.trials],
        [t.values for t in ladder.trials],
        observations,
        ladder.names,
        ladder.logs,
        ladder.variables,
    )
    return fit_boundaries(
        rungs,
        ladder.names,
        ladder.logs,
        ladder.variables,
        ladder.target_logs(result.target),
        prior=ladder.prior,
        fixed=ladder.fixed,
    )


def _span(ladder: Ladder) -> FloatArray:
    """Per coordinate, the median over rungs of half the range of the stable trials."""
    halves = [
        np.ptp(t.coords[np.isfinite(t.values)], axis=0) / 2.0
        for t in ladder.trials
        if np.isfinite(t.values).any()
    ]
    return np.asarray(np.median(np.array(halves), axis=0), dtype=np.float64)


def _worst_excess(ladder: Ladder) -> float:
    """The largest excess over its rung's best that a finite trial reached (metric units)."""
    spans = [float(np.ptp(t.values[np.isfinite(t.values)])) for t in ladder.trials]
    return max(spans) if spans else 0.0

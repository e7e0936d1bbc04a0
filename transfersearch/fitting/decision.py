"""The decision under uncertainty: the point that minimises the expected target loss.

SCIENCE.md §7. With the target optimum ``x* ~ N(μ, diag σ²)`` (the law's prediction) and the
valley ``L = ½δᵀHδ + ½Σ_j b_j·max(δ_j, 0)²`` (``δ = x − x*``, ``b_j > 0``: the upper wall is
steeper, e.g. a divergence cliff in the learning rate), the expected excess at ``x = μ + m`` is

    E[L] = ½mᵀHm + ½tr(HΣ) + ½Σ_j b_j·E[max(δ_j, 0)²],  δ_j ~ N(m_j, σ_j²),
    E[max(δ, 0)²] = (m² + σ²)Φ(m/σ) + mσφ(m/σ).

Its gradient is ``Hm + b∘(mΦ(m/σ) + σφ(m/σ))`` and its Hessian ``H + diag(b∘Φ(m/σ))``; Newton's
method from ``m = 0`` converges in a few steps. A symmetric valley gives ``m = 0`` (the spread only
adds ``½tr(HΣ)``); a steeper upper wall moves the decision down, the further the wider ``σ``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from transfersearch.fitting.coords import FloatArray

__all__ = ["MAX_SHIFT_SD", "expected_excess", "safe_shift"]

#: The decision never moves more than this many predictive standard deviations from the law's
#: point, nor further than the valley's trials reach from its optimum (``reach``): beyond either the
#: valley's shape is extrapolated, and a vague prediction would push the decision off the map.
MAX_SHIFT_SD = 2.0
_NEWTON_STEPS = 30


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

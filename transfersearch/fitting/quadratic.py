"""Numerical primitives of the quadratic models: the best region of a rung's trials, designs.

Shared by the per-scale local quadratic (:mod:`.local`) and the pooled valley (:mod:`.surface`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from transfersearch.fitting.coords import FloatArray

__all__ = [
    "gradient_jacobian",
    "hessians",
    "min_cubic_trials",
    "min_quadratic_trials",
    "n_coef",
    "quadratic_design",
    "rank_weights",
    "region_size",
    "select_region",
    "unpack_quadratic",
]


def n_coef(dims: int) -> int:
    """Coefficients of a full quadratic in ``dims`` coordinates: ``1 + d + d(d+1)/2``."""
    return 1 + dims + dims * (dims + 1) // 2


def min_quadratic_trials(dims: int) -> int:
    """Finite trials a local quadratic needs: its ``n_coef`` coefficients and two residual degrees
    of freedom (fewer, and the best trial is used instead)."""
    return n_coef(dims) + 2


def min_cubic_trials(dims: int) -> int:
    """Trials a local model with diagonal cubic terms is fitted to at least: ``2·(n_coef + d) + 2``,
    twice its coefficients and two more."""
    return 2 * (n_coef(dims) + dims) + 2


def region_size(n_finite: int, dims: int) -> int:
    """How many of the best trials the local model is fitted to: ``≈ 2.5·√n``, never fewer than
    :func:`min_cubic_trials` (room for the quadratic and its diagonal cubic terms), at most all."""
    least = min_cubic_trials(dims)
    return int(min(n_finite, max(least, math.ceil(2.5 * math.sqrt(n_finite)))))


def rank_weights(t: FloatArray) -> FloatArray:
    """Weight ``1 − ¾t²`` of a trial at normalised rank-in-value ``t`` ∈ [0, 1] of its region."""
    return 1.0 - 0.75 * t * t


def select_region(values: FloatArray, size: int) -> tuple[NDArray[np.intp], FloatArray]:
    """Indices of the ``size`` lowest finite values and their weights ``1 − ¾t²``."""
    if size < len(values):
        index = np.argpartition(values, size - 1)[:size]
    else:
        index = np.arange(len(values))
    chosen = values[index]
    low = float(chosen.min())
    span = float(chosen.max()) - low
    t = (chosen - low) / span if span > 0.0 else np.zeros_like(chosen)
    return index, rank_weights(t)


def quadratic_design(u: FloatArray) -> FloatArray:
    """Columns 1, u_j, u_j·u_l (j ≤ l)."""
    n, dims = u.shape
    cols = [np.ones(n)]
    cols.extend(u[:, j] for j in range(dims))
    for j in range(dims):
        for k in range(j, dims):
            cols.append(u[:, j] * u[:, k])
    return np.column_stack(cols)


def gradient_jacobian(u: FloatArray) -> FloatArray:
    """∂∇f/∂q at ``u``: how the quadratic's gradient moves with its coefficients ``q_jl`` (j ≤ l).

    With ``f(u) = … + Σ_{j≤l} q_jl·u_j·u_l`` (the columns of :func:`quadratic_design`),
    ``∂(∇f)_i/∂q_jl = δ_ij·u_l + δ_il·u_j``: ``2u_j`` in row ``j`` for ``q_jj``; ``u_l`` in row ``j``
    and ``u_j`` in row ``l`` for ``j < l``. The delta method's ``∂u*/∂θ = −H⁻¹ ∂∇f/∂θ`` uses it.

    Args:
        u: (d,) the point, e.g. a fitted minimiser.

    Returns:
        (d, d(d+1)/2) matrix, columns in the order of :func:`quadratic_design`'s products.
    """
    dims = len(u)
    first, second = np.triu_indices(dims)  # j ≤ l, row-major: quadratic_design's order
    column = np.arange(len(first))
    jacobian = np.zeros((dims, len(first)))
    jacobian[first, column] += u[second]
    jacobian[second, column] += u[first]  # on the diagonal (j = l) this makes 2u_j
    return jacobian


def unpack_quadratic(theta: FloatArray, dims: int) -> tuple[float, FloatArray, FloatArray]:
    """(c, g, H) from quadratic coefficients, with f = c + gᵀu + ½uᵀHu."""
    const = float(theta[0])
    grad = np.array(theta[1 : 1 + dims])
    n_quad = dims * (dims + 1) // 2
    hess = hessians(theta[None, 1 + dims : 1 + dims + n_quad], dims)[0]
    return const, grad, hess


def hessians(quad: FloatArray, dims: int) -> FloatArray:
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

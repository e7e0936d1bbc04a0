"""Numerical primitives of the quadratic models: the best region of a rung's trials, designs.

Shared by the per-scale local quadratic (:mod:`.local`) and the pooled valley (:mod:`.surface`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from transfersearch.fitting.coords import FloatArray

__all__ = [
    "hessians",
    "n_coef",
    "quadratic_design",
    "rank_weights",
    "region_size",
    "select_region",
    "unpack_quadratic",
]


def n_coef(dims: int) -> int:
    return 1 + dims + dims * (dims + 1) // 2


def region_size(n_finite: int, dims: int) -> int:
    """How many of the best trials the local model is fitted to: ``≈ 2.5·√n``, never fewer than
    ``2·(n_coef + d) + 2`` (room for the quadratic and its diagonal cubic terms), at most all."""
    least = 2 * (n_coef(dims) + dims) + 2
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

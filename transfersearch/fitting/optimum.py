"""One rung's optimum: :class:`ScaleOptimum` (natural and fitted units) and its array twin
:class:`LocalFit` (fitted coordinates, the minimisation sign).

Every :class:`ScaleOptimum` is built by :meth:`ScaleOptimum.from_fitted` (a point and its
covariance in fitted coordinates; the natural values and standard errors follow from them), and
moved by :meth:`ScaleOptimum.with_point`. Coordinates: docs/notation.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray, natural_params, to_fitted
from transfersearch.scale import Scale

__all__ = ["LocalFit", "Method", "RejectedModel", "ScaleOptimum", "to_optimum"]

Method = Literal["quadratic", "fallback", "fallback-implausible", "pooled"]


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
            supported by the trials, see :func:`~transfersearch.fitting.local.locate_optimum`:
            the rank-weighted mean of the best trials, with their spread as stderr) or
            ``"pooled"`` (read off the valley fitted over every rung at once,
            :mod:`transfersearch.fitting.surface`).
        at_boundary: the optimum was pulled onto the edge of the region the trials cover.
        wall: extra curvature above the optimum per coordinate (fitted coordinates, minimisation
            sign): the valley is ``½δᵀHδ + ½Σ_j wall_j·max(δ_j, 0)²``; zeros when symmetric.
        past_edge: per parameter, how far the optimum lies past the box of the rung's finite
            trials (fitted units, + above the upper edge, − below the lower; absent inside): an
            extrapolation of the valley's shape (docs/science.md §7.1).
        bounds: per parameter whose optimum the rung only bounds, the interval ``(low, high)``
            it lies in (fitted units; ±inf for an open side): an optimum far past the trials'
            edge, past a diverged trial, or a rung with one finite trial. The laws use it as a
            censored observation (docs/science.md §7.1, §7.3); ``coords`` then holds the nearest
            point the rung supports and the variance there is the bound's resolution.
        diverged_past: per parameter past whose trials' edge (the side of :attr:`past_edge`) a
            trial diverged on the best trial's line, the nearest such trial's coordinate (fitted
            units): the optimum lies below it (:func:`transfersearch.fitting.rungs.diverged_bracket`).
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
    past_edge: dict[str, float] = field(default_factory=dict)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    diverged_past: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_fitted(
        cls,
        scale: Scale,
        names: Sequence[str],
        log_params: Sequence[str],
        coords: FloatArray,
        covariance: FloatArray,
        **fields: Any,
    ) -> ScaleOptimum:
        """The optimum at ``coords`` (fitted coordinates, ``names`` order) with ``covariance``.

        ``params`` (natural units), the ``coords`` and ``stderr`` mappings and ``log_params`` (in
        ``names`` order) are derived here; ``fields`` are the remaining attributes (``value``,
        ``hessian``, ``n_trials``, ``n_diverged``, ``n_used``, ``method``, ``at_boundary`` and
        optionally ``wall``, ``past_edge``, ``bounds``, ``diverged_past``).
        """
        logs = tuple(p for p in names if p in log_params)
        return cls(
            scale=scale,
            names=tuple(names),
            log_params=logs,
            **_point_fields(tuple(names), logs, coords, covariance),
            **fields,
        )

    def with_point(
        self, coords: FloatArray, covariance: FloatArray, **changes: Any
    ) -> ScaleOptimum:
        """A copy moved to ``coords`` with ``covariance`` (fitted coordinates, :attr:`names`
        order): ``params``, ``coords`` and ``stderr`` follow, ``changes`` replace other fields."""
        point = _point_fields(self.names, self.log_params, coords, covariance)
        return replace(self, **point, **changes)

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
            log_space = name in self.log_params
            if log_space and not value > 0.0:
                raise TransferSearchError(
                    f"`{name}` is fitted in log space and must be > 0, but got {value!r}."
                )
            delta[index] = to_fitted(value, log_space)
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


def _point_fields(
    names: tuple[str, ...], log_params: tuple[str, ...], coords: FloatArray, covariance: FloatArray
) -> dict[str, Any]:
    """The attributes of a :class:`ScaleOptimum` that follow from its point and covariance."""
    stderr = np.sqrt(np.diag(covariance))
    return {
        "params": natural_params(names, coords, log_params),
        "coords": {p: float(c) for p, c in zip(names, coords, strict=True)},
        "stderr": {p: float(s) for p, s in zip(names, stderr, strict=True)},
        "covariance": covariance,
    }


@dataclass(frozen=True, eq=False)
class LocalFit:
    """One scale's optimum from :func:`~transfersearch.fitting.local.fit_local`, in fitted
    coordinates and the minimisation sign.

    The array form of :class:`ScaleOptimum` (see there for the fields; :func:`to_optimum` turns
    it into one); ``rejected`` holds the distrusted model's optimum when ``method`` is
    ``"fallback-implausible"``.
    """

    coords: FloatArray  # (d,) fitted coordinates of the optimum
    covariance: FloatArray  # (d, d)
    value: float  # minimisation sign
    hessian: FloatArray | None  # (d, d) in fitted coordinates
    n_trials: int
    n_diverged: int
    n_used: int
    method: Method
    at_boundary: bool
    rejected: RejectedModel | None = None


@dataclass(frozen=True, eq=False)
class RejectedModel:
    """A local model's optimum that
    :func:`~transfersearch.fitting.local.implausible_reason` did not trust (minimisation sign)."""

    coords: FloatArray  # (d,) the model's minimiser, fitted coordinates
    value: float  # the model's value there
    best: float  # the best trial's value
    spread: float  # value spread of the fitted trials
    residual: float  # residual standard deviation of the fit
    leverage_ratio: float  # h(u*) / max_i h(u_i)
    reason: str  # which test failed, in words


def to_optimum(
    local: LocalFit,
    scale: Scale,
    params: Sequence[str],
    log_params: Sequence[str],
    sign: float,
) -> ScaleOptimum:
    """``local`` as a :class:`ScaleOptimum` at ``scale``, its value back in the user's sign."""
    return ScaleOptimum.from_fitted(
        scale,
        params,
        log_params,
        local.coords,
        local.covariance,
        value=sign * local.value,
        hessian=local.hessian,
        n_trials=local.n_trials,
        n_diverged=local.n_diverged,
        n_used=local.n_used,
        method=local.method,
        at_boundary=local.at_boundary,
    )

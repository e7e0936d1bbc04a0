"""One rung's optimum: :class:`ScaleOptimum` (natural and fitted units), read off the one model.

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

__all__ = ["Method", "ScaleOptimum"]

Method = Literal["pooled"]


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
        value: the valley's bottom at this scale (in the user's direction).
        hessian: the valley's curvature in fitted coordinates (minimisation sign; ``inf`` on the
            diagonal of a parameter no trial varied).
        n_trials: complete trials with a finite value at this scale.
        n_diverged: diverged (NaN, inf) trials at this scale.
        n_used: trials the fit used at this scale (every finite one: the model weighs them).
        method: ``"pooled"``: read off the one model of every trial (docs/science.md §7).
        at_boundary: the optimum lies past the edge of the rung's trials (:attr:`past_edge`).
        past_edge: per parameter, how far the optimum lies past the box of the rung's finite
            trials when that is more than its own standard error (fitted units, + above the
            upper edge, − below the lower): an extrapolation of the valley's shape.
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
    past_edge: dict[str, float] = field(default_factory=dict)

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
        optionally ``past_edge``).
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
        """The model's metric excess at ``params`` over its optimum, ``½δᵀHδ``, ≥ 0.

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
        return float(max(0.0, 0.5 * float(step @ sub @ step)))


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

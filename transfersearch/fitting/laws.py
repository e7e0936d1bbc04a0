"""An optimum-vs-scale law: :class:`PowerLaw`, one parameter's read-out of the one model
(docs/science.md §7): ``p* = coefficient · Π_k scale_k ** exponents[k]`` for a log parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray, to_natural
from transfersearch.scale import Scale

__all__ = ["PowerLaw"]


@dataclass(frozen=True, eq=False)
class PowerLaw:
    """A fitted optimum-vs-scale law for one parameter.

    For a log parameter ``p* = coefficient · Π_k scale_k ** exponents[k]``; for a linear one
    ``p* = intercept + Σ_k exponents[k] · log(scale_k)``. At a target it is the extrapolation's ``law_params``, unless the fit held that point at the
    edge of what its trials support (a ``held`` note): the law itself is not held.

    Attributes:
        param: the parameter.
        log_space: whether the law is fitted to ``log(p*)``.
        intercept: the fitted coordinate at scale 1 (``log(coefficient)`` for a log parameter).
        exponents: exponent per scale variable, including fixed ones and ones shrunk to 0.
        fixed: scale variables whose exponent was given, not fitted.
        shrunk: scale variables whose exponent was held at its prior (the model's prior
            standard deviation is 0).
        names: order of ``covariance``: ``"intercept"``, then the fitted exponents.
        covariance: posterior covariance of (intercept, fitted exponents).
        r_squared: weighted R² of the law on the per-scale optima (NaN when undefined).
        chi2_per_dof: weighted residual χ² per degree of freedom (NaN with no dof).
        n_scales: number of per-scale optima the law was fitted to.
        model: the model that produced the law (see :mod:`transfersearch.fitting.models`).
        scatter: τ, the optima's scatter about the law beyond their own errors; a new scale's
            optimum is that far off the law even when the law is exact, so predictions add τ².
        prior_sd: the exponents' prior standard deviation the law was fitted with.
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
    model: str = "free"
    scatter: float = 0.0
    prior_sd: float = math.inf

    def __post_init__(self) -> None:
        """Refuse a law that cannot be evaluated: :attr:`covariance` not square over
        :attr:`names` (the intercept, then the fitted exponents)."""
        size = len(self.names)
        named = size >= 1 and all(n in self.exponents for n in self.names[1:])
        if np.shape(self.covariance) != (size, size) or not named:
            raise TransferSearchError(
                f"PowerLaw {self.param!r}: covariance has shape {np.shape(self.covariance)} "
                f"for names {self.names!r}; give names as ('intercept', *fitted exponents) and "
                "a square covariance over them."
            )

    @property
    def coefficient(self) -> float:
        """``exp(intercept)`` for a log parameter, else the intercept."""
        return to_natural(self.intercept, self.log_space)

    @property
    def stderr(self) -> dict[str, float]:
        """Standard error of the intercept and each fitted exponent."""
        diag = np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))
        return {name: float(value) for name, value in zip(self.names, diag, strict=True)}

    def predict_coord(self, scale: Mapping[str, float]) -> tuple[float, float]:
        """The law's fitted coordinate at ``scale`` and its predictive standard error.

        The standard error combines the law's posterior covariance and the scatter τ of optima
        about the law: ``√(xᵀΣx + τ²)``.

        Raises:
            TransferSearchError: ``scale`` lacks a scale variable the law needs.
        """
        target = scale if isinstance(scale, Scale) else Scale(scale)
        needed = sorted(self.exponents)
        target.require(*needed, purpose=f"predict {self.param!r} from its power law")
        logs = {name: math.log(target[name]) for name in needed}
        value = self.intercept + sum(self.exponents[n] * logs[n] for n in needed)
        gradient = np.array([1.0, *(logs[n] for n in self.names[1:])])
        variance = float(gradient @ self.covariance @ gradient)
        return value, math.sqrt(max(variance, 0.0) + self.scatter**2)

    def predict(self, scale: Mapping[str, float]) -> float:
        """The predicted optimum at ``scale``, in natural units.

        Raises:
            TransferSearchError: ``scale`` lacks a scale variable the law needs.
        """
        value, _ = self.predict_coord(scale)
        return to_natural(value, self.log_space)

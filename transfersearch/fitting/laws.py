"""An optimum-vs-scale law: :class:`PowerLaw`, one parameter's read-out of the one model
(docs/science.md §7): ``p* = coefficient · Π_k scale_k ** exponents[k]`` for a log parameter,
times the path's bend where it has one (§7.6).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray, to_natural
from transfersearch.scale import Scale

__all__ = ["PowerLaw"]


@dataclass(frozen=True, eq=False)
class PowerLaw:
    """A fitted optimum-vs-scale law for one parameter.

    For a log parameter ``p* = coefficient · Π_k scale_k ** exponents[k]``; for a linear one
    ``p* = intercept + Σ_k exponents[k] · log(scale_k)``. Where the path bends (docs/science.md
    §7.6) the fitted coordinate adds ``Σ C_ij · ½(ℓ_i − ℓ̄_i)(ℓ_j − ℓ̄_j)/ln 10`` over the pairs
    in ``bends`` (``ℓ = ln scale``, ``ℓ̄`` = ``centre``, the rungs' mean): ``intercept`` and
    ``exponents`` are then the path's tangent at ``ℓ̄``, and :meth:`predict` follows the path.
    At a target it is the extrapolation's ``law_params``, unless the fit held that point at the
    edge of what its trials support (a ``held`` note): the law itself is not held.

    Attributes:
        param: the parameter.
        log_space: whether the law is fitted to ``log(p*)``.
        intercept: the fitted coordinate at scale 1 (``log(coefficient)`` for a log parameter).
        exponents: exponent per scale variable, including fixed ones and ones shrunk to 0.
        fixed: scale variables whose exponent was given, not fitted.
        shrunk: scale variables whose exponent was held at its prior (the model's prior
            standard deviation is 0).
        names: order of ``covariance``: ``"intercept"``, the fitted exponents, then one
            ``"bend:i*j"`` per pair in ``bends``.
        covariance: posterior covariance of (intercept, fitted exponents, bends).
        r_squared: weighted R² of the law on the per-scale optima (NaN when undefined).
        chi2_per_dof: weighted residual χ² per degree of freedom (NaN with no dof).
        n_scales: number of per-scale optima the law was fitted to.
        model: the model that produced the law (see :mod:`transfersearch.fitting.models`).
        scatter: τ, the optima's scatter about the law beyond their own errors; a new scale's
            optimum is that far off the law even when the law is exact, so predictions add τ².
        prior_sd: the exponents' prior standard deviation the law was fitted with.
        bends: the path's second-order coefficient ``C_ij`` per pair of scale variables: the
            change of the slope in ``i`` per decade of ``i`` for ``i = j``, half of it per
            decade of ``j`` for a pair; empty for a straight law.
        centre: ``ℓ̄``, the ln scale per variable about which ``bends`` are taken.
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
    bends: dict[tuple[str, str], float] = field(default_factory=dict)
    centre: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse a law whose bends cannot be evaluated: a bend's variable without its place in
        :attr:`centre`, or :attr:`covariance` not square over :attr:`names` (the intercept,
        the exponents, one entry per bend)."""
        unplaced = sorted({v for pair in self.bends for v in pair} - set(self.centre))
        if unplaced:
            raise TransferSearchError(
                f"PowerLaw {self.param!r}: bends name {unplaced}, which centre lacks; give "
                "centre={variable: ln scale} for every variable a bend names (the rungs' mean "
                "ln scale, about which the bend is taken)."
            )
        size, bent = len(self.names), len(self.bends)
        fitted, labels = self.names[1 : size - bent], self.names[size - bent :]
        named = all(n in self.exponents for n in fitted) and not set(labels) & set(self.exponents)
        if np.shape(self.covariance) != (size, size) or size < 1 + bent or not named:
            raise TransferSearchError(
                f"PowerLaw {self.param!r}: covariance has shape {np.shape(self.covariance)} "
                f"for names {self.names!r} and {len(self.bends)} bend(s); give names as "
                "('intercept', *fitted exponents, *one label per bend) and a square covariance "
                "over them."
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
        bends = [self.bend_feature(pair, logs) for pair in self.bends]
        value = self.intercept + sum(self.exponents[n] * logs[n] for n in needed)
        value += sum(c * f for c, f in zip(self.bends.values(), bends, strict=True))
        fitted = self.names[1 : len(self.names) - len(bends)]
        gradient = np.array([1.0, *(logs[n] for n in fitted), *bends])
        variance = float(gradient @ self.covariance @ gradient)
        return value, math.sqrt(max(variance, 0.0) + self.scatter**2)

    def bend_feature(self, pair: tuple[str, str], logs: Mapping[str, float]) -> float:
        """``½(ℓ_i − ℓ̄_i)(ℓ_j − ℓ̄_j)/ln 10`` of a pair in :attr:`bends` at ln scales ``logs``
        (docs/science.md §7.6)."""
        i, j = pair
        gap_i, gap_j = logs[i] - self.centre[i], logs[j] - self.centre[j]
        return 0.5 * gap_i * gap_j / math.log(10.0)

    def predict(self, scale: Mapping[str, float]) -> float:
        """The predicted optimum at ``scale``, in natural units.

        Raises:
            TransferSearchError: ``scale`` lacks a scale variable the law needs.
        """
        value, _ = self.predict_coord(scale)
        return to_natural(value, self.log_space)

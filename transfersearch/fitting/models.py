"""The family of optimum-vs-scale models that walk-forward validation chooses from.

Null models first (docs/science.md §7.6): in invariant coordinates the papers predict no drift, so
drift must be earned.

- ``"nearest"`` — no drift: the optimum of the rung(s) nearest the target.
- ``"constant"`` — no drift: one optimum pooled over every rung (precision-weighted).
- ``"prior"`` — the prior's exponents (theory's or the user's ``prior_exponents``), intercept
  fitted; offered only when some prior exponent is not 0.
- ``"shrunk"`` — power laws shrunk toward the prior, the strength (and the scatter) chosen by
  restricted marginal likelihood (empirical Bayes).
- ``"free"`` — power laws with a nearly flat prior.

The family is passed, not registered: :data:`DEFAULT_MODELS` is the default of
``extrapolate(models=...)``; another model is an object with ``name``, ``drift`` (False for a
no-drift model, which is then a baseline every drifting model must beat),
``applies(data) -> bool`` (whether it is worth trying on a parameter's data: a model that applies
to no parameter is not scored) and ``fit(data, target_logs) -> LawFit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray
from transfersearch.fitting.laws import (
    FREE_PRIOR_SD,
    PRIOR_SD_GRID,
    LawData,
    LawFit,
    empirical_bayes,
    gls,
    reml_fit,
)

__all__ = ["DEFAULT_MODELS", "LawModel", "check_models", "model_named"]


class LawModel(Protocol):
    """What a model of the optimum's drift provides."""

    @property
    def name(self) -> str:
        """The model's name in ``model_scores`` and ``extrapolate(model=...)``."""

    @property
    def drift(self) -> bool:
        """False for a no-drift model: a baseline every drifting model must beat."""

    def applies(self, data: LawData) -> bool:
        """Whether the model is worth trying on this parameter's data."""

    def fit(self, data: LawData, target_logs: FloatArray) -> LawFit:
        """The law, given the rungs' optima and the log-scales ``target_logs`` (K,) it predicts."""


def _no_prior(data: LawData) -> LawData:
    return replace(data, prior=np.zeros_like(data.prior))


@dataclass(frozen=True)
class NearestRung:
    """No drift: the optimum of the nearest rung(s) in log-scale (precision-weighted on ties)."""

    name: str = "nearest"
    drift: bool = False

    def applies(self, data: LawData) -> bool:
        return True

    def fit(self, data: LawData, target_logs: FloatArray) -> LawFit:
        constant = _no_prior(data)
        _, scatter_var = empirical_bayes(constant, (0.0,))
        if len(data.variables):
            distance = np.sqrt(((data.log_scales - target_logs) ** 2).sum(axis=1))
        else:
            distance = np.zeros(len(data.z))
        distance = np.where(np.isfinite(data.variance), distance, np.inf)
        if not np.isfinite(distance).any():
            distance = np.zeros(len(data.z))
        nearest = distance <= distance.min() * (1.0 + 1e-9) + 1e-12
        subset = LawData(
            data.param,
            data.log_space,
            data.z[nearest],
            data.variance[nearest],
            data.log_scales[nearest],
            data.variables,
            np.zeros_like(data.prior),
            data.fixed,
            None if data.lower is None else data.lower[nearest],
            None if data.upper is None else data.upper[nearest],
        )
        fit = gls(subset, 0.0, 0.0)
        return replace(fit, scatter_var=scatter_var)


@dataclass(frozen=True)
class PooledConstant:
    """No drift: one optimum for every scale, the precision-weighted mean of the rungs'."""

    name: str = "constant"
    drift: bool = False

    def applies(self, data: LawData) -> bool:
        return True

    def fit(self, data: LawData, target_logs: FloatArray) -> LawFit:
        return reml_fit(_no_prior(data), (0.0,))


@dataclass(frozen=True)
class PriorExponents:
    """The prior's exponents, held; only the intercept (and the scatter) is fitted."""

    name: str = "prior"
    drift: bool = True

    def applies(self, data: LawData) -> bool:
        return bool(np.any(data.prior != 0.0))

    def fit(self, data: LawData, target_logs: FloatArray) -> LawFit:
        return reml_fit(data, (0.0,))


@dataclass(frozen=True)
class ShrunkLaw:
    """Exponents shrunk toward the prior; ``s`` and ``τ`` by empirical Bayes."""

    name: str = "shrunk"
    drift: bool = True

    def applies(self, data: LawData) -> bool:
        return len(data.variables) > 0

    def fit(self, data: LawData, target_logs: FloatArray) -> LawFit:
        return reml_fit(data, PRIOR_SD_GRID)


@dataclass(frozen=True)
class FreeLaw:
    """Exponents with a nearly flat prior (sd :data:`FREE_PRIOR_SD`); ``τ`` by empirical Bayes."""

    name: str = "free"
    drift: bool = True

    def applies(self, data: LawData) -> bool:
        return len(data.variables) > 0

    def fit(self, data: LawData, target_logs: FloatArray) -> LawFit:
        return reml_fit(data, (FREE_PRIOR_SD,))


#: The family walk-forward chooses from, null models first (the order of ``model_scores``).
DEFAULT_MODELS: tuple[LawModel, ...] = (
    NearestRung(),
    PooledConstant(),
    PriorExponents(),
    ShrunkLaw(),
    FreeLaw(),
)


def check_models(models: Sequence[LawModel]) -> tuple[LawModel, ...]:
    """``models`` as a tuple, each with the members of :class:`LawModel` and its own name.

    Raises:
        TransferSearchError: a model lacks a member, two share a name, one is named "auto", or
            there is none.
    """
    checked = tuple(models)
    if not checked:
        raise TransferSearchError(
            "`models` is empty. Pass the family to choose from, e.g. models=DEFAULT_MODELS."
        )
    seen: set[str] = set()
    for model in checked:
        for member in ("name", "drift", "applies", "fit"):
            if not hasattr(model, member):
                raise TransferSearchError(
                    f"a law model needs `{member}`, but {model!r} has none. See "
                    "transfersearch.fitting.models.LawModel."
                )
        if model.name in seen or model.name == "auto":
            raise TransferSearchError(
                f"a law model named {model.name!r} appears twice in `models` (or is reserved). "
                "Give each model its own name."
            )
        seen.add(model.name)
    return checked


def model_named(name: str, models: Sequence[LawModel]) -> LawModel:
    """The model called ``name`` among ``models``.

    Raises:
        TransferSearchError: no such model.
    """
    for model in models:
        if model.name == name:
            return model
    raise TransferSearchError(
        f"`model` must be 'auto' or one of {[m.name for m in models]}, but got model={name!r}."
    )

"""The fitting engine: per-rung optima, the pooled valley, optimum-vs-scale models, the decision.

One module per concern — ``coords`` (fitted coordinates), ``quadratic`` and ``local`` (one rung's
own quadratic), ``surface`` (the valley pooled over rungs), ``laws`` (power laws with a prior),
``models`` (the family and its registry), ``selection`` (walk-forward validation), ``decision``
(least expected loss), ``stability`` (resampling), ``result`` and ``api``. README's "Fitting and
extrapolating" gives the method in a page.
"""

from __future__ import annotations

from transfersearch.fitting.api import extrapolate, infer_params, validate
from transfersearch.fitting.laws import LawData, LawFit, PowerLaw
from transfersearch.fitting.local import ScaleOptimum, estimate_optimum
from transfersearch.fitting.models import LawModel, available_models, register_model
from transfersearch.fitting.result import Collinearity, Extrapolation, Validation
from transfersearch.fitting.selection import Fold

__all__ = [
    "Collinearity",
    "Extrapolation",
    "Fold",
    "LawData",
    "LawFit",
    "LawModel",
    "PowerLaw",
    "ScaleOptimum",
    "Validation",
    "available_models",
    "estimate_optimum",
    "extrapolate",
    "infer_params",
    "register_model",
    "validate",
]

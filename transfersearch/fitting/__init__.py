"""The fitting engine: per-rung optima, the pooled valley, optimum-vs-scale models, the decision.

One module per concern — ``coords`` (fitted coordinates), ``quadratic`` and ``local`` (one rung's
own quadratic), ``surface`` (the valley pooled over rungs), ``laws`` (power laws with a prior),
``models`` (the family), ``selection`` (walk-forward validation), ``decision`` (least expected
loss), ``stability`` (resampling), ``options`` and ``diagnostics`` (what goes in and what comes
out besides the result), ``result`` and ``engine`` (:func:`fit_sweep`, :func:`validate_sweep`:
a :class:`~transfersearch.sweep.Sweep` in, no I/O, no warnings), ``optimum`` (one rung's
optimum), ``boundary`` (the stability boundary), ``portfolio`` and ``findings``. The method is
docs/science.md §7–9; the symbols and the three coordinate systems (natural, fitted, standardised)
are on docs/notation.md.
"""

from __future__ import annotations

from transfersearch.fitting.diagnostics import KINDS, Diagnostic
from transfersearch.fitting.engine import fit_sweep, infer_params, validate_sweep
from transfersearch.fitting.laws import LawData, LawFit, PowerLaw
from transfersearch.fitting.models import DEFAULT_MODELS, LawModel
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.result import Collinearity, Extrapolation, Validation
from transfersearch.fitting.selection import Fold

__all__ = [
    "DEFAULT_MODELS",
    "KINDS",
    "Collinearity",
    "Diagnostic",
    "Extrapolation",
    "FitOptions",
    "Fold",
    "LawData",
    "LawFit",
    "LawModel",
    "PowerLaw",
    "ScaleOptimum",
    "Validation",
    "fit_sweep",
    "infer_params",
    "validate_sweep",
]

"""``extrapolate()`` / ``validate()`` and their results (kept at this path; the engine lives in
:mod:`transfersearch.fitting`)."""

from __future__ import annotations

from transfersearch.fitting.api import extrapolate, infer_params, validate
from transfersearch.fitting.result import Collinearity, Extrapolation, Validation

__all__ = ["Collinearity", "Extrapolation", "Validation", "extrapolate", "infer_params", "validate"]

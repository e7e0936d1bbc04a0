"""Per-scale optima and power laws (kept at this path; the engine lives in
:mod:`transfersearch.fitting`)."""

from __future__ import annotations

from transfersearch.fitting.coords import Direction, check_direction, resolve_log_params
from transfersearch.fitting.laws import PowerLaw
from transfersearch.fitting.local import ScaleOptimum, estimate_optimum

__all__ = [
    "Direction",
    "PowerLaw",
    "ScaleOptimum",
    "check_direction",
    "estimate_optimum",
    "resolve_log_params",
]

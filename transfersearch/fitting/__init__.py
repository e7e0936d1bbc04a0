"""The fitting engine: one model of every trial, the decision (docs/science.md §7–9).

One module per concern — ``coords`` (fitted coordinates), ``rungs`` (the checked ladder),
``valley`` (the valley whose centre moves with scale, its drift prior integrated over),
``divergence`` (the divergence law), ``target`` (the posterior expected loss at the target),
``onemodel`` (the three composed on a ladder; walk-forward calibration), ``portfolio`` (k runs),
``engine`` (:func:`fit_sweep`, :func:`validate_sweep`: a :class:`~transfersearch.sweep.Sweep` in,
no I/O, no warnings), ``result``, ``optimum`` and ``laws`` (the typed read-outs), ``options``,
``diagnostics`` and ``findings``. The symbols and the three coordinate systems (natural, fitted,
standardised) are on docs/notation.md.
"""

from __future__ import annotations

from transfersearch.fitting.diagnostics import KINDS, Diagnostic
from transfersearch.fitting.engine import fit_sweep, infer_params, validate_sweep
from transfersearch.fitting.laws import PowerLaw
from transfersearch.fitting.onemodel import Fold
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.result import Collinearity, Extrapolation, Validation

__all__ = [
    "KINDS",
    "Collinearity",
    "Diagnostic",
    "Extrapolation",
    "FitOptions",
    "Fold",
    "PowerLaw",
    "ScaleOptimum",
    "Validation",
    "fit_sweep",
    "infer_params",
    "validate_sweep",
]

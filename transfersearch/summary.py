"""An :class:`~transfersearch.Extrapolation` (or a :class:`~transfersearch.Validation`) as plain
JSON: what ``--json`` prints and the dashboard stores. The facts are those of
:meth:`Extrapolation.summary`, whose text comes along as ``"summary"``: the target and how far it
lies beyond the ladder, what the target kept from the ladder, duplicates counted once, the decision,
its interval and how it differs from the law, the model and why, the walk-forward scores, the
unstable parameters and collinear scale variables, the stability boundaries and P(diverge); and
``"diagnostics"``, the fit's records (kind, message, act, param, scale), the warnings among them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transfersearch.fitting.diagnostics import Diagnostic
    from transfersearch.fitting.laws import PowerLaw
    from transfersearch.fitting.optimum import ScaleOptimum
    from transfersearch.fitting.result import Collinearity, Extrapolation, Validation
    from transfersearch.space import Hyperparameters

__all__ = ["extrapolation_to_dict", "json_ready", "validation_to_dict"]


def json_ready(value: Any) -> Any:
    """``value`` as strict JSON takes it (RFC 8259, ``json.loads`` in any language, ``jq``):
    mappings (a ``mappingproxy`` too) as dicts, tuples as lists, numpy numbers as Python's, and a
    float that is not finite as null: NaN means no value (an R² of a law fitted through its
    points), and ±inf has no JSON spelling (``json.dumps`` would write the invalid ``NaN`` and
    ``Infinity``)."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # a numpy scalar
        return json_ready(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def _number(value: float) -> float | None:
    """A float for JSON: NaN (no score, e.g. too few rungs to validate) becomes null."""
    return None if math.isnan(value) else value


def extrapolation_to_dict(
    result: Extrapolation, level: float = 0.9, hyperparameters: Hyperparameters | None = None
) -> dict[str, Any]:
    """``result`` as a JSON-ready dict; ``"hyperparameters"`` is ``hyperparameters.to_dict()``
    (the big run's per-group lr / weight_decay, betas, eps, EMA, steps) or None.

    Raises:
        TransferSearchError: ``level`` is not in (0, 1).
    """
    interval = result.interval(level)
    collinear = result.collinearity
    data = {
        "target": result.target.to_dict(),
        "target_from_ladder": dict(result.target_from_ladder),
        "params": dict(result.params),
        "interval": {k: list(v) for k, v in interval.items()},
        "level": level,
        "law_params": dict(result.law_params),
        "decision_shift": dict(result.decision_shift),
        "model": result.model,
        "selection_reason": result.selection_reason,
        "model_scores": {k: _number(v) for k, v in result.model_scores.items()},
        "walk_forward_folds": len(result.walk_forward),
        "calibration": result.calibration,
        "collinearity": None if collinear is None else _collinearity(collinear),
        "duplicates_collapsed": result.duplicates_collapsed,
        "p_diverge": result.p_diverge,
        "p_diverge_law": result.p_diverge_law,
        "divergence_cost": result.divergence_cost,
        "n_crashed": result.n_crashed,
        "stable_up_to": dict(result.stable_up_to),
        "laws": {name: _law(law) for name, law in result.laws.items()},
        "optima": [_optimum(o) for o in result.optima],
        "extrapolation_decades": result.extrapolation_decades,
        "ladder_span_decades": result.ladder_span_decades,
        "summary": result.summary(),
        "diagnostics": [_diagnostic(note) for note in result.diagnostics],
        "hyperparameters": None if hyperparameters is None else hyperparameters.to_dict(),
    }
    return dict(json_ready(data))


def _collinearity(found: Collinearity) -> dict[str, Any]:
    return {
        "variables": list(found.variables),
        "correlation": found.correlation,
        "suggested_scale": None
        if found.suggested_scale is None
        else found.suggested_scale.to_dict(),
    }


def _law(law: PowerLaw) -> dict[str, Any]:
    return {
        "coefficient": law.coefficient,
        "exponents": dict(law.exponents),
        "shrunk": list(law.shrunk),
        "r_squared": law.r_squared,
    }


def _optimum(optimum: ScaleOptimum) -> dict[str, Any]:
    return {
        "scale": optimum.scale.to_dict(),
        "params": dict(optimum.params),
        "method": optimum.method,
        "n_trials": optimum.n_trials,
    }


def _diagnostic(note: Diagnostic) -> dict[str, Any]:
    return {
        "kind": note.kind,
        "message": note.message,
        "act": note.act,
        "param": note.param,
        "scale": None if note.scale is None else note.scale.to_dict(),
    }


def validation_to_dict(result: Validation) -> dict[str, Any]:
    """``result`` as a JSON-ready dict: the held-out rung, prediction against observation, the
    regret, and the fit without that rung (:func:`extrapolation_to_dict`) under ``"fit"``."""
    data = {
        "held_out": result.held_out.to_dict(),
        "predicted": result.predicted,
        "observed": result.observed,
        "relative_error": result.relative_error,
        "within_interval": result.within_interval,
        "regret": result.regret,
        "relative_regret": result.relative_regret,
        "fit": extrapolation_to_dict(result.extrapolation),
    }
    return dict(json_ready(data))

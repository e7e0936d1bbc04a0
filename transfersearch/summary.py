"""An :class:`~transfersearch.Extrapolation` as plain JSON: what ``--json`` prints and the
dashboard stores (the target, the decision and its interval, the laws, the per-rung optima)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transfersearch.extrapolate import Extrapolation
    from transfersearch.space import Hyperparameters

__all__ = ["extrapolation_to_dict"]


def extrapolation_to_dict(
    result: Extrapolation, level: float = 0.9, hyperparameters: Hyperparameters | None = None
) -> dict[str, Any]:
    """``result`` as a JSON-ready dict; ``"hyperparameters"`` is ``hyperparameters.to_dict()``
    (the big run's per-group lr / weight_decay, betas, eps, EMA, steps) or None.

    Raises:
        TransferSearchError: ``level`` is not in (0, 1).
    """
    interval = result.interval(level)
    return {
        "target": result.target.to_dict(),
        "params": dict(result.params),
        "interval": {k: list(v) for k, v in interval.items()},
        "level": level,
        "model": result.model,
        "laws": {
            name: {
                "coefficient": law.coefficient,
                "exponents": dict(law.exponents),
                "shrunk": list(law.shrunk),
                "r_squared": law.r_squared,
            }
            for name, law in result.laws.items()
        },
        "optima": [
            {
                "scale": o.scale.to_dict(),
                "params": dict(o.params),
                "method": o.method,
                "n_trials": o.n_trials,
            }
            for o in result.optima
        ],
        "extrapolation_decades": result.extrapolation_decades,
        "ladder_span_decades": result.ladder_span_decades,
        "hyperparameters": None if hyperparameters is None else hyperparameters.to_dict(),
    }

"""A model's prediction at a target from some rungs' optima: one law per parameter."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from transfersearch.fitting.coords import FloatArray
from transfersearch.fitting.laws import UNSEEN_PRIOR_SD, UNSEEN_SPAN, PowerLaw, to_power_law
from transfersearch.fitting.local import ScaleOptimum
from transfersearch.fitting.models import LawModel
from transfersearch.fitting.rungs import Ladder, law_data

__all__ = ["Prediction", "predict"]


@dataclass(frozen=True, eq=False)
class Prediction:
    """Per parameter (ladder order): the law's mean and predictive variance at the target."""

    mean: FloatArray
    variance: FloatArray
    laws: dict[str, PowerLaw]


def predict(
    ladder: Ladder,
    model: LawModel,
    optima: Sequence[ScaleOptimum],
    subset: Sequence[int],
    target_logs: FloatArray,
) -> Prediction:
    """Fit ``model`` per parameter on the optima of rungs ``subset``; predict at ``target_logs``.

    Args:
        ladder: the prepared ladder.
        model: the law model.
        optima: the optima of the rungs in ``subset`` (same order).
        subset: rung indices.
        target_logs: (K,) log of the target's scale variables, in ``ladder.variables`` order.
    """
    dims = len(ladder.names)
    mean = np.empty(dims)
    variance = np.empty(dims)
    laws: dict[str, PowerLaw] = {}
    logs_of = dict(zip(ladder.variables, target_logs, strict=True))
    seen = ladder.log_scales[list(subset)]
    moves = {  # variable -> how far the target lies off the value every rung shares
        v: float(target_logs[k] - seen[0, k])
        for k, v in enumerate(ladder.variables)
        if np.ptp(seen[:, k]) <= UNSEEN_SPAN
    }
    for column, name in enumerate(ladder.names):
        data = law_data(ladder, optima, subset, column)
        free_logs = np.array([logs_of[v] for v in data.variables])
        fit = model.fit(data, free_logs)
        value, var = fit.predict(free_logs)
        value += sum(e * logs_of[v] for v, e in data.fixed.items())
        unseen = sum(
            (UNSEEN_PRIOR_SD * gap) ** 2 for v, gap in moves.items() if v not in data.fixed
        )
        mean[column] = value
        variance[column] = var + unseen
        laws[name] = to_power_law(data, fit, model.name, ladder.variables)
    return Prediction(mean, variance, laws)


def decades(ladder: Ladder, index_logs: FloatArray, others: Sequence[int]) -> float:
    """Distance (log10 units) from a point in log-scale to the nearest of the rungs ``others``."""
    if not others:
        return math.nan
    gaps = ladder.log_scales[list(others)] - index_logs
    return float(np.sqrt((gaps**2).sum(axis=1)).min()) / math.log(10.0)

"""A model's prediction at a target from some rungs' optima: one law per parameter."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from transfersearch.fitting.coords import FloatArray
from transfersearch.fitting.laws import (
    SPAN_TOLERANCE,
    UNSEEN_PRIOR_SD,
    LawData,
    LawFit,
    PowerLaw,
    to_power_law,
)
from transfersearch.fitting.models import LawModel
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.rungs import Ladder, law_data

__all__ = ["Prediction", "predict", "unseen_variance"]


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
    for column, name in enumerate(ladder.names):
        data = law_data(ladder, optima, subset, column)
        free_logs = np.array([logs_of[v] for v in data.variables])
        fit = model.fit(data, free_logs)
        value, var = fit.predict(free_logs)
        value += sum(e * logs_of[v] for v, e in data.fixed.items())
        unseen = unseen_variance(data, fit, free_logs)
        if not np.isfinite(data.variance).any() and np.ptp(data.z) == 0.0:
            # never varied: dropped from the fit, the one value every trial used is kept
            var = unseen = 0.0
        mean[column] = value
        variance[column] = var + unseen
        laws[name] = to_power_law(data, fit, model.name, ladder.variables)
    return Prediction(mean, variance, laws)


def unseen_variance(data: LawData, fit: LawFit, target_logs: FloatArray) -> float:
    """The prior's variance for the part of the target's step no informative rung measured
    (docs/science.md §7.4).

    The informative rungs (finite variance: located or bounded optima) span an affine set of
    log-scales; the target's step off it, ``o = (I − BBᵀ)(ℓ − ℓ̄)`` (``B`` an orthonormal basis
    of the centred rungs' span), is a direction the data cannot place: one informative rung
    (``B`` empty: the whole step), a variable no rung varied, or the direction across two
    variables the ladder moved together. Its exponent has the prior sd
    :data:`UNSEEN_PRIOR_SD` (0.5; published exponents have ``|e| ≤ 1``), so the prediction's
    variance gains ``0.5²·Σ_k o_k²`` — less what the model already carries there: a fitted
    exponent's ridge prior gives ``min(s, 0.5)²`` per unit across the span
    (:func:`transfersearch.fitting.laws.gls`), so a fitted variable adds
    ``max(0.5² − s², 0)·o_k²``; one held at its prior (``s = 0``, a no-drift or prior model, or
    a variable constant over the informative rungs) adds ``0.5²·o_k²``. Every model ends with
    ``0.5²`` per unit on what no rung measured.
    """
    if not len(data.variables):
        return 0.0
    informative = np.isfinite(data.variance)
    logs = data.log_scales[informative] if informative.any() else data.log_scales
    mean = logs.mean(axis=0)
    centred = logs - mean
    step = target_logs - mean
    basis, singular, _ = np.linalg.svd(centred.T, full_matrices=False)
    keep = singular > SPAN_TOLERANCE * max(1.0, float(singular.max(initial=0.0)))
    basis = basis[:, keep]
    outside = step - basis @ (basis.T @ step)
    fitted = np.zeros(len(data.variables), dtype=bool)
    fitted[list(fit.fitted)] = True
    prior_var = np.where(fitted, max(UNSEEN_PRIOR_SD**2 - fit.prior_sd**2, 0.0), UNSEEN_PRIOR_SD**2)
    return float(prior_var @ outside**2)


def decades(ladder: Ladder, index_logs: FloatArray, others: Sequence[int]) -> float:
    """Distance (log10 units) from a point in log-scale to the nearest of the rungs ``others``."""
    if not others:
        return math.nan
    gaps = ladder.log_scales[list(others)] - index_logs
    return float(np.sqrt((gaps**2).sum(axis=1)).min()) / math.log(10.0)

"""Resampling: how much the prediction moves when each rung's trials are redrawn.

A bootstrap by rung: each rung's trials are drawn with replacement, the whole fit (pooled valley,
then the chosen model's laws) is redone, and the target predicted again. The spread of those
predictions is the result's ``stability``; a prediction that swings by more than its own
analytic interval is flagged (the model's stated uncertainty is then not to be trusted alone).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from transfersearch.fitting.coords import FloatArray
from transfersearch.fitting.models import LawModel
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.predict import predict
from transfersearch.fitting.rungs import Ladder, read_optima
from transfersearch.fitting.surface import RungTrials, unvaried_coordinates

__all__ = ["resample_predictions"]


def resample_predictions(
    ladder: Ladder,
    model: LawModel,
    target_logs: FloatArray,
    n_resamples: int,
    rng: np.random.Generator,
    optima: list[ScaleOptimum],
    walls: NDArray[np.bool_] | None = None,
) -> FloatArray:
    """(n_resamples, d) predictions at the target, one per by-rung bootstrap resample.

    Each resample refits the centres; their weights in the laws stay those of the full fit
    (``optima``' covariances), and so does the valley's choice of upper ``walls``, so the
    spread measured is that of the centres. A resample whose fit fails (a rung left with no
    finite trial) gives a NaN row.
    """
    subset = list(range(len(ladder.scales)))
    out = np.full((n_resamples, len(ladder.names)), np.nan)
    unvaried = unvaried_coordinates(ladder.trials)  # a resample cannot vary what no trial did
    for b in range(n_resamples):
        trials = []
        for rung in ladder.trials:
            pick = rng.integers(0, len(rung.values), len(rung.values))
            trials.append(RungTrials(rung.coords[pick], rung.values[pick]))
        if any(not np.isfinite(t.values).any() for t in trials):
            continue
        refit, _ = read_optima(
            ladder, subset, trials, with_covariance=False, walls=walls, unvaried=unvaried
        )
        moved = [
            replace(new, covariance=old.covariance, stderr=old.stderr)
            for new, old in zip(refit, optima, strict=True)
        ]
        out[b] = predict(ladder, model, moved, subset, target_logs).mean
    return out

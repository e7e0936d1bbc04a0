"""A synthetic proxy ladder whose optimum moves with scale by a known law.

For tests, benchmarks and a dry run of a setup without training: the loss above the optimum is

    regret = 0.5·(log base_lr − log base_lr*)² + 0.3·(log tau_epoch − log tau_epoch*)²

with ``log base_lr* = log 3e-3 − 0.6·log(width/64) + 0.25·log(N/2e4)`` and
``log tau_epoch* = 0.4·log(width/64) − 0.3·log(N/2e4)``: both drift with width and dataset size, so
a transfer method has something to learn, and the truth is known at every scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from transfersearch.scale import Scale
from transfersearch.space import Float, TransferSpace

__all__ = ["BASE", "LADDER", "TOP", "log_optimum", "make_space", "regret"]

#: Where the coordinates are defined.
BASE = Scale(width=64, dataset_size=2e4, batch_size=64)
#: Four rungs in cost order: (64, 2e4) < (128, 2e4) = (64, 8e4) < (256, 8e4); width and data vary.
LADDER: tuple[Scale, ...] = tuple(
    Scale(width=w, dataset_size=n, batch_size=64)
    for w, n in ((64, 2e4), (128, 2e4), (64, 8e4), (256, 8e4))
)
#: The largest rung.
TOP = LADDER[-1]


def make_space() -> TransferSpace:
    """The swept space: log-uniform base_lr in [1e-5, 1] and tau_epoch in [1e-2, 1e2]."""
    return TransferSpace(
        BASE,
        {"base_lr": Float(1e-5, 1.0, log=True), "tau_epoch": Float(1e-2, 1e2, log=True)},
    )


def log_optimum(scale: Scale) -> tuple[float, float]:
    """(log base_lr*, log tau_epoch*) at ``scale`` — the known law."""
    s = math.log(scale["width"] / 64)
    d = math.log(scale["dataset_size"] / 2e4)
    return math.log(3e-3) - 0.6 * s + 0.25 * d, 0.4 * s - 0.3 * d


def regret(scale: Scale, params: Mapping[str, float]) -> float:
    """Loss above the optimum: 0.5·(Δ log base_lr)² + 0.3·(Δ log tau_epoch)²."""
    lr_star, tau_star = log_optimum(scale)
    return (
        0.5 * (math.log(params["base_lr"]) - lr_star) ** 2
        + 0.3 * (math.log(params["tau_epoch"]) - tau_star) ** 2
    )

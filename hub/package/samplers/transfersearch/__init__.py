"""OptunaHub package ``samplers/transfersearch``: the transfersearch ``TransferSampler``.

The sampler lives in the ``transfersearch`` library (``pip install 'transfersearch[optuna]'``);
this package re-exports it with what a study needs to build its space and ladder.
"""

from __future__ import annotations

from transfersearch import Choice, Float, Int, Scale, TransferSpace, extrapolate, rules
from transfersearch.integrations.optuna import RungPruner, TransferSampler

__all__ = [
    "Choice",
    "Float",
    "Int",
    "RungPruner",
    "Scale",
    "TransferSampler",
    "TransferSpace",
    "extrapolate",
    "rules",
]

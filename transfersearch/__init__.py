"""transfersearch: tune AdamW on small proxies, carry the optimum to the big run.

The core imports numpy and scipy only; the Optuna, Ray Tune and PyTorch adapters live in
``transfersearch.integrations`` and import their framework when used.
"""

from __future__ import annotations

from transfersearch import rules
from transfersearch.errors import TransferSearchError
from transfersearch.scale import Scale
from transfersearch.space import Choice, Float, Hyperparameters, Int, TransferSpace

__version__ = "0.1.0"

__all__ = [
    "Choice",
    "Float",
    "Hyperparameters",
    "Int",
    "Scale",
    "TransferSearchError",
    "TransferSpace",
    "rules",
]

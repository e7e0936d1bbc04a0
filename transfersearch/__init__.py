"""transfersearch: tune AdamW on small proxies, carry the optimum to the big run.

The core imports numpy and scipy only; the Optuna, Ray Tune and PyTorch adapters live in
``transfersearch.integrations`` and import their framework when used.
"""

from __future__ import annotations

from transfersearch import rules
from transfersearch.errors import TransferSearchError
from transfersearch.cost import default_cost
from transfersearch.extrapolate import Extrapolation
from transfersearch.extrapolate import Validation
from transfersearch.extrapolate import extrapolate
from transfersearch.extrapolate import validate
from transfersearch.fit import PowerLaw
from transfersearch.fit import ScaleOptimum
from transfersearch.fit import estimate_optimum
from transfersearch.ladder import TransferPlanner
from transfersearch.observations import Observation
from transfersearch.errors import TransferSearchWarning
from transfersearch.scale import Scale
from transfersearch.space import Choice
from transfersearch.space import Float
from transfersearch.space import Hyperparameters
from transfersearch.space import Int
from transfersearch.space import TransferSpace
from transfersearch.stored_space import stored_space

__version__ = "0.1.0"

__all__ = [
    "Choice",
    "Extrapolation",
    "Float",
    "Hyperparameters",
    "Int",
    "Observation",
    "PowerLaw",
    "Scale",
    "ScaleOptimum",
    "TransferPlanner",
    "TransferSearchError",
    "TransferSearchWarning",
    "TransferSpace",
    "Validation",
    "default_cost",
    "estimate_optimum",
    "extrapolate",
    "rules",
    "stored_space",
    "validate",
]

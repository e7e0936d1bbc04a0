"""transfersearch: tune AdamW on small proxies, carry the optimum to the big run.

The core imports numpy and scipy only; the Optuna, Ray Tune and PyTorch adapters live in
``transfersearch.integrations`` and import their framework when used.
"""

from __future__ import annotations

from transfersearch import rules
from transfersearch.api import estimate_optimum
from transfersearch.api import extrapolate
from transfersearch.api import validate
from transfersearch.cost import default_cost
from transfersearch.errors import TransferSearchError
from transfersearch.errors import TransferSearchWarning
from transfersearch.fitting.laws import PowerLaw
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.result import Extrapolation
from transfersearch.fitting.result import Validation
from transfersearch.ladder import TransferPlanner
from transfersearch.observations import Observation
from transfersearch.readers import read_sweep
from transfersearch.scale import Scale
from transfersearch.space import Choice
from transfersearch.space import Float
from transfersearch.space import Hyperparameters
from transfersearch.space import Int
from transfersearch.space import TransferSpace
from transfersearch.stored_space import stored_space
from transfersearch.sweep import Sweep

__version__ = "0.1.0"

__all__ = [
    "Choice",
    "Extrapolation",
    "FitOptions",
    "Float",
    "Hyperparameters",
    "Int",
    "Observation",
    "PowerLaw",
    "Scale",
    "ScaleOptimum",
    "Sweep",
    "TransferPlanner",
    "TransferSearchError",
    "TransferSearchWarning",
    "TransferSpace",
    "Validation",
    "default_cost",
    "estimate_optimum",
    "extrapolate",
    "read_sweep",
    "rules",
    "stored_space",
    "validate",
]

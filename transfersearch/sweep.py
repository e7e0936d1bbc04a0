"""A sweep: the trials a source holds and what came with them, as the engine takes them.

Every reader (:func:`transfersearch.readers.read_sweep`, the Optuna and Ray Tune readers in
``transfersearch.integrations``) returns a :class:`Sweep`; the fitting engine reads nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.space import TransferSpace

__all__ = ["Direction", "Sweep"]

Direction = Literal["minimize", "maximize"]
"""Whether a lower or a higher metric is better."""


@dataclass(frozen=True)
class Sweep:
    """What every reader returns and the engine takes: the trials and what came with them.

    Attributes:
        observations: the trials, finished, failed (NaN or infinite value) and pruned.
        space: the :class:`~transfersearch.space.TransferSpace` the source stored with its
            trials (an Optuna study's or a Ray Tune searcher's), or None when it holds none.
        direction: ``"minimize"`` or ``"maximize"`` when the source says so; None when it does
            not (the engine then minimizes).
        cost: the cost of a run at a scale, which orders the rungs; None for
            :func:`transfersearch.cost.default_cost`.
    """

    observations: tuple[Observation, ...]
    space: TransferSpace | None = None
    direction: Direction | None = None
    cost: Callable[[Scale], float] | None = None

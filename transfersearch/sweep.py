"""A sweep: the trials a source holds and what came with them, as the engine takes them.

Every reader (:func:`transfersearch.readers.read_sweep`, the Optuna and Ray Tune readers in
``transfersearch.integrations``) returns a :class:`Sweep`; the fitting engine reads nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from transfersearch.errors import TransferSearchError, shown_positions
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
        params: the parameters the source was read for (``read_sweep(source, params=...)``):
            the ones fitted when the fit names none; the trials may record others (a table's
            other parameter columns), which are then not fitted. None: every parameter every
            complete trial records.

    Raises:
        TransferSearchError: an entry of ``observations`` is not an :class:`Observation`, a
            ``direction`` other than the two (or None), or a ``cost`` that is not callable.
    """

    observations: tuple[Observation, ...]
    space: TransferSpace | None = None
    direction: Direction | None = None
    cost: Callable[[Scale], float] | None = None
    params: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        observations = tuple(self.observations)  # a list is accepted and kept as a tuple
        wrong = [i for i, o in enumerate(observations) if not isinstance(o, Observation)]
        if wrong:
            raise TransferSearchError(
                f"a Sweep holds Observation objects, but the entries at {shown_positions(wrong)} "
                f"are not (the first: {observations[wrong[0]]!r:.80}). Read a source with "
                "read_sweep(source), or build each trial as Observation(scale, params, value)."
            )
        object.__setattr__(self, "observations", observations)
        if self.direction not in (None, "minimize", "maximize"):
            raise TransferSearchError(
                f"`direction` must be 'minimize', 'maximize' or None (the source did not say), "
                f"but got direction={self.direction!r}."
            )
        if self.params is not None:
            if isinstance(self.params, str) or not all(isinstance(n, str) for n in self.params):
                raise TransferSearchError(
                    f"`params` must be a list of parameter names or None, but got "
                    f"params={self.params!r:.80}. Write params=['lr']."
                )
            object.__setattr__(self, "params", tuple(self.params))
        if self.cost is not None and not callable(self.cost):
            raise TransferSearchError(
                f"`cost` must be None or a function of a Scale, e.g. transfersearch.cost."
                f"default_cost, but got cost={self.cost!r:.80}."
            )

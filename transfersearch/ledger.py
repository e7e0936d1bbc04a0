"""A growing record of finished trials that keeps its per-scale tallies as trials arrive.

The planner asks, for every trial it plans, how many complete trials each rung has; a
:class:`TrialLedger` answers from counters instead of re-reading every trial, so an adapter that
appends each finished trial once keeps the cost per trial flat as a study grows.

    >>> ledger = TrialLedger()
    >>> ledger.append(Observation({"width": 64}, {"lr": 1e-3}, 2.5))
    >>> dict(ledger.complete_counts())
    {Scale(width=64): 1}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import overload

from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation
from transfersearch.scale import Scale

__all__ = ["TrialLedger", "complete_counts"]


class TrialLedger(Sequence[Observation]):
    """Finished trials in the order they were recorded, with complete trials counted per scale.

    A read-only sequence of :class:`Observation` (anything that takes a list of observations
    takes a ledger) that grows by :meth:`append`; it never forgets or changes an entry, because a
    finished trial never changes.

    Args:
        observations: the trials to start with.

    Raises:
        TransferSearchError: an entry is not an Observation.
    """

    def __init__(self, observations: Iterable[Observation] = ()) -> None:
        self._items: list[Observation] = []
        self._complete: dict[Scale, int] = {}
        for observation in observations:
            self.append(observation)

    def append(self, observation: Observation) -> None:
        """Record one finished trial."""
        if not isinstance(observation, Observation):
            raise TransferSearchError(
                f"a TrialLedger holds Observations, but got {type(observation).__name__}."
            )
        self._items.append(observation)
        if observation.state == "complete":
            scale = observation.scale
            self._complete[scale] = self._complete.get(scale, 0) + 1

    def complete_counts(self) -> Mapping[Scale, int]:
        """Complete trials per scale (failed and pruned ones not counted); a live view."""
        return MappingProxyType(self._complete)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Observation: ...

    @overload
    def __getitem__(self, index: slice) -> list[Observation]: ...

    def __getitem__(self, index: int | slice) -> Observation | list[Observation]:
        return self._items[index]

    def __iter__(self) -> Iterator[Observation]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"TrialLedger({len(self._items)} trials, complete per scale {self._complete})"


def complete_counts(observations: Sequence[Observation]) -> Mapping[Scale, int]:
    """Complete observations per scale: kept by a :class:`TrialLedger`, else counted (O(trials))."""
    if isinstance(observations, TrialLedger):
        return observations.complete_counts()
    return TrialLedger(observations).complete_counts()

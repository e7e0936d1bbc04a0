"""The ladder's schedule: rungs in cost order, a trial budget per rung, and the rung of each trial.

:class:`RungSchedule` is the budget half of :class:`~transfersearch.ladder.TransferPlanner`: it
knows nothing of the law except, when trials run concurrently, whether a rung's law is pending
(a question the planner answers from its :class:`~transfersearch.law_cache.LawCache`). The policy
and its reasons are in ``docs/design.md``.

    >>> from transfersearch import synthetic
    >>> from transfersearch.ladder import PlannerOptions
    >>> schedule = RungSchedule.build(synthetic.LADDER, PlannerOptions())
    >>> schedule.budgets, schedule.assign([16, 3, 0, 0])
    ((16, 16, 8, 8), RungDecision(rung=1, detoured_from=None, wait=False))
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from transfersearch.cost import by_cost, cost_function
from transfersearch.errors import TransferSearchError
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.ladder import PlannerOptions

__all__ = ["RungDecision", "RungSchedule"]

#: The planner's one logger: its decisions are found under this name whichever part made them.
logger = logging.getLogger("transfersearch.ladder")

#: The rungs that never wait for a law: the two cheapest are the law's first sources.
LAW_FREE_RUNGS = 2

#: Per-rung counts as the adapters keep them: a mapping rung -> count, or a sequence in cost order.
Counts = Mapping[int, int] | Sequence[int]

#: Whether the law for a rung is pending, given the trials now running per rung (cost order).
PendingLaw = Callable[[int, Sequence[int]], bool]


class RungDecision(NamedTuple):
    """Where the next trial runs.

    Attributes:
        rung: the rung (index in cost order). With ``wait`` it is the rung held back.
        detoured_from: the rung the budget order chose when the law gate sent the trial to the
            cheaper ``rung`` instead; None when the trial was not detoured.
        wait: True when the caller should start nothing now and ask again once a trial ends
            (only when :meth:`RungSchedule.assign` was called with ``wait=True``).
    """

    rung: int
    detoured_from: int | None
    wait: bool


@dataclass(frozen=True)
class RungSchedule:
    """The rungs in cost order with their costs and budgets, and the rule that assigns a trial.

    Attributes:
        ladder: the proxy scales, cheapest first.
        costs: each rung's cost (same order).
        budgets: each rung's trial budget (same order).
        gate_on_law: hold back a law-using rung whose law is pending.
        detour_limit: a lower rung takes detoured trials until it has started this many times
            its budget.
    """

    ladder: tuple[Scale, ...]
    costs: tuple[float, ...]
    budgets: tuple[int, ...]
    gate_on_law: bool = True
    detour_limit: float = 2.0

    @classmethod
    def build(
        cls, ladder: Sequence[Scale | Mapping[str, float]], options: PlannerOptions
    ) -> RungSchedule:
        """The schedule of ``ladder`` (any order) under the planner's checked ``options``
        (``trials_per_rung``, ``first_rungs_trials``, ``later_rungs_trials``, ``cost``,
        ``gate_on_law``, ``detour_limit``).

        Raises:
            TransferSearchError: an empty ladder, duplicate scales, costs that are not positive
                and finite, or a budget per rung of the wrong length.
        """
        if not ladder:
            raise TransferSearchError(
                "`ladder` is empty. Give the proxy scales, e.g. "
                "[ts.Scale(width=w, dataset_size=n) for w in (64, 128) for n in (2e4, 8e4)]."
            )
        scales = [s if isinstance(s, Scale) else Scale(s) for s in ladder]
        if len(set(scales)) != len(scales):
            raise TransferSearchError(f"`ladder` holds duplicate scales: {scales}.")
        cost = cost_function(options.cost)
        costs = [float(cost(s)) for s in scales]
        if any(not math.isfinite(c) or c <= 0 for c in costs):
            raise TransferSearchError(f"`cost` must give positive finite costs, but gave {costs}.")
        ordered = tuple(by_cost(scales, cost))
        budgets = _budgets(
            len(ordered),
            options.trials_per_rung,
            options.first_rungs_trials,
            options.later_rungs_trials,
        )
        return cls(
            ladder=ordered,
            costs=tuple(costs[scales.index(s)] for s in ordered),
            budgets=budgets,
            gate_on_law=options.gate_on_law,
            detour_limit=options.detour_limit,
        )

    def rung_of(self, scale: Scale | Mapping[str, float]) -> int:
        """The index of ``scale`` in the (cost-ordered) ladder."""
        target = scale if isinstance(scale, Scale) else Scale(scale)
        try:
            return self.ladder.index(target)
        except ValueError:
            raise TransferSearchError(
                f"{target!r} is not a rung of the ladder {self.ladder}."
            ) from None

    def per_rung(self, counts: Counts | None) -> list[int]:
        """Per-rung counts (cost order) from a mapping rung -> count or a sequence; None: zeros."""
        if counts is None:
            return [0] * len(self.ladder)
        if isinstance(counts, Mapping):
            return [int(counts.get(i, 0)) for i in range(len(self.ladder))]
        return [int(counts[i]) for i in range(len(self.ladder))]

    def budget_order(self, counts: Sequence[int]) -> int:
        """Cheapest rung with budget left; past every budget, the smallest used fraction."""
        for i, (count, budget) in enumerate(zip(counts, self.budgets)):
            if count < budget:
                return i
        return min(range(len(self.ladder)), key=lambda i: (counts[i] / self.budgets[i], i))

    def assign(
        self,
        started: Counts,
        *,
        pending: PendingLaw | None = None,
        running: Counts | None = None,
        wait: bool = False,
    ) -> RungDecision:
        """The rung for the next trial (the rule of :meth:`TransferPlanner.assign_rung`).

        Args:
            started: trials per rung that are running or finished.
            pending: whether a rung's law is pending given the running trials; None: no gating.
            running: trials per rung now running (the trial being planned not among them).
            wait: whether the caller can wait.
        """
        counts = self.per_rung(started)
        rung = self.budget_order(counts)
        if not self.gate_on_law or pending is None or rung < LAW_FREE_RUNGS:
            logger.debug("rung %d by the budget order (started per rung: %s)", rung, counts)
            return RungDecision(rung, None, False)
        in_flight = self.per_rung(running)
        if not pending(rung, in_flight):
            logger.debug("rung %d by the budget order (started per rung: %s)", rung, counts)
            return RungDecision(rung, None, False)
        if wait:
            logger.info(
                "waiting: the law for rung %d is pending on running trials %s", rung, in_flight
            )
            return RungDecision(rung, None, True)
        return self._detour(rung, counts, in_flight, pending)

    def _detour(
        self, rung: int, counts: Sequence[int], in_flight: Sequence[int], pending: PendingLaw
    ) -> RungDecision:
        """The cheapest lower rung below ``detour_limit`` × its budget whose own law is not
        pending; every one saturated: ``rung`` itself, run without its law."""
        for lower in range(rung):
            if counts[lower] >= self.detour_limit * self.budgets[lower]:
                continue
            if lower >= LAW_FREE_RUNGS and pending(lower, in_flight):
                continue
            logger.info(
                "detour: rung %d instead of %d, whose law is pending on running trials %s",
                lower,
                rung,
                in_flight,
            )
            return RungDecision(lower, rung, False)
        logger.info(
            "rung %d runs without its pending law: every lower rung has started %g x its budget",
            rung,
            self.detour_limit,
        )
        return RungDecision(rung, None, False)


def _budgets(
    n: int, trials_per_rung: int | Sequence[int] | None, first: int, later: int
) -> tuple[int, ...]:
    """One budget per rung: the given int or sequence, or ``first`` for the two cheapest rungs
    and ``later`` above (the values are already checked; the length is checked here)."""
    if trials_per_rung is None:
        return tuple(first if i < LAW_FREE_RUNGS else later for i in range(n))
    if isinstance(trials_per_rung, int):
        return (trials_per_rung,) * n
    if len(trials_per_rung) != n:
        raise TransferSearchError(
            f"`trials_per_rung` has {len(trials_per_rung)} entries for {n} rungs; give one per "
            "rung (in cost order) or a single int."
        )
    return tuple(trials_per_rung)

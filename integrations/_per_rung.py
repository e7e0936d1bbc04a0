"""What both adapters keep per rung: the planner bound to the framework's direction, one base
sampler or searcher per rung, and the tally the planner is asked with.

``TransferSampler`` (Optuna) and ``TransferSearch`` (Ray Tune) forward to :class:`PerRung`, as
Optuna's ``PartialFixedSampler`` forwards to its base sampler: the framework-specific parts (how a
copy is made and seeded, how trials are counted) are passed in, the policy is written once here.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.ladder import Proposal, TransferPlanner
from transfersearch.ledger import TrialLedger

__all__ = ["PerRung", "RungCounts", "Tally", "rung_seed"]

logger = logging.getLogger(__name__)

BaseT = TypeVar("BaseT")


def rung_seed(seed: int, rung: int) -> int:
    """The seed of rung ``rung``'s base copy: the first word of ``SeedSequence([seed, rung])``.

    Each rung gets its own stream (a copy of one seeded sampler would replay the first rung's
    draws on every rung), reproducible from ``seed``.
    """
    return int(np.random.SeedSequence([seed, rung]).generate_state(1)[0])


class RungCounts(NamedTuple):
    """Trials per rung, as :meth:`TransferPlanner.assign_rung` takes them."""

    started: list[int]  # trials that used up their rung's budget (running or finished)
    running: list[int]  # of those, the ones still running
    #: of the started, those whose coordinates the planner chose (not enqueued by the user):
    #: a law-guided rung's first planned trial runs at the law's point (None: all started)
    planned: list[int] | None = None


class Tally(Protocol):
    """An adapter's record of its trials: the counts per rung and the ended trials."""

    @property
    def ledger(self) -> TrialLedger:
        """The ended trials as observations."""
        ...

    def counts(self, exclude: object = None) -> RungCounts:
        """Trials per rung, leaving out the trial ``exclude`` names (the one being planned)."""
        ...


class PerRung(Generic[BaseT]):
    """The planner, its direction and one base sampler/searcher per rung, for one adapter.

    Args:
        planner: the rung policy and law.
        template: the base sampler or searcher the user gave (None: the adapter samples itself).
        seed: the seed of the per-rung copies; None: each copy is reseeded from fresh entropy
            by ``reseed``.
        seed_copy: seeds a copy with an int; returns False where the copy has no generator it
            knows of (then ``reseed`` is used and the rung's draws are not reproducible).
        reseed: reseeds a copy from fresh entropy (None: the copy keeps the template's state).
        prepare: called on each new copy with its rung before it serves (e.g. give a Ray
            searcher its search space).
        share_first: the first rung used gets ``template`` itself, not a copy (Optuna: the
            user's sampler serves where it was seeded); else every rung gets a seeded copy.
    """

    def __init__(
        self,
        planner: TransferPlanner,
        template: BaseT | None,
        *,
        seed: int | None,
        seed_copy: Callable[[BaseT, int], bool],
        reseed: Callable[[BaseT], None] | None = None,
        prepare: Callable[[BaseT, int], None] | None = None,
        share_first: bool = False,
    ) -> None:
        self.planner = planner
        self._base = template
        # Copies are made from the template's initial state: samplers keep per-study state
        # (search-space cursors, fitted kernels, constant-liar caches) that must not carry over
        # between landscapes.
        self._template = copy.deepcopy(template)
        self._seed = seed
        self._seed_copy = seed_copy
        self._reseed = reseed
        self._prepare = prepare
        self._share_first = share_first
        self._copies: dict[int, BaseT] = {}
        self._bound = False
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the lock (Tune pickles its searcher)."""
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # Base copies ----------------------------------------------------------------------------
    @property
    def copies(self) -> dict[int, BaseT]:
        """The base copy of each rung used so far (rung -> sampler or searcher)."""
        return dict(self._copies)

    def base(self, rung: int) -> BaseT | None:
        """The base sampler or searcher that serves ``rung`` (made on first use); None without
        a template."""
        if self._template is None or self._base is None:
            return None
        with self._lock:
            found = self._copies.get(rung)
            if found is None:
                if self._share_first and not self._copies:
                    found = self._base
                else:
                    found = copy.deepcopy(self._template)
                    self._seed_rung(found, rung)
                if self._prepare is not None:
                    self._prepare(found, rung)
                self._copies[rung] = found
            return found

    def forget_copies(self) -> None:
        """Drop every copy (a restore rebuilds them)."""
        with self._lock:
            self._copies = {}

    def _seed_rung(self, found: BaseT, rung: int) -> None:
        if self._seed is not None:
            derived = rung_seed(self._seed, rung)
            if self._seed_copy(found, derived):
                logger.debug("rung %d: base copy seeded with %d", rung, derived)
                return
            logger.info(
                "rung %d: %s has no random generator transfersearch can seed; %s",
                rung,
                type(found).__name__,
                "reseeded from OS entropy (this rung's draws are not reproducible)"
                if self._reseed is not None
                else "it keeps the state it was given (its draws may repeat another rung's)",
            )
        if self._reseed is not None:
            self._reseed(found)

    def reseed(self, seed: int | None = None) -> None:
        """Restart every random stream: the user's sampler, the template and every copy, and the
        planner. From fresh entropy, or with ``seed`` from streams derived from it (a copy made
        later gets :func:`rung_seed` of it), so each of several workers given its own seed draws
        its own reproducible stream."""
        if seed is None:
            if self._reseed is not None and self._base is not None and self._template is not None:
                self._reseed(self._base)
                self._reseed(self._template)
                for found in self._copies.values():
                    if found is not self._base:
                        self._reseed(found)
            self.planner.reseed()
            return
        self._seed = seed
        if self._base is not None and self._template is not None:
            self._seed_rung(self._template, 0)
            for rung, found in self._copies.items():
                self._seed_rung(found, rung)
            if self._base not in self._copies.values():
                self._seed_rung(self._base, 0)  # the shared first copy, not used yet
        self.planner.reseed(seed)

    # Direction -------------------------------------------------------------------------------
    def bind(
        self, direction: str | None, *, refuse: Callable[[str, str], str] | None = None
    ) -> None:
        """Plan for ``direction`` (None: unchanged): the planner is replaced by a copy for it.

        With ``refuse``, once bound the direction is fixed: another one raises
        ``TransferSearchError(refuse(planned, asked))``.
        """
        if direction is None:
            return
        if direction != self.planner.direction:
            if self._bound and refuse is not None:
                raise TransferSearchError(refuse(self.planner.direction, direction))
            logger.debug("the planner follows the framework: direction=%r", direction)
            self.planner = self.planner.replace(direction=direction)
        self._bound = True

    # Planning ----------------------------------------------------------------------------------
    def plan(
        self,
        tally: Tally,
        *,
        exclude: object = None,
        rung: int | None = None,
        wait: bool = False,
    ) -> tuple[Proposal | None, int | None]:
        """The next trial's proposal and the rung the law gate kept it from (None: not detoured).

        ``rung`` given: the trial's rung is fixed (no assignment). With ``wait``, a rung whose law
        is pending returns ``(None, None)`` (Tune asks again later) instead of a detour.
        """
        counts = tally.counts(exclude)
        ledger = tally.ledger
        detoured_from = None
        if rung is None:
            decision = self.planner.assign_rung(
                counts.started, observations=ledger, running=counts.running, wait=wait
            )
            if decision.wait:
                logger.debug(
                    "rung %d waits for its law (running per rung: %s)",
                    decision.rung,
                    counts.running,
                )
                return None, None
            rung, detoured_from = decision.rung, decision.detoured_from
        planned = counts.started if counts.planned is None else counts.planned
        return self.planner.propose(rung, ledger, planned[rung]), detoured_from

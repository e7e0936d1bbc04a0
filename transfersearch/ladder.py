"""The proxy ladder: which rung each trial runs on, and where the fitted law says to look.

One implementation, used by both the Optuna sampler and the Ray Tune searcher:

* **Rung policy** (:meth:`TransferPlanner.assign_rung`): rungs are ordered by cost (default
  width² × dataset_size, see :func:`default_cost`); each trial goes to the cheapest rung whose budget
  (``trials_per_rung``) is not yet used up. Once every budget is spent, further trials go to the rung
  with the smallest fraction of its budget used (cheapest first on ties).
* **Law gating** (``gate_on_law``, for concurrent trials): the law of a rung needs two *other*
  rungs with ``min_trials`` finished trials, so the rungs from the third cheapest on are the ones
  that use it. When such a rung is next by the budget order but its law is only *pending*
  (:meth:`TransferPlanner.law_pending`: not available now, but available once trials now running
  on other rungs finish), :meth:`TransferPlanner.assign_rung` does not start it without the law:
  given ``wait=True`` it returns None (the caller asks again later: Ray Tune's ``suggest``), else
  it *detours* the trial to the cheapest lower rung that is not saturated (fewer than
  ``detour_limit`` × its budget started; an Optuna worker cannot wait). Detours overshoot the
  lower rungs' budgets by the cheap trials that fit into the wait (a pending law opens as soon
  as the running trials finish), never beyond ``detour_limit`` × budget; past that the trial
  runs on its rung without the law. With one trial at a time nothing is running, no law is
  ever pending, and the policy is the plain budget order.
* **Law-guided focus** (:meth:`TransferPlanner.propose`): once at least two rungs have enough
  finished trials for an optimum estimate, :func:`transfersearch.extrapolate` fits the
  optimum-vs-scale law and predicts the optimum at the trial's rung. The first trial of the rung
  runs at the predicted point; later ones, with probability ``focus``, at a point drawn around it
  (log-normal for log-scale coordinates, normal otherwise) with the law's predictive spread; the
  rest are left to the base sampler, which sees only its own rung's history.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fit import Direction, check_direction
from transfersearch.scale import Scale
from transfersearch.space import Float, Int, TransferSpace

if TYPE_CHECKING:
    from transfersearch.observations import Observation

__all__ = ["Proposal", "TransferPlanner", "default_cost", "gpu_shares", "snap_gpu_share"]

STATE_VERSION = 1


def default_cost(scale: Scale) -> float:
    """Relative compute of a run at ``scale``: width² × dataset_size × epochs (absent names count 1).

    Width² approximates parameters (and FLOPs per sample) of a transformer or MLP of fixed depth;
    dataset_size × epochs is the number of samples processed.
    """
    width = scale.get("width", 1.0)
    return width * width * scale.get("dataset_size", 1.0) * scale.get("epochs", 1.0)


def snap_gpu_share(share: float) -> float:
    """Round a GPU share up to a unit fraction 1/k below one GPU (k trials fill it exactly) and to
    a whole number of GPUs at or above one; 0 stays 0 (CPU only)."""
    if share <= 0:
        return 0.0
    if share >= 1.0:
        return float(math.ceil(share - 1e-9))
    return 1.0 / math.floor(1.0 / share + 1e-9)


def gpu_shares(
    costs: Sequence[float], *, min_gpu: float, max_gpu: float = 1.0
) -> tuple[float, ...]:
    """GPUs per trial for rungs of the given costs: the one GPU packing rule of both adapters.

    A rung of cost ``c`` gets ``max_gpu · c / c_max`` GPUs (``c_max``: the most expensive rung),
    never less than ``min_gpu``, snapped by :func:`snap_gpu_share`: below one GPU up to 1/k (k
    trials share a GPU), from one GPU up to a whole number. A share is the GPU compute a trial's
    cost deserves, so every rung runs for a similar wall time and a proxy too small to saturate a
    GPU shares it; with ``min_gpu = 1/k_max`` at most ``k_max`` trials share one GPU.

    Args:
        costs: the rungs' relative costs (any order; positive and finite).
        min_gpu: the smallest share a trial gets (e.g. 0.25: at most four trials per GPU).
        max_gpu: GPUs per trial of the most expensive rung.

    Returns:
        One share per cost, in the order given.

    Raises:
        TransferSearchError: no costs, a cost that is not positive and finite, or a share bound
            that is not positive.
    """
    values = [float(c) for c in costs]
    if not values or any(not math.isfinite(c) or c <= 0 for c in values):
        raise TransferSearchError(f"`costs` must be positive finite numbers, but got {values}.")
    for name, bound in (("min_gpu", min_gpu), ("max_gpu", max_gpu)):
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound > 0:
            raise TransferSearchError(f"`{name}` must be a positive GPU share, but got {bound!r}.")
    top = max(values)
    return tuple(snap_gpu_share(max(min_gpu, max_gpu * cost / top)) for cost in values)


@dataclass(frozen=True)
class Proposal:
    """What the planner suggests for one trial.

    ``params`` holds the coordinates to use (empty: let the base sampler choose all), ``source`` is
    "law-point", "law-neighbourhood" or "base".
    """

    rung: int
    params: Mapping[str, float]
    source: str


class TransferPlanner:
    """Rung assignment and law-guided proposals over a ladder of proxy scales.

    Args:
        space: the :class:`TransferSpace` whose coordinates are swept.
        ladder: the proxy scales (order does not matter; rungs are indexed in cost order).
        trials_per_rung: budget per rung: an int for all, a sequence (in cost order), or None for
            the default: ``first_rungs_trials`` for the two cheapest rungs and
            ``later_rungs_trials`` for the others (the law needs fewer there).
        cost: relative cost of a scale (default :func:`default_cost`).
        min_trials: finished trials a rung needs before its optimum enters the law.
        focus: probability that a later trial on a law-guided rung is drawn around the prediction
            instead of by the base sampler.
        min_spread: the smallest spread (in natural-log units for log coordinates, as a fraction of
            the range otherwise) of the neighbourhood, so it never collapses to a point.
        n_bootstrap: bootstrap resamples for the law's uncertainty.
        seed: seed of the planner's random draws (an int >= 0: reproducible). None (the
            default): fresh OS entropy, so independent processes draw different
            neighbourhood points instead of the same ones.
        transfer: False turns the law off: every proposal defers to the base sampler, so each rung
            is searched independently (the baseline that transfer is measured against).
        refit_growth: the law is refitted for a rung when a new rung qualifies or a qualifying
            rung's finished trials have grown by this factor since the last fit (1.0: on every
            new trial). Refits then grow logarithmically with the study, not linearly.
        direction: ``"minimize"`` (default) or ``"maximize"`` the observations' values, which
            are the raw metric; passed to :func:`transfersearch.extrapolate`. The adapters set it
            from the study's direction (Optuna) or the searcher's mode (Ray).
        gate_on_law: hold back a law-using rung whose law is pending (see :meth:`assign_rung`);
            only matters when trials run concurrently. False: the plain budget order.
        detour_limit: a lower rung takes detoured trials until it has started this many times
            its budget (>= 1; 1: no detour, a trial that cannot wait runs without the law).

    Raises:
        TransferSearchError: an empty ladder, duplicate scales, a bad budget, probability or
            detour limit.
    """

    def __init__(
        self,
        space: TransferSpace,
        ladder: Sequence[Scale | Mapping[str, float]],
        *,
        trials_per_rung: int | Sequence[int] | None = None,
        cost: Callable[[Scale], float] | None = None,
        first_rungs_trials: int = 16,
        later_rungs_trials: int = 8,
        min_trials: int = 6,
        focus: float = 0.75,
        min_spread: float = 0.15,
        n_bootstrap: int = 40,
        seed: int | None = None,
        transfer: bool = True,
        refit_growth: float = 1.25,
        direction: Direction = "minimize",
        gate_on_law: bool = True,
        detour_limit: float = 2.0,
    ) -> None:
        if not isinstance(space, TransferSpace):
            raise TransferSearchError(f"`space` must be a TransferSpace, but got {space!r}.")
        if not ladder:
            raise TransferSearchError(
                "`ladder` is empty. Give the proxy scales, e.g. "
                "[ts.Scale(width=w, dataset_size=n) for w in (64, 128) for n in (2e4, 8e4)]."
            )
        scales = [s if isinstance(s, Scale) else Scale(s) for s in ladder]
        if len(set(scales)) != len(scales):
            raise TransferSearchError(f"`ladder` holds duplicate scales: {scales}.")
        self.space = space
        self.cost: Callable[[Scale], float] = cost or default_cost
        costs = [float(self.cost(s)) for s in scales]
        if any(not math.isfinite(c) or c <= 0 for c in costs):
            raise TransferSearchError(f"`cost` must give positive finite costs, but gave {costs}.")
        order = sorted(range(len(scales)), key=lambda i: (costs[i], i))
        self.ladder: tuple[Scale, ...] = tuple(scales[i] for i in order)
        self.costs: tuple[float, ...] = tuple(costs[i] for i in order)
        self.budgets: tuple[int, ...] = self._budgets(
            trials_per_rung, first_rungs_trials, later_rungs_trials
        )
        if min_trials < 1:
            raise TransferSearchError(f"`min_trials` must be >= 1, but got {min_trials}.")
        if not 0.0 <= focus <= 1.0:
            raise TransferSearchError(f"`focus` must lie in [0, 1], but got {focus}.")
        self.min_trials = min_trials
        self.focus = focus
        self.min_spread = min_spread
        self.n_bootstrap = n_bootstrap
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise TransferSearchError(
                f"`seed` must be None or an int >= 0, but got seed={seed!r}. Pass e.g. seed=0 "
                "for reproducible draws, or leave it out for fresh ones per process."
            )
        self.seed = seed
        self.transfer = bool(transfer)
        if not (isinstance(refit_growth, (int, float)) and refit_growth >= 1.0):
            raise TransferSearchError(
                f"`refit_growth` must be a number >= 1, but got refit_growth={refit_growth!r}."
            )
        self.refit_growth = float(refit_growth)
        if isinstance(detour_limit, bool) or not (
            isinstance(detour_limit, (int, float)) and detour_limit >= 1.0
        ):
            raise TransferSearchError(
                f"`detour_limit` must be a number >= 1, but got detour_limit={detour_limit!r}."
            )
        self.gate_on_law = bool(gate_on_law)
        self.detour_limit = float(detour_limit)
        self._rng = np.random.default_rng(seed)
        # rung -> (finished trials per qualifying rung at the last fit, the fit's result)
        self._cache: dict[
            int, tuple[dict[Scale, int], tuple[dict[str, float], dict[str, float]] | None]
        ] = {}
        self._direction: Direction = "minimize"
        self.direction = direction

    def _budgets(
        self, trials_per_rung: int | Sequence[int] | None, first: int, later: int
    ) -> tuple[int, ...]:
        n = len(self.ladder)
        if trials_per_rung is None:
            budgets = [first if i < 2 else later for i in range(n)]
        elif isinstance(trials_per_rung, int):
            budgets = [trials_per_rung] * n
        else:
            budgets = [int(b) for b in trials_per_rung]
            if len(budgets) != n:
                raise TransferSearchError(
                    f"`trials_per_rung` has {len(budgets)} entries for {n} rungs; give one per rung "
                    "(in cost order) or a single int."
                )
        if any(b < 1 for b in budgets):
            raise TransferSearchError(f"`trials_per_rung` must be >= 1, but got {budgets}.")
        return tuple(budgets)

    @property
    def direction(self) -> Direction:
        """Whether the law looks for the smallest (``"minimize"``) or largest metric."""
        return self._direction

    @direction.setter
    def direction(self, direction: Direction) -> None:
        """Set the direction; cached fits made for the other direction are dropped.

        Raises:
            TransferSearchError: ``direction`` is neither ``"minimize"`` nor ``"maximize"``.
        """
        check_direction(direction)
        if direction != self._direction:
            self._cache.clear()
        self._direction = direction

    # ------------------------------------------------------------------------------------------
    def rung_of(self, scale: Scale | Mapping[str, float]) -> int:
        """The index of ``scale`` in the (cost-ordered) ladder."""
        target = scale if isinstance(scale, Scale) else Scale(scale)
        try:
            return self.ladder.index(target)
        except ValueError:
            raise TransferSearchError(
                f"{target!r} is not a rung of the ladder {self.ladder}."
            ) from None

    def _per_rung(self, counts: Mapping[int, int] | Sequence[int] | None) -> list[int]:
        """Per-rung counts (cost order) from a mapping rung -> count or a sequence; None: zeros."""
        if counts is None:
            return [0] * len(self.ladder)
        if isinstance(counts, Mapping):
            return [int(counts.get(i, 0)) for i in range(len(self.ladder))]
        return [int(counts[i]) for i in range(len(self.ladder))]

    def _budget_order(self, counts: Sequence[int]) -> int:
        """Cheapest rung with budget left; past every budget, the smallest used fraction."""
        for i, (count, budget) in enumerate(zip(counts, self.budgets)):
            if count < budget:
                return i
        return min(range(len(self.ladder)), key=lambda i: (counts[i] / self.budgets[i], i))

    @overload
    def assign_rung(
        self,
        started: Mapping[int, int] | Sequence[int],
        *,
        observations: Sequence[Observation] | None = None,
        running: Mapping[int, int] | Sequence[int] | None = None,
        wait: Literal[False] = False,
    ) -> int: ...

    @overload
    def assign_rung(
        self,
        started: Mapping[int, int] | Sequence[int],
        *,
        observations: Sequence[Observation] | None = None,
        running: Mapping[int, int] | Sequence[int] | None = None,
        wait: bool,
    ) -> int | None: ...

    def assign_rung(
        self,
        started: Mapping[int, int] | Sequence[int],
        *,
        observations: Sequence[Observation] | None = None,
        running: Mapping[int, int] | Sequence[int] | None = None,
        wait: bool = False,
    ) -> int | None:
        """The rung for the next trial, given how many trials each rung has started.

        The budget order: the cheapest rung with budget left; past every budget, the rung with
        the smallest used fraction (cheapest on ties). With ``gate_on_law`` and ``observations``
        given, a rung from the third cheapest on whose law is pending (:meth:`law_pending`) is
        held back: with ``wait=True`` the answer is None (ask again when a trial finishes), else
        the trial detours to the cheapest lower rung that has started fewer than
        ``detour_limit`` × its budget and is not itself waiting for its law; when every lower
        rung is saturated the trial stays on the rung and runs without the law. Sequential use
        (nothing ``running``) never gates.

        Args:
            started: trials per rung (mapping rung -> count, or a sequence in cost order) that
                are running or finished, not the failed ones that will be retried.
            observations: the finished trials (any rung, any state), for :meth:`law_pending`.
            running: trials per rung now running (the trial being planned not among them).
            wait: whether the caller can wait (None means "ask again later").

        Returns:
            A rung index in cost order, or None (only with ``wait=True``) to wait.
        """
        counts = self._per_rung(started)
        rung = self._budget_order(counts)
        if not self.gate_on_law or observations is None or rung < 2:
            return rung
        in_flight = self._per_rung(running)
        if not self.law_pending(rung, observations, in_flight):
            return rung
        if wait:
            return None
        for lower in range(rung):
            if counts[lower] >= self.detour_limit * self.budgets[lower]:
                continue
            if lower >= 2 and self.law_pending(lower, observations, in_flight):
                continue
            return lower
        return rung

    def law_pending(
        self,
        rung: int,
        observations: Sequence[Observation],
        running: Mapping[int, int] | Sequence[int],
    ) -> bool:
        """Whether the law for ``rung`` is not available now but will be once running trials end.

        The law needs two rungs other than ``rung`` with at least ``min_trials`` complete trials
        (see :meth:`prediction`). It is pending when fewer than two qualify now, but at least two
        would if every trial now ``running`` on them completed. Always False with ``transfer``
        off or no numeric coordinate (no law to wait for). A pending law can still fail to open
        (running trials may fail or the fit may fail); the rung then runs without it.

        Args:
            rung: the rung a trial would run on (cost order).
            observations: the finished trials (any rung, any state).
            running: trials per rung now running (mapping rung -> count, or a sequence).
        """
        if not self.transfer or not self.numeric_names():
            return False
        complete = self._complete_counts(self.ladder[rung], observations)
        if sum(n >= self.min_trials for n in complete.values()) >= 2:
            return False
        in_flight = self._per_rung(running)
        for other, count in enumerate(in_flight):
            if other != rung and count > 0:
                scale = self.ladder[other]
                complete[scale] = complete.get(scale, 0) + count
        return sum(n >= self.min_trials for n in complete.values()) >= 2

    @staticmethod
    def _complete_counts(target: Scale, observations: Sequence[Observation]) -> dict[Scale, int]:
        """Complete observations per scale, ``target`` left out: the law's sources."""
        complete: dict[Scale, int] = {}
        for obs in observations:
            if obs.scale != target and obs.state == "complete":
                complete[obs.scale] = complete.get(obs.scale, 0) + 1
        return complete

    @property
    def total_budget(self) -> int:
        """The sum of the per-rung budgets."""
        return sum(self.budgets)

    def numeric_names(self) -> list[str]:
        """Swept coordinates the law can model (Float and Int, not Choice)."""
        return [n for n, d in self.space.distributions.items() if isinstance(d, (Float, Int))]

    def prediction(
        self, rung: int, observations: Sequence[Observation]
    ) -> tuple[dict[str, float], dict[str, float]] | None:
        """The law's predicted optimum at ``rung`` and its spread (log units for log coordinates).

        Uses rungs other than ``rung`` that have at least ``min_trials`` finished trials; needs two
        such rungs. Returns None when the law is not available yet or the fit fails.
        """
        target = self.ladder[rung]
        names = self.numeric_names()
        if not names:
            return None
        finished = self._complete_counts(target, observations)
        rungs = {s for s, n in finished.items() if n >= self.min_trials}
        if len(rungs) < 2:
            return None
        counts = {s: finished[s] for s in rungs}
        cached = self._cache.get(rung)
        if cached is not None and set(cached[0]) == rungs:
            last = cached[0]
            if all(counts[s] < self.refit_growth * last[s] or counts[s] == last[s] for s in rungs):
                return cached[1]
        usable = [o for o in observations if o.scale in rungs]
        from transfersearch.extrapolate import extrapolate

        result: tuple[dict[str, float], dict[str, float]] | None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = extrapolate(
                    usable,
                    target=target,
                    params=names,
                    direction=self._direction,
                    n_bootstrap=self.n_bootstrap,
                    seed=0 if self.seed is None else self.seed,
                )
            center = {n: float(fit.params[n]) for n in names}
            bounds = fit.interval(0.68)
            spread = {}
            for n in names:
                low, high = bounds[n]
                spread[n] = self._spread(n, float(low), float(high))
            result = (center, spread)
        except (TransferSearchError, ValueError, np.linalg.LinAlgError, FloatingPointError):
            result = None
        self._cache[rung] = (counts, result)
        return result

    def _spread(self, name: str, low: float, high: float) -> float:
        dist = self.space.distributions[name]
        assert isinstance(dist, (Float, Int))
        if dist.log and low > 0 and high > 0:
            return max(0.5 * math.log(high / low), self.min_spread)
        return max(0.5 * (high - low), self.min_spread * (dist.high - dist.low))

    def _clip(self, name: str, value: float) -> float:
        dist = self.space.distributions[name]
        assert isinstance(dist, (Float, Int))
        clipped = min(max(value, dist.low), dist.high)
        if isinstance(dist, Int):
            return float(round((clipped - dist.low) / dist.step) * dist.step + dist.low)
        return clipped

    def propose(
        self, rung: int, observations: Sequence[Observation], started_at_rung: int
    ) -> Proposal:
        """Coordinates for the next trial at ``rung`` (empty params: defer to the base sampler).

        Args:
            rung: the rung the trial runs on.
            observations: every trial so far (any rung; failed and diverged included).
            started_at_rung: trials already started at this rung before this one.
        """
        predicted = self.prediction(rung, observations) if self.transfer else None
        if predicted is None:
            return Proposal(rung, {}, "base")
        center, spread = predicted
        if started_at_rung == 0:
            return Proposal(rung, {n: self._clip(n, v) for n, v in center.items()}, "law-point")
        if self._rng.random() >= self.focus:
            return Proposal(rung, {}, "base")
        params: dict[str, float] = {}
        for name, value in center.items():
            dist = self.space.distributions[name]
            assert isinstance(dist, (Float, Int))
            if dist.log and value > 0:
                draw = value * math.exp(self._rng.normal(0.0, spread[name]))
            else:
                draw = value + self._rng.normal(0.0, spread[name])
            params[name] = self._clip(name, draw)
        return Proposal(rung, params, "law-neighbourhood")

    def gpu_packing(self, max_per_gpu: int = 4) -> tuple[int, ...]:
        """How many trials of each rung (cost order) may share one GPU.

        The rule is :func:`gpu_shares` with ``min_gpu = 1 / max_per_gpu`` and ``max_gpu = 1``
        (the one the Ray adapter applies too): the most expensive rung runs alone; a rung costing
        at most 1/k of it packs k per GPU, ``k = clamp(floor(cost_top / cost_rung), 1,
        max_per_gpu)``. Memory and FLOPs both grow with the cost model, so this keeps a packed GPU
        no busier than one top-rung trial.

        Raises:
            TransferSearchError: ``max_per_gpu`` is below 1.
        """
        if isinstance(max_per_gpu, bool) or not isinstance(max_per_gpu, int) or max_per_gpu < 1:
            raise TransferSearchError(
                f"`max_per_gpu` must be an int >= 1, but got max_per_gpu={max_per_gpu!r}."
            )
        shares = gpu_shares(self.costs, min_gpu=1.0 / max_per_gpu)
        return tuple(round(1.0 / share) for share in shares)

    def reseed(self, seed: int | None = None) -> None:
        """Restart the planner's random draws from ``seed`` (None: fresh OS entropy).

        Parallel workers that each hold a copy of one planner call this so that their
        neighbourhood draws differ.
        """
        self._rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Explicit, versioned state (the random generator's); the rest is configuration."""
        return {"version": STATE_VERSION, "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        version = state.get("version")
        if version != STATE_VERSION:
            raise TransferSearchError(
                f"planner state version {version!r} is not supported (expected {STATE_VERSION})."
            )
        self._rng.bit_generator.state = state["rng"]

"""How transfersearch reads an Optuna trial: its rung, whether it counts, its observation; and
the tally of a study's trials the sampler plans with."""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from transfersearch.integrations._per_rung import RungCounts
from transfersearch.ledger import TrialLedger
from transfersearch.observations import Observation, numeric_params
from transfersearch.readers import (
    FAIL_CRASHED,
    FAIL_DIVERGED,
    FAIL_KIND_ATTR,
    RUNG_ATTR,
    TOLD_ATTR,
)
from transfersearch.scale import Scale

__all__ = [
    "COUNTED_STATES",
    "FAIL_KIND_ATTR",
    "INTERRUPTED_ATTR",
    "RUNG_ATTR",
    "TOLD_ATTR",
    "StudyTally",
    "died",
    "fail_kind",
    "interrupted",
    "observation",
    "rung_of",
    "told_diverged",
    "told_fail",
    "worst_value",
]

logger = logging.getLogger("transfersearch.integrations.optuna")

#: User attribute of a trial whose objective was interrupted (Ctrl-C, SIGINT): FAIL in Optuna's
#: terms, but neither a divergence nor a crash; it is re-enqueued with the same parameters.
INTERRUPTED_ATTR = "transfersearch:interrupted"
#: States of a trial that used up its rung's budget (with a FAIL the objective told).
COUNTED_STATES = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)


def rung_of(trial: FrozenTrial) -> int | None:
    """The trial's rung, or None when the sampler has not planned it (yet)."""
    rung = trial.system_attrs.get(RUNG_ATTR)
    return None if rung is None else int(rung)


def told_fail(trial: FrozenTrial) -> bool:
    """True for a FAIL the objective decided (NaN: diverged, or an exception: crashed), not the
    heartbeat."""
    return trial.state == TrialState.FAIL and bool(trial.system_attrs.get(TOLD_ATTR, False))


def told_diverged(trial: FrozenTrial) -> bool:
    """True for a FAIL whose objective returned NaN (diverged), not one that raised (crashed)."""
    return told_fail(trial) and trial.system_attrs.get(FAIL_KIND_ATTR) == FAIL_DIVERGED


def died(trial: FrozenTrial) -> bool:
    """True for a FAIL that the objective did not decide: the heartbeat failed it (a dead worker)
    or it was interrupted. Such a trial is retried, uses up no budget and is no observation."""
    return (
        trial.state == TrialState.FAIL
        and RUNG_ATTR in trial.system_attrs
        and not trial.system_attrs.get(TOLD_ATTR, False)
    )


def interrupted(trial: FrozenTrial) -> bool:
    """True for a FAIL whose objective was interrupted (Ctrl-C), not diverged or crashed."""
    return trial.state == TrialState.FAIL and bool(trial.user_attrs.get(INTERRUPTED_ATTR, False))


def fail_kind() -> str:
    """Inside a sampler's ``after_trial`` for a FAIL: why Optuna failed the trial.

    :data:`FAIL_DIVERGED` when the objective returned (or ``study.tell`` was given) NaN, a value
    Optuna refuses and stores as FAIL with no value; :data:`FAIL_CRASHED` when it raised, or the
    caller told ``state=FAIL``. Optuna tells the sampler only the state and stores nothing that
    tells the two apart; the told value is the local ``value_or_values`` of
    ``optuna.study._tell._tell_with_warning`` (private), the frame that calls ``after_trial``
    for ``study.optimize`` and ``study.tell`` alike.
    """
    frame = sys._getframe(1)  # sys._getframe: the documented way to walk the caller's stack
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_tell_with_warning" and frame.f_globals.get("__name__") == (
            "optuna.study._tell"
        ):
            told = frame.f_locals.get("value_or_values")
            return FAIL_DIVERGED if _holds_nan(told) else FAIL_CRASHED
        frame = frame.f_back  # type: ignore[assignment]
    return FAIL_CRASHED


def _holds_nan(told: Any) -> bool:
    """A told value (one number or one per objective) that holds a NaN: anything Optuna casts
    with ``float()`` — a Python or numpy float, a 0-d array, a one-element torch tensor."""
    values = told if isinstance(told, (list, tuple)) else [told]
    return any(_is_nan(v) for v in values)


def _is_nan(value: Any) -> bool:
    if isinstance(value, (str, bytes)):  # float("nan") parses: a string is no number told
        return False
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def observation(trial: FrozenTrial, scale: Mapping[str, float]) -> Observation:
    """One finished trial as an Observation: COMPLETE with its value (±inf: diverged), PRUNED
    with its last intermediate value, FAIL as diverged (complete, NaN) when the objective
    returned NaN (:data:`FAIL_KIND_ATTR`), else as crashed (``"failed"``: it raised)."""
    if trial.state == TrialState.COMPLETE:
        value, state = float(trial.values[0]), "complete"
    elif trial.state == TrialState.PRUNED:
        last = trial.values[0] if trial.values else math.nan
        value, state = float(last), "pruned"
    elif trial.system_attrs.get(FAIL_KIND_ATTR) == FAIL_DIVERGED:
        value, state = math.nan, "complete"
    else:
        value, state = math.nan, "failed"
    return Observation(scale=scale, params=numeric_params(trial.params), value=value, state=state)


def worst_value(
    trials: Sequence[FrozenTrial], rung: int, direction: optuna.study.StudyDirection
) -> float | None:
    """The worst finite COMPLETE value on ``rung`` (the study's worst where the rung has none;
    None where no trial completed): what a failed trial is told to the base sampler as.

    The worst value, not a penalty beyond it: it ranks a diverged point last without inventing a
    scale, so TPE puts it among the bad trials and a GP sees a plateau, not a cliff of made-up
    height.
    """
    pick = max if direction == optuna.study.StudyDirection.MINIMIZE else min
    for own_rung_only in (True, False):
        values = [
            float(t.values[0])
            for t in trials
            if t.state == TrialState.COMPLETE
            and t.values
            and math.isfinite(t.values[0])
            and (not own_rung_only or t.system_attrs.get(RUNG_ATTR) == rung)
        ]
        if values:
            return pick(values)
    return None


class StudyTally:
    """Per-rung counts and the finished trials of one study, kept up to date incrementally.

    A finished trial never changes, so each is read once: :meth:`update` looks only at trials
    new since the last call and at those that were still unfinished then (about as many as run
    concurrently). The cost per planned trial is then flat in the study's size.
    """

    def __init__(self, ladder: Sequence[Scale]) -> None:
        self.ladder = tuple(ladder)
        self.reset()

    def reset(self) -> None:
        """Forget every trial."""
        self.seen = 0  # trials number 0 .. seen-1 have been looked at
        self.unfinished: dict[int, FrozenTrial] = {}  # by number: RUNNING or WAITING when seen
        self.finished = [0] * len(self.ladder)  # finished trials that used up their rung's budget
        self.finished_planned = [0] * len(self.ladder)  # of those, not enqueued by the user
        self.ledger = TrialLedger()

    def update(self, trials: Sequence[FrozenTrial]) -> None:
        """Take in the study's trials (all of them, in number order, as Optuna lists them)."""
        if len(trials) < self.seen or any(t.number != i for i, t in _tail(trials, self.seen)):
            logger.debug("trial numbers are not positions in the list; recounting every trial")
            self.reset()
            numbered: Sequence[FrozenTrial] = sorted(trials, key=lambda t: t.number)
        else:
            numbered = trials
        for trial in numbered[self.seen :]:
            self.unfinished[trial.number] = trial
        self.seen = max(self.seen, len(numbered))
        for number in list(self.unfinished):
            current = numbered[number] if number < len(numbered) else None
            if current is None or not current.state.is_finished():
                if current is not None:
                    self.unfinished[number] = current
                continue
            del self.unfinished[number]
            rung = rung_of(current)
            if rung is None or not 0 <= rung < len(self.ladder):
                continue
            if current.state in COUNTED_STATES or told_fail(current):
                self.finished[rung] += 1
                self.finished_planned[rung] += not _enqueued(current)
            if not died(current):
                self.ledger.append(observation(current, self.ladder[rung]))

    def counts(self, exclude: object = None) -> RungCounts:
        """(started, running, planned) per rung, leaving out trial number ``exclude`` (the one
        planned); ``planned`` leaves out the trials the user enqueued."""
        started, planned = list(self.finished), list(self.finished_planned)
        running = [0] * len(self.ladder)
        for number, trial in self.unfinished.items():
            rung = rung_of(trial)
            if number == exclude or rung is None or not 0 <= rung < len(self.ladder):
                continue
            if trial.state == TrialState.RUNNING:
                started[rung] += 1
                running[rung] += 1
                planned[rung] += not _enqueued(trial)
        return RungCounts(started, running, planned)


def _enqueued(trial: FrozenTrial) -> bool:
    """The user enqueued the trial (its coordinates are not the planner's)."""
    return bool(trial.user_attrs.get("transfer") == "enqueued")


def _tail(trials: Sequence[FrozenTrial], seen: int) -> list[tuple[int, FrozenTrial]]:
    """The positions where a numbering mismatch would show: the last seen and the last trial."""
    return [(i, trials[i]) for i in {seen - 1, len(trials) - 1} if 0 <= i < len(trials)]

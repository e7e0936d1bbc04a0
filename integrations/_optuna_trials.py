"""How transfersearch reads an Optuna trial: its rung, whether it counts, its observation."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from transfersearch.observations import Observation, numeric_params

__all__ = [
    "COUNTED_STATES",
    "INTERRUPTED_ATTR",
    "RUNG_ATTR",
    "TOLD_ATTR",
    "died",
    "interrupted",
    "observation",
    "rung_of",
    "told_fail",
    "worst_value",
]

#: System attribute holding a trial's rung (index into the cost-ordered ladder).
RUNG_ATTR = "transfersearch:rung"
#: System attribute set when the objective (not the heartbeat) finished a trial as FAIL.
TOLD_ATTR = "transfersearch:told-fail"
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
    """True for a FAIL the objective decided (NaN = diverged, or an exception), not a heartbeat."""
    return trial.state == TrialState.FAIL and bool(trial.system_attrs.get(TOLD_ATTR, False))


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


def observation(trial: FrozenTrial, scale: Mapping[str, float]) -> Observation:
    """One finished trial as an Observation (its raw value; NaN for FAIL or a missing value)."""
    if trial.state == TrialState.COMPLETE:
        value, state = float(trial.values[0]), "complete"
    elif trial.state == TrialState.PRUNED:
        last = trial.values[0] if trial.values else math.nan
        value, state = float(last), "pruned"
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

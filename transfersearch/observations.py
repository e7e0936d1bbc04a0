"""Observations: one finished (or crashed, or pruned) proxy trial, and the checks every fit makes.

An :class:`Observation` records the scale a trial ran at, the swept hyperparameter coordinates it
used, and the metric it reached. A complete run whose metric is NaN or infinite *diverged*: it is
kept, because it tells the fit where the good region ends (a divergence cliff), and never raises.
A run that raised (an exception, an out-of-memory crash) has state ``"failed"``: it *crashed*,
which says nothing about its hyperparameters' loss, so it is counted, not fitted. Reading trials
from tables and frameworks is :mod:`transfersearch.readers`' job.
"""

from __future__ import annotations

import difflib
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal

from transfersearch.errors import TransferSearchError, shown_positions
from transfersearch.scale import Scale

__all__ = [
    "STATES",
    "STRAY_NONPOSITIVE_SHARE",
    "Observation",
    "State",
    "check_log_swept",
    "check_params_recorded",
    "check_scale_names",
    "collapse_duplicates",
    "complete_target",
    "numeric_params",
]

State = Literal["complete", "failed", "pruned"]

#: The trial states an :class:`Observation` may carry.
STATES: tuple[str, ...] = ("complete", "failed", "pruned")

logger = logging.getLogger(__name__)


@dataclass(frozen=True, init=False)
class Observation:
    """One proxy trial: where it ran, what it used, what it reached.

    Args:
        scale: the run's size, a :class:`~transfersearch.scale.Scale` or a mapping of name -> positive
            number (``{"width": 64, "dataset_size": 1e5}``).
        params: the swept coordinates the trial used, name -> finite number
            (``{"base_lr": 3e-3, "tau_epoch": 0.8}``).
        value: the metric reached (minimised by default). NaN or ±inf marks a diverged run.
        state: ``"complete"`` (default; with a NaN or ±inf value, a diverged run), ``"failed"``
            (the run raised: an exception, an out-of-memory crash; its value is ignored, it is
            :attr:`crashed`, not diverged), or ``"pruned"`` (stopped early; ignored by the fits
            because its value is not a final metric).

    Raises:
        TransferSearchError: a scale entry is not positive, a parameter is not a finite number, the
            value is not a number, or the state is unknown.
    """

    scale: Scale
    params: Mapping[str, float]
    value: float
    state: State

    def __init__(
        self,
        scale: Mapping[str, float],
        params: Mapping[str, float],
        value: float,
        state: State | str = "complete",
    ) -> None:
        if not isinstance(scale, Mapping) or not scale:
            raise TransferSearchError(
                f"`scale` must be a non-empty mapping of name -> positive number, but got "
                f"scale={scale!r}. Record where the trial ran, e.g. scale={{'width': 64, "
                "'dataset_size': 1e5}."
            )
        object.__setattr__(self, "scale", scale if isinstance(scale, Scale) else Scale(scale))
        if not isinstance(params, Mapping):
            raise TransferSearchError(
                f"`params` must be a mapping of name -> number, but got {params!r}. "
                "Write params={'lr': 3e-3}."
            )
        checked: dict[str, float] = {}
        for name, raw in params.items():
            if not isinstance(name, str) or not name:
                raise TransferSearchError(
                    f"parameter names must be non-empty strings, but got {name!r}."
                )
            if isinstance(raw, bool) or not isinstance(raw, Real) or not math.isfinite(float(raw)):
                raise TransferSearchError(
                    f"`params.{name}` must be a finite number, but got {raw!r}. Record the "
                    "coordinate the trial used; a diverged run is marked by its value, not its "
                    "parameters."
                )
            checked[name] = float(raw)
        object.__setattr__(self, "params", dict(checked))
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TransferSearchError(
                f"`value` must be a number (NaN or inf for a diverged run), but got "
                f"{value!r} ({type(value).__name__})."
            )
        object.__setattr__(self, "value", float(value))
        if not isinstance(state, str) or state not in STATES:
            raise TransferSearchError(f"`state` must be one of {STATES}, but got state={state!r}.")
        object.__setattr__(self, "state", state)

    def __hash__(self) -> int:
        return hash((self.scale, tuple(sorted(self.params.items())), self.value, self.state))

    @property
    def diverged(self) -> bool:
        """True for a complete run whose value is NaN or infinite (never for a crashed one)."""
        return self.state == "complete" and not math.isfinite(self.value)

    @property
    def crashed(self) -> bool:
        """True for a run that raised (state ``"failed"``): no verdict on its hyperparameters."""
        return self.state == "failed"

    @property
    def usable(self) -> bool:
        """True for a complete run with a finite value: one the local model can fit."""
        return self.state == "complete" and math.isfinite(self.value)


def check_scale_names(
    observations: Sequence[Observation], *, target: Mapping[str, float] | None = None
) -> None:
    """Refuse trials that disagree on which scale variables they record.

    A scale variable recorded by some trials but missing from others cannot enter the power laws
    (the laws use the variables every trial has), so without this check it would be dropped and
    its effect at the target silently ignored. A variable the ``target`` does not name is harmless
    to drop and is let through; with no target (e.g. ``validate``) every mismatch is an error.

    Args:
        observations: the trials, in source order (positions are reported from 0).
        target: the scale to predict, or None.

    Raises:
        TransferSearchError: a variable missing from some trials (and named by the target, if one
            is given); the message names the variable and the first trials without it.
    """
    items = list(observations)
    scales = set(obs.scale for obs in items)  # a ladder holds few: each checked once
    names = sorted({name for scale in scales for name in scale})
    for name in names:
        if target is not None and name not in target:
            continue
        if all(name in scale for scale in scales):
            continue
        without = [i for i, obs in enumerate(items) if name not in obs.scale]
        if without:
            raise TransferSearchError(
                f"scale variable {name!r} is missing from {len(without)} of {len(items)} trials "
                f"(observations {shown_positions(without)}, counted from 0) but recorded by the "
                f"others: the power laws would drop {name!r}"
                + (f" and ignore {name}={target[name]:g} at the target" if target else "")
                + f". Record {name!r} in every trial's scale, or leave those trials out."
            )


def complete_target(
    observations: Sequence[Observation], target: Mapping[str, float]
) -> tuple[Scale, dict[str, float]]:
    """The target, with each scale variable it leaves out that never varied over the trials.

    A variable every trial records with one value (the README's ladder has ``batch_size=64`` on
    every rung) says nothing about how the optimum moves with it, and the laws predict exactly
    there only at that value; so the target keeps the ladder's value unless it names another. A
    variable that varies and is missing stays missing (the fit then names it). The decision is
    logged, and :class:`~transfersearch.Extrapolation` records it (``target_from_ladder``).

    Args:
        observations: the trials.
        target: the scale to predict for.

    Returns:
        ``(completed target, {variable: the ladder's value} for each variable added)``.
    """
    items = list(observations)
    completed = target if isinstance(target, Scale) else Scale(target)
    if not items:
        return completed, {}
    shared = set(items[0].scale).intersection(*(obs.scale for obs in items[1:]))
    added: dict[str, float] = {}
    for name in sorted(shared - set(completed)):
        values = {obs.scale[name] for obs in items}
        if len(values) == 1:
            added[name] = values.pop()
    if added:
        logger.info(
            "the target %r leaves out %s, which never varied over the ladder: kept at the "
            "ladder's value",
            completed,
            ", ".join(f"{k}={v:g}" for k, v in added.items()),
        )
        completed = completed.replace(**added)
    return completed, added


def collapse_duplicates(observations: Sequence[Observation]) -> tuple[list[Observation], int]:
    """The trials with exact copies removed (the first of each kept, in order), and how many went.

    Two observations with the same scale, parameters, value and state are one measurement written
    twice (a table exported twice, rows repeated, a deterministic re-run with the same seed), not
    two replicates: a true replicate has its own noise, so its value differs in the last bits. The
    fits weigh every observation as an independent draw, so copies would shrink the noise they
    measure and pull the valley toward the copied points; a copy is kept once. The count is logged
    and recorded on the result (``duplicates_collapsed``).

    Returns:
        ``(observations without copies, number of copies removed)``.
    """
    # a copy has its original's value, and real sweeps rarely repeat one: only the trials
    # whose value recurs need the whole key (NaN != NaN, yet a copy: keyed as "nan")
    values = ["nan" if math.isnan(obs.value) else obs.value for obs in observations]
    counts = Counter(values)
    seen: set[tuple[Any, ...]] = set()
    kept: list[Observation] = []
    for obs, value in zip(observations, values):
        if counts[value] == 1:
            kept.append(obs)
            continue
        key = (obs.scale, frozenset(obs.params.items()), value, obs.state)
        if key not in seen:
            seen.add(key)
            kept.append(obs)
    removed = len(observations) - len(kept)
    if removed:
        logger.info(
            "%d of %d observations are exact copies of another (same scale, parameters and "
            "value): each measurement is counted once",
            removed,
            len(observations),
        )
    return kept, removed


#: A parameter whose values are positive except at most this share of the trials is taken for a
#: log-swept one with stray values (a sign error, a 0 placeholder). A parameter swept linearly
#: across zero has its share below zero in proportion to its range there: under 10% only when the
#: range reaches less than a ninth of its width below zero, which the coordinates this library
#: sweeps (learning rates, weight decays, timescales, betas) never do; such a parameter is
#: declared linear with ``log_params=``.
STRAY_NONPOSITIVE_SHARE = 0.1


def check_log_swept(
    observations: Sequence[Observation], params: Sequence[str], *, space: Any = None
) -> None:
    """Refuse non-positive values of a parameter swept in log space, naming the trials.

    Log-swept means: the ``space`` stored with the sweep declares it ``Float(..., log=True)`` (or
    ``Int(..., log=True)``), or, without such a declaration, its values are positive in all but
    at most :data:`STRAY_NONPOSITIVE_SHARE` of the trials. Without this check a few stray values
    would silently switch the parameter to linear fitting (and an interval reaching below zero).

    Args:
        observations: the trials, in source order (positions are reported from 0).
        params: the parameters to be fitted.
        space: the :class:`~transfersearch.TransferSpace` stored with the sweep, or None.

    Raises:
        TransferSearchError: a log-swept parameter has a value <= 0; the message names the trials
            and how to fit a truly linear parameter linearly.
    """
    distributions = getattr(space, "distributions", None) or {}
    for name in params:
        if all(obs.params.get(name, 1.0) > 0.0 for obs in observations):
            continue  # the common case, checked in one pass
        values = [(i, obs.params[name]) for i, obs in enumerate(observations) if name in obs.params]
        declared = distributions.get(name)
        declared_log = getattr(declared, "log", None)
        if declared_log is False:
            continue  # the space says linear
        # without a declaration a 0 is an ordinary value (a weight decay of 0 is "off": the fit
        # puts the parameter on a linear axis and says so); a negative one is a stray
        bad = [i for i, value in values if (value <= 0.0 if declared_log else value < 0.0)]
        if not bad or len(bad) == len(values):
            continue
        if declared_log is not True and len(bad) > STRAY_NONPOSITIVE_SHARE * len(values):
            continue  # a linear parameter that crosses zero
        example = next(value for i, value in values if i == bad[0])
        why = (
            "the stored space sweeps it on a log scale"
            if declared_log
            else f"{len(values) - len(bad)} of {len(values)} trials have it positive"
        )
        sign = "<= 0" if declared_log else "< 0"
        raise TransferSearchError(
            f"`{name}` is swept on a log scale ({why}), but {len(bad)} trials have {name} {sign} "
            f"(trials {shown_positions(bad)}, counted from 0 in the source's order; e.g. "
            f"{name}={example!r}): a learning rate, weight decay or timescale cannot be {sign}, and "
            "fitting it linearly instead would move the prediction. Fix or drop those trials; if "
            f"{name!r} is truly linear, list the log parameters without it (log_params=[...], "
            "on the command line --log-params)."
        )


def check_params_recorded(observations: Sequence[Observation], params: Sequence[str]) -> None:
    """Refuse a parameter no trial records, suggesting the close match of a misspelt name.

    Raises:
        TransferSearchError: a name in ``params`` is in no trial's parameters.
    """
    recorded = list(dict.fromkeys(name for obs in observations for name in obs.params))
    for name in params:
        if isinstance(name, str) and name not in recorded:
            close = difflib.get_close_matches(name, recorded, n=1)
            raise TransferSearchError(
                f"parameter {name!r} is recorded by no trial (they record {recorded})."
                + (f" Did you mean {close[0]!r}?" if close else "")
                + " Fix the name in params (on the command line --params)."
            )


def numeric_params(params: Mapping[str, Any]) -> dict[str, float]:
    """The coordinates an Observation can hold: the finite real numbers of ``params`` (booleans,
    strings and other Choice values are dropped)."""
    return {
        name: float(value)
        for name, value in params.items()
        if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    }

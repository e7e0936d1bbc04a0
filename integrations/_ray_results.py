"""Reading trial outcomes for the Ray Tune adapter: one classification for live and stored trials.

Both the searcher (live trials, to feed the law) and :func:`observations_from_result_grid` (a
finished or restored experiment) turn a trial's last result into an :class:`Observation` with the
same rule, :func:`classify`:

* the trial raised (Ray marks it errored) → ``state="failed"``, value NaN (a diverged run);
* its metric is NaN or ±inf → ``state="complete"`` with that value (diverged: it bounds the region);
* it stopped before the full length of its rung → ``state="pruned"`` (ignored by the fits). The full
  length is ``max_t`` of ``time_attr`` when given, else the largest ``time_attr`` any trial of the
  same rung reached (ASHA and stoppers end trials that reach ``max_t`` with the same STOP decision as
  trials they prune, so the length reached is the only signal both live and stored trials carry);
* otherwise ``state="complete"`` with the metric.

This module imports no Ray, so the rule is testable on plain records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation
from transfersearch.scale import Scale

__all__ = ["TrialOutcome", "classify", "numeric_params"]


@dataclass(frozen=True)
class TrialOutcome:
    """What is known about one ended trial before classification.

    ``value`` is the raw metric (None when never reported); ``progress`` the last ``time_attr``
    value (None when unknown).
    """

    scale: Mapping[str, float]
    params: Mapping[str, Any]
    value: float | None
    errored: bool
    progress: float | None


def numeric_params(params: Mapping[str, Any]) -> dict[str, float]:
    """The coordinates an Observation can hold: finite real numbers (Choice strings are dropped)."""
    out: dict[str, float] = {}
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, Real):
            continue
        if math.isfinite(float(value)):
            out[name] = float(value)
    return out


def classify(outcomes: Iterable[TrialOutcome], *, max_t: float | None = None) -> list[Observation]:
    """Turn ended trials into observations (see the module docstring for the rule).

    Args:
        outcomes: the ended trials.
        max_t: the full length of a trial in ``time_attr`` units, or None to use, per rung, the
            longest any of its trials ran.

    Returns:
        One Observation per outcome, in order, with the raw metric (never negated: a maximised
        metric is fitted with ``direction="maximize"``).
    """
    items = list(outcomes)
    if max_t is not None and (not isinstance(max_t, Real) or not max_t > 0):
        raise TransferSearchError(
            f"`max_t` must be a positive number (the full trial length), but got {max_t=!r}."
        )
    longest: dict[Scale, float] = {}
    for item in items:
        if item.progress is not None:
            key = Scale(item.scale)
            longest[key] = max(longest.get(key, item.progress), item.progress)
    result: list[Observation] = []
    for item in items:
        scale = Scale(item.scale)
        params = numeric_params(item.params)
        if item.errored or item.value is None:
            result.append(Observation(scale, params, math.nan, "failed"))
            continue
        value = float(item.value)
        if not math.isfinite(value):
            result.append(Observation(scale, params, value, "complete"))
            continue
        full = max_t if max_t is not None else longest.get(scale)
        if item.progress is not None and full is not None and item.progress < full:
            result.append(Observation(scale, params, value, "pruned"))
        else:
            result.append(Observation(scale, params, value, "complete"))
    return result

"""Reading trial outcomes for the Ray Tune adapter: one classification for live and stored trials.

Both the searcher (live trials, kept as :class:`TrialRecord` in its :class:`SearcherTally`, to feed
the law) and :func:`observations_from_result_grid` (a finished or restored experiment) turn a trial's
last result into an :class:`Observation` with the same rule, :func:`observations_from_outcomes`:

* its last reported metric is NaN or ±inf → ``state="complete"`` with that value (diverged: it
  bounds the region), also when the trial then raised (a training loop that stops on a NaN loss);
* the trial raised (Ray marks it errored) otherwise, or never reported the metric →
  ``state="failed"``, value NaN: it *crashed* (an exception, an out-of-memory kill), which is no
  verdict on its hyperparameters, so it is counted apart (``Observation.crashed``), not fitted;
* it stopped before the full length of its rung → ``state="pruned"`` (ignored by the fits). The full
  length is ``max_t`` of ``time_attr`` when given, else the largest ``time_attr`` any trial of the
  same rung reached (ASHA and stoppers end trials that reach ``max_t`` with the same STOP decision as
  trials they prune, so the length reached is the only signal both live and stored trials carry);
* otherwise ``state="complete"`` with the metric.

An experiment *directory* is read by :func:`read_experiment` and its stored space by
:func:`stored_space_json` from JSON alone (never unpickling, so a crafted directory cannot run code;
Ray's own ``ExperimentAnalysis`` would). This module imports no Ray, so the rule is testable on plain
records.
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from transfersearch.errors import TransferSearchError
from transfersearch.integrations._per_rung import RungCounts
from transfersearch.ledger import TrialLedger
from transfersearch.observations import Observation, numeric_params
from transfersearch.scale import Scale

__all__ = [
    "SearcherTally",
    "StoredTrial",
    "TrialOutcome",
    "TrialRecord",
    "observations_from_outcomes",
    "read_experiment",
    "stored_space_json",
]

logger = logging.getLogger(__name__)

# The file names Ray Tune writes (ray.tune.execution.tune_controller / ray.air.constants).
_STATE_GLOB = "experiment_state-*.json"
_PARAMS_FILE = "params.json"
_RESULT_FILE = "result.json"
# The file Tune writes TransferSearch.save()'s JSON state to (a ".pkl" by Tune's naming only).
_SEARCHER_STATE_GLOB = "searcher-state-*.pkl"


@dataclass(frozen=True)
class StoredTrial:
    """One Tune trial as the readers need it: its config, last result and whether it raised."""

    trial_id: str
    path: str | None
    config: Mapping[str, Any]
    last_result: Mapping[str, Any]
    errored: bool


def read_experiment(path: str) -> list[StoredTrial]:
    """Read the trials of a Tune experiment directory without unpickling anything.

    Ray's ``ExperimentAnalysis(path)`` unpickles blobs embedded in ``experiment_state-*.json``, so a
    crafted directory would run code. Here the newest state file is parsed as plain JSON (its
    pickled blobs stay opaque hex strings) for each trial's id, status and folder; the config comes
    from the trial's ``params.json`` and the last result from the last line of its ``result.json``
    (both plain JSON written by Tune's default JSON logger). Trials that never started (no
    ``params.json``) are skipped: they ran nothing.

    Args:
        path: the experiment directory (``storage_path/name``).

    Returns:
        The started trials, in the state file's order.

    Raises:
        TransferSearchError: no state file (not an experiment directory), or a state file or trial
            file that is not the JSON Tune writes.
    """
    states = sorted(glob.glob(os.path.join(glob.escape(path), _STATE_GLOB)))
    if not states:
        raise TransferSearchError(
            f"{path!r} is not a Ray Tune experiment directory: it has no {_STATE_GLOB}. Pass the "
            "folder storage_path/name of a run made with search_alg=TransferSearch(...)."
        )
    newest = states[-1]  # the names end in a sortable timestamp; Ray reads the newest too
    state = _load_json(newest)
    trials: list[StoredTrial] = []
    try:
        # Ray-private layout: "trial_data" is a list of [trial JSON, run-metadata JSON] strings.
        entries = [json.loads(entry[0]) for entry in state["trial_data"]]
        fields = [(str(e["trial_id"]), str(e["status"]), e["relative_logdir"]) for e in entries]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise TransferSearchError(
            f"{newest!r} is not the experiment state this Ray version writes ({exc!r}). Read the "
            "experiment with tune.Tuner.restore(path, trainable).get_results() instead (that "
            "unpickles: only for experiments you trust)."
        ) from None
    for trial_id, status, folder in fields:
        if (
            not isinstance(folder, str)
            or os.path.basename(folder) != folder
            or folder in ("", "..", ".")
        ):
            logger.info(
                "trial %s has no folder of its own (%r); it never started", trial_id, folder
            )
            continue
        trial_dir = os.path.join(path, folder)
        params_file = os.path.join(trial_dir, _PARAMS_FILE)
        if not os.path.isfile(params_file):
            logger.info("trial %s (%s) has no %s: it never started", trial_id, status, _PARAMS_FILE)
            continue
        config = _load_json(params_file)
        trials.append(
            StoredTrial(
                trial_id=trial_id,
                path=trial_dir,
                config=config if isinstance(config, Mapping) else {},
                last_result=_last_result(os.path.join(trial_dir, _RESULT_FILE)),
                errored=status == "ERROR",
            )
        )
    return trials


def stored_space_json(path: str) -> Any | None:
    """The space (as JSON data) in the newest searcher state of a Tune experiment directory,
    or None where no state holds one.

    Tune saves :meth:`TransferSearch.save`'s output as ``searcher-state-*.pkl``; it is JSON and
    read as such (never unpickled). A state file that is not JSON (another searcher's pickle)
    is skipped.
    """
    pattern = os.path.join(glob.escape(path), _SEARCHER_STATE_GLOB)
    for state_file in sorted(glob.glob(pattern), key=os.path.getmtime, reverse=True):
        try:
            with open(state_file, encoding="utf-8") as handle:
                state = json.load(handle)
        except (UnicodeDecodeError, json.JSONDecodeError, OSError) as exc:
            logger.info("%s is not a TransferSearch JSON state (%s); skipped", state_file, exc)
            continue
        if isinstance(state, Mapping) and state.get("space") is not None:
            return state["space"]
    return None


def _load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TransferSearchError(f"{path!r} is not the JSON Ray Tune writes: {exc}.") from None


def _last_result(path: str) -> dict[str, Any]:
    """The last line of a trial's ``result.json`` (one JSON object per reported result)."""
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line for line in handle.read().splitlines() if line.strip()]
    except UnicodeDecodeError as exc:
        raise TransferSearchError(f"{path!r} is not the JSON Ray Tune writes: {exc}.") from None
    for position in range(len(lines) - 1, -1, -1):
        try:
            last = json.loads(lines[position])
        except json.JSONDecodeError as exc:  # a line cut short by a killed driver
            logger.info("skipping unreadable line %d of %s (%s)", position + 1, path, exc)
            continue
        return last if isinstance(last, dict) else {}
    return {}


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


def observations_from_outcomes(
    outcomes: Iterable[TrialOutcome], *, max_t: float | None = None
) -> list[Observation]:
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
        if item.value is not None and not math.isfinite(float(item.value)):
            result.append(Observation(scale, params, float(item.value), "complete"))  # diverged
            continue
        if item.errored or item.value is None:
            result.append(Observation(scale, params, math.nan, "failed"))  # crashed
            continue
        value = float(item.value)
        full = max_t if max_t is not None else longest.get(scale)
        if item.progress is not None and full is not None and item.progress < full:
            result.append(Observation(scale, params, value, "pruned"))
        else:
            result.append(Observation(scale, params, value, "complete"))
    return result


@dataclass
class TrialRecord:
    """What the searcher keeps of one trial it suggested, updated as its results arrive.

    ``status`` is ``"live"`` (suggested or restarted) or ``"ended"``; ``value`` the raw metric and
    ``progress`` the last ``time_attr`` (None until reported); ``by_base``: the base searcher
    chose the coordinates (it is told the outcome).
    """

    rung: int
    params: dict[str, Any]
    source: str
    status: str = "live"
    value: float | None = None
    progress: float | None = None
    errored: bool = False
    by_base: bool = False


class SearcherTally:
    """The trials a searcher suggested, by id: the counts per rung and the ended trials.

    Ended records stay: they are the observations, and a restarted trial reuses its id. The
    ledger is rebuilt only after a trial ended (the classification of every trial depends on the
    longest trial of its rung).
    """

    def __init__(self, ladder: Sequence[Scale], max_t: float | None = None) -> None:
        self.ladder = tuple(ladder)
        self.records: dict[str, TrialRecord] = {}
        self._max_t = max_t
        self._ledger: TrialLedger | None = None

    @property
    def max_t(self) -> float | None:
        """The full trial length (None: per rung, the longest any of its trials ran)."""
        return self._max_t

    @max_t.setter
    def max_t(self, value: float | None) -> None:
        self._max_t = value
        self._ledger = None

    def ended(self) -> None:
        """Note that a trial ended (the ledger is rebuilt when next read)."""
        self._ledger = None

    def counts(self, exclude: object = None) -> RungCounts:
        """(suggested, live) trials per rung, leaving out the trial id ``exclude``."""
        started = [0] * len(self.ladder)
        live = [0] * len(self.ladder)
        for trial_id, record in self.records.items():
            if trial_id == exclude:
                continue
            started[record.rung] += 1
            live[record.rung] += record.status == "live"
        return RungCounts(started, live)

    @property
    def ledger(self) -> TrialLedger:
        """The ended trials as observations."""
        if self._ledger is None:
            self._ledger = TrialLedger(self.observations())
        return self._ledger

    def observations(self, *, ended_only: bool = True) -> list[Observation]:
        """The trials as observations; live ones too (as pruned) unless ``ended_only``."""
        outcomes = [
            TrialOutcome(
                scale=self.ladder[record.rung],
                params=record.params,
                value=record.value,
                errored=record.errored,
                progress=record.progress,
            )
            for record in self.records.values()
            if not ended_only or record.status == "ended"
        ]
        return observations_from_outcomes(outcomes, max_t=self._max_t)

"""Observations: one finished (or failed, or pruned) proxy trial, and readers for trial tables.

An :class:`Observation` records the scale a trial ran at, the swept hyperparameter coordinates it
used, and the metric it reached. A NaN or infinite metric marks a *diverged* run: it is kept, because
it tells the fit where the good region ends (a divergence cliff), and never raises.

Sources accepted by :func:`as_observations` (and so by ``extrapolate`` and ``validate``):

- an iterable of :class:`Observation`;
- a pandas ``DataFrame`` (pandas is imported only when one is passed), one row per trial, Optuna's
  ``study.trials_dataframe()`` as it is (:func:`observations_from_records` has the details):

  - scale columns: those named in ``scale_columns=``, else every ``scale.<name>`` (or Optuna's
    ``user_attrs_scale.<name>``) column;
  - parameter columns: for each requested parameter ``p``, ``params.<p>``, ``params_<p>`` or ``p``;
  - the metric: column ``value_column`` (default ``"value"``);
  - optional ``state`` column, ``complete`` / ``failed`` / ``pruned`` or Optuna's states in any
    case (default complete);

- any other object whose framework has a registered reader: an adapter registers one with
  :func:`register_reader`, or names it in the ``transfersearch.readers`` entry-point group under the
  top-level module of the source's type (the package ships ``optuna`` for a ``Study`` and ``ray``
  for a ``ResultGrid`` or ``ExperimentAnalysis``), and under ``directory`` for an existing
  directory (a Ray Tune experiment). The core never imports an adapter by name.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal

from transfersearch.errors import TransferSearchError
from transfersearch.errors import TransferSearchWarning as TransferSearchWarning  # fitting uses it
from transfersearch.scale import Scale

__all__ = [
    "READERS_GROUP",
    "STATES",
    "Observation",
    "Reader",
    "as_observations",
    "check_log_swept",
    "check_params_recorded",
    "check_scale_names",
    "collapse_duplicates",
    "complete_target",
    "numeric_params",
    "observations_from_frame",
    "observations_from_records",
    "register_reader",
]

State = Literal["complete", "failed", "pruned"]

#: The trial states an :class:`Observation` may carry.
STATES: tuple[str, ...] = ("complete", "failed", "pruned")

#: The entry-point group where an installed adapter names its reader of a framework's objects.
READERS_GROUP = "transfersearch.readers"
#: The reader key of an existing directory (a Ray Tune experiment, read from its JSON files).
DIRECTORY = "directory"

#: A function reading one source into observations.
Reader = Callable[[Any], Iterable["Observation"]]

_registered: dict[str, Reader] = {}

logger = logging.getLogger(__name__)

#: How many offending rows or trials an error message lists before "and N more": enough to find
#: the pattern (a whole rung, every n-th row), short enough to stay one readable line.
SHOWN_POSITIONS = 5


@dataclass(frozen=True, init=False)
class Observation:
    """One proxy trial: where it ran, what it used, what it reached.

    Args:
        scale: the run's size, a :class:`~transfersearch.scale.Scale` or a mapping of name -> positive
            number (``{"width": 64, "dataset_size": 1e5}``).
        params: the swept coordinates the trial used, name -> finite number
            (``{"base_lr": 3e-3, "tau_epoch": 0.8}``).
        value: the metric reached (minimised by default). NaN or ±inf marks a diverged run.
        state: ``"complete"`` (default), ``"failed"`` (the run crashed or diverged; its value is
            ignored and it counts as diverged), or ``"pruned"`` (stopped early; ignored by the fits
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
        """True for a failed run or a complete run whose value is NaN or infinite."""
        return self.state == "failed" or (
            self.state == "complete" and not math.isfinite(self.value)
        )

    @property
    def usable(self) -> bool:
        """True for a complete run with a finite value: one the local model can fit."""
        return self.state == "complete" and math.isfinite(self.value)


def as_observations(
    source: Any,
    *,
    params: Sequence[str] | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
) -> list[Observation]:
    """Read trials from any supported source into a list of :class:`Observation`.

    Args:
        source: an iterable of Observation, a pandas DataFrame (see the module docstring for the
            column convention), an Optuna Study, a Ray Tune ResultGrid, or the path of a Ray Tune
            experiment directory.
        params: the parameters wanted; for a DataFrame they choose the parameter columns.
        scale_columns: DataFrame columns holding scale variables (default: ``scale.*`` columns).
        value_column: DataFrame column holding the metric.

    Returns:
        The observations, in source order.

    Raises:
        TransferSearchError: the source is of an unsupported type (or a path that is not a
            directory), a DataFrame lacks a needed column, or an element is not an Observation.
    """
    root = (type(source).__module__ or "").split(".", 1)[0]
    if root == "pandas" and type(source).__name__ == "DataFrame":
        return observations_from_frame(
            source, params=params, scale_columns=scale_columns, value_column=value_column
        )
    if root != "builtins" and _has_reader(root):
        return _read(root, source)
    if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        return _read(DIRECTORY, source)
    if isinstance(source, (str, bytes, os.PathLike, Mapping)) or not isinstance(source, Iterable):
        got = type(source).__name__
        if isinstance(source, (str, os.PathLike)):
            got = f"{got} {os.fspath(source)!r}, which is not a directory"
        raise TransferSearchError(
            f"observations must be a list of Observation, a pandas DataFrame, an Optuna Study, a "
            f"Ray Tune ResultGrid or the directory of a Ray Tune experiment (storage_path/name), "
            f"but got {got}. Wrap trials as Observation(scale=..., params=..., value=...)."
        )
    result: list[Observation] = []
    for index, item in enumerate(source):
        if not isinstance(item, Observation):
            raise TransferSearchError(
                f"observations[{index}] must be an Observation, but got {type(item).__name__} "
                f"({item!r:.80}). Build it with Observation(scale=..., params=..., value=...)."
            )
        result.append(item)
    return result


def observations_from_frame(
    frame: Any,
    *,
    params: Sequence[str] | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    state_column: str = "state",
) -> list[Observation]:
    """Read a pandas DataFrame, one row per trial, into observations: its columns and records go
    to :func:`observations_from_records` (see there for the column convention and errors).

    Optuna's ``study.trials_dataframe()`` is read as it is, also with ``multi_index=True`` (the
    column ``("params", "lr")`` is read as ``params_lr``).
    """
    columns = [_flat_column(c) for c in frame.columns]
    records = [dict(zip(columns, row, strict=True)) for row in frame.itertuples(index=False)]
    return observations_from_records(
        columns,
        records,
        params=params,
        scale_columns=scale_columns,
        value_column=value_column,
        state_column=state_column,
    )


def _flat_column(column: Any) -> str:
    """A DataFrame column name as text: a MultiIndex tuple joined as ``trials_dataframe`` joins it."""
    if isinstance(column, tuple):
        return "_".join(str(part) for part in column if str(part))
    return str(column)


@dataclass(frozen=True)
class _Spelling:
    """How an error names the reader's options: Python keywords or command-line flags."""

    scale_columns: str
    params: str
    value_column: str


_PYTHON = _Spelling(
    scale_columns="scale_columns=['width', 'dataset_size']",
    params="params=['base_lr', 'tau_epoch']",
    value_column="value_column='<your metric column>'",
)
_CLI = _Spelling(
    scale_columns="--scale-columns width,dataset_size",
    params="--params base_lr,tau_epoch",
    value_column="--value-column <your metric column>",
)


def observations_from_records(
    columns: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    *,
    params: Sequence[str] | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    state_column: str = "state",
    spelling: Literal["python", "cli"] = "python",
) -> list[Observation]:
    """Read a table, one record (column -> cell) per trial, into observations.

    Column convention (Optuna's ``trials_dataframe()`` and its CSV are read as they are):

    - scale variables: the ``scale_columns`` (named as the columns) or, by default, every
      ``scale.<name>`` column, else every ``user_attrs_scale.<name>`` column (Optuna's name for
      the ``scale.<name>`` user attributes :class:`TransferSampler` records);
    - parameter ``p``: the column ``params.<p>``, else ``params_<p>`` (Optuna's), else ``p``;
      without ``params``, every ``params.*`` / ``params_*`` column whose cells are numbers (a
      column of text, a categorical such as ``params.optimizer``, is left out and logged);
    - the metric: ``value_column``;
    - the optional ``state_column``, in any case: ``complete``, ``failed`` (Optuna's ``FAIL``),
      ``pruned``; an empty cell is complete; ``RUNNING`` and ``WAITING`` rows (unfinished) are
      skipped, and so are the FAIL rows of trials the storage's heartbeat failed because their
      worker died (``TransferSampler`` retries them; the retry stands for them).

    Args:
        columns: the table's column names.
        records: one mapping column -> cell per row (e.g. ``csv.DictReader`` rows with numbers
            parsed).
        params: the parameters to read.
        scale_columns: plain column names that hold scale variables.
        value_column: the metric column.
        state_column: the optional state column.
        spelling: how error messages name the options: ``"python"`` (``scale_columns=``) or
            ``"cli"`` (``--scale-columns``).

    Returns:
        One Observation per finished row, in table order.

    Raises:
        TransferSearchError: a needed column is missing (with the close match for a misspelt
            parameter), no scale column can be found, a scale cell is empty (every trial needs its
            whole scale), a state is unknown, or a parameter column mixes numbers and text. The
            message names the column and the rows, counted from 0 after the header.
    """
    hint = _CLI if spelling == "cli" else _PYTHON
    columns = [str(c) for c in columns]
    scale_map = _scale_map(columns, scale_columns, hint)
    param_map = _param_map(columns, records, params, hint)
    if value_column not in columns:
        raise TransferSearchError(
            f"the metric column {value_column!r} is not a column of the table (columns: "
            f"{columns}). Pass {hint.value_column}."
        )
    has_state = state_column in columns
    states = [
        _state(row.get(state_column), i) if has_state else "complete"
        for i, row in enumerate(records)
    ]
    kept = [i for i, state in enumerate(states) if state in STATES and not _died(records[i], state)]
    if len(kept) < len(records):
        logger.info(
            "skipped %d of %d rows: unfinished (RUNNING / WAITING) or failed by the heartbeat "
            "because the worker died (rows %s)",
            len(records) - len(kept),
            len(records),
            _positions([i for i in range(len(records)) if i not in set(kept)]),
        )
    for column in scale_map.values():
        empty = [i for i in kept if _is_missing(records[i][column])]
        if empty:
            raise TransferSearchError(
                f"scale column {column!r} is empty in {len(empty)} of {len(records)} rows "
                f"({_positions(empty)}; rows counted from 0 after the header): every trial needs "
                f"its whole scale, or the fit would drop {column!r} and ignore it at the target. "
                "Fill in those cells or drop those rows."
            )
    result: list[Observation] = []
    for i in kept:
        row = records[i]
        raw_value = row[value_column]
        value = float("nan") if raw_value is None else _plain(raw_value)
        result.append(
            Observation(
                scale={k: _plain(row[c]) for k, c in scale_map.items()},
                params={k: _plain(row[c]) for k, c in param_map.items()},
                value=value,
                state=states[i],
            )
        )
    return result


#: Prefixes of scale columns, in order of preference: ours, then Optuna's flattening of the
#: ``scale.<name>`` user attributes TransferSampler records.
SCALE_PREFIXES: tuple[str, ...] = ("scale.", "user_attrs_scale.")
#: Prefixes of parameter columns: ours, then Optuna's ``trials_dataframe()``.
PARAM_PREFIXES: tuple[str, ...] = ("params.", "params_")
#: Optuna's trial states (any case) -> an Observation's state; None: unfinished, the row is skipped.
_STATE_NAMES: dict[str, str | None] = {
    "complete": "complete",
    "failed": "failed",
    "fail": "failed",
    "pruned": "pruned",
    "running": None,
    "waiting": None,
}
#: The ``trials_dataframe()`` columns of the system attributes TransferSampler's trials carry
#: (``transfersearch.integrations._optuna_trials.RUNG_ATTR`` / ``TOLD_ATTR``): a FAIL with a rung
#: but not told by the objective was failed by the heartbeat (its worker died).
_RUNG_COLUMN = "system_attrs_transfersearch:rung"
_TOLD_COLUMN = "system_attrs_transfersearch:told-fail"


def _scale_map(
    columns: Sequence[str], scale_columns: Sequence[str] | None, hint: _Spelling
) -> dict[str, str]:
    """Scale variable -> its column."""
    if scale_columns is not None:
        if isinstance(scale_columns, str):
            raise TransferSearchError(
                f"scale_columns must be a list of column names, but got the string "
                f"{scale_columns!r}. Pass {hint.scale_columns}."
            )
        missing = [c for c in scale_columns if c not in columns]
        if missing:
            raise TransferSearchError(
                f"scale columns {missing} are not columns of the table (it has {columns}). "
                f"Name the columns that hold scale variables: {hint.scale_columns}."
            )
        return {c: c for c in scale_columns}
    for prefix in SCALE_PREFIXES:
        found = {c[len(prefix) :]: c for c in columns if c.startswith(prefix) and c != prefix}
        if found:
            return found
    raise TransferSearchError(
        f"the table has no scale columns (columns: {columns}). Name them 'scale.<name>' (Optuna's "
        f"'user_attrs_scale.<name>' are read too) or name the plain ones: {hint.scale_columns}."
    )


def _param_map(
    columns: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    params: Sequence[str] | None,
    hint: _Spelling,
) -> dict[str, str]:
    """Parameter -> its column; without ``params`` the numeric ``params.*`` / ``params_*``."""
    prefixed = {
        c[len(prefix) :]: c
        for prefix in reversed(PARAM_PREFIXES)  # "params." wins over "params_" for one name
        for c in columns
        if c.startswith(prefix) and c != prefix
    }
    if params is None:
        if not prefixed:
            raise TransferSearchError(
                f"the table has no parameter columns (columns: {columns}): name them "
                "'params.<name>' (Optuna's 'params_<name>' are read too) or name the plain ones: "
                f"{hint.params}."
            )
        chosen: dict[str, str] = {}
        for name, column in prefixed.items():
            text = [i for i, row in enumerate(records) if _is_text(row[column])]
            filled = [i for i, row in enumerate(records) if not _is_missing(row[column])]
            if not text:
                chosen[name] = column
            elif len(text) == len(filled):
                logger.info(
                    "parameter column %r holds text (%r in row %d): a categorical, left out of "
                    "the fit (only numeric coordinates are fitted)",
                    column,
                    records[text[0]][column],
                    text[0],
                )
            else:
                raise TransferSearchError(
                    f"parameter column {column!r} mixes numbers and text: {len(text)} of "
                    f"{len(filled)} filled cells are not numbers (rows {_positions(text)}, "
                    f"e.g. {records[text[0]][column]!r}; rows counted from 0 after the header). "
                    "Fix those cells, or leave the column out by naming the others: "
                    f"{hint.params}."
                )
        return chosen
    if isinstance(params, str):
        raise TransferSearchError(
            f"`params` must be a list of names, but got the string {params!r}. Pass {hint.params}."
        )
    param_map: dict[str, str] = {}
    for name in params:
        candidates = [*(f"{prefix}{name}" for prefix in PARAM_PREFIXES), name]
        found = next((c for c in candidates if c in columns), None)
        if found is None:
            close = difflib.get_close_matches(str(name), list(prefixed) + list(columns), n=1)
            raise TransferSearchError(
                f"parameter {name!r} has no column in the table (looked for "
                f"{', '.join(repr(c) for c in candidates)}; columns: {columns})."
                + (f" Did you mean {close[0]!r}?" if close else "")
                + f" Add the column or fix the name: {hint.params}."
            )
        param_map[name] = found
    return param_map


def _state(cell: Any, row: int) -> str:
    """A state cell as an Observation state, ``"unfinished"`` for RUNNING / WAITING."""
    if _is_missing(cell) or (isinstance(cell, str) and not cell.strip()):
        return "complete"
    name = str(cell).strip().lower()
    if name.startswith("trialstate."):  # str(optuna.trial.TrialState.COMPLETE)
        name = name[len("trialstate.") :]
    if name not in _STATE_NAMES:
        raise TransferSearchError(
            f"row {row} has state {cell!r}; states are {STATES} (Optuna's COMPLETE, FAIL, "
            "PRUNED, RUNNING, WAITING in any case are read too). Fix the cell."
        )
    return _STATE_NAMES[name] or "unfinished"


def _died(row: Mapping[str, Any], state: str) -> bool:
    """A FAIL that TransferSampler's heartbeat, not the objective, decided (see ``_RUNG_COLUMN``)."""
    if state != "failed" or _is_missing(row.get(_RUNG_COLUMN)):
        return False
    told = row.get(_TOLD_COLUMN)
    return not (told is True or (isinstance(told, str) and told.strip().lower() == "true"))


def _is_text(value: Any) -> bool:
    """A cell that is not a number: text, or a boolean (Optuna's categorical True / False)."""
    return isinstance(value, (str, bool)) or type(value).__name__ == "bool_"


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
    names = sorted({name for obs in items for name in obs.scale})
    for name in names:
        if target is not None and name not in target:
            continue
        without = [i for i, obs in enumerate(items) if name not in obs.scale]
        if without:
            raise TransferSearchError(
                f"scale variable {name!r} is missing from {len(without)} of {len(items)} trials "
                f"(observations {_positions(without)}, counted from 0) but recorded by the "
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
    seen: set[tuple[Any, ...]] = set()
    kept: list[Observation] = []
    for obs in observations:
        value = "nan" if math.isnan(obs.value) else obs.value  # NaN != NaN, yet a copy
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
        bad = [i for i, value in values if value <= 0.0]
        if len(bad) == len(values):
            continue
        declared = distributions.get(name)
        declared_log = getattr(declared, "log", None)
        if declared_log is False:
            continue  # the space says linear
        if declared_log is not True and len(bad) > STRAY_NONPOSITIVE_SHARE * len(values):
            continue  # a linear parameter that crosses zero
        example = next(value for i, value in values if i == bad[0])
        why = (
            "the stored space sweeps it on a log scale"
            if declared_log
            else f"{len(values) - len(bad)} of {len(values)} trials have it positive"
        )
        raise TransferSearchError(
            f"`{name}` is swept on a log scale ({why}), but {len(bad)} trials have {name} <= 0 "
            f"(trials {_positions(bad)}, counted from 0 in the source's order; e.g. "
            f"{name}={example!r}): a learning rate, weight decay or timescale cannot be <= 0, and "
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


def _is_missing(value: Any) -> bool:
    """An empty cell: None, or a float NaN (how CSV readers and pandas write a blank)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _positions(positions: Sequence[int]) -> str:
    """``"3, 4, 7"`` or ``"3, 4, 7, 8, 9 and 12 more"``: the first few offending positions."""
    shown = ", ".join(str(p) for p in positions[:SHOWN_POSITIONS])
    rest = len(positions) - SHOWN_POSITIONS
    return f"{shown} and {rest} more" if rest > 0 else shown


def _plain(value: Any) -> Any:
    """Turn numpy scalars into Python numbers so the Real checks apply uniformly."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (int, float)):
        return item()
    return value


def numeric_params(params: Mapping[str, Any]) -> dict[str, float]:
    """The coordinates an Observation can hold: the finite real numbers of ``params`` (booleans,
    strings and other Choice values are dropped)."""
    return {
        name: float(value)
        for name, value in params.items()
        if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    }


def register_reader(kind: str, reader: Reader) -> None:
    """Make :func:`as_observations` read sources of ``kind`` with ``reader``.

    Args:
        kind: the top-level module of the source's type (``"optuna"`` for an
            ``optuna.study.Study``), or ``"directory"`` for a path naming an existing directory.
        reader: source -> observations. It replaces a reader installed under the same kind.
    """
    if not isinstance(kind, str) or not kind:
        raise TransferSearchError(f"`kind` must be a module name, but got {kind!r}.")
    _registered[kind] = reader


@functools.cache
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=READERS_GROUP)}


def _has_reader(kind: str) -> bool:
    return kind in _registered or kind in _entry_points()


def _read(kind: str, source: Any) -> list[Observation]:
    """Read ``source`` with the reader registered for ``kind`` (or named by an entry point)."""
    reader = _registered.get(kind)
    if reader is None:
        entry = _entry_points()[kind]
        try:
            reader = entry.load()
        except ImportError as exc:
            extra = entry.module.rsplit(".", 1)[-1]
            what = (
                f"the directory {os.fspath(source)!r}"
                if isinstance(source, (str, os.PathLike))
                else f"a {type(source).__name__}"
            )
            raise ImportError(
                f"reading {what} needs the {extra} integration: "
                f"pip install 'transfersearch[{extra}]' ({exc})."
            ) from exc
        _registered[kind] = reader
    return as_observations(list(reader(source)))

"""Observations: one finished (or failed, or pruned) proxy trial, and readers for trial tables.

An :class:`Observation` records the scale a trial ran at, the swept hyperparameter coordinates it
used, and the metric it reached. A NaN or infinite metric marks a *diverged* run: it is kept, because
it tells the fit where the good region ends (a divergence cliff), and never raises.

Sources accepted by :func:`as_observations` (and so by ``extrapolate`` and ``validate``):

- an iterable of :class:`Observation`;
- a pandas ``DataFrame`` (pandas is imported only when one is passed), one row per trial:

  - scale columns: those named in ``scale_columns=``, else every column named ``scale.<name>``;
  - parameter columns: for each requested parameter ``p``, the column ``params.<p>`` if present,
    else the column ``p``;
  - the metric: column ``value_column`` (default ``"value"``);
  - optional ``state`` column with ``"complete"``, ``"failed"`` or ``"pruned"`` (default complete);

- any other object whose framework has a registered reader: an adapter registers one with
  :func:`register_reader`, or names it in the ``transfersearch.readers`` entry-point group under the
  top-level module of the source's type (the package ships ``optuna`` for a ``Study`` and ``ray``
  for a ``ResultGrid`` or ``ExperimentAnalysis``), and under ``directory`` for an existing
  directory (a Ray Tune experiment). The core never imports an adapter by name.
"""

from __future__ import annotations

import functools
import importlib.metadata
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
    "check_scale_names",
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
        if state not in STATES:
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
    to :func:`observations_from_records` (see there for the column convention and errors)."""
    return observations_from_records(
        [str(c) for c in frame.columns],
        frame.to_dict("records"),
        params=params,
        scale_columns=scale_columns,
        value_column=value_column,
        state_column=state_column,
    )


def observations_from_records(
    columns: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    *,
    params: Sequence[str] | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    state_column: str = "state",
) -> list[Observation]:
    """Read a table, one record (column -> cell) per trial, into observations.

    Column convention: scale variables come from ``scale_columns`` (named as the columns) or, by
    default, from every ``scale.<name>`` column; parameter ``p`` comes from ``params.<p>`` or, if
    that is absent, from ``p`` (without ``params``, every ``params.*`` column is read); the metric
    from ``value_column``; an optional ``state_column`` holds the trial state.

    Args:
        columns: the table's column names.
        records: one mapping column -> cell per row (e.g. ``DataFrame.to_dict("records")`` or
            ``csv.DictReader`` rows with numbers parsed).
        params: the parameters to read.
        scale_columns: plain column names that hold scale variables.
        value_column: the metric column.
        state_column: the optional state column.

    Returns:
        One Observation per row.

    Raises:
        TransferSearchError: a needed column is missing, no scale column can be found, or a scale
            cell is empty (None or NaN): every trial needs its whole scale. The message names the
            column and the rows, counted from 0 after the header.
    """
    columns = [str(c) for c in columns]
    if scale_columns is not None:
        missing = [c for c in scale_columns if c not in columns]
        if missing:
            raise TransferSearchError(
                f"scale_columns {missing} are not columns of the table (it has {columns}). "
                "Pass the names of the columns that hold scale variables."
            )
        scale_map = {c: c for c in scale_columns}
    else:
        scale_map = {c[len("scale.") :]: c for c in columns if c.startswith("scale.")}
    if not scale_map:
        raise TransferSearchError(
            f"the table has no scale columns (columns: {columns}). Name them 'scale.<name>' "
            "or pass scale_columns=['width', 'dataset_size']."
        )
    if params is None:
        param_map = {c[len("params.") :]: c for c in columns if c.startswith("params.")}
    else:
        param_map = {}
        for name in params:
            if f"params.{name}" in columns:
                param_map[name] = f"params.{name}"
            elif name in columns:
                param_map[name] = name
            else:
                raise TransferSearchError(
                    f"parameter {name!r} has no column in the table (looked for "
                    f"'params.{name}' and '{name}'; columns: {columns}). Add the column or fix "
                    "`params`."
                )
    if value_column not in columns:
        raise TransferSearchError(
            f"value_column={value_column!r} is not a column of the table (columns: "
            f"{columns}). Pass value_column='<your metric column>'."
        )
    has_state = state_column in columns
    result: list[Observation] = []
    for column in scale_map.values():
        empty = [i for i, row in enumerate(records) if _is_missing(row[column])]
        if empty:
            raise TransferSearchError(
                f"scale column {column!r} is empty in {len(empty)} of {len(records)} rows "
                f"({_positions(empty)}; rows counted from 0 after the header): every trial needs "
                f"its whole scale, or the fit would drop {column!r} and ignore it at the target. "
                "Fill in those cells or drop those rows."
            )
    for row in records:
        state = str(row[state_column]) if has_state else "complete"
        raw_value = row[value_column]
        value = float("nan") if raw_value is None else raw_value
        result.append(
            Observation(
                scale={k: _plain(row[c]) for k, c in scale_map.items()},
                params={k: _plain(row[c]) for k, c in param_map.items()},
                value=_plain(value),
                state=state,
            )
        )
    return result


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

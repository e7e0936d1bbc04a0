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

- an Optuna ``Study``, a Ray Tune ``ResultGrid`` or ``ExperimentAnalysis``, or the directory of a
  Ray Tune experiment (a ``str`` or ``os.PathLike`` naming an existing directory, e.g. a restored
  ``storage_path/name``), dispatched lazily to
  ``transfersearch.integrations.optuna.observations_from_study`` and
  ``transfersearch.integrations.ray.observations_from_result_grid``.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal

from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.scale import Scale

__all__ = [
    "STATES",
    "Observation",
    "TransferSearchWarning",
    "as_observations",
    "check_scale_names",
    "observations_from_frame",
]

State = Literal["complete", "failed", "pruned"]

#: The trial states an :class:`Observation` may carry.
STATES: tuple[str, ...] = ("complete", "failed", "pruned")

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
    module = type(source).__module__ or ""
    root = module.split(".", 1)[0]
    if root == "pandas" and type(source).__name__ == "DataFrame":
        return observations_from_frame(
            source, params=params, scale_columns=scale_columns, value_column=value_column
        )
    if root == "optuna":
        return _from_optuna(source)
    if root == "ray":
        return _from_ray(source)
    if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        return _from_ray(source)
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
    """Read a pandas DataFrame, one row per trial, into observations.

    Column convention: scale variables come from ``scale_columns`` (named as the columns) or, by
    default, from every ``scale.<name>`` column; parameter ``p`` comes from ``params.<p>`` or, if
    that is absent, from ``p`` (without ``params``, every ``params.*`` column is read); the metric
    from ``value_column``; an optional ``state_column`` holds the trial state.

    Args:
        frame: the pandas DataFrame.
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
    columns = [str(c) for c in frame.columns]
    if scale_columns is not None:
        missing = [c for c in scale_columns if c not in columns]
        if missing:
            raise TransferSearchError(
                f"scale_columns {missing} are not columns of the DataFrame (it has {columns}). "
                "Pass the names of the columns that hold scale variables."
            )
        scale_map = {c: c for c in scale_columns}
    else:
        scale_map = {c[len("scale.") :]: c for c in columns if c.startswith("scale.")}
    if not scale_map:
        raise TransferSearchError(
            f"the DataFrame has no scale columns (columns: {columns}). Name them 'scale.<name>' "
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
                    f"parameter {name!r} has no column in the DataFrame (looked for "
                    f"'params.{name}' and '{name}'; columns: {columns}). Add the column or fix "
                    "`params`."
                )
    if value_column not in columns:
        raise TransferSearchError(
            f"value_column={value_column!r} is not a column of the DataFrame (columns: "
            f"{columns}). Pass value_column='<your metric column>'."
        )
    has_state = state_column in columns
    result: list[Observation] = []
    records = frame.to_dict("records")
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


def _from_optuna(study: Any) -> list[Observation]:
    """Dispatch to ``transfersearch.integrations.optuna.observations_from_study``."""
    return _dispatch("optuna", "observations_from_study", study)


def _from_ray(result_grid: Any) -> list[Observation]:
    """Dispatch a ResultGrid (or an experiment directory) to
    ``transfersearch.integrations.ray.observations_from_result_grid``."""
    return _dispatch("ray", "observations_from_result_grid", result_grid)


def _dispatch(framework: str, function: str, source: Any) -> list[Observation]:
    try:
        module = importlib.import_module(f"transfersearch.integrations.{framework}")
    except ImportError as exc:
        what = (
            f"the directory {os.fspath(source)!r}"
            if isinstance(source, (str, os.PathLike))
            else f"a {type(source).__name__}"
        )
        raise ImportError(
            f"reading {what} needs the {framework} integration: "
            f"pip install 'transfersearch[{framework}]' ({exc})."
        ) from exc
    reader = getattr(module, function)
    observations = list(reader(source))
    return as_observations(observations)

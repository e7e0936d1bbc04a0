"""Readers: any source of trials as a :class:`~transfersearch.sweep.Sweep`.

Sources :func:`read_sweep` (and so ``extrapolate`` and ``validate``) accepts:

- a :class:`~transfersearch.sweep.Sweep`, returned as it is;
- an iterable of :class:`~transfersearch.observations.Observation`;
- a pandas ``DataFrame`` (pandas is imported only when one is passed), one row per trial, Optuna's
  ``study.trials_dataframe()`` as it is (:func:`observations_from_records` has the details):

  - scale columns: those named in ``scale_columns=``, else every ``scale.<name>`` (or Optuna's
    ``user_attrs_scale.<name>``) column;
  - parameter columns: for each requested parameter ``p``, ``params.<p>``, ``params_<p>`` or ``p``;
  - the metric: column ``value_column`` (default ``"value"``);
  - optional ``state`` column, ``complete`` / ``failed`` / ``pruned`` or Optuna's states in any
    case (default complete); ``failed`` (or ``crashed``) is a run that raised, a crash, never a
    divergence: a run that diverged is ``complete`` with a NaN or inf value (or state
    ``diverged``); an optional boolean ``crashed`` column marks crashes too;

- the path of a ``.csv`` file (:func:`read_csv`: the table convention above, ``--csv``'s reader).
  An Optuna storage (``"sqlite:///proxy.db"``, ``proxy.db``) is not a sweep but a set of studies:
  the error gives the ``optuna.load_study(...)`` line that reads one;
- any other object whose framework has a registered reader: an adapter registers one with
  :func:`register_reader`, or names it in the ``transfersearch.readers`` entry-point group under the
  top-level module of the source's type (the package ships ``optuna`` for a ``Study`` and ``ray``
  for a ``ResultGrid`` or ``ExperimentAnalysis``), and under ``directory`` for an existing
  directory (a Ray Tune experiment). A reader returns a ``Sweep`` (with the space and direction
  the source stored) or the observations alone. The core never imports an adapter by name.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import difflib
import functools
import importlib.metadata
import logging
import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from transfersearch.errors import TransferSearchError, TransferSearchWarning, shown_positions
from transfersearch.observations import STATES, Observation
from transfersearch.scale import Scale
from transfersearch.sweep import Direction, Sweep

__all__ = [
    "CRASHED_COLUMN",
    "DIRECTORY",
    "FAIL_CRASHED",
    "FAIL_DIVERGED",
    "FAIL_KIND_ATTR",
    "PARAM_PREFIXES",
    "READERS_GROUP",
    "RUNG_ATTR",
    "SCALE_PREFIXES",
    "TOLD_ATTR",
    "Reader",
    "as_observations",
    "not_utf8_message",
    "observations_from_frame",
    "observations_from_records",
    "read_csv",
    "read_sweep",
    "register_reader",
]

#: The entry-point group where an installed adapter names its reader of a framework's objects.
READERS_GROUP = "transfersearch.readers"
#: The reader key of an existing directory (a Ray Tune experiment, read from its JSON files).
DIRECTORY = "directory"

#: A function reading one source into a sweep, or into its observations alone.
Reader = Callable[[Any], "Sweep | Iterable[Observation]"]

_registered: dict[str, Reader] = {}

logger = logging.getLogger(__name__)


def read_sweep(
    source: Any,
    *,
    params: Sequence[str] | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    direction: Direction | None = None,
    cost: Callable[[Scale], float] | None = None,
) -> Sweep:
    """Read trials, and what the source stored with them, from any supported source.

    Args:
        source: a :class:`~transfersearch.sweep.Sweep`, an iterable of Observation, a pandas
            DataFrame (see the module docstring for the column convention), an Optuna Study, a
            Ray Tune ResultGrid, the path of a Ray Tune experiment directory, or the path of a
            ``.csv`` file (:func:`read_csv`).
        params: the parameters wanted; for a DataFrame they choose the parameter columns.
        scale_columns: DataFrame or CSV only: columns holding scale variables (default:
            ``scale.*``).
        value_column: DataFrame or CSV only: the column holding the metric.
        direction: ``"minimize"`` or ``"maximize"``, over what the source says; None keeps the
            source's (None when it says nothing).
        cost: the cost of a run at a scale, over the source's; None keeps the source's.

    Returns:
        The :class:`~transfersearch.sweep.Sweep`, carrying ``params`` (the parameters fitted
        when the fit names none); a Sweep passed in comes back as it is unless ``direction`` or
        ``cost`` replace its own.

    Raises:
        TransferSearchError: the source is of an unsupported type (or a path that is neither a
            directory nor a ``.csv`` file; an Optuna storage URL or ``.db`` file is refused with
            the ``optuna.load_study`` line that reads it), a DataFrame lacks a needed column, an
            element is not an Observation, or the space stored with the source cannot be read.
    """
    sweep = _sweep(source, params, scale_columns, value_column)
    changes: dict[str, Any] = {}
    if params is not None and not isinstance(source, Sweep) and not isinstance(params, str):
        changes["params"] = tuple(params)  # fitted by default; the others recorded only
    if direction is not None:
        changes["direction"] = direction
    if cost is not None:
        changes["cost"] = cost
    return dataclasses.replace(sweep, **changes) if changes else sweep


def _sweep(
    source: Any,
    params: Sequence[str] | None,
    scale_columns: Sequence[str] | None,
    value_column: str,
) -> Sweep:
    """The sweep ``source`` holds, before the caller's direction and cost."""
    if isinstance(source, Sweep):
        return source
    root = (type(source).__module__ or "").split(".", 1)[0]
    if root == "pandas" and type(source).__name__ == "DataFrame":
        frame = observations_from_frame(
            source, params=params, scale_columns=scale_columns, value_column=value_column
        )
        return Sweep(tuple(frame))
    if root != "builtins" and _has_reader(root):
        return _read(root, source)
    if isinstance(source, (str, os.PathLike)):
        read = _path_source(source, params, scale_columns, value_column)
        if read is not None:
            return read
    return Sweep(tuple(_observation_list(source)))


#: File name endings of an Optuna SQLite storage (a path read_sweep is given but cannot read
#: without the study's name).
_STORAGE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def _path_source(
    source: str | os.PathLike[str],
    params: Sequence[str] | None,
    scale_columns: Sequence[str] | None,
    value_column: str,
) -> Sweep | None:
    """The sweep a path holds (a Ray Tune experiment directory, a CSV file), or None; an Optuna
    storage URL or SQLite file is refused with the two lines that read it."""
    text = os.fspath(source)
    if os.path.isdir(text):
        return _read(DIRECTORY, source)
    if text.lower().endswith(".csv") and os.path.isfile(text):
        table = read_csv(
            text, params=params, scale_columns=scale_columns, value_column=value_column
        )
        return Sweep(tuple(table))
    if "://" in text or text.lower().endswith(_STORAGE_SUFFIXES):
        url = text if "://" in text else f"sqlite:///{text}"
        raise TransferSearchError(
            f"{text!r} is an Optuna storage, which can hold several studies: read_sweep and "
            "extrapolate take the study. Load it first: study = optuna.load_study("
            f"study_name='<name>', storage={url!r}); ts.extrapolate(study, target=...). "
            "optuna.get_all_study_names(storage=...) lists the names; on the command line: "
            f"--storage {url} --study <name>."
        )
    return None


def _observation_list(source: Any) -> list[Observation]:
    """An iterable of Observation as a list; anything else is refused."""
    if isinstance(source, (str, bytes, os.PathLike, Mapping)) or not isinstance(source, Iterable):
        got = type(source).__name__
        if isinstance(source, (str, os.PathLike)):
            got = f"{got} {os.fspath(source)!r}, which is neither a directory nor a .csv file"
        raise TransferSearchError(
            f"observations must be a list of Observation, a pandas DataFrame, an Optuna Study, a "
            f"Ray Tune ResultGrid, the directory of a Ray Tune experiment (storage_path/name) or "
            f"the path of a CSV file, but got {got}. Wrap trials as "
            "Observation(scale=..., params=..., value=...)."
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


def as_observations(
    source: Any,
    *,
    params: Sequence[str] | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
) -> list[Observation]:
    """The trials of any source :func:`read_sweep` reads, as a list of Observation in source order.

    Raises:
        TransferSearchError: as for :func:`read_sweep`.
    """
    sweep = read_sweep(
        source, params=params, scale_columns=scale_columns, value_column=value_column
    )
    return list(sweep.observations)


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


def read_csv(
    path: str | os.PathLike[str],
    *,
    params: Sequence[str] | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    spelling: Literal["python", "cli"] = "python",
) -> list[Observation]:
    """Read a CSV file, one row per trial, into observations (UTF-8, with or without a
    byte-order mark; ``study.trials_dataframe().to_csv(path)`` as it is). Empty, ``nan``,
    ``none`` and ``null`` cells are missing; the columns follow :func:`observations_from_records`.

    Raises:
        TransferSearchError: the file is not UTF-8 text, not CSV, empty, a row has more cells
            than the header, or as :func:`observations_from_records`.
    """
    label = f"--csv {os.fspath(path)}" if spelling == "cli" else repr(os.fspath(path))
    try:
        # utf-8-sig: a byte-order mark (Excel writes one) is not part of the first column's name
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            columns = list(reader.fieldnames or [])
            records = []
            for row in reader:
                if None in row:  # DictReader files cells beyond the header under the key None
                    raise TransferSearchError(
                        f"{label}: line {reader.line_num} has {len(columns) + len(row[None])} "
                        f"cells but the header names {len(columns)} columns ({columns}). Remove "
                        "the extra cells or add their column names to the header."
                    )
                records.append({k: _number_or_text(v) for k, v in row.items()})
    except UnicodeDecodeError as exc:
        raise TransferSearchError(not_utf8_message(label, exc, "a CSV file")) from None
    except csv.Error as exc:
        raise TransferSearchError(f"{label}: not a readable CSV file ({exc}).") from None
    if not columns:
        raise TransferSearchError(f"{label}: the file is empty. Give a CSV with a header row.")
    return observations_from_records(
        columns,
        records,
        params=params,
        scale_columns=scale_columns,
        value_column=value_column,
        spelling=spelling,
    )


def not_utf8_message(label: str, exc: UnicodeDecodeError, kind: str) -> str:
    """The message for a file that is not UTF-8 text (a binary file, or another encoding)."""
    return (
        f"{label}: not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} at "
        f"offset {exc.start}); is it a binary file? Give {kind} saved as UTF-8."
    )


def _number_or_text(raw: str | None) -> Any:
    """A CSV cell: a number, NaN for an empty / ``nan`` / ``none`` / ``null`` cell, else text."""
    if raw is None:
        return math.nan
    text = raw.strip()
    if text == "" or text.lower() in ("nan", "none", "null"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        return text


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
      column of text, a categorical such as ``params.optimizer``, is left out and logged); with
      ``params``, the other numeric ``params.*`` / ``params_*`` columns are recorded too (where
      a row fills them), not fitted: a trial's other hyperparameters, so that the fit can say
      when rows at one scale differ in one that ``params`` leaves out (the ``unfitted`` warning:
      they would read as repeats of one configuration);
    - the metric: ``value_column``;
    - the optional ``state_column``, in any case: ``complete``, ``failed`` (Optuna's ``FAIL``),
      ``pruned``; an empty cell is complete; ``RUNNING`` and ``WAITING`` rows (unfinished) are
      skipped, and so are the FAIL rows of trials the storage's heartbeat failed because their
      worker died (``TransferSampler`` retries them; the retry stands for them).
    - crash vs divergence: ``failed`` (also ``crashed``) is a run that raised (an exception, an
      out-of-memory crash): :attr:`Observation.crashed`, counted but never a divergence. A run
      that diverged is ``complete`` with a NaN or ±inf metric, or has the state ``diverged``
      (its metric is then NaN). Optuna stores ``FAIL`` for both an exception and a returned NaN;
      a FAIL row whose ``system_attrs_transfersearch:fail-kind`` cell (written by
      ``TransferSampler``) is ``diverged`` is read as a divergence, any other FAIL as a crash.
      A ``crashed`` column, where the table has one, marks a row crashed when its cell is true
      (``True``, ``1``, ``"true"``, ``"yes"``).

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
    others = {} if params is None else _other_params(columns, records, param_map)
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
    told_recorded = _TOLD_COLUMN in columns
    kept = [
        i
        for i, state in enumerate(states)
        if state in (*STATES, _DIVERGED)
        and not _died(records[i], records[i].get(state_column), told_recorded)
    ]
    if len(kept) < len(records):
        logger.info(
            "skipped %d of %d rows: unfinished (RUNNING / WAITING) or failed by the heartbeat "
            "because the worker died (rows %s)",
            len(records) - len(kept),
            len(records),
            shown_positions([i for i in range(len(records)) if i not in set(kept)]),
        )
    _check_scales_filled(scale_map, records, kept)
    finished = {i: _crash_or_divergence(records[i], states[i]) for i in kept}
    crashes = [i for i, state in finished.items() if state == "failed"]
    if crashes:
        logger.info(
            "read %d rows as crashes (state FAIL / failed / crashed, or the crashed column; "
            "rows %s): counted, left out of the fit, never divergences",
            len(crashes),
            shown_positions(crashes),
        )
    _check_values(records, [i for i, state in finished.items() if state != "failed"], value_column)
    result = [
        _observation(records[i], state, value_column, scale_map, {**param_map, **others}, others)
        for i, state in finished.items()
    ]
    _warn_distinct_copies(columns, records, list(finished), result)
    return result


def _warn_distinct_copies(
    columns: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    rows: Sequence[int],
    observations: Sequence[Observation],
) -> None:
    """Warn when rows the fit will count once, as copies (the same scale, parameters, value and
    state: :func:`~transfersearch.observations.collapse_duplicates`), differ in another column
    of the table that holds settings: a plain column the reader does not know for a parameter
    (a published one-at-a-time table's ``warmup``) makes them different runs. A settings column
    is numeric in every row and repeats its values (at most one distinct value per two rows);
    identifiers (Optuna's ``number``), timestamps, durations and text labels are not."""
    values = [repr(o.value) for o in observations]  # NaN's repr is one key, as there
    counts = collections.Counter(values)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for row, obs, value in zip(rows, observations, values):
        if counts[value] > 1:
            key = (obs.scale, frozenset(obs.params.items()), value, obs.state)
            groups.setdefault(key, []).append(row)
    copies = [g for g in groups.values() if len(g) > 1]
    settings = _settings_columns(columns, records) if copies else []
    differing: set[str] = set()
    repeated: list[int] = []
    for group in copies:
        found = {c for c in settings if len({repr(records[i][c]) for i in group}) > 1}
        if found:
            differing |= found
            repeated += group[1:]
    if repeated:
        names = sorted(differing)
        warnings.warn(
            TransferSearchWarning(
                f"rows {shown_positions(sorted(repeated))} (counted from 0 after the header) repeat "
                f"another row's scale, parameters and value but differ in {names}: the fit counts "
                "each once, as a copy of one measurement. If they are different runs (a table "
                f"that also varied {names[0]}), record such columns as 'params.<name>' or list "
                "them in params=; if they are copies, nothing is lost."
            ),
            stacklevel=2,
        )


def _settings_columns(columns: Sequence[str], records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The columns that hold settings (:func:`_warn_distinct_copies`): numbers in every row,
    at most one distinct value per two rows."""
    out = []
    for column in columns:
        cells = [row[column] for row in records]
        if any(_is_text(c) or c is None for c in cells):
            continue
        if 2 * len({repr(c) for c in cells}) <= len(cells):
            out.append(column)
    return out


def _observation(
    row: Mapping[str, Any],
    state: str,
    value_column: str,
    scale_map: Mapping[str, str],
    param_map: Mapping[str, str],
    optional: Mapping[str, str],
) -> Observation:
    """One finished row (``state`` from :func:`_crash_or_divergence`) as an observation; the
    ``optional`` parameters (recorded, not fitted) only where the row holds a finite number."""
    raw = row[value_column]
    # a crash's metric is ignored: whatever its cell holds (an "OOM" note) reads as none
    missing = raw is None or (state == "failed" and _is_text(raw))
    value = float("nan") if missing or state == _DIVERGED else _plain(raw)
    return Observation(
        scale={k: _plain(row[c]) for k, c in scale_map.items()},
        params={
            k: _plain(row[c]) for k, c in param_map.items() if k not in optional or _finite(row[c])
        },
        value=value,
        state="complete" if state == _DIVERGED else state,
    )


def _check_values(records: Sequence[Mapping[str, Any]], rows: Sequence[int], column: str) -> None:
    """Refuse a metric cell of ``rows`` (the finished runs that did not crash) that is text,
    naming the rows: a published table's ``>10`` (a run that blew up past 10) is a divergence,
    which the fit reads from NaN; guessing it would put a direction on a cell that has none."""
    text = [i for i in rows if _is_text(records[i][column])]
    if text:
        raise TransferSearchError(
            f"the metric column {column!r} holds text in {len(text)} rows (rows "
            f"{shown_positions(text)}, counted from 0 after the header; e.g. "
            f"{records[text[0]][column]!r}): write each run's final metric as a number, NaN for "
            "a run that diverged (a cell such as '>10', a loss that blew up past 10, is a "
            "divergence: write NaN), or drop those rows."
        )


def _check_scales_filled(
    scale_map: Mapping[str, str], records: Sequence[Mapping[str, Any]], kept: Sequence[int]
) -> None:
    """Every kept row has every scale cell (else the fit would drop a scale variable)."""
    for column in scale_map.values():
        empty = [i for i in kept if _is_missing(records[i][column])]
        if empty:
            raise TransferSearchError(
                f"scale column {column!r} is empty in {len(empty)} of {len(records)} rows "
                f"({shown_positions(empty)}; rows counted from 0 after the header): every trial needs "
                f"its whole scale, or the fit would drop {column!r} and ignore it at the target. "
                "Fill in those cells or drop those rows."
            )


def _crash_or_divergence(row: Mapping[str, Any], state: str) -> str:
    """The row's state with crashes and divergences told apart: ``"failed"`` where the
    ``crashed`` column says so, :data:`_DIVERGED` for a FAIL that ``TransferSampler`` recorded as
    a returned NaN (:data:`FAIL_KIND_ATTR`)."""
    if _is_true(row.get(CRASHED_COLUMN)):
        return "failed"
    if state == "failed" and str(row.get(_FAIL_KIND_COLUMN, "")).strip() == FAIL_DIVERGED:
        return _DIVERGED
    return state


def _is_true(cell: Any) -> bool:
    """A cell that says yes: True, a non-zero number, or "true" / "yes" / "1" in any case."""
    if isinstance(cell, str):
        return cell.strip().lower() in ("true", "yes", "1")
    if _is_missing(cell):
        return False
    return bool(_plain(cell))


#: Prefixes of scale columns, in order of preference: ours, then Optuna's flattening of the
#: ``scale.<name>`` user attributes TransferSampler records.
SCALE_PREFIXES: tuple[str, ...] = ("scale.", "user_attrs_scale.")
#: Prefixes of parameter columns: ours, then Optuna's ``trials_dataframe()``.
PARAM_PREFIXES: tuple[str, ...] = ("params.", "params_")
#: A state cell saying the run diverged: read as a complete run whose value is NaN.
_DIVERGED = "diverged"
#: The optional boolean column marking a row that crashed (raised) whatever its state says.
CRASHED_COLUMN = "crashed"
#: Optuna's trial states (any case) -> an Observation's state; None: unfinished, the row is skipped.
_STATE_NAMES: dict[str, str | None] = {
    "complete": "complete",
    "failed": "failed",
    "fail": "failed",
    "crashed": "failed",
    "diverged": _DIVERGED,
    "pruned": "pruned",
    "running": None,
    "waiting": None,
}
#: Optuna system attribute TransferSampler writes on each trial: its rung (index into the
#: cost-ordered ladder).
RUNG_ATTR = "transfersearch:rung"
#: Optuna system attribute set when the objective (not the heartbeat) finished a trial as FAIL.
TOLD_ATTR = "transfersearch:told-fail"
#: Optuna system attribute TransferSampler writes on a trial Optuna finished as FAIL, saying why:
#: :data:`FAIL_DIVERGED` (the objective returned NaN, which Optuna refuses as a value) or
#: :data:`FAIL_CRASHED` (it raised). Optuna itself stores the same FAIL for both.
FAIL_KIND_ATTR = "transfersearch:fail-kind"
FAIL_DIVERGED = "diverged"
FAIL_CRASHED = "crashed"
#: The ``trials_dataframe()`` columns of those attributes: a FAIL with a rung but not told by the
#: objective was failed by the heartbeat (its worker died).
_RUNG_COLUMN = f"system_attrs_{RUNG_ATTR}"
_TOLD_COLUMN = f"system_attrs_{TOLD_ATTR}"
_FAIL_KIND_COLUMN = f"system_attrs_{FAIL_KIND_ATTR}"


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
                    f"{len(filled)} filled cells are not numbers (rows {shown_positions(text)}, "
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


def _other_params(
    columns: Sequence[str], records: Sequence[Mapping[str, Any]], named: Mapping[str, str]
) -> dict[str, str]:
    """The numeric ``params.*`` / ``params_*`` columns ``named`` does not read (name ->
    column): recorded beside the named parameters, not fitted. A column of text or of mixed
    cells (a categorical) is left out, as is one whose name is already read."""
    used = set(named.values())
    out: dict[str, str] = {}
    for prefix in reversed(PARAM_PREFIXES):  # "params." wins over "params_" for one name
        for column in columns:
            name = column[len(prefix) :]
            if not column.startswith(prefix) or not name or column in used or name in named:
                continue
            if not any(_is_text(row[column]) for row in records):
                out[name] = column
    return out


def _state(cell: Any, row: int) -> str:
    """A state cell as an Observation state, ``"unfinished"`` for RUNNING / WAITING."""
    if _is_missing(cell) or (isinstance(cell, str) and not cell.strip()):
        return "complete"
    name = str(cell).strip().lower()
    if name.startswith("trialstate."):  # str(optuna.trial.TrialState.COMPLETE)
        name = name[len("trialstate.") :]
    if name not in _STATE_NAMES:
        raise TransferSearchError(
            f"row {row} has state {cell!r}; states are {STATES}, 'crashed' (= failed) and "
            "'diverged' (Optuna's COMPLETE, FAIL, PRUNED, RUNNING, WAITING in any case are read "
            "too). Fix the cell."
        )
    return _STATE_NAMES[name] or "unfinished"


def _died(row: Mapping[str, Any], cell: Any, told_recorded: bool) -> bool:
    """A FAIL that the storage's heartbeat, not the objective, decided (its worker died; the
    retry stands for it): Optuna's own spelling ``FAIL`` of a TransferSampler trial (a rung,
    ``_RUNG_COLUMN``) in a table that records the objective's fails (the told-fail column), on a
    row the objective did not tell. Nothing else is: a table without that column cannot say a
    FAIL was not the objective's, and ``failed`` / ``crashed`` are a person's spelling, never the
    heartbeat's; those rows are crashes (issue 49, item 5)."""
    spelled = str(cell).strip().upper().removeprefix("TRIALSTATE.")
    if not told_recorded or spelled != "FAIL" or _is_missing(row.get(_RUNG_COLUMN)):
        return False
    told = row.get(_TOLD_COLUMN)
    return not (told is True or (isinstance(told, str) and told.strip().lower() == "true"))


def _is_text(value: Any) -> bool:
    """A cell that is not a number: text, or a boolean (Optuna's categorical True / False)."""
    return isinstance(value, (str, bool)) or type(value).__name__ == "bool_"


def _finite(value: Any) -> bool:
    """A cell holding a finite number (a recorded-only parameter's cell is kept only then)."""
    try:
        return not _is_text(value) and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _is_missing(value: Any) -> bool:
    """An empty cell: None, or a float NaN (how CSV readers and pandas write a blank)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plain(value: Any) -> Any:
    """Turn numpy scalars into Python numbers so the Real checks apply uniformly."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (int, float)):
        return item()
    return value


def register_reader(kind: str, reader: Reader) -> None:
    """Make :func:`read_sweep` read sources of ``kind`` with ``reader``.

    Args:
        kind: the top-level module of the source's type (``"optuna"`` for an
            ``optuna.study.Study``), or ``"directory"`` for a path naming an existing directory.
        reader: source -> a Sweep, or its observations. It replaces a reader installed under the same kind.
    """
    if not isinstance(kind, str) or not kind:
        raise TransferSearchError(f"`kind` must be a module name, but got {kind!r}.")
    _registered[kind] = reader


@functools.cache
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=READERS_GROUP)}


def _has_reader(kind: str) -> bool:
    return kind in _registered or kind in _entry_points()


def _read(kind: str, source: Any) -> Sweep:
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
    read = reader(source)
    if isinstance(read, Sweep):
        _observation_list(read.observations)  # a reader's output is checked like the user's
        return read
    return Sweep(tuple(_observation_list(read)))

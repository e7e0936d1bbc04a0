"""The ``transfersearch`` command line: extrapolate, validate, report, and installed subcommands.

Bad input prints one line, ``error: <what is wrong and how to fix it>``, on stderr and exits with
status 2 (argparse's own usage errors exit 2 as well). Further subcommands (``demo``) come from the
``transfersearch.commands`` entry-point group; the Optuna storage reader and those commands import
their frameworks only when used, so ``transfersearch --help`` needs none. ``--json`` prints the
result as JSON; ``--json-file FILE`` reads observations from JSON.

Observation files:

- ``--csv FILE``: one row per trial (UTF-8, with or without a byte-order mark). Scale columns are
  ``scale.<name>`` (or Optuna's ``user_attrs_scale.<name>``, or the plain columns named in
  ``--scale-columns``), parameters ``params.<name>``, ``params_<name>`` or ``<name>``, the metric
  ``value`` (or ``--value-column``), and an optional ``state`` column (complete, failed, pruned, or
  Optuna's states in any case). Empty or ``nan`` values of complete runs mark diverged runs;
  ``failed`` (or ``crashed``, or a true ``crashed`` column) marks a run that raised, a crash, not a
  divergence. Optuna's ``study.trials_dataframe().to_csv(FILE)`` is read as it is (its FAIL rows
  are crashes unless TransferSampler recorded a returned NaN).
- ``--json-file FILE``: a list of ``{"scale": {...}, "params": {...}, "value": 2.31, "state": "complete"}``
  objects, or ``{"observations": [...]}``.
- ``--storage URL --study NAME``: an Optuna study (``pip install 'transfersearch[optuna]'``). The
  URL's password is never printed (:func:`transfersearch.redact.redact_url`).

A target scale variable left out that never varied over the ladder keeps the ladder's value (the
output says so). ``report`` only reads; ``--publish`` writes the report to the study.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import json
import logging
import math
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transfersearch.api import extrapolate, validate
from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.portfolio import Portfolio
from transfersearch.fitting.result import Extrapolation, Validation
from transfersearch.observations import Observation
from transfersearch.readers import not_utf8_message, read_csv, read_sweep
from transfersearch.redact import redact_url
from transfersearch.report import format_table
from transfersearch.scale import Scale
from transfersearch.space import Hyperparameters, TransferSpace
from transfersearch.stored_space import space_from_json
from transfersearch.summary import extrapolation_to_dict, json_ready, validation_to_dict
from transfersearch.sweep import Sweep

__all__ = ["COMMANDS_GROUP", "build_parser", "load_observations", "main", "parse_scale"]

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
#: The default metric column of ``--csv`` (``--value-column``).
VALUE_COLUMN = "value"
#: The entry-point group of further subcommands: each names a function that takes argparse's
#: subparsers object, adds its parser and sets ``handler`` (args -> exit status) as a default.
COMMANDS_GROUP = "transfersearch.commands"


# ----------------------------------------------------------------------------------------------
# Parsing helpers
# ----------------------------------------------------------------------------------------------
def parse_scale(text: str, *, option: str = "--target") -> Scale:
    """Parse ``width=4096,dataset_size=1e7`` into a :class:`Scale`.

    Raises:
        TransferSearchError: an item is not ``name=number`` or a value is not positive.
    """
    values: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise TransferSearchError(
                f"`{option}` items must look like name=number, but got {item!r}. "
                "Write e.g. --target width=4096,dataset_size=1e7."
            )
        try:
            number = float(raw)
        except ValueError:
            raise TransferSearchError(
                f"`{option}` value for {name.strip()!r} must be a number, but got {raw!r}. "
                "Write e.g. width=4096."
            ) from None
        if name.strip() in values:
            raise TransferSearchError(
                f"`{option}` names {name.strip()!r} twice ({text!r}); give each scale variable "
                "once."
            )
        values[name.strip()] = number
    if not values:
        raise TransferSearchError(
            f"`{option}` is empty. Write e.g. --target width=4096,dataset_size=1e7."
        )
    return Scale(values)


def _split_names(text: str | None, option: str = "--params") -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise TransferSearchError(
            f"`{option}` must name at least one column or parameter, but got {text!r}. "
            f"Write e.g. {option} base_lr,tau_epoch."
        )
    return names


def _read_csv(
    path: Path,
    scale_columns: Sequence[str] | None,
    value_column: str,
    params: Sequence[str] | None,
) -> list[Observation]:
    return read_csv(
        path,
        params=params,
        scale_columns=scale_columns,
        value_column=value_column,
        spelling="cli",
    )


def _not_text(option: str, path: Path, exc: UnicodeDecodeError, kind: str) -> str:
    """The message for a file that is not UTF-8 text (a binary file, or another encoding)."""
    return not_utf8_message(f"{option} {path}", exc, kind)


def _read_json(path: Path) -> list[Observation]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise TransferSearchError(_not_text("--json-file", path, exc, "a JSON file")) from None
    except json.JSONDecodeError as exc:
        raise TransferSearchError(f"--json-file {path}: not valid JSON ({exc}).") from None
    except RecursionError:
        raise TransferSearchError(
            f"--json-file {path}: nested too deeply to read (more than Python's recursion "
            f"limit, {sys.getrecursionlimit()}, levels). Give a list of flat observation objects."
        ) from None
    if isinstance(data, Mapping):
        data = data.get("observations")
    if not isinstance(data, list):
        raise TransferSearchError(
            f'--json-file {path}: expected a list of observations or {{"observations": [...]}}, got '
            f'{type(data).__name__}. Each item: {{"scale": {{...}}, "params": {{...}}, '
            '"value": 2.31}.'
        )
    result: list[Observation] = []
    for index, item in enumerate(data):
        if not isinstance(item, Mapping) or not {"scale", "params", "value"} <= set(item):
            raise TransferSearchError(
                f"--json-file {path}: item {index} must be an object with 'scale', 'params' and 'value', "
                f"but got {item!r:.120}."
            )
        value = item["value"]
        result.append(
            Observation(
                scale=item["scale"],
                params=item["params"],
                value=math.nan if value is None else value,
                state=item.get("state", "complete"),
            )
        )
    return result


def _read_study(storage: str, study: str) -> Any:
    try:
        optuna = importlib.import_module("optuna")
    except ImportError as exc:
        raise TransferSearchError(
            f"--storage needs Optuna: pip install 'transfersearch[optuna]' ({exc})."
        ) from None
    from transfersearch.integrations.optuna import make_storage

    # Read-only: a mistyped SQLite path is an error, not a new empty file.
    opened = make_storage(storage, heartbeat_interval=None, must_exist=True)
    try:
        return optuna.load_study(study_name=study, storage=opened)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage=opened)]
        raise TransferSearchError(
            f"--study {study!r} is not in storage {redact_url(storage)!r}; it holds {names}."
        ) from None


def load_observations(args: argparse.Namespace) -> Any:
    """The observations named by ``--csv``, ``--json`` or ``--storage``/``--study``.

    Returns:
        A list of :class:`Observation` or an Optuna study (read by ``extrapolate`` itself).

    Raises:
        TransferSearchError: no source, several sources, a missing file or a malformed one.
    """
    given = [
        flag
        for flag, value in (
            ("--csv", args.csv),
            ("--json-file", args.json_file),
            ("--storage", args.storage),
        )
        if value
    ]
    if len(given) != 1:
        raise TransferSearchError(
            f"give exactly one source of observations: --csv FILE, --json-file FILE or --storage URL "
            f"--study NAME (got {given or 'none'})."
        )
    if args.study and not args.storage:
        raise TransferSearchError(
            f"--study {args.study!r} names an Optuna study, which needs --storage URL (the "
            f"observations come from {given[0]} here). Give --storage, or drop --study."
        )
    csv_only = [
        flag
        for flag, used in (
            ("--scale-columns", args.scale_columns is not None),
            ("--value-column", args.value_column != VALUE_COLUMN),
        )
        if used
    ]
    if csv_only and not args.csv:
        raise TransferSearchError(
            f"{' and '.join(csv_only)} name CSV columns, but the observations come from "
            f"{given[0]}. Drop {' and '.join(csv_only)}, or read a --csv file."
        )
    if args.storage:
        if not args.study:
            raise TransferSearchError("--storage needs --study NAME (the Optuna study's name).")
        return _read_study(args.storage, args.study)
    path = Path(args.csv or args.json_file)
    if not path.is_file():
        raise TransferSearchError(f"{given[0]} {path}: no such file. Check the path.")
    if args.csv:
        scale_columns = _split_names(args.scale_columns, "--scale-columns")
        return _read_csv(path, scale_columns, args.value_column, _params(args))
    return _read_json(path)


def _seed(args: argparse.Namespace) -> int:
    """``--seed``, checked: numpy's generators take non-negative integers only."""
    if args.seed < 0:
        raise TransferSearchError(
            f"`--seed` must be a non-negative integer, but got --seed {args.seed}. Write e.g. "
            "--seed 0."
        )
    seed: int = args.seed
    return seed


def _params(args: argparse.Namespace) -> list[str] | None:
    """``--params`` as a list, or None: then the fit uses every parameter all trials record."""
    return _split_names(args.params)


def _fit_options(args: argparse.Namespace) -> FitOptions:
    """The fit's options from the shared flags, made once; a flag not given keeps the Python
    default (so the command line and Python give the same answer). ``--direction`` is how the
    source is read, passed beside them."""
    given: dict[str, Any] = {"params": _params(args), "seed": _seed(args)}
    if args.divergence_cost is not None:
        given["divergence_cost"] = args.divergence_cost
    if args.diverged_beyond is not None:
        given["diverged_beyond"] = args.diverged_beyond
    if args.log_params is not None:  # "" fits every parameter linearly
        given["log_params"] = [n.strip() for n in args.log_params.split(",") if n.strip()]
    return FitOptions.from_kwargs(**given)


# ----------------------------------------------------------------------------------------------
# Subcommands
# ----------------------------------------------------------------------------------------------
def _fit(args: argparse.Namespace) -> tuple[Any, Sweep, Extrapolation]:
    """The source the flags name, the sweep read from it, and the fit to ``--target``."""
    options = _fit_options(args)
    source = load_observations(args)
    target = parse_scale(args.target)
    sweep = read_sweep(source, params=options.params)
    space = getattr(args, "space", None)
    if space:
        sweep = dataclasses.replace(sweep, space=_read_space(Path(space)))
    return (
        source,
        sweep,
        extrapolate(sweep, target=target, options=options, direction=args.direction),
    )


def _read_space(path: Path) -> TransferSpace:
    """``--space FILE``: the space :func:`~transfersearch.stored_space.space_to_json` wrote."""
    if not path.is_file():
        raise TransferSearchError(f"--space {path}: no such file. Check the path.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TransferSearchError(_not_text("--space", path, exc, "a JSON file")) from None
    return space_from_json(text)


#: Why a fit has no per-group hyperparameters, and how to give it the space.
NO_SPACE = (
    "no hyperparameters at the target: the source stores no search space (a CSV or a JSON list "
    "never does; an Optuna study does when TransferSampler ran it), so the per-group lr and "
    "weight decay cannot be computed from the coordinates. Pass --space space.json, written in "
    "Python by json.dump(transfersearch.stored_space.space_to_json(space), file), or in Python "
    "call res.hyperparameters(space)."
)


def _cmd_extrapolate(args: argparse.Namespace) -> int:
    _, _, result = _fit(args)
    # the space the sampler stored with the study, or --space; if none, say why none is shown
    hp = None if result.space is None else result.hyperparameters()
    portfolio = None if args.candidates is None else result.candidates(args.candidates)
    if args.as_json:
        data = extrapolation_to_dict(result, args.level, hp)
        if hp is None:
            data["hyperparameters_missing"] = NO_SPACE
        if portfolio is not None:
            data["candidates"] = json_ready(portfolio.to_dict())
        print(json.dumps(data, indent=2, allow_nan=False))
        return 0
    print(_prediction_table(result, args.level))
    print(f"\n{result.summary()}")
    if hp is not None:
        print(f"\nhyperparameters at the target (PyTorch's coupled weight decay):\n{_hp_table(hp)}")
    else:
        print(f"\n{NO_SPACE}")
    if portfolio is not None:
        print(f"\n{_candidates_text(portfolio)}")
    return 0


def _candidates_text(portfolio: Portfolio) -> str:
    """``--candidates K``: the runs, their expected regret and P(diverge), and their
    hyperparameters when the source stored a space (docs/science.md §9)."""
    names = list(portfolio[0].params)
    rows = [
        [str(i + 1), *(run.params[n] for n in names), run.expected_regret, run.p_diverge]
        for i, run in enumerate(portfolio)
    ]
    lines = [
        f"{len(portfolio)} target run(s) minimising the expected best loss among them "
        f"(expected best regret {portfolio.expected_best_regret:.3g}):",
        format_table(["run", *names, "exp. regret", "P(diverge)"], rows),
    ]
    for i, run in enumerate(portfolio):
        if run.hyperparameters is not None:
            lines.append(f"run {i + 1} hyperparameters:\n{_hp_table(run.hyperparameters)}")
    return "\n".join(lines)


def _prediction_table(result: Extrapolation, level: float) -> str:
    """The decision per parameter with its interval and the law's exponents."""
    interval = result.interval(level)
    rows = []
    for name, value in result.params.items():
        varied = result.varied_exponents(name)  # a variable never varied: no exponent shown
        exps = ", ".join(f"{k}^{v:+.3f}" for k, v in sorted(varied.items()))
        rows.append([name, value, interval[name][0], interval[name][1], exps])
    percent = f"{round(level * 100)}%"
    headers = [
        "param",
        "predicted",
        f"{percent} low",
        f"{percent} high",
        "law at the rungs' centre",
    ]
    return format_table(headers, rows)


def _hp_table(hp: Hyperparameters) -> str:
    if hp.optimizers:  # a group runs Muon or Lion: say which optimizer runs each group
        rows = [[g, hp.optimizer(g), v["lr"], v["weight_decay"]] for g, v in hp.groups.items()]
        lines = [format_table(["group", "optimizer", "lr", "weight_decay"], rows)]
    else:
        groups = [[g, v["lr"], v["weight_decay"]] for g, v in hp.groups.items()]
        lines = [format_table(["group", "lr", "weight_decay"], groups)]
    lines.append(
        f"betas={tuple(hp.betas)} eps={hp.eps:g} ema_momentum={hp.ema_momentum} "
        f"batch_size={hp.batch_size} total_steps={hp.total_steps}"
    )
    lines.extend(f"note: {note}" for note in hp.notes)
    return "\n".join(lines)


def _cmd_validate(args: argparse.Namespace) -> int:
    options = _fit_options(args)
    source = load_observations(args)
    held = parse_scale(args.held_out, option="--held-out") if args.held_out else None
    result: Validation = validate(source, held_out=held, options=options, direction=args.direction)
    if args.as_json:
        print(json.dumps(validation_to_dict(result), indent=2, allow_nan=False))
        return 0
    print(f"held out: {result.held_out!r}")
    rows = [
        [
            n,
            result.predicted[n],
            result.observed[n],
            result.relative_error[n],
            result.within_interval[n],
        ]
        for n in result.predicted
    ]
    print(format_table(["param", "predicted", "observed", "rel. error", "in 90% interval"], rows))
    if result.regret is not None:
        print(
            f"regret of the prediction at the held-out scale: {result.regret:.4g}"
            + (
                f" ({100 * result.relative_regret:.3g}%)"
                if result.relative_regret is not None
                else ""
            )
        )
    print(f"\nthe fit without the held-out rung:\n{result.extrapolation.summary()}")
    return 0


def _source_name(args: argparse.Namespace) -> str:
    """What the report's title names: ``study 'proxy' (sqlite:///proxy.db)`` or the file."""
    if args.storage:
        return f"study {args.study!r} ({redact_url(args.storage)})"
    return str(args.csv or args.json_file)


def _cmd_report(args: argparse.Namespace) -> int:
    from transfersearch.report import plot_report

    if args.publish and not args.storage:
        raise TransferSearchError(
            "--publish writes the report to an Optuna study, which needs --storage URL --study "
            "NAME. Drop --publish, or read the study from --storage."
        )
    if args.artifact_dir is not None and not args.publish:
        raise TransferSearchError(
            f"--artifact-dir {args.artifact_dir!r} is where --publish puts the study's "
            "artifacts; without --publish nothing goes there. Add --publish (with --storage), "
            "or drop --artifact-dir."
        )
    source, sweep, result = _fit(args)
    observations = list(sweep.observations)
    out = plot_report(observations, result, args.out, level=args.level, title=_source_name(args))
    print(f"wrote {out}")
    if args.html:
        from transfersearch.visualization import write_html_report

        page = write_html_report(
            observations, result, args.html, level=args.level, plotlyjs=args.plotlyjs
        )
        print(f"wrote {page}")
    print(result.summary())
    if args.publish:  # the study carries the report for optuna-dashboard
        from transfersearch.integrations.dashboard import publish

        published = publish(
            source, result, storage=args.storage, artifact_dir=args.artifact_dir,
            level=args.level, png=out, observations=observations,
        )  # fmt: skip
        print(published.describe(redact_url(args.storage)))
    return 0


# ----------------------------------------------------------------------------------------------
# Parser
# ----------------------------------------------------------------------------------------------
def _add_source(parser: argparse.ArgumentParser) -> None:
    """The flags naming the observations (one source), then the fit's flags."""
    group = parser.add_argument_group("observations (give one source)")
    group.add_argument(
        "--csv",
        metavar="FILE",
        help="CSV, one row per trial (scale.*, params.*, value; Optuna's "
        "study.trials_dataframe().to_csv() as it is)",
    )
    group.add_argument(
        "--json-file",
        dest="json_file",
        metavar="FILE",
        help='a JSON list of {"scale": {...}, "params": {...}, "value": ...}',
    )
    group.add_argument("--storage", metavar="URL", help="Optuna storage, e.g. sqlite:///proxy.db")
    group.add_argument("--study", metavar="NAME", help="Optuna study name (with --storage)")
    group.add_argument(
        "--scale-columns",
        metavar="A,B",
        help="CSV: plain columns holding scale variables (default: scale.* columns, else "
        "Optuna's user_attrs_scale.*)",
    )
    group.add_argument(
        "--value-column",
        default=VALUE_COLUMN,
        metavar="NAME",
        help="CSV: the metric column (default: value)",
    )
    group.add_argument(
        "--space",
        metavar="FILE",
        help="the search space as JSON (transfersearch.stored_space.space_to_json(space)): "
        "gives a CSV or JSON list the per-group hyperparameters a study stores its space for",
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="print the result as JSON"
    )
    _add_fit_flags(parser)


def _add_fit_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of the fit's options (:func:`_fit_options` makes the ``FitOptions``) and
    ``--direction``, named as the Python keywords (``FitKeywords``)."""
    parser.add_argument(
        "--params",
        metavar="A,B",
        help="swept parameters to fit, e.g. base_lr,tau_epoch (default: all)",
    )
    parser.add_argument(
        "--direction",
        choices=("minimize", "maximize"),
        default=None,
        help="whether lower or higher values are better (default: the study's direction, "
        "else minimize)",
    )
    parser.add_argument(
        "--divergence-cost",
        type=float,
        default=None,
        metavar="C",
        help="the loss charged to a run that diverges, in the metric's units (default: the "
        "sweep's worst excess, as in Python)",
    )
    parser.add_argument(
        "--diverged-beyond",
        type=float,
        default=None,
        metavar="V",
        help="a finite value past V on the metric's worse side counts as a diverged run, as NaN "
        "does (a loss that blew up, e.g. 6.0 for Marin's tables; default: NaN/inf and values far "
        "past the rest of their rung; inf: every finite value is fitted)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the posterior draws (default: 0, as in Python: the same answer every run)",
    )
    parser.add_argument(
        "--log-params",
        metavar="A,B",
        help="the parameters fitted in log space (default: every positive one); a parameter "
        "left out is fitted linearly",
    )


def _add_target(parser: argparse.ArgumentParser) -> None:
    """``--target`` and ``--level``, shared by extrapolate and report."""
    parser.add_argument(
        "--target",
        required=True,
        metavar="NAME=V,...",
        help="the target scale, e.g. width=4096,dataset_size=1e7",
    )
    parser.add_argument("--level", type=float, default=0.9, help="interval coverage (default 0.9)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``transfersearch`` command."""
    parser = argparse.ArgumentParser(
        prog="transfersearch",
        description="Tune AdamW on small proxy models, fit how the optimum moves with scale, and "
        "carry it to the big run.",
        epilog="Start with `transfersearch demo`. Bad input exits with status 2 and one line "
        "'error: ...' on stderr; a warning is one line 'warning: ...' there.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_installed_commands(sub)
    _add_extrapolate(sub)
    _add_validate(sub)
    _add_report(sub)
    return parser


def _add_extrapolate(sub: Any) -> None:
    ext = sub.add_parser(
        "extrapolate",
        help="predict the optimal hyperparameters at a target scale",
        description="Fit one model of every proxy trial (a valley whose optimum moves with scale "
        "as a power law) and predict the optimum at --target with its interval, the posterior "
        "predictive calibrated on walk-forward folds (docs/science.md §7).",
    )
    _add_source(ext)
    _add_target(ext)
    ext.add_argument(
        "--candidates",
        type=int,
        metavar="K",
        help="also print the K target runs with the least expected best loss among them "
        "(1 is the decision; each with its expected regret and P(diverge))",
    )
    ext.set_defaults(handler=_cmd_extrapolate)


def _add_validate(sub: Any) -> None:
    val = sub.add_parser(
        "validate",
        help="hold out the largest proxy scale, predict it from the others",
        description="Fit the laws without the largest proxy scale, predict its optimum and compare "
        "with its own trials: how far to trust the law before the big run.",
    )
    _add_source(val)
    val.add_argument(
        "--held-out", metavar="NAME=V,...", help="the scale to hold out (default: largest)"
    )
    val.set_defaults(handler=_cmd_validate)


def _add_report(sub: Any) -> None:
    rep = sub.add_parser(
        "report",
        help="draw the proxy landscapes and the optimum-vs-scale laws to a PNG",
        description="Extrapolate to --target and draw the metric vs each parameter per rung and "
        "each optimum vs compute with the law, its interval and the target.",
    )
    _add_source(rep)
    _add_target(rep)
    rep.add_argument(
        "--out",
        default="report.png",
        metavar="FILE",
        help="output picture: .png (default report.png), .pdf, .svg, ...; a name "
        "without extension gets .png, an existing folder gets report.png inside",
    )
    rep.add_argument(
        "--html", metavar="FILE", help="also write the interactive plotly figures to FILE (.html)"
    )
    rep.add_argument(
        "--plotlyjs",
        choices=("inline", "cdn", "directory"),
        default="inline",
        help="with --html: where the page gets plotly.js: inline (default, one self-contained "
        "file of about 4.8 MB), cdn (tens of kB, loads plotly.js from the network when opened) or "
        "directory (a small page and plotly.min.js beside it; works offline)",
    )
    _add_publish(rep)
    rep.set_defaults(handler=_cmd_report)


def _add_publish(rep: argparse.ArgumentParser) -> None:
    """report's flags that write to the study (--publish, --artifact-dir)."""
    rep.add_argument(
        "--publish",
        action="store_true",
        help="with --storage: write the report to the study for optuna-dashboard (report.png and "
        "laws.json as artifacts, the target's decision as a user attribute and the note); "
        "without it report only reads",
    )
    rep.add_argument(
        "--artifact-dir",
        metavar="DIR",
        help="with --publish: optuna-dashboard's artifact folder for the report and the laws "
        "(default: <db>-artifacts beside a SQLite file)",
    )


def _add_installed_commands(sub: Any) -> None:
    """Add the subcommands named in the :data:`COMMANDS_GROUP` entry points (e.g. ``demo``)."""
    entries = sorted(importlib.metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name)
    for entry in entries:
        try:
            add = entry.load()
        except ImportError as exc:
            logger.warning("subcommand %r (%s) cannot be loaded: %s", entry.name, entry.value, exc)
            continue
        add(sub)


#: Keywords the library's messages name that the command line spells as flags: those that take
#: names (a list ``[...]``, or nothing: ``params=,``) and those that take a number.
_NAME_FLAGS = ("log_params", "params", "scale_columns")
_NUMBER_FLAGS = ("diverged_beyond", "divergence_cost")
#: An object's repr in a message (``Scale(width=64, params=98688)``): its keywords are its fields,
#: never the command line's options.
_REPR = re.compile(r"\b[A-Z]\w*\(")


def _flag(match: re.Match[str]) -> str:
    return "--" + match[1].replace("_", "-")


def _spell_options(text: str) -> str:
    """``name=`` → ``--name`` where ``name=`` is one of the options: a name-valued one followed by
    a list or nothing, a number-valued one by a number or nothing. ``params=98688`` (a scale
    variable named ``params``) and ``params=...`` are left as written."""
    bare = r"(?=[\s,;:)]|$)"
    for names, value in ((_NAME_FLAGS, r"(?=\[)"), (_NUMBER_FLAGS, r"(?=[\d.+-]|inf\b)")):
        alternatives = "|".join(names)
        text = re.sub(rf"\b({alternatives})={value}", lambda m: _flag(m) + " ", text)
        text = re.sub(rf"\b({alternatives})={bare}", _flag, text)
    return text


def cli_spelling(message: str) -> str:
    """A library message with its option keywords spelled as this command line's flags
    (``log_params=[...]`` → ``--log-params [...]``, ``diverged_beyond=math.inf`` →
    ``--diverged-beyond inf``). Only option names are rewritten: an object's repr
    (``Scale(..., params=98688)``) and a scale variable's value keep their spelling."""
    message = message.replace("=math.inf", "=inf")
    pieces, start = [], 0
    for opening in _REPR.finditer(message):
        if opening.start() < start:
            continue  # inside a repr already kept
        depth, end = 0, len(message)
        for index in range(opening.end() - 1, len(message)):
            depth += {"(": 1, ")": -1}.get(message[index], 0)
            if depth == 0:
                end = index + 1
                break
        pieces += [_spell_options(message[start : opening.start()]), message[opening.start() : end]]
        start = end
    return "".join([*pieces, _spell_options(message[start:])])


def _format_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """The library's warnings as one line ``warning: ...`` in the flags' spelling; others as
    Python formats them."""
    if issubclass(category, TransferSearchWarning):
        return f"warning: {cli_spelling(' '.join(str(message).split()))}\n"
    return _PYTHON_FORMAT(message, category, filename, lineno, line)


_PYTHON_FORMAT = warnings.formatwarning


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 bad input). The library's warnings
    print as ``warning: ...`` lines on stderr, in the flags' spelling."""
    parser = build_parser()
    args = parser.parse_args(argv)
    before, warnings.formatwarning = warnings.formatwarning, _format_warning
    try:
        status: int = args.handler(args)
    except (TransferSearchError, ImportError, OSError) as exc:
        message = " ".join(str(exc).split())
        storage = getattr(args, "storage", None)
        if storage:  # a message quoting the URL (e.g. a driver's) never shows its password
            message = message.replace(storage, redact_url(storage))
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        warnings.formatwarning = before
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

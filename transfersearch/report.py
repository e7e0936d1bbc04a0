"""Plots and tables of a transfer: the proxy landscapes, the optimum-vs-scale laws, the target.

matplotlib is imported only when drawing (``pip install 'transfersearch[plot]'``), so the core keeps
needing numpy and scipy alone; figures are plain ``Figure`` objects (:func:`new_figure`), so drawing
never switches the user's backend. :func:`format_table` is plain text and needs nothing.

The picture has two rows and one column per swept parameter:

- top: the metric against the parameter, one colour per rung (proxy scale), each rung's estimated
  optimum as a dashed vertical line; diverged trials as crosses at the top edge;
- bottom: the estimated optimum against relative compute (width² × dataset_size × epochs, see
  :func:`transfersearch.cost.default_cost`), with error bars, the fitted law drawn along the
  geometric path from the smallest rung to the target, and the target's prediction with its interval.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from transfersearch.cost import by_cost, default_cost
from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.extrapolate import Extrapolation

__all__ = ["format_table", "new_figure", "plot_report"]

MAX_LOG_BAR = (
    5.0  # widest error bar drawn on a log axis, in log units (a factor e^5 ~ 150 each way)
)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table with aligned columns; floats are written with 4 significant digits.

    Args:
        headers: column titles.
        rows: one sequence of cells per row, as long as ``headers``.

    Returns:
        The table, lines joined by newlines (no trailing newline).

    Raises:
        TransferSearchError: a row's length differs from the headers'.
    """
    cells: list[list[str]] = [[str(h) for h in headers]]
    for index, row in enumerate(rows):
        values = list(row)
        if len(values) != len(headers):
            raise TransferSearchError(
                f"format_table: row {index} has {len(values)} cells but there are {len(headers)} "
                "headers. Give one cell per header."
            )
        cells.append([_cell(v) for v in values])
    widths = [max(len(line[i]) for line in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def new_figure(**kwargs: Any) -> Any:
    """A ``matplotlib.figure.Figure(**kwargs)`` that belongs to no pyplot window: drawing it
    changes neither the process's backend nor pyplot's figure list (a notebook still shows it).

    Raises:
        ImportError: matplotlib is not installed (``pip install 'transfersearch[plot]'``).
    """
    try:
        figure_module = importlib.import_module("matplotlib.figure")
    except ImportError as exc:
        raise ImportError(
            f"plotting needs matplotlib: pip install 'transfersearch[plot]' ({exc})."
        ) from exc
    return figure_module.Figure(**kwargs)


def _output_path(path: str | Path) -> Path:
    """The file :func:`plot_report` writes: ``.png`` added to a bare name, ``report.png`` inside a
    folder; an extension matplotlib cannot write is refused before anything is drawn."""
    out = Path(path)
    if out.is_dir():
        out = out / "report.png"
    elif not out.suffix:
        out = out.with_name(f"{out.name}.png")
    backend_bases = importlib.import_module("matplotlib.backend_bases")
    formats = sorted(backend_bases.FigureCanvasBase.get_supported_filetypes())
    if out.suffix[1:].lower() not in formats:
        raise TransferSearchError(
            f"cannot write a picture to {str(path)!r}: matplotlib does not know the extension "
            f"{out.suffix!r}. End the name in one of {', '.join('.' + f for f in formats)} "
            "(e.g. report.png)."
        )
    return out


def path_scales(start: Scale, end: Scale, names: Sequence[str], points: int) -> list[Scale]:
    """Scales on the geometric path from ``start`` to ``end`` over ``names``."""
    path = []
    for i in range(points):
        t = i / (points - 1)
        path.append(
            Scale({n: math.exp((1 - t) * math.log(start[n]) + t * math.log(end[n])) for n in names})
        )
    return path


def plot_report(
    observations: Sequence[Observation],
    extrapolation: Extrapolation,
    path: str | Path,
    *,
    level: float = 0.9,
    title: str | None = None,
    marks: Mapping[str, Mapping[str, float]] | None = None,
) -> Path:
    """Draw the proxy landscapes and the optimum-vs-scale laws into a PNG file.

    Args:
        observations: the proxy trials (any state; diverged ones are drawn as crosses).
        extrapolation: the result of :func:`transfersearch.extrapolate` on those trials.
        path: where to write the picture. Its extension picks the format (``.png``, ``.pdf``,
            ``.svg``, or any other matplotlib writes); a name without one gets ``.png``, and an
            existing folder gets ``report.png`` inside it.
        level: coverage of the target's interval (default 0.9).
        title: a title for the figure.
        marks: other points to show at the target, label -> parameter values (e.g. the
            baselines' settings expressed in the same coordinates).

    Returns:
        The path written (with the ``.png`` or ``report.png`` added, if any).

    Raises:
        TransferSearchError: there are no observations, the extrapolation predicts no parameter,
            or ``path`` has an extension matplotlib cannot write.
        ImportError: matplotlib is not installed.
    """
    params = list(extrapolation.params)
    if not params:
        raise TransferSearchError("plot_report: the extrapolation predicts no parameter.")
    obs = list(observations)
    if not obs:
        raise TransferSearchError(
            "plot_report needs the proxy observations, but got none. Pass the trials you fitted."
        )
    figure = new_figure(figsize=(5.2 * len(params), 8.4))
    colormaps = importlib.import_module("matplotlib").colormaps
    out = _output_path(path)
    scales = by_cost({o.scale for o in obs})
    colors = colormaps["viridis"]
    color_of = {s: colors(i / max(1, len(scales) - 1)) for i, s in enumerate(scales)}
    axes = figure.subplots(2, len(params), squeeze=False)
    optimum_of = {o.scale: o for o in extrapolation.optima}
    finite = [o.value for o in obs if o.usable]
    low = min(finite) if finite else 0.0
    spread = (sorted(finite)[len(finite) // 2] - low) if finite else 1.0
    top = low + 2.5 * max(spread, 1e-12)
    for column, name in enumerate(params):
        ax = axes[0][column]
        for scale in scales:
            here = [o for o in obs if o.scale == scale and name in o.params]
            good = [o for o in here if o.usable]
            bad = [o for o in here if o.diverged]
            label = ", ".join(f"{k}={_short(v)}" for k, v in scale.items())
            ax.scatter(
                [o.params[name] for o in good],
                [min(o.value, top) for o in good],
                s=14,
                color=color_of[scale],
                label=label,
            )
            if bad:
                ax.scatter(
                    [o.params[name] for o in bad],
                    [top] * len(bad),
                    marker="x",
                    s=18,
                    color=color_of[scale],
                )
            if scale in optimum_of:
                ax.axvline(optimum_of[scale].params[name], color=color_of[scale], ls="--", lw=1)
        if name in extrapolation.log_params:
            ax.set_xscale("log")
        ax.set_ylim(low - 0.05 * (top - low), top + 0.05 * (top - low))
        ax.set_xlabel(name)
        ax.set_ylabel("metric" if column else "metric (proxy trials)")
        ax.set_title(f"{name} per rung (dashed: estimated optimum)", fontsize=9)
        if column == 0:
            ax.legend(fontsize=6, loc="upper right")
        _law_panel(axes[1][column], name, extrapolation, scales, color_of, level, marks or {})
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110, format=out.suffix[1:].lower())
    return out


def _short(value: float) -> str:
    return f"{value:g}" if value < 1e5 else f"{value:.2g}"


def _law_panel(
    ax: Any,
    name: str,
    extrapolation: Extrapolation,
    scales: Sequence[Scale],
    color_of: Mapping[Scale, Any],
    level: float,
    marks: Mapping[str, Mapping[str, float]],
) -> None:
    """Bottom row: optimum vs compute, the law along the path to the target, the target interval."""
    target = extrapolation.target
    law = extrapolation.laws[name]
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    log_space = name in extrapolation.log_params
    base_cost = default_cost(scales[0])
    for optimum in extrapolation.optima:
        point = optimum.params[name]
        err = optimum.stderr.get(name, math.inf)
        # A rung whose optimum is barely located (interval wider than e^±MAX_LOG_BAR) gets a hollow
        # marker and no bar: the bar would swamp the panel (and overflow exp()).
        located = math.isfinite(err) and (not log_space or z * err <= MAX_LOG_BAR)
        if located:
            if log_space:
                yerr = [[point - point * math.exp(-z * err)], [point * math.exp(z * err) - point]]
            else:
                yerr = [[z * err], [z * err]]
        else:
            yerr = None
        ax.errorbar(
            default_cost(optimum.scale) / base_cost,
            point,
            yerr=yerr,
            fmt="o",
            color=color_of.get(optimum.scale, "black"),
            markerfacecolor=None if located else "none",
            capsize=3,
        )
    names = sorted(law.exponents)
    start = scales[0]
    shared = [n for n in target if n in start]
    if all(n in shared for n in names):
        path = path_scales(start, target, shared, 40)
        xs = [default_cost(s) / base_cost for s in path]
        ax.plot(xs, [law.predict(s) for s in path], color="tab:red", lw=1.5, label="fitted law")
        for optimum in extrapolation.optima:
            if all(n in optimum.scale for n in names):
                ax.scatter(
                    default_cost(optimum.scale) / base_cost,
                    law.predict(optimum.scale),
                    marker="_",
                    s=120,
                    color="tab:red",
                )
    interval = extrapolation.interval(level)[name]
    predicted = extrapolation.params[name]
    target_x = default_cost(target) / base_cost
    ax.errorbar(
        target_x,
        predicted,
        yerr=[[predicted - interval[0]], [interval[1] - predicted]],
        fmt="*",
        ms=12,
        color="tab:red",
        capsize=4,
        label=f"target {int(level * 100)}% interval",
    )
    ax.axvline(target_x, color="grey", ls=":", lw=1)
    for index, (label, values) in enumerate(marks.items()):
        if name in values:
            ax.scatter(
                target_x * (1.15 + 0.15 * index),
                values[name],
                marker="D",
                s=30,
                label=label,
            )
    ax.set_xscale("log")
    shown = [o.params[name] for o in extrapolation.optima] + [predicted, *interval]
    shown += [values[name] for values in marks.values() if name in values]
    if log_space:
        ax.set_yscale("log")
        positive = [v for v in shown if v > 0]
        if positive:  # error bars wider than this are clipped: they would hide the points
            ax.set_ylim(min(positive) / 3.0, max(positive) * 3.0)
    else:
        span = (max(shown) - min(shown)) or 1.0
        ax.set_ylim(min(shown) - 0.5 * span, max(shown) + 0.5 * span)
    exponents = ", ".join(f"{k}^{v:+.2f}" for k, v in sorted(law.exponents.items()))
    ax.set_title(f"optimal {name} ∝ {exponents or 'const'}", fontsize=9)
    ax.set_xlabel("relative compute (width² × dataset_size × epochs)")
    ax.set_ylabel(f"optimal {name}")
    ax.legend(fontsize=7, loc="best")

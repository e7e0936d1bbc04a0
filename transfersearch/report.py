"""Plots and tables of a transfer: the proxy landscapes, the optimum-vs-scale laws, the target.

matplotlib is imported only when drawing (``pip install 'transfersearch[plot]'``), so the core keeps
needing numpy and scipy alone; figures are plain ``Figure`` objects (:func:`new_figure`), so drawing
never switches the user's backend. :func:`format_table` is plain text and needs nothing.

The picture has two rows and one column per swept parameter:

- top: the metric against the parameter, one colour per rung (proxy scale), each rung's estimated
  optimum as a dashed vertical line. The metric axis stops at 2.5× the median trial's distance above
  the best (so the valley fills the panel); trials above it are open triangles on the top edge,
  diverged trials (NaN or inf metric) crosses there, and crashed trials (they raised: no verdict on
  the hyperparameters) open squares on the bottom edge, each counted in the panel's title;
- bottom: the estimated optimum against relative compute (model size × data, see
  :func:`transfersearch.cost.default_cost`), with error bars, the fitted law drawn along the
  geometric path from the smallest rung to the target with the law's own band, and the target's
  decision with its prediction interval (:data:`BAND_NOTE` says how the two differ).

Scale variables the ladder never varied are named once (in the figure's title) instead of in every
rung's label, and left out of the laws' titles when their exponent is 0.
"""

from __future__ import annotations

import importlib
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transfersearch._figure_info import (
    BAND_NOTE,
    LandscapeInfo,
    LawPanelInfo,
    LawPath,
    constant_names,
    landscape_info,
    law_panel_info,
    law_terms,
    rung_label,
    short_number,
)
from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.fitting.result import Extrapolation

__all__ = [
    "BAND_NOTE",
    "constant_names",
    "draw_report",
    "format_table",
    "law_terms",
    "new_figure",
    "plot_report",
    "rung_label",
]

#: Longest line of a panel title, in characters (a 5.2-inch panel at font size 9 holds about 60).
TITLE_WIDTH = 52


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
    try:
        backend_bases = importlib.import_module("matplotlib.backend_bases")
    except ImportError as exc:
        raise ImportError(
            f"plotting needs matplotlib: pip install 'transfersearch[plot]' ({exc})."
        ) from exc
    formats = sorted(backend_bases.FigureCanvasBase.get_supported_filetypes())
    if out.suffix[1:].lower() not in formats:
        raise TransferSearchError(
            f"cannot write a picture to {str(path)!r}: matplotlib does not know the extension "
            f"{out.suffix!r}. End the name in one of {', '.join('.' + f for f in formats)} "
            "(e.g. report.png)."
        )
    return out


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
        observations: the proxy trials (any state; diverged ones are drawn as crosses on the
            top edge, crashed ones as open squares on the bottom edge).
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
    obs = _checked(observations, extrapolation, "plot_report")
    out = _output_path(path)
    figure = draw_report(obs, extrapolation, level=level, title=title, marks=marks)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110, format=out.suffix[1:].lower())
    return out


def draw_report(
    observations: Sequence[Observation],
    extrapolation: Extrapolation,
    *,
    level: float = 0.9,
    title: str | None = None,
    marks: Mapping[str, Mapping[str, float]] | None = None,
) -> Any:
    """The picture :func:`plot_report` writes, as a ``matplotlib.figure.Figure`` of no pyplot
    window (:func:`new_figure`): show it in a notebook, or save it yourself.

    Args:
        observations, extrapolation, level, title, marks: as for :func:`plot_report`.

    Raises:
        TransferSearchError: there are no observations, or the extrapolation predicts no
            parameter. ImportError: matplotlib is not installed.
    """
    obs = _checked(observations, extrapolation, "draw_report")
    params = list(extrapolation.params)
    figure = new_figure(figsize=(5.2 * len(params), 8.4))
    trials = landscape_info(obs, extrapolation, params)
    color_of = _rung_colors(trials.scales)
    axes = figure.subplots(2, len(params), squeeze=False)
    for column, name in enumerate(params):
        _landscape_panel(axes[0][column], trials, name, color_of, first=column == 0)
        panel = law_panel_info(extrapolation, name, level=level, start=trials.scales[0])
        _law_panel(axes[1][column], panel, color_of, marks or {})
    _head(figure, axes[0][0], title, trials.constant, _decision_line(extrapolation))
    return figure


def _decision_line(extrapolation: Extrapolation) -> str:
    """``target dataset_size=1e+07, width=4096: decision base_lr=0.0123, tau_epoch=0.55``."""
    target = ", ".join(f"{k}={short_number(v)}" for k, v in extrapolation.target.items())
    decision = ", ".join(f"{k}={v:.3g}" for k, v in extrapolation.params.items())
    return f"target {target}: decision {decision}"


def _checked(
    observations: Sequence[Observation], extrapolation: Extrapolation, caller: str
) -> list[Observation]:
    """The trials as a list, once it is known that there are some and parameters to draw."""
    if not extrapolation.params:
        raise TransferSearchError(f"{caller}: the extrapolation predicts no parameter.")
    obs = list(observations)
    if not obs:
        raise TransferSearchError(
            f"{caller} needs the proxy observations, but got none. Pass the trials you fitted."
        )
    return obs


#: A log x axis labels its minor ticks (2 and 5 × a power of ten) only while it spans at most
#: this many decades (:func:`_log_x`): past it they print over the powers of ten.
MINOR_LABEL_DECADES = 2.0
#: The rungs' colours, in cost order: matplotlib's tab10 without its red (the law, the target
#: and its decision are red) and its grey (the marks at the target are grey and black).
RUNG_PALETTE = (0, 1, 2, 4, 5, 6, 8, 9)
#: Most rungs drawn in distinct qualitative colours; a longer ladder goes along viridis,
#: cheapest darkest, whose neighbours then look alike.
DISTINCT_COLORS = len(RUNG_PALETTE)
#: Markers of the other points at the target (``marks``), in black and grey.
MARK_STYLES = (("D", "black"), ("s", "dimgrey"), ("P", "black"), ("X", "dimgrey"))


def _rung_colors(scales: Sequence[Scale]) -> dict[Scale, Any]:
    """One colour per rung: tab10's distinct colours in cost order (:data:`RUNG_PALETTE`;
    viridis past eight rungs, where six of its shades already looked alike in pairs)."""
    colormaps = importlib.import_module("matplotlib").colormaps
    if len(scales) <= DISTINCT_COLORS:
        return {s: colormaps["tab10"](RUNG_PALETTE[i]) for i, s in enumerate(scales)}
    colors = colormaps["viridis"]
    return {s: colors(i / max(1, len(scales) - 1)) for i, s in enumerate(scales)}


def _head(
    figure: Any, first: Any, title: str | None, constant: Mapping[str, float], decision: str
) -> None:
    """The figure's title (what the caller names, the target and its decision, the scale
    variables every rung shares), the rungs' legend above the panels, and the layout that keeps
    clear of both."""
    handles, labels = first.get_legend_handles_labels()
    heading = [title] if title else []
    heading.append(decision)
    if constant:
        heading.append(
            "every rung: " + ", ".join(f"{k}={short_number(v)}" for k, v in constant.items())
        )
    columns = min(3, max(1, len(labels)))
    rows = -(-len(labels) // columns)
    # the legend's rows (0.16" each at font size 7) as a figure fraction; tight_layout already
    # keeps clear of the suptitle
    head = 0.16 * rows / 8.4
    if heading:
        figure.suptitle("\n".join(heading), fontsize=10, y=0.995)
    figure.legend(
        handles,
        labels,
        loc="upper center",
        ncol=columns,
        fontsize=7,
        frameon=False,
        bbox_to_anchor=(0.5, 1.0 - 0.22 * len(heading) / 8.4),
    )
    figure.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - head))


def _landscape_panel(
    ax: Any, info: LandscapeInfo, name: str, color_of: Mapping[Scale, Any], *, first: bool
) -> None:
    """Top row: the metric against ``name``, one colour per rung, the axis clipped at
    ``info.clip`` (trials above it and diverged ones marked on the top edge, crashed ones on the
    bottom edge, each counted)."""
    top, low = info.clip, info.best
    clipped: list[float] = []
    diverged = crashed = 0
    for rung in info.panels[name]:
        color = color_of[rung.scale]
        inside = [(x, v) for x, v in rung.usable if v <= top]
        above = [(x, v) for x, v in rung.usable if v > top]
        ax.scatter(
            [x for x, _ in inside], [v for _, v in inside], s=14, color=color, label=rung.label
        )
        if above:  # beyond the axis: an open triangle on the edge, never a point at a value
            ax.scatter(
                [x for x, _ in above],
                [top] * len(above),
                marker="^",
                s=22,
                facecolors="none",
                edgecolors=color,
            )
            clipped += [v for _, v in above]
        if rung.diverged:
            ax.scatter(
                list(rung.diverged), [top] * len(rung.diverged), marker="x", s=18, color=color
            )
            diverged += len(rung.diverged)
        if rung.crashed:  # raised: no metric, no verdict; apart from the divergences
            bottom = low - 0.05 * (top - low)
            ax.scatter(
                list(rung.crashed),
                [bottom] * len(rung.crashed),
                marker="s",
                s=20,
                facecolors="none",
                edgecolors=color,
                clip_on=False,
            )
            crashed += len(rung.crashed)
        if rung.optimum is not None:
            ax.axvline(rung.optimum, color=color, ls="--", lw=1)
    if name in info.log_params:
        _log_x(ax)
    ax.set_ylim(low - 0.05 * (top - low), top + 0.05 * (top - low))
    ax.set_xlabel(name)
    ax.set_ylabel("metric (proxy trials)" if first else "metric")
    ax.set_title(
        _fit(f"{name} per rung (dashed: estimated optimum)")
        + _edge_note(clipped, diverged, top, crashed),
        fontsize=9,
    )


def _log_x(ax: Any) -> None:
    """A log x axis that labels its minor ticks at 2 and 5 × a power of ten only, and only
    while it spans at most :data:`MINOR_LABEL_DECADES`: on an axis spanning about a decade
    matplotlib labels every one it shows (``2×10⁻³``, ``3×10⁻³``, ``4×10⁻³``, ``6×10⁻³``), and
    on one of several decades (a ladder's compute) even the 2s and 5s print over the powers of
    ten; there the powers of ten alone are labelled."""
    from matplotlib.ticker import FuncFormatter

    def minor(value: float, position: int | None = None) -> str:
        low, high = ax.get_xlim()
        if low > 0 and math.log10(high / low) > MINOR_LABEL_DECADES:
            return ""
        return _minor_label(value, position)

    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(FuncFormatter(minor))


def _minor_label(value: float, _position: int | None = None) -> str:
    """``2×10⁻³`` (mathtext) for a tick at 2 or 5 times a power of ten, else no label."""
    if not value > 0:
        return ""
    exponent = math.floor(math.log10(value) + 1e-9)
    coefficient = round(value / 10.0**exponent)
    return f"${coefficient}\\times10^{{{exponent}}}$" if coefficient in (2, 5) else ""


def _fit(text: str, width: int = TITLE_WIDTH) -> str:
    """``text`` broken into lines a panel's title holds (matplotlib cuts, it does not wrap)."""
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False))


def _edge_note(clipped: Sequence[float], diverged: int, top: float, crashed: int = 0) -> str:
    """Title lines counting what sits on the edges: clipped trials (▲) and diverged (×) on the
    top one, crashed (□: the run raised, not a divergence) on the bottom one."""
    parts = []
    if clipped:
        parts.append(f"▲ {len(clipped)} above {top:.4g} (worst {max(clipped):.4g})")
    if diverged:
        parts.append(f"× {diverged} diverged")
    note = "\n" + _fit("; ".join(parts) + ": on the top edge") if parts else ""
    if crashed:
        note += "\n" + _fit(f"□ {crashed} crashed (raised, not diverged): on the bottom edge")
    return note


def _law_panel(
    ax: Any,
    info: LawPanelInfo,
    color_of: Mapping[Scale, Any],
    marks: Mapping[str, Mapping[str, float]],
) -> None:
    """Bottom row: optimum vs compute, the law along the path to the target, the target interval."""
    for rung in info.rungs:  # a barely located optimum: hollow, no bar (it would swamp the panel)
        bar = rung.bar
        ax.errorbar(
            rung.compute,
            rung.value,
            yerr=None if bar is None else [[rung.value - bar[0]], [bar[1] - rung.value]],
            fmt="o",
            color=color_of.get(rung.scale, "black"),
            markerfacecolor=None if bar is not None else "none",
            capsize=3,
        )
    if info.path is not None:
        _law_path(ax, info.path, info)
    low, high = info.drawn_interval
    decision, target = info.decision, info.target_compute
    # the interval as a capped line and the decision as a star, drawn apart: the decision need
    # not lie inside the interval (a divergence cost may move it), and an error bar cannot say so
    ax.vlines(target, low, high, color="tab:red", lw=1.5)
    ax.scatter([target, target], [low, high], marker="_", s=60, color="tab:red")
    ax.plot(
        [target],
        [decision],
        marker="*",
        ms=12,
        ls="none",
        color="tab:red",
        label=f"target: decision, {info.percent} prediction interval",
    )
    _moved_decision(ax, info)
    ax.axvline(target, color="grey", ls=":", lw=1)
    for index, (label, values) in enumerate(marks.items()):
        marker, color = MARK_STYLES[index % len(MARK_STYLES)]
        if info.param in values:
            ax.scatter(
                target * (1.15 + 0.15 * index),
                values[info.param],
                marker=marker,
                s=30,
                color=color,
                label=label,
            )
    _log_x(ax)
    _law_limits(ax, info, marks)
    ax.set_title(_fit(f"optimal {info.param} ∝ {info.law_terms}"), fontsize=9)
    ax.set_xlabel("relative compute (model size × data, default_cost)")
    ax.set_ylabel(f"optimal {info.param}")
    ax.legend(fontsize=7, loc="best")


def _moved_decision(ax: Any, info: LawPanelInfo) -> None:
    """Why the decision is where it is, where it moved away from the law's own point: that point
    (hollow star) and the largest value a stable trial reached at the costliest rung (dotted)."""
    if info.law_point is None:
        return
    ax.plot(
        [info.target_compute],
        [info.law_point],
        marker="*",
        ms=12,
        ls="none",
        markerfacecolor="none",
        color="tab:red",
        label="the law's own point (the decision moved from it)",
    )
    if info.stable_up_to is not None:
        ax.axhline(
            info.stable_up_to,
            color="grey",
            ls=(0, (1, 2)),
            lw=1,
            label="stable up to (costliest rung's trials)",
        )


def _law_path(ax: Any, path: LawPath, info: LawPanelInfo) -> None:
    """The law along its path with its own band, and a tick where it passes each rung."""
    ax.plot(path.compute, path.centre, color="tab:red", lw=1.5, label="fitted law")
    ax.fill_between(
        path.compute,
        path.lower,
        path.upper,
        color="tab:red",
        alpha=0.12,
        lw=0,
        label=f"law's own {info.percent} band",
    )
    for rung in info.rungs:
        if rung.law_value is not None:
            ax.scatter(rung.compute, rung.law_value, marker="_", s=120, color="tab:red")


def _law_limits(ax: Any, info: LawPanelInfo, marks: Mapping[str, Mapping[str, float]]) -> None:
    """The optimum axis holds the rungs, the decision, its interval and the marks; wider error
    bars are clipped (they would hide the points); an unbounded end (0 / inf) is left out."""
    shown = [r.value for r in info.rungs] + [info.decision, *info.drawn_interval]
    if info.law_point is not None:
        shown += [v for v in (info.law_point, info.stable_up_to) if v is not None]
    shown += [values[info.param] for values in marks.values() if info.param in values]
    shown = [v for v in shown if math.isfinite(v)]
    if info.log_space:
        ax.set_yscale("log")
        positive = [v for v in shown if v > 0]
        if positive:
            ax.set_ylim(min(positive) / 3.0, max(positive) * 3.0)
    else:
        span = (max(shown) - min(shown)) or 1.0
        ax.set_ylim(min(shown) - 0.5 * span, max(shown) + 0.5 * span)

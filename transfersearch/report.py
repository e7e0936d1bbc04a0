"""Plots and tables of a transfer: the proxy landscapes, the optimum-vs-scale laws, the target.

matplotlib is imported only when drawing (``pip install 'transfersearch[plot]'``), so the core keeps
needing numpy and scipy alone; figures are plain ``Figure`` objects (:func:`new_figure`), so drawing
never switches the user's backend. :func:`format_table` is plain text and needs nothing.

The picture has two rows and one column per swept parameter:

- top: the metric against the parameter, one colour per rung (proxy scale), each rung's estimated
  optimum as a dashed vertical line. The metric axis stops at 2.5× the median trial's distance above
  the best (so the valley fills the panel); trials above it are open triangles on the top edge and
  diverged trials crosses there, each counted in the panel's title;
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
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from transfersearch.cost import by_cost, default_cost
from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.extrapolate import Extrapolation

__all__ = [
    "BAND_NOTE",
    "constant_names",
    "format_table",
    "law_terms",
    "new_figure",
    "plot_report",
    "rung_label",
]

MAX_LOG_BAR = (
    5.0  # widest error bar drawn on a log axis, in log units (a factor e^5 ~ 150 each way)
)
#: Largest log value turned back into a number for a figure (exp(700) ~ 1e304 < float max).
_MAX_EXP = 700.0


def band_ends(coord: float, stderr: float, z: float, log_space: bool) -> tuple[float, float, float]:
    """(centre, low, high) of ``coord ± z·stderr`` in natural units, for a figure.

    On a log axis the band is cut at ``MAX_LOG_BAR`` log units either side (a law whose band is
    wider than a factor e^5 each way says "unknown" there, and an uncut band would overflow exp()
    and swamp the panel); :data:`BAND_NOTE` says so.
    """
    half = z * stderr if math.isfinite(stderr) else math.inf
    if not log_space:
        return coord, coord - half, coord + half
    half = min(half, MAX_LOG_BAR)
    centre = max(min(coord, _MAX_EXP), -_MAX_EXP)
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


#: The metric axis of the landscapes ends this many times the median trial's distance above the
#: best trial: the valley around the optimum fills the panel, the far slopes are marked as clipped.
CLIP_SPREADS = 2.5
#: Longest line of a panel title, in characters (a 5.2-inch panel at font size 9 holds about 60).
TITLE_WIDTH = 52
#: How the law's band and the target's interval differ (both pictures say it).
BAND_NOTE = (
    "band: the law's own uncertainty (its fitted coefficients and the rungs' scatter about it; "
    "on a log axis cut at a factor e^5 either way); "
    "target bar: the prediction interval of the target's optimum, Extrapolation.interval(), which "
    "also carries the rung-resampling spread, the misfit every rung shares and the scale "
    "directions no rung measured, so it is never narrower than the band's end"
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


def constant_names(scales: Iterable[Scale]) -> dict[str, float]:
    """The scale variables that take one value on every one of ``scales`` (name -> value)."""
    listed = list(scales)
    if len(listed) < 2:
        return {}
    first = listed[0]
    return {
        name: value
        for name, value in first.items()
        if all(name in s and s[name] == value for s in listed[1:])
    }


def rung_label(scale: Scale, constant: Mapping[str, float]) -> str:
    """``scale``'s varying names and values, ``width=64, dataset_size=2e+04`` (the constant ones
    are named once elsewhere)."""
    shown = [f"{k}={_short(v)}" for k, v in scale.items() if k not in constant]
    return ", ".join(shown) or ", ".join(f"{k}={_short(v)}" for k, v in scale.items())


def law_terms(extrapolation: Extrapolation, name: str) -> str:
    """``dataset_size^+0.25 · width^-0.60``: the law's exponents, without a variable the ladder
    never varied whose exponent is 0 (it says nothing); ``const`` when none is left."""
    constant = constant_names(o.scale for o in extrapolation.optima)
    exponents = sorted(extrapolation.laws[name].exponents.items())
    terms = [f"{k}^{v:+.2f}" for k, v in exponents if not (k in constant and v == 0.0)]
    return " · ".join(terms) or "const"


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
    constant = constant_names(scales)
    colors = colormaps["viridis"]
    color_of = {s: colors(i / max(1, len(scales) - 1)) for i, s in enumerate(scales)}
    axes = figure.subplots(2, len(params), squeeze=False)
    optimum_of = {o.scale: o for o in extrapolation.optima}
    finite = [o.value for o in obs if o.usable]
    low = min(finite) if finite else 0.0
    spread = (sorted(finite)[len(finite) // 2] - low) if finite else 1.0
    top = low + CLIP_SPREADS * max(spread, 1e-12 * max(1.0, abs(low)))
    for column, name in enumerate(params):
        ax = axes[0][column]
        clipped: list[float] = []
        diverged = 0
        for scale in scales:
            here = [o for o in obs if o.scale == scale and name in o.params]
            inside = [o for o in here if o.usable and o.value <= top]
            above = [o for o in here if o.usable and o.value > top]
            bad = [o for o in here if o.diverged]
            ax.scatter(
                [o.params[name] for o in inside],
                [o.value for o in inside],
                s=14,
                color=color_of[scale],
                label=rung_label(scale, constant),
            )
            if above:  # beyond the axis: an open triangle on the edge, never a point at a value
                ax.scatter(
                    [o.params[name] for o in above],
                    [top] * len(above),
                    marker="^",
                    s=22,
                    facecolors="none",
                    edgecolors=color_of[scale],
                )
                clipped += [o.value for o in above]
            if bad:
                ax.scatter(
                    [o.params[name] for o in bad],
                    [top] * len(bad),
                    marker="x",
                    s=18,
                    color=color_of[scale],
                )
                diverged += len(bad)
            if scale in optimum_of:
                ax.axvline(optimum_of[scale].params[name], color=color_of[scale], ls="--", lw=1)
        if name in extrapolation.log_params:
            ax.set_xscale("log")
        ax.set_ylim(low - 0.05 * (top - low), top + 0.05 * (top - low))
        ax.set_xlabel(name)
        ax.set_ylabel("metric" if column else "metric (proxy trials)")
        ax.set_title(
            _fit(f"{name} per rung (dashed: estimated optimum)")
            + _edge_note(clipped, diverged, top),
            fontsize=9,
        )
        _law_panel(axes[1][column], name, extrapolation, scales, color_of, level, marks or {})
    handles, labels = axes[0][0].get_legend_handles_labels()
    heading = [title] if title else []
    if constant:
        heading.append("every rung: " + ", ".join(f"{k}={_short(v)}" for k, v in constant.items()))
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
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110, format=out.suffix[1:].lower())
    return out


def _fit(text: str, width: int = TITLE_WIDTH) -> str:
    """``text`` broken into lines a panel's title holds (matplotlib cuts, it does not wrap)."""
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False))


def _edge_note(clipped: Sequence[float], diverged: int, top: float) -> str:
    """A title line counting what sits on the top edge: clipped trials (▲) and diverged (×)."""
    parts = []
    if clipped:
        parts.append(f"▲ {len(clipped)} above {top:.4g} (worst {max(clipped):.4g})")
    if diverged:
        parts.append(f"× {diverged} diverged")
    return "\n" + _fit("; ".join(parts) + ": on the top edge") if parts else ""


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
        lower, upper = [], []
        for scale in path:
            _, low, high = band_ends(*law.predict_coord(scale), z, log_space)
            lower.append(low)
            upper.append(high)
        ax.fill_between(
            xs,
            lower,
            upper,
            color="tab:red",
            alpha=0.12,
            lw=0,
            label=f"law's own {int(level * 100)}% band",
        )
        for optimum in extrapolation.optima:
            if all(n in optimum.scale for n in names):
                ax.scatter(
                    default_cost(optimum.scale) / base_cost,
                    law.predict(optimum.scale),
                    marker="_",
                    s=120,
                    color="tab:red",
                )
    predicted = extrapolation.params[name]
    interval = extrapolation.interval(level)[name]
    if log_space and predicted > 0:  # drawn at most e^MAX_LOG_BAR either way (0 / inf: unbounded)
        reach = math.exp(MAX_LOG_BAR)
        interval = (max(interval[0], predicted / reach), min(interval[1], predicted * reach))
    target_x = default_cost(target) / base_cost
    ax.errorbar(
        target_x,
        predicted,
        yerr=[[predicted - interval[0]], [interval[1] - predicted]],
        fmt="*",
        ms=12,
        color="tab:red",
        capsize=4,
        label=f"target: decision, {int(level * 100)}% prediction interval",
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
    shown = [v for v in shown if math.isfinite(v)]  # an unbounded interval end is 0 / inf
    if log_space:
        ax.set_yscale("log")
        positive = [v for v in shown if v > 0]
        if positive:  # error bars wider than this are clipped: they would hide the points
            ax.set_ylim(min(positive) / 3.0, max(positive) * 3.0)
    else:
        span = (max(shown) - min(shown)) or 1.0
        ax.set_ylim(min(shown) - 0.5 * span, max(shown) + 0.5 * span)
    ax.set_title(_fit(f"optimal {name} ∝ {law_terms(extrapolation, name)}"), fontsize=9)
    ax.set_xlabel("relative compute (model size × data, default_cost)")
    ax.set_ylabel(f"optimal {name}")
    ax.legend(fontsize=7, loc="best")

"""Interactive plotly figures of a transfer, in the style of ``optuna.visualization``.

Each function returns a ``plotly.graph_objects.Figure`` (show it, or save it with
``fig.write_html``); :func:`write_html_report` puts all three into one HTML file. plotly is
imported when a figure is drawn (``pip install 'transfersearch[plot]'``); the PNG report for the
terminal stays in :mod:`transfersearch.report` (matplotlib). Both draw the numbers that
``transfersearch/_figure_info.py`` computes once (the rungs' optima and bars, the law and its band,
the target, the trials of each rung).

.. code-block:: python

    import transfersearch as ts
    from transfersearch import visualization as tsv

    res = ts.extrapolate(study, target=ts.Scale(width=4096, dataset_size=1e7, batch_size=256))
    tsv.plot_rung_landscapes(study, res).show()     # loss vs each coordinate, one colour per rung
    tsv.plot_optimum_vs_scale(res).show()           # optima, the law, its interval, the target
    tsv.plot_walk_forward(res).show()               # each rung predicted from cheaper rungs
"""

from __future__ import annotations

import html
import importlib
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transfersearch._figure_info import (
    BAND_NOTE,
    LandscapeInfo,
    LawPanelInfo,
    LawPath,
    RungOptimum,
    RungTrials,
    landscape_info,
    law_panel_info,
)
from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.fitting.coords import to_natural
from transfersearch.observations import Observation
from transfersearch.readers import as_observations
from transfersearch.report import DISTINCT_COLORS, RUNG_PALETTE
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.fitting.result import Extrapolation

__all__ = [
    "PLOTLYJS",
    "plot_optimum_vs_scale",
    "plot_rung_landscapes",
    "plot_walk_forward",
    "write_html_report",
]

#: ``write_html_report(plotlyjs=...)``: where the page gets plotly.js from. "inline" embeds it
#: (about 4.8 MB, works offline); "cdn" loads it from plotly's CDN (a page of tens of kB, 61 kB
#: for 120 trials, that needs the network to show); "directory" writes ``plotly.min.js`` once
#: beside the page (small pages that share it, offline).
PLOTLYJS = ("inline", "cdn", "directory")


def _plotly() -> tuple[Any, Any]:
    """``(plotly.graph_objects, plotly.subplots.make_subplots)``, or an ImportError naming the fix."""
    try:
        go = importlib.import_module("plotly.graph_objects")
        subplots = importlib.import_module("plotly.subplots")
    except ImportError as exc:
        raise ImportError(
            f"interactive figures need plotly: pip install 'transfersearch[plot]' ({exc})."
        ) from exc
    return go, subplots.make_subplots


def _label(scale: Scale) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in scale.items())


def _every_rung(constant: dict[str, float]) -> str:
    """`` (every rung: batch_size=64)`` for the names the rung labels leave out, or ""."""
    if not constant:
        return ""
    return " (every rung: " + ", ".join(f"{k}={v:g}" for k, v in constant.items()) + ")"


def _colors(count: int) -> list[str]:
    """``count`` colours as in the PNG report: D3's distinct ones (matplotlib's tab10) without
    red and grey (:data:`~transfersearch.report.RUNG_PALETTE`) in cost order, along viridis past
    those."""
    colors = importlib.import_module("plotly.colors")
    if count <= DISTINCT_COLORS:
        return [colors.qualitative.D3[i] for i in RUNG_PALETTE[:count]]
    return list(colors.sample_colorscale("Viridis", [i / (count - 1) for i in range(count)]))


def _observations(source: Any) -> list[Observation]:
    if isinstance(source, (list, tuple)) and all(isinstance(o, Observation) for o in source):
        obs = list(source)
    else:
        obs = as_observations(source)
    if not obs:
        raise TransferSearchError("the figure needs proxy trials, but the source holds none.")
    return obs


def plot_rung_landscapes(
    source: Any, extrapolation: Extrapolation | None = None, *, params: Sequence[str] | None = None
) -> Any:
    """The metric vs each coordinate, one colour per rung (like ``plot_slice``).

    Args:
        source: the proxy trials: a list of :class:`~transfersearch.Observation`, an Optuna study,
            a Ray Tune result grid or experiment directory, a DataFrame.
        extrapolation: if given, each rung's estimated optimum is drawn as a dashed line, and log
            parameters get a log axis.
        params: the coordinates to show (default: the extrapolation's, else every one recorded).

    Returns:
        A ``plotly.graph_objects.Figure`` with one panel per coordinate; diverged trials are drawn
        as crosses on the top edge, crashed ones (they raised) as open squares on the bottom
        edge, both counted in the title.

    Raises:
        TransferSearchError: no trials. ImportError: plotly is not installed.
    """
    go, make_subplots = _plotly()
    obs = _observations(source)
    if params is None:
        params = (
            list(extrapolation.params)
            if extrapolation
            else sorted({n for o in obs for n in o.params})
        )
    info = landscape_info(obs, extrapolation, params)
    figure = make_subplots(rows=1, cols=len(params), subplot_titles=list(params))
    for index, color in enumerate(_colors(len(info.scales))):
        for column, name in enumerate(params, start=1):
            _add_rung_trials(figure, go, info, info.panels[name][index], color, column)
    for column, name in enumerate(params, start=1):
        log_axis = name in info.log_params
        figure.update_xaxes(
            title_text=name, type="log" if log_axis else "linear", row=1, col=column
        )
    figure.update_yaxes(title_text="metric", row=1, col=1)
    figure.update_layout(
        title="Proxy trials per rung (dashed: each rung's estimated optimum)"
        + _every_rung(info.constant)
        + _outcome_counts(obs)
    )
    return figure


def _outcome_counts(obs: Sequence[Observation]) -> str:
    """``<br>× 11 diverged (top edge); □ 4 crashed: raised, not diverged (bottom edge)``, or ""."""
    diverged = sum(o.diverged for o in obs)
    crashed = sum(o.crashed for o in obs)
    parts = [f"× {diverged} diverged (top edge)"] if diverged else []
    if crashed:
        parts.append(f"□ {crashed} crashed: raised, not diverged (bottom edge)")
    return "<br>" + "; ".join(parts) if parts else ""


def _add_rung_trials(
    figure: Any, go: Any, info: LandscapeInfo, rung: RungTrials, color: str, column: int
) -> None:
    """One rung's trials in one panel: its usable ones, its diverged ones as crosses at the top
    (the worst usable metric), its crashed ones (they raised) as open squares at the bottom (the
    best usable metric), its estimated optimum as a dashed line."""
    figure.add_trace(
        go.Scatter(
            x=[x for x, _ in rung.usable],
            y=[v for _, v in rung.usable],
            mode="markers",
            marker={"color": color, "size": 6},
            name=rung.label,
            legendgroup=rung.label,
            showlegend=column == 1,
        ),
        row=1,
        col=column,
    )
    if rung.diverged:
        figure.add_trace(
            go.Scatter(
                x=list(rung.diverged),
                y=[info.worst] * len(rung.diverged),
                mode="markers",
                marker={"color": color, "symbol": "x", "size": 7},
                name=f"{rung.label} (diverged)",
                legendgroup=rung.label,
                showlegend=False,
            ),
            row=1,
            col=column,
        )
    if rung.crashed:
        figure.add_trace(
            go.Scatter(
                x=list(rung.crashed),
                y=[info.best] * len(rung.crashed),
                mode="markers",
                marker={"color": color, "symbol": "square-open", "size": 7},
                name=f"{rung.label} (crashed: raised, not diverged)",
                legendgroup=rung.label,
                showlegend=False,
            ),
            row=1,
            col=column,
        )
    if rung.optimum is not None:
        figure.add_vline(
            x=rung.optimum,
            line={"color": color, "dash": "dash", "width": 1},
            row=1,
            col=column,
        )


def plot_optimum_vs_scale(extrapolation: Extrapolation, *, level: float = 0.9) -> Any:
    """Each rung's optimum vs compute, the fitted law with its interval, and the target.

    The x axis is compute relative to the cheapest rung (:func:`~transfersearch.default_cost`:
    model size × data); the law is drawn along the geometric path from the cheapest
    rung to the target, with the law's own ``level`` band (its fitted coefficients and the optima's
    scatter about it, ``PowerLaw.predict_coord``); the target shows the decision and the
    prediction interval of the target's optimum, :meth:`~transfersearch.Extrapolation.interval`,
    which also carries the rung-resampling spread, the misfit every rung shares and the directions
    no rung measured, so it is wider than the band's end. A note under the figure says so.

    Raises:
        TransferSearchError: ``level`` is not in (0, 1). ImportError: plotly is not installed.
    """
    go, make_subplots = _plotly()
    extrapolation.interval(level)  # validates level
    params = list(extrapolation.params)
    panels = [law_panel_info(extrapolation, name, level=level) for name in params]
    figure = make_subplots(
        rows=1, cols=len(params), subplot_titles=[f"optimal {n}" for n in params]
    )
    for column, info in enumerate(panels, start=1):
        colors = _colors(len(info.rungs)) if info.rungs else []
        for rung, color in zip(info.rungs, colors):
            figure.add_trace(_rung_optimum(go, rung, color, column), row=1, col=column)
        if info.path is not None:
            model = extrapolation.laws[info.param].model
            for trace in _law_traces(go, info.path, info, model, column):
                figure.add_trace(trace, row=1, col=column)
        figure.add_trace(_target_trace(go, info, column), row=1, col=column)
        for trace in _moved_traces(go, info, column):
            figure.add_trace(trace, row=1, col=column)
        figure.update_xaxes(title_text="relative compute", type="log", row=1, col=column)
        figure.update_yaxes(type="log" if info.log_space else "linear", row=1, col=column)
    constant = panels[0].constant if panels else {}
    figure.update_layout(
        title=f"Optimum vs scale: law ({extrapolation.model}) and target "
        f"{_label(extrapolation.target)}{_every_rung(constant)}",
        margin={"b": 150},
        height=560,
    )
    figure.add_annotation(
        text="<br>".join(textwrap.wrap(BAND_NOTE[0].upper() + BAND_NOTE[1:] + ".", width=130)),
        xref="paper",
        yref="paper",
        x=0.0,
        y=-0.32,
        xanchor="left",
        yanchor="top",
        align="left",
        showarrow=False,
        font={"size": 11},
    )
    return figure


def _rung_optimum(go: Any, rung: RungOptimum, color: str, column: int) -> Any:
    """One rung's optimum with its error bar (hollow and without one when barely located)."""
    bar = None
    if rung.bar is not None:
        low, high = rung.bar
        bar = {
            "type": "data",
            "symmetric": False,
            "array": [high - rung.value],
            "arrayminus": [rung.value - low],
        }
    return go.Scatter(
        x=[rung.compute],
        y=[rung.value],
        error_y=bar,
        mode="markers",
        marker={
            "color": color,
            "size": 9,
            "symbol": "circle" if rung.bar is not None else "circle-open",
        },
        name=rung.label,
        legendgroup=rung.label,
        showlegend=column == 1,
    )


def _law_traces(go: Any, path: LawPath, info: LawPanelInfo, model: str, column: int) -> list[Any]:
    """The law's band (an invisible upper edge, then the lower edge filled up to it) and the law."""
    band = {"color": "rgba(214,39,40,0)"}
    xs = list(path.compute)
    return [
        go.Scatter(
            x=xs, y=list(path.upper), mode="lines", line=band, showlegend=False, hoverinfo="skip"
        ),
        go.Scatter(
            x=xs, y=list(path.lower), mode="lines", line=band, fill="tonexty",
            fillcolor="rgba(214,39,40,0.15)", name=f"law's own {info.percent} band",
            legendgroup="band", showlegend=column == 1,
        ),
        go.Scatter(
            x=xs, y=list(path.centre), mode="lines", line={"color": "rgb(214,39,40)"},
            name=f"law ({model})", legendgroup="law", showlegend=column == 1,
        ),
    ]  # fmt: skip


def _moved_traces(go: Any, info: LawPanelInfo, column: int) -> list[Any]:
    """Where the decision moved away from the law's own point: that point (a hollow star) and the
    largest value a stable trial reached at the costliest rung (a dotted line), as in the PNG."""
    if info.law_point is None:
        return []
    traces = [
        go.Scatter(
            x=[info.target_compute],
            y=[info.law_point],
            mode="markers",
            marker={"symbol": "star-open", "size": 14, "color": "rgb(214,39,40)"},
            name="the law's own point (the decision moved from it)",
            legendgroup="law point",
            showlegend=column == 1,
        )
    ]
    if info.stable_up_to is not None:
        ends = [info.rungs[0].compute if info.rungs else 1.0, info.target_compute]
        traces.append(
            go.Scatter(
                x=ends,
                y=[info.stable_up_to] * 2,
                mode="lines",
                line={"color": "grey", "dash": "dot", "width": 1},
                name="stable up to (costliest rung's trials)",
                legendgroup="stable",
                showlegend=column == 1,
            )
        )
    return traces


def _target_trace(go: Any, info: LawPanelInfo, column: int) -> Any:
    """The target's decision with its prediction interval (``Extrapolation.interval``), drawn
    as the PNG draws it (cut at e^±MAX_LOG_BAR of the decision on a log axis); the hover text
    gives the whole interval."""
    low, high = info.drawn_interval
    whole = f"{info.percent} interval {info.interval[0]:.4g} to {info.interval[1]:.4g}"
    return go.Scatter(
        x=[info.target_compute],
        y=[info.decision],
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [high - info.decision],
            "arrayminus": [info.decision - low],
        },
        mode="markers",
        hovertext=[whole],
        marker={"symbol": "star", "size": 14, "color": "rgb(214,39,40)"},
        name=f"target: decision, {info.percent} prediction interval",
        legendgroup="target",
        showlegend=column == 1,
    )


def plot_walk_forward(extrapolation: Extrapolation) -> Any:
    """Walk-forward validation: each rung's optimum predicted from cheaper rungs vs observed.

    One panel per coordinate; one marker per fold (a rung predicted from strictly cheaper ones)
    and per model of the family, the kept model (``extrapolation.model``) solid; the diagonal is a
    perfect prediction. The hover text gives each model's regret at that rung.

    Raises:
        TransferSearchError: the fit has no walk-forward fold (too few rungs to validate).
        ImportError: plotly is not installed.
    """
    go, make_subplots = _plotly()
    folds = [f for f in extrapolation.walk_forward if f.surface is not None and f.points]
    if not folds:
        raise TransferSearchError(
            f"the fit has no walk-forward fold to draw (model {extrapolation.model!r}: "
            f"{extrapolation.selection_reason}). Add rungs: a fold needs a rung above two cheaper ones."
        )
    params = list(extrapolation.params)
    figure = make_subplots(rows=1, cols=len(params), subplot_titles=params)
    models = list(folds[0].points)
    for column, name in enumerate(params, start=1):
        log_space = name in extrapolation.log_params
        shown: list[float] = []
        for model in models:
            xs, ys, text = [], [], []
            for fold in folds:
                surface = fold.surface
                assert surface is not None  # filtered above
                index = list(surface.names).index(name)
                predicted = float(fold.points[model][index])
                xs.append(surface.params[name])
                ys.append(to_natural(predicted, log_space))
                text.append(
                    f"{_label(fold.scale)}<br>from {fold.n_train} cheaper rung(s)<br>regret {fold.regret[model]:.3g}"
                )
            shown += xs + ys
            kept = model == extrapolation.model
            figure.add_trace(
                go.Scatter(
                    x=xs, y=ys, text=text, mode="markers", name=model + (" (kept)" if kept else ""),
                    legendgroup=model, showlegend=column == 1,
                    marker={"size": 11 if kept else 7, "symbol": "circle" if kept else "circle-open"},
                ),
                row=1,
                col=column,
            )  # fmt: skip
        low, high = min(shown), max(shown)
        figure.add_trace(
            go.Scatter(
                x=[low, high], y=[low, high], mode="lines", line={"color": "grey", "dash": "dot"},
                name="predicted = observed", legendgroup="diagonal", showlegend=column == 1,
            ),
            row=1,
            col=column,
        )  # fmt: skip
        axis = "log" if log_space else "linear"
        figure.update_xaxes(title_text=f"observed optimal {name}", type=axis, row=1, col=column)
        figure.update_yaxes(title_text=f"predicted {name}", type=axis, row=1, col=column)
    figure.update_layout(title="Walk-forward validation: each rung predicted from cheaper rungs")
    return figure


def _decision_line(extrapolation: Extrapolation) -> str:
    """``decision at the target: base_lr=0.0123, tau_epoch=0.55``."""
    return "decision at the target: " + ", ".join(
        f"{k}={v:.4g}" for k, v in extrapolation.params.items()
    )


def _hyperparameter_table(extrapolation: Extrapolation) -> str:
    """The per-group lr / weight decay / independent_wd / eps at the target as an HTML table
    (PyTorch's coupled weight decay), with betas, batch size and steps; a line saying why not
    when the source stored no space (a table, a custom rule)."""
    if extrapolation.space is None:
        return (
            "<p>No per-group table: the source stored no TransferSpace (a CSV or a custom rule); "
            "space.concretize(res.params, scale=res.target) gives it.</p>"
        )
    with warnings.catch_warnings():  # a coordinate past the sweep: said in hp.notes, shown below
        warnings.simplefilter("ignore", TransferSearchWarning)
        hp = extrapolation.hyperparameters()
    columns = ("lr", "weight_decay", "independent_wd", "eps")
    head = "".join(f"<th>{c}</th>" for c in ("group", *columns))
    rows = "".join(
        "<tr><td>"
        + html.escape(group)
        + "</td>"
        + "".join(f"<td>{values[c]:.4g}</td>" for c in columns if c in values)
        + "</tr>"
        for group, values in hp.groups.items()
    )
    rest = (
        f"betas={tuple(hp.betas)} eps={hp.eps:g} batch_size={hp.batch_size} "
        f"total_steps={hp.total_steps} ema_momentum={hp.ema_momentum}"
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in hp.notes)
    return (
        "<h2>Hyperparameters at the target (torch.optim.AdamW, coupled weight decay)</h2>"
        f'<table border="1" cellpadding="3"><tr>{head}</tr>{rows}</table>'
        f"<p>{html.escape(rest)}</p>" + (f"<ul>{notes}</ul>" if notes else "")
    )


def write_html_report(
    source: Any,
    extrapolation: Extrapolation,
    path: str | Path,
    *,
    level: float = 0.9,
    plotlyjs: str = "inline",
) -> Path:
    """Write the three figures (those that apply) into one HTML file.

    The walk-forward figure is left out, with a line saying why, when the fit has no fold.

    Args:
        source, extrapolation: as for :func:`plot_rung_landscapes`.
        path: the file (``.html`` added to a name without an extension; ``report.html`` inside a
            folder).
        level: coverage of the band and the interval.
        plotlyjs: where the page gets plotly.js (:data:`PLOTLYJS`): ``"inline"`` (default, one
            self-contained file of about 4.8 MB), ``"cdn"`` (a file of tens of kB that loads plotly.js
            from the network when opened), ``"directory"`` (a small file and ``plotly.min.js``
            beside it, shared by the pages of that folder; works offline).

    Returns:
        The path written.

    Raises:
        TransferSearchError: no trials, or an unknown ``plotlyjs``. ImportError: plotly is not
            installed.
    """
    if plotlyjs not in PLOTLYJS:
        raise TransferSearchError(
            f"`plotlyjs` must be one of {PLOTLYJS} (where the page gets plotly.js: embedded, "
            f"from the CDN, or a plotly.min.js beside the file), but got plotlyjs={plotlyjs!r}."
        )
    out = Path(path)
    if out.is_dir():
        out = out / "report.html"
    elif not out.suffix:
        out = out.with_name(f"{out.name}.html")
    figures = [
        plot_rung_landscapes(source, extrapolation),
        plot_optimum_vs_scale(extrapolation, level=level),
    ]
    notes = []
    try:
        figures.append(plot_walk_forward(extrapolation))
    except TransferSearchError as exc:
        notes.append(str(exc))
    include: Any = True if plotlyjs == "inline" else plotlyjs
    parts = [
        figure.to_html(full_html=False, include_plotlyjs=include if i == 0 else False)
        for i, figure in enumerate(figures)
    ]
    summary = html.escape(extrapolation.summary())
    body = "\n".join(
        [
            f"<p>{html.escape(_decision_line(extrapolation))}</p>",
            _hyperparameter_table(extrapolation),
            f"<pre>{summary}</pre>",
            *parts,
            *(f"<p>{html.escape(n)}</p>" for n in notes),
        ]
    )
    title = f"transfersearch: target {html.escape(_label(extrapolation.target))}"
    out.parent.mkdir(parents=True, exist_ok=True)
    if plotlyjs == "directory":  # the page's <script src="plotly.min.js"> beside it, written once
        bundle = out.parent / "plotly.min.js"
        if not bundle.exists():
            get_plotlyjs = importlib.import_module("plotly.offline").get_plotlyjs
            bundle.write_text(get_plotlyjs(), encoding="utf-8")
    out.write_text(
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
        f"<body>\n<h1>{title}</h1>\n{body}\n</body></html>\n",
        encoding="utf-8",
    )
    return out

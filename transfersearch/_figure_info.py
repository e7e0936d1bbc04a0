"""What the figures of a transfer show, computed once for every backend.

As ``optuna.visualization`` does (``_get_X_info`` returning a NamedTuple that the matplotlib and the
plotly modules render), :func:`law_panel_info` and :func:`landscape_info` turn an
:class:`~transfersearch.Extrapolation` and its trials into plain numbers and labels: the rungs'
optima with their error bars, the law along its path with its band, the target's decision and
interval, the cost axis, the trials of each rung. :mod:`transfersearch.report` (matplotlib, PNG)
and :mod:`transfersearch.visualization` (plotly) only draw them. No plotting library is imported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, NamedTuple

from transfersearch.cost import by_cost, default_cost
from transfersearch.fitting.coords import to_natural
from transfersearch.observations import Observation
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.fitting.result import Extrapolation

__all__ = [
    "BAND_NOTE",
    "CLIP_SPREADS",
    "MAX_LOG_BAR",
    "MOVED",
    "PATH_POINTS",
    "LandscapeInfo",
    "LawPanelInfo",
    "LawPath",
    "RungOptimum",
    "RungTrials",
    "band_ends",
    "constant_names",
    "landscape_info",
    "law_panel_info",
    "law_terms",
    "path_scales",
    "rung_label",
    "short_number",
]

#: Widest error bar drawn on a log axis, in log units (a factor e^5 ~ 150 each way): wider says
#: "unknown" there and would swamp the panel.
MAX_LOG_BAR = 5.0
#: Largest log value turned back into a number for a figure (exp(700) ~ 1e304 < float max).
_MAX_EXP = 700.0
#: A decision within this relative distance of the law's point is drawn as the law's point (a
#: moved decision is drawn beside it): a thousandth is far below what a panel resolves.
MOVED = 1e-3
#: Points on the law's path from the cheapest rung to the target (smooth at plotting resolution).
PATH_POINTS = 40
#: The metric axis of the landscapes ends this many times the median trial's distance above the
#: best trial: the valley around the optimum fills the panel, the far slopes are marked as clipped.
CLIP_SPREADS = 2.5
#: How the law's band and the target's interval differ (both pictures say it).
BAND_NOTE = (
    "band: the law's own uncertainty (its fitted coefficients and the rungs' scatter about it; "
    "on a log axis cut at a factor e^5 either way); "
    "target bar: the prediction interval of the target's optimum, Extrapolation.interval(): the "
    "posterior predictive, which adds the rungs' scatter about the law and is calibrated on the "
    "walk-forward folds, so it may be wider or narrower than the band's end"
)


class RungOptimum(NamedTuple):
    """One rung's estimated optimum on the law panel.

    Attributes:
        scale: the rung.
        label: its varying scale variables (:func:`rung_label`).
        compute: its cost relative to the panel's start (the x axis).
        value: the estimated optimum, in natural units.
        bar: ``(low, high)`` of its ``level`` interval in natural units; None when the optimum is
            barely located (no finite standard error, or on a log axis wider than
            e^±``MAX_LOG_BAR``): drawn hollow, without a bar.
        law_value: the law's value at this rung (None when the law is not drawn or the rung lacks
            one of its scale variables).
    """

    scale: Scale
    label: str
    compute: float
    value: float
    bar: tuple[float, float] | None
    law_value: float | None


class LawPath(NamedTuple):
    """The law along the geometric path from the panel's start to the target, with its band."""

    compute: tuple[float, ...]
    centre: tuple[float, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]


class LawPanelInfo(NamedTuple):
    """Everything the optimum-vs-compute panel of one parameter shows.

    Attributes:
        param: the parameter.
        log_space: whether it is fitted (and drawn) on a log axis.
        level: the coverage of the bars, the band and the interval; ``percent`` its label.
        rungs: the rungs' optima, cheapest first.
        constant: the scale variables every rung shares (left out of the rung labels).
        path: the law and its band (None when the start or the target lacks a variable the law
            needs).
        target_compute: the target's cost relative to the start.
        decision: the target's decision, ``Extrapolation.params[param]``.
        interval: ``Extrapolation.interval(level)[param]`` (an end may be 0 or inf).
        drawn_interval: the interval as a bar is drawn: on a log axis cut at
            e^±``MAX_LOG_BAR`` around the decision.
        law_terms: the law's exponents as text (:func:`law_terms`).
        law_point: the law's own point at the target (``Extrapolation.law_params``) where the
            decision moved away from it (a divergence cost, a hedge), else None.
        stable_up_to: the largest value a stable trial reached at the costliest rung
            (``Extrapolation.stable_up_to``), or None: the evidence a moved decision keeps to.
    """

    param: str
    log_space: bool
    level: float
    percent: str
    rungs: tuple[RungOptimum, ...]
    constant: dict[str, float]
    path: LawPath | None
    target_compute: float
    decision: float
    interval: tuple[float, float]
    drawn_interval: tuple[float, float]
    law_terms: str
    law_point: float | None = None
    stable_up_to: float | None = None


class RungTrials(NamedTuple):
    """One rung's trials on one parameter's landscape.

    Attributes:
        scale: the rung; ``label`` its varying scale variables.
        usable: ``(parameter value, metric)`` of each trial with a usable metric.
        diverged: the parameter values of the diverged trials (NaN or inf metric).
        optimum: the rung's estimated optimum of the parameter (None: no estimate).
        crashed: the parameter values of the trials that raised (no verdict on the parameter;
            drawn apart from the diverged ones).
    """

    scale: Scale
    label: str
    usable: tuple[tuple[float, float], ...]
    diverged: tuple[float, ...]
    optimum: float | None
    crashed: tuple[float, ...] = ()


class LandscapeInfo(NamedTuple):
    """The trials of every rung against each parameter.

    Attributes:
        params: the parameters, one panel each; ``panels[param]`` one :class:`RungTrials` per
            rung, cheapest first (``scales``).
        constant: the scale variables every rung shares (named once, not in each label).
        log_params: the parameters drawn on a log axis.
        best: the lowest usable metric (0 without any).
        clip: where the metric axis of a clipped picture ends: ``best`` plus ``CLIP_SPREADS``
            times the median trial's distance above it.
        worst: the highest usable metric (1 without any).
    """

    params: tuple[str, ...]
    scales: tuple[Scale, ...]
    panels: dict[str, tuple[RungTrials, ...]]
    constant: dict[str, float]
    log_params: frozenset[str]
    best: float
    clip: float
    worst: float


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
    return (
        to_natural(centre, True),
        to_natural(centre - half, True),
        to_natural(centre + half, True),
    )


def short_number(value: float) -> str:
    """A scale value as a label shows it: ``64``, ``20000``, ``1.6e+05``."""
    return f"{value:g}" if value < 1e5 else f"{value:.2g}"


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
    shown = [f"{k}={short_number(v)}" for k, v in scale.items() if k not in constant]
    return ", ".join(shown) or ", ".join(f"{k}={short_number(v)}" for k, v in scale.items())


def law_terms(extrapolation: Extrapolation, name: str) -> str:
    """``dataset_size^+0.25 · width^-0.60``: the law's exponents, without a variable the ladder
    never varied whose exponent is 0 (it says nothing); ``const`` when none is left."""
    law = extrapolation.laws[name]
    constant = constant_names(o.scale for o in extrapolation.optima)
    exponents = sorted(law.exponents.items())
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


def law_panel_info(
    extrapolation: Extrapolation, param: str, *, level: float = 0.9, start: Scale | None = None
) -> LawPanelInfo:
    """The optimum-vs-compute panel of ``param``: rungs, law path and band, target.

    The x axis is compute (:func:`~transfersearch.default_cost`: model size × data) relative to
    ``start``; the law is drawn along the geometric path from ``start`` to the target.

    Args:
        extrapolation: the fit to draw.
        param: one of its parameters.
        level: the coverage of the rungs' bars, the law's band and the target's interval.
        start: where the cost axis and the law's path begin (default: the cheapest rung with an
            optimum, else the target).

    Raises:
        TransferSearchError: ``level`` is not in (0, 1).
    """
    interval = extrapolation.interval(level)[param]  # validates level
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    log_space = param in extrapolation.log_params
    rank = {s: i for i, s in enumerate(by_cost(o.scale for o in extrapolation.optima))}
    optima = sorted(extrapolation.optima, key=lambda o: rank[o.scale])
    if start is None:
        start = optima[0].scale if optima else extrapolation.target
    base_cost = default_cost(start)
    law = extrapolation.laws[param]
    target = extrapolation.target
    drawn = sorted(law.exponents)
    names = [n for n in target if n in start]
    path = None
    if all(n in names for n in drawn):
        scales = path_scales(start, target, names, PATH_POINTS)
        ends = [band_ends(*law.predict_coord(s), z, log_space) for s in scales]
        path = LawPath(
            tuple(default_cost(s) / base_cost for s in scales),
            *(tuple(column) for column in zip(*ends, strict=True)),
        )
    constant = constant_names(o.scale for o in optima)
    rungs = []
    for optimum in optima:
        at_rung = path is not None and all(n in optimum.scale for n in drawn)
        rungs.append(
            RungOptimum(
                optimum.scale,
                rung_label(optimum.scale, constant),
                default_cost(optimum.scale) / base_cost,
                optimum.params[param],
                _rung_bar(optimum.params[param], optimum.stderr.get(param, math.inf), z, log_space),
                law.predict(optimum.scale) if at_rung else None,
            )
        )
    decision = extrapolation.params[param]
    law_point = extrapolation.law_params.get(param)
    if law_point is not None and math.isclose(law_point, decision, rel_tol=MOVED, abs_tol=0.0):
        law_point = None  # the decision is the law's point
    return LawPanelInfo(
        param=param,
        log_space=log_space,
        level=level,
        percent=f"{round(level * 100)}%",
        rungs=tuple(rungs),
        constant=constant,
        path=path,
        target_compute=default_cost(target) / base_cost,
        decision=decision,
        interval=interval,
        drawn_interval=_drawn_interval(decision, interval, log_space),
        law_terms=law_terms(extrapolation, param),
        law_point=law_point,
        stable_up_to=extrapolation.stable_up_to.get(param),
    )


def _rung_bar(point: float, stderr: float, z: float, log_space: bool) -> tuple[float, float] | None:
    """``(low, high)`` of a rung optimum's interval in natural units, or None when it is barely
    located (no finite standard error, or on a log axis wider than e^±``MAX_LOG_BAR``)."""
    if not math.isfinite(stderr) or (log_space and z * stderr > MAX_LOG_BAR):
        return None
    if log_space:
        return point * math.exp(-z * stderr), point * math.exp(z * stderr)
    return point - z * stderr, point + z * stderr


def _drawn_interval(
    decision: float, interval: tuple[float, float], log_space: bool
) -> tuple[float, float]:
    """The target's interval as a bar: on a log axis at most e^MAX_LOG_BAR either way of the
    decision (an end of 0 / inf is unbounded)."""
    if not (log_space and decision > 0):
        return interval
    reach = math.exp(MAX_LOG_BAR)
    return max(interval[0], decision / reach), min(interval[1], decision * reach)


def landscape_info(
    observations: Sequence[Observation],
    extrapolation: Extrapolation | None,
    params: Sequence[str],
) -> LandscapeInfo:
    """The trials of each rung (cheapest first) against each of ``params``, with each rung's
    estimated optimum when ``extrapolation`` is given."""
    scales = tuple(by_cost({o.scale for o in observations}))
    constant = constant_names(scales)
    optima = {o.scale: o.params for o in extrapolation.optima} if extrapolation else {}
    panels = {}
    for name in params:
        rungs = []
        for scale in scales:
            here = [o for o in observations if o.scale == scale and name in o.params]
            rungs.append(
                RungTrials(
                    scale,
                    rung_label(scale, constant),
                    tuple((o.params[name], o.value) for o in here if o.usable),
                    tuple(o.params[name] for o in here if o.diverged),
                    optima.get(scale, {}).get(name),
                    tuple(o.params[name] for o in here if o.crashed),
                )
            )
        panels[name] = tuple(rungs)
    finite = sorted(o.value for o in observations if o.usable)
    best = finite[0] if finite else 0.0
    spread = (finite[len(finite) // 2] - best) if finite else 1.0
    return LandscapeInfo(
        params=tuple(params),
        scales=scales,
        panels=panels,
        constant=constant,
        log_params=frozenset(extrapolation.log_params) if extrapolation else frozenset(),
        best=best,
        clip=best + CLIP_SPREADS * max(spread, 1e-12 * max(1.0, abs(best))),
        worst=finite[-1] if finite else 1.0,
    )

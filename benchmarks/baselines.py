"""The simple baselines every benchmark reports beside ``transfersearch.extrapolate`` (issue 25, item 8).

Each is a plain function over a list of :class:`transfersearch.Observation` (minimised values; a
NaN/inf value or a ``failed``/``pruned`` state is left out) that returns the predicted parameters
at the target, name -> value in the sweep's units:

- :func:`copy_top_rung` — the null: the best finite trial of the costliest rung
  (cost = :func:`transfersearch.default_cost` unless ``cost=`` is given);
- :func:`argmin_loglinear` — per-rung argmin, then least squares of log(param) on the log scale
  variables (what a user fits by hand);
- :func:`band_loglinear` — Step Law's band regression (Li et al. 2025, ``code/fit_tool.py``,
  ``filter_threshold=0.0025``; docs/science.md §6): the same least squares through every
  finite trial within 0.25% of its rung's least value.

A parameter with a value ≤ 0 anywhere in the sweep (``weight_decay = 0``) is regressed linearly,
not in log space, unless ``log_params`` names the log ones. Scale variables constant over the
regressed points are dropped; with fewer points than coefficients the least squares is the
minimum-norm solution (``numpy.linalg.lstsq``), which still fits the data exactly along the
directions they span.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from transfersearch import Observation, Scale, default_cost

#: Step Law's band: every run within 0.25% of its configuration's least loss (``fit_tool.py``,
#: ``filter_threshold=0.0025``).
BAND_TOLERANCE = 0.0025

Cost = Callable[[Scale], float]


def finite_trials(observations: Iterable[Observation]) -> list[Observation]:
    """The completed trials whose value is a finite number (diverged and crashed ones left out)."""
    return [o for o in observations if o.state == "complete" and math.isfinite(o.value)]


def by_rung(observations: Iterable[Observation]) -> dict[Scale, list[Observation]]:
    """The finite trials grouped by their scale, in first-seen order."""
    rungs: dict[Scale, list[Observation]] = {}
    for obs in finite_trials(observations):
        rungs.setdefault(obs.scale, []).append(obs)
    return rungs


def swept_params(observations: Sequence[Observation]) -> list[str]:
    """The parameter names every observation records, in the first one's order."""
    if not observations:
        raise ValueError("no observations: a baseline needs at least one finite trial")
    names = list(observations[0].params)
    return [n for n in names if all(n in o.params for o in observations)]


def positive_params(observations: Sequence[Observation], params: Sequence[str]) -> list[str]:
    """The parameters whose every recorded value (diverged trials included) is > 0."""
    return [p for p in params if all(o.params[p] > 0 for o in observations if p in o.params)]


def copy_top_rung(
    observations: Sequence[Observation],
    params: Sequence[str] | None = None,
    cost: Cost = default_cost,
) -> dict[str, float]:
    """The null: the parameters of the best finite trial on the costliest rung that has one.

    Raises:
        ValueError: no finite trial.
    """
    finite = finite_trials(observations)
    if not finite:
        raise ValueError("no finite trial: the null has nothing to copy")
    names = list(params) if params is not None else swept_params(finite)
    top_cost = max(cost(o.scale) for o in finite)
    best = min((o for o in finite if cost(o.scale) == top_cost), key=lambda o: o.value)
    return {name: float(best.params[name]) for name in names}


def rung_argmins(observations: Sequence[Observation]) -> list[Observation]:
    """Each rung's best finite trial (the first one on a tie)."""
    return [min(trials, key=lambda o: o.value) for trials in by_rung(observations).values()]


def near_best(
    observations: Sequence[Observation], tolerance: float = BAND_TOLERANCE
) -> list[Observation]:
    """Every finite trial within ``tolerance`` (relative) of its rung's least value.

    The band is ``value <= best + tolerance * |best|`` (Step Law's ``loss <= (1 + 0.0025) · best``
    for positive losses).
    """
    band: list[Observation] = []
    for trials in by_rung(observations).values():
        best = min(o.value for o in trials)
        band += [o for o in trials if o.value <= best + tolerance * abs(best)]
    return band


def loglinear(
    points: Sequence[Observation],
    target: Scale | Mapping[str, float],
    params: Sequence[str],
    log_params: Iterable[str],
) -> dict[str, float]:
    """Least squares of each parameter (log for ``log_params``) on [1, log scale variables].

    Formula: ``g(x_p) = a_p + Σ_v b_pv log s_v`` over the points, evaluated at the target,
    ``g = log`` for a log parameter (the prediction is ``exp``) and the identity otherwise.

    Raises:
        ValueError: no points, the target lacks a scale variable the points vary, or a log
            parameter has a value <= 0.
    """
    if not points:
        raise ValueError("no points to regress")
    log_set = set(log_params)
    target_values = target.to_dict() if isinstance(target, Scale) else dict(target)
    names = sorted({v for o in points for v in o.scale.to_dict()})
    scales = np.array(
        [[math.log(o.scale.to_dict()[v]) for v in names] for o in points], dtype=float
    )
    varying = [i for i, _ in enumerate(names) if np.ptp(scales[:, i]) > 0]
    missing = [names[i] for i in varying if names[i] not in target_values]
    if missing:
        raise ValueError(f"the target lacks the scale variables {missing} the points vary")
    design = np.column_stack([np.ones(len(points)), scales[:, varying]])
    row = np.array([1.0] + [math.log(target_values[names[i]]) for i in varying])
    out: dict[str, float] = {}
    for name in params:
        values = np.array([o.params[name] for o in points], dtype=float)
        if name in log_set and np.any(values <= 0):
            raise ValueError(
                f"{name!r} is regressed in log space but has values <= 0 ({values.min()!r}); "
                "leave it out of log_params to regress it linearly"
            )
        response = np.log(values) if name in log_set else values
        coef, *_ = np.linalg.lstsq(design, response, rcond=None)
        predicted = float(row @ coef)
        out[name] = math.exp(predicted) if name in log_set else predicted
    return out


def _resolve(
    observations: Sequence[Observation],
    params: Sequence[str] | None,
    log_params: Iterable[str] | None,
) -> tuple[list[str], list[str]]:
    names = list(params) if params is not None else swept_params(finite_trials(observations))
    logs = list(log_params) if log_params is not None else positive_params(observations, names)
    return names, logs


def argmin_loglinear(
    observations: Sequence[Observation],
    target: Scale | Mapping[str, float],
    params: Sequence[str] | None = None,
    log_params: Iterable[str] | None = None,
) -> dict[str, float]:
    """Per-rung argmin, then :func:`loglinear` through the argmins.

    Args:
        observations: the sweep's trials.
        target: the scale to predict at.
        params: the parameters to predict (None: every parameter all finite trials record).
        log_params: the parameters regressed in log space (None: those never ≤ 0 in the sweep).
    """
    names, logs = _resolve(observations, params, log_params)
    return loglinear(rung_argmins(observations), target, names, logs)


def band_loglinear(
    observations: Sequence[Observation],
    target: Scale | Mapping[str, float],
    params: Sequence[str] | None = None,
    log_params: Iterable[str] | None = None,
    tolerance: float = BAND_TOLERANCE,
) -> dict[str, float]:
    """Step Law's band regression: :func:`loglinear` through every run in :func:`near_best`.

    Args are those of :func:`argmin_loglinear`, plus ``tolerance`` (Step Law's 0.25%).
    """
    names, logs = _resolve(observations, params, log_params)
    return loglinear(near_best(observations, tolerance), target, names, logs)


#: The tables' names for the three baselines.
NULL = "null (copy top rung's best)"
ARGMIN = "argmin + log-linear"
BAND = "band (Step Law)"


def baselines(
    observations: Sequence[Observation],
    target: Scale | Mapping[str, float],
    params: Sequence[str] | None = None,
    log_params: Iterable[str] | None = None,
    cost: Cost = default_cost,
) -> dict[str, dict[str, float]]:
    """The three baselines' predictions at ``target``, by the tables' names (:data:`NULL`, ...)."""
    names, logs = _resolve(observations, params, log_params)
    return {
        NULL: copy_top_rung(observations, names, cost),
        ARGMIN: argmin_loglinear(observations, target, names, logs),
        BAND: band_loglinear(observations, target, names, logs),
    }

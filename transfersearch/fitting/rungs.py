"""The ladder as the fits see it: trials grouped by scale, in cost order, and their optima.

:func:`prepare` checks the input once; :func:`read_optima` gives each rung's optimum from the
pooled valley (:mod:`.surface`), or from the rung alone where the valley cannot hold it;
:func:`law_data` turns the optima of some rungs into one parameter's :class:`LawData`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from transfersearch.cost import by_cost, default_cost
from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import (
    FloatArray,
    check_direction,
    check_fixed_exponents,
    check_params,
    common_variables,
    observation_arrays,
    resolve_log_params,
    to_natural,
)
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.laws import UNSEEN_PRIOR_SD, LawData
from transfersearch.fitting.local import FALLBACK_SPACING_FRACTION, fit_local, implausible_message
from transfersearch.fitting.optimum import LocalFit, ScaleOptimum, to_optimum
from transfersearch.fitting.quadratic import min_quadratic_trials
from transfersearch.fitting.surface import RungTrials, Valley, fit_valley
from transfersearch.observations import Observation
from transfersearch.scale import Scale

__all__ = ["Ladder", "diverged_bracket", "law_data", "prepare", "read_optima"]

logger = logging.getLogger(__name__)

Exponents = Mapping[str, Mapping[str, float]]

#: Trials lie on one line along a coordinate when their other coordinates agree to this relative
#: tolerance (a one-at-a-time sweep moves one parameter away from the best configuration).
LINE_TOLERANCE = 1e-9
#: A pooled centre past its box's edge counts as a bound ("past this edge") only when it lies that
#: far past it by more than this many of its own standard errors: the one-sided 95% normal
#: quantile, the usual level at which a one-sided claim is made. Nearer, the valley cannot tell on
#: which side of the edge the optimum lies (noisy rungs: a slope at the edge that is mostly noise),
#: and a bound with the trial spacing's resolution would state as known what the data do not
#: resolve; the centre stays an ordinary observation with its own (wide) variance.
EDGE_BOUND_Z = 1.6448536269514722


@dataclass(frozen=True, eq=False)
class Ladder:
    """The checked input of a fit.

    Attributes:
        names: the swept parameters, in order.
        logs: those fitted in log space.
        sign: +1 to minimise, −1 to maximise.
        scales: the rungs' scales, cheapest first (:func:`transfersearch.cost.by_cost`: the
            ``cost=`` given, else width² × dataset_size × epochs).
        trials: each rung's trials in fitted coordinates.
        variables: the scale variables the laws use.
        log_scales: (S, K) their logs per rung.
        fixed: fixed exponents per parameter.
        prior: prior exponents per parameter (0 where not given).
        log_costs: (S,) log of each rung's cost, ascending (walk-forward trains on cheaper rungs).
    """

    names: tuple[str, ...]
    logs: tuple[str, ...]
    sign: float
    scales: tuple[Scale, ...]
    trials: tuple[RungTrials, ...]
    variables: tuple[str, ...]
    log_scales: FloatArray
    fixed: dict[str, dict[str, float]]
    prior: dict[str, dict[str, float]]
    log_costs: FloatArray

    def target_logs(self, target: Scale) -> FloatArray:
        """(K,) log of the target's scale variables."""
        return np.array([math.log(target[v]) for v in self.variables])


def _group(observations: Sequence[Observation]) -> dict[Scale, list[Observation]]:
    groups: dict[Scale, list[Observation]] = {}
    for obs in observations:
        if obs.state != "pruned":
            groups.setdefault(obs.scale, []).append(obs)
    return groups


def _check_exponents(
    table: Exponents | None, label: str, names: Sequence[str], variables: Sequence[str]
) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = {}
    if table is None:
        return result
    if not isinstance(table, Mapping):
        raise TransferSearchError(
            f"`{label}` must map parameter -> {{scale variable: exponent}}, but got {table!r}. "
            f"Write {label}={{'lr': {{'dataset_size': 0.0}}}}."
        )
    for param, row in table.items():
        if param not in names:
            raise TransferSearchError(
                f"{label} names parameter {param!r}, which is not in params={list(names)}. Fix "
                "the name or add it to params."
            )
        if not isinstance(row, Mapping):
            raise TransferSearchError(
                f"{label}[{param!r}] must map scale variable -> exponent, but got {row!r}. "
                "Write {'dataset_size': 0.0}."
            )
        result[param] = check_fixed_exponents(param, row, variables)
    return result


def _rung_trials(
    groups: Mapping[Scale, list[Observation]],
    names: tuple[str, ...],
    logs: tuple[str, ...],
    sign: float,
    cost: Callable[[Scale], float] | None,
    notes: list[Diagnostic],
) -> list[tuple[Scale, RungTrials]]:
    """Each scale's trials in fitted coordinates, cheapest scale first; a scale with no finite
    trial is left out (noted)."""
    rungs: list[tuple[Scale, RungTrials]] = []
    dropped: list[str] = []
    for scale, group in groups.items():
        coords, values = observation_arrays(group, names, logs, sign)
        if not np.isfinite(values).any():
            dropped.append(repr(scale))
            continue
        rungs.append((scale, RungTrials(coords, values)))
    if dropped:
        notes.append(
            Diagnostic(
                "dropped",
                f"every trial diverged or failed at {dropped}: those scales are left out. Add "
                "trials at smaller learning rates there.",
                act=True,
            )
        )
    if len(rungs) < 2:
        raise TransferSearchError(
            f"only {len(rungs)} scale has a finite trial; extrapolation needs two or more. Run "
            "trials that do not diverge at another scale."
        )
    order = {scale: i for i, scale in enumerate(by_cost((s for s, _ in rungs), cost))}
    rungs.sort(key=lambda item: order[item[0]])
    return rungs


def prepare(
    observations: Sequence[Observation],
    params: Sequence[str],
    *,
    direction: str,
    log_params: Iterable[str] | None,
    scale_variables: Sequence[str] | None,
    fixed_exponents: Exponents | None,
    prior_exponents: Exponents | None,
    target: Scale | None,
    cost: Callable[[Scale], float] | None = None,
) -> tuple[Ladder, tuple[Diagnostic, ...]]:
    """Check and arrange the trials for the fits.

    Returns:
        The ladder, and what the checks found worth saying (scales left out, a target that moves
        along a variable the ladder does not).

    Raises:
        TransferSearchError: fewer than two scales with a finite trial, no shared scale variable,
            a target missing a scale variable, bad exponent tables, bad parameters.
    """
    sign = check_direction(direction)
    names = check_params(params)
    logs = resolve_log_params(observations, names, log_params)
    groups = _group(observations)
    if len(groups) < 2:
        raise TransferSearchError(
            f"extrapolation needs trials at two or more scales, but got {len(groups)} "
            f"({[repr(s) for s in groups]}). Run the sweep at another proxy scale too."
        )
    notes: list[Diagnostic] = []
    rungs = _rung_trials(groups, names, logs, sign, cost, notes)
    scales = tuple(scale for scale, _ in rungs)
    variables = common_variables(scales, scale_variables, purpose="fit the power laws")
    if not variables:
        raise TransferSearchError(
            f"the proxy scales share no scale variable ({[repr(s) for s in scales]}). Give every "
            "Scale the same names, e.g. width and dataset_size."
        )
    fixed = _check_exponents(fixed_exponents, "fixed_exponents", names, variables)
    prior = _check_exponents(prior_exponents, "prior_exponents", names, variables)
    log_scales = np.log(np.array([[s[v] for v in variables] for s in scales]))
    _log_unvaried(names, logs, [t for _, t in rungs])
    if target is not None:
        target.require(*variables, purpose="predict from the fitted power laws")
        notes.extend(_unseen_notes(variables, log_scales, target, fixed))
        notes.extend(_unrecorded_notes(scales, target, scale_variables))
    ladder = Ladder(
        names,
        logs,
        sign,
        scales,
        tuple(t for _, t in rungs),
        tuple(variables),
        log_scales,
        fixed,
        prior,
        np.log([float((cost or default_cost)(s)) for s in scales]),
    )
    return ladder, tuple(notes)


def _log_unvaried(names: Sequence[str], logs: Sequence[str], trials: Sequence[RungTrials]) -> None:
    """Log each parameter no finite trial varied: the fit drops it and keeps its one value."""
    finite = np.vstack([t.coords[np.isfinite(t.values)] for t in trials])
    unvaried = np.ptp(finite, axis=0) <= 1e-12 * np.maximum(1.0, np.abs(finite).max(axis=0))
    for j in map(int, np.flatnonzero(unvaried)):
        logger.info(
            "%r was never varied (every finite trial at %.6g): dropped from the fit, the prediction "
            "keeps that value",
            names[j],
            to_natural(finite[0, j], names[j] in logs),
        )


def _unrecorded_notes(
    scales: Sequence[Scale], target: Scale, scale_variables: Sequence[str] | None
) -> list[Diagnostic]:
    """A note when the target names scale variables no trial records (and the caller did not
    choose the variables): the laws cannot see them."""
    unseen = sorted(set(target) - {name for scale in scales for name in scale})
    if not unseen or scale_variables is not None:
        return []
    return [
        Diagnostic(
            "unseen",
            f"the target names {unseen}, which no trial records: the laws cannot see them, "
            "so their effect at the target is ignored. Record them in every trial's scale.",
            act=True,
        )
    ]


def _unseen_notes(
    variables: Sequence[str],
    log_scales: FloatArray,
    target: Scale,
    fixed: Mapping[str, Mapping[str, float]],
) -> list[Diagnostic]:
    """A note for each scale variable the ladder holds constant that the target moves along."""
    notes: list[Diagnostic] = []
    for k, variable in enumerate(variables):
        held = bool(fixed) and all(variable in row for row in fixed.values())
        if np.ptp(log_scales[:, k]) > 1e-9 or held:
            continue
        if not np.allclose(math.log(target[variable]), log_scales[:, k]):
            message = (
                f"scale variable {variable!r} is constant over the ladder, yet the target has "
                f"{variable}={target[variable]:g}: its exponent comes from the prior alone (0 "
                "unless prior_exponents or fixed_exponents say otherwise, with a prior sd of "
                f"{UNSEEN_PRIOR_SD} that widens the interval and the decision's hedge). Vary it "
                "across the proxies."
            )
            notes.append(Diagnostic("unseen", message, act=True))
    return notes


def _fallback_optimum(
    ladder: Ladder,
    scale: Scale,
    trials: RungTrials,
    valley: Valley | None,
    notes: list[Diagnostic] | None,
) -> ScaleOptimum:
    """The rung's optimum from its own trials (the valley could not hold it); noted in ``notes``
    when given."""
    local = fit_local(trials.coords, trials.values)
    if notes is not None:
        notes.extend(_fallback_notes(ladder, scale, local))
    optimum = to_optimum(local, scale, ladder.names, ladder.logs, ladder.sign)
    if valley is not None:
        # regret at this rung is measured with the pooled curvature: its own trials are too few
        optimum = replace(optimum, hessian=valley.hessian, wall=valley.wall)
    return _censor_alone(ladder, optimum, trials)


def _fallback_notes(ladder: Ladder, scale: Scale, local: LocalFit) -> list[Diagnostic]:
    """What to tell the user about a rung located from its own trials."""
    if local.method == "fallback-implausible":
        message = implausible_message(local, scale, ladder.names, ladder.logs, ladder.sign)
        return [Diagnostic("fallback", message, act=True, scale=scale)]
    if local.method != "fallback":
        return []
    dims = len(ladder.names)
    use = (
        "it says only what its diverged trials bound"
        if local.n_trials <= dims
        else "using the best trial there (method='fallback')"
    )
    message = (
        f"too few finite trials at {scale!r} ({local.n_trials}; the pooled valley needs "
        f"{dims + 1} that vary every parameter, a local quadratic "
        f"{min_quadratic_trials(dims)}): {use}. Add trials."
    )
    return [Diagnostic("fallback", message, act=True, scale=scale)]


def _spacing(trials: RungTrials) -> FloatArray:
    """Typical spacing of the finite trials per coordinate, ``range / n^{1/d}`` (0 if unswept)."""
    good = trials.coords[np.isfinite(trials.values)]
    extent = np.ptp(good, axis=0)
    swept = max(int((extent > 0).sum()), 1)
    return np.asarray(extent / max(len(good), 1) ** (1.0 / swept), dtype=np.float64)


def diverged_bracket(trials: RungTrials) -> tuple[FloatArray, FloatArray]:
    """Per coordinate ``j``, the interval ``(L_j, U_j)`` the rung's optimum lies in by what diverged.

    Along the line through the best finite trial that moves coordinate ``j`` only (a one-at-a-time
    sweep's line), a diverged trial above the best one has an infinite loss: a valley unimodal
    along that line has its minimum below it, ``x*_j < U_j``, the nearest such trial; likewise
    ``x*_j > L_j`` for one below (docs/science.md §7.1). ±inf where no diverged trial lies on the
    line. Trials lie on the line when their other coordinates equal the best's to
    :data:`LINE_TOLERANCE` (relative).
    """
    values = trials.values
    finite = np.isfinite(values)
    dims = trials.coords.shape[1]
    low = np.full(dims, -np.inf)
    high = np.full(dims, np.inf)
    if not finite.any() or finite.all():
        return low, high
    best = trials.coords[np.flatnonzero(finite)[int(np.argmin(values[finite]))]]
    diverged = trials.coords[~finite]
    close = np.abs(diverged - best) <= LINE_TOLERANCE * np.maximum(1.0, np.abs(best))
    for j in range(dims):
        others = np.delete(close, j, axis=1).all(axis=1)
        line = diverged[others, j]
        above, below = line[line > best[j]], line[line < best[j]]
        if len(above):
            high[j] = float(above.min())
        if len(below):
            low[j] = float(below.max())
    return low, high


def _with_bounds(
    optimum: ScaleOptimum,
    ladder: Ladder,
    bounds: Mapping[int, tuple[float, float]],
    resolution: FloatArray,
) -> ScaleOptimum:
    """``optimum`` with coordinates ``bounds`` known only as intervals: each held at the nearest
    point of its interval, with the bound's resolution as its variance and no correlation (the
    laws use it as a censored observation, docs/science.md §7.3)."""
    if not bounds:
        return optimum
    coords = np.array([optimum.coords[n] for n in ladder.names])
    cov = np.array(optimum.covariance, dtype=np.float64, copy=True)
    named: dict[str, tuple[float, float]] = {}
    for j, (low, high) in bounds.items():
        coords[j] = float(np.clip(coords[j], low, high))
        cov[j, :] = 0.0
        cov[:, j] = 0.0
        cov[j, j] = float(resolution[j]) ** 2 if resolution[j] > 0 else np.inf
        named[ladder.names[j]] = (float(low), float(high))
    return optimum.with_point(coords, cov, bounds=named)


def _censor_alone(ladder: Ladder, optimum: ScaleOptimum, trials: RungTrials) -> ScaleOptimum:
    """A rung fitted alone: what it bounds. With ``d`` finite trials or fewer nothing places its
    centre, not even with the curvature shared (one trial: its depth is unknown; two in 2-D: a
    direction is missing), so it says only what its diverged neighbours bound: every other
    coordinate gets an infinite variance (docs/science.md §7.1). A local quadratic minimised on its
    box's edge stays an ordinary observation there, with a trial spacing of doubt where its slope
    there is resolved and the swept range where it is not
    (:func:`~transfersearch.fitting.local.fit_local`): a rung the valley could not hold is noisy,
    and its edge is no evidence of a bound."""
    low, high = diverged_bracket(trials)
    finite = np.isfinite(trials.values)
    point = np.array([optimum.coords[n] for n in ladder.names])
    bounds: dict[int, tuple[float, float]] = {}
    resolution = FALLBACK_SPACING_FRACTION * _spacing(trials)
    if int(finite.sum()) <= len(ladder.names):
        unknown = np.diag(np.full(len(ladder.names), np.inf))
        optimum = replace(optimum, covariance=unknown, stderr={n: math.inf for n in ladder.names})
        for j in range(len(ladder.names)):
            if math.isfinite(low[j]) or math.isfinite(high[j]):
                bounds[j] = (low[j], high[j])
                side = high[j] if math.isfinite(high[j]) else low[j]
                resolution[j] = FALLBACK_SPACING_FRACTION * abs(side - point[j])
    return _with_bounds(optimum, ladder, bounds, resolution)


def read_optima(
    ladder: Ladder,
    subset: Sequence[int],
    trials: Sequence[RungTrials] | None = None,
    *,
    notes: list[Diagnostic] | None = None,
    with_covariance: bool = True,
    walls: NDArray[np.bool_] | None = None,
    unvaried: NDArray[np.bool_] | None = None,
) -> tuple[list[ScaleOptimum], Valley | None]:
    """Each rung's optimum in ``subset``: the pooled valley's read-out, or the rung's own fit.

    Args:
        ladder: the prepared ladder.
        subset: the rungs to fit together.
        trials: replacement trials per rung in ``subset`` (a bootstrap resample); default the
            ladder's own.
        notes: where to add a :class:`Diagnostic` for each rung that falls back to its own
            trials (None: say nothing).
        with_covariance: compute the optima's covariance (NaN otherwise).
        walls: the valley's upper walls per coordinate (default: decided from the data; see
            :func:`transfersearch.fitting.surface.fit_valley`).
        unvaried: coordinates no trial varies (default: decided from the data; a resample passes
            the full fit's).

    Returns:
        The optima (in ``subset`` order) and the valley (None when it could not be fitted).
    """
    chosen = list(trials) if trials is not None else [ladder.trials[i] for i in subset]
    valley = fit_valley(chosen, with_covariance=with_covariance, walls=walls, unvaried=unvaried)
    optima: list[ScaleOptimum] = []
    for position, index in enumerate(subset):
        scale = ladder.scales[index]
        if valley is None or not valley.pooled[position]:
            optima.append(_fallback_optimum(ladder, scale, chosen[position], valley, notes))
        else:
            optima.append(_pooled_optimum(ladder, scale, chosen[position], valley, position))
    return optima, valley


def _pooled_optimum(
    ladder: Ladder, scale: Scale, trials: RungTrials, valley: Valley, position: int
) -> ScaleOptimum:
    centre = valley.centers[position]
    cov = valley.center_cov[position]
    finite = np.isfinite(trials.values)
    past = valley.past_edge[position]
    optimum = ScaleOptimum.from_fitted(
        scale,
        ladder.names,
        ladder.logs,
        centre,
        cov,
        value=ladder.sign * float(valley.depths[position]),
        hessian=valley.hessian,
        n_trials=int(finite.sum()),
        n_diverged=int((~finite).sum()),
        n_used=int(valley.n_used[position]),
        method="pooled",
        at_boundary=bool(valley.at_boundary[position]),
        wall=valley.wall,
        past_edge={n: float(e) for n, e in zip(ladder.names, past, strict=True) if e != 0.0},
    )
    low, high = diverged_bracket(trials)
    diverged = {
        n: float(high[j] if e > 0 else low[j])
        for j, (n, e) in enumerate(zip(ladder.names, past, strict=True))
        if e != 0.0 and math.isfinite(high[j] if e > 0 else low[j])
    }
    optimum = replace(optimum, diverged_past=diverged)
    return _censor_pooled(ladder, optimum, trials, valley, position)


def _censor_pooled(
    ladder: Ladder, optimum: ScaleOptimum, trials: RungTrials, valley: Valley, position: int
) -> ScaleOptimum:
    """A pooled centre is a bound where the valley's extrapolation went past
    :data:`~transfersearch.fitting.surface.EXTRAPOLATION_LIMIT` (the rung says "past this edge")
    or past a diverged trial (the valley's slope says "above the best trial", the divergence
    "below it"): docs/science.md §7.1. A centre inside its trials' box counts as bracketed. A centre
    within :data:`EDGE_BOUND_Z` of its own standard errors of the edge is no bound: the valley
    cannot tell on which side of the edge the optimum lies."""
    if not valley.at_boundary[position]:
        return optimum
    low, high = diverged_bracket(trials)
    centre = valley.centers[position]
    good = trials.coords[np.isfinite(trials.values)]
    best = good[int(np.argmin(trials.values[np.isfinite(trials.values)]))]
    bounds: dict[int, tuple[float, float]] = {}
    for j in range(len(ladder.names)):
        side = int(valley.censored[position, j])
        edge = float(valley.edges[position, j])
        sd = math.sqrt(float(valley.center_cov[position][j, j]))
        if side != 0 and abs(float(centre[j]) - edge) <= EDGE_BOUND_Z * sd:
            continue  # the valley cannot place the optimum past the edge (a NaN sd: no check)
        if side > 0:
            bounds[j] = (edge, max(high[j], edge))
        elif side < 0:
            bounds[j] = (min(low[j], edge), edge)
        elif centre[j] > high[j]:
            bounds[j] = (float(best[j]), high[j])
        elif centre[j] < low[j]:
            bounds[j] = (low[j], float(best[j]))
    if not bounds:
        return optimum
    resolution = FALLBACK_SPACING_FRACTION * _spacing(trials)
    return _with_bounds(optimum, ladder, bounds, resolution)


def law_data(
    ladder: Ladder, optima: Sequence[ScaleOptimum], subset: Sequence[int], column: int
) -> LawData:
    """Parameter ``column``'s optima over the rungs ``subset`` as :class:`LawData`."""
    name = ladder.names[column]
    fixed = ladder.fixed.get(name, {})
    free = [k for k, v in enumerate(ladder.variables) if v not in fixed]
    logs = ladder.log_scales[list(subset)]
    z = np.array([o.coords[name] for o in optima])
    for k, variable in enumerate(ladder.variables):
        if variable in fixed:
            z = z - fixed[variable] * logs[:, k]
    variance = np.array([o.covariance[column, column] for o in optima])
    lower = np.array([o.bounds.get(name, (-np.inf, np.inf))[0] for o in optima])
    upper = np.array([o.bounds.get(name, (-np.inf, np.inf))[1] for o in optima])
    drift = z - np.array([o.coords[name] for o in optima])  # minus the fixed exponents' drift
    prior = ladder.prior.get(name, {})
    return LawData(
        param=name,
        log_space=name in ladder.logs,
        z=z,
        variance=np.where(np.isfinite(variance), variance, np.inf),
        log_scales=logs[:, free],
        variables=tuple(ladder.variables[k] for k in free),
        prior=np.array([prior.get(ladder.variables[k], 0.0) for k in free]),
        fixed=dict(fixed),
        lower=lower + drift if np.isfinite(lower).any() or np.isfinite(upper).any() else None,
        upper=upper + drift if np.isfinite(lower).any() or np.isfinite(upper).any() else None,
    )

"""The ladder as the fit sees it: trials grouped by scale, in cost order, checked once
(:func:`prepare`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from transfersearch.cost import by_cost, cost_function
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
from transfersearch.fitting.options import FitOptions
from transfersearch.observations import Observation
from transfersearch.scale import Scale

__all__ = ["Ladder", "RungTrials", "prepare"]

logger = logging.getLogger(__name__)

Exponents = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True, eq=False)
class RungTrials:
    """One rung's trials in fitted coordinates (minimisation sign; NaN for a diverged trial)."""

    coords: FloatArray  # (n, d)
    values: FloatArray  # (n,)


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
        anchor: where the space's rule places a parameter's optimum at every rung, natural units
            (:meth:`~transfersearch.space.TransferSpace.optimum_prior`; docs/science.md §7.3).
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
    anchor: Mapping[str, float] = field(default_factory=dict)

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
        result[param] = check_fixed_exponents(param, row, variables, label)
    return result


def _check_exponent_reach(
    tables: Mapping[str, Mapping[str, Mapping[str, float]]],
    variables: Sequence[str],
    log_scales: np.ndarray,
    target: Scale | None,
    logs: Sequence[str],
) -> None:
    """Refuse an exponent that moves its parameter past :data:`MAGNITUDES` across the rungs and
    the target: a log parameter by a factor beyond 1e150 (``|exponent| · span > ln 1e150``), a
    linear one (its exponent a slope in its own units per log unit of scale) by more than 1e150.
    No run can take such a value, and the law's arithmetic overflows."""
    points = log_scales
    if target is not None:
        points = np.vstack([log_scales, np.log([[target[v] for v in variables]])])
    span = np.ptp(points, axis=0)
    for label, table in tables.items():
        for param, row in table.items():
            logged = param in logs
            limit = math.log(MAGNITUDES[1]) if logged else MAGNITUDES[1]
            for j, variable in enumerate(variables):
                move = abs(row.get(variable, 0.0)) * span[j]
                if move > limit:
                    size = f"a factor of e^{move:.3g}" if logged else f"{move:.3g} (its own units)"
                    raise TransferSearchError(
                        f"`{label}[{param!r}][{variable!r}]` = {row[variable]!r} moves {param} "
                        f"by {size} across the rungs and the target (beyond {MAGNITUDES[1]:g}: "
                        "no run can take it). Give the exponent the rule you follow publishes "
                        "(docs/science.md §6: |exponent| ≤ 1 for a log parameter), or leave it "
                        "out to fit it."
                    )


#: The largest |value| the fit takes, and the smallest largest one: its squared values stay
#: finite and nonzero in float64 (normal numbers span about 2.2e-308 to 1.8e308).
MAGNITUDES = (1e-150, 1e150)
#: A rung's worst trials are "far past the rest" when the gap below them is this many times the
#: widest spread any rung's trials show below their own largest gap (an order of magnitude): a
#: loss that blew up, which the valley would bend to fit, rather than the next point up a wall.
FAR_GAP = 10.0
#: ... and the trials under the gap number at least this many (a spread of one or two trials says
#: nothing of the valley's).
FAR_MIN_REST = 3


def _check_magnitude(rungs: Sequence[tuple[Scale, RungTrials]]) -> None:
    """The sweep's largest |value| within :data:`MAGNITUDES` (all values 0 pass: a flat sweep)."""
    sizes = [(float(np.abs(t.values[np.isfinite(t.values)]).max()), scale) for scale, t in rungs]
    largest, scale = max(sizes, key=lambda item: item[0])
    low, high = MAGNITUDES
    if largest > high or 0.0 < largest < low:
        raise TransferSearchError(
            f"the sweep's largest |value| is {largest:.3g} (a trial at {scale!r}), outside the "
            f"{low:.0e}–{high:.0e} the fit's squares can hold. Report the metric in other units "
            "(e.g. the log of a perplexity, or the loss × 1e6); the fit gives the same answer "
            "in any units."
        )


def _flat_notes(rungs: Sequence[tuple[Scale, RungTrials]]) -> list[Diagnostic]:
    """A rung whose finite trials (two or more) all report one value says nothing of where its
    optimum lies: the fit reads it off the priors (the middle of its trials, the other rungs'
    law). Usually a metric that was not recorded, so the user is asked to look."""
    flat = []
    for scale, trials in rungs:
        finite = trials.values[np.isfinite(trials.values)]
        if len(finite) >= 2 and float(np.ptp(finite)) == 0.0:
            flat.append(repr(scale))
    if not flat:
        return []
    return [
        Diagnostic(
            "flat",
            f"every finite trial at {flat} reported the same value: they say nothing of where "
            "the optimum lies there, and the fit reads it off its priors. Check that the metric "
            "was recorded for those trials.",
            act=True,
        )
    ]


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
    _check_magnitude(rungs)
    notes.extend(_flat_notes(rungs))
    order = {scale: i for i, scale in enumerate(by_cost((s for s, _ in rungs), cost))}
    rungs.sort(key=lambda item: order[item[0]])
    return rungs


def prepare(
    observations: Sequence[Observation],
    params: Sequence[str],
    options: FitOptions,
    *,
    direction: str,
    log_params: Iterable[str] | None,
    target: Scale | None,
    cost: Callable[[Scale], float] | None = None,
    anchor: Mapping[str, float] | None = None,
) -> tuple[Ladder, tuple[Diagnostic, ...]]:
    """Check and arrange the trials for the fits.

    ``options`` gives the scale variables and the exponent tables; the sweep gives ``direction``
    and ``cost``; ``log_params`` are those the engine resolved (the caller's, else the space's
    declaration, else the all-positive ones); ``anchor`` where the space's rule places an
    optimum (kept for the parameters fitted).

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
    observations, notes = _past_level(observations, options.diverged_beyond, sign)
    groups = _group(observations)
    if options.diverged_beyond is None:
        groups, far = _far_diverged(groups, sign)
        notes.extend(far)
    if len(groups) < 2:
        raise TransferSearchError(
            f"extrapolation needs trials at two or more scales, but got {len(groups)} "
            f"({[repr(s) for s in groups]}). Run the sweep at another proxy scale too."
        )
    rungs = _rung_trials(groups, names, logs, sign, cost, notes)
    notes.extend(_unfitted_notes(groups, names))
    scales = tuple(scale for scale, _ in rungs)
    scale_variables = options.scale_variables
    variables = common_variables(scales, scale_variables, purpose="fit the power laws")
    if not variables:
        raise TransferSearchError(
            f"the proxy scales share no scale variable ({[repr(s) for s in scales]}). Give every "
            "Scale the same names, e.g. width and dataset_size."
        )
    fixed = _check_exponents(options.fixed_exponents, "fixed_exponents", names, variables)
    prior = _check_exponents(options.prior_exponents, "prior_exponents", names, variables)
    log_scales = np.log(np.array([[s[v] for v in variables] for s in scales]))
    _log_unvaried(names, logs, [t for _, t in rungs])
    if target is not None:
        target.require(*variables, purpose="predict from the fitted power laws")
        notes.extend(_unseen_notes(variables, log_scales, target, fixed))
        notes.extend(_unrecorded_notes(scales, target, scale_variables))
    _check_exponent_reach(
        {"fixed_exponents": fixed, "prior_exponents": prior}, variables, log_scales, target, logs
    )
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
        np.log([float(cost_function(cost)(s)) for s in scales]),
        {k: float(v) for k, v in (anchor or {}).items() if k in names},
    )
    return ladder, tuple(notes)


def _log_unvaried(names: Sequence[str], logs: Sequence[str], trials: Sequence[RungTrials]) -> None:
    """Log each parameter no finite trial varied: the fit drops it and keeps its one value.

    Raises:
        TransferSearchError: no parameter varied, so there is no valley to fit.
    """
    finite = np.vstack([t.coords[np.isfinite(t.values)] for t in trials])
    unvaried = np.ptp(finite, axis=0) <= 1e-12 * np.maximum(1.0, np.abs(finite).max(axis=0))
    ran = {names[j]: to_natural(finite[0, j], names[j] in logs) for j in range(len(names))}
    if unvaried.all():
        raise TransferSearchError(
            f"no parameter to fit varies over the finite trials: every one ran "
            f"{', '.join(f'{k}={v:.6g}' for k, v in ran.items())}, so there is no optimum to "
            "locate. Pass params= naming parameters the sweep varied, or sweep these."
        )
    for j in map(int, np.flatnonzero(unvaried)):
        logger.info(
            "%r was never varied (every finite trial at %.6g): dropped from the fit, the prediction "
            "keeps that value",
            names[j],
            ran[names[j]],
        )


def _past_level(
    observations: Sequence[Observation], level: float | None, sign: float
) -> tuple[list[Observation], list[Diagnostic]]:
    """With ``diverged_beyond`` given: each complete trial whose finite value lies past it on the
    metric's worse side made a diverged one (its value NaN), and a note saying how many. An
    infinite level leaves every finite value in the valley (and turns off :func:`_far_diverged`)."""
    if level is None or math.isinf(level):
        return list(observations), []
    out: list[Observation] = []
    past: list[float] = []
    for obs in observations:
        if obs.state == "complete" and math.isfinite(obs.value) and sign * (obs.value - level) > 0:
            out.append(Observation(obs.scale, obs.params, math.nan))
            past.append(obs.value)
        else:
            out.append(obs)
    if not past:
        return out, []
    note = Diagnostic(
        "blown_up",
        f"{len(past)} trial(s) past diverged_beyond={level:g} ({_span(np.array(past))}) counted "
        "as diverged: the divergence model reads them, the valley does not.",
        act=False,
    )
    return out, [note]


def _far_diverged(
    groups: Mapping[Scale, list[Observation]], sign: float
) -> tuple[dict[Scale, list[Observation]], list[Diagnostic]]:
    """Runs that blew up without reaching NaN, read as the divergences they are (docs/science.md
    §8). A rung's worst values are far past the rest where the largest gap in its sorted finite
    values exceeds :data:`FAR_GAP` times the widest spread that any rung's trials cover below
    their own largest gap (with at least :data:`FAR_MIN_REST` trials below it; a rung too sparse
    ever to hold that many, FAR_MIN_REST finite values or fewer, is judged by the same yardstick
    with whatever lies under its gap — it cannot be the yardstick, but it can show a blow-up): a steep wall's
    next point stays within the spread other rungs' valleys show, a blown-up run lies an order
    of magnitude past it. The middle of that gap, as an excess over its rung's best value, is
    the level (the least where several rungs show one): every trial of every rung whose excess
    over its own rung's best lies past it is made diverged (value NaN), as ``diverged_beyond=``
    would, so that a run is not a divergence on one rung and a loss the valley bends to hold on
    the next; an excess, not a value, because the rungs' losses fall with scale (a small rung's
    converged runs may sit where a large rung's blow-ups begin). Once it has found blow-ups the
    rule is applied again to what is left, its yardstick now taken only from the rungs that hold
    none: a rung's own blow-ups cannot be the yardstick of its other blow-ups (runs that blew up
    to 693, 1.2·10⁵, 1.1·10⁶, 8·10⁹ and 1.6·10¹⁷ are read alike, not only the largest). On a
    sweep where the first pass finds nothing, nothing changes. A warning names them."""
    out, clean, levels = dict(groups), set(groups), []
    while (found := _far_level(out, sign, clean)) is not None:
        level, first = found
        best = {
            scale: min(sign * o.value for o in group if o.usable)
            for scale, group in out.items()
            if any(o.usable for o in group)
        }

        blown = {
            scale: [o.usable and o.scale in best and sign * o.value - best[o.scale] > level
                    for o in group]
            for scale, group in out.items()
        }  # fmt: skip
        hit = {scale for scale, flags in blown.items() if any(flags)}
        if not hit:
            break
        clean -= hit
        levels.append((level, first))
        out = {
            scale: [
                Observation(o.scale, o.params, math.nan) if far else o
                for o, far in zip(group, blown[scale], strict=True)
            ]
            for scale, group in out.items()
        }
    if not levels:
        return dict(groups), []
    values = np.array([
        o.value
        for scale, group in groups.items()
        for o, now in zip(group, out[scale], strict=True)
        if math.isfinite(o.value) and math.isnan(now.value)
    ])  # fmt: skip
    level, first = levels[0]
    more = (
        f" (read again without the rungs that held them: down to {levels[-1][0]:.4g} past a "
        f"rung's best, {len(levels)} passes)"
        if len(levels) > 1
        else ""
    )
    note = Diagnostic(
        "far",
        f"{len(values)} trial(s) at {_span(values)} lie far past the rest of their rung (more "
        f"than {level:.4g} past its best: the middle of a gap in {first!r}'s values, more than "
        f"{FAR_GAP:g} times the widest spread of any rung's values below such a gap{more}): "
        "read as runs that blew up, i.e. diverged (the divergence model reads them, the valley "
        "does not). Pass diverged_beyond= to set the level yourself, or "
        "diverged_beyond=math.inf to fit every finite value.",
        act=True,
    )
    return out, [note]


def _far_level(
    groups: Mapping[Scale, list[Observation]], sign: float, clean: set[Scale]
) -> tuple[float, Scale] | None:
    """One pass of :func:`_far_diverged`: the level past which a rung's values are far (an
    excess over its best) and the rung that shows it, the yardstick taken from the ``clean``
    rungs only; None where no rung shows such a gap."""
    splits: dict[Scale, tuple[np.ndarray, int]] = {}
    for scale, group in groups.items():
        y = np.sort([sign * o.value for o in group if o.usable])
        if len(y) >= 2:
            splits[scale] = (y, int(np.argmax(np.diff(y))))
    spreads = [y[k] - y[0] for s, (y, k) in splits.items() if k + 1 >= FAR_MIN_REST and s in clean]
    widest = max(spreads, default=0.0)
    # A rung that holds FAR_MIN_REST trials or more under its gap shows it; one too sparse ever
    # to hold that many (a sparse sweep's rung of 2-3 finite trials) is judged by the same
    # yardstick from the other rungs with whatever lies under its gap.
    far = [
        (0.5 * float(y[k] + y[k + 1]) - float(y[0]), scale)
        for scale, (y, k) in splits.items()
        if (k + 1 >= FAR_MIN_REST or len(y) <= FAR_MIN_REST)
        and widest > 0
        and y[k + 1] - y[k] > FAR_GAP * widest
    ]
    return min(far, key=lambda item: item[0]) if far else None


def _span(values: np.ndarray) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:.4g}" if low == high else f"{low:.4g}–{high:.4g}"


def _unfitted_notes(
    groups: Mapping[Scale, list[Observation]], names: Sequence[str]
) -> list[Diagnostic]:
    """A note when trials at one scale differ in a parameter ``params`` leaves out (a table
    that varies lr and warmup, fitted for beta1 alone): the fit reads rows that differ only in
    it as repeats of one configuration, their spread as noise and a divergence it caused as that
    configuration's."""
    varying: set[str] = set()
    for group in groups.values():
        rows = [o for o in group if o.state != "pruned"]
        for name in {key for o in rows for key in o.params} - set(names) - varying:
            if len({repr(o.params.get(name)) for o in rows}) > 1:
                varying.add(name)
    if not varying:
        return []
    return [
        Diagnostic(
            "unfitted",
            f"trials at one scale also differ in {sorted(varying)}, which params= leaves out: "
            "the fit reads rows that differ only in them as repeats of one configuration (right "
            "for a seed; for a hyperparameter, its effect is read as noise and a divergence it "
            "caused as that configuration's). Add them to params=, or pass only the rows that "
            "hold them fixed.",
            act=True,
        )
    ]


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
                "unless prior_exponents or fixed_exponents say otherwise, its scale integrated "
                "over the drift hyperprior), which widens the interval. Vary it across the "
                "proxies."
            )
            notes.append(Diagnostic("unseen", message, act=True))
    return notes

"""The engine: from a :class:`~transfersearch.sweep.Sweep` to the target's hyperparameters.

Check the trials and arrange them by rung (:mod:`.rungs`), fit the one model of every trial and
decide (:mod:`.onemodel`: :mod:`.valley`, :mod:`.divergence`, :mod:`.target`), and build the
:class:`~transfersearch.fitting.result.Extrapolation` once, in the user's units.

Pure: it reads no source, warns nothing and logs no advice. What it finds worth saying comes back
as :class:`~transfersearch.fitting.diagnostics.Diagnostic` records on ``diagnostics``; the public
:func:`transfersearch.extrapolate` reads sources and turns the records into warnings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray, natural_params
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.findings import (
    collinearity,
    findings,
    held_findings,
    interaction_findings,
    momentum_findings,
    positive_findings,
    scatter_findings,
    unsettled_findings,
    wide_findings,
)
from transfersearch.fitting.laws import PowerLaw
from transfersearch.fitting.onemodel import (
    LadderFit,
    fit_ladder,
    robust_sd,
    span_point,
)
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.result import Extrapolation, Validation
from transfersearch.fitting.rungs import Ladder, prepare
from transfersearch.observations import (
    Observation,
    check_log_swept,
    check_params_recorded,
    check_scale_names,
    collapse_duplicates,
    complete_target,
)
from transfersearch.scale import Scale
from transfersearch.sweep import Direction, Sweep

__all__ = ["fit_sweep", "infer_params", "validate_sweep"]

#: Note when the target is farther from the nearest proxy than this many ladder spans.
FAR_FACTOR = 2.0
#: ``summary()`` says the calibration covers the span only when the target lies farther off it
#: than this (decades: a tenth of a percent in scale, not round-off).
OFF_SPAN_SHOWN = 1e-3
#: The options of :func:`fit_sweep` by default (frozen, so one shared instance is safe).
FIT_DEFAULTS = FitOptions()
#: The options of :func:`validate_sweep` by default.
VALIDATE_DEFAULTS = FIT_DEFAULTS


def as_scale(target: Any) -> Scale:
    """``target`` as a :class:`~transfersearch.scale.Scale` (a mapping is converted).

    Raises:
        TransferSearchError: ``target`` is neither a Scale nor a mapping.
    """
    if isinstance(target, Scale):
        return target
    if isinstance(target, Mapping):
        return Scale(target)
    raise TransferSearchError(
        f"`target` must be a Scale, e.g. Scale(width=4096, dataset_size=1e8), but got {target!r}."
    )


def infer_params(observations: Sequence[Observation]) -> list[str]:
    """The parameters every complete trial records, in first-seen order.

    Raises:
        TransferSearchError: no complete trial, or no parameter common to all of them.
    """
    complete = [o for o in observations if o.state == "complete"]
    if not complete:
        raise TransferSearchError(
            "no complete trial to read parameter names from. Pass params=[...] explicitly or "
            "add finished trials."
        )
    common = [name for name in complete[0].params if all(name in o.params for o in complete)]
    if not common:
        raise TransferSearchError(
            "the complete trials share no parameter name. Pass params=[...] explicitly."
        )
    return common


def _wanted(options: FitOptions, sweep: Sweep) -> Sequence[str] | None:
    """The parameters to fit: the options', else those the sweep was read for (None: every
    parameter every complete trial records)."""
    return options.params if options.params is not None else sweep.params


def _decades(ladder: Ladder, target: Scale) -> tuple[float, float, list[Diagnostic]]:
    """Distance from the target to the nearest rung and the ladder's span (log10 units), and a
    note when the target lies more than :data:`FAR_FACTOR` spans away."""
    logs = ladder.log_scales
    point = ladder.target_logs(target)
    near = float(np.sqrt(((logs - point) ** 2).sum(axis=1)).min()) / math.log(10.0)
    gaps = logs[:, None, :] - logs[None, :, :]
    span = float(np.sqrt((gaps**2).sum(axis=2)).max()) / math.log(10.0)
    notes: list[Diagnostic] = []
    if span > 0 and near > FAR_FACTOR * span:
        message = (
            f"the target lies {near:.2g} decades from the nearest proxy, more than {FAR_FACTOR:g}x "
            f"the ladder's span ({span:.2g} decades): the prediction leans on the law's form. "
            "Add a larger proxy."
        )
        notes.append(Diagnostic("far_target", message, act=True, scale=target))
    return near, span, notes


def fit_sweep(
    sweep: Sweep,
    target: Scale | Mapping[str, float],
    options: FitOptions = FIT_DEFAULTS,
    *,
    walk_forward: bool = True,
) -> Extrapolation:
    """Predict the optimal parameters at ``target`` from a sweep over a ladder of scales.

    Method (docs/science.md §7–9): one model of every trial — a valley whose centre moves with
    the log scales as ``μ(ℓ) = a + Bℓ``, the drift ``B`` with a prior centred
    on theory's (no drift in invariant coordinates) whose scale is integrated over, the rungs'
    scatter about the law likewise, trials weighed by how well a quadratic can hold them;
    divergence a logistic law of each trial's offset from its rung's optimum; the point returned
    in ``params`` is the
    least posterior expected loss at the target, a diverged run charged ``divergence_cost``;
    ``law_params`` is the law's posterior-mean point. Walk-forward folds (each rung from the
    cheaper ones) calibrate the predictive spread and are reported with the null's regret.

    Args:
        sweep: the trials, the stored space (copied to the result), the direction (None:
            minimise) and the cost that orders the rungs (None:
            :func:`transfersearch.cost.default_cost`). Crashed trials (state ``"failed"``) are
            left out and counted.
        target: the scale to predict for. A scale variable it leaves out that never varied over
            the ladder keeps the ladder's value (``target_from_ladder`` on the result); every
            other variable the laws use must be given.
        options: the fit's options (:class:`~transfersearch.fitting.options.FitOptions`).
        walk_forward: run the walk-forward folds that calibrate the spread (a planner's frequent
            refits skip them: the spread is then the uncalibrated posterior's).

    Returns:
        An :class:`~transfersearch.fitting.result.Extrapolation`; what it found worth saying is on
        its ``diagnostics``.

    Raises:
        TransferSearchError: fewer than two scales, a missing parameter, a non-positive value on a
            log coordinate, a target missing a scale variable the laws need.
    """
    obs, duplicates = collapse_duplicates(list(sweep.observations))
    checked = _check(sweep, obs, as_scale(target), options, _wanted(options, sweep), duplicates)
    return _extrapolate(sweep, checked, options, walk_forward=walk_forward)


class _Checked(NamedTuple):
    """The sweep's trials checked and arranged as the fit sees them, and what the checks found:
    the small values the engine goes forward with before any fit."""

    ladder: Ladder
    target: Scale
    target_from_ladder: dict[str, float]
    duplicates: int
    crashed: int
    notes: tuple[Diagnostic, ...]


def _check(
    sweep: Sweep,
    obs: Sequence[Observation],
    target: Scale,
    options: FitOptions,
    names: Sequence[str] | None,
    duplicates: int,
) -> _Checked:
    """Leave crashed trials out (counted), complete the target from the ladder, check the
    trials and arrange the ladder; ``names`` None: those every complete trial records."""
    crashed = sum(1 for o in obs if o.state == "failed")
    kept = [o for o in obs if o.state != "failed"]
    target, from_ladder = complete_target(kept, target)
    check_scale_names(kept, target=target)
    names = infer_params(kept) if names is None else names
    _check_observations(kept, names, options, sweep)
    ladder, notes = _prepare(kept, names, options, sweep, target)
    return _Checked(ladder, target, from_ladder, duplicates, crashed, notes)


def _fit_ladder(
    ladder: Ladder,
    target_logs: FloatArray,
    options: FitOptions,
    *,
    walk_forward: bool,
    drift: bool | None = None,
) -> LadderFit:
    """The one model on ``ladder``: the one place the options' seed, divergence cost and model
    reach :func:`~transfersearch.fitting.onemodel.fit_ladder` (``drift`` None: the options'
    model decides; ``validate_sweep`` reads its yardstick with the drift model whatever model it
    checks)."""
    return fit_ladder(
        ladder,
        target_logs,
        seed=options.seed,
        divergence_cost=options.divergence_cost,
        validate=walk_forward,
        drift=options.model != "constant" if drift is None else drift,
    )


def _prepare(
    obs: Sequence[Observation],
    names: Sequence[str],
    options: FitOptions,
    sweep: Sweep,
    target: Scale | None,
) -> tuple[Ladder, tuple[Diagnostic, ...]]:
    """:func:`~transfersearch.fitting.rungs.prepare` with the options and the sweep's direction,
    cost and declared log parameters."""
    logs, linear = _log_params(obs, names, options, sweep)
    ladder, notes = prepare(
        obs,
        names,
        options,
        direction=_direction(sweep),
        log_params=logs,
        target=target,
        cost=sweep.cost,
        anchor=None if sweep.space is None else sweep.space.optimum_prior(),
    )
    return ladder, tuple(linear) + notes


def _direction(sweep: Sweep) -> Direction:
    """The sweep's direction; a sweep that does not say is minimised."""
    return "minimize" if sweep.direction is None else sweep.direction


def _check_observations(
    obs: Sequence[Observation], names: Sequence[str], options: FitOptions, sweep: Sweep
) -> None:
    """The checks on the trials both entry points share: named parameters recorded, and no
    non-positive value of a parameter the space declares log, nor a stray negative one of a
    parameter that is otherwise positive (unless ``log_params`` says which are log)."""
    check_params_recorded(obs, names)
    if options.log_params is None:
        check_log_swept(obs, names, space=sweep.space)


def _declared(sweep: Sweep) -> dict[str, bool]:
    """Each coordinate's log/linear declaration in the sweep's space ({} without a space)."""
    if sweep.space is None:
        return {}
    out: dict[str, bool] = {}
    for name, dist in sweep.space.distributions.items():
        log = getattr(dist, "log", None)
        if isinstance(log, bool):
            out[name] = log
    return out


def _log_params(
    obs: Sequence[Observation], names: Sequence[str], options: FitOptions, sweep: Sweep
) -> tuple[tuple[str, ...] | None, list[Diagnostic]]:
    """Which parameters are fitted in log space: the caller's ``log_params``, else the space's
    declaration, else every parameter whose values are all positive; a parameter with a value
    ≤ 0 and no declaration is fitted linearly, and a note says so (docs/science.md §7.4)."""
    if options.log_params is not None:
        return options.log_params, []
    declared = _declared(sweep)
    chosen: list[str] = []
    notes: list[Diagnostic] = []
    for name in names:
        values = [o.params[name] for o in obs if name in o.params]
        if name in declared:
            if declared[name]:
                chosen.append(name)
        elif all(v > 0.0 for v in values):
            chosen.append(name)
        else:
            zeros = sum(1 for v in values if v <= 0.0)
            notes.append(
                Diagnostic(
                    "linear",
                    f"{name} has {zeros} value(s) <= 0 (e.g. {min(values):g}): fitted on a "
                    f"linear axis{', kept >= 0' if min(values) >= 0 else ''}. Declare it in the "
                    "space, or pass log_params=[...], to choose.",
                    act=False,
                    param=name,
                )
            )
    return tuple(chosen), notes


def _extrapolate(
    sweep: Sweep, checked: _Checked, options: FitOptions, *, walk_forward: bool
) -> Extrapolation:
    """Fit the one model on the checked ladder, compute the findings from its pieces, and build
    the result once, in natural units."""
    ladder, target = checked.ladder, checked.target
    fit = _fit_ladder(ladder, ladder.target_logs(target), options, walk_forward=walk_forward)
    names = ladder.names
    model = "constant" if options.model == "constant" else "drift"
    decision, law = _full(fit, fit.decision), _full(fit, fit.law_point)
    samples, stderr = _samples(ladder, fit)
    loss = fit.target_loss
    near, span, far = _decades(ladder, target)
    collinear, stable = collinearity(ladder), _stable_up_to(ladder)
    found = findings(collinear, fit.optima, stable, divergence_modelled=loss.divergence is not None)
    return Extrapolation(
        target=target,
        params=natural_params(names, decision, ladder.logs),
        law_params=natural_params(names, law, ladder.logs),
        laws=_laws(ladder, fit),
        optima=fit.optima,
        model=model,
        model_scores=_scores(fit, model),
        walk_forward=fit.folds,
        selection_reason=_reason(fit, options, _off_span(ladder, target)),
        scale_variables=ladder.variables,
        log_params=ladder.logs,
        stderr={n: float(v) for n, v in zip(names, stderr, strict=True)},
        samples=samples,
        calibration=fit.calibration,
        decision_shift={n: float(v) for n, v in zip(names, decision - law, strict=True)},
        collinearity=collinear,
        extrapolation_decades=near,
        ladder_span_decades=span,
        direction=_direction(sweep),
        space=sweep.space,
        p_diverge=loss.p_diverge(fit.decision),
        p_diverge_law=loss.p_diverge(fit.law_point),
        divergence_cost=fit.divergence_cost,
        n_crashed=checked.crashed,
        stable_up_to=stable,
        target_loss=loss,
        target_from_ladder=checked.target_from_ladder,
        duplicates_collapsed=checked.duplicates,
        diagnostics=(
            *checked.notes,
            *far,
            *_crash_notes(checked.crashed),
            *unsettled_findings(fit.valley.settled),
            *_wide(ladder, fit),
            *_interaction(ladder, fit),
            *_scatter(ladder, fit, options),
            *held_findings([names[j] for j in fit.active], list(fit.law_held)),
            *momentum_findings([names[j] for j in fit.active], list(fit.domain_held)),
            *positive_findings([names[j] for j in fit.active], list(fit.positive_held)),
            *found,
        ),
    )


def _full(fit: LadderFit, active: FloatArray) -> FloatArray:
    """A point over the active parameters as every parameter's fitted coordinate."""
    point = fit.fixed_values.copy()
    point[list(fit.active)] = active
    return point


def _wide(ladder: Ladder, fit: LadderFit) -> list[Diagnostic]:
    """:func:`.findings.wide_findings` on the fitted parameters, from the finite trials' range."""
    cols = list(fit.active)
    coords = np.vstack([t.coords[np.isfinite(t.values)] for t in ladder.trials])[:, cols]
    names = [ladder.names[j] for j in cols]
    return wide_findings(names, ladder.logs, fit.draws, np.ptp(coords, axis=0))


def _interaction(ladder: Ladder, fit: LadderFit) -> list[Diagnostic]:
    """:func:`.findings.interaction_findings` on the fitted parameters' finite trials."""
    cols = list(fit.active)
    finite = [np.isfinite(t.values) for t in ladder.trials]
    rungs = [
        (t.coords[f][:, cols], t.values[f]) for t, f in zip(ladder.trials, finite, strict=True)
    ]
    names = [ladder.names[j] for j in cols]
    return interaction_findings(names, rungs, ladder.scales, ladder.logs)


def _scatter(ladder: Ladder, fit: LadderFit, options: FitOptions) -> list[Diagnostic]:
    """:func:`.findings.scatter_findings` where the law's exponents are fitted (no fixed one, the
    drift integrated) and the target is a new rung."""
    if options.model == "constant" or fit.target_is_rung or any(ladder.fixed.values()):
        return []
    return scatter_findings(ladder.variables, ladder.log_scales)


def _samples(ladder: Ladder, fit: LadderFit) -> tuple[FloatArray, FloatArray]:
    """The draws over every parameter (a non-negative linear one held ≥ 0, a momentum ≤ 1) and
    their sd."""
    cols = list(fit.active)
    samples = np.tile(fit.fixed_values, (len(fit.draws), 1))
    samples[:, cols] = fit.draws
    for i, j in enumerate(cols):
        log = ladder.names[j] in ladder.logs
        if not log and fit.target_loss.lower[i] >= 0.0:
            samples[:, j] = np.maximum(samples[:, j], 0.0)
        if len(fit.positive) and fit.positive[i]:  # a rate or timescale: above 0
            least = min(float(t.coords[np.isfinite(t.values), j].min()) for t in ladder.trials)
            samples[:, j] = np.where(samples[:, j] <= 0.0, least, samples[:, j])
        if len(fit.below_one) and fit.below_one[i]:  # a momentum: at most 1 (log 1 = 0)
            samples[:, j] = np.minimum(samples[:, j], 0.0 if log else 1.0)
    stderr = np.zeros(len(ladder.names))
    stderr[cols] = robust_sd(fit.draws)
    return samples, stderr


def _scores(fit: LadderFit, model: str) -> dict[str, float]:
    """The folds' mean regret of the model and of the null (copy the cheaper rungs' best)."""
    folds = fit.folds
    return {
        name: float(np.mean([f.regret[name] for f in folds])) if folds else math.nan
        for name in (model, "copy")
    }


def _off_span(ladder: Ladder, target: Scale) -> float:
    """How far (decades, in log scale) the target lies off the affine span of the rungs' scales:
    the part of its prediction no walk-forward fold tests (docs/science.md §7.5)."""
    logs = ladder.target_logs(target)
    return float(np.linalg.norm(logs - span_point(ladder.log_scales, logs))) / math.log(10.0)


def _reason(fit: LadderFit, options: FitOptions, off_span: float) -> str:
    if options.model == "constant":
        return "no drift: chosen by the caller (model='constant')"
    if fit.target_is_rung:
        spread = "the target is a fitted rung: its own posterior, not calibrated"
    elif not fit.folds:
        spread = "no walk-forward fold to calibrate against: the posterior's own spread"
    else:
        spread = (
            f"predictive spread calibrated on {len(fit.folds)} walk-forward fold(s), "
            f"x{fit.calibration:.2f} at its most likely (each draw takes its own factor from "
            "that posterior)"
        )
        if off_span > OFF_SPAN_SHOWN:
            spread += (
                f", along the ladder's span only: the target lies {off_span:.2g} decades off it, "
                "a part of the way that keeps the drift prior's spread, its scale from the "
                "hyperprior (no rung informs it)"
            )
    return (
        f"one model of every trial; the drift prior's scale integrated over "
        f"(posterior weight beyond no drift {fit.valley.drift_weight:.0%}), {spread}"
    )


def _crash_notes(crashed: int) -> list[Diagnostic]:
    if not crashed:
        return []
    message = (
        f"{crashed} trial(s) crashed (raised an exception): left out of the fit, not counted as "
        "divergences. Look at their tracebacks; rerun them if the crash was not the "
        "configuration's fault."
    )
    return [Diagnostic("crashed", message, act=False)]


def _laws(ladder: Ladder, fit: LadderFit) -> dict[str, PowerLaw]:
    """Each parameter's law from the posterior draws of (intercept, exponents)."""
    laws: dict[str, PowerLaw] = {}
    variables, m = ladder.variables, len(ladder.variables)
    size = 1 + m
    for j, name in enumerate(ladder.names):
        if j in fit.active:
            i = fit.active.index(j)
            mean = fit.law_point_coefficients[i]
            cov = np.atleast_2d(np.cov(fit.law_coefficients[:, i, :].T))
        else:
            mean = np.concatenate([[fit.fixed_values[j]], np.zeros(size - 1)])
            cov = np.zeros((size, size))
        laws[name] = PowerLaw(
            param=name,
            log_space=name in ladder.logs,
            intercept=float(mean[0]),
            exponents={v: float(e) for v, e in zip(variables, mean[1 : 1 + m], strict=True)},
            fixed=tuple(ladder.fixed.get(name, {})),
            shrunk=(),
            names=("intercept", *variables),
            covariance=cov,
            r_squared=math.nan,
            chi2_per_dof=math.nan,
            n_scales=len(ladder.scales),
            model="constant" if j not in fit.active else "drift",
        )
    return laws


def _stable_up_to(ladder: Ladder) -> dict[str, float]:
    """The largest value of each parameter a stable trial reached at the costliest rung."""
    top = ladder.trials[-1]
    stable = top.coords[np.isfinite(top.values)]
    if not len(stable):
        return {}
    return natural_params(ladder.names, stable.max(axis=0), ladder.logs)


def validate_sweep(
    sweep: Sweep,
    options: FitOptions = VALIDATE_DEFAULTS,
    held_out: Scale | Mapping[str, float] | None = None,
) -> Validation:
    """Hold the costliest rung out, predict it from the rest, and charge the regret there.

    The held-out rung's optimum and valley are read off the one model fitted to every rung; the
    regret is the prediction's excess on that valley, in the metric's units.

    Args:
        sweep: as for :func:`fit_sweep`; needs three or more scales.
        options: as for :func:`fit_sweep`.
        held_out: the scale to hold out (default: the costliest by the sweep's cost, the order
            of :func:`transfersearch.cost.by_cost`).

    Returns:
        A :class:`~transfersearch.fitting.result.Validation`; its ``extrapolation`` carries the
        sweep's space and the fit's diagnostics.

    Raises:
        TransferSearchError: fewer than three scales, ``held_out`` is not a proxy scale, or any
            error :func:`fit_sweep` raises.
    """
    obs, duplicates = collapse_duplicates(list(sweep.observations))
    obs = [o for o in obs if o.state != "failed"]
    check_scale_names(obs)
    wanted = _wanted(options, sweep)
    names = infer_params(obs) if wanted is None else wanted
    _check_observations(obs, names, options, sweep)
    full, _ = _prepare(obs, names, options, sweep, None)
    if len(full.scales) < 3:
        raise TransferSearchError(
            f"validate() holds one scale out and fits a law on the rest, so it needs three or "
            f"more scales, but got {len(full.scales)}. Add a proxy scale."
        )
    chosen = full.scales[-1] if held_out is None else complete_target(obs, as_scale(held_out))[0]
    if chosen not in full.scales:
        raise TransferSearchError(
            f"held_out={chosen!r} is not one of the proxy scales "
            f"{[repr(s) for s in full.scales]}. Pick one of them."
        )
    whole = _fit_ladder(full, full.log_scales[-1], options, walk_forward=False, drift=True)
    observed = whole.optima[full.scales.index(chosen)]
    rest = [o for o in obs if o.scale != chosen]
    checked = _check(sweep, rest, chosen, options, names, duplicates)
    return _validation(_extrapolate(sweep, checked, options, walk_forward=True), observed, chosen)


def _validation(result: Extrapolation, observed: ScaleOptimum, chosen: Scale) -> Validation:
    interval = result.interval(0.9)
    log_error: dict[str, float] = {}
    relative: dict[str, float] = {}
    inside: dict[str, bool] = {}
    for name in result.params:
        predicted, seen = result.params[name], observed.params[name]
        if name in result.log_params:
            log_error[name] = math.log(predicted / seen)
            relative[name] = predicted / seen - 1.0
        else:
            log_error[name] = relative[name] = predicted - seen
        low, high = interval[name]
        inside[name] = bool(low <= seen <= high)
    regret = observed.regret(result.params)
    relative_regret = (
        regret / abs(observed.value) if regret is not None and observed.value != 0 else None
    )
    return Validation(
        held_out=chosen,
        predicted=dict(result.params),
        observed=dict(observed.params),
        log_error=log_error,
        relative_error=relative,
        within_interval=inside,
        regret=regret,
        relative_regret=relative_regret,
        walk_forward=result.walk_forward,
        extrapolation=result,
        held_out_optimum=observed,
    )

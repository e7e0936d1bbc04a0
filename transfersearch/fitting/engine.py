"""The engine: from a :class:`~transfersearch.sweep.Sweep` to the target's hyperparameters.

1. Group the trials by scale (:mod:`.rungs`); fit one valley over every rung (:mod:`.surface`) and
   read each rung's optimum off it.
2. Score each model passed (:data:`.models.DEFAULT_MODELS`: no drift first, then the prior's
   exponents, shrunk and free power laws; only those that apply to the data) walk-forward
   (:mod:`.selection`) and keep the one that earned it.
3. Fit the kept model on every rung and predict the target (:mod:`.predict`); resample each rung's
   trials to measure how much that prediction moves (:mod:`.stability`).
4. Decide: the point of least expected loss under the valley's shape (:mod:`.decision`).

Pure: it reads no source, warns nothing and logs no advice. What it finds worth saying comes back
as :class:`~transfersearch.fitting.diagnostics.Diagnostic` records on ``diagnostics``; the public
:func:`transfersearch.extrapolate` reads sources and turns the records into warnings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import product
from typing import Any

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray, natural_params
from transfersearch.fitting.decision import safe_shift, with_stability
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.findings import findings
from transfersearch.fitting.models import DEFAULT_MODELS, LawModel, check_models, model_named
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.predict import Prediction, predict
from transfersearch.fitting.result import Collinearity, Extrapolation, Validation
from transfersearch.fitting.rungs import Ladder, law_data, prepare, read_optima
from transfersearch.fitting.selection import walk_forward
from transfersearch.fitting.stability import resample_predictions
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

__all__ = ["collinearity", "fit_sweep", "infer_params", "validate_sweep"]

#: Note when the target is farther from the nearest proxy than this many ladder spans.
FAR_FACTOR = 2.0
#: Scale variables whose logs correlate above this over the rungs are reported as collinear: the
#: ladder then pins only their joint direction (a 2-variable design with |corr| 0.95 has a
#: variance inflation factor of 10 on each exponent).
COLLINEAR_CORRELATION = 0.95
#: z of a two-sided 90% interval, for the stability flag.
_Z90 = 1.6448536269514722
#: Resamples of :func:`validate_sweep` by default (half of a fit's: it is a check, not the answer).
VALIDATE_BOOTSTRAP = 100
#: The options of :func:`fit_sweep` by default (frozen, so one shared instance is safe).
FIT_DEFAULTS = FitOptions()
#: The options of :func:`validate_sweep` by default.
VALIDATE_DEFAULTS = FitOptions(n_bootstrap=VALIDATE_BOOTSTRAP)


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


def collinearity(ladder: Ladder) -> Collinearity | None:
    """The most correlated pair of scale variables over the rungs, if above the threshold."""
    logs = ladder.log_scales
    moving = [k for k in range(logs.shape[1]) if np.ptp(logs[:, k]) > 1e-9]
    if len(moving) < 2:  # two rungs that move two variables are as collinear as it gets
        return None
    corr = np.atleast_2d(np.asarray(np.corrcoef(logs[:, moving].T), dtype=np.float64))
    np.fill_diagonal(corr, 0.0)
    a, b = np.unravel_index(int(np.argmax(np.abs(corr))), corr.shape)
    if abs(corr[a, b]) < COLLINEAR_CORRELATION:
        return None
    names = (ladder.variables[moving[a]], ladder.variables[moving[b]])
    return Collinearity(names, float(abs(corr[a, b])), _separating_rung(ladder, moving))


def _separating_rung(ladder: Ladder, moving: Sequence[int]) -> Scale:
    """The corner of the ladder's box whose addition most raises the smallest singular value."""
    logs = ladder.log_scales
    ends = [(int(np.argmin(logs[:, k])), int(np.argmax(logs[:, k]))) for k in range(logs.shape[1])]
    best: tuple[float, tuple[int, ...]] = (-math.inf, tuple(len(logs) - 1 for _ in ends))
    for corner in product(*ends):  # per variable, the rung holding its smallest / largest value
        point = np.array([logs[rung, k] for k, rung in enumerate(corner)])
        grown = np.vstack([logs, point])[:, list(moving)]
        centred = grown - grown.mean(axis=0)
        smallest = float(np.linalg.svd(centred, compute_uv=False).min())
        if smallest > best[0]:
            best = (smallest, corner)
    base = dict(ladder.scales[-1])
    base.update({v: ladder.scales[rung][v] for v, rung in zip(ladder.variables, best[1])})
    return Scale(base)


def candidates(
    ladder: Ladder, optima: Sequence[ScaleOptimum], models: Sequence[LawModel]
) -> list[LawModel]:
    """The models walk-forward scores: each that applies to some parameter's data
    (:meth:`~transfersearch.fitting.models.LawModel.applies`), in the order given."""
    subset = list(range(len(optima)))
    data = [law_data(ladder, optima, subset, j) for j in range(len(ladder.names))]
    return [m for m in models if any(m.applies(d) for d in data)]


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


def _spread(
    ladder: Ladder, samples: FloatArray, point: Prediction
) -> tuple[FloatArray, FloatArray, tuple[str, ...]]:
    """(bootstrap sd, stderr, unstable names) per parameter."""
    law_sd = np.sqrt(point.variance)
    boot_sd = np.full(len(ladder.names), math.nan)
    unstable: list[str] = []
    for j, name in enumerate(ladder.names):
        column = samples[:, j][np.isfinite(samples[:, j])] if samples.size else np.zeros(0)
        if len(column) < 2:
            continue
        boot_sd[j] = float(column.std(ddof=1))
        low, high = np.quantile(column, [0.05, 0.95])
        if 0.5 * float(high - low) > _Z90 * law_sd[j]:
            unstable.append(name)
    stderr = np.where(np.isfinite(boot_sd), np.maximum(law_sd, boot_sd), law_sd)
    return boot_sd, stderr, tuple(unstable)


def fit_sweep(
    sweep: Sweep,
    target: Scale | Mapping[str, float],
    options: FitOptions = FIT_DEFAULTS,
    models: Sequence[LawModel] = DEFAULT_MODELS,
) -> Extrapolation:
    """Predict the optimal parameters at ``target`` from a sweep over a ladder of scales.

    Method (module docstring; docs/science.md §7, §7.6): a valley pooled over every rung gives each
    rung's optimum; the models that apply (no drift, the prior's exponents, power laws shrunk
    toward the prior by empirical Bayes, free power laws) are scored walk-forward — each rung
    predicted from strictly cheaper ones, charged its regret on that rung's fitted surface — and a
    drifting model is kept only when it beats no drift by more than one standard error. The point
    returned in ``params`` minimises the expected loss under the prediction's uncertainty and the
    valley's asymmetric walls; ``law_params`` keeps the model's own point.

    Args:
        sweep: the trials, the stored space (copied to the result), the direction (None:
            minimise) and the cost that orders the rungs (None:
            :func:`transfersearch.cost.default_cost`).
        target: the scale to predict for. A scale variable it leaves out that never varied over
            the ladder keeps the ladder's value (``target_from_ladder`` on the result); every
            other variable the laws use must be given.
        options: the fit's options (:class:`~transfersearch.fitting.options.FitOptions`).
        models: the family walk-forward chooses from, null models first.

    Returns:
        An :class:`~transfersearch.fitting.result.Extrapolation`; what it found worth saying is on
        its ``diagnostics``.

    Raises:
        TransferSearchError: fewer than two scales, a missing parameter, a non-positive value on a
            log coordinate, a target missing a scale variable the laws need, a model unknown or
            malformed.
    """
    family = check_models(models)
    if options.model != "auto":
        model_named(options.model, family)
    obs, duplicates = collapse_duplicates(list(sweep.observations))
    target_scale, from_ladder = complete_target(obs, as_scale(target))
    check_scale_names(obs, target=target_scale)
    names = infer_params(obs) if options.params is None else options.params
    _check_observations(obs, names, options, sweep)
    ladder, notes = _prepare(obs, names, options, sweep, target_scale)
    result = _extrapolate(ladder, target_scale, options, family, _direction(sweep))
    result = with_stability(result, ladder, obs)  # the decision within the boundaries
    return replace(
        result,
        space=sweep.space,
        target_from_ladder=from_ladder,
        duplicates_collapsed=duplicates,
        diagnostics=notes + result.diagnostics + findings(result),
    )


def _prepare(
    obs: Sequence[Observation],
    names: Sequence[str],
    options: FitOptions,
    sweep: Sweep,
    target: Scale | None,
) -> tuple[Ladder, tuple[Diagnostic, ...]]:
    """:func:`~transfersearch.fitting.rungs.prepare` with the options and the sweep's direction
    and cost."""
    return prepare(
        obs,
        names,
        direction=_direction(sweep),
        log_params=options.log_params,
        scale_variables=options.scale_variables,
        fixed_exponents=options.fixed_exponents,
        prior_exponents=options.prior_exponents,
        target=target,
        cost=sweep.cost,
    )


def _direction(sweep: Sweep) -> Direction:
    """The sweep's direction; a sweep that does not say is minimised."""
    return "minimize" if sweep.direction is None else sweep.direction


def _check_observations(
    obs: Sequence[Observation], names: Sequence[str], options: FitOptions, sweep: Sweep
) -> None:
    """The checks on the trials both entry points share: named parameters recorded, and no
    non-positive value of a log-swept one (unless ``log_params`` says which are log)."""
    check_params_recorded(obs, names)
    if options.log_params is None:
        check_log_swept(obs, names, space=sweep.space)


def _extrapolate(
    ladder: Ladder,
    target: Scale,
    options: FitOptions,
    models: Sequence[LawModel],
    direction: Direction,
) -> Extrapolation:
    """The fit on a prepared ladder: optima, model choice, prediction, resampling, decision."""
    subset = list(range(len(ladder.scales)))
    notes: list[Diagnostic] = []
    optima, valley = read_optima(ladder, subset, notes=notes)
    table = walk_forward(ladder, optima, candidates(ladder, optima, models))
    model = options.model
    chosen = model_named(table.chosen if model == "auto" else model, models)
    reason = table.reason if model == "auto" else f"chosen by the caller (model={model!r})"
    target_logs = ladder.target_logs(target)
    point = predict(ladder, chosen, optima, subset, target_logs)
    if valley is not None:  # a bias all rungs share moves the prediction too
        point = replace(point, variance=point.variance + valley.shared_bias_var)
    rng = np.random.default_rng(options.seed)
    walls = None if valley is None else np.asarray(valley.wall != 0.0)
    samples = resample_predictions(
        ladder, chosen, target_logs, options.n_bootstrap, rng, optima, walls
    )
    boot_sd, stderr, unstable = _spread(ladder, samples, point)
    if valley is not None:
        shift = safe_shift(stderr, valley.hessian, valley.wall, valley.reach)
    else:
        shift = np.zeros(len(ladder.names))
    near, span, far = _decades(ladder, target)
    return Extrapolation(
        target=target,
        params=natural_params(ladder.names, point.mean + shift, ladder.logs),
        law_params=natural_params(ladder.names, point.mean, ladder.logs),
        laws=point.laws,
        optima=tuple(optima),
        model=chosen.name,
        model_scores=table.scores,
        walk_forward=table.folds,
        selection_reason=reason,
        scale_variables=ladder.variables,
        log_params=ladder.logs,
        stderr={n: float(s) for n, s in zip(ladder.names, stderr, strict=True)},
        samples=samples,
        stability={n: float(s) for n, s in zip(ladder.names, boot_sd, strict=True)},
        unstable=unstable,
        decision_shift={n: float(s) for n, s in zip(ladder.names, shift, strict=True)},
        collinearity=collinearity(ladder),
        extrapolation_decades=near,
        ladder_span_decades=span,
        direction=direction,
        diagnostics=tuple(notes + far),
    )


def validate_sweep(
    sweep: Sweep,
    options: FitOptions = VALIDATE_DEFAULTS,
    held_out: Scale | Mapping[str, float] | None = None,
    models: Sequence[LawModel] = DEFAULT_MODELS,
) -> Validation:
    """Hold the costliest rung out, predict it from the rest, and charge the regret there.

    The same machinery as :func:`fit_sweep` (its walk-forward table is on the result); the
    held-out rung's surface is read off the valley fitted to every rung, and the regret is the
    prediction's excess on it, in the metric's units.

    Args:
        sweep: as for :func:`fit_sweep`; needs three or more scales.
        options: as for :func:`fit_sweep` (default: :data:`VALIDATE_BOOTSTRAP` resamples).
        held_out: the scale to hold out (default: the costliest by the sweep's cost, the order
            of :func:`transfersearch.cost.by_cost`).
        models: as for :func:`fit_sweep`.

    Returns:
        A :class:`~transfersearch.fitting.result.Validation`; its ``extrapolation`` carries the
        sweep's space and the fit's diagnostics.

    Raises:
        TransferSearchError: fewer than three scales, ``held_out`` is not a proxy scale, or any
            error :func:`fit_sweep` raises.
    """
    family = check_models(models)
    if options.model != "auto":
        model_named(options.model, family)
    obs, duplicates = collapse_duplicates(list(sweep.observations))
    check_scale_names(obs)
    names = infer_params(obs) if options.params is None else options.params
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
    optima, _ = read_optima(full, list(range(len(full.scales))))
    observed = optima[full.scales.index(chosen)]
    rest = replace(sweep, observations=tuple(o for o in obs if o.scale != chosen))
    result = fit_sweep(rest, chosen, replace(options, params=tuple(names)), family)
    return _validation(replace(result, duplicates_collapsed=duplicates), observed, chosen)


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

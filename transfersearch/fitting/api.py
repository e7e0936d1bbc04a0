"""``extrapolate()`` and ``validate()``: the pipeline from trials to the target's hyperparameters.

1. Group the trials by scale (:mod:`.rungs`); fit one valley over every rung (:mod:`.surface`) and
   read each rung's optimum off it.
2. Score each model of the family (:mod:`.models`: no drift first, then the prior's exponents,
   shrunk and free power laws) walk-forward (:mod:`.selection`) and keep the one that earned it.
3. Fit the kept model on every rung and predict the target (:mod:`.predict`); resample each rung's
   trials to measure how much that prediction moves (:mod:`.stability`).
4. Decide: the point of least expected loss under the valley's shape (:mod:`.decision`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import product
from typing import Any

import numpy as np

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import Direction, FloatArray
from transfersearch.fitting.decision import safe_shift, with_stability
from transfersearch.fitting.models import LawModel, available_models, model_named
from transfersearch.fitting.predict import Prediction, predict
from transfersearch.fitting.result import Collinearity, Extrapolation, Validation
from transfersearch.fitting.rungs import Exponents, Ladder, prepare, read_optima
from transfersearch.fitting.selection import walk_forward
from transfersearch.fitting.stability import resample_predictions
from transfersearch.observations import (
    Observation,
    TransferSearchWarning,
    as_observations,
    check_log_swept,
    check_params_recorded,
    check_scale_names,
    collapse_duplicates,
    complete_target,
)
from transfersearch.scale import Scale
from transfersearch.stored_space import stored_space

__all__ = ["extrapolate", "infer_params", "validate"]

#: Warn when the target is farther from the nearest proxy than this many ladder spans.
FAR_FACTOR = 2.0
#: Scale variables whose logs correlate above this over the rungs are reported as collinear: the
#: ladder then pins only their joint direction (a 2-variable design with |corr| 0.95 has a
#: variance inflation factor of 10 on each exponent).
COLLINEAR_CORRELATION = 0.95
#: z of a two-sided 90% interval, for the stability flag.
_Z90 = 1.6448536269514722


def _as_scale(target: Any) -> Scale:
    if isinstance(target, Scale):
        return target
    if isinstance(target, Mapping):
        return Scale(target)
    raise TransferSearchError(
        f"`target` must be a Scale, e.g. Scale(width=4096, dataset_size=1e8), but got {target!r}."
    )


def _check_options(model: str, n_bootstrap: int, seed: int | None) -> None:
    if not isinstance(model, str):
        raise TransferSearchError(
            f"`model` must be 'auto' or one model's name ({', '.join(available_models())}), "
            f"but got model={model!r} ({type(model).__name__}). Write model='auto'."
        )
    if model != "auto":
        model_named(model)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise TransferSearchError(
            f"`seed` must be None or a non-negative integer, but got seed={seed!r}."
        )
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 0:
        raise TransferSearchError(
            f"`n_bootstrap` must be a non-negative integer, but got n_bootstrap={n_bootstrap!r}."
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


def _candidates(ladder: Ladder) -> list[LawModel]:
    models = [model_named(name) for name in available_models()]
    has_prior = any(any(e != 0.0 for e in row.values()) for row in ladder.prior.values())
    return [m for m in models if m.name != "prior" or has_prior]


def _decades(ladder: Ladder, target: Scale) -> tuple[float, float]:
    logs = ladder.log_scales
    point = ladder.target_logs(target)
    near = float(np.sqrt(((logs - point) ** 2).sum(axis=1)).min()) / math.log(10.0)
    gaps = logs[:, None, :] - logs[None, :, :]
    span = float(np.sqrt((gaps**2).sum(axis=2)).max()) / math.log(10.0)
    if span > 0 and near > FAR_FACTOR * span:
        warnings.warn(
            f"the target lies {near:.2g} decades from the nearest proxy, more than {FAR_FACTOR:g}x "
            f"the ladder's span ({span:.2g} decades): the prediction leans on the law's form. "
            "Add a larger proxy.",
            TransferSearchWarning,
            stacklevel=3,
        )
    return near, span


def _natural(ladder: Ladder, coords: FloatArray) -> dict[str, float]:
    return {
        n: (math.exp(c) if n in ladder.logs else float(c))
        for n, c in zip(ladder.names, coords, strict=True)
    }


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


def extrapolate(
    observations: Any,
    *,
    target: Scale | Mapping[str, float],
    params: Sequence[str] | None = None,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    scale_variables: Sequence[str] | None = None,
    fixed_exponents: Exponents | None = None,
    prior_exponents: Exponents | None = None,
    model: str = "auto",
    n_bootstrap: int = 200,
    seed: int | None = 0,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    cost: Callable[[Scale], float] | None = None,
) -> Extrapolation:
    """Predict the optimal ``params`` at ``target`` from proxy trials over a ladder of scales.

    Method (module docstring; SCIENCE.md §7): a valley pooled over every rung gives each rung's
    optimum; the family of optimum-vs-scale models (no drift, the prior's exponents, power laws
    shrunk toward the prior by empirical Bayes, free power laws) is scored walk-forward — each rung
    predicted from strictly cheaper ones, charged its regret on that rung's fitted surface — and a
    drifting model is kept only when it beats no drift by more than one standard error. The point
    returned in ``params`` minimises the expected loss under the prediction's uncertainty and the
    valley's asymmetric walls; ``law_params`` keeps the model's own point.

    Args:
        observations: list of :class:`~transfersearch.observations.Observation`, a pandas DataFrame
            (``scale.*`` / ``params.*`` / ``value`` columns, or ``scale_columns=`` and plain
            parameter columns), an Optuna Study or a Ray Tune results directory.
        target: the scale to predict for. A scale variable it leaves out that never varied over
            the ladder (``batch_size=64`` on every rung) keeps the ladder's value
            (``target_from_ladder`` on the result says which); every other variable the laws use
            must be given.
        params: the swept parameters to predict, jointly (default: every parameter all complete
            trials record, see :func:`infer_params`).
        direction: ``"minimize"`` (default) or ``"maximize"`` the value.
        log_params: parameters fitted in log space (default: every all-positive parameter).
        scale_variables: scale names the laws may use (default: those all proxies share).
        fixed_exponents: exponents held exactly, per parameter, e.g.
            ``{"lr": {"dataset_size": 0.0}}``.
        prior_exponents: theory's exponents per parameter, the centre the ``"prior"`` and
            ``"shrunk"`` models use (0 for any not given: no drift), e.g.
            ``{"bs": {"N": 0.0, "D": 0.5}}``.
        model: ``"auto"`` (walk-forward chooses) or a model name (:func:`available_models`).
        n_bootstrap: by-rung bootstrap resamples for the interval and ``stability`` (0: none).
        seed: seed of the bootstrap: the default 0 gives the same answer on every call (as the
            command line's ``--seed 0``); another seed another draw, None a fresh one each call.
        scale_columns: DataFrame only: plain columns holding scale variables.
        value_column: DataFrame only: the metric column.
        cost: relative cost of a scale, which orders the rungs for walk-forward validation
            (default :func:`transfersearch.cost.default_cost`; a planner passes its ladder's).

    Returns:
        An :class:`Extrapolation`.

    Raises:
        TransferSearchError: fewer than two scales, a missing parameter, a non-positive value on a
            log coordinate, a target missing a scale variable the laws need, a bad option.
    """
    _check_options(model, n_bootstrap, seed)
    obs, duplicates = collapse_duplicates(
        as_observations(
            observations, params=params, scale_columns=scale_columns, value_column=value_column
        )
    )
    target_scale, from_ladder = complete_target(obs, _as_scale(target))
    check_scale_names(obs, target=target_scale)
    names = infer_params(obs) if params is None else params
    space = stored_space(observations)
    _check_observations(obs, names, log_params, space)
    ladder = prepare(
        obs,
        names,
        direction=direction,
        log_params=log_params,
        scale_variables=scale_variables,
        fixed_exponents=fixed_exponents,
        prior_exponents=prior_exponents,
        target=target_scale,
        cost=cost,
    )
    result = _extrapolate(ladder, target_scale, direction, model, n_bootstrap, seed)
    result = with_stability(result, ladder, obs)  # the decision within the boundaries
    return replace(
        result, space=space, target_from_ladder=from_ladder, duplicates_collapsed=duplicates
    )


def _check_observations(
    obs: Sequence[Observation], names: Sequence[str], log_params: Any, space: Any
) -> None:
    """The checks on the trials both entry points share: named parameters recorded, and no
    non-positive value of a log-swept one (unless ``log_params`` says which are log)."""
    check_params_recorded(obs, names)
    if log_params is None:
        check_log_swept(obs, names, space=space)


def _extrapolate(
    ladder: Ladder,
    target: Scale,
    direction: Direction,
    model: str,
    n_bootstrap: int,
    seed: int | None,
) -> Extrapolation:
    subset = list(range(len(ladder.scales)))
    optima, valley = read_optima(ladder, subset, warn=True)
    candidates = _candidates(ladder)
    table = walk_forward(ladder, optima, candidates)
    chosen = model_named(table.chosen if model == "auto" else model)
    reason = table.reason if model == "auto" else f"chosen by the caller (model={model!r})"
    target_logs = ladder.target_logs(target)
    point = predict(ladder, chosen, optima, subset, target_logs)
    if valley is not None:  # a bias all rungs share moves the prediction too
        point = replace(point, variance=point.variance + valley.shared_bias_var)
    rng = np.random.default_rng(seed)
    walls = None if valley is None else np.asarray(valley.wall != 0.0)
    samples = resample_predictions(ladder, chosen, target_logs, n_bootstrap, rng, optima, walls)
    boot_sd, stderr, unstable = _spread(ladder, samples, point)
    if valley is not None:
        shift = safe_shift(stderr, valley.hessian, valley.wall, valley.reach)
    else:
        shift = np.zeros(len(ladder.names))
    near, span = _decades(ladder, target)
    return Extrapolation(
        target=target,
        params=_natural(ladder, point.mean + shift),
        law_params=_natural(ladder, point.mean),
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
    )


def validate(
    observations: Any,
    *,
    params: Sequence[str] | None = None,
    held_out: Scale | Mapping[str, float] | None = None,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    scale_variables: Sequence[str] | None = None,
    fixed_exponents: Exponents | None = None,
    prior_exponents: Exponents | None = None,
    model: str = "auto",
    n_bootstrap: int = 100,
    seed: int | None = 0,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    cost: Callable[[Scale], float] | None = None,
) -> Validation:
    """Hold the costliest rung out, predict it from the rest, and charge the regret there.

    The same machinery as :func:`extrapolate` (its walk-forward table is on the result); the
    held-out rung's surface is read off the valley fitted to every rung, and the regret is the
    prediction's excess on it, in the metric's units.

    Args:
        observations: as for :func:`extrapolate`; needs three or more scales.
        params: the swept parameters (default: as for :func:`extrapolate`).
        held_out: the scale to hold out (default: the costliest by ``cost``, the order of
            :func:`transfersearch.cost.by_cost`).
        direction, log_params, scale_variables, fixed_exponents, prior_exponents, model,
            n_bootstrap, seed, scale_columns, value_column, cost: as for :func:`extrapolate`.

    Returns:
        A :class:`Validation`.

    Raises:
        TransferSearchError: fewer than three scales, ``held_out`` is not a proxy scale, or any
            error :func:`extrapolate` raises.
    """
    _check_options(model, n_bootstrap, seed)
    obs, duplicates = collapse_duplicates(
        as_observations(
            observations, params=params, scale_columns=scale_columns, value_column=value_column
        )
    )
    check_scale_names(obs)
    names = infer_params(obs) if params is None else params
    _check_observations(obs, names, log_params, stored_space(observations))
    options: dict[str, Any] = {
        "direction": direction,
        "log_params": log_params,
        "scale_variables": scale_variables,
        "fixed_exponents": fixed_exponents,
        "prior_exponents": prior_exponents,
        "cost": cost,
    }
    full = prepare(obs, names, target=None, **options)
    if len(full.scales) < 3:
        raise TransferSearchError(
            f"validate() holds one scale out and fits a law on the rest, so it needs three or "
            f"more scales, but got {len(full.scales)}. Add a proxy scale."
        )
    chosen = full.scales[-1] if held_out is None else complete_target(obs, _as_scale(held_out))[0]
    if chosen not in full.scales:
        raise TransferSearchError(
            f"held_out={chosen!r} is not one of the proxy scales "
            f"{[repr(s) for s in full.scales]}. Pick one of them."
        )
    optima, _ = read_optima(full, list(range(len(full.scales))))
    observed = optima[full.scales.index(chosen)]
    result = extrapolate(
        [o for o in obs if o.scale != chosen],
        target=chosen,
        params=names,
        model=model,
        n_bootstrap=n_bootstrap,
        seed=seed,
        **options,
    )
    return _validation(replace(result, duplicates_collapsed=duplicates), observed, chosen)


def _validation(result: Extrapolation, observed: Any, chosen: Scale) -> Validation:
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

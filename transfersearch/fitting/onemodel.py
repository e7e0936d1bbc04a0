"""The one model's fit on a prepared ladder: arrays in, the fitted pieces out (docs/science.md §7–9).

:func:`fit_ladder` composes forward: the trials as arrays → the valley's posterior
(:mod:`.valley`) → the rungs' optima read off it → walk-forward folds that calibrate the
predictive spread → the divergence model (:mod:`.divergence`) → the target's posterior draws and
the decision (:mod:`.target`). The engine (:mod:`.engine`) turns the :class:`LadderFit` into the
user's :class:`~transfersearch.fitting.result.Extrapolation` once, at the end.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from transfersearch._coordinates import POSITIVE_COORDS
from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import (
    FloatArray,
    check_direction,
    check_params,
    observation_arrays,
    resolve_log_params,
    to_fitted,
)
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.divergence import DivergenceModel, fit_divergence
from transfersearch.fitting.findings import unsettled_findings
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.rungs import Ladder, RungTrials
from transfersearch.fitting.target import TargetLoss
from transfersearch.fitting.valley import (
    Shape,
    Valley,
    ValleyInput,
    fit_valley,
    law_gradient,
    own_optimum,
    robust_sd,
    solve_centre,
    span_basis,
)
from transfersearch.observations import Observation
from transfersearch.scale import Scale

__all__ = ["N_DRAWS", "Fold", "LadderFit", "fit_ladder", "robust_sd", "rung_optimum"]

#: A momentum coefficient by its name (AdamW's ``beta1``/``beta2``, ``adam_beta2``, SGD's
#: ``momentum``, an ``ema`` decay): with every trial in (0, 1), valid below 1 only.
MOMENTUM_NAME = re.compile(r"(?:^|[_.])(?:beta\d?|momentum|ema)(?:$|[_.\d])", re.IGNORECASE)
#: Posterior draws behind the target's interval and decision: the Monte-Carlo error of a 90%
#: quantile is then under 2% of the spread.
N_DRAWS = 2000
#: Walk-forward predicts a rung from at least this many cheaper ones (two fix a line).
MIN_TRAIN_RUNGS = 2
#: Pseudo-folds behind the calibration of the predictive spread (:func:`_calibration`): this
#: many folds' worth of z² = 1 per parameter (an inverse-gamma prior whose mean is
#: "calibrated").
CALIBRATION_PRIOR_FOLDS = 1.0
#: The range searched for ``ln c²`` (numerical bounds only: the pseudo-folds keep ``c`` near 1
#: unless the folds insist, and a factor beyond 100× either way would say the model is wrong).
CALIBRATION_LOG_RANGE = (math.log(1e-4), math.log(1e4))
#: The calibration's posterior is tabulated on this many points of ``ln c²``
#: (:func:`_calibration_draws`), within this reach of its maximum: its sd in ``ln c²`` is
#: about ``√(2/ν)`` for ``ν`` errors and pseudo-errors, at most 1 (``ν ≥ 2``: with no fold there is
#: nothing to tabulate), so the reach is six sds; the grid's step (0.03) is well inside one.
CALIBRATION_GRID = 401
CALIBRATION_GRID_REACH = 6.0


@dataclass(frozen=True, eq=False)
class Fold:
    """One walk-forward step: a rung predicted from the cheaper ones.

    Attributes:
        scale: the rung predicted.
        n_train: how many cheaper rungs it was predicted from.
        decades: its distance to the nearest of them (log10 units).
        regret: the excess on the rung's fitted valley of the model's point from the cheaper
            rungs (``"drift"``, or ``"constant"`` for the no-drift model) and of ``"copy"`` (the
            best trial of the costliest of them).
        points: those two points, fitted units, every parameter (the ladder's order).
        surface: the rung's own optimum and valley, read off the fit of every rung.
        check: (3, d) per active parameter: the error of the law's point against the rung's
            optimum from its own trials alone (:func:`.valley.own_optimum`), the prediction's variance
            on the cheaper rungs' span (:func:`span_point`) and that optimum's variance plus the
            rest of the prediction's (off the span: the prior's, which the calibration leaves).
    """

    scale: Scale
    n_train: int
    decades: float
    regret: dict[str, float]
    points: dict[str, FloatArray] = field(repr=False, default_factory=dict)
    surface: ScaleOptimum | None = field(repr=False, default=None)
    check: FloatArray = field(repr=False, default_factory=lambda: np.zeros((3, 0)))


@dataclass(frozen=True, eq=False)
class LadderFit:
    """What the one model knows, in fitted units over the active parameters.

    Attributes:
        active: the columns of the ladder's parameters the trials vary (the others keep their
            one value).
        fixed_values: (d_all,) every parameter's value where it is not active (NaN where active).
        valley: the posterior over every finite trial.
        optima: each rung's optimum read off the valley (every parameter; cheapest first).
        hessian: (d, d) the valley's curvature (fitted units).
        law_point: (d,) the law's posterior-mean optimum at the target.
        draws: (S, d) calibrated posterior-predictive draws of the target's optimum.
        raw_sd: (d,) the draws' spread before calibration (:func:`robust_sd`).
        calibration: the walk-forward factor applied to the draws' spread (1: a target the fit
            holds, read off its own posterior, is not calibrated).
        target_is_rung: the target is one of the fitted rungs (:func:`_target_draws`).
        law_held: (d,) which coordinates of the law's point the fit held at the edge of what
            the trials support (:meth:`.valley.Valley.law_centre_held`).
        below_one: (d,) which parameters are momentum coefficients, valid below 1 only
            (:func:`_below_one`): their draws are held ≤ 1.
        domain_held: (d,) which momenta the law's point or the decision put at or past 1, held
            at the largest value any trial ran (:func:`_in_domain`).
        positive: (d,) which parameters are linear rates or timescales, valid above 0 only
            (:func:`_positive`): their draws at or below 0 are held at the smallest value tried.
        positive_held: (d,) which of them the law's point or the decision put at or below 0,
            held at the smallest value any trial ran (:func:`_in_domain`).
        folds: the walk-forward folds.
        divergence: the divergence model, or None (no trial diverged).
        target_loss: the decision's objective.
        decision: (d,) the point of least expected loss.
        law_point_coefficients: (d, 1 + m) each law's (intercept, exponents) at the posterior
            mean, fitted units per ln scale (a scale variable no rung varied: its prior's).
        law_coefficients: (S, d, 1 + m) posterior draws of the same (their covariance).
        n_crashed: crashed trials left out (counted by the caller; kept here for the record).
        divergence_cost: the loss charged to a diverged run.
    """

    active: tuple[int, ...]
    fixed_values: FloatArray
    valley: Valley
    optima: tuple[ScaleOptimum, ...]
    hessian: FloatArray
    law_point: FloatArray
    draws: FloatArray
    raw_sd: FloatArray
    calibration: float
    folds: tuple[Fold, ...]
    divergence: DivergenceModel | None
    target_loss: TargetLoss
    decision: FloatArray
    law_point_coefficients: FloatArray
    law_coefficients: FloatArray
    divergence_cost: float
    target_is_rung: bool = False
    law_held: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    below_one: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    domain_held: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    positive: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    positive_held: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=bool))


@dataclass(frozen=True)
class _Trials:
    coords: FloatArray  # (n, d_all) every non-crashed trial
    values: FloatArray  # (n,) NaN for a diverged one
    rung: np.ndarray  # (n,)


def _trials(ladder: Ladder, rungs: Sequence[int]) -> _Trials:
    coords, values, index = [], [], []
    for new, r in enumerate(rungs):
        trials = ladder.trials[r]
        coords.append(trials.coords)
        values.append(trials.values)
        index.append(np.full(len(trials.values), new))
    return _Trials(np.vstack(coords), np.concatenate(values), np.concatenate(index))


def _valley_input(
    ladder: Ladder, trials: _Trials, active: Sequence[int], rungs: Sequence[int]
) -> ValleyInput:
    finite = np.isfinite(trials.values)
    names = [ladder.names[j] for j in active]
    prior = np.array(
        [[ladder.prior.get(n, {}).get(v, 0.0) for v in ladder.variables] for n in names]
    )
    variables = ladder.variables
    fixed = np.array([[v in ladder.fixed.get(n, {}) for v in variables] for n in names])
    for i, n in enumerate(names):
        for k, v in enumerate(ladder.variables):
            if fixed[i, k]:
                prior[i, k] = ladder.fixed[n][v]
    return ValleyInput(
        coords=trials.coords[finite][:, list(active)],
        values=trials.values[finite],
        rung=trials.rung[finite],
        log_scales=ladder.log_scales[list(rungs)],
        prior_drift=prior.reshape(len(names), len(ladder.variables)),
        fixed_drift=fixed.reshape(len(names), len(ladder.variables)),
        anchor=_anchor(ladder, names),
    )


def _anchor(ladder: Ladder, names: Sequence[str]) -> FloatArray | None:
    """Where the space's rule places each fitted parameter's optimum, in fitted units (NaN
    where it places none); None when it places none at all."""
    if not any(n in ladder.anchor for n in names):
        return None
    return np.array(
        [
            to_fitted(ladder.anchor[n], n in ladder.logs) if n in ladder.anchor else math.nan
            for n in names
        ]
    )


def _span_point(ladder: Ladder, rungs: Sequence[int], target: FloatArray) -> FloatArray:
    """:func:`span_point` of ``target`` on the ``rungs``' span in log scale."""
    return span_point(ladder.log_scales[list(rungs)], target)


def _active(ladder: Ladder) -> tuple[tuple[int, ...], FloatArray]:
    every = _trials(ladder, range(len(ladder.scales)))
    finite = every.coords[np.isfinite(every.values)]
    spread = np.ptp(finite, axis=0)
    tol = 1e-12 * np.maximum(1.0, np.abs(finite).max(axis=0))
    active = tuple(int(j) for j in np.flatnonzero(spread > tol))
    fixed = np.where(spread > tol, math.nan, finite[0])
    return active, fixed


def _rung_optima(
    ladder: Ladder,
    trials: _Trials,
    valley: Valley,
    active: Sequence[int],
    fixed_values: FloatArray,
    hessian: FloatArray,
    rng: np.random.Generator,
) -> tuple[ScaleOptimum, ...]:
    """Each rung's optimum read off the valley: its own centre (the law plus its scatter), the
    posterior covariance, the valley's bottom and curvature; a parameter no trial varies keeps
    its value (variance 0, curvature ∞: not swept)."""
    d_all = len(ladder.names)
    cols = list(active)
    full_h = np.full((d_all, d_all), 0.0)
    np.fill_diagonal(full_h, math.inf)
    full_h[np.ix_(cols, cols)] = hessian
    out = []
    for r, scale in enumerate(ladder.scales):
        point = fixed_values.copy()
        point[cols] = valley.frame.to_x(valley.rung_centre_u(r))
        draws = valley.frame.to_x(valley.rung_draws_u(r, N_DRAWS // 4, rng))
        cov = np.diag(np.full(d_all, math.inf))
        cov[np.ix_(cols, cols)] = np.atleast_2d(np.cov(draws.T))
        values = trials.values[trials.rung == r]
        mine = trials.coords[(trials.rung == r) & np.isfinite(trials.values)]
        past: dict[str, float] = {}
        for j in cols:
            sd = math.sqrt(max(float(cov[j, j]), 0.0))
            over = point[j] - mine[:, j].max()
            under = point[j] - mine[:, j].min()
            if over > sd:  # past the edge by more than its own standard error
                past[ladder.names[j]] = float(over)
            elif under < -sd:
                past[ladder.names[j]] = float(under)
        out.append(
            ScaleOptimum.from_fitted(
                scale,
                ladder.names,
                ladder.logs,
                point,
                cov,
                value=ladder.sign * valley.rung_depth(r),
                hessian=full_h,
                n_trials=int(np.isfinite(values).sum()),
                n_diverged=int((~np.isfinite(values)).sum()),
                n_used=int(np.isfinite(values).sum()),
                method="pooled",
                at_boundary=bool(past),
                past_edge=past,
            )
        )
    return tuple(out)


def _law_fields(valley: Valley, rng: np.random.Generator) -> dict[str, Any]:
    """:class:`LadderFit`'s laws: the coefficients at the posterior mean and their draws."""
    return {
        "law_point_coefficients": _law_coefficients(valley.theta, valley),
        "law_coefficients": _law_coefficients(valley.law_draws(N_DRAWS // 4, rng)[0], valley),
    }


def _law_coefficients(thetas: FloatArray, valley: Valley) -> FloatArray:
    """Each law's (intercept, coefficients) in fitted units for each ``θ`` (S, d, 1 + m):
    ``B = H⁻¹G`` (the optimum's move per unit of each column of the ladder's log scales) and the
    intercept at ℓ = 0."""
    lay = valley.layout
    hess = valley.curvatures_u(thetas)

    def centre(offset: FloatArray) -> FloatArray:
        return valley.frame.to_x(solve_centre(hess, law_gradient(thetas, lay, offset)))

    middle = centre(np.zeros(lay.m))
    slopes = np.zeros((*middle.shape, lay.m))
    for k in range(lay.m):
        slopes[..., k] = centre(np.eye(lay.m)[k]) - middle
    intercept = middle - np.einsum("...dk,k->...d", slopes, valley.frame.scale_centre)
    return np.concatenate([intercept[..., None], slopes], axis=-1)


def _fold(
    ladder: Ladder,
    active: Sequence[int],
    k: int,
    held_out: tuple[ScaleOptimum, tuple[FloatArray, FloatArray]],
    fixed_values: FloatArray,
    rng: np.random.Generator,
    fit: tuple[bool, Shape],
) -> Fold | None:
    """Predict rung ``k`` from the cheaper rungs, with the weights and the skew's centres held
    at the full fit's, as the target's prediction holds them (``fit`` = (drift, the full fit's
    :class:`~.valley.Shape`); docs/science.md §7.5). Charge each point its excess on rung
    ``k``'s valley read off the full fit (``held_out[0]``), and check the law's point against
    the rung's optimum from a fit of its trials alone (``held_out[1]``: mean and variance per
    coordinate, NaN where the rung alone cannot place it). The law's point is named for the
    model (``"drift"`` or ``"constant"``), the null's ``"copy"``."""
    drift, shape = fit
    surface, (own, own_var) = held_out
    model = "drift" if drift else "constant"
    train = list(range(k))
    trials = _trials(ladder, train)
    data = _valley_input(ladder, trials, active, train)
    if len(np.unique(data.rung)) < MIN_TRAIN_RUNGS:
        return None
    try:
        valley = fit_valley(data, drift=drift, shape=shape)
    except np.linalg.LinAlgError:
        return None
    target = ladder.log_scales[k]
    inner = _span_point(ladder, range(k), target)
    draws, inner_draws, _, _ = valley.predictive_u(target, N_DRAWS // 4, rng, inner)
    spread, off_span = _split_spread(valley.frame.to_x(draws), valley.frame.to_x(inner_draws))
    predicted = fixed_values.copy()
    predicted[list(active)] = valley.frame.to_x(valley.law_centre_u(target))
    finite = np.isfinite(trials.values) & (trials.rung == k - 1)
    if not finite.any():
        return None
    copied = trials.coords[finite][int(np.argmin(trials.values[finite]))]
    gap = ladder.log_scales[:k] - target
    decades = float(np.sqrt((gap**2).sum(axis=1)).min()) / math.log(10.0)
    check = np.vstack([own - predicted[list(active)], spread**2, own_var + off_span**2])
    return Fold(
        scale=ladder.scales[k],
        n_train=k,
        decades=decades,
        regret={
            model: float(surface.regret_coords(predicted) or 0.0),
            "copy": float(surface.regret_coords(copied) or 0.0),
        },
        points={model: predicted, "copy": copied},
        surface=surface,
        check=check,
    )


def _bounds(
    ladder: Ladder,
    trials: _Trials,
    active: Sequence[int],
    law_point: FloatArray,
    top_point: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """The region a run may use: the finite trials' range per parameter, widened by the law's
    drift from the costliest rung to the target; a linear parameter whose trials are all ≥ 0
    stays ≥ 0 (:func:`_nonnegative`), a linear rate or timescale (:func:`_positive`) whose
    region would reach 0 starts at the smallest value tried; a momentum coefficient
    (:func:`_below_one`) goes no higher than the largest value any trial ran."""
    finite = trials.coords[np.isfinite(trials.values)][:, list(active)]
    drift = np.abs(law_point - top_point)
    lower = finite.min(axis=0) - drift
    upper = finite.max(axis=0) + drift
    lower = np.where(_nonnegative(ladder, trials, active), np.maximum(lower, 0.0), lower)
    # a rate or timescale whose straight law reaches 0: no run below the smallest value tried
    lower = np.where(_positive(ladder, trials, active) & (lower <= 0.0), finite.min(axis=0), lower)
    # a momentum's law in log β runs into its edge at 1: no run past the largest value tried
    upper = np.where(_below_one(ladder, trials, active), finite.max(axis=0), upper)
    return lower, upper


def _nonnegative(ladder: Ladder, trials: _Trials, active: Sequence[int]) -> np.ndarray:
    """Which active parameters are linear with every finite trial ≥ 0 (a weight decay grid
    holding 0): their runs, law point and interval stay ≥ 0 (issue 25 item 5)."""
    finite = trials.coords[np.isfinite(trials.values)][:, list(active)]
    linear = np.array([ladder.names[j] not in ladder.logs for j in active], dtype=bool)
    return np.asarray(linear & (finite.min(axis=0) >= 0.0))


def _natural(ladder: Ladder, active: Sequence[int], coords: FloatArray) -> FloatArray:
    """Fitted coordinates of the active parameters (last axis) in natural units."""
    logs = np.array([ladder.names[j] in ladder.logs for j in active], dtype=bool)
    return np.asarray(np.where(logs, np.exp(coords), coords))


def _positive(ladder: Ladder, trials: _Trials, active: Sequence[int]) -> np.ndarray:
    """Which active parameters are linear, a rate or a timescale by name (a learning rate, weight
    decay, ηλ, τ: :data:`~transfersearch._coordinates.POSITIVE_COORDS`), with every finite trial
    > 0: valid above 0 only, so a law point, decision or draw at or below 0 is held at the
    smallest value any trial ran (issue 49 item 11). A grid holding 0 is :func:`_nonnegative`."""
    finite = trials.coords[np.isfinite(trials.values)][:, list(active)]
    named = np.array(
        [ladder.names[j] in POSITIVE_COORDS and ladder.names[j] not in ladder.logs for j in active],
        dtype=bool,
    )
    return np.asarray(named & (finite > 0.0).all(axis=0))


def _below_one(ladder: Ladder, trials: _Trials, active: Sequence[int]) -> np.ndarray:
    """Which active parameters are momentum coefficients: named so (:data:`MOMENTUM_NAME`) with
    every finite trial in (0, 1). Valid below 1 only (torch's AdamW refuses a beta of 1)."""
    finite = _natural(ladder, active, trials.coords[np.isfinite(trials.values)][:, list(active)])
    named = np.array([bool(MOMENTUM_NAME.search(ladder.names[j])) for j in active], dtype=bool)
    return np.asarray(named & (finite > 0.0).all(axis=0) & (finite < 1.0).all(axis=0))


def _in_domain(
    ladder: Ladder, trials: _Trials, active: Sequence[int], point: FloatArray
) -> tuple[FloatArray, np.ndarray, np.ndarray]:
    """``point`` (fitted units) inside each parameter's domain (issue 25 item 5): a linear one
    whose trials are all ≥ 0 held ≥ 0; a linear rate or timescale (:func:`_positive`) at or
    below 0 held at the smallest value any trial ran; a momentum coefficient
    (:func:`_below_one`) at or past 1 held at the largest. Returns the point and which
    momenta and which rates or timescales were held (each at a trial's value)."""
    point = np.where(_nonnegative(ladder, trials, active), np.maximum(point, 0.0), point)
    finite = trials.coords[np.isfinite(trials.values)][:, list(active)]
    low = _positive(ladder, trials, active) & (point <= 0.0)
    point = np.where(low, finite.min(axis=0), point)
    held = _below_one(ladder, trials, active) & (_natural(ladder, active, point) >= 1.0)
    return np.asarray(np.where(held, finite.max(axis=0), point)), np.asarray(held), np.asarray(low)


def worst_excess(trials: _Trials) -> float:
    """The largest excess over its rung's best that a finite trial reached (metric units)."""
    worst = 0.0
    for r in np.unique(trials.rung):
        values = trials.values[(trials.rung == r) & np.isfinite(trials.values)]
        if len(values):
            worst = max(worst, float(values.max() - values.min()))
    return worst


def fit_ladder(
    ladder: Ladder,
    target_logs: FloatArray,
    *,
    seed: int | None,
    divergence_cost: float | None = None,
    validate: bool = True,
    drift: bool = True,
) -> LadderFit:
    """The one model on every rung of ``ladder``, predicted at ``target_logs`` (module docstring).

    Args:
        ladder: the prepared trials (crashed ones already left out).
        target_logs: (m,) ln of the target's scale variables.
        seed: seed of the posterior draws (None: fresh).
        divergence_cost: the loss charged to a diverged run (None: the sweep's worst excess).
        validate: run the walk-forward folds (the calibration needs them).
        drift: integrate the drift prior's scale (False: no drift, the prior's exponents held).
    """
    rng = np.random.default_rng(seed)
    every = list(range(len(ladder.scales)))
    active, fixed_values = _active(ladder)
    trials = _trials(ladder, every)
    data = _valley_input(ladder, trials, active, every)
    frame = (valley := fit_valley(data, drift=drift)).frame
    hessian = frame.hessian_x(valley.hessian_u)
    optima = _rung_optima(ladder, trials, valley, active, fixed_values, hessian, rng)
    folds = (
        _folds(ladder, data, active, optima, fixed_values, rng, (drift, valley)) if validate else []
    )
    held = _held_rung(ladder, target_logs)
    calibration, factors = _calibrate(folds, len(active), held, rng)
    draws, raw_sd, hess_u, skew_u = _target_draws(
        valley, (_span_point(ladder, every, target_logs), target_logs), held, factors, rng
    )
    divergence = _divergence(ladder, trials, active, optima, target_logs)
    cost = worst_excess(trials) if divergence_cost is None else float(divergence_cost)
    law_point = frame.to_x(valley.law_centre_u(target_logs))
    top_point = frame.to_x(valley.law_centre_u(ladder.log_scales[-1]))
    bounds = _bounds(ladder, trials, active, law_point, top_point)
    # a parameter kept ≥ 0 (a momentum < 1) has its law point there, as its interval and runs do
    law_point, *law_over = _in_domain(ladder, trials, active, law_point)
    shape = (frame.hessian_x(hess_u), skew_u / frame.spread**3)
    risk = (None if divergence is None else divergence.draws(N_DRAWS, rng), cost)
    loss = _target_loss(ladder, active, fixed_values, draws, shape, bounds, risk)
    decision, *over = _in_domain(ladder, trials, active, loss.best_runs(law_point[None, :])[0])
    loss = replace(loss, decision=decision)
    return LadderFit(
        active=active,
        fixed_values=fixed_values,
        valley=valley,
        optima=optima,
        hessian=hessian,
        law_point=law_point,
        draws=draws,
        raw_sd=raw_sd,
        calibration=calibration,
        folds=tuple(folds),
        divergence=divergence,
        target_loss=loss,
        decision=loss.decision,
        divergence_cost=cost,
        **_law_fields(valley, rng),
        target_is_rung=held is not None,
        law_held=valley.law_centre_held(target_logs),
        **_domain_fields(ladder, trials, active, (law_over, over)),
    )


def _domain_fields(
    ladder: Ladder, trials: _Trials, active: Sequence[int], held: tuple[Sequence[Any], ...]
) -> dict[str, Any]:
    """:class:`LadderFit`'s domain masks: the momenta and the linear rates or timescales, and
    which of them the law's point or the decision held (``held``: :func:`_in_domain`'s masks
    for each, momenta first)."""
    (law_high, law_low), (high, low) = held
    return {
        "below_one": _below_one(ladder, trials, active),
        "domain_held": law_high | high,
        "positive": _positive(ladder, trials, active),
        "positive_held": law_low | low,
    }


def _divergence(
    ladder: Ladder,
    trials: _Trials,
    active: Sequence[int],
    optima: Sequence[ScaleOptimum],
    target_logs: FloatArray,
) -> DivergenceModel | None:
    """The divergence law of every trial's offset from its rung's read-out (§8), its boundary
    free to drift relative to the optimum along the ladder's span, read at the target."""
    centres = np.array([[o.coords[ladder.names[j]] for j in active] for o in optima])
    coords = trials.coords[:, list(active)]
    logs = np.asarray(ladder.log_scales, dtype=np.float64)
    basis, mean = span_basis(logs), logs.mean(axis=0)
    span = ((logs - mean) @ basis.T)[trials.rung], (np.asarray(target_logs) - mean) @ basis.T
    return fit_divergence(coords - centres[trials.rung], ~np.isfinite(trials.values), coords, span)


def _held_rung(ladder: Ladder, target_logs: FloatArray) -> int | None:
    """The rung the target is, when the fit holds it (None: a new rung)."""
    held = np.flatnonzero(np.all(np.isclose(ladder.log_scales, target_logs), axis=1))
    return int(held[0]) if len(held) else None


def _calibrate(
    folds: Sequence[Fold], dims: int, held: int | None, rng: np.random.Generator
) -> tuple[float, FloatArray]:
    """The calibration's maximum and one factor per target draw from its posterior (1 and
    ones for a target the fit holds: its own posterior is not calibrated)."""
    if held is not None:
        return 1.0, np.ones(N_DRAWS)
    return _calibration(folds, dims), _calibration_draws(folds, dims, N_DRAWS, rng)


def _target_draws(
    valley: Valley,
    logs: tuple[FloatArray, FloatArray],
    held: int | None,
    factors: FloatArray,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Draws of the target's optimum (fitted units; their raw robust sd) and of the valley's
    curvature and skews (standardised), docs/science.md §7.5.

    ``logs``: the rungs' log scales and the target's. A target the ladder does not hold
    (``held`` None) is a new rung: the law's draws plus the rungs' scatter, each draw's spread at
    the target's projection on the rungs' span (:func:`span_point`) multiplied by its own
    walk-forward factor (``factors``, from the calibration's posterior); the rest of the way
    off the span, which no fold tests, keeps its prior's spread. A target it holds (a rung
    whose trials are in the fit: the top rung of a study still running) is that rung's own
    posterior, which its trials inform as well as the law; no fold checks a read-out, so it is
    not calibrated."""
    inner, target_logs = logs
    if held is not None:
        draws_u, hess_u, skew_u = valley.rung_predictive_u(held, N_DRAWS, rng)
        draws = valley.frame.to_x(draws_u)
        return draws, robust_sd(draws), hess_u, skew_u
    draws_u, inner_u, hess_u, skew_u = valley.predictive_u(target_logs, N_DRAWS, rng, inner)
    draws, inner_draws = valley.frame.to_x(draws_u), valley.frame.to_x(inner_u)
    # about the law's point on the span: the point each fold's error is measured from
    middle = valley.frame.to_x(valley.law_centre_u(inner))
    calibrated = draws + (factors - 1.0)[:, None] * (inner_draws - middle)
    return calibrated, robust_sd(draws), hess_u, skew_u


def span_point(rung_logs: FloatArray, target_logs: FloatArray) -> FloatArray:
    """The target's orthogonal projection (in log scale) on the affine span of the rungs' log
    scales (docs/science.md §7.5): what walk-forward folds can check. The rest of the way to the
    target (a scale variable the ladder never varied; off a collinear ladder's line) moves the
    optimum by exponents the rungs leave at their prior, which no fold tests."""
    mean = rung_logs.mean(axis=0)
    basis = span_basis(rung_logs)
    return np.asarray(mean + basis.T @ (basis @ (target_logs - mean)))


def _split_spread(draws: FloatArray, inner_draws: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The robust sd of the draws at the target's projection on the ladder's span, and of the
    rest of the way to the target (zeros for a target on the span)."""
    return robust_sd(inner_draws), robust_sd(draws - inner_draws)


def _target_loss(
    ladder: Ladder,
    active: tuple[int, ...],
    fixed_values: FloatArray,
    draws: FloatArray,
    shape: tuple[FloatArray, FloatArray],
    bounds: tuple[FloatArray, FloatArray],
    risk: tuple[FloatArray | None, float] = (None, 0.0),
) -> TargetLoss:
    """The decision's objective: the draws and the valley's shape (curvature and skew draws,
    fitted units), inside the bounds; ``risk`` the divergence law's draws (None: no divergence
    modelled) and the loss charged to a diverged run."""
    names = tuple(ladder.names[j] for j in active)
    return TargetLoss(
        names=names,
        log_params=tuple(n for n in names if n in ladder.logs),
        optima=draws,
        curvatures=shape[0],
        skews=shape[1],
        divergence=risk[0],
        divergence_cost=risk[1],
        lower=bounds[0],
        upper=bounds[1],
        decision=draws.mean(axis=0),
        full_names=ladder.names,
        full_logs=ladder.logs,
        fixed_values=fixed_values,
        active=active,
    )


def _folds(
    ladder: Ladder,
    data: ValleyInput,
    active: Sequence[int],
    optima: Sequence[ScaleOptimum],
    fixed_values: FloatArray,
    rng: np.random.Generator,
    fit: tuple[bool, Valley],
) -> list[Fold]:
    """Walk-forward: each rung with :data:`MIN_TRAIN_RUNGS` cheaper ones predicted from them,
    the full fit's shape held (``fit`` = (drift, the full fit of ``data``)); each prediction is
    checked against the rung's optimum from a fit of its trials alone
    (:func:`.valley.own_optimum`: its own shape, so a bias the shared shape gives every rung's
    reading does not cancel)."""
    drift, valley = fit
    held = (drift, valley.shape())
    folds = []
    for k in range(MIN_TRAIN_RUNGS, len(ladder.scales)):
        own = own_optimum(data, k, rng, N_DRAWS // 4)
        fold = _fold(ladder, active, k, (optima[k], own), fixed_values, rng, held)
        if fold is not None:
            folds.append(fold)
    return folds


def _calibration_nll(folds: Sequence[Fold], dims: int) -> Callable[[float], float] | None:
    """``−2 ln`` of the calibration's posterior density in ``ln c²``, up to a constant (None:
    no usable fold). Each fold's error ``e`` (the law's point minus the held-out rung's own
    optimum) is ``N(0, c²p + o)``: ``p`` the prediction's variance, ``o`` the own optimum's; the
    prior is ``c₀`` pseudo-errors of ``z² = 1`` at ``o = 0`` (:data:`CALIBRATION_PRIOR_FOLDS`
    per parameter: an inverse-gamma prior on ``c²`` whose mean is "calibrated")."""
    checks = np.hstack([f.check for f in folds]) if folds else np.zeros((3, 0))
    keep = np.isfinite(checks).all(axis=0) & (checks[1] > 0)
    if not keep.any():
        return None
    err2, pred, own = checks[0, keep] ** 2, checks[1, keep], checks[2, keep]
    c0 = CALIBRATION_PRIOR_FOLDS * dims

    def nll(log_c2: float) -> float:
        c2 = math.exp(log_c2)
        var = c2 * pred + own
        return float(c0 * (log_c2 + 1.0 / c2) + np.sum(np.log(var) + err2 / var))

    return nll


def _calibration(folds: Sequence[Fold], dims: int) -> float:
    """The walk-forward factor ``c`` on the predictive spread at its posterior's maximum
    (docs/science.md §7.5; :func:`_calibration_nll`); with every ``o = 0`` it is
    ``c² = (c₀ + Σz²)/(c₀ + n)``. 1 with no fold."""
    nll = _calibration_nll(folds, dims)
    if nll is None:
        return 1.0
    best = minimize_scalar(nll, bounds=CALIBRATION_LOG_RANGE, method="bounded")
    return math.exp(0.5 * float(best.x))


def _calibration_draws(
    folds: Sequence[Fold], dims: int, n: int, rng: np.random.Generator
) -> FloatArray:
    """``n`` draws of ``c`` from its posterior (docs/science.md §7.5): a handful of folds fix
    it loosely, and a factor drawn per draw (a scale mixture: Student-t tails for a normal
    predictive) carries that uncertainty into the interval and the decision, where the
    posterior's maximum alone would not. The density is evaluated on
    :data:`CALIBRATION_GRID` points of ``ln c²`` within :data:`CALIBRATION_GRID_REACH` of the
    maximum; a draw takes a grid cell by its mass and a uniform place in it. Ones with no fold."""
    nll = _calibration_nll(folds, dims)
    if nll is None:
        return np.ones(n)
    centre = 2.0 * math.log(_calibration(folds, dims))
    low = max(CALIBRATION_LOG_RANGE[0], centre - CALIBRATION_GRID_REACH)
    high = min(CALIBRATION_LOG_RANGE[1], centre + CALIBRATION_GRID_REACH)
    grid = np.linspace(low, high, CALIBRATION_GRID)
    scores = np.array([nll(float(g)) for g in grid])
    scores = np.where(np.isfinite(scores), scores, np.inf)  # round-off at an end: no mass
    if not np.isfinite(scores).any():
        return np.full(n, math.exp(0.5 * centre))
    mass = np.exp(-0.5 * (scores - scores.min()))
    cell = rng.choice(CALIBRATION_GRID, size=n, p=mass / mass.sum())
    step = grid[1] - grid[0]
    log_c2 = grid[cell] + step * (rng.random(n) - 0.5)
    return np.asarray(np.exp(0.5 * log_c2))


def rung_optimum(
    observations: Sequence[Observation],
    params: Sequence[str],
    *,
    direction: str = "minimize",
    log_params: Iterable[str] | None = None,
) -> tuple[ScaleOptimum, tuple[Diagnostic, ...]]:
    """One scale's optimum: the one model on a single rung (no scale, no drift).

    Raises:
        TransferSearchError: no observations, more than one scale, an empty or unknown ``params``,
            a trial lacks a parameter, a non-positive value on a log coordinate, or no trial
            finished with a finite value.
    """
    sign = check_direction(direction)
    names = check_params(params)
    obs = [o for o in observations if o.state != "failed"]
    if not obs:
        raise TransferSearchError(
            "estimate_optimum() got no observations. Pass the trials of one scale."
        )
    scales = {o.scale for o in obs}
    if len(scales) > 1:
        raise TransferSearchError(
            f"estimate_optimum() takes trials of one scale, but got {len(scales)} scales "
            f"({sorted(map(repr, scales))[:3]}...). Group them by scale first, or call "
            "extrapolate()."
        )
    logs = resolve_log_params(obs, names, log_params)
    coords, values = observation_arrays(obs, names, logs, sign)
    if not np.isfinite(values).any():
        raise TransferSearchError(
            "no trial at this scale finished with a finite value: no optimum to locate. Add "
            "trials at smaller learning rates."
        )
    scale = obs[0].scale
    ladder = Ladder(
        names=names,
        logs=logs,
        sign=sign,
        scales=(scale,),
        trials=(RungTrials(coords, values),),
        variables=(),
        log_scales=np.zeros((1, 0)),
        fixed={},
        prior={},
        log_costs=np.zeros(1),
    )
    fit = fit_ladder(ladder, np.zeros(0), seed=0, validate=False)
    optimum = fit.optima[0]
    notes = [
        Diagnostic(
            "edge",
            f"at {scale!r} the {name} optimum ({optimum.params[name]:.4g}) lies past the "
            f"trials' edge by {abs(dist):.2g} {'log ' if name in logs else ''}units: sweep "
            f"further {'up' if dist > 0 else 'down'} to bracket it.",
            act=False,
            param=name,
            scale=scale,
        )
        for name, dist in optimum.past_edge.items()
    ]
    return optimum, (*notes, *unsettled_findings(fit.valley.settled))

"""extrapolate(): carry the proxy optima to the target scale, with intervals; validate() the law.

Pipeline (pure numpy/scipy):

1. Group the trials by scale; at each scale estimate the optimum with the local quadratic of
   :func:`transfersearch.fit.estimate_optimum` (diverged runs bound the region, pruned are ignored).
2. *Independent model*: per parameter, a log-linear power law of the optimum on the scale variables,
   weighted by the optima's uncertainty (:func:`transfersearch.fit.fit_power_law`), with fixed
   exponents, dropping of unidentifiable scale variables and shrinkage of unsupported exponents.
3. *Joint model*: one quadratic valley with shared curvature ``H`` whose centre drifts as a power
   law, fitted to the best region of every scale at once. Writing ``μ(s) = a + E·log s`` in
   ``f = c_s + ½(u − μ(s))ᵀH(u − μ(s))`` and absorbing the constants into the per-scale offsets
   ``c_s`` makes the model linear: ``f = c_s + ½uᵀHu + (α + B·log s)ᵀu`` with ``a = −H⁻¹α`` and
   ``E = −H⁻¹B`` — one least-squares solve.
4. With three or more scales (``model="auto"``), each model is scored by leave-one-scale-out: fit on
   the other scales, predict the held-out optimum, and charge the held-out local model's regret
   ``½δᵀH_sδ``. The lower mean regret wins; both scores are kept on the result.
5. Intervals: bootstrap over trials (resampled within each scale, all steps refitted with the
   chosen model and law structure), combined with the law's analytic standard error: each side of
   the interval is the wider of the two. Both models refit all resamples at once (stacked normal
   equations over draw counts); for the joint model this equals refitting each resample on its
   own, to rounding.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from transfersearch.errors import TransferSearchError
from transfersearch.fit import (
    Direction,
    PowerLaw,
    ScaleOptimum,
    _check_direction,
    _check_params,
    _common_variables,
    _design,
    _fit_local,
    _hessians,
    _Local,
    _n_coef,
    _region_size,
    _region_sizes,
    _region_weights,
    _select,
    _to_arrays,
    _to_optimum,
    bootstrap_optima,
    check_fixed_exponents,
    fit_law_arrays,
    identifiable_variables,
    implausible_message,
    resolve_log_params,
)
from transfersearch.observations import Observation, TransferSearchWarning, as_observations
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.space import Hyperparameters, TransferSpace

__all__ = ["Extrapolation", "Validation", "extrapolate", "infer_params", "validate"]

FloatArray = NDArray[np.float64]
Model = Literal["auto", "independent", "joint"]

#: Warn when the target is farther from the nearest proxy than this many ladder spans.
FAR_FACTOR = 2.0


@dataclass(frozen=True, eq=False)
class Extrapolation:
    """The predicted optimum at the target scale, with the laws and optima behind it.

    Attributes:
        target: the scale predicted for.
        params: predicted optimal parameters at the target, natural units.
        laws: the power law per parameter (of the model that was kept).
        optima: the per-scale optimum estimates, smallest scale first.
        model: ``"independent"`` (per-scale optima, then laws) or ``"joint"`` (one drifting valley).
        model_scores: mean leave-one-scale-out regret of each model tried (lower is better; NaN
            when it could not be measured, e.g. with two scales).
        scale_variables: the scale variables the laws use.
        log_params: parameters fitted in log space.
        stderr: standard error of each prediction in fitted coordinates (log for log parameters).
        samples: bootstrap predictions, shape (n_samples, n_params), fitted coordinates.
        extrapolation_decades: distance from the target to the nearest proxy scale, log10 units.
        ladder_span_decades: the largest distance between two proxy scales, log10 units.
        direction: ``"minimize"`` or ``"maximize"``.
    """

    target: Scale
    params: dict[str, float]
    laws: dict[str, PowerLaw]
    optima: tuple[ScaleOptimum, ...]
    model: Literal["independent", "joint"]
    model_scores: dict[str, float]
    scale_variables: tuple[str, ...]
    log_params: tuple[str, ...]
    stderr: dict[str, float]
    samples: FloatArray = field(repr=False)
    extrapolation_decades: float
    ladder_span_decades: float
    direction: Direction

    def interval(self, level: float = 0.9) -> dict[str, tuple[float, float]]:
        """Central interval for each predicted parameter, natural units.

        Each side is the wider of the bootstrap percentile and the law's analytic normal interval
        (``z·stderr``), around the point prediction.

        Args:
            level: coverage in (0, 1), e.g. 0.9 or 0.68.

        Returns:
            ``{param: (low, high)}``.

        Raises:
            TransferSearchError: ``level`` is not in (0, 1).
        """
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
            raise TransferSearchError(
                f"`level` must be in (0, 1), e.g. 0.9, but got level={level!r}."
            )
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        result: dict[str, tuple[float, float]] = {}
        for j, name in enumerate(self.laws):
            point = self._coord(name)
            below = above = z * self.stderr[name]
            column = self.samples[:, j] if self.samples.size else np.zeros(0)
            column = column[np.isfinite(column)]
            if len(column) >= 2:
                low_q, high_q = np.quantile(column, [0.5 - level / 2.0, 0.5 + level / 2.0])
                below = max(below, point - float(low_q))
                above = max(above, float(high_q) - point)
            low, high = point - below, point + above
            if name in self.log_params:
                result[name] = (math.exp(low), math.exp(high))
            else:
                result[name] = (low, high)
        return result

    def _coord(self, name: str) -> float:
        value = self.params[name]
        return math.log(value) if name in self.log_params else value

    def hyperparameters(self, space: TransferSpace) -> Hyperparameters:
        """Concrete hyperparameters at the target: ``space.concretize(self.params, self.target)``."""
        return space.concretize(self.params, self.target)


@dataclass(frozen=True, eq=False)
class Validation:
    """Leave-the-largest-scale-out check of the law.

    Attributes:
        held_out: the scale predicted (the largest of the ladder by default).
        predicted: parameters predicted there from the other scales.
        observed: the optimum estimated from the held-out scale's own trials.
        log_error: ``log(predicted / observed)`` for log parameters, ``predicted − observed`` else.
        relative_error: ``predicted / observed − 1`` for log parameters, ``predicted − observed``
            for linear ones.
        within_interval: whether the observed optimum lies in the prediction's 90% interval.
        regret: metric excess of the prediction under the held-out local model (None when the
            held-out scale has too few trials for one).
        relative_regret: ``regret / |observed best value|`` (None likewise).
        extrapolation: the fit without the held-out scale.
        held_out_optimum: the held-out scale's own optimum estimate.
    """

    held_out: Scale
    predicted: dict[str, float]
    observed: dict[str, float]
    log_error: dict[str, float]
    relative_error: dict[str, float]
    within_interval: dict[str, bool]
    regret: float | None
    relative_regret: float | None
    extrapolation: Extrapolation = field(repr=False)
    held_out_optimum: ScaleOptimum = field(repr=False)


# ------------------------------------------------------------------------------------------------
# Preparing the ladder
# ------------------------------------------------------------------------------------------------
@dataclass
class _Rung:
    scale: Scale
    coords: FloatArray
    values: FloatArray
    local: _Local


@dataclass
class _Setup:
    names: tuple[str, ...]
    logs: tuple[str, ...]
    sign: float
    rungs: list[_Rung]
    variables: list[str]  # used: fitted or fixed
    log_scales: FloatArray  # (S, K) over ``variables``
    fixed: dict[str, dict[str, float]]


def _group(observations: Sequence[Observation]) -> dict[Scale, list[Observation]]:
    groups: dict[Scale, list[Observation]] = {}
    for obs in observations:
        groups.setdefault(obs.scale, []).append(obs)
    return groups


def _prepare(
    observations: Sequence[Observation],
    params: Sequence[str],
    direction: str,
    log_params: Iterable[str] | None,
    scale_variables: Sequence[str] | None,
    fixed_exponents: Mapping[str, Mapping[str, float]] | None,
    target: Scale | None,
) -> _Setup:
    sign = _check_direction(direction)
    names = _check_params(params)
    logs = resolve_log_params(observations, names, log_params)
    groups = _group([o for o in observations if o.state != "pruned"])
    if len(groups) < 2:
        raise TransferSearchError(
            f"extrapolation needs trials at two or more scales, but got {len(groups)} "
            f"({[repr(s) for s in groups]}). Run the sweep at another proxy scale too."
        )
    rungs: list[_Rung] = []
    dropped: list[str] = []
    fallbacks: list[str] = []
    implausible: list[str] = []
    for scale, group in groups.items():
        coords, values = _to_arrays(group, names, logs, sign)
        if not np.isfinite(values).any():
            dropped.append(repr(scale))
            continue
        local = _fit_local(coords, values)
        if local.method == "fallback":
            fallbacks.append(f"{scale!r} ({local.n_trials} finite trials)")
        if local.method == "fallback-implausible":
            implausible.append(implausible_message(local, scale, names, logs, sign))
        rungs.append(_Rung(scale, coords, values, local))
    if dropped:
        warnings.warn(
            f"every trial diverged or failed at {dropped}: those scales are left out. Add trials "
            "at smaller learning rates there.",
            TransferSearchWarning,
            stacklevel=3,
        )
    if fallbacks:
        warnings.warn(
            f"too few finite trials for the local quadratic (needs {_n_coef(len(names)) + 2}) at "
            f"{fallbacks}: using the best trial there (method='fallback'). Add trials.",
            TransferSearchWarning,
            stacklevel=3,
        )
    for message in implausible:
        warnings.warn(message, TransferSearchWarning, stacklevel=3)
    if len(rungs) < 2:
        raise TransferSearchError(
            f"only {len(rungs)} scale has a finite trial; extrapolation needs two or more. Run "
            "trials that do not diverge at another scale."
        )
    rungs.sort(key=lambda r: (sum(math.log(v) for v in r.scale.values()), repr(r.scale)))
    scales = [r.scale for r in rungs]
    candidates = _common_variables(scales, scale_variables, purpose="fit the power laws")
    fixed = _check_fixed_all(fixed_exponents, names, candidates)
    log_scales = np.log(np.array([[s[v] for v in candidates] for s in scales]))
    if not candidates:
        raise TransferSearchError(
            f"the proxy scales share no scale variable ({[repr(s) for s in scales]}). Give every "
            "Scale the same names, e.g. width and dataset_size."
        )
    kept, notes = identifiable_variables(log_scales, candidates)
    any_fixed = {v for table in fixed.values() for v in table}
    used = [v for k, v in enumerate(candidates) if k in kept or v in any_fixed]
    for k, variable in enumerate(candidates):
        if k in kept or variable in any_fixed:
            continue
        note = next((n for n in notes if n.startswith(repr(variable))), repr(variable))
        moves = (
            target is not None
            and variable in target
            and not np.allclose(math.log(target[variable]), log_scales[:, k])
        )
        explicit = scale_variables is not None
        if moves or explicit:
            warnings.warn(
                f"dropping scale variable {note}: the ladder cannot identify its exponent"
                + (
                    f", yet the target has {variable}={target[variable]:g} (its effect is "
                    "ignored). Vary it across the proxies, or fix its exponent"
                    if moves and target is not None
                    else ""
                )
                + ".",
                TransferSearchWarning,
                stacklevel=3,
            )
    if target is not None:
        target.require(*used, purpose="predict from the fitted power laws")
    columns = [candidates.index(v) for v in used]
    return _Setup(names, logs, sign, rungs, used, log_scales[:, columns], fixed)


def _check_fixed_all(
    fixed_exponents: Mapping[str, Mapping[str, float]] | None,
    names: Sequence[str],
    variables: Sequence[str],
) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = {}
    if fixed_exponents is None:
        return result
    if not isinstance(fixed_exponents, Mapping):
        raise TransferSearchError(
            f"`fixed_exponents` must map parameter -> {{scale variable: exponent}}, but got "
            f"{fixed_exponents!r}. Write fixed_exponents={{'lr': {{'dataset_size': 0.0}}}}."
        )
    for param, table in fixed_exponents.items():
        if param not in names:
            raise TransferSearchError(
                f"fixed_exponents names parameter {param!r}, which is not in params="
                f"{list(names)}. Fix the name or add it to params."
            )
        if not isinstance(table, Mapping):
            raise TransferSearchError(
                f"fixed_exponents[{param!r}] must map scale variable -> exponent, but got "
                f"{table!r}. Write {{'dataset_size': 0.0}}."
            )
        checked = check_fixed_exponents(param, table, variables)
        result[param] = checked
    return result


# ------------------------------------------------------------------------------------------------
# The two models
# ------------------------------------------------------------------------------------------------
def _independent_laws(
    setup: _Setup,
    locals_: Sequence[_Local],
    subset: Sequence[int],
    simplify: bool,
    structure: Mapping[str, PowerLaw] | None = None,
) -> dict[str, PowerLaw]:
    """Per-parameter laws on the optima of rungs ``subset``.

    With ``structure`` (from the point fit), reuse its fitted/fixed/shrunk variables: used by the
    bootstrap so each resample refits the same law.
    """
    log_scales = setup.log_scales[list(subset)]
    kept, _ = identifiable_variables(log_scales, setup.variables)
    laws: dict[str, PowerLaw] = {}
    for j, name in enumerate(setup.names):
        fixed = dict(setup.fixed.get(name, {}))
        if structure is not None:
            law = structure[name]
            for variable in setup.variables:
                if variable not in law.names:
                    fixed[variable] = law.exponents[variable]
            do_simplify = False
        else:
            for k, variable in enumerate(setup.variables):
                if k not in kept and variable not in fixed:
                    fixed[variable] = 0.0
            do_simplify = simplify
        z = np.array([locals_[i].coords[j] for i in subset])
        variance = np.array([locals_[i].covariance[j, j] for i in subset])
        laws[name] = fit_law_arrays(
            name, name in setup.logs, z, variance, log_scales, setup.variables, fixed, do_simplify
        )
    return laws


def _joint_applicable(setup: _Setup) -> bool:
    """The linear joint model needs each scale variable fixed for all parameters or for none."""
    for variable in setup.variables:
        fixed_for = [name for name in setup.names if variable in setup.fixed.get(name, {})]
        if fixed_for and len(fixed_for) != len(setup.names):
            return False
    return True


@dataclass(frozen=True, eq=False)
class _Valley:
    """What the joint fit over rungs ``subset`` needs besides the trials themselves.

    Attributes:
        subset: the rungs fitted, in order (position ``s`` in the arrays below).
        drift: columns of ``setup.variables`` the valley's centre drifts along (fitted exponents).
        ell: (S, n_drift) log-scales of the drift variables, centred over the subset.
        ell_mean: (n_drift,) the centring.
        shift: (S, d) fixed exponents' drift ``Σ_k e_k·log s_k``, subtracted from the coordinates.
    """

    subset: tuple[int, ...]
    drift: tuple[int, ...]
    ell: FloatArray
    ell_mean: FloatArray
    shift: FloatArray


def _valley(setup: _Setup, subset: Sequence[int]) -> _Valley:
    log_scales = setup.log_scales[list(subset)]
    drift = [
        k
        for k, variable in enumerate(setup.variables)
        if variable not in setup.fixed.get(setup.names[0], {})
    ]
    kept, _ = identifiable_variables(log_scales[:, drift], [setup.variables[k] for k in drift])
    drift = [drift[k] for k in kept]
    ell_mean = log_scales[:, drift].mean(axis=0) if drift else np.zeros(0)
    ell = log_scales[:, drift] - ell_mean if drift else np.zeros((len(subset), 0))
    shift = np.zeros((len(subset), len(setup.names)))
    for j, name in enumerate(setup.names):
        for k, variable in enumerate(setup.variables):
            exponent = setup.fixed.get(name, {}).get(variable)
            if exponent is not None:
                shift[:, j] += exponent * log_scales[:, k]
    return _Valley(tuple(subset), tuple(drift), ell, ell_mean, shift)


def _valley_design(valley: _Valley, u: FloatArray, which: NDArray[np.intp]) -> FloatArray:
    """Columns: per-scale offsets, u_j, u_j·ℓ_k (drift), u_j·u_l (j ≤ l); ``which`` = row's scale."""
    rows, dims = u.shape
    offsets = np.zeros((rows, len(valley.subset)))
    offsets[np.arange(rows), which] = 1.0
    interaction = (u[:, :, None] * valley.ell[which][:, None, :]).reshape(rows, -1)
    quad = _design(u)[:, 1 + dims :]
    return np.column_stack([offsets, u, interaction, quad])


def _valley_parameters(
    valley: _Valley,
    theta: FloatArray,
    center: FloatArray,
    width: FloatArray,
    stretch: FloatArray,
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Law parameters (intercepts, exponents) from valley coefficients, many fits at once.

    With ``f = c_s + ½uᵀHu + (α + B·ℓ)ᵀu`` in coordinates ``u = (x − center) / width``:
    ``a = −H⁻¹α``, ``E = −H⁻¹B``, back in fitted coordinates with the intercept at log-scale 0.

    Args:
        valley: the fit's layout.
        theta: (B, p) coefficients, columns as :func:`_valley_design`.
        center, width: (d,) the standardisation the coefficients are in.
        stretch: (B, d) ratio of each fit's own standardisation width to ``width``: H is checked
            for a minimum (eigenvalues > 1e-9 of the largest) in the fit's own coordinates.

    Returns:
        (B, d + d·n_drift) intercepts then exponents (parameter-major), NaN where H has no
        minimum; and (B,) where it has one.
    """
    count = theta.shape[0]
    dims = len(center)
    n_drift = len(valley.drift)
    start = len(valley.subset)
    alpha = theta[:, start : start + dims]
    b_matrix = theta[:, start + dims : start + dims + dims * n_drift].reshape(count, dims, n_drift)
    hess = _hessians(theta[:, start + dims + dims * n_drift :], dims)
    own = hess * stretch[:, :, None] * stretch[:, None, :]
    with np.errstate(invalid="ignore"):
        finite = np.all(np.isfinite(own), axis=(1, 2))
        eigen = np.linalg.eigvalsh(np.where(finite[:, None, None], own, np.eye(dims)))
        ok = finite & (eigen.min(axis=1) > 1e-9 * np.maximum(1.0, np.abs(eigen).max(axis=1)))
    safe = np.where(ok[:, None, None], hess, np.eye(dims))
    a_u = -np.linalg.solve(safe, alpha[:, :, None])[:, :, 0]
    e_u = -np.linalg.solve(safe, b_matrix) if n_drift else np.zeros((count, dims, 0))
    exponents = e_u * width[None, :, None]
    intercept = center + width * a_u - exponents @ valley.ell_mean
    out = np.concatenate([intercept, exponents.reshape(count, -1)], axis=1)
    out[~ok] = np.nan
    return out, ok


def _joint_laws(
    setup: _Setup,
    data: Sequence[tuple[FloatArray, FloatArray]],
    subset: Sequence[int],
    *,
    with_covariance: bool = True,
) -> dict[str, PowerLaw] | None:
    """Fit one drifting quadratic valley over rungs ``subset``; None when it has no minimum.

    Each rung contributes its best region (:func:`transfersearch.fit._select` on its finite
    trials); coordinates are standardised by the pooled finite trials' mean and range.
    """
    dims = len(setup.names)
    valley = _valley(setup, subset)
    blocks_u: list[FloatArray] = []
    blocks_y: list[FloatArray] = []
    blocks_w: list[FloatArray] = []
    blocks_s: list[NDArray[np.intp]] = []
    shifted_all: list[FloatArray] = []
    for position, rung_index in enumerate(subset):
        coords, values = data[rung_index]
        shifted = coords - valley.shift[position]
        finite = np.flatnonzero(np.isfinite(values))
        if len(finite) == 0:
            return None
        size = _region_size(len(finite), dims)
        chosen, weights = _select(values[finite], size)
        rows = finite[chosen]
        blocks_u.append(shifted[rows])
        blocks_y.append(values[rows] - float(values[rows].min()))
        blocks_w.append(weights)
        blocks_s.append(np.full(len(rows), position))
        shifted_all.append(shifted[finite])
    pooled = np.vstack(shifted_all)
    center = pooled.mean(axis=0)
    width = np.ptp(pooled, axis=0)
    if np.any(width <= 0.0):
        return None
    u = (np.vstack(blocks_u) - center) / width
    design = _valley_design(valley, u, np.concatenate(blocks_s))
    sqrt_w = np.sqrt(np.concatenate(blocks_w))
    a_w = design * sqrt_w[:, None]
    target = np.concatenate(blocks_y) * sqrt_w
    if a_w.shape[0] <= a_w.shape[1]:
        return None
    theta = np.asarray(np.linalg.lstsq(a_w, target, rcond=None)[0], dtype=np.float64)
    ones = np.ones((1, dims))
    point_all, ok = _valley_parameters(valley, theta[None, :], center, width, ones)
    if not ok[0]:
        return None
    point = point_all[0]
    cov = np.zeros((len(point), len(point)))
    if with_covariance:
        # Delta method by central differences over the valley's coefficients (not the offsets).
        active = np.arange(len(valley.subset), len(theta))
        steps = 1e-6 * np.maximum(1.0, np.abs(theta[active]))
        moved = np.repeat(theta[None, :], 2 * len(active), axis=0)
        moved[np.arange(len(active)), active] += steps
        moved[len(active) + np.arange(len(active)), active] -= steps
        shifted_points, moved_ok = _valley_parameters(
            valley, moved, center, width, np.ones((len(moved), dims))
        )
        if not moved_ok.all():
            return None
        jac = np.zeros((len(point), len(theta)))
        jac[:, active] = (
            (shifted_points[: len(active)] - shifted_points[len(active) :]) / (2.0 * steps[:, None])
        ).T
        residual = target - a_w @ theta
        sigma2 = float(residual @ residual) / (a_w.shape[0] - a_w.shape[1])
        cov = jac @ (sigma2 * np.linalg.pinv(a_w.T @ a_w)) @ jac.T
    return _valley_laws(setup, valley, point, cov)


def _valley_laws(
    setup: _Setup, valley: _Valley, point: FloatArray, cov: FloatArray
) -> dict[str, PowerLaw]:
    """One :class:`PowerLaw` per parameter from the valley's (intercepts, exponents)."""
    dims = len(setup.names)
    n_drift = len(valley.drift)
    drift_names = [setup.variables[k] for k in valley.drift]
    laws: dict[str, PowerLaw] = {}
    for j, name in enumerate(setup.names):
        exponents = {variable: 0.0 for variable in setup.variables}
        exponents.update(setup.fixed.get(name, {}))
        picks = [j]
        for position, variable in enumerate(drift_names):
            exponents[variable] = float(point[dims + j * n_drift + position])
            picks.append(dims + j * n_drift + position)
        laws[name] = PowerLaw(
            param=name,
            log_space=name in setup.logs,
            intercept=float(point[j]),
            exponents=exponents,
            fixed=tuple(v for v in setup.variables if v in setup.fixed.get(name, {})),
            shrunk=(),
            names=("intercept", *drift_names),
            covariance=cov[np.ix_(picks, picks)],
            r_squared=math.nan,
            chi2_per_dof=math.nan,
            n_scales=len(valley.subset),
        )
    return laws


def _predict(laws: Mapping[str, PowerLaw], names: Sequence[str], scale: Scale) -> FloatArray:
    return np.array([laws[name].predict_coord(scale)[0] for name in names])


def _loso_score(
    setup: _Setup,
    model: Literal["independent", "joint"],
    simplify: bool,
) -> float:
    """Mean held-out regret ½δᵀH_sδ when each rung is predicted from the others."""
    rungs = setup.rungs
    use_hessian = all(r.local.hessian is not None for r in rungs)
    data = [(r.coords, r.values) for r in rungs]
    locals_ = [r.local for r in rungs]
    scores: list[float] = []
    for held in range(len(rungs)):
        subset = [i for i in range(len(rungs)) if i != held]
        if model == "independent":
            laws: dict[str, PowerLaw] | None = _independent_laws(setup, locals_, subset, simplify)
        else:
            laws = _joint_laws(setup, data, subset)
        if laws is None:
            return math.inf
        delta = _predict(laws, setup.names, rungs[held].scale) - rungs[held].local.coords
        hess = rungs[held].local.hessian
        if use_hessian and hess is not None:
            finite = np.isfinite(np.diag(hess))
            sub = hess[np.ix_(finite, finite)]
            scores.append(0.5 * float(delta[finite] @ sub @ delta[finite]))
        else:
            var = np.diag(rungs[held].local.covariance)
            good = np.isfinite(var) & (var > 0)
            scores.append(float(np.sum(delta[good] ** 2 / var[good])))
    return float(np.mean(scores))


# ------------------------------------------------------------------------------------------------
# Public API
# ------------------------------------------------------------------------------------------------
def extrapolate(
    observations: Any,
    *,
    target: Scale | Mapping[str, float],
    params: Sequence[str] | None = None,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    scale_variables: Sequence[str] | None = None,
    fixed_exponents: Mapping[str, Mapping[str, float]] | None = None,
    simplify: bool = True,
    model: Model = "auto",
    n_bootstrap: int = 200,
    seed: int | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
) -> Extrapolation:
    """Predict the optimal ``params`` at ``target`` from proxy trials over a ladder of scales.

    Method: see the module docstring — local-quadratic optimum per scale, log-linear power laws
    (``p* = coefficient · Π scale_k ** e_k``) or one jointly fitted drifting valley, chosen by
    leave-one-scale-out regret, then a bootstrap over trials for the interval.

    Args:
        observations: list of :class:`~transfersearch.observations.Observation`, a pandas DataFrame
            (``scale.*`` / ``params.*`` / ``value`` columns, or ``scale_columns=`` and plain
            parameter columns), an Optuna Study or a Ray Tune ResultGrid.
        target: the scale to predict for; must have every scale variable the laws use.
        params: the swept parameters to predict, jointly (default: every parameter that all the
            complete trials record, see :func:`infer_params`).
        direction: ``"minimize"`` (default) or ``"maximize"`` the value.
        log_params: parameters fitted in log space (default: every all-positive parameter).
        scale_variables: scale names the laws may use (default: those all proxies share).
        fixed_exponents: theory's exponents per parameter, e.g.
            ``{"base_lr": {"dataset_size": 0.0}}``; the others are fitted.
        simplify: shrink to 0 each exponent whose 90% interval covers 0.
        model: ``"auto"`` (keep the model with lower held-out regret), ``"independent"`` or
            ``"joint"``.
        n_bootstrap: bootstrap resamples of the trials for :meth:`Extrapolation.interval`
            (0: analytic intervals only).
        seed: seed of the bootstrap.
        scale_columns: DataFrame only: plain columns holding scale variables.
        value_column: DataFrame only: the metric column.

    Returns:
        An :class:`Extrapolation`.

    Raises:
        TransferSearchError: fewer than two scales, a missing parameter, a non-positive value on a
            log coordinate, a target missing a scale variable the laws need, a bad option.
    """
    target_scale = _as_scale(target)
    if model not in ("auto", "independent", "joint"):
        raise TransferSearchError(
            f"`model` must be 'auto', 'independent' or 'joint', but got model={model!r}."
        )
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 0:
        raise TransferSearchError(
            f"`n_bootstrap` must be a non-negative integer, but got n_bootstrap={n_bootstrap!r}."
        )
    obs = as_observations(
        observations, params=params, scale_columns=scale_columns, value_column=value_column
    )
    params = infer_params(obs) if params is None else params
    setup = _prepare(
        obs, params, direction, log_params, scale_variables, fixed_exponents, target_scale
    )
    return _extrapolate(setup, target_scale, direction, simplify, model, n_bootstrap, seed)


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


def _as_scale(target: Any) -> Scale:
    if isinstance(target, Scale):
        return target
    if isinstance(target, Mapping):
        return Scale(target)
    raise TransferSearchError(
        f"`target` must be a Scale, e.g. Scale(width=4096, dataset_size=1e8), but got {target!r}."
    )


def _extrapolate(
    setup: _Setup,
    target: Scale,
    direction: Direction,
    simplify: bool,
    model: Model,
    n_bootstrap: int,
    seed: int | None,
) -> Extrapolation:
    rungs = setup.rungs
    all_index = list(range(len(rungs)))
    locals_ = [r.local for r in rungs]
    data = [(r.coords, r.values) for r in rungs]
    independent = _independent_laws(setup, locals_, all_index, simplify)
    joint_ok = _joint_applicable(setup)
    joint = _joint_laws(setup, data, all_index) if joint_ok and model != "independent" else None
    if model == "joint" and joint is None:
        warnings.warn(
            "the joint model could not be fitted (no shared minimum, or partially fixed "
            "exponents): using the independent model.",
            TransferSearchWarning,
            stacklevel=3,
        )
    scores = {"independent": math.nan, "joint": math.nan}
    chosen: Literal["independent", "joint"] = "independent"
    if model == "joint" and joint is not None:
        chosen = "joint"
    elif model == "auto" and joint is not None and len(rungs) >= 3:
        scores["independent"] = _loso_score(setup, "independent", simplify)
        scores["joint"] = _loso_score(setup, "joint", simplify)
        if scores["joint"] < scores["independent"]:
            chosen = "joint"
    laws = joint if chosen == "joint" and joint is not None else independent

    point = _predict(laws, setup.names, target)
    stderr = {name: laws[name].predict_coord(target)[1] for name in setup.names}
    samples = _bootstrap(setup, chosen, laws, target, n_bootstrap, seed)

    used_scales = [r.scale for r in rungs]
    span = max(
        (
            a.distance_decades(b, iter(setup.variables))
            for i, a in enumerate(used_scales)
            for b in used_scales[i + 1 :]
        ),
        default=0.0,
    )
    distance = min(target.distance_decades(s, iter(setup.variables)) for s in used_scales)
    if distance > FAR_FACTOR * span:
        warnings.warn(
            f"the target {target!r} lies {distance:.2f} decades from the nearest proxy scale, "
            f"more than {FAR_FACTOR:g}x the ladder's span of {span:.2f} decades: the laws are "
            "extrapolated far. Add a larger proxy scale, or check the law with validate().",
            TransferSearchWarning,
            stacklevel=3,
        )
    params_out = {
        name: (math.exp(value) if name in setup.logs else float(value))
        for name, value in zip(setup.names, point, strict=True)
    }
    optima = tuple(
        _to_optimum(r.local, r.scale, setup.names, setup.logs, setup.sign) for r in rungs
    )
    return Extrapolation(
        target=target,
        params=params_out,
        laws=laws,
        optima=optima,
        model=chosen,
        model_scores=scores,
        scale_variables=tuple(setup.variables),
        log_params=setup.logs,
        stderr=stderr,
        samples=samples,
        extrapolation_decades=distance,
        ladder_span_decades=span,
        direction=direction,
    )


def _bootstrap(
    setup: _Setup,
    chosen: Literal["independent", "joint"],
    laws: Mapping[str, PowerLaw],
    target: Scale,
    n_bootstrap: int,
    seed: int | None,
) -> FloatArray:
    """Predictions at ``target`` refitted on trials resampled with replacement within each scale.

    Independent model: every scale's optimum is refitted on each resample (batched), and the laws
    keep the point fit's structure (fitted, fixed and shrunk exponents) and weights, so the
    prediction is a fixed linear function of the resampled optima. Joint model: the pooled
    valley is refitted on each resample, all resamples at once (:func:`_joint_bootstrap`).
    """
    dims = len(setup.names)
    if n_bootstrap == 0:
        return np.zeros((0, dims))
    rng = np.random.default_rng(seed)
    if chosen == "independent":
        optima = np.stack(
            [_rung_resamples(r, n_bootstrap, rng) for r in setup.rungs], axis=1
        )  # (B, S, d)
        samples = np.empty((n_bootstrap, dims))
        for j, name in enumerate(setup.names):
            weights, constant = _law_predictor(setup, laws[name], j, target)
            samples[:, j] = optima[:, :, j] @ weights + constant
        return samples
    picks = _draw_resamples(setup, n_bootstrap, rng)
    return _joint_bootstrap(setup, target, picks)


def _rung_resamples(rung: _Rung, n_bootstrap: int, rng: np.random.Generator) -> FloatArray:
    """(B, d) resampled optima of one rung; a rejected local model is not refitted.

    A rung whose local model was rejected (``"fallback-implausible"``) would be refitted with the
    very model it does not support; its optimum is drawn from its Gaussian (mean of the best
    trials, their covariance) instead.
    """
    local = rung.local
    if local.method != "fallback-implausible":
        return bootstrap_optima(rung.coords, rung.values, n_bootstrap, rng)
    finite = np.isfinite(np.diag(local.covariance))
    out = np.repeat(local.coords[None, :], n_bootstrap, axis=0)
    cov = local.covariance[np.ix_(finite, finite)]
    out[:, finite] += rng.multivariate_normal(np.zeros(int(finite.sum())), cov, n_bootstrap)
    return out


def _draw_resamples(
    setup: _Setup, n_bootstrap: int, rng: np.random.Generator
) -> list[NDArray[np.int64]]:
    """Per rung, (B, n) indices of its trials drawn with replacement: B resamples of each scale."""
    return [
        rng.integers(0, len(rung.values), (n_bootstrap, len(rung.values))) for rung in setup.rungs
    ]


def _joint_bootstrap_loop(
    setup: _Setup, target: Scale, picks: Sequence[NDArray[np.int64]], which: Iterable[int]
) -> FloatArray:
    """Joint-model predictions refitted one resample at a time (the reference for the batch)."""
    all_index = list(range(len(setup.rungs)))
    samples = np.full((picks[0].shape[0], len(setup.names)), np.nan)
    for b in which:
        data = [(r.coords[p[b]], r.values[p[b]]) for r, p in zip(setup.rungs, picks, strict=True)]
        refit = _joint_laws(setup, data, all_index, with_covariance=False)
        if refit is not None:
            samples[b] = _predict(refit, setup.names, target)
    return samples


#: A batched normal-equations solve whose Jacobi-scaled Gram matrix is worse conditioned than this
#: is redone by least squares, one resample at a time.
_MAX_CONDITION = 1e10


def _joint_bootstrap(
    setup: _Setup, target: Scale, picks: Sequence[NDArray[np.int64]]
) -> FloatArray:
    """Joint-model predictions at ``target`` for every resample at once.

    The same fit as :func:`_joint_laws` on each resample, batched like
    :func:`transfersearch.fit.bootstrap_optima`: a resample is a count of draws per trial, its
    best region at each scale the best-ranked draws (:func:`transfersearch.fit._region_weights`),
    and its fit the weighted least squares with those counts as frequency weights — stacked normal
    equations solved together. Coordinates are standardised once, by the full data: the valley's
    model space (per-scale offsets, linear, drift and quadratic terms) is invariant to any shift
    and scaling of the coordinates, so the fitted valley is the same; only the minimum check runs
    in each resample's own standardisation, as the per-resample fit does. Resamples whose Gram
    matrix is ill-conditioned are refitted one by one (:func:`_joint_bootstrap_loop`).

    Args:
        setup: the prepared ladder.
        target: the scale to predict for.
        picks: per rung, (B, n) drawn trial indices (:func:`_draw_resamples`).

    Returns:
        (B, d) predicted coordinates, NaN where the resample's valley has no minimum.
    """
    rungs = setup.rungs
    dims = len(setup.names)
    count = picks[0].shape[0]
    samples = np.full((count, dims), np.nan)
    valley = _valley(setup, range(len(rungs)))
    shifted = [r.coords - valley.shift[s] for s, r in enumerate(rungs)]
    finite = [np.isfinite(r.values) for r in rungs]
    pooled = np.vstack([x[f] for x, f in zip(shifted, finite, strict=True)])
    center = pooled.mean(axis=0)
    width = np.ptp(pooled, axis=0)
    if np.any(width <= 0.0):
        return samples  # no resample has a positive range either
    alive = np.ones(count, dtype=bool)
    n_rows = np.zeros(count, dtype=np.int64)
    all_counts: list[NDArray[np.int64]] = []
    blocks_d: list[FloatArray] = []
    blocks_w: list[FloatArray] = []
    blocks_y: list[FloatArray] = []
    for position, (rung, pick) in enumerate(zip(rungs, picks, strict=True)):
        n_trials = len(rung.values)
        flat = (np.arange(count)[:, None] * n_trials + pick).ravel()
        counts = np.bincount(flat, minlength=count * n_trials).reshape(count, n_trials)
        all_counts.append(counts)
        good = np.flatnonzero(finite[position])
        ranked = good[np.argsort(rung.values[good], kind="stable")]
        n_finite = n_trials - counts[:, np.flatnonzero(~finite[position])].sum(axis=1)
        alive &= n_finite > 0
        size = _region_sizes(n_finite, dims)
        n_rows += size
        # Each resample's region lies among its best-ranked draws: look at a window of the
        # ranking, widened to all of it when some region does not fit.
        window = min(len(ranked), 3 * int(size.max()) + 40)
        drawn = counts[:, ranked[:window]]
        if window < len(ranked) and np.any(drawn.sum(axis=1) < size):
            window = len(ranked)
            drawn = counts[:, ranked]
        before = np.cumsum(drawn, axis=1) - drawn
        depth = max(int((before < size[:, None]).sum(axis=1).max()), 1)
        top = ranked[:depth]
        weights, _ = _region_weights(drawn[:, :depth].astype(np.float64), rung.values[top], size)
        u = (shifted[position][top] - center) / width
        blocks_d.append(_valley_design(valley, u, np.full(depth, position)))
        blocks_w.append(weights)
        blocks_y.append(rung.values[top] - rung.values[top[0]])
    low, high = _drawn_range(shifted, finite, all_counts)
    design = np.vstack(blocks_d)  # (M, p)
    weights = np.hstack(blocks_w)  # (B, M)
    n_coef = design.shape[1]
    alive &= n_rows > n_coef
    with np.errstate(invalid="ignore"):
        stretch = (high - low) / width
    alive &= np.all(stretch > 0.0, axis=1)
    # Stacked normal equations: Gram_b = Σ_m w_bm·d_m d_mᵀ, one matrix product over rows m.
    outer = (design[:, :, None] * design[:, None, :]).reshape(len(design), -1)
    gram = (weights @ outer).reshape(count, n_coef, n_coef)  # (B, p, p)
    rhs = weights @ (design * np.concatenate(blocks_y)[:, None])  # (B, p)
    scale = np.sqrt(np.abs(np.einsum("bii->bi", gram)))
    scale = np.where(alive[:, None] & (scale > 0.0), scale, 1.0)
    scaled = gram / scale[:, :, None] / scale[:, None, :]
    scaled[~alive] = np.eye(n_coef)
    eigen = np.linalg.eigvalsh(scaled)
    solid = alive & (eigen[:, 0] > eigen[:, -1] / _MAX_CONDITION)
    scaled[~solid] = np.eye(n_coef)
    theta = np.linalg.solve(scaled, (rhs / scale)[:, :, None])[:, :, 0] / scale
    point, ok = _valley_parameters(
        valley, theta, center, width, np.where(solid[:, None], stretch, 1.0)
    )
    good_fit = solid & ok
    target_logs = np.array([math.log(target[v]) for v in setup.variables])
    fixed_drift = np.array(
        [
            sum(e * math.log(target[v]) for v, e in setup.fixed.get(name, {}).items())
            for name in setup.names
        ]
    )
    n_drift = len(valley.drift)
    exponents = point[:, dims:].reshape(count, dims, n_drift)
    predicted = point[:, :dims] + exponents @ target_logs[list(valley.drift)] + fixed_drift
    samples[good_fit] = predicted[good_fit]
    redo = np.flatnonzero(alive & ~solid)
    if len(redo):
        samples[redo] = _joint_bootstrap_loop(setup, target, picks, redo)[redo]
    return samples


def _drawn_range(
    coords: Sequence[FloatArray],
    finite: Sequence[NDArray[np.bool_]],
    counts: Sequence[NDArray[np.int64]],
) -> tuple[FloatArray, FloatArray]:
    """Per resample, the lowest and highest coordinates of its finite draws, pooled over rungs.

    Args:
        coords: per rung, (n, d) coordinates of its trials.
        finite: per rung, (n,) which trials have a finite value.
        counts: per rung, (B, n) draws of each trial in each resample.

    Returns:
        (B, d) lowest and (B, d) highest; ±inf for a resample with no finite draw.
    """
    rung_of = np.concatenate([np.full(int(f.sum()), r) for r, f in enumerate(finite)])
    trial_of = np.concatenate([np.flatnonzero(f) for f in finite])
    pooled = np.vstack([x[f] for x, f in zip(coords, finite, strict=True)])
    count, dims = counts[0].shape[0], pooled.shape[1]
    low = np.full((count, dims), np.inf)
    high = np.full((count, dims), -np.inf)
    # A resample's extreme is its first drawn trial in coordinate order: look at the few most
    # extreme trials (each drawn with probability ≈ 1 − 1/e), then at all for resamples none hit.
    candidates = min(len(pooled), 48)
    for j in range(dims):
        order = np.argsort(pooled[:, j], kind="stable")
        for out, ends, pick in ((low, order, np.min), (high, order[::-1], np.max)):
            ends = ends[:candidates]
            drawn = np.column_stack([counts[rung_of[i]][:, trial_of[i]] for i in ends]) > 0
            hit = drawn.any(axis=1)
            out[hit, j] = pooled[ends[np.argmax(drawn[hit], axis=1)], j]
            for b in np.flatnonzero(~hit):
                joined = np.concatenate(
                    [x[f & (c[b] > 0), j] for x, f, c in zip(coords, finite, counts, strict=True)]
                )
                if len(joined):
                    out[b, j] = pick(joined)
    return low, high


def _law_predictor(
    setup: _Setup, law: PowerLaw, column: int, target: Scale
) -> tuple[FloatArray, float]:
    """(h, c) with prediction at ``target`` = h·z + c for optima z, the law's structure and weights.

    Weighted least squares is linear in the data: β = (AᵀWA)⁻¹AᵀW(z − F), where F holds the fixed
    (and shrunk) exponents' drift, so prediction = x_tᵀβ + f_t.
    """
    free = [setup.variables.index(v) for v in law.names[1:]]
    variance = np.array([r.local.covariance[column, column] for r in setup.rungs])
    var = np.where(np.isfinite(variance) & (variance > 0), variance, np.nan)
    if np.all(np.isnan(var)):
        var = np.ones(len(variance))
    else:
        var = np.where(np.isnan(var), np.nanmax(var) * 1e6, var)
    weights = 1.0 / var
    design = np.column_stack([np.ones(len(var)), setup.log_scales[:, free]])
    target_logs = np.array([math.log(target[v]) for v in setup.variables])
    row = np.concatenate([[1.0], target_logs[free]])
    projector = np.linalg.pinv(design.T @ (design * weights[:, None])) @ (design.T * weights)
    h = row @ projector
    not_free = [k for k in range(len(setup.variables)) if k not in free]
    drift = np.zeros(len(var))
    drift_target = 0.0
    for k in not_free:
        exponent = law.exponents[setup.variables[k]]
        drift = drift + exponent * setup.log_scales[:, k]
        drift_target += exponent * float(target_logs[k])
    return h, drift_target - float(h @ drift)


def validate(
    observations: Any,
    *,
    params: Sequence[str] | None = None,
    held_out: Scale | Mapping[str, float] | None = None,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    scale_variables: Sequence[str] | None = None,
    fixed_exponents: Mapping[str, Mapping[str, float]] | None = None,
    simplify: bool = True,
    model: Model = "auto",
    n_bootstrap: int = 100,
    seed: int | None = None,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
) -> Validation:
    """Leave the largest scale out: fit on the others, predict it, compare with its own optimum.

    The largest scale is the one with the largest ``Σ log(scale values)``; ``held_out`` picks another.
    The error is reported per parameter (log ratio and relative), and the loss regret of the
    prediction under the held-out scale's local quadratic model (``½δᵀHδ``), so users see how far
    to trust the law before spending the big run.

    Args:
        observations: as for :func:`extrapolate`; needs three or more scales.
        params: the swept parameters (default: as for :func:`extrapolate`).
        held_out: the scale to hold out (default: the largest).
        direction, log_params, scale_variables, fixed_exponents, simplify, model, n_bootstrap,
            seed, scale_columns, value_column: as for :func:`extrapolate`.

    Returns:
        A :class:`Validation`.

    Raises:
        TransferSearchError: fewer than three scales, ``held_out`` is not a proxy scale, or any
            error :func:`extrapolate` raises.
    """
    obs = as_observations(
        observations, params=params, scale_columns=scale_columns, value_column=value_column
    )
    params = infer_params(obs) if params is None else params
    groups = _group([o for o in obs if o.state != "pruned"])
    if len(groups) < 3:
        raise TransferSearchError(
            f"validate() holds one scale out and fits a law on the rest, so it needs three or "
            f"more scales, but got {len(groups)}. Add a proxy scale."
        )
    if held_out is None:
        chosen = max(groups, key=lambda s: (sum(math.log(v) for v in s.values()), repr(s)))
    else:
        chosen = _as_scale(held_out)
        if chosen not in groups:
            raise TransferSearchError(
                f"held_out={chosen!r} is not one of the proxy scales "
                f"{[repr(s) for s in groups]}. Pick one of them."
            )
    rest = [o for o in obs if o.scale != chosen]
    result = extrapolate(
        rest,
        target=chosen,
        params=params,
        direction=direction,
        log_params=log_params,
        scale_variables=scale_variables,
        fixed_exponents=fixed_exponents,
        simplify=simplify,
        model=model,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    sign = _check_direction(direction)
    names = _check_params(params)
    coords, values = _to_arrays(groups[chosen], names, result.log_params, sign)
    local = _fit_local(coords, values)
    observed = _to_optimum(local, chosen, names, result.log_params, sign)
    interval = result.interval(0.9)
    log_error: dict[str, float] = {}
    relative: dict[str, float] = {}
    inside: dict[str, bool] = {}
    for name in names:
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
        extrapolation=result,
        held_out_optimum=observed,
    )

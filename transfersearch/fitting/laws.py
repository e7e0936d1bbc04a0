"""Optimum-vs-scale power laws with a prior on the exponents (docs/science.md §7.7).

For one parameter, the rungs' optima ``z_s`` (fitted coordinates: ``log p*`` for a log parameter)
follow ``z_s = a + Σ_k e_k·log(scale_sk) + ε_s`` with ``ε_s ~ N(0, v_s + τ²)``: ``v_s`` the optimum's
own variance, ``τ²`` the scatter of optima about any smooth law. The exponents have the prior
``e ~ N(e₀, s²I)`` — ``e₀ = 0`` in invariant coordinates (no drift), or theory's exponents — and the
intercept a flat one. The posterior mean is the ridge solution ``(XᵀWX + P₀)⁻¹(XᵀWz + P₀β₀)``
(``P₀ = diag(0, 1/s², …)``): an exponent the ladder cannot see (a constant or collinear scale
variable) stays at its prior instead of being invented. ``s²`` and ``τ²`` are chosen by restricted
marginal likelihood (empirical Bayes) over a grid, or fixed by the model (``s² = 0``: the prior's
exponents; ``s²`` large: free exponents).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr

from transfersearch.fitting.coords import FloatArray, to_natural
from transfersearch.scale import Scale

__all__ = [
    "FREE_PRIOR_SD",
    "PRIOR_SD_GRID",
    "UNSEEN_PRIOR_SD",
    "LawData",
    "LawFit",
    "PowerLaw",
    "censored_gls",
    "empirical_bayes",
    "gaussian_gls",
    "gls",
    "reml_fit",
    "restricted_loglik",
    "restricted_logliks",
    "to_power_law",
    "truncated_normal_moments",
]

#: Prior standard deviation of a "free" exponent: far wider than any published optimum-vs-scale
#: exponent (|e| ≤ 1 in Step Law, DeepSeek, Power Lines), so the data decide, yet finite, so an
#: unidentifiable direction gives a wide interval instead of a singular solve.
FREE_PRIOR_SD = 10.0
#: Empirical-Bayes grid of the exponents' prior standard deviation: 0 (the prior's exponents) up to
#: the size of the largest published exponents.
PRIOR_SD_GRID = (0.0, 0.03, 0.1, 0.3, 1.0)
#: A scale variable whose log spans less than this over the rungs is constant there (rounding
#: noise, not a design): its exponent is the prior's (see :func:`gls`).
UNSEEN_SPAN = 1e-9
#: Prior standard deviation of the exponent of a scale variable the rungs never varied, when the
#: target moves along it. Every published optimum-vs-scale exponent has ``|e| ≤ 1`` (Step Law,
#: DeepSeek, Power Lines; docs/science.md §6), so ``±2·0.5`` spans them. The law holds such an exponent
#: at its prior (:func:`gls`); :func:`transfersearch.fitting.predict.predict` adds ``(0.5·Δlog)²``
#: to the prediction's variance for it, so the interval, the decision and the planner's focus do
#: not claim to know a direction no trial measured.
UNSEEN_PRIOR_SD = 0.5
#: Singular values of the informative rungs' centred log-scales below this fraction of the
#: largest (at least 1 log unit) span no direction: the ladder moved those variables together.
SPAN_TOLERANCE = 1e-6
#: Empirical-Bayes grid of the scatter τ, in units of the optima's median standard error.
SCATTER_GRID = (0.0, 0.3, 1.0, 3.0, 10.0)
#: EM for censored rows stops once no imputed value moves by more than this fraction of its sd.
EM_TOLERANCE = 1e-6
#: At most this many EM steps. EM converges linearly, slowest when a bound carries most of the
#: information; a one-sided bound backed by little else (its maximum far away) is stopped here,
#: at a point the ridge prior still holds.
EM_MAX_STEPS = 200
#: A censored row whose observed information is below this fraction of an ordinary row's counts
#: as saying nothing (its effective variance is infinite).
EM_INFORMATION_FLOOR = 1e-9
#: Rounds of (empirical Bayes on the EM-completed data, EM) with censored rows.
EB_ROUNDS = 2


@dataclass(frozen=True, eq=False)
class PowerLaw:
    """A fitted optimum-vs-scale law for one parameter.

    For a log parameter ``p* = coefficient · Π_k scale_k ** exponents[k]``; for a linear one
    ``p* = intercept + Σ_k exponents[k] · log(scale_k)``.

    Attributes:
        param: the parameter.
        log_space: whether the law is fitted to ``log(p*)``.
        intercept: the fitted coordinate at scale 1 (``log(coefficient)`` for a log parameter).
        exponents: exponent per scale variable, including fixed ones and ones shrunk to 0.
        fixed: scale variables whose exponent was given, not fitted.
        shrunk: scale variables whose exponent was held at its prior (the model's prior
            standard deviation is 0).
        names: order of ``covariance``: ``"intercept"`` then the fitted exponents.
        covariance: posterior covariance of (intercept, fitted exponents).
        r_squared: weighted R² of the law on the per-scale optima (NaN when undefined).
        chi2_per_dof: weighted residual χ² per degree of freedom (NaN with no dof).
        n_scales: number of per-scale optima the law was fitted to.
        model: the model that produced the law (see :mod:`transfersearch.fitting.models`).
        scatter: τ, the optima's scatter about the law beyond their own errors; a new scale's
            optimum is that far off the law even when the law is exact, so predictions add τ².
        prior_sd: the exponents' prior standard deviation the law was fitted with.
    """

    param: str
    log_space: bool
    intercept: float
    exponents: dict[str, float]
    fixed: tuple[str, ...]
    shrunk: tuple[str, ...]
    names: tuple[str, ...]
    covariance: FloatArray
    r_squared: float
    chi2_per_dof: float
    n_scales: int
    model: str = "free"
    scatter: float = 0.0
    prior_sd: float = math.inf

    @property
    def coefficient(self) -> float:
        """``exp(intercept)`` for a log parameter, else the intercept."""
        return to_natural(self.intercept, self.log_space)

    @property
    def stderr(self) -> dict[str, float]:
        """Standard error of the intercept and each fitted exponent."""
        diag = np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))
        return {name: float(value) for name, value in zip(self.names, diag, strict=True)}

    def predict_coord(self, scale: Mapping[str, float]) -> tuple[float, float]:
        """The law's fitted coordinate at ``scale`` and its predictive standard error.

        The standard error combines the law's posterior covariance and the scatter τ of optima
        about the law: ``√(xᵀΣx + τ²)``.

        Raises:
            TransferSearchError: ``scale`` lacks a scale variable the law needs.
        """
        target = scale if isinstance(scale, Scale) else Scale(scale)
        needed = sorted(self.exponents)
        target.require(*needed, purpose=f"predict {self.param!r} from its power law")
        logs = {name: math.log(target[name]) for name in needed}
        value = self.intercept + sum(self.exponents[n] * logs[n] for n in needed)
        gradient = np.array([1.0] + [logs[n] for n in self.names[1:]])
        variance = float(gradient @ self.covariance @ gradient)
        return value, math.sqrt(max(variance, 0.0) + self.scatter**2)

    def predict(self, scale: Mapping[str, float]) -> float:
        """The predicted optimum at ``scale``, in natural units.

        Raises:
            TransferSearchError: ``scale`` lacks a scale variable the law needs.
        """
        value, _ = self.predict_coord(scale)
        return to_natural(value, self.log_space)


@dataclass(frozen=True, eq=False)
class LawData:
    """One parameter's per-rung optima, ready for a law.

    Attributes:
        param: the parameter.
        log_space: whether its coordinate is ``log p``.
        z: (S,) each rung's optimum coordinate, minus the drift of the fixed exponents.
        variance: (S,) each optimum's variance (``inf`` where the rung says nothing).
        log_scales: (S, K) log of the scale variables whose exponents are not fixed.
        variables: the K names.
        prior: (K,) the prior's exponents ``e₀``.
        fixed: the fixed exponents, already taken out of ``z``.
        lower, upper: (S,) for a rung whose optimum is known only as an interval (a censored
            observation, docs/science.md §7.3), its bounds (±inf for an open side; both infinite
            for an ordinary observation); ``z`` then holds the interval's nearest supported
            point and ``variance`` the bound's resolution. None: no censored rung.
    """

    param: str
    log_space: bool
    z: FloatArray
    variance: FloatArray
    log_scales: FloatArray
    variables: tuple[str, ...]
    prior: FloatArray
    fixed: Mapping[str, float]
    lower: FloatArray | None = None
    upper: FloatArray | None = None

    def censored(self) -> NDArray[np.bool_]:
        """(S,) rows known only as an interval (finite resolution, a finite bound)."""
        if self.lower is None or self.upper is None:
            return np.zeros(len(self.z), dtype=bool)
        bounded = np.isfinite(self.lower) | np.isfinite(self.upper)
        return np.asarray(bounded & np.isfinite(self.variance), dtype=bool)


@dataclass(frozen=True, eq=False)
class LawFit:
    """A fitted law in array form: ``z = intercept + exponentsᵀℓ``, predictive scatter ``τ²``.

    Attributes:
        intercept: the coordinate at log-scale 0.
        exponents: (K,) one per free variable of the :class:`LawData`.
        fitted: indices of the exponents with posterior uncertainty (the rest are held fixed).
        covariance: posterior covariance of (intercept, exponents[fitted]).
        scatter_var: τ².
        prior_sd: the exponents' prior standard deviation ``s`` used.
    """

    intercept: float
    exponents: FloatArray
    fitted: tuple[int, ...]
    covariance: FloatArray
    scatter_var: float
    prior_sd: float

    def predict(self, log_row: FloatArray) -> tuple[float, float]:
        """(mean, predictive variance) at the log-scales ``log_row`` (K,)."""
        mean = self.intercept + float(self.exponents @ log_row)
        gradient = np.concatenate([[1.0], log_row[list(self.fitted)]])
        variance = float(gradient @ self.covariance @ gradient)
        return mean, max(variance, 0.0) + self.scatter_var


def _weights(variance: FloatArray, scatter_var: float) -> FloatArray:
    """Inverse total variances; a rung with an infinite variance weighs 0."""
    total = variance + scatter_var
    return np.where(np.isfinite(total) & (total > 0.0), 1.0 / np.where(total > 0, total, 1.0), 0.0)


def gls(data: LawData, prior_sd: float, scatter_var: float) -> LawFit:
    """The posterior mode and covariance of the law for given ``s`` and ``τ²``, censored rows
    included (:func:`censored_gls`; without them, :func:`gaussian_gls`)."""
    censored = data.censored()
    if not censored.any():
        return gaussian_gls(data, prior_sd, scatter_var)
    return censored_gls(data, prior_sd, scatter_var)[0]


def truncated_normal_moments(
    mean: FloatArray, sd: FloatArray, low: FloatArray, high: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Mean and variance of ``y ~ N(mean, sd²)`` given ``low < y < high`` (docs/science.md §7.3).

    With ``a = (low − mean)/sd``, ``b = (high − mean)/sd``, ``Z = Φ(b) − Φ(a)``:
    ``E = mean + sd·(φ(a) − φ(b))/Z`` and
    ``Var = sd²·[1 + (aφ(a) − bφ(b))/Z − ((φ(a) − φ(b))/Z)²]`` (Johnson, Kotz & Balakrishnan,
    *Continuous Univariate Distributions* vol. 1, §13.10). ``Z`` is taken in logs on the side of
    the nearer tail, so a bound many sds away neither underflows nor cancels.
    """
    mean = np.asarray(mean, dtype=np.float64)
    flip = (low - mean) / sd > 0.0  # the interval lies above the mean: mirror it below
    centre = np.where(flip, -mean, mean)
    lo = np.where(flip, -high, low)
    hi = np.where(flip, -low, high)
    a = (lo - centre) / sd
    b = (hi - centre) / sd
    log_b = log_ndtr(b)
    log_z = log_b + np.log1p(-np.exp(np.minimum(log_ndtr(a) - log_b, 0.0)))
    log_z = np.maximum(log_z, -700.0)  # a degenerate interval: Z is 0 to the precision used

    def ratio(x: FloatArray) -> FloatArray:  # φ(x)/Z, 0 at ±inf
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.exp(-0.5 * x * x - 0.5 * math.log(2.0 * math.pi) - log_z)
        return np.where(np.isfinite(x), out, 0.0)

    pa, pb = ratio(a), ratio(b)
    shift = pa - pb
    spread = np.where(np.isfinite(a), a, 0.0) * pa - np.where(np.isfinite(b), b, 0.0) * pb
    moment = centre + sd * shift
    variance = np.clip(sd**2 * (1.0 + spread - shift**2), 0.0, sd**2)
    return np.where(flip, -moment, moment), variance


def censored_gls(
    data: LawData, prior_sd: float, scatter_var: float
) -> tuple[LawFit, FloatArray, FloatArray]:
    """The law with censored rows, by EM (docs/science.md §7.3): (fit, imputed z, their variance).

    A censored rung's optimum ``y_s ~ N(μ_s, v_s + τ²)`` (``μ_s`` the law's prediction, ``v_s``
    the bound's resolution) is known to lie in ``(L_s, U_s)``. E-step: replace it by the truncated
    normal mean ``E[y_s | L_s < y_s < U_s]`` (:func:`truncated_normal_moments`); M-step: the
    ridge GLS of :func:`gaussian_gls` on the completed data. EM climbs the Tobit posterior
    (Dempster, Laird & Rubin 1977) to its mode, stopping once no imputed value moves by
    :data:`EM_TOLERANCE` of its sd. The covariance is the observed information by Louis' (1982)
    identity: a censored row informs as an ordinary one with total variance
    ``σ⁴/(σ² − Var_trunc)`` (``σ² = v_s + τ²``), which is infinite when the bound is far from the
    law (it then says nothing) and ``σ²`` when the law sits far outside it.

    Without any ordinary row nothing anchors the level (a one-sided bound has no finite
    maximum): the censored rows count as their nearest supported points.
    """
    censored = data.censored()
    ordinary = np.isfinite(data.variance) & ~censored
    plain = replace(data, lower=None, upper=None)
    if not ordinary.any():
        return gaussian_gls(plain, prior_sd, scatter_var), data.z, data.variance
    assert data.lower is not None and data.upper is not None  # censored rows exist
    low, high = data.lower[censored], data.upper[censored]
    sd = np.sqrt(data.variance[censored] + scatter_var)
    z = data.z.copy()
    fit = gaussian_gls(replace(plain, z=z), prior_sd, scatter_var)
    variance_t = sd**2
    for _ in range(EM_MAX_STEPS):
        mean = fit.intercept + (
            data.log_scales[censored] @ fit.exponents
            if len(data.variables)
            else np.zeros(int(censored.sum()))
        )
        imputed, variance_t = truncated_normal_moments(mean, sd, low, high)
        step = float(np.max(np.abs(imputed - z[censored]) / sd))
        z[censored] = imputed
        fit = gaussian_gls(replace(plain, z=z), prior_sd, scatter_var)
        if step < EM_TOLERANCE:
            break
    information = (sd**2 - variance_t) / sd**4
    effective = data.variance.copy()
    informative = information > EM_INFORMATION_FLOOR / sd**2
    effective[censored] = np.where(
        informative, 1.0 / np.where(informative, information, 1.0) - scatter_var, np.inf
    )
    curvature = gaussian_gls(replace(plain, z=z, variance=effective), prior_sd, scatter_var)
    if curvature.fitted == fit.fitted:
        fit = replace(fit, covariance=curvature.covariance)
    return fit, z, effective


def gaussian_gls(data: LawData, prior_sd: float, scatter_var: float) -> LawFit:
    """The posterior mean and covariance of the law for given ``s`` (prior sd) and ``τ²``.

    ``s = 0`` holds the exponents at the prior and fits the intercept only (the weighted mean of
    ``z − e₀ᵀℓ``). Otherwise ``β = (XᵀWX + P₀)⁻¹(XᵀWz + P₀β₀)`` with ``X = [1, ℓ − ℓ̄]`` (centred at
    the weighted mean for conditioning, then shifted back), covariance ``(XᵀWX + P₀)⁻¹``. A scale
    variable constant over the rungs is held at its prior exponent and left out of the
    covariance: the ladder says nothing about it, and its prior variance (``s²``, 100 for a free
    law) would otherwise swamp the predictive variance, and with it the decision, at a target
    that changes it (the caller warns about that target).
    """
    weights = _weights(data.variance, scatter_var)
    total = float(weights.sum())
    if total <= 0.0:
        weights, total = np.ones_like(data.z), float(len(data.z))
    if len(data.variables):
        span = np.ptp(data.log_scales[weights > 0.0], axis=0)
        moving = np.flatnonzero(span > UNSEEN_SPAN)
    else:
        moving = np.zeros(0, dtype=np.intp)
    count = len(moving)
    residual = data.z - data.log_scales @ data.prior if len(data.variables) else data.z
    if prior_sd <= 0.0 or count == 0:
        intercept = float(weights @ residual) / total
        return LawFit(
            intercept, data.prior.copy(), (), np.array([[1.0 / total]]), scatter_var, prior_sd
        )
    logs = data.log_scales[:, moving]
    # the held exponents' drift is taken out; the moving ones' prior part is put back below
    z = residual + logs @ data.prior[moving]
    mean_logs = (weights @ logs) / total
    design = np.column_stack([np.ones(len(z)), logs - mean_logs])
    precision = np.zeros((count + 1, count + 1))
    precision[1:, 1:] = _direction_precision(design[weights > 0.0, 1:], prior_sd)
    gram = design.T @ (design * weights[:, None]) + precision
    rhs = design.T @ (weights * z) + precision @ np.concatenate([[0.0], data.prior[moving]])
    covariance_c = np.linalg.pinv(gram)
    beta_c = covariance_c @ rhs
    transform = np.eye(count + 1)
    transform[0, 1:] = -mean_logs
    beta = transform @ beta_c
    covariance = transform @ covariance_c @ transform.T
    exponents = data.prior.copy()
    exponents[moving] = beta[1:]
    fitted = tuple(int(k) for k in moving)
    return LawFit(float(beta[0]), exponents, fitted, covariance, scatter_var, prior_sd)


def _direction_precision(centred: FloatArray, prior_sd: float) -> FloatArray:
    """The exponents' prior precision: ``1/s²`` along the directions the informative rungs span,
    ``1/min(s, 0.5)²`` across them (docs/science.md §7.4).

    No rung measures a direction outside the span (two variables moved together), so there the
    posterior is the prior: a free law's ``s = 10`` would claim an interval 20× the published
    exponents' range, while :data:`UNSEEN_PRIOR_SD` is what is known there.
    """
    count = centred.shape[1]
    basis, singular, _ = np.linalg.svd(centred.T, full_matrices=False)
    basis = basis[:, singular > SPAN_TOLERANCE * max(1.0, float(singular.max(initial=0.0)))]
    inside = basis @ basis.T
    across = min(prior_sd, UNSEEN_PRIOR_SD)
    return np.asarray(inside / prior_sd**2 + (np.eye(count) - inside) / across**2, dtype=np.float64)


def restricted_loglik(data: LawData, prior_sd: float, scatter_var: float) -> float:
    """Restricted (REML) log-likelihood of ``(s, τ²)`` with the exponents integrated out.

    ``r = z − ℓe₀ ~ N(1a, C)``, ``C = diag(v + τ²) + s²ℓℓᵀ``, flat prior on ``a``:
    ``−½[log|C| + log(1ᵀC⁻¹1) + rᵀ(C⁻¹ − C⁻¹11ᵀC⁻¹/1ᵀC⁻¹1)r]``.
    """
    return float(restricted_logliks(data, np.array([prior_sd]), np.array([scatter_var]))[0])


def restricted_logliks(
    data: LawData, prior_sds: FloatArray, scatter_vars: FloatArray
) -> FloatArray:
    """:func:`restricted_loglik` at each pair ``(prior_sds[g], scatter_vars[g])``, batched."""
    finite = np.isfinite(data.variance)
    out = np.full(len(prior_sds), -math.inf)
    if finite.sum() < 2:
        return out
    logs = data.log_scales[finite]
    # centred for conditioning: a shift of ℓ moves only the flat intercept (REML is invariant)
    logs = logs - logs.mean(axis=0) if len(data.variables) else logs
    residual = data.z[finite] - (logs @ data.prior if len(data.variables) else 0.0)
    count = len(residual)
    outer = logs @ logs.T if len(data.variables) else np.zeros((count, count))
    cov = (data.variance[finite][None, :] + scatter_vars[:, None])[:, :, None] * np.eye(count) + (
        prior_sds**2
    )[:, None, None] * outer
    sign, logdet = np.linalg.slogdet(cov)
    ok = sign > 0
    if not ok.any():
        return out
    rhs = np.column_stack([np.ones(count), residual])
    solved = np.linalg.solve(cov[ok], np.broadcast_to(rhs, (int(ok.sum()), count, 2)))
    inv_one, inv_r = solved[:, :, 0], solved[:, :, 1]
    total = inv_one.sum(axis=1)
    quad = inv_r @ residual - (inv_r.sum(axis=1)) ** 2 / total
    out[ok] = -0.5 * (logdet[ok] + np.log(total) + quad)
    return out


def empirical_bayes(data: LawData, prior_sds: tuple[float, ...]) -> tuple[float, float]:
    """(s, τ²) maximising :func:`restricted_loglik` over ``prior_sds`` × :data:`SCATTER_GRID`.

    The scatter τ² is estimable only from residual degrees of freedom: with no more rungs than
    ``1 + rank(ℓ)`` (intercept and identifiable exponents), any pattern of optima is fitted
    exactly by some law, so τ² and the exponents' prior width cannot be told apart; τ² is then 0
    and a law through the optima is judged by ``s`` alone. Ties go to the earlier grid point
    (the smaller ``s``, then the smaller ``τ``).
    """
    finite = data.variance[np.isfinite(data.variance) & (data.variance > 0)]
    unit = float(np.median(finite)) if len(finite) else 1.0
    usable = np.isfinite(data.variance)
    logs = data.log_scales[usable]
    rank = int(np.linalg.matrix_rank(logs - logs.mean(axis=0))) if logs.size else 0
    scatter_grid = SCATTER_GRID if int(usable.sum()) - 1 - rank > 0 else (0.0,)
    grid = [(s, (f**2) * unit) for s in prior_sds for f in scatter_grid]
    logliks = restricted_logliks(
        data, np.array([g[0] for g in grid]), np.array([g[1] for g in grid])
    )
    best = 0
    for g in range(1, len(grid)):
        if logliks[g] > logliks[best] + 1e-9:
            best = g
    if not math.isfinite(float(logliks[best])):
        return prior_sds[0], 0.0
    return grid[best]


def reml_fit(data: LawData, prior_sds: tuple[float, ...]) -> LawFit:
    """:func:`gls` at the empirical-Bayes ``(s, τ²)`` from ``prior_sds``.

    With censored rows the marginal likelihood has no closed form; it is evaluated on the data
    EM completes (imputed values, Louis' effective variances), starting from the ordinary rows
    alone, for :data:`EB_ROUNDS` rounds (docs/science.md §7.3).
    """
    censored = data.censored()
    if not censored.any():
        prior_sd, scatter_var = empirical_bayes(data, prior_sds)
        return gls(data, prior_sd, scatter_var)
    ordinary = replace(data, variance=np.where(censored, np.inf, data.variance))
    prior_sd, scatter_var = empirical_bayes(ordinary, prior_sds)
    for _ in range(EB_ROUNDS):
        _, z, effective = censored_gls(data, prior_sd, scatter_var)
        completed = replace(data, z=z, variance=effective, lower=None, upper=None)
        prior_sd, scatter_var = empirical_bayes(completed, prior_sds)
    return gls(data, prior_sd, scatter_var)


def to_power_law(
    data: LawData, fit: LawFit, model: str, all_variables: tuple[str, ...]
) -> PowerLaw:
    """The :class:`PowerLaw` of a :class:`LawFit`, with the fixed exponents put back."""
    exponents = {name: 0.0 for name in all_variables}
    exponents.update(
        {name: float(e) for name, e in zip(data.variables, fit.exponents, strict=True)}
    )
    exponents.update({name: float(e) for name, e in data.fixed.items()})
    fitted = [data.variables[k] for k in fit.fitted]
    weights = _weights(data.variance, fit.scatter_var)
    predicted = (
        fit.intercept + data.log_scales @ fit.exponents
        if len(data.variables)
        else np.full(len(data.z), fit.intercept)
    )
    residual = data.z - predicted
    chi2 = float(weights @ residual**2)
    dof = len(data.z) - 1 - len(fitted)
    mean = float(weights @ data.z) / float(weights.sum()) if weights.sum() > 0 else math.nan
    spread = float(weights @ (data.z - mean) ** 2)
    return PowerLaw(
        param=data.param,
        log_space=data.log_space,
        intercept=fit.intercept,
        exponents=exponents,
        fixed=tuple(data.fixed),
        shrunk=tuple(v for v in data.variables if v not in fitted),
        names=("intercept", *fitted),
        covariance=fit.covariance,
        r_squared=1.0 - chi2 / spread if spread > 0 and fitted else math.nan,
        chi2_per_dof=chi2 / dof if dof > 0 else math.nan,
        n_scales=len(data.z),
        model=model,
        scatter=math.sqrt(fit.scatter_var),
        prior_sd=fit.prior_sd,
    )

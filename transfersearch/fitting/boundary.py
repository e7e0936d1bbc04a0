"""The stability boundary: where trials start to diverge, how that moves with scale, and where it
lies at the target (docs/science.md §8).

At each rung, the diverged trials of a parameter that diverges on one side (a learning rate on its
upper side) locate the rung's boundary ``b_s`` up to the grid's spacing: an interval-censored
observation ``b_s ∈ (highest finite, lowest diverged)``, right-censored where no trial diverged,
left-censored where every trial did. The law ``b_s = a + eᵀlog s + ε_s``, ``ε_s ~ N(0, σ²)``, is
fitted to them by maximum a posteriori (interval regression, a Tobit model), with the exponents'
prior ``N(e₀, 0.5²)`` and a log-normal prior on ``σ``; its uncertainty is Laplace's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr, ndtr

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import FloatArray, observation_arrays, to_fitted
from transfersearch.fitting.laws import UNSEEN_PRIOR_SD
from transfersearch.observations import Observation
from transfersearch.scale import Scale

__all__ = [
    "BOUNDARY_AUC",
    "SCATTER_PRIOR_LOG_SD",
    "SCATTER_PRIOR_MEDIAN",
    "BoundaryRung",
    "CensoredBound",
    "StabilityBoundary",
    "boundary_rungs",
    "censored_bound",
    "fit_boundaries",
    "fit_boundary_law",
]

logger = logging.getLogger(__name__)

Side = Literal["upper", "lower"]

#: A parameter diverges on its upper side when, within rungs, a diverged trial lies above a finite
#: one in at least this share of (diverged, finite) pairs (ties count half; the lower side
#: mirrors it). A parameter unrelated to divergence scores about 0.5 (a one-at-a-time sweep around
#: a best point scores exactly 0.5 on every axis but the one that diverged); a learning-rate cliff
#: scores 1. At 0.8 a single crashed trial among five ordered pairs does not hide a cliff, and a
#: random ordering of 1 diverged vs 5 finite trials reaches it with probability 1/3 only.
BOUNDARY_AUC = 0.8
#: Median of the log-normal prior on the boundary's scatter ``σ`` about its law, in log units of a
#: log parameter (a factor 1.28). On the factor-2 grids sweeps use (a step of 0.69) a scatter far
#: below a quarter step cannot be seen, and one above a step is no law; the prior keeps ``σ`` off
#: zero when a line threads every rung's interval (the likelihood is then flat in ``σ → 0``). For a
#: linear parameter it is this fraction of the parameter's pooled standard deviation.
SCATTER_PRIOR_MEDIAN = 0.25
#: Standard deviation of ``log σ`` under that prior: ±2 sd span σ of 0.06–1.0 log units.
SCATTER_PRIOR_LOG_SD = 0.7
#: BFGS stops when the log posterior's gradient is below this: the MAP is then within ~1e-6 of its
#: posterior sd, far inside the sampler's own error.
MAP_GRADIENT_TOLERANCE = 1e-6
#: Relative step of the central differences that give the log posterior's Hessian (the gradient is
#: analytic, so the Hessian is accurate to about this squared).
_HESSIAN_STEP = 1e-5
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: The exponents' prior sd is averaged over these values, each weighted by its evidence (Bayesian
#: model averaging over a hyperprior uniform on them): the largest is ``UNSEEN_PRIOR_SD`` (every
#: published exponent has |e| ≤ 1), the smaller ones let rungs whose boundaries drift little say so.
EXPONENT_PRIOR_SDS = (0.125, 0.25, UNSEEN_PRIOR_SD)
#: Draws per round of the adaptive importance sampler of the law's posterior. Laplace's Gaussian is
#: the first proposal; where rungs that never diverged cut the posterior off on one side (a wall the
#: Gaussian at the MAP cannot see) the sampler refits the proposal to the weighted draws.
POSTERIOR_DRAWS = 2048
#: At most this many rounds; it stops once the effective sample size reaches a quarter of the draws.
POSTERIOR_ROUNDS = 4
#: Each refitted proposal's covariance is inflated by this factor (its sd by 1.5): a proposal wider
#: than the posterior keeps the importance weights bounded.
PROPOSAL_INFLATION = 2.25
#: The predictive at the target keeps this many equally weighted draws (systematic resampling of
#: the weighted ones): a quantile's Monte-Carlo error stays below 0.5% in probability.
PREDICTIVE_DRAWS = 2048
#: Seed of that sampler: the same trials give the same boundary.
POSTERIOR_SEED = 0
#: Bisection steps for a quantile of the predictive mixture (an 80-sd bracket halved 30 times:
#: ~1e-7 sd).
_BISECTIONS = 30


@dataclass(frozen=True, eq=False)
class BoundaryRung:
    """One rung's trials as the boundary sees them: every non-pruned trial, diverged ones too.

    Attributes:
        scale: the rung's scale.
        log_scale: (K,) log of its scale variables (the ladder's order).
        coords: (n, d) the trials' fitted coordinates.
        diverged: (n,) which trials diverged (NaN/inf value or state "failed").
    """

    scale: Scale
    log_scale: FloatArray
    coords: FloatArray
    diverged: NDArray[np.bool_]


@dataclass(frozen=True)
class CensoredBound:
    """One rung's boundary along one parameter, known to lie in ``(low, high)`` (fitted coordinates).

    For an upper boundary ``low`` is the highest stable value and ``high`` the lowest diverged
    one (``high = inf``: no trial diverged, a right-censored bound; ``low = −inf``: every trial
    diverged, a left-censored one); a lower boundary mirrors it.

    Attributes:
        scale: the rung.
        low: the boundary lies above this (fitted coordinates).
        high: and below this.
        overlap: stable and diverged trials overlap along this parameter (the boundary depends on
            the other coordinates): ``(low, high)`` is then the range of thresholds that misclassify
            the fewest trials.
        n_finite: stable trials at the rung.
        n_diverged: diverged trials at the rung.
    """

    scale: Scale
    low: float
    high: float
    overlap: bool
    n_finite: int
    n_diverged: int


@dataclass(frozen=True, eq=False)
class StabilityBoundary:
    """The fitted stability boundary of one parameter and its prediction at the target.

    In fitted coordinates ``x`` (``log p`` for a log parameter) the boundary at scale ``s`` is
    ``a + Σ_k e_k·log s_k``; a run at ``x`` diverges with probability ``Φ((x − b̂)/sd)`` on an
    upper boundary (``Φ((b̂ − x)/sd)`` on a lower one). docs/science.md §8.

    Attributes:
        param: the parameter.
        side: ``"upper"`` (diverges above, a learning rate) or ``"lower"``.
        log_space: the parameter is fitted in log space.
        bounds: each rung's censored observation (the ladder's order, then the scales where
            every trial diverged).
        variables: the scale variables of ``exponents``.
        intercept: ``a`` (fitted coordinates).
        exponents: ``e`` per scale variable (fixed ones included).
        covariance: posterior covariance of ``(a, free exponents)`` (the weighted draws), in the
            order of ``free``.
        free: the exponents the fit estimated (the others were fixed by the caller).
        scatter: MAP of the rungs' scatter ``σ`` about the law (fitted coordinates).
        at_target: ``b̂``, the posterior predictive mean of the boundary at the target (fitted
            coordinates).
        sd: its predictive standard deviation (the law's uncertainty and the scatter).
        draw_means, draw_sds, draw_weights: the predictive distribution at the target as a
            weighted mixture ``Σ_i w_i·N(m_i, σ_i²)`` over posterior draws of ``(a, e, σ)``
            (importance sampling, :func:`posterior_draws`); :meth:`p_diverge`, :meth:`limit`
            and :meth:`interval` use it.
    """

    param: str
    side: Side
    log_space: bool
    bounds: tuple[CensoredBound, ...]
    variables: tuple[str, ...]
    intercept: float
    exponents: dict[str, float]
    covariance: FloatArray
    free: tuple[str, ...]
    scatter: float
    at_target: float
    sd: float
    draw_means: FloatArray = field(repr=False)
    draw_sds: FloatArray = field(repr=False)
    draw_weights: FloatArray = field(repr=False)

    @property
    def sign(self) -> float:
        """+1 for an upper boundary, −1 for a lower one."""
        return 1.0 if self.side == "upper" else -1.0

    def p_diverge(self, coord: float) -> float:
        """Probability that a run at ``coord`` (fitted coordinates) diverges at the target:
        ``Σ_i w_i·Φ((coord − m_i)/σ_i)`` on an upper boundary."""
        return float(
            self.draw_weights @ ndtr(self.sign * (coord - self.draw_means) / self.draw_sds)
        )

    def _below(self, level: float) -> tuple[float, float]:
        """A bracket ``(x₀, x₁)`` a hair wide with predictive ``P(b < x₀) < level ≤ P(b < x₁)``
        (bisection on the mixture)."""
        low, high = self.at_target - 40.0 * self.sd, self.at_target + 40.0 * self.sd
        for _ in range(_BISECTIONS):
            middle = 0.5 * (low + high)
            below = float(self.draw_weights @ ndtr((middle - self.draw_means) / self.draw_sds))
            low, high = (middle, high) if below < level else (low, middle)
        return low, high

    def limit(self, p_max: float) -> float:
        """The furthest coordinate (fitted) toward the boundary whose :meth:`p_diverge` is
        ``p_max``: the ``p_max`` quantile of the predictive boundary (upper side), from the safe
        side."""
        return self._below(p_max)[0] if self.side == "upper" else self._below(1.0 - p_max)[1]

    def natural(self, coord: float) -> float:
        """A fitted coordinate in the parameter's natural units."""
        return _exp(coord) if self.log_space else coord

    def fitted(self, value: float) -> float:
        """A natural value in fitted coordinates (``log`` for a log parameter)."""
        return to_fitted(value, self.log_space)

    @property
    def value(self) -> float:
        """The boundary predicted at the target, natural units."""
        return self.natural(self.at_target)

    def to_dict(self, level: float = 0.9) -> dict[str, Any]:
        """JSON-ready: side, the boundary at the target and its interval (natural units), the
        law's exponents and scatter, and each rung's censored bound (natural units)."""
        return {
            "side": self.side,
            "at_target": self.value,
            "interval": list(self.interval(level)),
            "level": level,
            "exponents": dict(self.exponents),
            "scatter": self.scatter,
            "rungs": [
                {
                    "scale": b.scale.to_dict(),
                    "low": self.natural(b.low) if math.isfinite(b.low) else None,
                    "high": self.natural(b.high) if math.isfinite(b.high) else None,
                    "overlap": b.overlap,
                }
                for b in self.bounds
            ],
        }

    def interval(self, level: float = 0.9) -> tuple[float, float]:
        """Central interval of the boundary at the target, natural units.

        Raises:
            TransferSearchError: ``level`` is not in (0, 1).
        """
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
            raise TransferSearchError(
                f"`level` must be in (0, 1), e.g. 0.9, but got level={level!r}."
            )
        tail = 0.5 - level / 2.0
        return self.natural(sum(self._below(tail)) / 2), self.natural(
            sum(self._below(1.0 - tail)) / 2
        )


def _exp(value: float) -> float:
    """``exp`` that gives ``inf`` near the float range (a boundary that far says "unknown")."""
    return math.exp(value) if value < 709.0 else math.inf


def boundary_rungs(
    scales: Sequence[Scale],
    coords: Sequence[FloatArray],
    values: Sequence[FloatArray],
    observations: Sequence[Observation],
    names: Sequence[str],
    logs: Sequence[str],
    variables: Sequence[str],
) -> list[BoundaryRung]:
    """Every scale's non-pruned trials (diverged included) in fitted coordinates.

    The ladder's rungs (``scales`` with their trials' ``coords`` and ``values``, NaN = diverged)
    in its order, then any scale of ``observations`` the ladder left out because every trial
    there diverged (those that lack one of ``variables`` cannot be placed and are skipped).
    """
    rungs = [
        BoundaryRung(
            scale,
            np.log(np.array([scale[v] for v in variables], dtype=np.float64)),
            np.asarray(c, dtype=np.float64),
            ~np.isfinite(v),
        )
        for scale, c, v in zip(scales, coords, values, strict=True)
    ]
    kept = [obs for obs in observations if obs.state != "pruned"]
    if len(kept) == sum(len(v) for v in values):  # every trial is on a ladder rung
        return rungs
    known = set(scales)
    groups: dict[Scale, list[Observation]] = {}
    for obs in kept:
        if obs.scale not in known:
            groups.setdefault(obs.scale, []).append(obs)
    for scale, group in groups.items():
        if not all(v in scale for v in variables):
            continue
        extra, extra_values = observation_arrays(group, names, logs, 1.0)
        rungs.append(
            BoundaryRung(
                scale,
                np.log(np.array([scale[v] for v in variables], dtype=np.float64)),
                extra,
                ~np.isfinite(extra_values),
            )
        )
    return rungs


def _side(rungs: Sequence[BoundaryRung], column: int) -> tuple[Side | None, float]:
    """Which side of ``column`` diverges, and the within-rung share of ordered pairs (AUC)."""
    above = pairs = 0.0
    for rung in rungs:
        x = rung.coords[:, column]
        count, total = _ordered_pairs(x[rung.diverged], x[~rung.diverged])
        above, pairs = above + count, pairs + total
    if pairs == 0:  # diverged trials only where every trial diverged: compare across rungs
        stacked = np.concatenate([r.coords[:, column] for r in rungs])
        bad = np.concatenate([r.diverged for r in rungs])
        above, pairs = _ordered_pairs(stacked[bad], stacked[~bad])
    if pairs == 0:
        return None, 0.5
    share = above / pairs
    if share >= BOUNDARY_AUC:
        return "upper", share
    if share <= 1.0 - BOUNDARY_AUC:
        return "lower", share
    return None, share


def _ordered_pairs(bad: FloatArray, stable: FloatArray) -> tuple[float, float]:
    """(pairs with the diverged value above the stable one, ties half; all pairs)."""
    ordered = np.sort(stable)
    below = np.searchsorted(ordered, bad, side="left")
    ties = np.searchsorted(ordered, bad, side="right") - below
    return float(below.sum()) + 0.5 * float(ties.sum()), float(len(bad) * len(stable))


def censored_bound(
    x: FloatArray, diverged: NDArray[np.bool_], side: Side, scale: Scale
) -> CensoredBound:
    """One rung's interval for its boundary along ``x`` (one parameter's fitted coordinates).

    Every threshold ``t`` (between two distinct tried values, or past either end) classifies the
    trials as stable below ``t`` and diverged above (mirrored for a lower boundary); the interval is
    the hull of the thresholds with the fewest misclassified trials. Stable below and diverged
    above, it is (highest stable, lowest diverged). A diverged trial among the stable ones (the
    boundary depends on the other coordinates: ``overlap``) lowers the interval's low end to the
    highest stable value below it, so the interval covers the overlap; a diverged trial below
    every stable one is taken for a crash and does not move it.
    """
    sign = 1.0 if side == "upper" else -1.0
    y = sign * np.asarray(x, dtype=np.float64)
    values = np.unique(y)
    stable, bad = np.sort(y[~diverged]), np.sort(y[diverged])
    # gap g lies between values[g-1] and values[g]: stable trials at or above values[g] and
    # diverged ones at or below values[g-1] are misclassified
    stable_above = len(stable) - np.searchsorted(stable, values, side="left")
    stable_above = np.append(stable_above, 0)
    bad_below = np.concatenate([[0], np.searchsorted(bad, values, side="right")])
    errors = stable_above + bad_below
    best = np.flatnonzero(errors == errors.min())
    low = values[best[0] - 1] if best[0] > 0 else -math.inf
    high = values[best[-1]] if best[-1] < len(values) else math.inf
    among = bad[(bad <= low) & (bad > stable[0])] if len(stable) else bad[:0]
    if len(among):  # the overlap: down to the highest stable value below its lowest divergence
        low = min(low, float(stable[stable < among[0]].max()))
    if sign < 0:
        low, high = -high, -low
    return CensoredBound(
        scale=scale,
        low=float(low),
        high=float(high),
        overlap=bool(len(stable) and np.any((bad > stable[0]) & (bad < stable[-1]))),
        n_finite=len(stable),
        n_diverged=len(bad),
    )


def _log_mass(alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """``log(Φ(β) − Φ(α))`` for ``α < β`` (either may be infinite), without cancellation."""
    out = np.empty_like(alpha)
    lower_open = np.isneginf(alpha)
    upper_open = np.isposinf(beta)
    both = ~lower_open & ~upper_open
    out[lower_open] = log_ndtr(beta[lower_open])
    out[upper_open & ~lower_open] = log_ndtr(-alpha[upper_open & ~lower_open])
    a, b = alpha[both], beta[both]
    right = a + b > 0.0  # both in the upper tail: Φ(−α) − Φ(−β)
    big = np.where(right, log_ndtr(-a), log_ndtr(b))
    small = np.where(right, log_ndtr(-b), log_ndtr(a))
    out[both] = big + np.log1p(-np.exp(small - big))
    return out


def _log_pdf(z: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(np.isfinite(z), -0.5 * z**2 - _LOG_SQRT_2PI, -np.inf)


@dataclass(frozen=True, eq=False)
class _Problem:
    """The censored regression in oriented coordinates (diverged above)."""

    low: FloatArray  # (S,)
    high: FloatArray
    design: FloatArray  # (S, p) free log-scales
    offset: FloatArray  # (S,) fixed exponents' part
    prior_mean: FloatArray  # (p,)
    prior_sd: float
    log_scatter_prior: float

    def objective(self, theta: FloatArray) -> tuple[float, FloatArray]:
        """Negative log posterior of ``θ = (a, e, log σ)`` and its gradient."""
        p = self.design.shape[1]
        a, e, omega = theta[0], theta[1 : 1 + p], theta[1 + p]
        sigma = math.exp(omega)
        mu = a + self.design @ e + self.offset
        alpha, beta = (self.low - mu) / sigma, (self.high - mu) / sigma
        log_mass = _log_mass(alpha, beta)
        dens_a, dens_b = np.exp(_log_pdf(alpha) - log_mass), np.exp(_log_pdf(beta) - log_mass)
        d_mu = (dens_a - dens_b) / sigma  # ∂ log mass / ∂μ
        with np.errstate(invalid="ignore"):  # an infinite end carries no density
            d_omega = np.where(np.isfinite(alpha), alpha * dens_a, 0.0) - np.where(
                np.isfinite(beta), beta * dens_b, 0.0
            )
        prior_e = (e - self.prior_mean) / self.prior_sd**2
        prior_omega = (omega - self.log_scatter_prior) / SCATTER_PRIOR_LOG_SD**2
        value = (
            -float(log_mass.sum())
            + 0.5 * float(((e - self.prior_mean) ** 2).sum()) / self.prior_sd**2
            + 0.5 * (omega - self.log_scatter_prior) ** 2 / SCATTER_PRIOR_LOG_SD**2
        )
        grad = np.concatenate(
            [[-d_mu.sum()], -(self.design.T @ d_mu) + prior_e, [-d_omega.sum() + prior_omega]]
        )
        return value, grad

    def log_posterior(self, thetas: FloatArray) -> FloatArray:
        """The log posterior (up to a constant) at each row of ``thetas`` (N, p + 2)."""
        p = self.design.shape[1]
        e, omega = thetas[:, 1 : 1 + p], thetas[:, 1 + p]
        mu = thetas[:, :1] + e @ self.design.T + self.offset  # (N, S)
        sigma = np.exp(omega)[:, None]
        alpha, beta = (self.low - mu) / sigma, (self.high - mu) / sigma
        mass = _log_mass(alpha.ravel(), beta.ravel()).reshape(mu.shape)
        return np.asarray(
            mass.sum(axis=1)
            - 0.5 * ((e - self.prior_mean) ** 2).sum(axis=1) / self.prior_sd**2
            - 0.5 * (omega - self.log_scatter_prior) ** 2 / SCATTER_PRIOR_LOG_SD**2,
            dtype=np.float64,
        )

    def start(self) -> FloatArray:
        sigma = math.exp(self.log_scatter_prior)
        point = np.where(
            np.isfinite(self.low) & np.isfinite(self.high),
            0.5 * (self.low + self.high),
            np.where(np.isfinite(self.low), self.low + sigma, self.high - sigma),
        )
        a = float(np.mean(point - self.design @ self.prior_mean - self.offset))
        return np.concatenate([[a], self.prior_mean, [self.log_scatter_prior]])

    def hessian(self, theta: FloatArray) -> FloatArray:
        """Central differences of the analytic gradient, symmetrised."""
        size = len(theta)
        out = np.empty((size, size))
        for i in range(size):
            step = _HESSIAN_STEP * max(1.0, abs(float(theta[i])))
            up, down = theta.copy(), theta.copy()
            up[i] += step
            down[i] -= step
            out[:, i] = (self.objective(up)[1] - self.objective(down)[1]) / (2.0 * step)
        return 0.5 * (out + out.T)


def fit_boundary_law(
    low: FloatArray,
    high: FloatArray,
    log_scales: FloatArray,
    *,
    prior_mean: FloatArray,
    prior_sd: float = UNSEEN_PRIOR_SD,
    scatter_median: float = SCATTER_PRIOR_MEDIAN,
    offset: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """MAP and Laplace covariance of the censored law ``b_s = a + eᵀℓ_s (+ offset_s) + ε_s``.

    The rungs' boundaries are known to lie in ``(low_s, high_s)`` (either end may be infinite);
    ``ε_s ~ N(0, σ²)``. The log posterior (docs/science.md §8) is

        Σ_s log[Φ((high_s − μ_s)/σ) − Φ((low_s − μ_s)/σ)] − |e − e₀|²/(2s²)
            − (log σ − log σ₀)²/(2·0.7²),   μ_s = a + eᵀℓ_s,

    with a flat prior on ``a``; it is maximised by BFGS with the analytic gradient, and its
    covariance is the inverse of the Hessian there (Laplace).

    Args:
        low, high: (S,) the censored observations (oriented: diverged above).
        log_scales: (S, p) log of the free scale variables.
        prior_mean: (p,) the exponents' prior centre ``e₀``.
        prior_sd: the exponents' prior sd ``s``.
        scatter_median: ``σ₀``, the scatter prior's median.
        offset: (S,) a known part of each ``μ_s`` (fixed exponents); default 0.

    Returns:
        ``θ = (a, e, log σ)`` at the MAP, and its (p + 2, p + 2) covariance.

    Raises:
        TransferSearchError: no rung bounds the boundary from below, or none from above (the
            posterior of ``a`` is then improper).
    """
    problem = _problem(low, high, log_scales, prior_mean, prior_sd, scatter_median, offset)
    return _map_and_laplace(problem)


def _problem(
    low: FloatArray,
    high: FloatArray,
    log_scales: FloatArray,
    prior_mean: FloatArray,
    prior_sd: float,
    scatter_median: float,
    offset: FloatArray | None,
) -> _Problem:
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    if not np.isfinite(low).any() or not np.isfinite(high).any():
        raise TransferSearchError(
            "the boundary law needs a rung bounded below (a stable trial) and one bounded above "
            f"(a diverged trial), but got low={low.tolist()}, high={high.tolist()}."
        )
    design = np.asarray(log_scales, dtype=np.float64).reshape(len(low), -1)
    return _Problem(
        low=low,
        high=high,
        design=design,
        offset=np.zeros(len(low)) if offset is None else np.asarray(offset, dtype=np.float64),
        prior_mean=np.asarray(prior_mean, dtype=np.float64).reshape(design.shape[1]),
        prior_sd=prior_sd,
        log_scatter_prior=math.log(scatter_median),
    )


def _map_and_laplace(
    problem: _Problem, start: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    from scipy.optimize import minimize  # ~1/4 of the package import time: only here

    found = minimize(
        problem.objective,
        problem.start() if start is None else start,
        jac=True,
        method="BFGS",
        options={"gtol": MAP_GRADIENT_TOLERANCE, "maxiter": 500},
    )
    theta = np.asarray(found.x, dtype=np.float64)
    if not found.success:
        logger.info("boundary law: BFGS stopped (%s); gradient %s", found.message, found.jac)
    hess = problem.hessian(theta)
    eigen = np.linalg.eigvalsh(hess)
    if eigen.min() <= 0.0:
        logger.info("boundary law: Hessian not positive definite (%s); pseudo-inverse", eigen)
        cov = np.linalg.pinv(hess, hermitian=True)
    else:
        cov = np.linalg.inv(hess)
    return theta, np.asarray(cov, dtype=np.float64)


def posterior_draws(
    problem: _Problem, theta: FloatArray, cov: FloatArray
) -> tuple[FloatArray, FloatArray, float]:
    """Weighted draws of the law's posterior by adaptive importance sampling.

    The first proposal is Laplace's ``N(θ̂, C)``; while the effective sample size ``1/Σw²`` stays
    below a quarter of the draws, the next proposal is the weighted draws' mean and covariance
    (inflated by :data:`PROPOSAL_INFLATION`), as in population Monte Carlo (Cappé et al. 2004).
    Rungs where nothing diverged bound the boundary from one side only; the posterior is then cut
    off by a wall that the Gaussian at the MAP cannot see, and this is where it matters.

    Returns:
        (N, p + 2) draws of ``θ = (a, e, log σ)``, their (N,) normalised weights, and the log
        of the posterior's normalising constant (the evidence, up to terms that do not depend on
        the exponents' prior sd): ``log mean(p̃/q)`` less ``p·log s``.
    """
    rng = np.random.default_rng(POSTERIOR_SEED)
    mean, proposal = theta, cov
    draws, weights, log_evidence = theta[None, :], np.ones(1), 0.0
    for _ in range(POSTERIOR_ROUNDS):
        try:
            factor = np.linalg.cholesky(proposal)
        except np.linalg.LinAlgError:
            factor = np.linalg.cholesky(proposal + 1e-9 * np.eye(len(theta)))
        normal = rng.standard_normal((POSTERIOR_DRAWS, len(theta)))
        draws = mean + normal @ factor.T
        log_q = -0.5 * (normal**2).sum(axis=1) - float(np.log(np.diag(factor)).sum())
        log_w = problem.log_posterior(draws) - log_q
        log_w = np.where(np.isfinite(log_w), log_w, -np.inf)
        top = float(log_w.max())
        weights = np.exp(log_w - top)
        log_evidence = (
            top
            + math.log(float(weights.mean()))
            - problem.design.shape[1] * math.log(problem.prior_sd)
        )
        weights /= weights.sum()
        if 1.0 / float(weights @ weights) >= POSTERIOR_DRAWS / 4:
            break
        mean = weights @ draws
        centred = draws - mean
        proposal = PROPOSAL_INFLATION * (centred.T * weights) @ centred + 1e-9 * np.eye(len(theta))
    return draws, weights, log_evidence


def fit_boundaries(
    rungs: Sequence[BoundaryRung],
    names: Sequence[str],
    logs: Sequence[str],
    variables: Sequence[str],
    target_logs: FloatArray,
    *,
    prior: Mapping[str, Mapping[str, float]],
    fixed: Mapping[str, Mapping[str, float]],
) -> dict[str, StabilityBoundary]:
    """The stability boundary of each parameter that diverges on one side, predicted at the target.

    A parameter gets a boundary when trials diverged and, within rungs, the diverged ones lie on
    one side of the stable ones (:data:`BOUNDARY_AUC`); with no diverged trial there is none. The
    clearest parameter goes first; the diverged trials its boundary explains (past each rung's
    interval) are then set aside and the others judged on the rest, so a second cause of
    divergence (a τ too short besides a learning rate too high) is not diluted by the first.

    Args:
        rungs: every scale's trials (:func:`boundary_rungs`).
        names: the parameters, in the trials' column order.
        logs: those fitted in log space.
        variables: the scale variables, in the order of each rung's ``log_scale``.
        target_logs: (K,) log of the target's scale variables.
        prior: prior exponents per parameter (0 where not given): the boundary's drift, like the
            optimum's, is earned from the data.
        fixed: fixed exponents per parameter, held by the boundary too.
    """
    out: dict[str, StabilityBoundary] = {}
    remaining = [r for r in rungs if len(r.diverged)]
    todo = list(range(len(names)))
    while todo and any(r.diverged.any() for r in remaining):
        sides = {column: _side(remaining, column) for column in todo}
        found = [c for c in todo if sides[c][0] is not None]
        if not found:
            break
        column = max(found, key=lambda c: abs(sides[c][1] - 0.5))  # the clearest first
        todo.remove(column)
        name, side = names[column], sides[column][0]
        if side is None:  # not reached: ``found`` holds only sided columns
            continue
        bounds = tuple(
            censored_bound(r.coords[:, column], r.diverged, side, r.scale) for r in remaining
        )
        if not _bounded(bounds, side):
            logger.info(
                "%s: diverged trials lie %s the stable ones, yet no rung bounds the boundary on "
                "both sides (stable trials above every divergence there): no boundary fitted",
                name,
                "above" if side == "upper" else "below",
            )
            continue
        rungs_used = remaining
        remaining = _explain_away(remaining, bounds, column, side)
        out[name] = _fit_one(
            name,
            side,
            name in logs,
            bounds,
            rungs_used,
            column,
            variables,
            target_logs,
            prior.get(name, {}),
            fixed.get(name, {}),
        )
        logger.info(
            "%s: %s stability boundary at the target %.4g (sd %.3g in fitted units) from %d rungs",
            name,
            side,
            out[name].value,
            out[name].sd,
            len(rungs),
        )
    return out


def _explain_away(
    rungs: Sequence[BoundaryRung], bounds: Sequence[CensoredBound], column: int, side: Side
) -> list[BoundaryRung]:
    """The rungs without the diverged trials this boundary explains (those at or past each rung's
    interval on the diverged side), so that another parameter's boundary is judged on the rest."""
    out = []
    for rung, bound in zip(rungs, bounds, strict=True):
        x = rung.coords[:, column]
        past = x >= bound.high if side == "upper" else x <= bound.low
        keep = ~(rung.diverged & past)
        if keep.any():
            out.append(
                BoundaryRung(rung.scale, rung.log_scale, rung.coords[keep], rung.diverged[keep])
            )
    return out


def _bounded(bounds: Sequence[CensoredBound], side: Side) -> bool:
    """Some rung bounds the boundary from the safe side and some from the diverged side."""
    lows = [b.low if side == "upper" else -b.high for b in bounds]
    highs = [b.high if side == "upper" else -b.low for b in bounds]
    return any(math.isfinite(v) for v in lows) and any(math.isfinite(v) for v in highs)


def _fit_one(
    name: str,
    side: Side,
    log_space: bool,
    bounds: tuple[CensoredBound, ...],
    rungs: Sequence[BoundaryRung],
    column: int,
    variables: Sequence[str],
    target_logs: FloatArray,
    prior: Mapping[str, float],
    fixed: Mapping[str, float],
) -> StabilityBoundary:
    """One parameter's boundary law (docs/science.md §8): the posterior averaged over the prior
    sds (:func:`_averaged_posterior`), its predictive mixture at the target resampled to
    :data:`PREDICTIVE_DRAWS` equal draws (:func:`_equal_weights`)."""
    sign = 1.0 if side == "upper" else -1.0
    free = [k for k, v in enumerate(variables) if v not in fixed]
    fixed_e = np.array([fixed.get(v, 0.0) for v in variables])
    theta, draws, weights = _averaged_posterior(
        bounds, rungs, column, sign, log_space, variables, free, prior, fixed_e
    )
    p = len(free)
    gradient = np.concatenate([[1.0], target_logs[free]])
    means = sign * (draws[:, : p + 1] @ gradient) + float(target_logs @ fixed_e)
    sds = np.exp(draws[:, p + 1])
    mean = float(weights @ means)
    spread = float(weights @ (sds**2 + (means - mean) ** 2))
    centred = draws[:, : p + 1] - weights @ draws[:, : p + 1]
    cov = (centred.T * weights) @ centred
    means, sds, weights = _equal_weights(means, sds, weights)
    exponents = {v: float(fixed_e[k]) for k, v in enumerate(variables)}
    for position, k in enumerate(free):
        exponents[variables[k]] = sign * float(theta[1 + position])
    return StabilityBoundary(
        param=name,
        side=side,
        log_space=log_space,
        bounds=bounds,
        variables=tuple(variables),
        intercept=sign * float(theta[0]),
        exponents=exponents,
        covariance=np.asarray(cov, dtype=np.float64),
        free=tuple(variables[k] for k in free),
        scatter=math.exp(float(theta[p + 1])),
        at_target=mean,
        sd=math.sqrt(spread),
        draw_means=np.asarray(means, dtype=np.float64),
        draw_sds=np.asarray(sds, dtype=np.float64),
        draw_weights=np.asarray(weights, dtype=np.float64),
    )


def _averaged_posterior(
    bounds: tuple[CensoredBound, ...],
    rungs: Sequence[BoundaryRung],
    column: int,
    sign: float,
    log_space: bool,
    variables: Sequence[str],
    free: list[int],
    prior: Mapping[str, float],
    fixed_e: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The boundary law's posterior, pooled over :data:`EXPONENT_PRIOR_SDS` by evidence
    (Bayesian model averaging, docs/science.md §8), in the upper side's sign.

    Returns:
        The MAP of the prior sd with the most evidence, every draw ``(a, free e, log σ)`` and
        its weight (summing to 1 over all).
    """
    logs = np.array([r.log_scale for r in rungs])
    low = np.array([b.low if sign > 0 else -b.high for b in bounds])
    high = np.array([b.high if sign > 0 else -b.low for b in bounds])
    if log_space:
        scatter = SCATTER_PRIOR_MEDIAN
    else:
        pooled = np.concatenate([r.coords[:, column] for r in rungs])
        scatter = SCATTER_PRIOR_MEDIAN * max(float(np.std(pooled)), 1e-12)
    fits: list[tuple[FloatArray, FloatArray, FloatArray, float]] = []
    for prior_sd in EXPONENT_PRIOR_SDS:
        problem = _problem(
            low,
            high,
            logs[:, free],
            sign * np.array([prior.get(variables[k], 0.0) for k in free]),
            prior_sd,
            scatter,
            sign * (logs @ fixed_e),
        )
        theta, laplace = _map_and_laplace(problem, fits[-1][0] if fits else None)
        fits.append((theta, *posterior_draws(problem, theta, laplace)))
    evidence = np.array([f[3] for f in fits])
    share = np.exp(evidence - evidence.max())
    share /= share.sum()
    draws = np.vstack([f[1] for f in fits])
    weights = np.concatenate([w * f[2] for w, f in zip(share, fits, strict=True)])
    return fits[int(np.argmax(share))][0], draws, weights


def _equal_weights(
    means: FloatArray, sds: FloatArray, weights: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The weighted mixture resampled systematically to :data:`PREDICTIVE_DRAWS` equal weights:
    its quantiles are bisected many times, over fewer components."""
    picks = np.searchsorted(
        np.cumsum(weights), (np.arange(PREDICTIVE_DRAWS) + 0.5) / PREDICTIVE_DRAWS
    )
    picks = np.minimum(picks, len(weights) - 1)
    return means[picks], sds[picks], np.full(PREDICTIVE_DRAWS, 1.0 / PREDICTIVE_DRAWS)

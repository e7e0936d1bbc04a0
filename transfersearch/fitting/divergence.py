"""Divergence in the same model: ``P(diverge | x, ℓ) = logistic(β₀ + βᵀ(x − μ(ℓ)) + γᵀz(ℓ))``.

A trial's divergence is evidence about its whole configuration relative to its rung's optimum
``μ(ℓ)`` (the valley's, :mod:`.valley`): the boundary moves with the optimum — and relative to it
along the ladder's span ``z(ℓ)`` by ``γ`` (nested at 0), where the rungs show it — and one
diverged variation of one parameter is weighed against every stable trial near it, at every rung
(docs/science.md §8). Fitted by maximum a posteriori with a Gaussian prior, uncertainty by the
Laplace approximation. The boundary is nested with its absence: a constant rate (``β = 0``,
divergences that do not depend on the configuration, a flaky run) is the other model, and the
draws mix the two by their Laplace evidence, so a few NaNs scattered at random do not make a
wall that the decision steps away from. A crashed trial (an exception) is not a divergence and
never reaches here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from transfersearch.fitting.coords import FloatArray, gaussian_draws

__all__ = ["BOUNDARY_SHARPNESS", "DivergenceModel", "fit_divergence"]

#: Prior sd of each slope ``β_j`` in units of one over the trials' median spacing along ``j``:
#: the odds of diverging can change at most about e² (from 12% to 88%) across one spacing
#: a priori — the data cannot resolve a boundary sharper than the grid that measured it, and a
#: sharper one would make a single diverged variation a wall.
BOUNDARY_SHARPNESS = 2.0
#: Prior sd of the intercept ``β₀`` (log-odds of diverging at the optimum): wide.
INTERCEPT_SD = 5.0
#: Newton steps of the MAP (the log-posterior is concave; a handful converge).
NEWTON_STEPS = 50


@dataclass(frozen=True, eq=False)
class DivergenceModel:
    """The divergence posterior (Laplace), in fitted coordinates.

    Attributes:
        mean: (d + 1,) MAP of ``(β₀, β)`` with ``β`` per fitted unit (the boundary tied to the
            optimum).
        cov: (d + 1, d + 1) its covariance.
        n_diverged: diverged trials it was fitted to.
        rate: (mean, variance) of ``β₀`` in the constant-rate model (``β = 0``).
        boundary_weight: the boundary models' posterior probability against the constant rate
            (equal prior odds; Laplace evidence).
        drift: (mean, cov) of ``(β₀ + γᵀz_t, β)``, the boundary free to drift relative to the
            optimum along the ladder, read at the target held inside the rungs' range; None
            where the ladder has no span.
        drift_weight: its posterior probability against the tied boundary (equal prior odds;
            Laplace evidence): the boundary drifts only as far as the rungs show it does.
    """

    mean: FloatArray
    cov: FloatArray
    n_diverged: int
    rate: tuple[float, float]
    boundary_weight: float
    drift: tuple[FloatArray, FloatArray] | None = None
    drift_weight: float = 0.0

    def draws(self, n: int, rng: np.random.Generator) -> FloatArray:
        """``n`` draws of ``(β₀, β)`` from the mixture: each model in proportion to its weight,
        in random order (the target's draws they are paired with come grouped by the valley's
        hyperprior grid point, so two blocks would tie one model to some grid points)."""
        k = int(rng.binomial(n, self.boundary_weight))
        flat = np.zeros((n - k, len(self.mean)))
        flat[:, 0] = self.rate[0] + math.sqrt(self.rate[1]) * rng.standard_normal(n - k)
        if self.drift is None:
            boundary = gaussian_draws(self.mean, self.cov, k, rng)
        else:
            m = int(rng.binomial(k, self.drift_weight))
            boundary = np.vstack([
                gaussian_draws(*self.drift, m, rng),
                gaussian_draws(self.mean, self.cov, k - m, rng),
            ])  # fmt: skip
        return rng.permutation(np.vstack([boundary, flat]))

    @staticmethod
    def probability(coefs: FloatArray, offsets: FloatArray) -> FloatArray:
        """``logistic(β₀ + βᵀδ)`` per draw: coefs (S, d+1), offsets (S, d) or (..., S, d)."""
        return np.asarray(expit(coefs[:, 0] + np.einsum("sd,...sd->...s", coefs[:, 1:], offsets)))


def _spacing(coords: FloatArray) -> FloatArray:
    """The median gap between distinct trial values per coordinate (1 where one value)."""
    out = np.ones(coords.shape[1])
    for j in range(coords.shape[1]):
        values = np.unique(np.round(coords[:, j], 12))
        if len(values) > 1:
            out[j] = float(np.median(np.diff(values)))
    return out


def fit_divergence(
    offsets: FloatArray,
    diverged: np.ndarray,
    coords: FloatArray,
    span: tuple[FloatArray, FloatArray] | None = None,
) -> DivergenceModel | None:
    """The divergence model from every non-crashed trial.

    Args:
        offsets: (n, d) each trial's coordinates minus its rung's optimum (fitted units).
        diverged: (n,) True for a diverged trial.
        coords: (n, d) the trials' coordinates (for the spacing the prior is scaled by).
        span: (z, z_t): each trial's rung's log scale on the ladder's span, centred, (n, k),
            and the target's (k,). The boundary may then drift relative to the optimum along
            the span, ``+ γᵀz`` (prior sd BOUNDARY_SHARPNESS over the rungs' range of z: a priori
            it moves, relative to the optimum, by about one trial spacing across the ladder;
            γ = 0 is the boundary that moves with the optimum), weighed against the tied
            boundary by their evidence; the drifting model is returned at the target, γᵀz_t
            folded into β₀, with ``z_t`` held inside the rungs' range (past the ladder the
            drift is the nearest rung's: a linear drift describes the rungs, and carried past
            them its uncertainty alone moved decisions, docs/science.md §8).

    Returns:
        The model, or None when no trial diverged (then no run is predicted to diverge).
    """
    if not diverged.any():
        return None
    n, d = offsets.shape
    design = np.hstack([np.ones((n, 1)), offsets])
    prior_sd = np.concatenate([[INTERCEPT_SD], BOUNDARY_SHARPNESS / _spacing(coords)])
    target = diverged.astype(float)
    coef, cov, log_ev = _laplace(design, target, prior_sd)
    rate, rate_var, rate_ev = _laplace(design[:, :1], target, prior_sd[:1])
    drift, drift_ev = None, -math.inf
    if span is not None and span[0].shape[1] and np.ptp(span[0], axis=0).max() > 0:
        z, z_t = span[0], np.clip(span[1], span[0].min(axis=0), span[0].max(axis=0))
        reach = np.ptp(z, axis=0)
        reach = np.where(reach > 0, reach, 1.0)
        free, free_cov, drift_ev = _laplace(
            np.hstack([design, z]), target, np.concatenate([prior_sd, BOUNDARY_SHARPNESS / reach])
        )
        at = np.zeros((d + 1, len(free)))  # (β₀ + γᵀz_t, β): the boundary at the target
        at[0, 0], at[0, d + 1 :], at[1:, 1 : d + 1] = 1.0, z_t, np.eye(d)
        drift = (at @ free, at @ free_cov @ at.T)
    # equal prior odds: boundary or constant rate; within the boundary, tied or drifting
    boundary_ev = float(np.logaddexp(log_ev, drift_ev) - math.log(2.0)) if drift else log_ev
    return DivergenceModel(
        coef,
        cov,
        int(diverged.sum()),
        (float(rate[0]), float(rate_var[0, 0])),
        float(expit(boundary_ev - rate_ev)),
        drift,
        float(expit(drift_ev - log_ev)) if drift else 0.0,
    )


def _laplace(
    design: FloatArray, target: FloatArray, prior_sd: FloatArray
) -> tuple[FloatArray, FloatArray, float]:
    """The logistic regression's MAP under ``N(0, diag(prior_sd²))`` by Newton's method, its
    Laplace covariance and log evidence ``log p(y|β̂) + log p(β̂) + (k/2)log 2π − ½log|H|``
    (``H`` the log posterior's negative Hessian at the MAP)."""
    prior_prec = np.diag(1.0 / prior_sd**2)
    coef = np.zeros(design.shape[1])
    hess = prior_prec
    for _ in range(NEWTON_STEPS):
        p = expit(design @ coef)
        grad = design.T @ (target - p) - prior_prec @ coef
        hess = design.T @ (design * (p * (1 - p))[:, None]) + prior_prec
        step = np.linalg.solve(hess, grad)
        coef = coef + step
        if float(np.abs(step).max()) < 1e-8:
            break
    logit = design @ coef
    loglik = float((target * logit - np.logaddexp(0.0, logit)).sum())
    # the Gaussian prior's and the Laplace integral's (2π)^(k/2) cancel
    log_prior = float((-0.5 * (coef / prior_sd) ** 2 - np.log(prior_sd)).sum())
    _, logdet = np.linalg.slogdet(hess)
    log_ev = loglik + log_prior - 0.5 * float(logdet)
    cov = np.linalg.inv(hess)
    return coef, 0.5 * (cov + cov.T), float(log_ev)

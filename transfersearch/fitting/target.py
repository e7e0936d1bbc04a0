"""One decision: the posterior expected loss at the target (docs/science.md §9).

For draws ``s`` of the target's optimum ``μ_s``, curvature ``H_s`` and divergence coefficients
``β_s`` from the one model, a run at ``x`` is charged

    L_s(x) = (1 − p_s(x)) · V_s(x − μ_s) + p_s(x) · C,
    V_s(t) = ½ tᵀ H_s t + Σ_j κ_sj c(t_j),
    p_s(x) = logistic(β₀ + βᵀ(x − μ_s)),

with ``C`` the cost of a diverged run and ``V_s`` the valley's shape (its curvature and skews,
``c`` the skew's cubic, :func:`~transfersearch.fitting.valley.cubic`). The single decision minimises ``mean_s L_s(x)``; ``k``
runs minimise ``mean_s E[min_i L_s(x_i)]`` (the runs diverge independently given the draw):
``k = 1`` is the decision. Fitted coordinates throughout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
from scipy.optimize import minimize

from transfersearch.fitting.coords import FloatArray, natural_params
from transfersearch.fitting.divergence import DivergenceModel
from transfersearch.fitting.valley import cubic, cubic_slope, turns

__all__ = ["START_POOL", "TargetLoss"]

#: Posterior draws of the optimum scored as starting points of the single decision (the best
#: one is polished beside the law's point).
START_POOL = 64
#: The starting points are scored on this many of the draws (evenly spaced): a start, not the
#: decision (the polish from it runs on every draw), so a quarter of the default 2,000 draws
#: serves, at a quarter of the cost (the score was most of the decision's time).
START_SCORE_DRAWS = 500
#: The weight of each run's own expected loss beside the portfolio's expected best, in the polish
#: of k runs (:meth:`TargetLoss.best_runs`): a tie-break. A run that lowers the expected best by
#: nothing (the posterior is narrow and the others already cover it) can sit anywhere without
#: changing it — the polish left one at P(diverge) 0.97; a thousandth of its own expected loss puts
#: it where it is good on its own, and moves no run that the expected best places.
OWN_LOSS_WEIGHT = 1e-3


@dataclass(frozen=True, eq=False)
class TargetLoss:
    """What the decision knows about the target's loss, as posterior draws (fitted units).

    Attributes:
        names: the parameters.
        log_params: those fitted in log space.
        optima: (S, d) draws of the target's optimum.
        curvatures: (S, d, d) draws of the valley's curvature.
        skews: (S, d) draws of the valley's skews (fitted units), or None (symmetric).
        divergence: (S, d + 1) draws of the divergence coefficients, or None (no trial
            diverged).
        divergence_cost: ``C``, the loss charged to a diverged run (metric units).
        lower, upper: (d,) where a run may be placed: the trials' range, widened by the law's
            drift from the costliest rung to the target, and 0 for a non-negative linear
            parameter (the valley is known where the trials are).
        decision: (d,) the single decision (``res.params``' active coordinates).
        full_names, full_logs: every parameter and the log ones.
        fixed_values: (d_all,) the value of each parameter no trial varied (NaN where active).
        active: the columns of ``full_names`` the draws cover.
    """

    names: tuple[str, ...]
    log_params: tuple[str, ...]
    optima: FloatArray
    curvatures: FloatArray
    skews: FloatArray | None
    divergence: FloatArray | None
    divergence_cost: float
    lower: FloatArray
    upper: FloatArray
    decision: FloatArray
    full_names: tuple[str, ...]
    full_logs: tuple[str, ...]
    fixed_values: FloatArray
    active: tuple[int, ...]

    def full_params(self, coords: FloatArray) -> dict[str, float]:
        """A run over the active parameters as every parameter's natural value."""
        point = self.fixed_values.copy()
        point[list(self.active)] = coords
        return natural_params(self.full_names, point, self.full_logs)

    def per_draw_loss(self, points: FloatArray) -> FloatArray:
        """(P, S) ``L_s(x)`` for points (P, d)."""
        gap = points[..., None, :] - self.optima
        excess = np.minimum(self._excess_at(gap), self.divergence_cost)
        p = self._p_at(gap)
        return np.asarray((1 - p) * excess + p * self.divergence_cost)

    def natural(self, coords: FloatArray) -> dict[str, float]:
        return natural_params(self.names, coords, self.log_params)

    def _excess(self, points: FloatArray) -> FloatArray:
        """(..., S) ``V_s(x − μ_s)`` for points (..., d)."""
        return self._excess_at(points[..., None, :] - self.optima)

    def _excess_at(self, gap: FloatArray) -> FloatArray:
        """(..., S) ``V_s(t)`` for gaps ``t = x − μ_s`` (..., S, d): the quadratic summed over
        the curvature's entries (``d`` is a handful; one pass per entry over the draws is faster
        than a three-operand einsum over them), the skews' cubic added."""
        hess, d = self.curvatures, gap.shape[-1]
        cols = [np.ascontiguousarray(gap[..., i]) for i in range(d)]
        quad = np.zeros(gap.shape[:-1])
        for i in range(d):  # Σ_i t_i (½H_ii t_i + Σ_{j>i} H_ij t_j)
            row = (0.5 * hess[:, i, i]) * cols[i]
            for j in range(i + 1, d):
                row += hess[:, i, j] * cols[j]
            row *= cols[i]
            quad += row
        if self.skews is None:
            return quad
        return np.asarray(quad + np.einsum("...sd,sd->...s", cubic(gap, self._turns), self.skews))

    @cached_property
    def _turns(self) -> FloatArray:
        """(S, d) where each draw's skew turns to its tangent (computed once per draw)."""
        return turns(self.curvatures, self.skews) if self.skews is not None else self.optima

    def _p(self, points: FloatArray) -> FloatArray:
        """(..., S) the probability of diverging per draw."""
        return self._p_at(points[..., None, :] - self.optima)

    def _p_at(self, gap: FloatArray) -> FloatArray:
        """(..., S) the probability of diverging per draw at gaps (..., S, d)."""
        if self.divergence is None:
            return np.zeros(gap.shape[:-1])
        return DivergenceModel.probability(self.divergence, gap)

    def expected_regret(self, coords: FloatArray) -> float:
        """``E[L(x) − L(x*)]`` if the run does not diverge (metric units)."""
        return float(self._excess(np.asarray(coords)).mean())

    def p_diverge(self, coords: FloatArray) -> float:
        """The posterior probability that a run at ``coords`` diverges."""
        return float(self._p(np.asarray(coords)).mean())

    def expected_loss(self, coords: FloatArray) -> float:
        """The decision's objective: ``mean_s L_s(x)``."""
        excess = np.minimum(self._excess(coords), self.divergence_cost)
        p = self._p(coords)
        return float(((1 - p) * excess + p * self.divergence_cost).mean())

    def loss_and_gradient(self, coords: FloatArray) -> tuple[float, FloatArray]:
        """:meth:`expected_loss` at one point (d,) and its gradient: :meth:`best_and_gradient`
        of that one run (with ``V_c = min(V_s, C)``:
        ``∇L_s = (1 − p_s)∇V_c + (C − V_c)∇p_s``)."""
        value, grad = self.best_and_gradient(np.asarray(coords)[None, :])
        return value, grad[0]

    def expected_best(self, runs: FloatArray) -> float:
        """``mean_s E[min_i L_s(x_i)]`` for runs (k, d), diverging independently per draw."""
        return self.best_and_gradient(runs, gradient=False)[0]

    def best_and_gradient(
        self, runs: FloatArray, gradient: bool = True
    ) -> tuple[float, FloatArray]:
        """:meth:`expected_best` of runs (k, d) and its gradient (k, d), by hand.

        Per draw the runs are taken in order of their capped excess ``V_i = min(V_s(x_i), C)``;
        run ``i`` is the one that counts when every run before it diverged (``S_i = Π_{j<i}
        p_j``) and it did not, so ``E = Σ_i S_i(1 − p_i)V_i + S_k·C``. With ``R_i`` the
        expected loss of runs ``i, i+1, …`` (``R_k = C``, ``R_i = (1 − p_i)V_i + p_i R_{i+1}``):
        ``∂E/∂V_i = S_i(1 − p_i)`` and ``∂E/∂p_i = S_i(R_{i+1} − V_i)``; with
        ``g = x_i − μ_s``, ``∇V_s = H_s g + κ_s ⊙ c′(g)`` (``c′`` is half the square of the gap
        held at the skew's turn: the cubic's ``t²/2``, then its tangent's constant slope), 0
        where ``V_s > C``, and ``∇p_s = p_s(1 − p_s)β_s``. (The order changes only where two
        runs' excesses tie, and ``E`` is continuous there.)"""
        runs = np.asarray(runs)
        cost = self.divergence_cost
        gap = runs[:, None, :] - self.optima  # (k, S, d)
        raw = self._excess_at(gap)  # (k, S)
        excess, p = np.minimum(raw, cost), self._p_at(gap)
        order = np.argsort(excess, axis=0)
        v, q = np.take_along_axis(excess, order, axis=0), np.take_along_axis(p, order, axis=0)
        survive = np.cumprod(np.vstack([np.ones((1, v.shape[1])), q]), axis=0)  # (k + 1, S)
        tail = np.full((len(runs) + 1, v.shape[1]), cost)
        for i in reversed(range(len(runs))):
            tail[i] = (1 - q[i]) * v[i] + q[i] * tail[i + 1]
        if not gradient:
            return float(tail[0].mean()), np.zeros_like(runs)
        by_v, by_p = np.empty_like(v), np.empty_like(v)
        np.put_along_axis(by_v, order, survive[:-1] * (1 - q), axis=0)
        np.put_along_axis(by_p, order, survive[:-1] * (tail[1:] - v), axis=0)
        grad_v = np.einsum("sij,ksj->ksi", self.curvatures, gap)
        if self.skews is not None:
            grad_v = grad_v + self.skews * cubic_slope(gap, self._turns)
        grad_v[raw >= cost] = 0.0
        grad = by_v[..., None] * grad_v
        if self.divergence is not None:
            grad = grad + (by_p * p * (1 - p))[..., None] * self.divergence[:, 1:]
        return float(tail[0].mean()), np.asarray(grad.mean(axis=1))

    def _thinned(self, n: int) -> TargetLoss:
        """The same loss on about ``n`` of its draws, evenly spaced (itself if it has fewer)."""
        step = max(1, len(self.optima) // n)
        if step == 1:
            return self
        return replace(
            self,
            optima=self.optima[::step],
            curvatures=self.curvatures[::step],
            skews=None if self.skews is None else self.skews[::step],
            divergence=None if self.divergence is None else self.divergence[::step],
        )

    def clip(self, coords: FloatArray) -> FloatArray:
        return np.clip(coords, self.lower, self.upper)

    def _objective(self, k: int, d: int, unit: float) -> Callable[[FloatArray], Any]:
        """What :meth:`best_runs` minimises, in ``unit``s: the k runs' :meth:`expected_best`
        plus :data:`OWN_LOSS_WEIGHT` × the mean of each run's own expected loss, with the
        gradient (:meth:`best_and_gradient`), flattened."""

        def objective(flat: FloatArray) -> tuple[float, FloatArray]:
            value, grad = self._polish_value(flat.reshape(k, d))
            return value / unit, grad.ravel() / unit

        return objective

    def _polish_value(self, runs: FloatArray) -> tuple[float, FloatArray]:
        """:meth:`_objective`'s value and gradient (k, d) in the metric's units."""
        value, grad = self.best_and_gradient(runs)
        k = len(runs)
        for i in range(k):
            # one run's own loss is the first term again: the same numbers, reused
            if k == 1:
                own, own_grad = value, grad.copy()
            else:
                own, own_grad = self.best_and_gradient(runs[i : i + 1])
            value += OWN_LOSS_WEIGHT * own / k
            grad[i] += OWN_LOSS_WEIGHT * own_grad[0] / k
        return value, grad

    def best_runs(self, start: FloatArray) -> FloatArray:
        """Runs (k, d) minimising :meth:`expected_best`, polished from ``start`` (k, d).

        The objective can have several minima (a divergence risk on one side of the optimum
        makes a second valley below it), so a single run is also polished from the best of
        :data:`START_POOL` posterior draws of the optimum (scored on :data:`START_SCORE_DRAWS` of
        the draws), and the better end point kept."""
        k, d = start.shape
        starts = [np.vstack([self.clip(row) for row in start])]
        if k == 1:
            step = max(1, len(self.optima) // START_POOL)
            pool = self.clip(self.optima[::step])
            scores = self._thinned(START_SCORE_DRAWS).per_draw_loss(pool).mean(axis=1)
            starts.append(pool[int(np.argmin(scores))][None, :])
        best, best_value = starts[0], self._polish_value(starts[0])[0]
        bounds = [(float(lo), float(hi)) for lo, hi in zip(self.lower, self.upper)] * k
        unit = self.divergence_cost if self.divergence_cost > 0 else 1.0  # the metric's units
        for x0 in starts:
            result = minimize(
                self._objective(k, d, unit),
                x0.ravel(),
                method="L-BFGS-B",
                jac=True,
                bounds=bounds,
            )
            if result.fun * unit < best_value:
                best, best_value = np.asarray(result.x).reshape(k, d), float(result.fun) * unit
        return np.asarray(best)

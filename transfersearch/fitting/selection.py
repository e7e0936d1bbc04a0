"""Walk-forward validation: every model predicts each rung from strictly cheaper rungs only.

docs/science.md §7, §7.6: sort the rungs by cost (:func:`transfersearch.cost.by_cost`, the order the planner,
``validate()`` and the report use); for each rung with at
least :data:`MIN_TRAIN` cheaper ones, refit everything (the pooled valley included) on the cheaper
rungs, predict the rung, and charge the *regret* of the prediction on the rung's own fitted
surface (``½δᵀHδ`` + the wall term, in the metric's units). Folds are weighted by how far they
extrapolate (distance to the nearest training rung, in decades). Leave-one-out over scales would
reward interpolation; this sees extrapolation failures.

The choice: the best no-drift model is the baseline; a drifting model replaces it only when its
weighted mean regret is lower by more than one standard error of the paired per-fold difference
(the one-standard-error rule, Hastie, Tibshirani & Friedman, *Elements of Statistical Learning*
§7.10). A fold whose rung moves where its cheaper rungs never varied (:data:`UNSEEN_FRACTION`) is
skipped: it cannot test a drift. The standard error is the larger of the folds' spread and the noise the held-out rungs'
own uncertain optima put into each fold's regret (:meth:`Fold.difference_variance`), so a single
fold can still decide when its evidence is clear. Without any usable fold: the ``"shrunk"``
model — the prior's exponents updated only as far as the marginal likelihood supports, which is
no drift on data that show none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from transfersearch.fitting.coords import FloatArray
from transfersearch.fitting.models import LawModel
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.predict import decades, predict
from transfersearch.fitting.rungs import Ladder, read_optima
from transfersearch.scale import Scale

__all__ = ["Fold", "WalkForward", "walk_forward", "weighted_mean_se"]

#: Rungs a fold trains on at least: one rung fixes a level, a second is the least a drift needs.
MIN_TRAIN = 2
#: A fold whose held-out rung lies more than this fraction of its step away from every direction
#: the training rungs vary in (the step's component outside their span, relative to its length)
#: cannot test a drift there: the cheaper rungs never moved that way. Half: the step is then mostly
#: into directions the training rungs cannot speak to.
UNSEEN_FRACTION = 0.5
#: Folds needed before their spread counts as a standard error (below it, only the held-out rungs'
#: own uncertainty does: a spread over one or two numbers is no estimate).
MIN_FOLDS_FOR_SPREAD = 3


@dataclass(frozen=True)
class Fold:
    """One walk-forward step.

    Attributes:
        scale: the rung predicted.
        n_train: how many cheaper rungs it was predicted from.
        decades: its distance to the nearest of them (log10 units; the fold's weight).
        regret: each model's regret there, in the metric's units.
    """

    scale: Scale
    n_train: int
    decades: float
    regret: dict[str, float]
    points: dict[str, FloatArray] = field(repr=False, default_factory=dict)
    surface: ScaleOptimum | None = field(repr=False, default=None)

    def difference_variance(self, first: str, second: str) -> float:
        """Variance of ``regret[first] − regret[second]`` from the uncertainty of this rung's own
        optimum ``c ~ N(ĉ, Σ)``: the difference's gradient in ``c`` is ``H(p₂ − p₁)``, so its
        variance is ``(p₂ − p₁)ᵀHΣH(p₂ − p₁)`` (delta method; ``H`` with half the wall added)."""
        if self.surface is None or self.surface.hessian is None:
            return 0.0
        hess = self.surface.hessian
        if self.surface.wall is not None:
            hess = hess + 0.5 * np.diag(self.surface.wall)
        gap = self.points[second] - self.points[first]
        swept = np.isfinite(np.diag(hess)) & np.isfinite(np.diag(self.surface.covariance))
        sub = hess[np.ix_(swept, swept)]
        cov = self.surface.covariance[np.ix_(swept, swept)]
        slope = sub @ gap[swept]
        return float(slope @ cov @ slope)


@dataclass(frozen=True)
class WalkForward:
    """The walk-forward table and the decision it led to.

    Attributes:
        folds: the steps, cheapest predicted rung first.
        scores: each model's weighted mean regret (NaN without folds).
        chosen: the model kept.
        baseline: the best no-drift model.
        reason: why ``chosen`` was kept, in words.
    """

    folds: tuple[Fold, ...]
    scores: dict[str, float]
    chosen: str
    baseline: str
    reason: str


def _costs(ladder: Ladder) -> FloatArray:
    """Log cost per rung (the ladder's one cost order, :func:`transfersearch.cost.by_cost`)."""
    return np.asarray(ladder.log_costs, dtype=np.float64)


def _fold(
    ladder: Ladder, k: int, train: list[int], models: Sequence[LawModel], surface: ScaleOptimum
) -> Fold | None:
    optima, _ = read_optima(ladder, train)
    regret: dict[str, float] = {}
    points: dict[str, FloatArray] = {}
    for model in models:
        point = predict(ladder, model, optima, train, ladder.log_scales[k]).mean
        value = surface.regret_coords(point)
        if value is None:
            return None
        regret[model.name] = value
        points[model.name] = point
    distance = decades(ladder, ladder.log_scales[k], train)
    return Fold(ladder.scales[k], len(train), distance, regret, points, surface)


def walk_forward(
    ladder: Ladder, surfaces: Sequence[ScaleOptimum], models: Sequence[LawModel]
) -> WalkForward:
    """Score ``models`` walk-forward and choose one.

    Args:
        ladder: the prepared ladder.
        surfaces: each rung's fitted surface (its optimum with curvature), from all rungs.
        models: the candidates; the first no-drift model among them is the fallback baseline.
    """
    costs = _costs(ladder)
    folds: list[Fold] = []
    for k in range(len(ladder.scales)):
        train = [i for i in range(len(ladder.scales)) if costs[i] < costs[k] - 1e-9]
        if len(train) < MIN_TRAIN or _unseen(ladder, k, train) > UNSEEN_FRACTION:
            continue
        if surfaces[k].bounds:  # only bounded there: no located optimum to charge regret at
            continue
        fold = _fold(ladder, k, train, models, surfaces[k])
        if fold is not None:
            folds.append(fold)
    return _choose(ladder, tuple(folds), models, surfaces)


def _unseen(ladder: Ladder, k: int, train: list[int]) -> float:
    """The fraction of rung ``k``'s step from the training rungs' mean outside their span."""
    logs = ladder.log_scales[train]
    centred = logs - logs.mean(axis=0)
    step = ladder.log_scales[k] - logs.mean(axis=0)
    length = float(np.linalg.norm(step))
    if length == 0.0:
        return 0.0
    basis, singular, _ = np.linalg.svd(centred.T, full_matrices=False)
    basis = basis[:, singular > 1e-9 * max(float(singular.max(initial=0.0)), 1.0)]
    outside = step - basis @ (basis.T @ step)
    return float(np.linalg.norm(outside)) / length


def _weighted(folds: Sequence[Fold], name: str) -> float:
    weights = np.array([f.decades for f in folds])
    values = np.array([f.regret[name] for f in folds])
    return float(weights @ values / weights.sum())


def _marginal_drift(
    ladder: Ladder, surfaces: Sequence[ScaleOptimum], models: Sequence[LawModel]
) -> bool:
    """Whether the ``shrunk`` model, fitted on every rung, moves any exponent off its prior:
    the marginal likelihood of the optima (empirical Bayes) prefers a prior sd above 0."""
    shrunk = [m for m in models if m.name == "shrunk"]
    if not shrunk:
        return False
    subset = list(range(len(ladder.scales)))
    laws = predict(ladder, shrunk[0], surfaces, subset, ladder.log_scales[-1]).laws
    return any(law.prior_sd > 0.0 and len(law.names) > 1 for law in laws.values())


def weighted_mean_se(weights: FloatArray, values: FloatArray) -> float:
    """Standard error of the weighted mean ``m = Σwᵢxᵢ/Σwᵢ`` with the unbiased variance:
    ``√(n/(n − 1) · Σwᵢ²(xᵢ − m)²) / Σwᵢ``; equal weights give the textbook ``s/√n`` with
    ``ddof = 1`` (docs/science.md §7.6). One value has no spread: 0."""
    count = len(values)
    if count < 2:
        return 0.0
    mean = float(weights @ values / weights.sum())
    spread = count / (count - 1) * float((weights**2) @ (values - mean) ** 2)
    return float(np.sqrt(spread) / weights.sum())


def _choose(
    ladder: Ladder,
    folds: tuple[Fold, ...],
    models: Sequence[LawModel],
    surfaces: Sequence[ScaleOptimum],
) -> WalkForward:
    names = [m.name for m in models]
    null = [m.name for m in models if not m.drift]
    has_prior = any(any(e != 0.0 for e in row.values()) for row in ladder.prior.values())
    if not folds or sum(f.decades for f in folds) <= 0.0:
        chosen = "shrunk" if "shrunk" in names else "prior" if has_prior else null[0]
        reason = (
            f"too few rungs to validate walk-forward (a rung needs {MIN_TRAIN} cheaper ones that "
            f"vary the way it moves): {chosen!r}, the prior updated only as far as the marginal "
            "likelihood supports (empirical Bayes)"
        )
        return WalkForward(folds, {n: math.nan for n in names}, chosen, chosen, reason)
    scores = {name: _weighted(folds, name) for name in names}
    baseline = min(null, key=lambda n: scores[n])
    drifting = [n for n in names if n not in null]
    if not drifting:
        reason = f"no drifting model to try: the no-drift baseline {baseline!r}"
        return WalkForward(folds, scores, baseline, baseline, reason)
    best = min(drifting, key=lambda n: scores[n])
    weights = np.array([f.decades for f in folds])
    diff = np.array([f.regret[baseline] - f.regret[best] for f in folds])
    mean = float(weights @ diff / weights.sum())
    spread = weighted_mean_se(weights, diff)
    noise = np.array([f.difference_variance(baseline, best) for f in folds])
    own = float(np.sqrt((weights**2) @ noise) / weights.sum())
    # the between-fold spread is no estimate with one or two folds; the held-out rungs' own
    # uncertainty is a floor either way
    se = max(spread, own) if len(folds) >= MIN_FOLDS_FOR_SPREAD else own
    if mean > se:
        reason = (
            f"{best!r} beat the no-drift baseline {baseline!r} walk-forward by {mean:.3g} "
            f"(one standard error {se:.3g}) over {len(folds)} folds"
        )
        return WalkForward(folds, scores, best, baseline, reason)
    if mean < -se:
        reason = (
            f"no drifting model beat the no-drift baseline {baseline!r} walk-forward (the best, "
            f"{best!r}, lost by {-mean:.3g}, more than one standard error {se:.3g})"
        )
        return WalkForward(folds, scores, baseline, baseline, reason)
    if _marginal_drift(ladder, surfaces, models):
        # walk-forward cannot tell (the difference is within its noise, as with two folds on
        # noisy rungs); the marginal likelihood of every rung's optimum can: it moved the
        # exponents off the prior (docs/science.md §7.6)
        reason = (
            f"walk-forward cannot tell {best!r} from {baseline!r} (difference {mean:.3g}, one "
            f"standard error {se:.3g}, {len(folds)} fold(s)); the marginal likelihood of every "
            "rung's optimum supports drift: 'shrunk'"
        )
        return WalkForward(folds, scores, "shrunk", baseline, reason)
    reason = (
        f"{best!r} scored {'lower' if mean > 0 else 'higher'} than {baseline!r} by "
        f"{abs(mean):.3g}, within one standard error ({se:.3g}) over {len(folds)} fold(s), and "
        "the marginal likelihood of every rung's optimum supports no drift: not enough to earn "
        "drift"
    )
    return WalkForward(folds, scores, baseline, baseline, reason)

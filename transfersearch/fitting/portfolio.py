"""A portfolio of target runs: the k configurations with the least expected best loss among them
(docs/science.md §9).

Over the one model's posterior draws ``s`` (the target's optimum, curvature and divergence law),
a run at ``x`` loses ``L_s(x)`` (:class:`~transfersearch.fitting.target.TargetLoss`); the k runs
minimise ``mean_s E[min_i L_s(x_i)]``, the runs diverging independently given the draw. ``k = 1``
is the single decision: the same objective.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING, Any

import numpy as np

from transfersearch.errors import Allowed, Interval, check_table
from transfersearch.fitting.target import TargetLoss
from transfersearch.scale import Scale

if TYPE_CHECKING:
    from transfersearch.space import Hyperparameters, TransferSpace

__all__ = [
    "CANDIDATE_POOL",
    "DEFAULT_SEED",
    "Candidate",
    "Portfolio",
    "choose_candidates",
]

logger = logging.getLogger(__name__)

#: Seed of those draws: the same call gives the same runs.
DEFAULT_SEED = 0
#: Posterior draws of the optimum offered to the greedy step as candidate runs.
CANDIDATE_POOL = 256


@dataclass(frozen=True)
class Candidate:
    """One target run of a portfolio.

    Attributes:
        params: the run's parameters, natural units.
        expected_regret: its expected excess over the target's optimum if it does not diverge
            (metric units; the valley's shape and the prediction's uncertainty).
        p_diverge: the probability that it diverges (the stability boundaries).
        hyperparameters: its concrete hyperparameters at the target, when a space is known.
    """

    params: dict[str, float]
    expected_regret: float
    p_diverge: float
    hyperparameters: Hyperparameters | None = None


@dataclass(frozen=True)
class Portfolio:
    """k target runs and the expected best excess among them.

    Attributes:
        candidates: the runs, least expected regret first (``k = 1``: the decision, ``res.params``).
        expected_best_regret: ``E[min_i L(x_i)]`` over the draws (a run that diverges counts the
            sweep's worst excess), metric units.
        seed: the seed of the draws.
    """

    candidates: tuple[Candidate, ...]
    expected_best_regret: float
    seed: int

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self.candidates)

    def __len__(self) -> int:
        return len(self.candidates)

    def __getitem__(self, index: int) -> Candidate:
        return self.candidates[index]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the runs (params, expected regret, P(diverge), hyperparameters or None),
        the expected best regret and the seed."""
        return {
            "k": len(self.candidates),
            "expected_best_regret": self.expected_best_regret,
            "seed": self.seed,
            "runs": [
                {
                    "params": dict(c.params),
                    "expected_regret": c.expected_regret,
                    "p_diverge": c.p_diverge,
                    "hyperparameters": (
                        None if c.hyperparameters is None else c.hyperparameters.to_dict()
                    ),
                }
                for c in self.candidates
            ],
        }


#: What the arguments of :func:`choose_candidates` may be.
ARGUMENTS: Mapping[str, Allowed] = {
    "k": Allowed(Interval(Integral, 1), fix="E.g. k=2 target runs."),
    "seed": Allowed(Interval(Integral, 0), fix="E.g. seed=0."),
}


def choose_candidates(
    loss: TargetLoss,
    target: Scale,
    k: int,
    *,
    seed: int = DEFAULT_SEED,
    space: TransferSpace | None = None,
) -> Portfolio:
    """The ``k`` target runs minimising ``E[min_i L(x_i)]`` (module docstring).

    ``k = 1`` is the decision itself. For ``k ≥ 2``: start from the decision, add the candidate
    (the decision and posterior draws of the optimum, inside the allowed region) that lowers the
    objective most until there are ``k`` (greedy: the reduction of ``E[min]`` is a monotone
    submodular set function, so greedy reaches ``1 − 1/e`` of the best reduction); then polish
    the ``k`` runs jointly on the exact objective.

    Args:
        loss: the target's loss model (``res.target_loss``).
        target: the target scale (to concretise the runs).
        k: how many runs, ≥ 1.
        seed: seed of the candidate subsample (deterministic for a given seed).
        space: concretise each run with this space (None: no hyperparameters).

    Raises:
        TransferSearchError: ``k`` is not a positive integer or ``seed`` not a non-negative one
            (:data:`ARGUMENTS`).
    """
    k, seed = check_table(ARGUMENTS, {"k": k, "seed": seed}).values()
    if k == 1:
        members = loss.decision[None, :]
    else:
        rng = np.random.default_rng(seed)
        pick = rng.choice(
            len(loss.optima), size=min(CANDIDATE_POOL, len(loss.optima)), replace=False
        )
        pool = np.vstack([loss.decision[None, :], loss.clip(loss.optima[pick])])
        table = loss.per_draw_loss(pool)  # (P, S)
        chosen = [0]
        current = table[0].copy()
        while len(chosen) < k:
            score = np.minimum(table, current[None, :]).mean(axis=1)
            score[chosen] = np.inf
            best = int(np.argmin(score))
            chosen.append(best)
            current = np.minimum(current, table[best])
        members = loss.best_runs(pool[chosen])
    best_regret = loss.expected_best(members)
    order = np.argsort([loss.expected_regret(m) for m in members], kind="stable")
    runs = []
    for row in members[order]:
        params = loss.full_params(row)
        runs.append(
            Candidate(
                params=params,
                expected_regret=loss.expected_regret(row),
                p_diverge=loss.p_diverge(row),
                hyperparameters=None
                if space is None
                else space.concretize(space.on_grid(params), target),
            )
        )
    return Portfolio(tuple(runs), best_regret, seed)

"""A portfolio of target runs (docs/science.md §9): the k runs minimising E[min_i L(x_i)].

For a quadratic valley ``L = ½h(x − x*)²`` with ``x* ~ N(0, σ²)`` the best k runs are the optimal
k-level quantiser of the normal (Lloyd-Max): ``±σ·√(2/π)`` for two runs, ``0, ±1.2240σ`` for
three; the tests find them again by brute force.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import transfersearch as ts
from transfersearch.errors import TransferSearchError
from transfersearch.fitting.decision import MAX_P_DIVERGE, TargetLoss
from transfersearch.fitting.portfolio import choose_candidates
from transfersearch.observations import Observation
from transfersearch.scale import Scale

SIGMA = 0.4
CURVATURE = 2.0


def _valley(sd: float = SIGMA, upper: float = math.inf) -> TargetLoss:
    """1-D: the optimum ~ N(0, sd²), the valley ½·h·δ², no boundary; decisions up to ``upper``."""
    return TargetLoss(
        names=("lr",),
        log_params=(),
        target=Scale(width=1024),
        mean=np.zeros(1),
        sd=np.array([sd]),
        hessian=np.array([[CURVATURE]]),
        wall=np.zeros(1),
        decision=np.zeros(1),
        lower=np.array([-math.inf]),
        upper=np.array([upper]),
        boundaries=(),
        columns=(),
        worst_excess=1.0,
    )


def _expected_best(points: np.ndarray, sd: float) -> np.ndarray:
    """E[min_i ½h(x_i − x*)²] by quadrature over x* ~ N(0, sd²), for rows of ``points``."""
    nodes = np.linspace(-8 * sd, 8 * sd, 2001)
    weights = np.exp(-0.5 * (nodes / sd) ** 2)
    weights /= weights.sum()
    losses = 0.5 * CURVATURE * (points[:, :, None] - nodes[None, None, :]) ** 2
    return np.asarray(losses.min(axis=1) @ weights)


def test_two_runs_are_the_symmetric_pair_found_by_brute_force() -> None:
    grid = np.linspace(-1.5 * SIGMA, 1.5 * SIGMA, 121)
    pairs = np.array([(a, b) for a in grid for b in grid if a < b])
    scores = _expected_best(pairs, SIGMA)
    brute = pairs[int(np.argmin(scores))]
    assert brute == pytest.approx(
        [-SIGMA * math.sqrt(2 / math.pi), SIGMA * math.sqrt(2 / math.pi)], abs=0.01 * SIGMA + 1e-12
    )

    portfolio = choose_candidates(_valley(), 2)
    found = sorted(c.params["lr"] for c in portfolio)
    assert found == pytest.approx(sorted(brute), abs=0.01 * SIGMA)
    assert portfolio.expected_best_regret == pytest.approx(float(scores.min()), rel=0.02)
    # the closed form: ½hσ²(1 − 2/π), against ½hσ² for the single run at the mean
    assert portfolio.expected_best_regret == pytest.approx(
        0.5 * CURVATURE * SIGMA**2 * (1 - 2 / math.pi), rel=0.02
    )


def test_three_runs_are_the_lloyd_max_quantiser() -> None:
    found = sorted(c.params["lr"] for c in choose_candidates(_valley(), 3))
    assert found == pytest.approx([-1.2240 * SIGMA, 0.0, 1.2240 * SIGMA], abs=0.01 * SIGMA)


def test_one_run_is_the_decision_and_its_regret_is_the_spread() -> None:
    portfolio = choose_candidates(_valley(), 1)
    (only,) = portfolio
    assert only.params == {"lr": 0.0}
    assert only.expected_regret == pytest.approx(0.5 * CURVATURE * SIGMA**2)  # ½hσ², exactly
    assert only.p_diverge == 0.0


def test_runs_keep_the_decision_s_limits() -> None:
    limit = 0.1 * SIGMA
    portfolio = choose_candidates(_valley(upper=limit), 3)
    assert all(c.params["lr"] <= limit + 1e-12 for c in portfolio)


def test_the_portfolio_is_deterministic_for_a_seed() -> None:
    first = choose_candidates(_valley(), 2, seed=7)
    again = choose_candidates(_valley(), 2, seed=7)
    assert [c.params for c in first] == [c.params for c in again]
    assert first.expected_best_regret == again.expected_best_regret


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_k_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(TransferSearchError, match="positive integer"):
        choose_candidates(_valley(), bad)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# Through extrapolate(): a width ladder whose lr diverges past a cliff
# ----------------------------------------------------------------------------------------------
BASE = Scale(width=64, dataset_size=1e4, batch_size=32)


def _ladder(seed: int = 0) -> list[Observation]:
    rng = np.random.default_rng(seed)
    obs = []
    for width in (64, 128, 256):
        for size in (1e4, 4e4):
            lr_opt = 0.01 * (width / 64) ** -0.5
            for _ in range(24):
                lr = float(math.exp(rng.uniform(math.log(1e-4), math.log(0.3))))
                tau = float(math.exp(rng.uniform(math.log(0.05), math.log(20.0))))
                value = (
                    2.0
                    + 0.1 * math.log(lr / lr_opt) ** 2
                    + 0.05 * math.log(tau / 0.7) ** 2
                    + float(rng.normal(0, 0.002))
                )
                diverged = lr > 3.0 * lr_opt
                obs.append(
                    Observation(
                        {"width": width, "dataset_size": size},
                        {"lr": lr, "tau_epoch": tau},
                        math.nan if diverged else value,
                    )
                )
    return obs


@pytest.fixture(scope="module")
def result() -> ts.Extrapolation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ts.extrapolate(_ladder(), target=Scale(width=1024, dataset_size=1e5), n_bootstrap=20)


def test_candidates_of_an_extrapolation(result: ts.Extrapolation) -> None:
    assert "lr" in result.boundary
    (single,) = result.candidates(1)
    assert single.params == pytest.approx(result.params)
    assert single.p_diverge == pytest.approx(result.p_diverge)
    three = result.candidates(3)
    assert len(three) == 3
    assert result.candidates(3).candidates == three.candidates  # same default seed, same runs
    for run in three:
        assert run.p_diverge <= MAX_P_DIVERGE + 1e-9
        assert run.hyperparameters is None  # no space: nothing to concretise
    regrets = [run.expected_regret for run in three]
    assert regrets == sorted(regrets)
    best = [result.candidates(k).expected_best_regret for k in (1, 2, 3)]
    assert best[0] >= best[1] >= best[2]


def test_candidates_are_concretised_with_a_space(result: ts.Extrapolation) -> None:
    space = ts.TransferSpace(
        BASE, {"lr": ts.Float(1e-4, 0.3, log=True), "tau_epoch": ts.Float(0.05, 20.0, log=True)}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = result.candidates(2, space=space)
        for run in runs:
            assert run.hyperparameters is not None
            expected = space.concretize(run.params, result.target)
            assert run.hyperparameters.to_dict() == expected.to_dict()

"""default_cost: model size × data processed, and an order for a ladder with its own names."""

from __future__ import annotations

import math

import numpy as np
import pytest

import transfersearch as ts
from transfersearch.cost import by_cost, cost_function, default_cost


@pytest.mark.parametrize(
    ("scale", "cost"),
    [
        ({"width": 64, "dataset_size": 1e5}, 64 * 64 * 1e5),
        ({"width": 64, "dataset_size": 1e5, "epochs": 4, "batch_size": 256}, 64 * 64 * 4e5),
        ({"params": 1.2e8, "tokens": 2.4e9, "width": 768}, 1.2e8 * 2.4e9),  # params over width²
        ({"width": 128, "tokens": 1e9}, 128 * 128 * 1e9),
        ({"N": 2.15e8, "D": 4e9}, 2.15e8 * 4e9),  # a sweep's own names: their product
        ({"N": 2.15e8, "D": 4e9, "batch_size": 512}, 2.15e8 * 4e9),  # batch size is no cost
    ],
)
def test_default_cost_by_hand(scale: dict[str, float], cost: float) -> None:
    assert default_cost(ts.Scale(scale)) == pytest.approx(cost)


def test_a_ladder_with_its_own_names_gets_walk_forward_folds() -> None:
    """Step Law's N and D: with every rung at cost 1, walk-forward had no cheaper rung to train
    on and validated nothing; the names' product orders the rungs as their compute does."""
    rng = np.random.default_rng(0)
    obs = []
    for n, d in [(1e8, 2e9), (2e8, 4e9), (4e8, 8e9), (8e8, 1.6e10)]:
        best = math.log(3e-3) - 0.3 * math.log(n / 1e8)
        for _ in range(16):
            x = best + rng.uniform(-1.5, 1.5)
            value = 3.0 + 0.05 * (x - best) ** 2 + rng.normal(0, 1e-4)
            obs.append(ts.Observation({"N": n, "D": d}, {"lr": math.exp(x)}, value))
    scales = by_cost({o.scale for o in obs})
    assert [s["N"] for s in scales] == [1e8, 2e8, 4e8, 8e8]
    res = ts.extrapolate(obs, target={"N": 1.6e9, "D": 3.2e10})
    assert len(res.walk_forward) >= 1
    assert res.params["lr"] == pytest.approx(3e-3 * 16**-0.3, rel=0.1)


def test_the_cost_function_is_the_user_s_else_the_default() -> None:
    """:func:`cost_function` is the one place the default is taken: the planner, the schedule,
    the law cache and the fit's rung order all read the ladder's cost through it."""

    def flops(scale: ts.Scale) -> float:
        return 3.0 * scale["width"]

    assert cost_function(None) is default_cost
    assert cost_function(flops) is flops
    assert cost_function(flops)(ts.Scale(width=2.0)) == 6.0

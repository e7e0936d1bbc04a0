"""The engine at the edges of what a ladder saw (issue 18): one cost order, the wall's fixed point
run to convergence, two-rung collinearity, the one-SE rule's unbiased standard error, optima past
the box, rungs with few finite trials, censored law fits and honest intervals (docs/science.md §7)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.cost import by_cost, default_cost
from transfersearch.extrapolate import extrapolate, validate
from transfersearch.observations import Observation
from transfersearch.scale import Scale

LR_GRID = np.exp(np.linspace(math.log(1e-3), math.log(1e-1), 9))


def bowl_rung(scale: Scale, lr_opt: float, grid: np.ndarray = LR_GRID) -> list[Observation]:
    """A noise-free 1-D bowl in log lr, centred at ``lr_opt``, sampled on ``grid``."""
    return [
        Observation(scale, {"lr": float(lr)}, 1.0 + 0.5 * math.log(lr / lr_opt) ** 2) for lr in grid
    ]


# ------------------------------------------------------------------------------------------------
# One cost order (item 7)
# ------------------------------------------------------------------------------------------------
INVERTED = [Scale(width=64, dataset_size=1e6), Scale(width=128, dataset_size=3e5)]
INVERTED.append(Scale(width=256, dataset_size=1e5))


def test_by_cost_orders_by_default_cost_and_honours_a_given_cost() -> None:
    # width² × data: 4.1e9 < 4.9e9 < 6.6e9, although the sum of the logs falls along the list
    assert [default_cost(s) for s in by_cost(reversed(INVERTED))] == sorted(
        default_cost(s) for s in INVERTED
    )
    assert by_cost(INVERTED)[-1] == Scale(width=256, dataset_size=1e5)
    assert by_cost(INVERTED, lambda s: s["dataset_size"])[-1] == Scale(width=64, dataset_size=1e6)
    with pytest.raises(ts.TransferSearchError, match="positive finite"):
        by_cost(INVERTED, lambda s: 0.0)


def test_validate_holds_out_the_costliest_rung_by_the_one_cost_order() -> None:
    obs = [o for s in INVERTED for o in bowl_rung(s, 1e-2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        held = validate(obs, params=["lr"], n_bootstrap=0).held_out
        by_data = validate(
            obs, params=["lr"], n_bootstrap=0, cost=lambda s: s["dataset_size"]
        ).held_out
    assert held == Scale(width=256, dataset_size=1e5)  # not width 64, as the sum of logs said
    assert by_data == Scale(width=64, dataset_size=1e6)


def test_planner_extrapolation_and_report_share_the_order() -> None:
    ladder = [
        Scale(width=s["width"], dataset_size=s["dataset_size"], batch_size=32) for s in INVERTED
    ]
    planner = ts.TransferPlanner(synthetic.make_space(), list(reversed(ladder)))
    obs = [o for s in INVERTED for o in bowl_rung(s, 1e-2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=512, dataset_size=1e5), params=["lr"])
    assert list(planner.ladder) == by_cost(ladder)
    assert [o.scale for o in res.optima] == by_cost(INVERTED)


# ------------------------------------------------------------------------------------------------
# Smaller defects (item 8)
# ------------------------------------------------------------------------------------------------
def test_two_rung_ladder_moving_two_variables_together_is_collinear() -> None:
    scales = [Scale(width=64, dataset_size=1e5), Scale(width=128, dataset_size=2e5)]
    obs = [o for s in scales for o in bowl_rung(s, 1e-2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=512, dataset_size=1e6), params=["lr"])
    assert res.collinearity is not None
    assert set(res.collinearity.variables) == {"width", "dataset_size"}
    assert "collinear" in res.summary()


def test_wall_fixed_point_converges_on_a_3x_steeper_upper_wall() -> None:
    """Noise-free piecewise quadratic, curvature 1 below the optimum and 3 above: the surrogate is
    exact, so the converged fixed point recovers the centres (3 passes left a bias of ~0.017)."""
    grid = np.exp(np.linspace(math.log(1e-3), math.log(1e-1), 15))
    obs = []
    optima = {64: 3e-2, 128: 2e-2, 256: 1.3e-2, 512: 9e-3}
    for width, lr_opt in optima.items():
        for lr in grid:
            delta = math.log(lr / lr_opt)
            value = 1.0 + 0.5 * delta**2 + 0.5 * 2.0 * max(delta, 0.0) ** 2
            obs.append(Observation(Scale(width=width), {"lr": float(lr)}, value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=1024), params=["lr"], n_bootstrap=0)
    for optimum in res.optima:
        error = math.log(optimum.params["lr"] / optima[int(optimum.scale["width"])])
        assert abs(error) <= 1e-3

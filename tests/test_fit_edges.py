"""The engine at the edges of what a ladder saw, through the public path: one cost order,
two-rung collinearity, a rung with two finite trials, optima past the box, parameters never
varied, ``weight_decay = 0`` rows, and honest intervals (docs/science.md §7)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pytest

import transfersearch as ts
from transfersearch import extrapolate, synthetic, validate
from transfersearch.cost import by_cost, default_cost
from transfersearch.fitting import valley
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.summary import extrapolation_to_dict

LR_GRID = np.exp(np.linspace(math.log(1e-3), math.log(1e-1), 9))


def bowl_rung(scale: Scale, lr_opt: float, grid: np.ndarray = LR_GRID) -> list[Observation]:
    """A noise-free 1-D bowl in log lr, centred at ``lr_opt``, sampled on ``grid``."""
    return [
        Observation(scale, {"lr": float(lr)}, 1.0 + 0.5 * math.log(lr / lr_opt) ** 2) for lr in grid
    ]


def _fit(obs: Sequence[Observation], target: Scale, **options: object) -> ts.Extrapolation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        return extrapolate(obs, target=target, **options)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# One cost order
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
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        held = validate(obs, params=["lr"]).held_out
        by_data = validate(obs, params=["lr"], cost=lambda s: s["dataset_size"]).held_out
    assert held == Scale(width=256, dataset_size=1e5)  # not width 64, as the sum of logs said
    assert by_data == Scale(width=64, dataset_size=1e6)


def test_planner_extrapolation_and_report_share_the_order() -> None:
    ladder = [
        Scale(width=s["width"], dataset_size=s["dataset_size"], batch_size=32) for s in INVERTED
    ]
    planner = ts.TransferPlanner(synthetic.make_space(), list(reversed(ladder)))
    obs = [o for s in INVERTED for o in bowl_rung(s, 1e-2)]
    res = _fit(obs, Scale(width=512, dataset_size=1e5), params=["lr"])
    assert list(planner.ladder) == by_cost(ladder)
    assert [o.scale for o in res.optima] == by_cost(INVERTED)


def test_n_bootstrap_is_deprecated_and_ignored() -> None:
    obs = [o for s in INVERTED for o in bowl_rung(s, 1e-2)]
    target = Scale(width=512, dataset_size=1e5)
    with pytest.warns(DeprecationWarning, match="n_bootstrap"):
        with_it = _fit(obs, target, params=["lr"], n_bootstrap=50)
    assert with_it.params == _fit(obs, target, params=["lr"]).params


# ------------------------------------------------------------------------------------------------
# Collinearity
# ------------------------------------------------------------------------------------------------
def test_two_rung_ladder_moving_two_variables_together_is_collinear() -> None:
    scales = [Scale(width=64, dataset_size=1e5), Scale(width=128, dataset_size=2e5)]
    obs = [o for s in scales for o in bowl_rung(s, 1e-2)]
    res = _fit(obs, Scale(width=512, dataset_size=1e6), params=["lr"])
    assert res.collinearity is not None
    assert set(res.collinearity.variables) == {"width", "dataset_size"}
    assert "collinear" in res.summary()


# ------------------------------------------------------------------------------------------------
# Every trial is evidence
# ------------------------------------------------------------------------------------------------
def test_two_trials_place_a_rung_with_the_shared_curvature() -> None:
    """1-D exact bowls: three full rungs fix the curvature; a top rung with only two finite trials
    (the next one up diverged) is placed exactly, not set aside (docs/science.md §7.1)."""
    optima = {64: 2e-2, 128: 1.4e-2, 256: 1e-2, 512: 7e-3}
    obs = [o for w in (64, 128, 256) for o in bowl_rung(Scale(width=w), optima[w])]
    top = Scale(width=512)
    for lr in (4e-3, 8e-3):
        obs.append(Observation(top, {"lr": lr}, 1.0 + 0.5 * math.log(lr / optima[512]) ** 2))
    obs.append(Observation(top, {"lr": 1.6e-2}, math.nan))
    res = _fit(obs, Scale(width=2048), params=["lr"])
    placed = res.optima[-1]
    assert placed.method == "pooled" and placed.n_trials == 2 and placed.n_diverged == 1
    assert placed.params["lr"] == pytest.approx(optima[512], rel=1e-6)
    for optimum in res.optima:
        assert optimum.params["lr"] == pytest.approx(optima[int(optimum.scale["width"])], rel=1e-6)


def test_an_optimum_past_the_box_is_extrapolated_and_noted() -> None:
    """A bowl whose centre lies 0.5 log units above the top trial: the rung's optimum is read off
    the valley's shape there (the curvature the other rungs share), and summary() says so."""
    grid = np.exp(np.linspace(math.log(1e-3), math.log(1e-2), 8))
    obs = [o for w in (64, 128, 256) for o in bowl_rung(Scale(width=w), 4e-3)]
    obs += bowl_rung(Scale(width=512), 1e-2 * math.exp(0.5), grid)
    res = _fit(obs, Scale(width=1024), params=["lr"])
    top = res.optima[-1]
    assert top.params["lr"] == pytest.approx(1e-2 * math.exp(0.5), rel=1e-4)
    assert top.at_boundary and top.past_edge["lr"] == pytest.approx(0.5, abs=1e-4)
    assert 0.0 < top.stderr["lr"] < 0.5
    assert "lies 0.5 log units above the trials' edge" in res.summary()
    assert [d.kind for d in res.diagnostics].count("edge") == 1


@pytest.mark.xfail(
    reason=(
        "measured at 47c055f: with the next lr up (0.0223) diverged at the top rung, the "
        "decision is lr 0.0797 (P(diverge) 28.6%, the law's point 29.1%), past the diverged "
        "trial: walk-forward calibrates the spread x19.45 (interval [5.5e-22, 1.2e14]) and "
        "the loss, capped at divergence_cost, is flat; summary() still says 'Sweep further up'"
    ),
    strict=True,
)
def test_an_optimum_past_the_box_below_a_divergence_is_not_swept_past() -> None:
    """As above, with the next lr up from the top rung's trials diverged (above the centre):
    neither the decision nor summary()'s advice goes past the diverged trial."""
    grid = np.exp(np.linspace(math.log(1e-3), math.log(1e-2), 8))
    obs = [o for w in (64, 128, 256) for o in bowl_rung(Scale(width=w), 4e-3)]
    top = Scale(width=512)
    obs += bowl_rung(top, 1e-2 * math.exp(0.5), grid)
    diverged = 1e-2 * math.exp(0.8)
    obs.append(Observation(top, {"lr": diverged}, math.nan))
    res = _fit(obs, Scale(width=1024), params=["lr"])
    assert res.optima[-1].past_edge["lr"] == pytest.approx(0.5, abs=1e-4)
    assert res.p_diverge > 0.0
    assert res.params["lr"] < diverged
    assert "Sweep further up" not in res.summary()


def test_noisy_scenario_with_far_rung_centres_keeps_a_small_regret() -> None:
    """noisy seed 1: two rungs' tau optima lie far past their edges with large standard errors
    (the staged engine read them as bounds and reached regret 0.30; the null scores 0.011).
    Measured at 47c055f: 0.0016."""
    scenario = synthetic.make_scenario("noisy", 1)
    res = _fit(list(scenario.observations), scenario.target, params=["lr", "tau"], seed=1)
    assert scenario.surface.regret(scenario.target, res.params) < 0.03


def test_box_drift_is_followed_and_covered() -> None:
    """The optimum drifts as width^-0.5 out of a box swept the same at every width (centres
    clipped to the box would hide the drift and the interval miss). Seeds 0-5; measured at
    47c055f: 5 of 6 covered."""
    covered = 0
    for seed in range(6):
        scenario = synthetic.make_scenario("box_drift", seed)
        res = _fit(scenario.observations, scenario.target, params=["lr", "tau"], seed=seed)
        assert res.model == "drift"
        low, high = res.interval(0.9)["lr"]
        covered += low <= scenario.surface.optimum(scenario.target)["lr"] <= high
    assert covered >= 5


# ------------------------------------------------------------------------------------------------
# Honest intervals
# ------------------------------------------------------------------------------------------------
def test_one_informative_rung_gives_a_wide_interval_not_zero() -> None:
    """Only the cheapest rung locates its optimum; the others have one finite trial each: the
    drift is not identified, so the interval's half-width is at least the smallest drift the
    hyperprior allows over the extrapolation, 1.645 · 0.01 · Δlog(width) (docs/science.md §7.3),
    and in practice much more."""
    obs = bowl_rung(Scale(width=64), 1e-2)
    for width in (128, 256):
        obs.append(Observation(Scale(width=width), {"lr": 1e-2}, 1.0))
    res = _fit(obs, Scale(width=4096), params=["lr"])
    low, high = res.interval(0.9)["lr"]
    assert math.log(high / low) / 2.0 >= 1.6448536 * 0.01 * math.log(4096 / 64)
    assert low < 1e-2 < high


def test_a_never_varied_parameter_keeps_its_value_with_a_note(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """wd is recorded but every trial used 0.1: lr is still fitted over every rung, wd keeps 0.1
    (decision, law and interval), and the log and summary() say why."""
    obs = []
    for width in (64, 128, 256):
        for o in bowl_rung(Scale(width=width), 1e-2 * (width / 64) ** -0.5):
            obs.append(Observation(o.scale, {"lr": o.params["lr"], "wd": 0.1}, o.value))
    with caplog.at_level("INFO", logger="transfersearch.fitting.rungs"):
        res = _fit(obs, Scale(width=512), params=["lr", "wd"])
    assert all(o.method == "pooled" for o in res.optima)
    assert res.params["wd"] == pytest.approx(0.1) and res.law_params["wd"] == pytest.approx(0.1)
    assert res.interval(0.9)["wd"] == pytest.approx((0.1, 0.1))
    assert res.law_params["lr"] == pytest.approx(1e-2 * 8**-0.5, rel=0.1)  # measured 6%
    assert "'wd' was never varied" in caplog.text
    assert [d.kind for d in res.diagnostics].count("unvaried") == 1
    assert "wd was never varied (every trial used 0.1): dropped from the fit" in res.summary()


def _weight_decay_ladder(seed: int = 0) -> list[Observation]:
    """One-at-a-time tables around each rung's best (lr ∝ width^-0.5, weight decay 0.1), the
    weight-decay column including 0 (an ordinary grid value in published sweeps)."""
    rng = np.random.default_rng(seed)
    obs = []
    for width in (64, 128, 256, 512):
        lr_opt = 1e-2 * (width / 64) ** -0.5
        scale = Scale(width=width)
        for factor in (0.25, 0.5, 1.0, 2.0, 4.0):
            lr = lr_opt * factor * math.exp(rng.normal(0.0, 0.1))
            value = 3.0 + 0.1 * math.log(lr / lr_opt) ** 2 + rng.normal(0.0, 0.002)
            obs.append(Observation(scale, {"lr": lr, "weight_decay": 0.1}, value))
        for wd in (0.0, 0.05, 0.2, 0.4):
            value = 3.0 + 2.0 * (wd - 0.1) ** 2 + rng.normal(0.0, 0.002)
            obs.append(Observation(scale, {"lr": lr_opt, "weight_decay": wd}, value))
    return obs


def test_weight_decay_zero_rows_are_fitted_linearly_and_stay_non_negative() -> None:
    res = _fit(_weight_decay_ladder(), Scale(width=2048), params=["lr", "weight_decay"])
    assert res.log_params == ("lr",)
    notes = [d for d in res.diagnostics if d.kind == "linear"]
    assert len(notes) == 1 and notes[0].param == "weight_decay" and not notes[0].act
    assert "fitted on a linear axis, kept >= 0" in notes[0].message
    assert "weight_decay has 4 value(s) <= 0" in res.summary()
    low, high = res.interval(0.9)["weight_decay"]
    assert 0.0 <= low <= high
    assert res.params["weight_decay"] >= 0.0
    assert float(res.samples[:, list(res.laws).index("weight_decay")].min()) >= 0.0
    assert res.law_params["lr"] == pytest.approx(1e-2 * 32**-0.5, rel=0.2)


def test_a_weight_decay_law_heading_below_zero_is_held_at_zero_in_its_law_point() -> None:
    """Weight decay swept over a grid holding 0 whose optimum falls with D (0.3, 0.25, 0.2):
    carried 250× further its straight line goes negative; the law point, like the decision and
    the interval, stays ≥ 0 (it was reported as about −1)."""
    rng = np.random.default_rng(0)
    obs = [
        Observation(Scale(D=d), {"weight_decay": wd}, 3.0 + 0.5 * (wd - opt) ** 2 + 1e-4 * e)
        for d, opt in ((1e9, 0.3), (2e9, 0.25), (4e9, 0.2))
        for wd, e in zip((0.0, 0.1, 0.2, 0.3, 0.4, 0.6), rng.standard_normal(6))
    ]
    res = _fit(obs, Scale(D=1e12), params=["weight_decay"])
    low, high = res.interval(0.9)["weight_decay"]
    assert res.law_params["weight_decay"] == 0.0 and res.params["weight_decay"] >= 0.0
    assert 0.0 <= low <= res.law_params["weight_decay"] <= high


@pytest.mark.xfail(
    strict=True,
    reason=(
        "issue 25, measured with the skew (§7.1): the weight-decay grid (0, 0.05, 0.2, 0.4) is "
        "lopsided about the optimum 0.1 and the fit reads a small skew into a symmetric valley; "
        "the 90% interval's lower end is 0.1044 and misses 0.1 (lr is covered)"
    ),
)
def test_weight_decay_zero_rows_interval_covers_the_law_and_the_truth() -> None:
    res = _fit(_weight_decay_ladder(), Scale(width=2048), params=["lr", "weight_decay"])
    interval = res.interval(0.9)
    for name, truth in (("lr", 1e-2 * 32**-0.5), ("weight_decay", 0.1)):
        low, high = interval[name]
        assert low <= res.law_params[name] <= high
        assert low <= truth <= high


# ------------------------------------------------------------------------------------------------
# One optimum type
# ------------------------------------------------------------------------------------------------
def test_scale_optimum_from_fitted_derives_natural_values_and_stderr() -> None:
    """params = exp(coords) on a log coordinate and the coordinate itself otherwise, stderr the
    root of the covariance's diagonal, log_params in the names' order; with_point moves a copy."""
    cov = np.array([[0.04, 0.01], [0.01, 0.09]])
    point = np.array([0.9, math.log(3e-3)])
    optimum = ScaleOptimum.from_fitted(
        Scale(width=256),
        ("momentum", "lr"),
        ["lr"],
        point,
        cov,
        value=1.5,
        hessian=None,
        n_trials=10,
        n_diverged=1,
        n_used=8,
        method="pooled",
        at_boundary=False,
    )
    assert optimum.params == {"momentum": 0.9, "lr": pytest.approx(3e-3, rel=1e-12)}
    assert optimum.coords == {"momentum": 0.9, "lr": math.log(3e-3)}
    assert optimum.stderr == {"momentum": pytest.approx(0.2), "lr": pytest.approx(0.3)}
    assert optimum.log_params == ("lr",) and optimum.names == ("momentum", "lr")
    assert optimum.past_edge == {} and optimum.regret(optimum.params) is None
    moved = optimum.with_point(
        np.array([0.8, math.log(1e-3)]),
        np.diag([0.0, 0.25]),
        at_boundary=True,
        past_edge={"lr": -0.7},
    )
    assert moved.params == {"momentum": 0.8, "lr": pytest.approx(1e-3, rel=1e-12)}
    assert moved.stderr == {"momentum": 0.0, "lr": pytest.approx(0.5)}
    assert moved.at_boundary and moved.past_edge == {"lr": -0.7} and moved.n_trials == 10


def test_three_trials_locate_a_rung_without_a_fallback_or_a_warning() -> None:
    """Three trials (fewer than the 5 the staged engine's 1-D quadratic needed): the one model
    on one rung, no fallback and nothing warned; the best trial's neighbourhood."""
    scale = Scale(width=64)
    obs = [Observation(scale, {"lr": lr}, v) for lr, v in ((1e-3, 2.0), (3e-3, 1.5), (1e-2, 1.8))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimum = ts.estimate_optimum(obs, ["lr"])
    assert optimum.method == "pooled" and optimum.n_trials == 3
    assert 1e-3 < optimum.params["lr"] < 1e-2
    located = ts.estimate_optimum(bowl_rung(scale, 1e-2), ["lr"])
    assert located.params["lr"] == pytest.approx(1e-2, rel=1e-4) and not located.at_boundary


def test_two_trials_tying_for_the_top_rung_s_best_give_one_answer_in_either_order() -> None:
    """The fit's frame is centred on the top rung's best trial; where two tie (losses reported
    to 2 decimals do), their mean: swapping the tied rows once moved the decision by 0.2 log
    units of lr."""
    rows = [
        (1.0, 1e-3, 3.60), (1.0, 2e-3, 3.55), (1.0, 4e-3, 3.56), (1.0, 8e-3, 3.62),
        (2.0, 5e-4, 3.45), (2.0, 1e-3, 3.41), (2.0, 2e-3, 3.41), (2.0, 4e-3, 3.48),
    ]  # fmt: skip
    obs = [ts.Observation({"D": d}, {"lr": lr}, value) for d, lr, value in rows]
    swapped = [*obs[:5], obs[6], obs[5], *obs[7:]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        one = extrapolate(obs, target={"D": 4.0}, params=["lr"], seed=0)
        other = extrapolate(swapped, target={"D": 4.0}, params=["lr"], seed=0)
    assert other.params["lr"] == pytest.approx(one.params["lr"], rel=1e-6)
    assert other.law_params["lr"] == pytest.approx(one.law_params["lr"], rel=1e-6)


@pytest.mark.parametrize("unit", [1e-6, 1e3, 1e6, 1e100])
def test_the_metric_s_units_do_not_move_the_fit(unit: float) -> None:
    """The same sweep reported in other units gives the same runs: the flat priors of the fit's
    loss-unit entries scale with the values (at ×1e6 the rung depths' fixed prior once pulled
    them 3.6 noise sds toward 0 and the lr doubled)."""
    rows = [
        (1.0, 1e-3, 3.60), (1.0, 2e-3, 3.55), (1.0, 4e-3, 3.56), (1.0, 8e-3, 3.62),
        (2.0, 5e-4, 3.45), (2.0, 1e-3, 3.41), (2.0, 2e-3, 3.40), (2.0, 4e-3, 3.48),
    ]  # fmt: skip

    def fit(k: float) -> ts.Extrapolation:
        obs = [Observation(Scale(D=d), {"lr": lr}, k * value) for d, lr, value in rows]
        return _fit(obs, Scale(D=4.0), params=["lr"], seed=0)

    one, other = fit(1.0), fit(unit)
    assert other.params["lr"] == pytest.approx(one.params["lr"], rel=1e-6)
    assert other.law_params["lr"] == pytest.approx(one.law_params["lr"], rel=1e-6)


@pytest.mark.parametrize(
    ("name", "change"),
    [("+1e9", lambda v: v + 1e9), ("x1000", lambda v: 1000.0 * v), ("-5", lambda v: v - 5.0)],
)
def test_an_offset_or_a_unit_of_the_metric_does_not_move_the_recommendation(
    name: str, change: object
) -> None:
    """Issue 49 item 10: the same sweep with 1e9 added to every value (or in other units)
    recommends the same runs. Before, the fit took the values uncentred: the solve lost their
    last digits to the offset and the rounding floor read 1e9 + x as "3 decimals" (lr ×1.13,
    tau ×1.28 on this sweep); the values are centred on their median now (docs/science.md
    §7.2)."""
    scenario = synthetic.make_scenario("noisy", 0)

    def fit(values: object) -> ts.Extrapolation:
        obs = [
            Observation(o.scale, dict(o.params), values(o.value))  # type: ignore[operator]
            for o in scenario.observations
        ]
        return _fit(obs, scenario.target, params=["lr", "tau"], log_params=["lr", "tau"], seed=0)

    one, other = fit(lambda v: v), fit(change)
    # 1e9 + x keeps x to ~1e-7 (its float's resolution): the data itself moves by that much
    for key in ("lr", "tau"):
        assert other.params[key] == pytest.approx(one.params[key], rel=1e-4), name
        assert other.law_params[key] == pytest.approx(one.law_params[key], rel=1e-4), name
        low, high = one.interval(0.9)[key]
        assert other.interval(0.9)[key] == pytest.approx((low, high), rel=1e-4), name


@pytest.mark.parametrize(("unit", "shown"), [(1e300, r"3\.48e\+300"), (1e-200, r"3\.48e-200")])
def test_values_beyond_what_the_fit_s_squares_hold_are_refused_with_the_fix(
    unit: float, shown: str
) -> None:
    """Squares of 1e300 overflow and of 1e-200 underflow (a ZeroDivisionError in the flat
    prior once): both refused, naming the value and other units as the fix."""
    obs = [
        Observation(Scale(D=d), {"lr": lr}, unit * (3.0 + math.log(lr / 2e-3) ** 2))
        for d in (1.0, 2.0)
        for lr in (1e-3, 2e-3, 4e-3)
    ]
    with pytest.raises(ts.TransferSearchError, match=shown + r".*in other units"):
        extrapolate(obs, target=Scale(D=4.0), params=["lr"])


def test_the_rows_order_does_not_move_a_one_at_a_time_table_s_runs() -> None:
    """Marin Mars 520M's 1-4x rows (a one-at-a-time table, weight decay holding 0, a diverged
    row), shuffled: the same seed gives the same runs. The posterior draws went through an
    eigendecomposition whose vectors rotate under the order's round-off, and moved batch size
    by 1.8%; they go through the Cholesky factor now."""
    n = 536870912.0
    rows = [  # (D in units of 2^30 tokens, lr, weight_decay, batch_size, loss)
        (10, 0.008, 0.1, 256, 3.101), (10, 0.016, 0.1, 256, 3.111), (10, 0.032, 0.1, 256, math.nan),
        (10, 0.008, 0.1, 128, 3.102), (10, 0.008, 0.1, 512, 3.13), (10, 0.008, 0.1, 1024, 3.224),
        (10, 0.008, 0.0, 256, 3.131), (10, 0.008, 0.2, 256, 3.103),
        (20, 0.008, 0.1, 256, 3.015), (20, 0.004, 0.1, 256, 3.019), (20, 0.008, 0.1, 128, 3.025),
        (40, 0.008, 0.1, 256, 2.955), (40, 0.004, 0.1, 256, 2.953), (40, 0.008, 0.1, 128, 2.974),
    ]  # fmt: skip
    obs = [
        Observation(
            Scale(N=n, D=d * 2.0**30), {"lr": lr, "weight_decay": wd, "batch_size": bs}, value
        )
        for d, lr, wd, bs, value in rows
    ]
    options = {"params": ["lr", "weight_decay", "batch_size"], "seed": 0}
    target = Scale(N=n, D=80 * 2.0**30)
    base = _fit(obs, target, log_params=["lr", "batch_size"], **options)
    for seed in range(3):
        shuffled = list(obs)
        np.random.default_rng(seed).shuffle(shuffled)  # type: ignore[arg-type]
        res = _fit(shuffled, target, log_params=["lr", "batch_size"], **options)
        for name, value in base.params.items():
            assert res.params[name] == pytest.approx(value, rel=1e-6), name


def test_a_law_held_at_the_edge_of_the_trials_warns() -> None:
    """Fixed exponents the rungs contradict absurdly (lr ∝ width^-50 on a ladder whose optimum
    does not move) put the law's point e^-70 past every trial; the fit holds it at the edge of
    what the trials support, and says so instead of answering as if it had fitted it."""
    scenario = synthetic.make_scenario("no_drift", 0)
    obs, target = list(scenario.observations), scenario.target
    with pytest.warns(ts.TransferSearchWarning, match=r"optimum of \['lr'\] more than two"):
        held = extrapolate(
            obs, target=target, params=["lr", "tau"], seed=0, fixed_exponents={"lr": {"width": -50}}
        )
    assert [d.act for d in held.diagnostics if d.kind == "held"] == [True]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = extrapolate(obs, target=target, params=["lr", "tau"], seed=0)
    assert not [w for w in caught if "more than two trial ranges" in str(w.message)]
    assert all(d.kind != "held" for d in fitted.diagnostics)


@pytest.mark.parametrize("option", ["fixed_exponents", "prior_exponents"])
def test_an_exponent_past_the_float_range_is_refused_with_the_fix(option: str) -> None:
    """``{"lr": {"width": 1e300}}`` raised numpy's ValueError from deep in the fit (the law's
    arithmetic overflowed); an exponent that moves its parameter by more than 1e150 across the
    rungs and the target is refused, naming it."""
    scenario = synthetic.make_scenario("no_drift", 0)
    obs, target = list(scenario.observations), scenario.target
    for exponent in (1e300, -1e3):
        with pytest.raises(ts.TransferSearchError, match=rf"`{option}\['lr'\]\['width'\]`"):
            extrapolate(
                obs, target=target, params=["lr", "tau"], **{option: {"lr": {"width": exponent}}}
            )
    # on a linear axis an exponent is a slope in the parameter's own units: a batch size of a few
    # hundred that grows by 400 per e-fold of width is no overflow, and is fitted
    scaled = [
        Observation(o.scale, {**o.params, "tau": 100.0 * o.params["tau"]}, o.value) for o in obs
    ]
    res = _fit(
        scaled, target, params=["lr", "tau"], log_params=["lr"], **{option: {"tau": {"width": 400}}}
    )
    assert all(math.isfinite(v) for v in res.params.values())


def test_the_reason_says_whether_walk_forward_calibrated_the_spread() -> None:
    """Two rungs leave no fold: the spread is the posterior's own, and the result says so instead
    of "calibrated x1.00 on 0 folds"; three rungs calibrate it on one fold."""
    scenario = synthetic.make_scenario("no_drift", 0)
    obs = list(scenario.observations)
    scales = sorted({o.scale for o in obs}, key=default_cost)
    two = [o for o in obs if o.scale in scales[:2]]
    three = [o for o in obs if o.scale in scales[:3]]
    res2 = _fit(two, scenario.target, params=["lr", "tau"], seed=0)
    res3 = _fit(three, scenario.target, params=["lr", "tau"], seed=0)
    assert res2.calibration == 1.0 and "no walk-forward fold" in res2.selection_reason
    assert len(res3.walk_forward) == 1
    assert f"x{res3.calibration:.2f} at its most likely" in res3.selection_reason


def test_no_varied_parameter_is_refused_naming_the_values_and_the_fix() -> None:
    """Asked only for parameters no trial varied (a Marin table's ``min_lr``, 0 in every row)
    there is no valley to fit: extrapolate() raised numpy's "zero-size array" ValueError from
    deep in the fit; it now refuses, naming each value every trial ran and the fix."""
    obs = []
    for width in (64, 128, 256):
        for o in bowl_rung(Scale(width=width), 1e-2):
            obs.append(Observation(o.scale, {"lr": o.params["lr"], "min_lr": 0.0}, o.value))
    with pytest.raises(ts.TransferSearchError, match=r"every one ran min_lr=0.*Pass params="):
        extrapolate(obs, target=Scale(width=512), params=["min_lr"])
    assert extrapolate(obs, target=Scale(width=512), params=["lr", "min_lr"]).params["min_lr"] == 0


def test_a_parameter_params_leaves_out_that_varies_within_a_rung_is_warned() -> None:
    """A one-at-a-time table varies warmup beside lr; fitted for lr alone, rows that differ only
    in warmup look like repeats of one configuration (their spread noise, a divergence warmup
    caused lr's). extrapolate() warns, naming warmup; a parameter that moves only between rungs
    (one value per rung, as a best configuration's does) confounds nothing and is not named."""
    obs = []
    for width in (64, 128, 256):
        for o in bowl_rung(Scale(width=width), 1e-2):
            common = {"lr": o.params["lr"], "beta2": 0.9 if width < 256 else 0.95}
            obs.append(Observation(o.scale, {**common, "warmup": 100.0}, o.value))
            obs.append(Observation(o.scale, {**common, "warmup": 500.0}, o.value + 0.01))
    with pytest.warns(
        ts.TransferSearchWarning, match=r"also differ in \['warmup'\], which params="
    ):
        res = extrapolate(obs, target=Scale(width=512), params=["lr"])
    assert [d.kind for d in res.diagnostics].count("unfitted") == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ts.TransferSearchWarning)
        kept = [o for o in obs if o.params["warmup"] == 100.0]
        extrapolate(kept, target=Scale(width=512), params=["lr"])


def _blown_ladder(blown: float = 7.8) -> list[Observation]:
    """Three rungs of a shallow bowl in log lr (3.0 at the optimum, 0.1 higher at the grid's
    ends), each with one run at lr 0.3 that blew up to ``blown`` without reaching NaN."""
    obs = []
    for width in (64, 128, 256):
        best = 1e-2 * (width / 64) ** -0.5
        for lr in LR_GRID:
            value = 3.0 + 0.02 * math.log(lr / best) ** 2
            obs.append(Observation(Scale(width=width), {"lr": float(lr)}, value))
        obs.append(Observation(Scale(width=width), {"lr": 0.3}, blown))
    return obs


def test_a_loss_that_blew_up_is_read_as_a_divergence_and_named() -> None:
    """A run whose loss blew up to 7.8 (Marin's tables: above ~6 nats) is far past its rung's
    other values (3.0-3.2): by default extrapolate() reads it as diverged, exactly as if it
    reported NaN, and warns, naming the level (the middle of the gap as an excess over the rung's
    best, (3.107 + 7.8)/2 − 3.0) and diverged_beyond=. ``diverged_beyond=6`` does the same without the warning and summary() says
    how many; ``diverged_beyond=math.inf`` fits every finite value (another answer)."""
    obs = _blown_ladder()
    target = Scale(width=512)
    by_hand = [Observation(o.scale, o.params, math.nan) if o.value > 6 else o for o in obs]
    reference = _fit(by_hand, target, params=["lr"]).params
    gap = [o.value for o in obs if o.scale == Scale(width=64) and o.value < 6]
    level = f"{0.5 * (max(gap) + 7.8) - min(gap):.4g}"
    with pytest.warns(ts.TransferSearchWarning, match=rf"3 trial\(s\) at 7.8 .*than {level} past"):
        auto = extrapolate(obs, target=target, params=["lr"])
    assert auto.params == pytest.approx(reference, rel=1e-12)
    assert [d.kind for d in auto.diagnostics].count("far") == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ts.TransferSearchWarning)
        told = extrapolate(obs, target=target, params=["lr"], diverged_beyond=6.0)
        kept = extrapolate(obs, target=target, params=["lr"], diverged_beyond=math.inf)
    assert not [w for w in caught if "far past" in str(w.message)]
    assert told.params == pytest.approx(reference, rel=1e-12)
    assert "3 trial(s) past diverged_beyond=6 (7.8) counted as diverged" in told.summary()
    assert kept.params["lr"] != pytest.approx(reference["lr"], rel=1e-3)
    assert "counted as diverged" not in kept.summary()


def test_one_level_reads_a_blow_up_as_diverged_on_every_rung() -> None:
    """The level is found where a blow-up stands an order of magnitude apart (width 64: values
    3.0-3.1 and one at 7.8, a gap of 4.7 over ten times the widest spread below a gap, 0.35) and
    holds on every rung: width 128, whose own gap (3.35 → 6.5, 3.15) would not have fired, has
    its 6.5 read as diverged too; the answer is the fit of both rows given as NaN."""
    obs = []
    for width, curv, blown in ((64, 0.02, 7.8), (128, 0.05, 6.5), (256, 0.02, None)):
        best = 1e-2 * (width / 64) ** -0.5
        for lr in LR_GRID:
            value = 3.0 + curv * math.log(lr / best) ** 2
            obs.append(Observation(Scale(width=width), {"lr": float(lr)}, value))
        if blown is not None:
            obs.append(Observation(Scale(width=width), {"lr": 0.3}, blown))
    below = [o.value for o in obs if o.value < 6]
    assert max(below) - 3.0 == pytest.approx(0.35, abs=0.01)  # the widest spread below a gap
    by_hand = [Observation(o.scale, o.params, math.nan) if o.value > 6 else o for o in obs]
    target = Scale(width=512)
    with pytest.warns(ts.TransferSearchWarning, match=r"2 trial\(s\) at 6.5–7.8 lie far past"):
        auto = extrapolate(obs, target=target, params=["lr"])
    assert auto.params == pytest.approx(_fit(by_hand, target, params=["lr"]).params, rel=1e-12)


def test_blow_ups_over_many_orders_of_magnitude_are_all_read_as_diverged() -> None:
    """SGD runs that blew up to 693, 1.2e5, 1.1e6, 8e9 and 1.6e17 without a NaN (the corpus's
    CNN): every one of them is diverged, as the fit of the same rows given as NaN is. The first
    pass splits at the largest gap (8.1e9 -> 1.6e17); read again without that rung as its own
    yardstick, the rest go too (docs/science.md §8; a strict xfail until 2026-12-08)."""
    obs = _blown_ladder()
    obs = [o for o in obs if o.value < 6]  # three plain bowls
    for value, lr in ((693.0, 0.3), (1.2e5, 0.35), (1.1e6, 0.4), (8.1e9, 0.45), (1.6e17, 0.5)):
        obs.append(Observation(Scale(width=256), {"lr": lr}, value))
    by_hand = [Observation(o.scale, o.params, math.nan) if o.value > 6 else o for o in obs]
    target = Scale(width=512)
    with pytest.warns(ts.TransferSearchWarning, match=r"5 trial\(s\) at 693–1.6e\+17 lie far"):
        auto = extrapolate(obs, target=target, params=["lr"])
    assert auto.params == pytest.approx(_fit(by_hand, target, params=["lr"]).params, rel=1e-12)
    assert auto.divergence_cost < 1.0  # charged the valley's worst excess, not a blow-up's


def test_a_sparse_rung_s_blow_up_is_judged_by_the_other_rungs_yardstick() -> None:
    """A rung too sparse ever to hold three trials under a gap (two converged runs, 3.00 and 3.11,
    and one at 8.1e9: a sparse sweep's rung, as the corpus's sparse CNN draws have) cannot show
    its own valley's spread, but the other rungs do: the widest spread below a rung's largest gap,
    by hand 3.0849 − 3.0010 = 0.0849 (width 128's bowl), so a gap past 0.849 is far. 8.1e9 is:
    the blow-up is diverged, as the same rows with NaN are (before 2026-12-08 the rung was skipped
    and the fit charged a divergence 8.1e9). A third run at 3.8 (a gap of 0.69) is kept."""
    obs = [o for o in _blown_ladder() if o.value < 6 and o.scale != Scale(width=256)]
    y = np.sort([o.value for o in obs if o.scale == Scale(width=128)])
    k = int(np.argmax(np.diff(y)))
    assert y[k] - y[0] == pytest.approx(0.0849, abs=1e-4)  # the yardstick, by hand
    sparse = [
        Observation(Scale(width=256), {"lr": 3e-3}, 3.0),
        Observation(Scale(width=256), {"lr": 1e-2}, 3.11),
        Observation(Scale(width=256), {"lr": 0.3}, 8.1e9),
    ]
    target = Scale(width=512)
    by_hand = [*obs, *sparse[:2], Observation(Scale(width=256), {"lr": 0.3}, math.nan)]
    with pytest.warns(ts.TransferSearchWarning, match=r"1 trial\(s\) at 8.1e\+09 lie far past"):
        auto = extrapolate(obs + sparse, target=target, params=["lr"])
    assert auto.params == pytest.approx(_fit(by_hand, target, params=["lr"]).params, rel=1e-12)
    near = [*sparse[:2], Observation(Scale(width=256), {"lr": 0.3}, 3.8)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ts.TransferSearchWarning)
        kept = extrapolate(obs + near, target=target, params=["lr"])
    assert not [d for d in kept.diagnostics if d.kind == "far"]


def test_the_level_is_an_excess_so_a_small_rung_s_converged_runs_are_kept() -> None:
    """The level is an excess over each rung's best (2.45 here), not a value: a smaller model's
    rung whose converged runs end 2.5 nats higher (5.5-5.6, past the value 5.45 where the wider
    rungs' blow-ups begin to count) keeps them all; only the 7.8s are read as diverged."""
    obs = _blown_ladder()
    best = 1e-2 * (32 / 64) ** -0.5
    small = [
        Observation(Scale(width=32), {"lr": float(lr)}, 5.5 + 0.02 * math.log(lr / best) ** 2)
        for lr in LR_GRID
    ]
    assert min(o.value for o in small) > 5.45
    by_hand = [Observation(o.scale, o.params, math.nan) if o.value > 6 else o for o in obs]
    target = Scale(width=512)
    with pytest.warns(ts.TransferSearchWarning, match=r"3 trial\(s\) at 7.8 lie far past"):
        auto = extrapolate(small + obs, target=target, params=["lr"])
    assert auto.params == pytest.approx(
        _fit(small + by_hand, target, params=["lr"]).params, rel=1e-12
    )
    assert len(auto.optima) == 4  # the small rung is fitted, not dropped


def test_diverged_beyond_is_the_worse_side_of_a_maximised_metric() -> None:
    """Maximising accuracy, a run that blew up reaches a *low* value: diverged_beyond counts the
    values below it, and the automatic reading finds them on that side too. A value the option
    refuses names the fix."""
    obs = [Observation(o.scale, o.params, -o.value) for o in _blown_ladder()]
    res = extrapolate(obs, target=Scale(width=512), params=["lr"], direction="maximize",
                      diverged_beyond=-6.0)  # fmt: skip
    assert "3 trial(s) past diverged_beyond=-6" in res.summary()
    with pytest.warns(ts.TransferSearchWarning, match=r"at -7.8 lie far past .*than 2.45"):
        auto = extrapolate(obs, target=Scale(width=512), params=["lr"], direction="maximize")
    assert auto.params == pytest.approx(res.params, rel=1e-12)
    with pytest.raises(ts.TransferSearchError, match="diverged_beyond"):
        extrapolate(obs, target=Scale(width=512), params=["lr"], diverged_beyond=math.nan)


def test_a_momentum_coefficient_is_never_answered_at_or_past_one() -> None:
    """beta2's optimum moves 0.9 → 0.95 → 0.975 over three widths: its law (in log beta2, the
    parameter being positive) runs past 1 at 16× the widest rung, which AdamW refuses (the code
    before answered 1.24). The decision and the law's point are held at the largest value tried
    (0.99), the interval ends at 1, and a warning says so; lr is untouched."""
    obs = []
    for width, best in ((64, 0.9), (128, 0.95), (256, 0.975)):
        for beta2 in (0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99):
            for lr in (1e-3, 3e-3, 1e-2):
                value = 3.0 + 0.2 * math.log((1 - beta2) / (1 - best)) ** 2
                value += 0.5 * math.log(lr / 3e-3) ** 2
                obs.append(Observation(Scale(width=width), {"lr": lr, "beta2": beta2}, value))
    with pytest.warns(ts.TransferSearchWarning, match=r"\['beta2'\] at or past 1"):
        res = extrapolate(obs, target=Scale(width=4096), params=["lr", "beta2"])
    assert res.params["beta2"] == pytest.approx(0.99) and res.law_params["beta2"] == 0.99
    assert max(res.interval(0.9)["beta2"]) <= 1.0
    assert res.params["lr"] == pytest.approx(3e-3, rel=0.05)


def test_a_linear_timescale_is_never_answered_at_or_below_zero() -> None:
    """Issue 49 item 11: tau_epoch swept on a linear axis, its optimum falling 3.0 → 0.6 over
    four widths: carried 8× past the widest rung its straight law lies below 0. A timescale is
    > 0: the law point, the decision, the interval and every candidate stay at or above the
    smallest value tried (before: tau_epoch 0 with the interval (0, 0), and nothing said), and a
    warning names the fix (declare it log)."""
    rng = np.random.default_rng(0)
    obs = [
        Observation(
            Scale(width=width),
            {"lr": float(lr), "tau_epoch": float(tau)},
            2.0 + 0.3 * math.log(lr / 1e-2) ** 2 + 0.2 * (tau - best) ** 2 + 0.002 * e,
        )
        for width, best in ((64, 3.0), (128, 2.2), (256, 1.4), (512, 0.6))
        for lr in np.geomspace(1e-3, 1e-1, 5)
        for tau, e in zip(np.linspace(0.2 * best, 2.0 * best, 5), rng.standard_normal(5))
    ]
    least = min(o.params["tau_epoch"] for o in obs)
    with pytest.warns(ts.TransferSearchWarning, match=r"\['tau_epoch'\] at or below 0.*log"):
        res = extrapolate(
            obs, target=Scale(width=4096), params=["lr", "tau_epoch"], log_params=["lr"]
        )
    assert res.params["tau_epoch"] == pytest.approx(least)
    assert res.law_params["tau_epoch"] == pytest.approx(least)
    assert min(res.interval(0.9)["tau_epoch"]) >= least
    assert float(res.samples[:, list(res.laws).index("tau_epoch")].min()) > 0.0
    assert all(c.params["tau_epoch"] > 0.0 for c in res.candidates(3))
    assert res.params["lr"] == pytest.approx(1e-2, rel=0.05)


def test_no_candidate_run_puts_a_momentum_past_the_largest_value_tried() -> None:
    """candidates(k) searches the decision's region: with the region ending at 1, runs came back
    at beta2 = 1.0 exactly (19 of 240 fuzzed Marin sub-problems); a momentum's region ends at the
    largest value any trial ran."""
    obs = []
    for width, best in ((64, 0.9), (128, 0.95), (256, 0.975)):
        for beta2 in (0.8, 0.9, 0.95, 0.98, 0.99):
            obs.append(
                Observation(
                    Scale(width=width),
                    {"beta2": beta2},
                    3.0 + 0.2 * math.log((1 - beta2) / (1 - best)) ** 2,
                )
            )
    res = _fit(obs, Scale(width=4096), params=["beta2"])
    assert all(0.0 < c.params["beta2"] <= 0.99 for c in res.candidates(3))


#: Marin's Lion 130M tables at 1× and 2× Chinchilla data (Wen et al., 2025, "Fantastic
#: Pretraining Optimizers and Where to Find Them"; the rows ``benchmarks/marin_sweeps.py`` keeps,
#: blown-up runs as NaN): (multiple, lr, weight_decay, batch_size, loss).
LION_130M = [
    (1, 0.002, 0.7, 128, 3.552), (1, 0.0005, 0.7, 128, 3.579), (1, 0.001, 0.7, 128, 3.549),
    (1, 0.004, 0.7, 128, math.nan), (1, 0.008, 0.7, 128, math.nan), (1, 0.002, 0.7, 256, 3.643),
    (1, 0.002, 0.0, 128, 3.57), (1, 0.002, 0.1, 128, 3.562), (1, 0.002, 0.2, 128, 3.557),
    (1, 0.002, 0.3, 128, 3.555), (1, 0.002, 0.4, 128, 3.553), (1, 0.002, 0.5, 128, 3.551),
    (1, 0.002, 0.6, 128, 3.549), (1, 0.002, 0.8, 128, 3.554), (1, 0.002, 0.9, 128, 3.556),
    (1, 0.002, 1.0, 128, 3.557), (2, 0.001, 0.7, 128, 3.414), (2, 0.0005, 0.7, 128, 3.435),
    (2, 0.002, 0.7, 128, 3.414), (2, 0.004, 0.7, 128, 3.489), (2, 0.008, 0.7, 128, math.nan),
    (2, 0.001, 0.7, 256, 3.447), (2, 0.001, 0.7, 512, 3.54), (2, 0.001, 0.4, 128, 3.419),
    (2, 0.001, 0.5, 128, 3.418), (2, 0.001, 0.6, 128, 3.414), (2, 0.001, 0.8, 128, 3.414),
    (2, 0.001, 0.9, 128, 3.413), (2, 0.001, 1.0, 128, 3.413),
]  # fmt: skip


def test_a_fit_that_cycles_instead_of_settling_says_so() -> None:
    """The alternation of noise and valley (docs/science.md §7.2) on two one-at-a-time tables of
    a real sweep cycles between nearby fits and never settles: ``summary()`` says the answer is
    fragile there (a pick near a grid midpoint is a tie). A well-sampled synthetic ladder
    settles and carries no such note."""
    n = 134_217_728
    obs = [
        Observation({"N": float(n), "D": 20.0 * n * m}, {"lr": lr, "wd": wd, "bs": float(bs)}, loss)
        for m, lr, wd, bs, loss in LION_130M
    ]
    target = Scale(N=float(n), D=20.0 * n * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=target, params=["lr", "wd", "bs"], log_params=["lr", "bs"])
    assert [d.kind for d in res.diagnostics].count("unsettled") == 1
    assert "did not settle in" in res.summary()
    kinds = [d["kind"] for d in extrapolation_to_dict(res)["diagnostics"]]
    assert "unsettled" in kinds  # the command line's --json carries it too
    calm = synthetic.make_scenario("no_drift", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        settled = extrapolate(calm.observations, target=calm.target, params=["lr", "tau"])
    assert not any(d.kind == "unsettled" for d in settled.diagnostics)


def test_an_unsettled_fit_s_answer_does_not_hang_on_where_the_cap_falls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Lion 130M tables cycle through four states: stopped wherever the last round fell, the
    law's batch size was 131, 134, 131 or 133 by the cap's value; solved at the state of the
    greatest marginal likelihood (docs/science.md §7.2), it is one answer."""
    n = 134_217_728
    obs = [
        Observation({"N": float(n), "D": 20.0 * n * m}, {"lr": lr, "wd": wd, "bs": float(bs)}, loss)
        for m, lr, wd, bs, loss in LION_130M
    ]
    target = Scale(N=float(n), D=20.0 * n * 4)
    answers = []
    for cap in (100, 101, 102, 103):
        monkeypatch.setattr(valley, "MAX_ROUNDS", cap)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = extrapolate(
                obs, target=target, params=["lr", "wd", "bs"], log_params=["lr", "bs"]
            )
        assert any(d.kind == "unsettled" for d in res.diagnostics)
        answers.append([res.law_params[k] for k in ("lr", "wd", "bs")])
    np.testing.assert_allclose(answers, [answers[0]] * 4, rtol=1e-9)


def test_seven_trials_whose_noise_fit_reaches_its_floor_give_an_answer() -> None:
    """Seven Step Law dense runs on three rungs (a `real_sweep_fuzz.py` problem): a round's noise
    fit reaches its floor, the posterior precision spans 20 decades, and LU called singular a
    matrix Cholesky had factored (LinAlgError). The solve goes through the Cholesky factor."""
    rows = [
        (4.0e9, 214663680, 0.001381, 256.0, 2.655395661175284),
        (8.0e9, 429260800, 0.003906, 1024.0, 2.5486797138508193),
        (8.0e9, 429260800, 0.007812, 1024.0, 2.6239233367682564),
        (8.0e9, 429260800, 0.005524, 352.0, 2.511107562859959),
        (1.42e10, 268304384, 0.0221, 128.0, 7.133737154357136),
        (1.42e10, 268304384, 0.007812, 64.0, 2.5282825900851784),
        (1.42e10, 268304384, 0.0006905, 128.0, 2.4567676460231294),
    ]
    obs = [Observation({"D": d, "N": n}, {"lr": lr, "bs": bs}, v) for d, n, lr, bs, v in rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(N=268304384, D=8e10), params=["lr", "bs"], seed=0)
    assert all(math.isfinite(v) and v > 0 for v in res.params.values())

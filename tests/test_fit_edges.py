"""The engine at the edges of what a ladder saw: one cost order, the wall's fixed point
run to convergence, two-rung collinearity, the one-SE rule's unbiased standard error, optima past
the box, rungs with few finite trials, censored law fits and honest intervals (docs/science.md §7)."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

import transfersearch as ts
from transfersearch import extrapolate, synthetic, validate
from transfersearch.cost import by_cost, default_cost
from transfersearch.fitting.laws import UNSEEN_PRIOR_SD, LawData, gls, truncated_normal_moments
from transfersearch.fitting.local import locate_optimum
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.predict import unseen_variance
from transfersearch.fitting.selection import weighted_mean_se
from transfersearch.observations import Observation
from transfersearch.scale import Scale

LR_GRID = np.exp(np.linspace(math.log(1e-3), math.log(1e-1), 9))


def bowl_rung(scale: Scale, lr_opt: float, grid: np.ndarray = LR_GRID) -> list[Observation]:
    """A noise-free 1-D bowl in log lr, centred at ``lr_opt``, sampled on ``grid``."""
    return [
        Observation(scale, {"lr": float(lr)}, 1.0 + 0.5 * math.log(lr / lr_opt) ** 2) for lr in grid
    ]


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
# Collinearity, the wall's fixed point, the one-SE rule
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


# ------------------------------------------------------------------------------------------------
# Every trial is evidence
# ------------------------------------------------------------------------------------------------
def test_truncated_normal_moments_match_the_closed_forms() -> None:
    from scipy.stats import truncnorm

    cases = [(0.0, 1.0, 0.5, math.inf), (0.0, 1.0, -math.inf, -3.0), (2.0, 0.5, -1.0, 1.0)]
    cases += [(0.0, 1.0, 30.0, math.inf), (1.0, 2.0, -1.0, 3.0)]
    for mean, sd, low, high in cases:
        got_mean, got_var = truncated_normal_moments(
            np.array([mean]), np.array([sd]), np.array([low]), np.array([high])
        )
        want_mean, want_var = truncnorm.stats((low - mean) / sd, (high - mean) / sd, mean, sd)
        assert got_mean[0] == pytest.approx(float(want_mean), rel=1e-9, abs=1e-12)
        assert got_var[0] == pytest.approx(float(want_var), rel=1e-7, abs=1e-12)


def test_censored_law_fit_is_the_tobit_maximum_with_its_observed_information() -> None:
    """Three rungs: two located optima and one known only as z > 1.6. The EM fit equals the
    direct maximum of the Tobit likelihood, and its covariance the inverse of that likelihood's
    Hessian (Louis' identity), both computed here by brute force (docs/science.md §7.3)."""
    from scipy.optimize import minimize
    from scipy.stats import norm

    logs = np.array([[0.0], [1.0], [2.0]])
    z = np.array([0.0, 0.5, 1.0])
    variance = np.array([0.01, 0.01, 0.04])
    data = LawData(
        "lr", True, z, variance, logs, ("width",), np.zeros(1), {},
        lower=np.array([-np.inf, -np.inf, 1.6]), upper=np.full(3, np.inf),
    )  # fmt: skip
    fit = gls(data, 1e6, 0.0)  # a flat prior: the maximum likelihood

    def nll(theta: np.ndarray) -> float:
        mu = theta[0] + theta[1] * logs[:, 0]
        located = norm.logpdf(z[:2], mu[:2], np.sqrt(variance[:2])).sum()
        return -float(located + norm.logsf(1.6, mu[2], math.sqrt(variance[2])))

    best = minimize(nll, [0.0, 0.5], method="Nelder-Mead", options={"xatol": 1e-11, "fatol": 1e-15})
    assert fit.intercept == pytest.approx(best.x[0], abs=1e-6)
    assert fit.exponents[0] == pytest.approx(best.x[1], abs=1e-6)
    assert fit.exponents[0] > 0.6  # the bound pulls the slope up from the located rungs' 0.5
    step = 1e-4
    hessian = np.zeros((2, 2))
    point = np.array([fit.intercept, fit.exponents[0]])
    for i in range(2):
        for j in range(2):
            a, b = np.eye(2)[i] * step, np.eye(2)[j] * step
            hessian[i, j] = (
                nll(point + a + b) - nll(point + a - b) - nll(point - a + b) + nll(point - a - b)
            ) / (4 * step * step)
    assert np.allclose(fit.covariance, np.linalg.inv(hessian), rtol=1e-4)
    # a bound the law already satisfies by far says nothing more
    loose = dataclasses.replace(data, lower=np.array([-np.inf, -np.inf, -5.0]))
    ordinary = gls(dataclasses.replace(data, variance=np.array([0.01, 0.01, np.inf])), 1e6, 0.0)
    assert gls(loose, 1e6, 0.0).exponents[0] == pytest.approx(ordinary.exponents[0], abs=1e-6)


def test_two_trials_place_a_rung_with_the_shared_curvature() -> None:
    """1-D exact bowls: three full rungs fix the curvature; a top rung with only two finite trials
    (the next one up diverged) is placed exactly, not set aside (docs/science.md §7.1)."""
    optima = {64: 2e-2, 128: 1.4e-2, 256: 1e-2, 512: 7e-3}
    obs = [o for w in (64, 128, 256) for o in bowl_rung(Scale(width=w), optima[w])]
    top = Scale(width=512)
    for lr in (4e-3, 8e-3):
        obs.append(Observation(top, {"lr": lr}, 1.0 + 0.5 * math.log(lr / optima[512]) ** 2))
    obs.append(Observation(top, {"lr": 1.6e-2}, math.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=2048), params=["lr"], n_bootstrap=0)
    placed = res.optima[-1]
    assert placed.method == "pooled" and not placed.bounds
    assert placed.params["lr"] == pytest.approx(optima[512], rel=1e-6)


def test_one_trial_bounded_by_a_diverged_neighbour_is_a_censored_observation() -> None:
    obs = [o for w in (64, 128, 256) for o in bowl_rung(Scale(width=w), 2e-2 * (w / 64) ** -0.5)]
    top = Scale(width=512)
    obs.append(Observation(top, {"lr": 4e-3}, 1.2))
    obs.append(Observation(top, {"lr": 8e-3}, math.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=1024), params=["lr"], n_bootstrap=0)
    low, high = res.optima[-1].bounds["lr"]
    assert low == -math.inf and high == pytest.approx(math.log(8e-3))
    assert "only bounded, below 0.008" in res.summary()


def test_an_optimum_past_the_box_is_extrapolated_not_clipped() -> None:
    """A bowl whose centre lies 0.5 log units above the top trial: the pooled centre is read off
    the valley's shape there (it was clipped to the edge before), and summary() says so."""
    grid = np.exp(np.linspace(math.log(1e-3), math.log(1e-2), 8))
    obs = [o for w in (64, 128, 256) for o in bowl_rung(Scale(width=w), 4e-3)]
    obs += bowl_rung(Scale(width=512), 1e-2 * math.exp(0.5), grid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=1024), params=["lr"], n_bootstrap=0)
    top = res.optima[-1]
    assert top.params["lr"] == pytest.approx(1e-2 * math.exp(0.5), rel=1e-6)
    assert top.past_edge["lr"] == pytest.approx(0.5, abs=1e-6)
    assert top.stderr["lr"] > 0.0
    assert "lies 0.5 log units above the trials' edge" in res.summary()


def test_an_optimum_past_the_box_below_a_divergence_is_bounded_not_swept_past() -> None:
    """As above, with the next lr up from the top rung's trials diverged (above the centre):
    summary() names the divergence as the optimum's bound and never advises sweeping past it."""
    grid = np.exp(np.linspace(math.log(1e-3), math.log(1e-2), 8))
    obs = [o for w in (64, 128, 256) for o in bowl_rung(Scale(width=w), 4e-3)]
    top = Scale(width=512)
    obs += bowl_rung(top, 1e-2 * math.exp(0.5), grid)
    obs.append(Observation(top, {"lr": 1e-2 * math.exp(0.8)}, math.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=1024), params=["lr"], n_bootstrap=0)
    placed = res.optima[-1]
    assert placed.past_edge["lr"] == pytest.approx(0.5, abs=1e-6)
    assert placed.diverged_past["lr"] == pytest.approx(math.log(1e-2) + 0.8)
    text = res.summary()
    assert "lies 0.5 log units above the trials' edge" in text
    assert f"A trial at lr={1e-2 * math.exp(0.8):.4g} diverged: the optimum is bounded" in text
    assert "Sweep further up" not in text


def test_a_minimum_on_the_edge_is_doubted_as_far_as_the_slope_there_is_noise() -> None:
    """A rung fitted alone whose quadratic is minimised on its box's edge (docs/science.md §7.1):
    an exact bowl 2 units past the top trial has a resolved slope there (stderr: one trial
    spacing, extent/n = 4/9); a nearly flat, noisy sweep whose minimiser noise put on the edge has
    a slope within noise of 0 there (stderr: the whole swept range, 4)."""
    grid = np.linspace(-4.0, 0.0, 9)
    scale = Scale(width=64)

    def fit(values: np.ndarray) -> ts.ScaleOptimum:
        obs = [Observation(scale, {"x": float(x)}, float(v)) for x, v in zip(grid, values)]
        return ts.estimate_optimum(obs, params=["x"], log_params=[], warn=False)

    sloped = fit(0.5 * (grid - 2.0) ** 2)
    assert sloped.method == "quadratic" and sloped.at_boundary
    assert sloped.coords["x"] == pytest.approx(0.0)
    assert sloped.stderr["x"] == pytest.approx(4.0 / 9.0)
    noise = np.random.default_rng(0).standard_normal(9)
    flat = fit(0.02 * (grid - 0.5) ** 2 + 0.3 * noise)
    assert flat.method == "quadratic" and flat.at_boundary
    assert flat.coords["x"] == pytest.approx(0.0)
    assert flat.stderr["x"] == pytest.approx(4.0)


def test_a_pooled_centre_past_the_edge_within_its_noise_is_no_bound() -> None:
    """noisy seed 1: the valley puts two rungs' tau centres more than a range past their edges,
    but with standard errors (~50, ~70 log units) far larger than the distance; read as bounds
    with a trial spacing's resolution they moved the tau law (regret 0.30; the null's 0.011).
    They stay ordinary, uninformative observations: no bound, no drift earned."""
    scenario = synthetic.make_scenario("noisy", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(
            list(scenario.observations),
            target=scenario.target,
            params=["lr", "tau"],
            n_bootstrap=0,
            seed=1,
        )
    assert all(not o.bounds for o in res.optima)
    far = [o for o in res.optima if abs(o.past_edge.get("tau", 0.0)) > 1.0]
    assert len(far) == 2 and all(o.stderr["tau"] > 10.0 for o in far)
    assert res.laws["tau"].exponents == {"dataset_size": 0.0, "width": 0.0}
    assert scenario.surface.regret(scenario.target, res.params) < 0.03


def test_box_drift_earns_drift_and_covers() -> None:
    """The optimum drifts as width^-0.5 out of a box swept the same at every width (centres
    clipped to the box would make walk-forward keep 'nearest' and the interval miss). Seeds 0-5."""
    kept, covered = [], 0
    for seed in range(6):
        scenario = synthetic.make_scenario("box_drift", seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = extrapolate(
                scenario.observations, target=scenario.target, params=["lr", "tau"],
                n_bootstrap=50, seed=seed,
            )  # fmt: skip
        kept.append(res.model)
        low, high = res.interval(0.9)["lr"]
        covered += low <= scenario.surface.optimum(scenario.target)["lr"] <= high
    assert sum(m in ("shrunk", "free") for m in kept) >= 5, kept
    assert covered >= 5


# ------------------------------------------------------------------------------------------------
# Honest intervals
# ------------------------------------------------------------------------------------------------
def test_one_informative_rung_gives_the_prior_width_not_zero() -> None:
    """Only the cheapest rung locates its optimum; the others have one finite trial each and no
    bound: the drift is not identified, so the interval's half-width is at least the prior's,
    1.645 · 0.5 · Δlog(width) (docs/science.md §7.4)."""
    obs = bowl_rung(Scale(width=64), 1e-2)
    for width in (128, 256):
        obs.append(Observation(Scale(width=width), {"lr": 1e-2}, 1.0))
    target = Scale(width=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=target, params=["lr"], n_bootstrap=0)
    low, high = res.interval(0.9)["lr"]
    prior_half = 1.6448536 * UNSEEN_PRIOR_SD * math.log(4096 / 64)
    assert math.log(high / low) / 2.0 >= prior_half * 0.999


def test_unseen_variance_is_the_prior_on_the_direction_no_rung_measured() -> None:
    """Hand-computed: rungs on the line log N = log D (collinear); the target steps off it by
    (Δ, −Δ)/2 per variable... the component outside the span is (1, −1)·Δ/2, so a no-drift model
    adds 0.5²·Δ²/2 and a ridge with s = 0.3 adds (0.5² − 0.3²)·Δ²/2."""
    logs = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    data = LawData("lr", True, np.zeros(3), np.full(3, 0.01), logs, ("N", "D"), np.zeros(2), {})
    target = np.array([3.0, 1.0])  # mean (1, 1); step (2, 0); outside the span: (1, −1)
    held = gls(data, 0.0, 0.0)
    assert unseen_variance(data, held, target) == pytest.approx(0.25 * 2.0)
    ridge = gls(data, 0.3, 0.0)
    assert unseen_variance(data, ridge, target) == pytest.approx((0.25 - 0.09) * 2.0)
    along = np.array([5.0, 5.0])  # on the ladder's line: nothing unseen
    assert unseen_variance(data, held, along) == pytest.approx(0.0, abs=1e-12)


def test_a_never_varied_parameter_is_dropped_with_a_note_not_the_pooled_valley(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """wd is recorded but every trial used 0.1: the valley is still pooled over lr, wd keeps 0.1,
    and the log and summary() say why."""
    obs = []
    for width in (64, 128, 256):
        for o in bowl_rung(Scale(width=width), 1e-2 * (width / 64) ** -0.5):
            obs.append(Observation(o.scale, {"lr": o.params["lr"], "wd": 0.1}, o.value))
    with warnings.catch_warnings(), caplog.at_level("INFO", logger="transfersearch.fitting.rungs"):
        warnings.simplefilter("ignore")
        res = extrapolate(obs, target=Scale(width=512), params=["lr", "wd"], n_bootstrap=0)
    assert all(o.method == "pooled" for o in res.optima)
    assert res.params["wd"] == pytest.approx(0.1)
    assert res.law_params["lr"] == pytest.approx(1e-2 * 8**-0.5, rel=0.02)
    assert "'wd' was never varied" in caplog.text
    assert "wd was never varied (every trial used 0.1): dropped from the fit" in res.summary()


def test_one_se_rule_uses_the_unbiased_standard_error() -> None:
    """Equal weights: s/√n with ddof = 1 (the biased form was √((n − 1)/n) smaller)."""
    values = np.array([0.1, 0.4, -0.2, 0.3])
    by_hand = float(np.std(values, ddof=1)) / 2.0  # √4
    assert weighted_mean_se(np.ones(4), values) == pytest.approx(by_hand)
    assert weighted_mean_se(np.full(4, 0.3), values) == pytest.approx(by_hand)
    assert weighted_mean_se(np.ones(1), values[:1]) == 0.0


# ------------------------------------------------------------------------------------------------
# One optimum type, one rung located without warnings
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
        method="quadratic",
        at_boundary=False,
    )
    assert optimum.params == {"momentum": 0.9, "lr": pytest.approx(3e-3, rel=1e-12)}
    assert optimum.coords == {"momentum": 0.9, "lr": math.log(3e-3)}
    assert optimum.stderr == {"momentum": pytest.approx(0.2), "lr": pytest.approx(0.3)}
    assert optimum.log_params == ("lr",) and optimum.names == ("momentum", "lr")
    moved = optimum.with_point(
        np.array([0.8, math.log(1e-3)]), np.diag([0.0, 0.25]), bounds={"momentum": (0.7, 0.8)}
    )
    assert moved.params == {"momentum": 0.8, "lr": pytest.approx(1e-3, rel=1e-12)}
    assert moved.stderr == {"momentum": 0.0, "lr": pytest.approx(0.5)}
    assert moved.bounds == {"momentum": (0.7, 0.8)} and moved.n_trials == 10


def test_locate_optimum_returns_its_fallback_as_a_diagnostic_not_a_warning() -> None:
    """Three trials are fewer than the 5 a 1-D quadratic needs: the best trial, and one
    act=True record naming the scale and the count; nothing is warned."""
    scale = Scale(width=64)
    obs = [Observation(scale, {"lr": lr}, v) for lr, v in ((1e-3, 2.0), (3e-3, 1.5), (1e-2, 1.8))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimum, diagnostics = locate_optimum(obs, ["lr"])
    assert optimum.method == "fallback" and optimum.params["lr"] == pytest.approx(3e-3)
    assert [(d.kind, d.act, d.scale) for d in diagnostics] == [("fallback", True, scale)]
    assert diagnostics[0].message.startswith(f"only 3 finite trials at {scale!r}, fewer than the 5")
    located, none = locate_optimum(bowl_rung(scale, 1e-2), ["lr"])
    assert located.method == "quadratic" and none == ()

"""The fitting engine's parts: one rung's local quadratic, the pooled valley, power laws with a
prior (ridge and REML), and the decision under an asymmetric valley."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from transfersearch import estimate_optimum
from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.fitting.decision import MAX_SHIFT_SD, expected_excess, safe_shift
from transfersearch.fitting.laws import (
    FREE_PRIOR_SD,
    PRIOR_SD_GRID,
    LawData,
    empirical_bayes,
    gls,
    restricted_loglik,
    restricted_logliks,
    to_power_law,
)
from transfersearch.fitting.surface import RungTrials, fit_valley
from transfersearch.observations import Observation
from transfersearch.scale import Scale

SCALE = Scale(width=256)


def bowl(
    seed: int,
    n: int = 120,
    *,
    lr_opt: float = 1e-3,
    wd_opt: float = 0.1,
    noise: float = 0.002,
    asymmetry: float = 1.5,
    cliff: float = 3.0,
    scale: Scale = SCALE,
) -> list[Observation]:
    """Asymmetric valley in (log lr, log wd) with interaction, noise and a divergence cliff."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        d1 = rng.uniform(math.log(1 / 8), math.log(4))
        d2 = rng.uniform(math.log(1 / 4), math.log(4))
        lift = (math.exp(asymmetry * d1) - 1 - asymmetry * d1) / asymmetry**2
        value = 2.0 + 0.2 * lift + 0.1 * d2 * d2 + 0.03 * d1 * d2 + rng.normal(0, noise)
        if d1 > math.log(cliff):
            value = math.nan
        out.append(
            Observation(scale, {"lr": lr_opt * math.exp(d1), "wd": wd_opt * math.exp(d2)}, value)
        )
    return out


def test_quadratic_beats_grid_argmin_on_noisy_asymmetric_valley() -> None:
    quad_err, argmin_err = [], []
    for seed in range(12):
        obs = bowl(seed)
        opt = estimate_optimum(obs, ["lr", "wd"])
        assert opt.method == "quadratic"
        assert opt.n_diverged > 0
        quad_err.append(abs(math.log(opt.params["lr"] / 1e-3)))
        best = min((o for o in obs if o.usable), key=lambda o: o.value)
        argmin_err.append(abs(math.log(best.params["lr"] / 1e-3)))
    assert np.mean(quad_err) < 0.6 * np.mean(argmin_err)
    assert np.mean(quad_err) < 0.06


def test_stderr_is_calibrated_over_seeds() -> None:
    z = []
    for seed in range(30):
        opt = estimate_optimum(bowl(seed, noise=0.004), ["lr", "wd"])
        z.append(math.log(opt.params["lr"] / 1e-3) / opt.stderr["lr"])
    # Roughly standard normal: not wildly over- or under-confident.
    assert 0.4 < float(np.std(z)) < 2.0
    assert abs(float(np.mean(z))) < 1.0


def test_maximize_mirrors_minimize() -> None:
    obs = bowl(3)
    flipped = [Observation(o.scale, o.params, -o.value, o.state) for o in obs]
    low = estimate_optimum(obs, ["lr", "wd"])
    high = estimate_optimum(flipped, ["lr", "wd"], direction="maximize")
    assert high.params["lr"] == pytest.approx(low.params["lr"])
    assert high.value == pytest.approx(-low.value)


def test_fallback_with_few_trials_warns_and_returns_best_trial() -> None:
    obs = bowl(0, n=6, noise=0.0, cliff=100.0)
    with pytest.warns(TransferSearchWarning, match="fallback"):
        opt = estimate_optimum(obs, ["lr", "wd"])
    best = min(obs, key=lambda o: o.value)
    assert opt.method == "fallback"
    assert opt.params == pytest.approx(best.params)
    assert opt.regret(opt.params) is None


def test_regret_is_zero_at_optimum_and_grows_away() -> None:
    opt = estimate_optimum(bowl(1, noise=0.0), ["lr", "wd"])
    assert opt.regret(opt.params) == pytest.approx(0.0, abs=1e-12)
    far = {"lr": opt.params["lr"] * 2, "wd": opt.params["wd"]}
    regret = opt.regret(far)
    assert regret is not None and 0.01 < regret < 0.2


def test_edge_optimum_is_kept_inside_the_trials() -> None:
    # The true optimum lies above every sampled lr: the estimate stays on the sampled edge.
    obs = [o for o in bowl(2, noise=0.0, cliff=100.0) if o.params["lr"] < 5e-4]
    opt = estimate_optimum(obs, ["lr", "wd"])
    assert opt.params["lr"] <= max(o.params["lr"] for o in obs) * (1 + 1e-9)
    assert opt.at_boundary


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: estimate_optimum([], ["lr"]), "no observations"),
        (lambda: estimate_optimum(bowl(0), []), "empty"),
        (lambda: estimate_optimum(bowl(0), "lr"), "list of names"),
        (lambda: estimate_optimum(bowl(0), ["lr", "beta"]), "'beta'"),
        (lambda: estimate_optimum(bowl(0), ["lr"], direction="down"), "direction"),  # type: ignore[arg-type]
        (lambda: estimate_optimum(bowl(0), ["lr"], log_params=["mom"]), "log_params"),
        (
            lambda: estimate_optimum(bowl(0) + bowl(0, scale=Scale(width=512)), ["lr"]),
            "one scale",
        ),
        (
            lambda: estimate_optimum(
                [Observation(SCALE, {"lr": 1e-3}, math.nan) for _ in range(5)], ["lr"]
            ),
            "diverged",
        ),
    ],
)
def test_estimate_optimum_bad_input(call: object, fragment: str) -> None:
    with pytest.raises(TransferSearchError, match=fragment):
        call()  # type: ignore[operator]


def test_non_positive_value_on_log_coordinate_is_refused() -> None:
    obs = [Observation(SCALE, {"lr": 1e-3, "shift": -0.5}, 1.0)]
    with pytest.raises(TransferSearchError, match="log coordinate"):
        estimate_optimum(obs, ["lr", "shift"], log_params=["lr", "shift"])


def test_linear_parameter_is_fitted_without_log() -> None:
    rng = np.random.default_rng(0)
    obs = [
        Observation(SCALE, {"shift": float(x)}, float((x - 0.3) ** 2 + rng.normal(0, 1e-4)))
        for x in rng.uniform(-1.0, 1.0, 40)
    ]
    opt = estimate_optimum(obs, ["shift"])
    assert opt.log_params == ()
    assert opt.params["shift"] == pytest.approx(0.3, abs=0.02)


def test_metric_units_do_not_move_the_optimum() -> None:
    # Issue 11 item 15: a loss reported × 1e-12 is the same landscape; every threshold is relative.
    obs = bowl(5, noise=0.004)
    tiny = [Observation(o.scale, o.params, o.value * 1e-12, o.state) for o in obs]
    plain = estimate_optimum(obs, ["lr", "wd"])
    scaled = estimate_optimum(tiny, ["lr", "wd"])
    assert scaled.method == plain.method == "quadratic"
    assert scaled.params == pytest.approx(plain.params, rel=1e-6)
    assert scaled.value == pytest.approx(plain.value * 1e-12, rel=1e-6)


def clustered_valley(seed: int, n: int = 25, noise: float = 0.03) -> list[Observation]:
    """A diagonal valley (log lr ≈ log wd) sampled TPE-like: a tight cluster plus 5 explorers.

    The best region is the thin cluster, so a local quadratic fitted to it can run along the
    valley out to a corner of the box the explorers span and promise a deep minimum there.
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        if i < 5:
            d1, d2 = rng.uniform(-2.5, 2.5, 2)
        else:
            centre = rng.normal(0.0, 0.3)
            d1, d2 = centre + rng.normal(0.0, 0.1), centre + rng.normal(0.0, 0.1)
        value = 2.85 + 0.3 * (d1 - d2) ** 2 + 0.01 * (d1 + d2) ** 2 + rng.normal(0.0, noise)
        out.append(Observation(SCALE, {"lr": math.exp(d1), "wd": math.exp(d2)}, value))
    return out


def test_implausible_deep_minimum_at_the_box_edge_is_rejected_with_a_warning() -> None:
    # The demo's failure: the model promises 2.11 at the box edge; every trial is ≥ 2.81.
    obs = clustered_valley(3)
    with pytest.warns(TransferSearchWarning, match="fallback-implausible") as caught:
        opt = estimate_optimum(obs, ["lr", "wd"])
    message = str(caught[0].message)
    assert "width=256" in message and "best trial is" in message
    assert opt.method == "fallback-implausible"
    assert opt.hessian is None and opt.regret(opt.params) is None
    # Near the truth (the origin) and no promise below what the trials show.
    assert abs(math.log(opt.params["lr"])) < 0.5 and abs(math.log(opt.params["wd"])) < 0.5
    assert opt.value == pytest.approx(min(o.value for o in obs))
    # An honest, wide stderr: at least the spread of the good trials.
    assert min(opt.stderr.values()) > 0.05


def test_clustered_valley_never_promises_a_deep_minimum_over_seeds() -> None:
    methods, errors = [], []
    for seed in range(30):
        obs = clustered_valley(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TransferSearchWarning)
            opt = estimate_optimum(obs, ["lr", "wd"])
        values = sorted(o.value for o in obs)
        assert opt.value > values[0] - (values[-1] - values[0])
        methods.append(opt.method)
        errors.append(max(abs(math.log(opt.params["lr"])), abs(math.log(opt.params["wd"]))))
    assert methods.count("fallback-implausible") >= 5
    assert max(errors) < 1.0  # unchecked, the quadratic reached the box corners (≈2.5)


@pytest.mark.parametrize("noise", [0.002, 0.01])
def test_clean_noisy_bowls_are_never_flagged(noise: float) -> None:
    methods = []
    for seed in range(50):
        with warnings.catch_warnings():
            warnings.simplefilter("error", TransferSearchWarning)
            methods.append(estimate_optimum(bowl(seed, noise=noise), ["lr", "wd"]).method)
    assert methods.count("quadratic") == 50


# ------------------------------------------------------------------------------------------------
# Power laws with a prior on the exponents (docs/science.md §7.7)
# ------------------------------------------------------------------------------------------------
def law_data(
    z: list[float],
    variance: list[float],
    log_scales: list[list[float]],
    variables: tuple[str, ...],
    prior: list[float],
) -> LawData:
    return LawData(
        param="lr",
        log_space=True,
        z=np.array(z),
        variance=np.array(variance),
        log_scales=np.array(log_scales),
        variables=variables,
        prior=np.array(prior),
        fixed={},
    )


def test_gls_is_the_ridge_posterior_mean_of_science_7() -> None:
    # docs/science.md §7.7: β = (XᵀWX + P₀)⁻¹(XᵀWz + P₀β₀), X = [1, ℓ], P₀ = diag(0, 1/s²), β₀ = (0, e₀).
    # Three rungs: ℓ = 0, 1, 2; z = 0, 1, 3; variances 1, ½, 1 (W = diag(1, 2, 1)); e₀ = ½, s = 1.
    #   XᵀWX = [[4, 4], [4, 6]]     + P₀ = [[4, 4], [4, 7]]    (det 12)
    #   XᵀWz = [5, 8]               + P₀β₀ = [5, 8.5]
    #   β = [[7, −4], [−4, 4]]/12 · [5, 8.5] = [1/12, 14/12]; covariance [[7, −4], [−4, 4]]/12.
    data = law_data([0.0, 1.0, 3.0], [1.0, 0.5, 1.0], [[0.0], [1.0], [2.0]], ("width",), [0.5])
    fit = gls(data, prior_sd=1.0, scatter_var=0.0)
    assert fit.intercept == pytest.approx(1.0 / 12.0, abs=1e-12)
    assert fit.exponents == pytest.approx([14.0 / 12.0], abs=1e-12)
    np.testing.assert_allclose(fit.covariance, np.array([[7.0, -4.0], [-4.0, 4.0]]) / 12.0)
    assert fit.prior_sd == 1.0 and fit.fitted == (0,)
    # The scatter τ² adds to every rung's variance: τ² = 1 gives W = diag(½, ⅔, ½).
    wide = gls(data, prior_sd=1.0, scatter_var=1.0)
    weights = np.diag([0.5, 2.0 / 3.0, 0.5])
    design = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    gram = design.T @ weights @ design + np.diag([0.0, 1.0])
    beta = np.linalg.solve(gram, design.T @ weights @ data.z + np.array([0.0, 0.5]))
    assert [wide.intercept, *wide.exponents] == pytest.approx(list(beta), abs=1e-12)


def test_gls_with_zero_prior_sd_holds_the_prior_exponents() -> None:
    # s = 0: the exponent is the prior's, the intercept the weighted mean of z − e₀ℓ:
    # z − ½ℓ = (0, ½, 2) weighted (1, 2, 1) → 3/4, with variance 1/Σw = 1/4.
    data = law_data([0.0, 1.0, 3.0], [1.0, 0.5, 1.0], [[0.0], [1.0], [2.0]], ("width",), [0.5])
    fit = gls(data, prior_sd=0.0, scatter_var=0.0)
    assert fit.exponents == pytest.approx([0.5])
    assert fit.intercept == pytest.approx(0.75)
    assert fit.fitted == ()
    np.testing.assert_allclose(fit.covariance, [[0.25]])
    mean, variance = fit.predict(np.array([3.0]))
    assert mean == pytest.approx(0.75 + 1.5) and variance == pytest.approx(0.25)


def test_free_law_recovers_exponents_and_predicts() -> None:
    scales = [
        Scale(width=w, dataset_size=n) for w, n in [(64, 1e5), (128, 4e5), (256, 2e5), (512, 8e5)]
    ]
    logs = [[math.log(s["width"]), math.log(s["dataset_size"])] for s in scales]
    z = [math.log(0.5) - 1.0 * lw + 0.2 * ln for lw, ln in logs]
    data = law_data(z, [1e-4] * 4, logs, ("width", "dataset_size"), [0.0, 0.0])
    law = to_power_law(data, gls(data, FREE_PRIOR_SD, 0.0), "free", ("width", "dataset_size"))
    assert law.exponents["width"] == pytest.approx(-1.0, abs=1e-4)
    assert law.exponents["dataset_size"] == pytest.approx(0.2, abs=1e-4)
    assert law.coefficient == pytest.approx(0.5, rel=1e-3)
    target = Scale(width=4096, dataset_size=1e7)
    assert law.predict(target) == pytest.approx(0.5 * 4096**-1.0 * 1e7**0.2, rel=1e-3)
    assert law.covariance.shape == (3, 3)
    assert law.names == ("intercept", "width", "dataset_size")
    assert law.r_squared == pytest.approx(1.0)
    with pytest.raises(TransferSearchError, match="lacks"):
        law.predict(Scale(depth=3))


def test_unseen_and_collinear_directions_stay_at_the_prior() -> None:
    # depth is constant over the ladder: its exponent is held at the prior 0.3, outside the
    # covariance. tokens = 20·width: the data fix only e_width + e_tokens = −0.5; their difference
    # keeps the prior (0) and its prior variance.
    widths = [64.0, 128.0, 256.0, 512.0]
    logs = [[math.log(w), math.log(20 * w), math.log(4.0)] for w in widths]
    z = [-0.5 * math.log(w) + 0.3 * math.log(4.0) for w in widths]
    data = law_data(z, [1e-6] * 4, logs, ("width", "tokens", "depth"), [0.0, 0.0, 0.3])
    fit = gls(data, prior_sd=1.0, scatter_var=0.0)
    e_width, e_tokens, e_depth = fit.exponents
    assert e_width + e_tokens == pytest.approx(-0.5, abs=1e-4)
    assert e_width == pytest.approx(e_tokens, abs=1e-4)
    assert e_depth == 0.3 and fit.fitted == (0, 1) and fit.covariance.shape == (3, 3)
    # e_width − e_tokens, the direction no rung measured: the prior across the span has sd
    # min(s, 0.5) = 0.5 per exponent (docs/science.md §7.4), so √2 · 0.5
    difference = np.array([0.0, 1.0, -1.0])
    assert math.sqrt(difference @ fit.covariance @ difference) == pytest.approx(
        math.sqrt(2.0) * 0.5, rel=1e-3
    )
    law = to_power_law(data, fit, "shrunk", ("width", "tokens", "depth"))
    assert law.shrunk == ("depth",) and law.names == ("intercept", "width", "tokens")
    # The prediction at depth 32 carries the prior's exponent, not its variance.
    mean, variance = fit.predict(
        np.array([math.log(4096.0), math.log(20 * 4096.0), math.log(32.0)])
    )
    assert mean == pytest.approx(-0.5 * math.log(4096.0) + 0.3 * math.log(32.0), abs=1e-3)
    assert variance < 1.0


def test_empirical_bayes_chooses_no_drift_only_without_drift() -> None:
    # REML over PRIOR_SD_GRID: optima scattered by their own error around a constant give s = 0;
    # a clear drift (0.8 per unit log-scale, 6 rungs over 3 units) gives a positive s.
    log_scales = np.linspace(0.0, 3.0, 6)[:, None]
    still, moving = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        noise = rng.normal(0.0, 0.1, 6)
        flat = law_data(list(0.2 + noise), [0.01] * 6, log_scales.tolist(), ("width",), [0.0])
        drift = law_data(
            list(0.2 + 0.8 * log_scales[:, 0] + noise), [0.01] * 6, log_scales.tolist(),
            ("width",), [0.0],
        )  # fmt: skip
        still.append(empirical_bayes(flat, PRIOR_SD_GRID)[0])
        moving.append(empirical_bayes(drift, PRIOR_SD_GRID)[0])
    assert still.count(0.0) >= 8
    assert min(moving) >= 0.3


def test_reml_is_the_likelihood_of_the_contrasts_by_hand() -> None:
    # Two rungs, ℓ = 0, 1; z = 0, 1; variances v = 1, 1; prior e₀ = 0; flat intercept.
    # The only contrast orthogonal to 1 is k = (1, −1)/√2: kᵀr = −1/√2, Var = kᵀCk.
    # C = diag(1 + τ²) + s²ℓ̃ℓ̃ᵀ with ℓ̃ = ℓ − ½ = (−½, ½): kᵀCk = 1 + τ² + s²/2.
    # REML = log N(kᵀr; 0, kᵀCk) up to a constant: −½[log(kᵀCk) + (½)/(kᵀCk)].
    data = law_data([0.0, 1.0], [1.0, 1.0], [[0.0], [1.0]], ("width",), [0.0])

    def by_hand(s: float, tau2: float) -> float:
        var = 1.0 + tau2 + s**2 / 2.0
        return -0.5 * (math.log(var) + 0.5 / var)

    pairs = [(0.0, 0.0), (1.0, 0.0), (0.3, 2.0), (2.0, 1.0)]
    ours = [restricted_loglik(data, s, t) for s, t in pairs]
    hand = [by_hand(s, t) for s, t in pairs]
    # equal up to one constant (the 2π terms and log 1ᵀ1, the same for every (s, τ²))
    np.testing.assert_allclose(np.array(ours) - ours[0], np.array(hand) - hand[0], atol=1e-12)
    batched = restricted_logliks(
        data, np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    )
    np.testing.assert_allclose(batched, ours, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# The decision under an asymmetric valley (docs/science.md §7.8)
# ------------------------------------------------------------------------------------------------
def test_symmetric_valley_decides_the_law_point() -> None:
    hessian = np.array([[2.0, 0.3], [0.3, 1.0]])
    shift = safe_shift(np.array([0.5, 0.2]), hessian, np.zeros(2))
    np.testing.assert_array_equal(shift, np.zeros(2))


def test_steeper_upper_wall_shifts_down_by_the_expected_loss_root() -> None:
    # 1-D, L = ½aδ² + ½b·max(δ, 0)², δ = x − x*, x* ~ N(μ, σ²), x = μ + m:
    # dE[L]/dm = a·m + b·(mΦ(m/σ) + σφ(m/σ)) = 0.
    a, b = 1.0, 3.0
    shifts = []
    for sigma in (0.1, 0.3, 1.0):

        def gradient(m: float, sigma: float = sigma) -> float:
            return a * m + b * (m * norm.cdf(m / sigma) + sigma * norm.pdf(m / sigma))

        root = brentq(gradient, -MAX_SHIFT_SD * sigma, 0.0, xtol=1e-14)
        sd, hessian, wall = np.array([sigma]), np.array([[a]]), np.array([b])
        shift = safe_shift(sd, hessian, wall)
        assert shift[0] == pytest.approx(root, abs=1e-9)
        assert shift[0] < 0.0
        assert expected_excess(shift, sd, hessian, wall) < expected_excess(
            np.zeros(1), sd, hessian, wall
        )
        shifts.append(shift[0])
    assert abs(shifts[0]) < abs(shifts[1]) < abs(shifts[2])


def test_a_vague_prediction_moves_the_decision_no_further_than_the_valley_was_measured() -> None:
    # σ = 5 log units: the expected-loss root is m ≈ −0.55σ = −2.75 (a factor e⁻²·⁷⁵ ≈ 1/16),
    # growing with σ; the valley's trials reached only 1.5 from its optimum, so that is as far
    # as the decision goes.
    sd, hessian, wall = np.array([5.0]), np.array([[1.0]]), np.array([3.0])
    free = safe_shift(sd, hessian, wall)
    held = safe_shift(sd, hessian, wall, reach=np.array([1.5]))
    assert free[0] == pytest.approx(-2.7458, abs=1e-3)
    assert held[0] == pytest.approx(-1.5)


def test_the_valley_reports_how_far_its_trials_reach() -> None:
    trials, _ = valley_rungs(0, n=40, noise=0.01)
    valley = fit_valley(trials)
    assert valley is not None
    # the sweeps span ±1.5 around each rung (uniform); a best region is a part of that
    assert np.all(valley.reach > 0.2) and np.all(valley.reach < 1.6)


def test_decision_leaves_an_unswept_coordinate_alone() -> None:
    hessian = np.array([[1.0, np.inf], [np.inf, np.inf]])
    shift = safe_shift(np.array([0.3, 0.3]), hessian, np.array([3.0, 3.0]))
    assert shift[0] < 0.0 and shift[1] == 0.0


# ------------------------------------------------------------------------------------------------
# The pooled valley (docs/science.md §7.1)
# ------------------------------------------------------------------------------------------------
CURVATURE = np.array([[1.0, 0.2], [0.2, 0.6]])


def valley_rungs(
    seed: int, n: int = 10, noise: float = 0.1, wall: float = 0.0, rungs: int = 5
) -> tuple[list[RungTrials], np.ndarray]:
    """Rungs of one valley ½δᵀHδ + ½·wall·max(δ₀, 0)², each with its own known centre and depth;
    ``n`` noisy trials per rung, the sweep not centred on the truth."""
    rng = np.random.default_rng(seed)
    trials, centres = [], []
    for s in range(rungs):
        centre = np.array([-0.4 * s, 0.2 * s]) + rng.normal(0.0, 0.1, 2)
        coords = centre + rng.normal(0.0, 0.3, 2) + rng.uniform(-1.5, 1.5, (n, 2))
        delta = coords - centre
        values = (
            0.1 * s
            + 0.5 * np.einsum("ij,jk,ik->i", delta, CURVATURE, delta)
            + 0.5 * wall * np.clip(delta[:, 0], 0.0, None) ** 2
            + rng.normal(0.0, noise, n)
        )
        trials.append(RungTrials(coords, values))
        centres.append(centre)
    return trials, np.array(centres)


def test_pooled_valley_places_centres_better_than_each_rung_alone() -> None:
    pooled_error, alone_error = [], []
    for seed in range(20):
        trials, centres = valley_rungs(seed)
        valley = fit_valley(trials)
        assert valley is not None and valley.pooled.all()
        pooled_error.append(np.linalg.norm(valley.centers - centres, axis=1).mean())
        for s, (rung, centre) in enumerate(zip(trials, centres, strict=True)):
            obs = [
                Observation(Scale(width=64 * 2**s), {"x": float(x), "y": float(y)}, float(v))
                for (x, y), v in zip(rung.coords, rung.values, strict=True)
            ]
            alone = estimate_optimum(obs, ["x", "y"], log_params=[], warn=False)
            alone_error.append(
                float(np.hypot(alone.coords["x"] - centre[0], alone.coords["y"] - centre[1]))
            )
    assert float(np.mean(pooled_error)) < 0.8 * float(np.mean(alone_error))


def test_pooled_valley_finds_the_steeper_upper_wall() -> None:
    for seed in range(3):
        trials, centres = valley_rungs(seed, n=20, noise=0.005, wall=3.0)
        steep = fit_valley(trials)
        assert steep is not None
        assert steep.wall[0] == pytest.approx(3.0, rel=0.3)
        assert abs(steep.wall[1]) < 0.3
        np.testing.assert_allclose(steep.hessian, CURVATURE, atol=0.15)
        assert np.abs(steep.centers - centres).max() < 0.1
        symmetric = fit_valley(valley_rungs(seed, n=20, noise=0.005)[0])
        assert symmetric is not None and np.abs(symmetric.wall).max() < 0.3


def test_valley_declines_a_rung_too_small_to_place_its_centre() -> None:
    """With the curvature shared a rung places its depth and centre, 1 + d numbers: 3 trials
    spanning both coordinates do (docs/science.md §7.1), 2 trials in 2-D do not."""
    trials, centres = valley_rungs(0, rungs=3, noise=0.0)
    trials[1] = RungTrials(trials[1].coords[:2], trials[1].values[:2])  # d + 1 = 3 needed
    valley = fit_valley(trials)
    assert valley is not None
    assert valley.pooled.tolist() == [True, False, True]
    assert np.isnan(valley.centers[1]).all()
    assert fit_valley(trials[:2]) is None  # a single poolable rung is no valley
    three, _ = valley_rungs(0, rungs=3, noise=0.0)
    three[1] = RungTrials(three[1].coords[:3], three[1].values[:3])
    placed = fit_valley(three)
    assert placed is not None and placed.pooled.all()
    located = placed.censored[1] == 0
    assert np.allclose(placed.centers[1, located], centres[1, located], atol=1e-6)
    # a centre more than a range past the three trials is only a bound, and a true one
    side = placed.censored[1, ~located]
    assert len(side) and np.all(side * (centres[1, ~located] - placed.edges[1, ~located]) > 0)


def test_valley_on_an_exact_quadratic_is_exact_and_sure_of_it() -> None:
    trials, centres = valley_rungs(0, n=12, noise=0.0)
    valley = fit_valley(trials)
    assert valley is not None
    np.testing.assert_allclose(valley.centers, centres, atol=1e-9)
    # no noise and no misfit: only the numerical floor (1e-3 of a trial spacing) is left
    assert np.sqrt(np.diagonal(valley.center_cov, axis1=1, axis2=2)).max() < 0.01
    assert valley.shared_bias_var.max() < 1e-12


def skewed_rungs(
    seed: int, n: int = 60, noise: float = 0.002
) -> tuple[list[RungTrials], np.ndarray]:
    """Rungs of a valley that is not quadratic: an exponential wall above the optimum in u₀ and
    below it in u₁ (the shape of a learning-rate and a timescale sweep), uneven sweeps."""
    rng = np.random.default_rng(seed)
    trials, centres = [], []
    for s in range(5):
        centre = np.array([-0.4 * s, 0.2 * s])
        delta = rng.uniform([-2.0, -1.4], [1.4, 1.4], (n, 2)) + rng.normal(0.0, 0.3, 2)
        up = (np.exp(1.5 * delta[:, 0]) - 1.0 - 1.5 * delta[:, 0]) / 1.5**2
        down = np.exp(-delta[:, 1]) - 1.0 + delta[:, 1]
        values = 0.2 * up + 0.2 * down + rng.normal(0.0, noise, n)
        trials.append(RungTrials(centre + delta, values))
        centres.append(centre)
    return trials, np.array(centres)


def test_valley_stderr_counts_the_quadratics_misfit() -> None:
    # The noise is tiny, so nearly all of a centre's error is the quadratic's bias on a skewed
    # valley. Measured over these seeds: the delta method alone gives z-scores of rms 5.8 (no
    # |z| < 1.96); with the misfit contrast of a doubled region, rms 1.5 (78% within 1.96).
    z = []
    for seed in range(6):
        trials, centres = skewed_rungs(seed)
        valley = fit_valley(trials)
        assert valley is not None
        own = np.diagonal(valley.center_cov, axis1=1, axis2=2)
        sd = np.sqrt(own + valley.shared_bias_var)  # each rung's own error and the shared bias
        z.extend(((valley.centers - centres) / sd).ravel())
        assert valley.shared_bias_var.max() > 0.0  # one skewed shape: a bias every rung shares
    z_array = np.abs(np.array(z))
    assert float(np.sqrt(np.mean(z_array**2))) < 2.0
    assert float(np.mean(z_array < 1.96)) > 0.7

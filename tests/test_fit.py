"""One rung's optimum through the public path (:func:`transfersearch.estimate_optimum`, the one
model on a single rung) and the rungs' optima that :func:`transfersearch.extrapolate` reads off
the one model of every trial (docs/science.md §7)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from transfersearch import estimate_optimum, extrapolate
from transfersearch.errors import TransferSearchError, TransferSearchWarning
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
    """Asymmetric valley in (log lr, log wd) with interaction, noise and a divergence cliff.

    The optimum is (lr_opt, wd_opt): the gradient of the lift, the square and the interaction
    all vanish at d = 0, and the curvature there is [[0.2, 0.03], [0.03, 0.2]]."""
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


@pytest.mark.xfail(
    reason=(
        "measured with the skew (docs/science.md §7.1): the one model's mean |log lr error| "
        "over seeds 0-11 is 0.084 (< 0.6x the best trial's, met; the symmetric one model had "
        "0.263, the staged engine's local quadratic < 0.06): the cubic-and-tangent shape is an "
        "approximation of this exponential wall"
    ),
    strict=True,
)
def test_the_model_beats_the_grid_argmin_on_a_noisy_asymmetric_valley() -> None:
    model_err, argmin_err = [], []
    for seed in range(12):
        obs = bowl(seed)
        opt = estimate_optimum(obs, ["lr", "wd"])
        assert opt.method == "pooled"
        assert opt.n_diverged > 0
        model_err.append(abs(math.log(opt.params["lr"] / 1e-3)))
        best = min((o for o in obs if o.usable), key=lambda o: o.value)
        argmin_err.append(abs(math.log(best.params["lr"] / 1e-3)))
    assert np.mean(model_err) < 0.6 * np.mean(argmin_err)
    assert np.mean(model_err) < 0.06


@pytest.mark.xfail(
    reason=(
        "measured with the skew (docs/science.md §7.1) over seeds 0-29 (noise 0.004): "
        "z = log(lr/1e-3)/stderr has mean -3.0 (was -13.9 with the symmetric valley): the "
        "cubic-and-tangent shape leaves a small bias below the optimum that the read-out's "
        "stderr does not cover"
    ),
    strict=True,
)
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


def test_a_few_trials_go_through_the_same_model_without_a_fallback() -> None:
    # Six trials in 2-D (fewer than a full quadratic's 6 + 1): no fallback, no warning; the
    # estimate is the one model's, with a valley (regret defined) and a wide, finite stderr.
    obs = bowl(0, n=6, noise=0.0, cliff=100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TransferSearchWarning)
        opt = estimate_optimum(obs, ["lr", "wd"])
    assert opt.method == "pooled"
    assert opt.n_trials == opt.n_used == 6
    assert opt.regret(opt.params) == pytest.approx(0.0, abs=1e-12)
    assert all(0.0 < s < math.inf for s in opt.stderr.values())
    lows = [math.log(o.params["lr"]) for o in obs]
    assert min(lows) - 1.0 < math.log(opt.params["lr"]) < max(lows) + 1.0


def test_regret_is_zero_at_optimum_and_grows_away() -> None:
    opt = estimate_optimum(bowl(1, noise=0.0), ["lr", "wd"])
    assert opt.regret(opt.params) == pytest.approx(0.0, abs=1e-12)
    far = {"lr": opt.params["lr"] * 2, "wd": opt.params["wd"]}
    regret = opt.regret(far)
    assert regret is not None and 0.01 < regret < 0.2


def test_an_optimum_past_the_trials_edge_is_noted(caplog: pytest.LogCaptureFixture) -> None:
    # The true optimum (lr 1e-3) lies 0.72 log units above every sampled lr of a bowl a
    # quadratic holds: the estimate is read off the valley's shape past the edge (near the
    # truth), flagged, and a note (kind 'edge') says so.
    obs = [o for o in bowl(2, cliff=100.0, asymmetry=0.01) if o.params["lr"] < 5e-4]
    edge = max(o.params["lr"] for o in obs)
    with caplog.at_level("INFO"), warnings.catch_warnings():
        warnings.simplefilter("error", TransferSearchWarning)  # a note, not a warning
        opt = estimate_optimum(obs, ["lr", "wd"])
    assert opt.at_boundary
    assert opt.past_edge["lr"] == pytest.approx(math.log(opt.params["lr"] / edge))
    assert opt.past_edge["lr"] > opt.stderr["lr"]
    assert "wd" not in opt.past_edge
    assert "lies past the trials' edge" in caplog.text and "sweep further up" in caplog.text
    assert abs(math.log(opt.params["lr"] / 1e-3)) < 2.0 * opt.stderr["lr"]
    assert "did not settle" not in caplog.text


def test_a_one_rung_fit_that_cycles_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """Only the gentle side of an exp-shaped wall sampled (nearly straight): the noise and
    valley alternation cycles on one rung too, and ``estimate_optimum`` logs the note that
    ``extrapolate`` puts in its diagnostics."""
    obs = [o for o in bowl(2, cliff=100.0) if o.params["lr"] < 5e-4]
    with caplog.at_level("INFO"), warnings.catch_warnings():
        warnings.simplefilter("error", TransferSearchWarning)  # a note, not a warning
        estimate_optimum(obs, ["lr", "wd"])
    assert "did not settle in" in caplog.text


@pytest.mark.xfail(
    reason=(
        "measured 2026-11-27: with the bowl's default noise, lr < 5e-4 and seeds 0-7, every fit "
        "cycles (the left side of the exp-shaped wall is nearly straight: the fitted curvature "
        "flips between small and large); solved at the cycle's most likely state the lr optimum "
        "lies 0.9-1.3 log units below the truth, inside the trials' range (where the last of "
        "100 rounds fell, it was 2 log units past the truth in 5 of 8 seeds)"
    ),
    strict=True,
)
def test_an_edge_optimum_is_not_extrapolated_far_past_the_truth() -> None:
    errors = []
    for seed in range(8):
        obs = [o for o in bowl(seed, cliff=100.0) if o.params["lr"] < 5e-4]
        opt = estimate_optimum(obs, ["lr", "wd"])
        errors.append(math.log(opt.params["lr"] / 1e-3))
    assert max(abs(e) for e in errors) < 1.0, errors


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
            "finite value",
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


@pytest.mark.parametrize(("factor", "offset"), [(1.0, 1000.0), (1e3, 0.0), (1e-3, -5.0)])
def test_metric_units_do_not_move_the_optimum(factor: float, offset: float) -> None:
    # A loss reported in other units (scaled, shifted) is the same landscape. The reweighting
    # stops once σ moves by less than its own standard error, so agreement is to that
    # tolerance's effect (~1e-3), not round-off.
    obs = bowl(5, noise=0.004)
    moved = [Observation(o.scale, o.params, o.value * factor + offset, o.state) for o in obs]
    plain = estimate_optimum(obs, ["lr", "wd"])
    other = estimate_optimum(moved, ["lr", "wd"])
    assert other.params == pytest.approx(plain.params, rel=1e-3)
    assert other.stderr == pytest.approx(plain.stderr, rel=2e-2)
    assert other.value == pytest.approx(plain.value * factor + offset, rel=1e-4)


def test_a_tiny_metric_unit_does_not_move_the_optimum() -> None:
    # Issue 11 item 15: a loss reported × 1e-12 is the same landscape; every threshold is relative.
    obs = bowl(5, noise=0.004)
    tiny = [Observation(o.scale, o.params, o.value * 1e-12, o.state) for o in obs]
    plain = estimate_optimum(obs, ["lr", "wd"])
    scaled = estimate_optimum(tiny, ["lr", "wd"])
    # the noise fit stops at a relative tolerance (Nelder-Mead on log σ, log ρ): 1e-4
    assert scaled.params == pytest.approx(plain.params, rel=1e-4)
    assert scaled.value == pytest.approx(plain.value * 1e-12, rel=1e-4)


def clustered_valley(seed: int, n: int = 25, noise: float = 0.03) -> list[Observation]:
    """A diagonal valley (log lr ≈ log wd) sampled TPE-like: a tight cluster plus 5 explorers.

    The best region is the thin cluster, so a quadratic fitted to it can run along the valley
    out to a corner of the box the explorers span and promise a deep minimum there.
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


def test_clustered_valley_never_promises_a_deep_minimum_over_seeds() -> None:
    for seed in range(30):
        obs = clustered_valley(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TransferSearchWarning)
            opt = estimate_optimum(obs, ["lr", "wd"])
        values = sorted(o.value for o in obs)
        assert opt.value > values[0] - (values[-1] - values[0])


@pytest.mark.xfail(
    reason=(
        "measured at 47c055f over seeds 0-29: the largest |log error| of the optimum is 1.52 "
        "(mean 0.23); the staged engine's implausibility check kept it under 1.0"
    ),
    strict=True,
)
def test_clustered_valley_keeps_the_optimum_near_the_cluster_over_seeds() -> None:
    errors = []
    for seed in range(30):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TransferSearchWarning)
            opt = estimate_optimum(clustered_valley(seed), ["lr", "wd"])
        errors.append(max(abs(math.log(opt.params["lr"])), abs(math.log(opt.params["wd"]))))
    assert max(errors) < 1.0  # unchecked, a quadratic reaches the box corners (≈2.5)


@pytest.mark.parametrize("noise", [0.002, 0.01])
def test_clean_noisy_bowls_are_never_flagged(noise: float) -> None:
    for seed in range(50):
        with warnings.catch_warnings():
            warnings.simplefilter("error", TransferSearchWarning)
            opt = estimate_optimum(bowl(seed, noise=noise), ["lr", "wd"])
        assert opt.method == "pooled"


# ------------------------------------------------------------------------------------------------
# The rungs' optima read off the one model of every trial (docs/science.md §7.1)
# ------------------------------------------------------------------------------------------------
CURVATURE = np.array([[1.0, 0.2], [0.2, 0.6]])
TARGET = Scale(width=64 * 2**6)


def valley_rungs(
    seed: int, n: int = 10, noise: float = 0.1, rungs: int = 5
) -> tuple[list[Observation], np.ndarray]:
    """Rungs of one valley ½δᵀHδ (linear coordinates x, y), each with its own known centre
    (drifting with width, scattered by 0.1) and depth; ``n`` noisy trials per rung, the sweep not
    centred on the truth."""
    rng = np.random.default_rng(seed)
    obs, centres = [], []
    for s in range(rungs):
        centre = np.array([-0.4 * s, 0.2 * s]) + rng.normal(0.0, 0.1, 2)
        coords = centre + rng.normal(0.0, 0.3, 2) + rng.uniform(-1.5, 1.5, (n, 2))
        delta = coords - centre
        values = (
            0.1 * s
            + 0.5 * np.einsum("ij,jk,ik->i", delta, CURVATURE, delta)
            + rng.normal(0.0, noise, n)
        )
        scale = Scale(width=64 * 2**s)
        obs += [
            Observation(scale, {"x": float(x), "y": float(y)}, float(v))
            for (x, y), v in zip(coords, values, strict=True)
        ]
        centres.append(centre)
    return obs, np.array(centres)


def _centres(obs: list[Observation]) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TransferSearchWarning)
        res = extrapolate(obs, target=TARGET, params=["x", "y"], log_params=[])
    assert all(o.method == "pooled" for o in res.optima)
    return np.array([[o.coords["x"], o.coords["y"]] for o in res.optima])


def test_pooled_rungs_place_centres_better_than_each_rung_alone() -> None:
    pooled_error, alone_error = [], []
    for seed in range(10):
        obs, centres = valley_rungs(seed)
        pooled_error.append(np.linalg.norm(_centres(obs) - centres, axis=1).mean())
        for s, centre in enumerate(centres):
            rung = [o for o in obs if o.scale["width"] == 64 * 2**s]
            alone = estimate_optimum(rung, ["x", "y"], log_params=[], warn=False)
            alone_error.append(
                float(np.hypot(alone.coords["x"] - centre[0], alone.coords["y"] - centre[1]))
            )
    # measured at 47c055f: 0.087 against 0.176 (20 seeds)
    assert float(np.mean(pooled_error)) < 0.8 * float(np.mean(alone_error))


def test_an_exact_quadratic_gives_back_each_rung_s_centre() -> None:
    # No noise and no misfit: the centres to within the priors' pull (the box prior and the
    # scatter about the law keep a finite weight; measured 1.1e-4), and sure of it.
    obs, centres = valley_rungs(0, n=12, noise=0.0)
    np.testing.assert_allclose(_centres(obs), centres, atol=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TransferSearchWarning)
        res = extrapolate(obs, target=TARGET, params=["x", "y"], log_params=[])
    assert max(max(o.stderr.values()) for o in res.optima) < 0.01


def skewed_rungs(
    seed: int, n: int = 60, noise: float = 0.002
) -> tuple[list[Observation], np.ndarray]:
    """Rungs of a valley that is not quadratic: an exponential wall above the optimum in x and
    below it in y (the shape of a learning-rate and a timescale sweep), uneven sweeps."""
    rng = np.random.default_rng(seed)
    obs, centres = [], []
    for s in range(5):
        centre = np.array([-0.4 * s, 0.2 * s])
        delta = rng.uniform([-2.0, -1.4], [1.4, 1.4], (n, 2)) + rng.normal(0.0, 0.3, 2)
        up = (np.exp(1.5 * delta[:, 0]) - 1.0 - 1.5 * delta[:, 0]) / 1.5**2
        down = np.exp(-delta[:, 1]) - 1.0 + delta[:, 1]
        values = 0.2 * up + 0.2 * down + rng.normal(0.0, noise, n)
        scale = Scale(width=64 * 2**s)
        obs += [
            Observation(scale, {"x": float(x), "y": float(y)}, float(v))
            for (x, y), v in zip(centre + delta, values, strict=True)
        ]
        centres.append(centre)
    return obs, np.array(centres)


def _rung_z() -> np.ndarray:
    """|read-out − true centre| / stderr for every rung and coordinate of six skewed ladders."""
    z = []
    for seed in range(6):
        obs, centres = skewed_rungs(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TransferSearchWarning)
            res = extrapolate(obs, target=TARGET, params=["x", "y"], log_params=[])
        for optimum, centre in zip(res.optima, centres, strict=True):
            z += [(optimum.coords[p] - c) / optimum.stderr[p] for p, c in zip("xy", centre)]
    return np.abs(np.array(z))


def test_rung_stderr_counts_the_quadratics_misfit() -> None:
    # The noise is tiny, so nearly all of a centre's error is the quadratic's bias on a skewed
    # valley; an honest stderr covers it.
    assert float(np.sqrt(np.mean(_rung_z() ** 2))) < 2.0


@pytest.mark.xfail(
    reason=(
        "measured: 26 of 36 read-outs within 1.96 stderr with the plain-likelihood noise fit, 24 "
        "of 36 (0.67) with the leverage-REML one (docs/science.md §7.2): the bias of a skewed "
        "valley's centre that the posterior does not carry"
    ),
    strict=True,
)
def test_rung_stderr_covers_seven_in_ten_read_outs() -> None:
    assert float(np.mean(_rung_z() < 1.96)) > 0.7

"""The stability boundary (docs/science.md §8): each rung's censored observation, the censored law
against a brute-force maximisation of its log posterior, and ``extrapolate()``'s decision kept
within the boundary predicted at the target."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

import transfersearch as ts
from transfersearch.fitting.boundary import (
    EXPONENT_PRIOR_SDS,
    SCATTER_PRIOR_LOG_SD,
    SCATTER_PRIOR_MEDIAN,
    BoundaryRung,
    StabilityBoundary,
    censored_bound,
    fit_boundaries,
    fit_boundary_law,
)
from transfersearch.fitting.decision import (
    MAX_P_DIVERGE,
    boundary_share,
    p_diverge,
    stability_limits,
)
from transfersearch.fitting.laws import UNSEEN_PRIOR_SD
from transfersearch.observations import Observation
from transfersearch.scale import Scale

RUNG = Scale(width=64)


def _bound(
    stable: list[float], diverged: list[float], side: str = "upper"
) -> tuple[float, float, bool]:
    x = np.log(np.array(stable + diverged, dtype=float))
    flags = np.array([False] * len(stable) + [True] * len(diverged))
    found = censored_bound(x, flags, side, RUNG)  # type: ignore[arg-type]
    return math.exp(found.low), math.exp(found.high), found.overlap


@pytest.mark.parametrize(
    ("stable", "diverged", "expected"),
    [
        ([1, 2, 4], [8], (4, 8, False)),  # interval-censored: finite below, diverged above
        ([1, 2, 4, 8], [], (8, math.inf, False)),  # right-censored: no trial diverged
        ([], [1, 2], (0, 1, False)),  # left-censored: every trial diverged
        ([2, 4], [1, 8], (4, 8, False)),  # a failure below every stable trial is a crash
        ([1, 2, 4], [2, 8], (1, 8, True)),  # overlap: down to the stable value below it
        ([1, 2, 4, 16], [8], (4, math.inf, True)),  # a stable run above a diverged one
    ],
)
def test_each_rung_bounds_its_boundary_by_its_trials(
    stable: list[float], diverged: list[float], expected: tuple[float, float, bool]
) -> None:
    low, high, overlap = _bound(stable, diverged)
    assert low == pytest.approx(expected[0])
    assert high == pytest.approx(expected[1])
    assert overlap is expected[2]


def test_a_lower_boundary_mirrors_the_upper_one() -> None:
    # diverged at the small values: the boundary lies between 2 (diverged) and 4 (stable)
    x = np.log(np.array([4.0, 8.0, 16.0, 1.0, 2.0]))
    flags = np.array([False, False, False, True, True])
    found = censored_bound(x, flags, "lower", RUNG)
    assert (math.exp(found.low), math.exp(found.high)) == pytest.approx((2.0, 4.0))


def _log_posterior(
    a: np.ndarray,
    e: np.ndarray,
    omega: np.ndarray,
    low,
    high,
    ell,
    prior_sd: float = UNSEEN_PRIOR_SD,
) -> np.ndarray:
    """The censored law's log posterior written out again with scipy.stats (broadcasting), the
    exponent prior's normalisation ``−log s`` included (it weighs the prior sds against each other)."""
    sigma = np.exp(omega)
    total = np.zeros(np.broadcast(a, e, omega).shape)
    for lo, hi, el in zip(low, high, ell, strict=True):
        mu = a + e * el
        total = total + np.log(norm.cdf((hi - mu) / sigma) - norm.cdf((lo - mu) / sigma))
    total = total - 0.5 * e**2 / prior_sd**2 - math.log(prior_sd)
    return total - 0.5 * (omega - math.log(SCATTER_PRIOR_MEDIAN)) ** 2 / SCATTER_PRIOR_LOG_SD**2


def test_the_censored_law_is_the_brute_force_maximum_of_its_posterior() -> None:
    """Three rungs on a factor-2 grid: an interval at the smallest, a right-censored one (nothing
    diverged), a left-censored one (everything diverged); the MAP and the Laplace covariance
    against a grid search and finite differences of the posterior written out independently."""
    step = math.log(2.0)
    low = np.array([math.log(0.02), math.log(0.01), -math.inf])
    high = np.array([math.log(0.02) + step, math.inf, math.log(0.008)])
    ell = np.log(np.array([1.0, 4.0, 16.0]))
    theta, cov = fit_boundary_law(low, high, ell[:, None], prior_mean=np.zeros(1))

    a_grid = np.linspace(-5.0, -2.0, 151)[:, None, None]
    e_grid = np.linspace(-1.5, 1.0, 126)[None, :, None]
    w_grid = np.linspace(-4.0, 0.5, 91)[None, None, :]
    coarse = _log_posterior(a_grid, e_grid, w_grid, low, high, ell)
    i, j, k = np.unravel_index(np.argmax(coarse), coarse.shape)
    best = np.array([a_grid[i, 0, 0], e_grid[0, j, 0], w_grid[0, 0, k]])
    fine = [np.linspace(c - h, c + h, 81) for c, h in zip(best, (0.02, 0.02, 0.05), strict=True)]
    refined = _log_posterior(
        fine[0][:, None, None], fine[1][None, :, None], fine[2][None, None, :], low, high, ell
    )
    i, j, k = np.unravel_index(np.argmax(refined), refined.shape)
    brute = np.array([fine[0][i], fine[1][j], fine[2][k]])
    assert theta == pytest.approx(brute, abs=2e-3)

    h = 1e-4
    hess = np.empty((3, 3))
    for r in range(3):
        for c in range(3):
            shifts = []
            for sr, sc in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                point = theta.copy()
                point[r] += sr * h
                point[c] += sc * h
                shifts.append(
                    sr * sc * float(_log_posterior(point[0], point[1], point[2], low, high, ell))
                )
            hess[r, c] = -sum(shifts) / (4 * h * h)
    assert cov == pytest.approx(np.linalg.inv(hess), rel=1e-3, abs=1e-6)


def test_the_predictive_is_the_posterior_integrated_by_brute_force() -> None:
    """P(b < x) at the target = Σ_s ∫ post_s(θ)·Φ((x − a − e·ℓ_t)/σ) dθ / Σ_s ∫ post_s(θ) over the
    exponents' prior sds s (model averaging by evidence), here by quadrature on a grid. Two of the three rungs never diverged: they cut the posterior off from below, a wall
    that the Gaussian at the MAP (Laplace) does not see, so the predictive is one-sided."""
    stable_top = [math.log(0.008), math.log(0.005)]
    rungs = [
        BoundaryRung(
            Scale(width=64),
            np.log([64.0]),
            np.log([[0.005], [0.01], [0.02], [0.04]]),
            np.array([False, False, True, True]),
        ),
        BoundaryRung(
            Scale(width=256), np.log([256.0]), np.array([[stable_top[0]]]), np.array([False])
        ),
        BoundaryRung(
            Scale(width=1024), np.log([1024.0]), np.array([[stable_top[1]]]), np.array([False])
        ),
    ]
    target = np.log([8192.0])
    fitted = fit_boundaries(rungs, ("lr",), ("lr",), ("width",), target, prior={}, fixed={})["lr"]
    # the same posterior on a grid, in (c = boundary at width 64, e, log σ): a linear change of
    # variables with unit Jacobian
    ell = np.log([64.0, 256.0, 1024.0])
    low = np.array([math.log(0.01), *stable_top])
    high = np.array([math.log(0.02), math.inf, math.inf])
    c = np.linspace(math.log(0.01) - 1.5, math.log(0.02) + 1.5, 121)[:, None, None]
    e = np.linspace(-2.5, 2.5, 121)[None, :, None]
    w = np.linspace(-5.0, 1.5, 81)[None, None, :]
    with np.errstate(divide="ignore"):  # every prior sd the fit averages over, by its evidence
        log_post = np.stack(
            [_log_posterior(c - e * ell[0], e, w, low, high, ell, sd) for sd in EXPONENT_PRIOR_SDS]
        )
    dens = np.exp(log_post - log_post.max())
    centre = c + e * (target[0] - ell[0])

    def brute(x: float) -> float:
        return float((dens * norm.cdf((x - centre) / np.exp(w))).sum() / dens.sum())

    for x in (fitted.limit(0.05), fitted.at_target - fitted.sd, fitted.at_target, math.log(0.01)):
        assert fitted.p_diverge(x) == pytest.approx(brute(x), abs=0.02)  # 4096 weighted draws
    assert brute(fitted.limit(0.05)) == pytest.approx(0.05, abs=0.005)
    # the wall: below the top rung's stable trial the boundary is rare, which Laplace misses
    theta, cov = fit_boundary_law(low, high, ell[:, None], prior_mean=np.zeros(1))
    g = np.array([1.0, target[0]])
    laplace_sd = math.sqrt(g @ cov[:2, :2] @ g + math.exp(2 * theta[2]))
    laplace_limit = theta[0] + theta[1] * target[0] - 1.6449 * laplace_sd
    assert brute(laplace_limit) < 0.03  # Laplace's limit: needlessly far below the 5% point
    assert fitted.p_diverge(fitted.limit(0.05)) == pytest.approx(0.05, abs=1e-6)


def test_a_parameter_unrelated_to_divergence_gets_no_boundary() -> None:
    """One-at-a-time factor-2 sweeps around a best point: only lr's diverged trial lies above the
    stable ones; weight decay's sweep scores 0.5."""
    obs = _llm_like(seed=0)
    res = _fit(obs)
    assert set(res.boundary) == {"lr"}
    assert res.boundary["lr"].side == "upper"


# ----------------------------------------------------------------------------------------------
# extrapolate(): a held-out-LLM-like ladder whose boundary closes in on the optimum
# ----------------------------------------------------------------------------------------------
SIZES = (1, 2, 4, 8)  # ×1e8 parameters, 20 tokens per parameter
TARGET = Scale(params=32e8, tokens=640e8)


def _truth(n: float) -> tuple[float, float]:
    """(optimal lr, stability boundary) at n × 1e8 parameters: the boundary closes in on the
    optimum as the model grows (2.5× above it at n = 1, 1.01× at n = 32)."""
    lr_opt = 3e-3 * n**-0.25
    return lr_opt, 2.5 * lr_opt * n**-0.26


def _llm_like(seed: int, noise: float = 0.003) -> list[Observation]:
    """One-at-a-time factor-2 sweeps of lr and wd around each size's best grid point; a run past
    the boundary diverges (NaN). At the largest size only the best lr and the one below it are
    finite, the next up diverged; the smaller sizes' optimum lr lies above that size's boundary
    at the target."""
    rng = np.random.default_rng(seed)
    obs = []
    for n in SIZES:
        lr_opt, bound = _truth(n)
        centre = 1e-3 * 2.0 ** round(math.log2(lr_opt / 1e-3))
        points = {(centre * 2.0**k, 0.1) for k in (-2, -1, 0, 1, 2)}
        points |= {(centre, 0.1 * 2.0**k) for k in (-2, -1, 1, 2)}
        for lr, wd in sorted(points):
            value = (
                3.0
                - 0.1 * math.log(n)
                + 0.08 * math.log(lr / lr_opt) ** 2
                + 0.03 * math.log(wd / 0.1) ** 2
                + float(rng.normal(0, noise))
            )
            obs.append(
                Observation(
                    {"params": n * 1e8, "tokens": 20 * n * 1e8},
                    {"lr": lr, "wd": wd},
                    math.nan if lr > bound else value,
                )
            )
    return obs


def _fit(obs: list[Observation], **options: object) -> ts.Extrapolation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ts.extrapolate(obs, target=TARGET, params=["lr", "wd"], n_bootstrap=20, **options)


def test_the_ladder_diverges_where_a_copied_optimum_would() -> None:
    top = [o for o in _llm_like(0) if o.scale["params"] == 8e8 and o.params["wd"] == 0.1]
    finite = sorted(o.params["lr"] for o in top if math.isfinite(o.value))
    diverged = sorted(o.params["lr"] for o in top if not math.isfinite(o.value))
    assert finite[-2:] == pytest.approx([1e-3, 2e-3]) and diverged[0] == pytest.approx(4e-3)
    assert _truth(1)[0] > _truth(8)[1]  # the smallest size's optimum diverges at the top one
    assert _truth(8)[0] > _truth(32)[1]  # and the top size's at the target


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_decision_never_lies_past_the_predicted_boundary(seed: int) -> None:
    res = _fit(_llm_like(seed))
    boundary = res.boundary["lr"]
    lr = math.log(res.params["lr"])
    assert lr <= boundary.limit(MAX_P_DIVERGE) + 1e-12
    assert res.p_diverge == pytest.approx(boundary.p_diverge(lr))
    assert res.p_diverge <= MAX_P_DIVERGE + 1e-9
    assert res.params["lr"] < _truth(32)[1]  # below the true boundary: the run does not diverge
    # the censored observation of the top rung: lr 2e-3 stable, 4e-3 diverged
    top = boundary.bounds[-1]
    assert (math.exp(top.low), math.exp(top.high)) == pytest.approx((2e-3, 4e-3))


def test_a_decision_past_the_boundary_is_moved_back_and_says_why() -> None:
    res = _fit(_llm_like(0))
    valley = math.log(res.law_params["lr"]) + res.decision_shift["lr"] - res.boundary_shift["lr"]
    assert res.boundary_shift["lr"] < 0.0  # the valley alone would have gone further
    assert math.log(res.params["lr"]) == pytest.approx(valley + res.boundary_shift["lr"])
    assert res.boundary["lr"].p_diverge(valley) > MAX_P_DIVERGE
    assert res.p_diverge_law > res.p_diverge
    text = res.summary()
    assert "lr boundary at the target" in text and "moved back to" in text
    assert f"{res.params['lr']:.3g}" in text


def test_without_a_diverged_trial_nothing_changes_but_a_lower_bound_is_reported() -> None:
    obs = [o for o in _llm_like(0) if math.isfinite(o.value)]
    res = _fit(obs)
    assert res.boundary == {} and res.p_diverge == 0.0
    assert all(v == 0.0 for v in res.boundary_shift.values())
    for name in ("lr", "wd"):
        law = math.log(res.law_params[name])
        assert math.log(res.params[name]) == pytest.approx(law + res.decision_shift[name])
    top = [o.params["lr"] for o in obs if o.scale["params"] == 8e8]
    assert res.stable_up_to["lr"] == pytest.approx(max(top))
    assert "no stability boundary" in res.summary()


def test_a_lower_boundary_floors_the_decision() -> None:
    """A parameter that diverges below (a too-short τ): the decision stays above the boundary."""
    rng = np.random.default_rng(3)
    obs = []
    for width in (64, 128, 256, 512):
        tau_opt, floor = 1.0, 0.6 * (width / 64) ** 0.3  # the floor rises toward the optimum
        for tau in np.exp(np.linspace(math.log(0.125), math.log(8.0), 13)):
            value = 2.0 + 0.05 * math.log(tau / tau_opt) ** 2 + float(rng.normal(0, 0.002))
            obs.append(
                Observation(
                    {"width": width}, {"tau": float(tau)}, math.nan if tau < floor else value
                )
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ts.extrapolate(obs, target=Scale(width=4096), params=["tau"], n_bootstrap=20)
    boundary = res.boundary["tau"]
    assert boundary.side == "lower"
    assert math.log(res.params["tau"]) >= boundary.limit(MAX_P_DIVERGE) - 1e-12
    assert res.params["tau"] > 0.6 * 64**0.3  # the true floor at the target


def test_divergences_that_bound_nothing_give_no_boundary() -> None:
    """At every rung one run diverged in the middle of stable ones (a stable run above it): the
    diverged trials lie above most stable ones (4 of 5 pairs), yet no rung bounds the boundary from
    above, so none is fitted and the decision is the valley's."""
    obs = []
    for width in (64, 128, 256):
        for lr in (1e-3, 2e-3, 4e-3, 8e-3, 16e-3, 32e-3):
            value = 2.0 + 0.05 * math.log(lr / 4e-3) ** 2
            obs.append(
                Observation({"width": width}, {"lr": lr}, math.nan if lr == 16e-3 else value)
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ts.extrapolate(obs, target=Scale(width=1024), params=["lr"], n_bootstrap=0)
    assert res.boundary == {} and res.p_diverge == 0.0
    assert res.boundary_shift == {"lr": 0.0}


def test_a_second_cause_of_divergence_gets_its_own_boundary() -> None:
    """lr diverges above 3× its optimum and, independently, tau below 0.15: most diverged trials
    are lr's, spread evenly in tau (tau's share of ordered pairs alone is 0.25, short of the 0.2
    a lower boundary needs);
    once lr's boundary explains its own, tau's lower boundary is found in the rest."""
    rng = np.random.default_rng(0)
    obs = []
    for width in (64, 128, 256, 512):
        lr_opt = 0.01 * (width / 64) ** -0.5
        for _ in range(30):
            lr = float(math.exp(rng.uniform(math.log(1e-4), math.log(0.3))))
            tau = float(math.exp(rng.uniform(math.log(0.05), math.log(20.0))))
            value = 2.0 + 0.1 * math.log(lr / lr_opt) ** 2 + 0.05 * math.log(tau) ** 2
            diverged = lr > 3 * lr_opt or tau < 0.15
            obs.append(
                Observation(
                    {"width": width}, {"lr": lr, "tau": tau}, math.nan if diverged else value
                )
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ts.extrapolate(obs, target=Scale(width=4096), params=["lr", "tau"], n_bootstrap=0)
    assert res.boundary["lr"].side == "upper" and res.boundary["tau"].side == "lower"
    low, high = res.boundary["tau"].interval(0.9)
    assert low < 0.15 < high  # tau's boundary does not move with width
    for bound in res.boundary["tau"].bounds:  # each rung: between its trials around 0.15
        assert math.exp(bound.low) < 0.15 * 1.6 and math.exp(bound.high) > 0.15 / 1.6
    assert res.params["tau"] >= math.exp(res.boundary["tau"].limit(MAX_P_DIVERGE / 2)) - 1e-9


def _gaussian_boundary(name: str, side: str, mean: float, sd: float) -> StabilityBoundary:
    """A boundary whose predictive is one normal ``N(mean, sd²)`` (fitted coordinates)."""
    return StabilityBoundary(
        param=name,
        side=side,  # type: ignore[arg-type]
        log_space=True,
        bounds=(),
        variables=("width",),
        intercept=mean,
        exponents={"width": 0.0},
        covariance=np.zeros((2, 2)),
        free=("width",),
        scatter=sd,
        at_target=mean,
        sd=sd,
        draw_means=np.array([mean]),
        draw_sds=np.array([sd]),
        draw_weights=np.array([1.0]),
    )


def test_the_binding_boundaries_share_what_the_others_leave() -> None:
    """Risks 0.001 (tau, far) and 0.3 (lr) at the valley's point: tau keeps its 0.001, lr may take
    q = 1 − 0.95/0.999 = 0.049049 so that 1 − 0.999·(1 − q) = 5% exactly (the union bound's
    2.5% each would have moved lr further than needed)."""
    lr = _gaussian_boundary("lr", "upper", 0.0, 1.0)
    tau = _gaussian_boundary("tau", "lower", 0.0, 1.0)
    point = np.array([norm.ppf(0.3), norm.ppf(0.999)])  # lr: P(b < x) = 0.3; tau: P(b > x) = 0.001
    assert lr.p_diverge(point[0]) == pytest.approx(0.3)
    assert tau.p_diverge(point[1]) == pytest.approx(0.001)
    share = boundary_share(point, (lr, tau), (0, 1), 0.05)
    assert share == pytest.approx(1 - 0.95 / 0.999)
    lower, upper = stability_limits(2, (lr, tau), (0, 1), 0.05, point=point)
    moved = np.clip(point, lower, upper)
    assert moved[1] == point[1] and moved[0] == pytest.approx(norm.ppf(share))
    assert p_diverge(moved, (lr, tau), (0, 1)) == pytest.approx(0.05)
    # both binding: equal shares, 1 − (1 − q)² = 5%
    both = np.array([norm.ppf(0.3), norm.ppf(0.7)])
    assert boundary_share(both, (lr, tau), (0, 1), 0.05) == pytest.approx(1 - 0.95**0.5)

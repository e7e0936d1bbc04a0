"""Divergence in the one model (docs/science.md §8–9), through ``extrapolate()``: a diverged
trial is evidence about its configuration's offset from its rung's optimum, the decision is the
least posterior expected loss with a diverged run charged ``divergence_cost``, and crashed trials
are kept apart from divergences."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import transfersearch as ts
from transfersearch.observations import Observation
from transfersearch.scale import Scale

# ----------------------------------------------------------------------------------------------
# A held-out-LLM-like ladder whose stability boundary closes in on the optimum
# ----------------------------------------------------------------------------------------------
SIZES = (1, 2, 4, 8)  # ×1e8 parameters, 20 tokens per parameter
TARGET = Scale(params=32e8, tokens=640e8)
TOP = Scale(params=8e8, tokens=160e8)


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


def _fit(
    obs: list[Observation],
    target: Scale = TARGET,
    params: tuple[str, ...] = ("lr", "wd"),
    **options: object,
) -> ts.Extrapolation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        return ts.extrapolate(obs, target=target, params=list(params), **options)  # type: ignore[arg-type]


def _coords(res: ts.Extrapolation, **changes: float) -> np.ndarray:
    """The decision in fitted coordinates (the target loss's order), some values replaced."""
    assert res.target_loss is not None
    point = {**res.params, **changes}
    return np.array(
        [math.log(point[n]) if n in res.log_params else point[n] for n in res.target_loss.names]
    )


def _p(res: ts.Extrapolation, **changes: float) -> float:
    assert res.target_loss is not None
    return res.target_loss.p_diverge(_coords(res, **changes))


def test_the_ladder_diverges_where_a_copied_optimum_would() -> None:
    top = [o for o in _llm_like(0) if o.scale == TOP and o.params["wd"] == 0.1]
    finite = sorted(o.params["lr"] for o in top if math.isfinite(o.value))
    diverged = sorted(o.params["lr"] for o in top if not math.isfinite(o.value))
    assert finite[-2:] == pytest.approx([1e-3, 2e-3]) and diverged[0] == pytest.approx(4e-3)
    assert _truth(1)[0] > _truth(8)[1]  # the smallest size's optimum diverges at the top one
    assert _truth(8)[0] > _truth(32)[1]  # and the top size's at the target


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_decision_never_lies_past_the_divergence_region(seed: int) -> None:
    res = _fit(_llm_like(seed))
    assert res.p_diverge == pytest.approx(_p(res))
    # past the top rung's diverged trial (lr 4e-3) a run is likely to diverge; at the decision
    # it is not (measured at 47c055f: 2.7-2.9% against 87-89%)
    assert res.p_diverge < 0.1 < 0.5 < _p(res, lr=4e-3)
    assert res.p_diverge < res.p_diverge_law  # the hedge lowers the risk ...
    assert res.params["lr"] < res.law_params["lr"]  # ... by moving away from the divergences
    assert res.params["lr"] < _truth(32)[1]  # below the true boundary: the run does not diverge
    assert res.divergence_cost > 0.0
    text = res.summary()
    assert "P(diverge)" in text and f"{res.params['lr']:.4g}" in text


@pytest.mark.parametrize("seed", [0, 1])
def test_the_risk_at_the_decision_falls_as_the_divergence_cost_grows(seed: int) -> None:
    # measured at 47c055f (seed 0): P(diverge) 4.5%, 3.5%, 1.6%, 0.6% and lr 1.25e-3 ... 6.1e-4
    fits = [_fit(_llm_like(seed), divergence_cost=c) for c in (0.01, 0.1, 1.0, 10.0)]
    risks = [r.p_diverge for r in fits]
    lrs = [r.params["lr"] for r in fits]
    assert all(a > b for a, b in itertools.pairwise(risks))
    assert all(a > b for a, b in itertools.pairwise(lrs))
    assert [r.divergence_cost for r in fits] == [0.01, 0.1, 1.0, 10.0]
    assert "a diverged run is charged 10" in fits[-1].summary()


def test_a_parameter_unrelated_to_divergence_is_not_moved_by_it() -> None:
    """Only lr's sweeps diverge; weight decay's decision stays where the stable trials put it
    (measured at 47c055f: within 0.6% of the fit without any diverged trial)."""
    res = _fit(_llm_like(0))
    clean = _fit([o for o in _llm_like(0) if math.isfinite(o.value)])
    assert abs(math.log(res.params["wd"] / clean.params["wd"])) < 0.05
    assert abs(res.decision_shift["wd"]) < 0.05
    assert abs(math.log(res.params["wd"] / 0.1)) < 0.1
    assert abs(res.decision_shift["lr"]) > 2 * abs(res.decision_shift["wd"])


def test_without_a_diverged_trial_nothing_changes_but_the_stable_reach_is_reported() -> None:
    obs = [o for o in _llm_like(0) if math.isfinite(o.value)]
    res = _fit(obs)
    assert res.p_diverge == 0.0 and res.p_diverge_law == 0.0
    assert res.target_loss is not None and res.target_loss.divergence is None
    top = [o.params for o in obs if o.scale == TOP]
    assert res.stable_up_to["lr"] == pytest.approx(max(p["lr"] for p in top))
    assert res.stable_up_to["wd"] == pytest.approx(max(p["wd"] for p in top))
    for name in ("lr", "wd"):  # no risk to hedge: the decision is the law's point, near enough
        assert abs(res.decision_shift[name]) < 0.05
    text = res.summary()
    assert "no trial diverged" in text and "stayed stable up to lr 0.002, wd 0.4" in text
    assert "P(diverge):" not in text


def test_one_diverged_variation_does_not_override_stable_runs_at_the_top_rung() -> None:
    """Issue 25: a single diverged weight-decay variation (below every stable one) at the top
    rung made a per-parameter law that moved weight decay 6x past anything tried. Here it moves
    the decision by under 10%, inside the top rung's stable runs (measured at 47c055f: 5.5%;
    2026-12-08, with the boundary's drift weighed by its evidence and held at the top rung's
    past the ladder: 4.9%)."""
    obs = [o for o in _llm_like(0) if math.isfinite(o.value)]
    clean = _fit(obs)
    one = _fit([*obs, Observation(TOP, {"lr": 1e-3, "wd": 0.0125}, math.nan)])
    assert abs(math.log(one.params["wd"] / clean.params["wd"])) < 0.1
    assert abs(math.log(one.params["lr"] / clean.params["lr"])) < 0.05
    assert 0.025 <= one.params["wd"] <= one.stable_up_to["wd"]
    assert 0.0 < one.p_diverge < 0.1


def test_one_diverged_weight_decay_zero_row_does_not_override_stable_runs() -> None:
    """The same with ``weight_decay = 0`` rows (fitted linearly, kept ≥ 0): stable at the lower
    rungs, diverged once at the top one."""
    base = [o for o in _llm_like(0) if math.isfinite(o.value)]
    for n in SIZES:
        lr_opt = _truth(n)[0]
        centre = 1e-3 * 2.0 ** round(math.log2(lr_opt / 1e-3))
        value = 3.0 - 0.1 * math.log(n) + 0.08 * math.log(centre / lr_opt) ** 2 + 0.12
        scale = {"params": n * 1e8, "tokens": 20 * n * 1e8}
        if n < 8:
            base.append(Observation(scale, {"lr": centre, "wd": 0.0}, value))
    clean = _fit(base)
    one = _fit([*base, Observation(TOP, {"lr": 1e-3, "wd": 0.0}, math.nan)])
    assert one.log_params == ("lr",)
    assert abs(one.params["wd"] - clean.params["wd"]) < 0.1 * clean.params["wd"]
    assert 0.0 < one.params["wd"] <= one.stable_up_to["wd"]
    assert one.interval(0.9)["wd"][0] >= 0.0


# ----------------------------------------------------------------------------------------------
# Other shapes of divergence
# ----------------------------------------------------------------------------------------------
def _tau_floor_ladder() -> list[Observation]:
    """A parameter that diverges below (a too-short τ): the floor rises toward the optimum."""
    rng = np.random.default_rng(3)
    obs = []
    for width in (64, 128, 256, 512):
        tau_opt, floor = 1.0, 0.6 * (width / 64) ** 0.3
        for tau in np.exp(np.linspace(math.log(0.125), math.log(8.0), 13)):
            value = 2.0 + 0.05 * math.log(tau / tau_opt) ** 2 + float(rng.normal(0, 0.002))
            obs.append(
                Observation(
                    {"width": width}, {"tau": float(tau)}, math.nan if tau < floor else value
                )
            )
    return obs


def test_a_lower_divergence_region_moves_the_decision_up() -> None:
    obs = _tau_floor_ladder()
    res = _fit(obs, Scale(width=4096), ("tau",))
    top_diverged = max(o.params["tau"] for o in obs if o.scale["width"] == 512 and not o.usable)
    assert res.params["tau"] > res.law_params["tau"]
    assert res.p_diverge < res.p_diverge_law
    assert res.p_diverge < _p(res, tau=top_diverged) < _p(res, tau=top_diverged / 2)


@pytest.mark.xfail(
    reason=(
        "measured 2026-12-08: the decision is tau 1.72 (1.57 at 47c055f) while the true floor at "
        "width 4096 is 2.09: the boundary's drift relative to the optimum is read across the "
        "rungs and held at the top rung's (1.11 at width 512) past the ladder (docs/science.md "
        "section 8); carried linearly to the target it gave 2.28 here, but its uncertainty 2.5 "
        "decades out moved the README example's decision below its own 90% interval"
    ),
    strict=True,
)
def test_a_lower_boundary_rising_with_scale_floors_the_decision() -> None:
    """A floor that rises with width relative to the optimum: the decision should be floored
    where the target's floor lies."""
    res = _fit(_tau_floor_ladder(), Scale(width=4096), ("tau",))
    assert res.params["tau"] > 0.6 * 64**0.3  # the true floor at the target


def test_divergences_that_bound_nothing_barely_move_the_decision() -> None:
    """At every rung one run diverged in the middle of stable ones (a stable run above it): the
    logistic law finds no side to avoid, so the decision stays near the valley's optimum
    (measured at 47c055f: 0.13 log units below it, a fifth of a grid step) and the risk is the
    base rate of such failures everywhere."""
    obs = []
    for width in (64, 128, 256):
        for lr in (1e-3, 2e-3, 4e-3, 8e-3, 16e-3, 32e-3):
            value = 2.0 + 0.05 * math.log(lr / 4e-3) ** 2
            obs.append(
                Observation({"width": width}, {"lr": lr}, math.nan if lr == 16e-3 else value)
            )
    res = _fit(obs, Scale(width=1024), ("lr",))
    assert res.law_params["lr"] == pytest.approx(4e-3, rel=1e-3)
    assert abs(math.log(res.params["lr"] / 4e-3)) < math.log(2.0) / 3
    assert abs(res.p_diverge - res.p_diverge_law) < 0.02
    assert res.p_diverge < 3 / 18 + 0.05


def test_two_causes_of_divergence_are_both_avoided() -> None:
    """lr diverges above 3x its optimum and, independently, tau below 0.15: the one logistic law
    rises with lr and falls with tau, and the decision keeps clear of both."""
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
    res = _fit(obs, Scale(width=4096), ("lr", "tau"))
    lr_opt = 0.01 * 64**-0.5
    assert res.law_params["lr"] == pytest.approx(lr_opt, rel=0.1)
    assert res.params["lr"] < 3 * lr_opt and res.params["tau"] > 0.15
    assert _p(res, lr=lr_opt * 4.5) > 0.3 > res.p_diverge  # measured 0.51 and 0.09
    assert _p(res, tau=0.1) > 0.3  # measured 0.65
    assert _p(res, lr=res.params["lr"] * 2) > res.p_diverge > _p(res, lr=res.params["lr"] / 2)
    assert _p(res, tau=res.params["tau"] / 2) > res.p_diverge > _p(res, tau=res.params["tau"] * 2)


# ----------------------------------------------------------------------------------------------
# Crashes are not divergences
# ----------------------------------------------------------------------------------------------
def test_crashed_trials_are_left_out_and_counted() -> None:
    """Four out-of-memory crashes (state 'failed') at small lr on the top rung: read as
    divergences they would push lr up; they are left out, counted, and summary() says so."""
    obs = _llm_like(0)
    crashes = [
        Observation(TOP, {"lr": lr, "wd": 0.1}, math.nan, state="failed")
        for lr in (1e-4, 2e-4, 3e-4, 5e-4)
    ]
    plain = _fit(obs)
    res = _fit(obs + crashes)
    assert res.n_crashed == 4 and plain.n_crashed == 0
    assert res.params == plain.params and res.p_diverge == plain.p_diverge
    assert sum(o.n_diverged for o in res.optima) == sum(o.n_diverged for o in plain.optima)
    assert [d.kind for d in res.diagnostics].count("crashed") == 1
    assert "4 trial(s) crashed (raised an exception): left out of the fit" in res.summary()


def test_nans_returned_at_random_do_not_move_the_decision_off_the_law() -> None:
    """Every 11th trial returns NaN whatever its parameters (a flaky run): the divergence
    boundary is nested with a constant rate (docs/science.md §8), the rate wins, and the decision
    stays inside the target's 90% interval (a boundary fitted to those 5 NaNs moved tau_epoch
    0.65 log units off the law's point, outside it)."""
    rng = np.random.default_rng(0)
    obs = []
    number = 0
    for w, n in itertools.product((64, 128, 256), (1e4, 4e4)):
        lr, tau = 0.02 * (w / 64) ** -0.3, 0.8 * (n / 1e4) ** 0.15
        for _ in range(10):
            x, t = rng.uniform(-1.5, 1.5, size=2)
            value = 3.0 * (w * n) ** -0.05 + 0.08 * x**2 + 0.04 * t**2
            flaky = number % 11 == 6
            params = {"base_lr": lr * math.exp(x), "tau_epoch": tau * math.exp(t)}
            obs.append(
                Observation(Scale(width=w, dataset_size=n), params, math.nan if flaky else value)
            )
            number += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        res = ts.extrapolate(obs, target=Scale(width=2048, dataset_size=6.4e5), seed=0)
    interval = res.interval(0.9)
    for name in ("base_lr", "tau_epoch"):
        low, high = interval[name]
        assert low <= res.params[name] <= high, (name, res.params[name], interval[name])

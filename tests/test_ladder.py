"""TransferPlanner: the rung policy and law-guided proposals shared by the Optuna and Ray adapters."""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.cost import default_cost
from transfersearch.errors import TransferSearchError
from transfersearch.ladder import LawPrediction, RungDecision, TransferPlanner
from transfersearch.ledger import TrialLedger
from transfersearch.observations import Observation
from transfersearch.resources import gpu_shares, trials_per_gpu

SPACE = synthetic.make_space()
BASE = synthetic.BASE
#: Deliberately not in cost order: the planner must sort it.
LADDER = [synthetic.LADDER[i] for i in (3, 0, 1, 2)]
optimum = synthetic.log_optimum


def observations(planner: TransferPlanner, rungs: list[int], n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for rung in rungs:
        scale = planner.ladder[rung]
        lr_star, tau_star = optimum(scale)
        for _ in range(n):
            log_lr, log_tau = lr_star + rng.uniform(-2, 2), tau_star + rng.uniform(-2, 2)
            value = 1 + 0.5 * (log_lr - lr_star) ** 2 + 0.3 * (log_tau - tau_star) ** 2
            params = {"base_lr": math.exp(log_lr), "tau_epoch": math.exp(log_tau)}
            out.append(Observation(scale=scale, params=params, value=value))
    return out


def test_rungs_are_ordered_by_cost_with_default_budgets() -> None:
    planner = TransferPlanner(SPACE, LADDER)
    assert planner.ladder[0] == LADDER[1] and planner.ladder[-1] == LADDER[0]
    assert list(planner.costs) == sorted(planner.costs)
    assert planner.costs[0] == default_cost(LADDER[1]) == 64**2 * 2e4
    assert planner.budgets == (16, 16, 8, 8)
    assert planner.rung_of(LADDER[0]) == 3
    planner.budgets = (2, 2, 1, 1)  # checked as trials_per_rung is
    assert planner.assign_rung([2, 1, 0, 0]).rung == 1 and planner.costs[0] == 64**2 * 2e4
    with pytest.raises(ts.TransferSearchError, match="entries for 4 rungs"):
        planner.budgets = (2, 2)
    with pytest.raises(ts.TransferSearchError, match="not a rung"):
        planner.rung_of(BASE.replace(width=32))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=4, max_size=4))
def test_assign_rung_fills_the_cheapest_open_budget_then_balances(counts: list[int]) -> None:
    planner = TransferPlanner(SPACE, LADDER, trials_per_rung=[5, 4, 3, 2])
    decision = planner.assign_rung(counts)
    assert decision.detoured_from is None and not decision.wait
    rung = decision.rung
    open_rungs = [i for i, (c, b) in enumerate(zip(counts, planner.budgets)) if c < b]
    if open_rungs:
        assert rung == open_rungs[0]
    else:
        fractions = [c / b for c, b in zip(counts, planner.budgets)]
        assert fractions[rung] == min(fractions)
    assert planner.assign_rung(dict(enumerate(counts))) == decision


def test_the_prediction_is_the_law_s_point_and_its_one_sigma_spread() -> None:
    planner = TransferPlanner(SPACE, LADDER, min_trials=6, seed=1)
    history = observations(planner, [0, 1, 2], 20)
    predicted = planner.prediction(3, history)
    assert isinstance(predicted, LawPrediction)
    center, spread = predicted  # unpacks as the (center, spread) pair it always was
    # the planner's frequent refits skip the walk-forward folds (docs/science.md §7.5)
    sweep = ts.Sweep(tuple(history), SPACE, "minimize", planner.cost)
    options = ts.FitOptions(params=("base_lr", "tau_epoch"), seed=1)
    res = ts.fitting.fit_sweep(sweep, planner.ladder[3], options, walk_forward=False)
    assert center == {name: float(res.params[name]) for name in ("base_lr", "tau_epoch")}
    for name, (low, high) in res.interval(0.68).items():  # both coordinates are log-scaled
        assert spread[name] == max(0.5 * math.log(high / low), planner.options.min_spread)
    assert planner.prediction(3, history) is predicted  # the rungs have not grown: cached


def test_a_rung_s_own_trials_move_its_prediction_to_what_they_show() -> None:
    """Once the predicted rung has trials of its own, the one model fits them too: the
    prediction is that rung's own optimum, not the other rungs' law (docs/science.md §7.5)."""
    planner = TransferPlanner(SPACE, LADDER, min_trials=6, seed=1)
    history = observations(planner, [0, 1, 2], 20)
    from_law = planner.prediction(3, history)
    assert from_law is not None
    top = planner.ladder[3]
    lr_star, tau_star = optimum(top)
    shifted = lr_star + 0.8  # the top rung's optimum lies 0.8 log units off the law
    rng = np.random.default_rng(5)
    own = []
    for _ in range(12):
        log_lr, log_tau = shifted + rng.uniform(-1.5, 1.5), tau_star + rng.uniform(-1.5, 1.5)
        value = 1 + 0.5 * (log_lr - shifted) ** 2 + 0.3 * (log_tau - tau_star) ** 2
        params = {"base_lr": math.exp(log_lr), "tau_epoch": math.exp(log_tau)}
        own.append(Observation(scale=top, params=params, value=value))
    with_own = planner.prediction(3, history + own)
    assert with_own is not None and with_own is not from_law  # a new rung fitted: refitted
    assert abs(math.log(from_law.center["base_lr"]) - shifted) > 0.5  # the law's: far from it
    assert abs(math.log(with_own.center["base_lr"]) - shifted) < 0.1
    assert with_own.spread["base_lr"] <= from_law.spread["base_lr"]


def test_the_law_proposes_the_predicted_optimum_first_then_its_neighbourhood() -> None:
    planner = TransferPlanner(SPACE, LADDER, min_trials=6, focus=1.0, seed=1)
    assert planner.propose(3, observations(planner, [0], 20), 0).source == "base"
    history = observations(planner, [0, 1, 2], 20)
    first = planner.propose(3, history, started_at_rung=0)
    assert first.source == "law-point"
    # the law point is the engine's prediction (its accuracy is tested in test_extrapolate.py)
    res = ts.extrapolate(history, target=planner.ladder[3], params=["base_lr", "tau_epoch"], seed=1)
    for name, (low, high) in res.interval(0.68).items():
        assert low <= first.params[name] <= high
    later = [planner.propose(3, history, started_at_rung=k) for k in range(1, 30)]
    assert {p.source for p in later} == {"law-neighbourhood"}
    logs = [math.log(p.params["base_lr"]) for p in later]
    lr_law = math.log(res.law_params["base_lr"])
    assert 0 < float(np.std(logs)) < 1.0 and abs(float(np.mean(logs)) - lr_law) < 0.3
    for proposal in later:
        assert SPACE.distributions["base_lr"].contains(proposal.params["base_lr"])


def test_a_law_point_past_the_box_puts_its_neighbourhood_inside_near_the_edge() -> None:
    """The top rung's law point lies past the space's upper base_lr: its neighbourhood is the
    law's normal truncated to the box, so the draws lie inside it, near the edge, and differ
    (clipped, every one ran at the edge itself: the same trial again)."""
    history = observations(TransferPlanner(SPACE, LADDER, min_trials=6), [0, 1, 2], 20)
    free = TransferPlanner(SPACE, LADDER, min_trials=6, focus=1.0, seed=1)
    centre = free.propose(3, history, started_at_rung=0).params["base_lr"]
    edge = centre * math.exp(-1.0)  # the box ends one log unit below the law's point
    narrow = ts.TransferSpace(
        synthetic.BASE,
        {"base_lr": ts.Float(1e-5, edge, log=True), "tau_epoch": ts.Float(1e-2, 1e2, log=True)},
    )
    planner = TransferPlanner(narrow, LADDER, min_trials=6, focus=1.0, seed=1)
    assert planner.propose(3, history, started_at_rung=0).params["base_lr"] == edge
    drawn = [planner.propose(3, history, started_at_rung=k).params["base_lr"] for k in range(1, 40)]
    assert all(v < edge for v in drawn) and len(set(drawn)) == len(drawn)
    spread = planner.prediction(3, history)
    assert spread is not None
    # a normal truncated one sd past its centre's far side: its mean lies about half an sd in
    sd = spread.spread["base_lr"]
    gaps = [math.log(edge / v) for v in drawn]
    assert float(np.median(gaps)) < sd


def test_the_truncated_normal_is_the_truncated_normal_s_quantile() -> None:
    """Against scipy's truncnorm, inside and far in either tail (where a plain inverse CDF of
    Φ(40) = 1 - 4e-350 loses every digit)."""
    from scipy.stats import truncnorm

    from transfersearch.ladder import truncated_normal

    for a, b in [(-1.0, 1.0), (40.0, 45.0), (-45.0, -40.0), (-math.inf, 0.5), (2.0, math.inf)]:
        for u in (0.0, 0.1, 0.5, 0.9, 0.999):
            assert truncated_normal(a, b, u) == pytest.approx(truncnorm.ppf(u, a, b), rel=1e-9)


def test_a_maximizing_planner_proposes_the_maximum_of_the_raw_metric() -> None:
    """An accuracy-like metric (1 − loss, maximised): the law point is its maximum."""
    planner = TransferPlanner(SPACE, LADDER, direction="maximize")
    history = [
        Observation(o.scale, o.params, 1.0 - o.value) for o in observations(planner, [0, 1, 2], 20)
    ]
    first = planner.propose(3, history, started_at_rung=0)
    assert first.source == "law-point" and planner.direction == "maximize"
    # the law point is the engine's prediction of the maximum (accuracy: test_extrapolate.py)
    res = ts.extrapolate(
        history,
        target=planner.ladder[3],
        params=["base_lr", "tau_epoch"],
        direction="maximize",
        seed=0,
    )
    for name, (low, high) in res.interval(0.68).items():
        assert low <= first.params[name] <= high
    # the direction is fixed for a planner's life; a minimising copy looks for the valley's rim
    with pytest.raises(AttributeError):
        planner.direction = "minimize"  # type: ignore[misc]
    minimizing = planner.replace(direction="minimize")
    assert minimizing.direction == "minimize" and minimizing.budgets == planner.budgets
    wrong = minimizing.propose(3, history, started_at_rung=0)
    lr_law = math.log(res.law_params["base_lr"])
    assert wrong.source == "base" or abs(math.log(wrong.params["base_lr"]) - lr_law) > 0.5
    with pytest.raises(ts.TransferSearchError, match="direction"):
        TransferPlanner(SPACE, LADDER, direction="max")  # type: ignore[arg-type]


def test_focus_and_the_transfer_switch_leave_trials_to_the_base_sampler() -> None:
    history = observations(TransferPlanner(SPACE, LADDER), [0, 1, 2], 20)
    unfocused = TransferPlanner(SPACE, LADDER, focus=0.0)
    assert unfocused.propose(3, history, 0).source == "law-point"
    assert unfocused.propose(3, history, 1).source == "base"
    off = TransferPlanner(SPACE, LADDER, transfer=False)
    assert off.propose(3, history, 0).source == "base"


def neighbourhood(planner: TransferPlanner, history: list[Observation]) -> list[float]:
    """Three neighbourhood draws of base_lr at the top rung (the planner's random stream)."""
    return [planner.propose(3, history, started_at_rung=k).params["base_lr"] for k in (1, 2, 3)]


def test_state_and_reseed_replay_the_neighbourhood_draws() -> None:
    planner = TransferPlanner(SPACE, LADDER, focus=1.0)
    history = observations(planner, [0, 1, 2], 20)
    state = planner.state_dict()
    draws = neighbourhood(planner, history)
    planner.load_state_dict(state)
    assert neighbourhood(planner, history) == draws
    planner.reseed(7)
    seven = neighbourhood(planner, history)
    planner.reseed(7)
    assert neighbourhood(planner, history) == seven != draws
    planner.reseed(7)
    assert neighbourhood(planner.replace(min_spread=0.15), history) == seven  # the stream goes on
    with pytest.raises(ts.TransferSearchError, match="version"):
        planner.load_state_dict({"version": 99})


def test_a_state_saved_in_version_1_s_layout_loads() -> None:
    """The saved state is ``{"version": 1, "rng": <numpy bit generator state>}``, as stored by the
    adapters' checkpoints: loading one made by hand replays that generator's draws."""
    planner = TransferPlanner(SPACE, LADDER, focus=1.0)
    history = observations(planner, [0, 1, 2], 20)
    planner.load_state_dict({"version": 1, "rng": np.random.default_rng(11).bit_generator.state})
    loaded = neighbourhood(planner, history)
    planner.reseed(11)
    assert neighbourhood(planner, history) == loaded
    assert set(planner.state_dict()) == {"version", "rng"}


def test_trials_per_gpu_packs_cheap_rungs() -> None:
    planner = TransferPlanner(SPACE, LADDER)
    # costs relative to the top rung (256, 8e4): 64, 16, 16, 1
    assert trials_per_gpu(planner.costs, max_per_gpu=32) == (32, 16, 16, 1)
    assert trials_per_gpu(planner.costs) == (4, 4, 4, 1)
    with pytest.raises(ts.TransferSearchError, match="max_per_gpu"):
        trials_per_gpu(planner.costs, 0)


def test_gpu_shares_is_the_rule_behind_trials_per_gpu() -> None:
    costs = [1.0, 2.0, 3.0, 16.0, 64.0]
    # share max(min_gpu, max_gpu * c / c_max): up to 1/k below one GPU, up to whole GPUs above
    assert gpu_shares(costs, min_gpu=0.25) == (0.25, 0.25, 0.25, 0.25, 1.0)
    assert gpu_shares(costs, min_gpu=0.01) == (1 / 64, 1 / 32, 1 / 21, 0.25, 1.0)
    assert gpu_shares(costs, min_gpu=0.3, max_gpu=2) == pytest.approx((1 / 3,) * 3 + (0.5, 2.0))
    assert gpu_shares(costs, min_gpu=1) == (1.0,) * 5
    assert gpu_shares([3.0, 1.0], min_gpu=0.1, max_gpu=2.5) == (3.0, 1.0)
    for max_per_gpu in (1, 2, 3, 4, 32, 100):
        shares = gpu_shares(costs, min_gpu=1 / max_per_gpu)
        assert trials_per_gpu(costs, max_per_gpu) == tuple(round(1 / s) for s in shares)
    for bad in ({"min_gpu": 0}, {"min_gpu": 0.25, "max_gpu": -1}):
        with pytest.raises(ts.TransferSearchError, match="positive GPU share"):
            gpu_shares(costs, **bad)
    with pytest.raises(ts.TransferSearchError, match="costs"):
        gpu_shares([1.0, 0.0], min_gpu=0.25)


def test_a_failed_fit_is_logged_recorded_and_retried_when_the_rungs_grow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every complete trial diverged (value inf): the law cannot be fitted; the planner says so."""
    planner = TransferPlanner(SPACE, LADDER, min_trials=3, refit_growth=2.0)

    def diverged(n: int) -> list[Observation]:
        return [
            Observation(planner.ladder[r], {"base_lr": 1e-3 * (i + 1), "tau_epoch": 1.0}, math.inf)
            for r in (0, 1)
            for i in range(n)
        ]

    with caplog.at_level(logging.WARNING, logger="transfersearch"):
        assert planner.propose(3, diverged(3), 0).source == "base"
    assert [r.name for r in caplog.records] == ["transfersearch.ladder"]
    assert "rung 3 failed to fit" in caplog.text and "finite trial" in caplog.text
    (attempt,) = planner.fit_attempts
    assert not attempt.ok and attempt.rung == 3 and "TransferSearchError" in str(attempt.error)
    assert dict(attempt.trials) == {planner.ladder[0]: 3, planner.ladder[1]: 3}
    planner.propose(3, diverged(5), 0)  # grown by less than refit_growth: the failure stands
    assert len(planner.fit_attempts) == 1
    planner.propose(3, diverged(6), 0)
    assert len(planner.fit_attempts) == 2


def test_a_fit_s_warnings_are_recorded_not_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    """The planner reads the fit's diagnostics (no warning reaches its caller); those
    ``extrapolate`` warns of are its FitAttempt's warnings, same text, and logged."""
    planner = TransferPlanner(SPACE, LADDER, min_trials=3)
    history = observations(planner, [0, 1], 3)  # few trials per rung: the engine warns
    with caplog.at_level(logging.INFO, logger="transfersearch"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert planner.prediction(3, history) is not None
    (attempt,) = planner.fit_attempts
    assert attempt.ok and attempt.warnings
    assert all(w in caplog.text for w in attempt.warnings)
    with pytest.warns(ts.TransferSearchWarning) as warned:
        ts.extrapolate(history, target=planner.ladder[3], params=["base_lr", "tau_epoch"])
    assert attempt.warnings == tuple(f"TransferSearchWarning: {w.message}" for w in warned)


def test_a_ledger_gives_the_same_decisions_as_a_list() -> None:
    planner = TransferPlanner(SPACE, LADDER, min_trials=6, seed=3)
    twin = TransferPlanner(SPACE, LADDER, min_trials=6, seed=3)
    history = finished(planner, [6, 4, 0, 0])
    ledger = TrialLedger(history)
    assert len(ledger) == len(history) and list(ledger) == history and ledger[-1] == history[-1]
    for running in ([0, 2, 0, 0], [0, 1, 0, 0], [3, 3, 3, 3]):
        assert planner.law_pending(2, ledger, running) == twin.law_pending(2, history, running)
    more = finished(planner, [6, 6, 6, 0])
    for observation in more[len(history) :]:
        ledger.append(observation)
    assert dict(ledger.complete_counts()) == dict(TrialLedger(more).complete_counts())
    assert planner.propose(3, TrialLedger(more), 0) == twin.propose(3, more, 0)
    with pytest.raises(ts.TransferSearchError, match="Observation"):
        ledger.append("trial")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ladder": []}, "empty"),
        ({"ladder": [BASE, BASE]}, "duplicate"),
        ({"trials_per_rung": [1, 2]}, "entries"),
        ({"trials_per_rung": 0}, ">= 1"),
        ({"focus": 1.5}, "focus"),
        ({"min_trials": 0}, "min_trials"),
    ],
)
def test_bad_planner_arguments_name_the_field(kwargs: dict, match: str) -> None:
    arguments = {"ladder": LADDER, **kwargs}
    with pytest.raises(ts.TransferSearchError, match=match):
        TransferPlanner(SPACE, **arguments)


# ----------------------------------------------------------------------------------------------
# Law gating under concurrency
# ----------------------------------------------------------------------------------------------
def finished(planner: TransferPlanner, counts: list[int]) -> list[Observation]:
    """``counts[r]`` complete observations on rung ``r`` (on the known law's valley)."""
    out: list[Observation] = []
    for rung, n in enumerate(counts):
        out += observations(planner, [rung], n, seed=rung) if n else []
    return out


def test_law_pending_counts_running_trials_on_other_rungs_only() -> None:
    planner = TransferPlanner(SPACE, LADDER, min_trials=6)
    history = finished(planner, [6, 4, 0, 0])
    # rung 2's law needs rungs 0 and 1 at 6 complete: 4 + 2 running reach it, 4 + 1 do not
    assert planner.law_pending(2, history, [0, 2, 0, 0])
    assert planner.law_pending(2, history, {1: 5})
    assert not planner.law_pending(2, history, [0, 1, 0, 0])
    assert not planner.law_pending(2, history, [0, 0, 3, 0])  # its own running trials don't count
    # rung 3 may use rung 2 instead of rung 1
    assert planner.law_pending(3, history, [0, 0, 6, 0])
    # available now: not pending, whatever runs
    ready = finished(planner, [6, 6, 0, 0])
    assert planner.prediction(2, ready) is not None
    assert not planner.law_pending(2, ready, [3, 3, 3, 3])
    # failed trials are not law sources: two of them leave the law pending
    crashed = Observation(planner.ladder[1], {"base_lr": 1.0}, math.nan, state="failed")
    broken = [*history, crashed, crashed]
    assert planner.law_pending(2, broken, [0, 2, 0, 0])
    # no law to wait for with transfer off
    off = TransferPlanner(SPACE, LADDER, min_trials=6, transfer=False)
    assert not off.law_pending(2, history, [0, 2, 0, 0])


def test_a_pending_law_detours_or_waits_and_sequential_use_is_unchanged() -> None:
    planner = TransferPlanner(SPACE, LADDER, trials_per_rung=[6, 6, 3, 3], min_trials=6)
    started = [6, 6, 0, 0]
    history = finished(planner, [6, 4, 0, 0])  # two trials of rung 1 still running
    running = [0, 2, 0, 0]
    go = RungDecision(2, None, False)
    assert planner.assign_rung(started) == go  # the budget order
    assert planner.assign_rung(
        started, observations=history, running=running, wait=True
    ) == RungDecision(2, None, True)
    assert planner.assign_rung(started, observations=history, running=running) == RungDecision(
        0, 2, False
    )
    # the cheapest unsaturated lower rung: rung 0 up to 2 × its budget, then rung 1
    assert planner.assign_rung([12, 6, 0, 0], observations=history, running=running).rung == 1
    # every lower rung saturated: the trial runs on the rung, without the law
    assert planner.assign_rung([12, 12, 0, 0], observations=history, running=running) == go
    # nothing running (sequential): never gated, so the plain budget order
    assert planner.assign_rung(started, observations=history, running=[0] * 4, wait=True) == go
    assert planner.assign_rung(started, observations=history, wait=True) == go
    # the law is open: the rung goes ahead
    ready = finished(planner, [6, 6, 0, 0])
    assert planner.assign_rung(started, observations=ready, running=[2, 2, 0, 0], wait=True) == go
    # gating off, or detours off
    ungated = TransferPlanner(SPACE, LADDER, trials_per_rung=[6, 6, 3, 3], gate_on_law=False)
    assert ungated.assign_rung(started, observations=history, running=running, wait=True) == go
    no_detour = TransferPlanner(SPACE, LADDER, trials_per_rung=[6, 6, 3, 3], detour_limit=1)
    assert no_detour.assign_rung(started, observations=history, running=running) == go
    with pytest.raises(ts.TransferSearchError, match="detour_limit"):
        TransferPlanner(SPACE, LADDER, detour_limit=0.5)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 12), min_size=4, max_size=4),
    st.lists(st.integers(0, 12), min_size=4, max_size=4),
)
def test_gating_never_changes_the_rung_without_running_trials_or_a_pending_law(
    started: list[int], complete: list[int]
) -> None:
    """Deterministic in its inputs; gates only a law-using rung whose law is pending, and only to
    a cheaper rung."""
    planner = TransferPlanner(SPACE, LADDER, trials_per_rung=[5, 4, 3, 2], min_trials=3)
    history = finished(planner, complete)
    plain = planner.assign_rung(started)
    assert planner.assign_rung(started, observations=history, running=[0] * 4) == plain
    running = [max(s - c, 0) for s, c in zip(started, complete)]
    gated = planner.assign_rung(started, observations=history, running=running)
    waited = planner.assign_rung(started, observations=history, running=running, wait=True)
    assert gated == planner.assign_rung(started, observations=history, running=running)
    assert not gated.wait and waited.rung == plain.rung
    if plain.rung >= 2 and planner.law_pending(plain.rung, history, running):
        assert waited.wait and gated.rung <= plain.rung
        assert gated.detoured_from == (plain.rung if gated.rung < plain.rung else None)
    else:
        assert waited == gated == plain


def test_the_planner_draws_fresh_per_process_by_default_and_repeats_with_an_explicit_seed() -> None:
    def draws(**kwargs: Any) -> list[float]:
        planner = TransferPlanner(SPACE, LADDER, min_trials=6, focus=1.0, **kwargs)
        obs = observations(planner, [0, 1], 12)
        return [planner.propose(2, obs, started_at_rung=i).params["base_lr"] for i in (1, 2, 3)]

    assert draws() != draws(), "two processes with the default seed drew the same points"
    assert draws(seed=5) == draws(seed=5)
    for bad in ("x", -1, 1.5, True):
        with pytest.raises(TransferSearchError, match="seed"):
            TransferPlanner(SPACE, LADDER, seed=bad)


def test_a_collinear_ladder_makes_the_planner_suggest_the_separating_rung(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # width and dataset size grow together over the first three rungs: the law cannot tell them
    # apart, and the corner of the ladder's box with the small width and the large data would.
    diagonal = [
        ts.Scale(width=w, dataset_size=n, batch_size=64)
        for w, n in ((64, 2e4), (128, 4e4), (256, 8e4), (512, 1.6e5))
    ]
    planner = TransferPlanner(SPACE, diagonal, min_trials=6, seed=0)
    assert planner.suggested_rung is None  # nothing fitted yet
    history = observations(planner, [0, 1, 2], 12)
    with caplog.at_level(logging.INFO, logger="transfersearch.ladder"):
        assert planner.prediction(3, history) is not None
    suggested = planner.suggested_rung
    assert suggested is not None
    assert {suggested["width"], suggested["dataset_size"]} in ({64, 8e4}, {256, 2e4})
    assert "would separate them" in caplog.text
    # a ladder that varies them apart suggests nothing
    apart = TransferPlanner(SPACE, LADDER, min_trials=6, seed=0)
    assert apart.prediction(3, observations(apart, [0, 1, 2], 12)) is not None
    assert apart.suggested_rung is None


def test_diverged_beyond_makes_the_law_read_a_blown_up_run_as_nan() -> None:
    """A run that blew up to a finite loss (9 nats) and was reported as such: with
    ``diverged_beyond=6`` the planner's law is the one it fits when the same runs report NaN;
    without it the blown-up runs are fitted as losses, and the law differs."""
    history = finished(TransferPlanner(SPACE, LADDER), [8, 8, 0, 0])
    blown = [
        Observation(o.scale, {**o.params, "base_lr": o.params["base_lr"] * 30.0}, 9.0)
        for o in history[::3]
    ]
    as_nan = [dataclasses.replace(o, value=math.nan) for o in blown]
    reference = TransferPlanner(SPACE, LADDER, min_trials=6).prediction(3, history + as_nan)
    told = TransferPlanner(SPACE, LADDER, min_trials=6, diverged_beyond=6.0)
    untold = TransferPlanner(SPACE, LADDER, min_trials=6)
    assert reference is not None
    assert told.prediction(3, history + blown) == reference
    assert untold.prediction(3, history + blown) != reference

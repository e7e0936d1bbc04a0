"""TransferPlanner: the rung policy and law-guided proposals shared by the Optuna and Ray adapters."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.errors import TransferSearchError
from transfersearch.ladder import TransferPlanner, default_cost, gpu_shares
from transfersearch.observations import Observation

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
    with pytest.raises(ts.TransferSearchError, match="not a rung"):
        planner.rung_of(BASE.replace(width=32))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=4, max_size=4))
def test_assign_rung_fills_the_cheapest_open_budget_then_balances(counts: list[int]) -> None:
    planner = TransferPlanner(SPACE, LADDER, trials_per_rung=[5, 4, 3, 2])
    rung = planner.assign_rung(counts)
    open_rungs = [i for i, (c, b) in enumerate(zip(counts, planner.budgets)) if c < b]
    if open_rungs:
        assert rung == open_rungs[0]
    else:
        fractions = [c / b for c, b in zip(counts, planner.budgets)]
        assert fractions[rung] == min(fractions)
    assert planner.assign_rung(dict(enumerate(counts))) == rung


def test_the_law_proposes_the_predicted_optimum_first_then_its_neighbourhood() -> None:
    planner = TransferPlanner(SPACE, LADDER, min_trials=6, focus=1.0, n_bootstrap=20, seed=1)
    assert planner.propose(3, observations(planner, [0], 20), 0).source == "base"
    history = observations(planner, [0, 1, 2], 20)
    first = planner.propose(3, history, started_at_rung=0)
    assert first.source == "law-point"
    # the law point is the engine's prediction (its accuracy is tested in test_extrapolate.py)
    res = ts.extrapolate(
        history, target=planner.ladder[3], params=["base_lr", "tau_epoch"], n_bootstrap=20, seed=1
    )
    for name, (low, high) in res.interval(0.68).items():
        assert low <= first.params[name] <= high
    later = [planner.propose(3, history, started_at_rung=k) for k in range(1, 30)]
    assert {p.source for p in later} == {"law-neighbourhood"}
    logs = [math.log(p.params["base_lr"]) for p in later]
    lr_law = math.log(res.law_params["base_lr"])
    assert 0 < float(np.std(logs)) < 1.0 and abs(float(np.mean(logs)) - lr_law) < 0.3
    for proposal in later:
        assert SPACE.distributions["base_lr"].contains(proposal.params["base_lr"])


def test_a_maximizing_planner_proposes_the_maximum_of_the_raw_metric() -> None:
    """An accuracy-like metric (1 − loss, maximised): the law point is its maximum."""
    planner = TransferPlanner(SPACE, LADDER, n_bootstrap=10, direction="maximize")
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
        n_bootstrap=10,
        direction="maximize",
        seed=0,
    )
    for name, (low, high) in res.interval(0.68).items():
        assert low <= first.params[name] <= high
    # minimising the same values looks for the valley's rim instead: not the optimum
    planner.direction = "minimize"  # drops the cached maximising fit
    wrong = planner.propose(3, history, started_at_rung=0)
    lr_law = math.log(res.law_params["base_lr"])
    assert wrong.source == "base" or abs(math.log(wrong.params["base_lr"]) - lr_law) > 0.5
    with pytest.raises(ts.TransferSearchError, match="direction"):
        TransferPlanner(SPACE, LADDER, direction="max")  # type: ignore[arg-type]


def test_focus_and_the_transfer_switch_leave_trials_to_the_base_sampler() -> None:
    history = observations(TransferPlanner(SPACE, LADDER), [0, 1, 2], 20)
    unfocused = TransferPlanner(SPACE, LADDER, focus=0.0, n_bootstrap=0)
    assert unfocused.propose(3, history, 0).source == "law-point"
    assert unfocused.propose(3, history, 1).source == "base"
    off = TransferPlanner(SPACE, LADDER, transfer=False)
    assert off.propose(3, history, 0).source == "base"


def test_gpu_packing_and_reseed_and_state() -> None:
    planner = TransferPlanner(SPACE, LADDER)
    # costs relative to the top rung (256, 8e4): 64, 16, 16, 1
    assert planner.gpu_packing(max_per_gpu=32) == (32, 16, 16, 1)
    assert planner.gpu_packing() == (4, 4, 4, 1)
    with pytest.raises(ts.TransferSearchError, match="max_per_gpu"):
        planner.gpu_packing(0)
    state = planner.state_dict()
    draws = planner._rng.random(3)
    planner.load_state_dict(state)
    assert np.array_equal(planner._rng.random(3), draws)
    planner.reseed(7)
    assert np.array_equal(planner._rng.random(2), np.random.default_rng(7).random(2))


def test_gpu_shares_is_the_rule_behind_gpu_packing() -> None:
    costs = [1.0, 2.0, 3.0, 16.0, 64.0]
    # share max(min_gpu, max_gpu * c / c_max): up to 1/k below one GPU, up to whole GPUs above
    assert gpu_shares(costs, min_gpu=0.25) == (0.25, 0.25, 0.25, 0.25, 1.0)
    assert gpu_shares(costs, min_gpu=0.01) == (1 / 64, 1 / 32, 1 / 21, 0.25, 1.0)
    assert gpu_shares(costs, min_gpu=0.3, max_gpu=2) == pytest.approx((1 / 3,) * 3 + (0.5, 2.0))
    assert gpu_shares(costs, min_gpu=1) == (1.0,) * 5
    assert gpu_shares([3.0, 1.0], min_gpu=0.1, max_gpu=2.5) == (3.0, 1.0)
    planner = TransferPlanner(SPACE, LADDER)
    for max_per_gpu in (1, 2, 3, 4, 32, 100):
        shares = gpu_shares(planner.costs, min_gpu=1 / max_per_gpu)
        assert planner.gpu_packing(max_per_gpu) == tuple(round(1 / s) for s in shares)
    for bad in ({"min_gpu": 0}, {"min_gpu": 0.25, "max_gpu": -1}):
        with pytest.raises(ts.TransferSearchError, match="positive GPU share"):
            gpu_shares(costs, **bad)
    with pytest.raises(ts.TransferSearchError, match="costs"):
        gpu_shares([1.0, 0.0], min_gpu=0.25)


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
    assert planner.assign_rung(started) == 2  # the budget order
    assert planner.assign_rung(started, observations=history, running=running, wait=True) is None
    assert planner.assign_rung(started, observations=history, running=running) == 0
    # the cheapest unsaturated lower rung: rung 0 up to 2 × its budget, then rung 1
    assert planner.assign_rung([12, 6, 0, 0], observations=history, running=running) == 1
    # every lower rung saturated: the trial runs on the rung, without the law
    assert planner.assign_rung([12, 12, 0, 0], observations=history, running=running) == 2
    # nothing running (sequential): never gated, so the plain budget order
    assert planner.assign_rung(started, observations=history, running=[0] * 4, wait=True) == 2
    assert planner.assign_rung(started, observations=history, wait=True) == 2
    # the law is open: the rung goes ahead
    ready = finished(planner, [6, 6, 0, 0])
    assert planner.assign_rung(started, observations=ready, running=[2, 2, 0, 0], wait=True) == 2
    # gating off, or detours off
    ungated = TransferPlanner(SPACE, LADDER, trials_per_rung=[6, 6, 3, 3], gate_on_law=False)
    assert ungated.assign_rung(started, observations=history, running=running, wait=True) == 2
    no_detour = TransferPlanner(SPACE, LADDER, trials_per_rung=[6, 6, 3, 3], detour_limit=1)
    assert no_detour.assign_rung(started, observations=history, running=running) == 2
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
    if plain >= 2 and planner.law_pending(plain, history, running):
        assert waited is None and gated is not None and gated <= plain
    else:
        assert waited == gated == plain


def test_the_planner_draws_fresh_per_process_by_default_and_repeats_with_an_explicit_seed() -> None:
    def draws(**kwargs: Any) -> list[float]:
        planner = TransferPlanner(SPACE, LADDER, min_trials=6, focus=1.0, n_bootstrap=0, **kwargs)
        obs = observations(planner, [0, 1], 12)
        return [planner.propose(2, obs, started_at_rung=i).params["base_lr"] for i in (1, 2, 3)]

    assert draws() != draws(), "two processes with the default seed drew the same points"
    assert draws(seed=5) == draws(seed=5)
    for bad in ("x", -1, 1.5, True):
        with pytest.raises(TransferSearchError, match="seed"):
            TransferPlanner(SPACE, LADDER, seed=bad)

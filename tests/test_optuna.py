"""TransferSampler: hooks, rungs, per-rung base-sampler views, faults, transfer on a known law."""

from __future__ import annotations

import itertools
import logging
import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

optuna = pytest.importorskip("optuna")

import transfersearch as ts  # noqa: E402
from transfersearch import extrapolate, synthetic  # noqa: E402
from transfersearch.integrations import _optuna_shim as shim  # noqa: E402
from transfersearch.integrations.optuna import (  # noqa: E402
    RUNG_ATTR,
    RungPruner,
    TransferSampler,
    hyperparameter_attrs,
    observations_from_study,
    sweep_from_study,
    to_optuna_distribution,
)
from transfersearch.stored_space import space_to_json  # noqa: E402
from transfersearch.sweep import Sweep  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)

BASE = synthetic.BASE
SPACE = synthetic.make_space()
#: Cost order: (64, 2e4) < (128, 2e4) = (64, 8e4) < (256, 8e4). Width and data both vary.
LADDER = list(synthetic.LADDER)
TOP = synthetic.TOP
optimum = synthetic.log_optimum
regret = synthetic.regret


def make_objective(sampler: TransferSampler, noise: float = 0.01, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)

    def objective(trial: optuna.Trial) -> float:
        scale, _ = sampler.suggest(trial)
        return 1.0 + regret(scale, trial.params) + noise * float(rng.normal())

    return objective


class Recording(optuna.samplers.BaseSampler):
    """A real sampler (it delegates to ``inner``) that records the hooks and the rungs it sees."""

    def __init__(self, inner: optuna.samplers.BaseSampler) -> None:
        self.inner = inner
        self.calls: list[str] = []
        self.seen_rungs: list[tuple[int, set[int]]] = []

    def _see(self, study: Any, trial: Any) -> None:
        own = shim.storage_of(study).get_trial_system_attrs(shim.trial_id(trial)).get(RUNG_ATTR)
        rungs = {t.system_attrs.get(RUNG_ATTR) for t in study.get_trials(deepcopy=False)}
        # TPE and GP read trials through Optuna's private Study._get_trials: filtered too
        rungs |= {t.system_attrs.get(RUNG_ATTR) for t in study._get_trials(deepcopy=False)}
        self.seen_rungs.append((own, rungs))

    def reseed_rng(self) -> None:
        self.calls.append("reseed_rng")
        self.inner.reseed_rng()

    def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
        self.calls.append("infer_relative_search_space")
        self._see(study, trial)
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> Any:
        self.calls.append("sample_relative")
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
        self.calls.append("sample_independent")
        self._see(study, trial)
        return self.inner.sample_independent(study, trial, name, dist)

    def before_trial(self, study: Any, trial: Any) -> None:
        self.calls.append("before_trial")
        self.inner.before_trial(study, trial)

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        self.calls.append("after_trial")
        self._see(study, trial)
        self.inner.after_trial(study, trial, state, values)


# ----------------------------------------------------------------------------------------------
# Distributions
# ----------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    low=st.floats(1e-6, 1e3),
    width=st.floats(1e-3, 1e3),
    log=st.booleans(),
    value=st.floats(0.0, 1.0),
)
def test_float_conversion_contains_the_same_values(
    low: float, width: float, log: bool, value: float
) -> None:
    dist = ts.Float(low, low + width, log=log)
    converted = to_optuna_distribution(dist)
    assert isinstance(converted, optuna.distributions.FloatDistribution)
    assert (converted.low, converted.high, converted.log) == (dist.low, dist.high, log)
    point = low + value * width
    assert converted._contains(point) == dist.contains(point)


@settings(max_examples=60, deadline=None)
@given(
    low=st.integers(1, 50),
    span=st.integers(0, 60),
    step=st.integers(1, 4),
    value=st.integers(0, 120),
)
def test_int_conversion_contains_the_same_values(
    low: int, span: int, step: int, value: int
) -> None:
    dist = ts.Int(low, low + span * step, step=step)
    converted = to_optuna_distribution(dist)
    assert isinstance(converted, optuna.distributions.IntDistribution)
    assert converted._contains(value) == dist.contains(value)


def test_choice_becomes_categorical_and_unknown_types_are_refused() -> None:
    converted = to_optuna_distribution(ts.Choice(["adam", "lion"]))
    assert isinstance(converted, optuna.distributions.CategoricalDistribution)
    assert converted.choices == ("adam", "lion")
    with pytest.raises(ts.TransferSearchError, match="ts.Float, ts.Int or ts.Choice"):
        bad: Any = object()
        to_optuna_distribution(bad)


# ----------------------------------------------------------------------------------------------
# Hooks, rungs, attributes
# ----------------------------------------------------------------------------------------------
def test_every_hook_reaches_the_base_sampler_and_sees_only_its_rung() -> None:
    base = Recording(optuna.samplers.TPESampler(seed=0, n_startup_trials=3))
    sampler = TransferSampler(SPACE, LADDER, base_sampler=base, trials_per_rung=4, transfer=False)
    study = optuna.create_study(sampler=sampler)
    study.optimize(make_objective(sampler), n_trials=16)
    sampler.reseed_rng()
    copies = [sampler.rung_sampler(rung) for rung in range(4)]
    assert copies[0] is base and len({id(c) for c in copies}) == 4
    calls = {call for c in copies for call in c.calls}  # type: ignore[attr-defined]
    seen = [s for c in copies for s in c.seen_rungs]  # type: ignore[attr-defined]
    for hook in (
        "before_trial",
        "infer_relative_search_space",
        "sample_independent",
        "after_trial",
        "reseed_rng",
    ):
        assert hook in calls, hook
    assert len(seen) > 16
    for own, rungs in seen:
        assert rungs == {own}, f"the base sampler of rung {own} saw trials of rungs {rungs}"


def test_rungs_follow_the_planner_budgets_and_are_recorded() -> None:
    sampler = TransferSampler(
        SPACE,
        LADDER,
        base_sampler=optuna.samplers.RandomSampler(seed=0),
        trials_per_rung=[3, 2, 2, 1],
    )
    study = optuna.create_study(sampler=sampler)
    study.optimize(make_objective(sampler), n_trials=8)
    rungs = [t.system_attrs[RUNG_ATTR] for t in study.trials]
    assert rungs == [0, 0, 0, 1, 1, 2, 2, 3]
    frame = study.trials_dataframe()
    for column in (
        "user_attrs_rung",
        "user_attrs_scale.width",
        "user_attrs_scale.dataset_size",
        "user_attrs_transfer",
        "user_attrs_hp.lr",
        "user_attrs_hp.weight_decay",
        "user_attrs_hp",
        "params_base_lr",
        "params_tau_epoch",
    ):
        assert column in frame.columns, column
    last = study.trials[-1]
    scale = sampler.ladder[3]
    assert last.user_attrs["scale.width"] == scale["width"]
    hp = SPACE.concretize(last.params, scale)
    assert last.user_attrs["hp.lr"] == pytest.approx(hp.lr)
    assert last.user_attrs["hp"]["groups"]["output"] == pytest.approx(dict(hp.groups["output"]))
    assert sampler.hyperparameters(last) == (scale, hp)  # as Ray's hyperparameters(config)
    assert hyperparameter_attrs(hp)["hp.weight_decay"] == pytest.approx(hp.weight_decay)
    rebuilt = ts.Hyperparameters.from_dict(
        {**last.user_attrs["hp"], "scale": hp.scale.to_dict(), "coordinates": last.params}
    )
    assert rebuilt == hp


def test_concurrent_workers_detour_until_the_law_opens_for_the_larger_rungs() -> None:
    """Two workers (n_jobs=2): while rung 1's last trial runs, the law of rung 2 is pending, so
    the other worker gets cheap rung-0 trials instead; no trial of rungs 2 and 3 starts before the
    law, and all of them are law-guided (focus=1)."""
    sampler = TransferSampler(
        SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0),
        trials_per_rung=[4, 4, 3, 3], min_trials=4, focus=1.0,
    )  # fmt: skip
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        scale, _ = sampler.suggest(trial)
        # rung 1 has stragglers (odd trial numbers), so it finishes while the other worker asks
        time.sleep(0.2 if sampler.rung(trial) == 1 and trial.number % 2 else 0.01)
        return 1.0 + regret(scale, trial.params)

    study.optimize(objective, n_trials=24, n_jobs=2)
    trials = study.trials
    detoured = [t for t in trials if "detoured_from" in t.user_attrs]
    assert detoured, "no trial was detoured: the workers never overlapped on rung 1"
    assert {t.user_attrs["detoured_from"] for t in detoured} == {2}
    assert all(t.system_attrs[RUNG_ATTR] < 2 for t in detoured)
    assert all(t.user_attrs["transfer"] == "base" for t in detoured)
    # rung 1's fourth finished trial gives the law its second source rung
    rung_1_ends = sorted(t.datetime_complete for t in trials if t.system_attrs[RUNG_ATTR] == 1)
    law_opened = rung_1_ends[3]
    for rung in (2, 3):
        on_rung = [t for t in trials if t.system_attrs[RUNG_ATTR] == rung]
        assert len(on_rung) >= 3
        sources = [t.user_attrs["transfer"] for t in on_rung]
        # the first is the law's point (two workers planning at once may both get it)
        assert sources[0] == "law-point", sources
        assert set(sources) <= {"law-point", "law-neighbourhood"}, sources
        assert all(t.datetime_start >= law_opened for t in on_rung)
    # the overshoot: rung 0 took the detours beyond its budget of 4, at most 2 x 4
    rung_0 = sum(t.system_attrs[RUNG_ATTR] == 0 for t in trials)
    assert 4 < rung_0 <= 8


def test_an_enqueued_trial_keeps_its_rung_and_parameters() -> None:
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=1))
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({"base_lr": 1e-3, "tau_epoch": 2.0}, user_attrs={"rung": 3})
    study.optimize(make_objective(sampler), n_trials=2)
    first, second = study.trials
    assert first.system_attrs[RUNG_ATTR] == 3 and first.user_attrs["scale.width"] == 256
    assert first.params == {"base_lr": 1e-3, "tau_epoch": 2.0}
    assert first.user_attrs["transfer"] == "enqueued"
    assert second.system_attrs[RUNG_ATTR] == 0


def test_an_enqueued_trial_does_not_take_the_law_point_of_its_rung() -> None:
    """A trial the user enqueued at a law-guided rung is not the plan's: the first trial the
    planner places there still runs at the law's point (it counted as the rung's first and the
    law's point was never run)."""
    sampler = TransferSampler(SPACE, LADDER, trials_per_rung=[6, 6, 6, 3], seed=0)
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({"base_lr": 1e-3, "tau_epoch": 2.0}, user_attrs={"rung": 3})
    study.optimize(make_objective(sampler, noise=0.0), n_trials=21)
    top = [t for t in study.trials if t.system_attrs[RUNG_ATTR] == 3]
    assert [t.user_attrs["transfer"] for t in top[:2]] == ["enqueued", "law-point"]
    assert top[1].params != top[0].params


@pytest.mark.parametrize("base_name", ["tpe", "tpe-multivariate", "gp"])
def test_tpe_and_gp_learn_each_rung_separately(base_name: str) -> None:
    """Two rungs with opposite optima: a base sampler that mixed them would search in between."""
    if base_name == "gp":
        pytest.importorskip("torch")
        inner: optuna.samplers.BaseSampler = optuna.samplers.GPSampler(seed=0, n_startup_trials=3)
    else:
        inner = optuna.samplers.TPESampler(
            seed=0, n_startup_trials=4, multivariate=base_name == "tpe-multivariate"
        )
    space = ts.TransferSpace(BASE, {"base_lr": ts.Float(1e-4, 1.0, log=True), "tau_epoch": 1.0})
    ladder = [BASE, BASE.replace(width=512)]
    sampler = TransferSampler(
        space, ladder, base_sampler=Recording(inner), trials_per_rung=1, transfer=False
    )
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        scale, _ = sampler.suggest(trial, record=False)
        best = math.log(1e-3) if scale["width"] == 64 else math.log(1e-1)
        return (math.log(trial.params["base_lr"]) - best) ** 2

    study.optimize(objective, n_trials=20 if base_name == "gp" else 50)
    for rung in (0, 1):
        for own, rungs in sampler.rung_sampler(rung).seen_rungs:  # type: ignore[attr-defined]
            assert rungs == {own} == {rung}
    for rung, best in ((0, 1e-3), (1, 1e-1)):
        trials = [t for t in study.trials if t.system_attrs[RUNG_ATTR] == rung]
        late = [t.params["base_lr"] for t in trials[len(trials) // 2 :]]
        assert abs(math.log(float(np.median(late))) - math.log(best)) < 1.0, (rung, late)


# ----------------------------------------------------------------------------------------------
# Faults, pruning, reading a study back
# ----------------------------------------------------------------------------------------------
def test_nan_exceptions_and_pruned_trials_map_to_observation_states() -> None:
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=2))
    study = optuna.create_study(sampler=sampler)
    outcomes = iter(["ok", "nan", "raise", "prune", "inf", "ok"])

    def objective(trial: optuna.Trial) -> float:
        scale, _ = sampler.suggest(trial)
        outcome = next(outcomes)
        if outcome == "nan":
            return math.nan
        if outcome == "raise":
            raise RuntimeError("out of memory")
        if outcome == "prune":
            trial.report(5.0, step=1)
            raise optuna.TrialPruned()
        if outcome == "inf":
            return math.inf
        return 1.0 + regret(scale, trial.params)

    study.optimize(objective, n_trials=6, catch=(RuntimeError,))
    states = [t.state for t in study.trials]
    assert states[1] == states[2] == optuna.trial.TrialState.FAIL
    observations = observations_from_study(study)
    # Optuna stores FAIL for both; the returned NaN diverged, the exception crashed.
    assert [o.state for o in observations] == [
        "complete", "complete", "failed", "pruned", "complete", "complete"
    ]  # fmt: skip
    assert math.isnan(observations[1].value) and observations[1].diverged
    assert observations[2].crashed and not observations[2].diverged
    assert observations[3].value == 5.0 and not observations[3].usable
    assert observations[4].diverged  # +inf: complete but diverged
    assert observations[0].scale == sampler.ladder[0]
    assert set(observations[0].params) == {"base_lr", "tau_epoch"}
    # Every one of them cost compute: all six used up rung 0's budget of 6, the next goes up.
    sampler.planner.budgets = (6, *sampler.planner.budgets[1:])
    assert sampler.rung(study.ask()) == 1


def test_a_study_resumed_with_another_ladder_is_refused_and_a_costlier_rung_may_be_added(
    tmp_path: Any,
) -> None:
    """Trials store their rung by index: a second session whose ladder puts a rung before the
    stored ones would read one rung's trials as another's (it ran width 64 again and never the
    new width 32). That is refused, naming both ladders; adding costlier rungs after them is
    fine."""
    storage = f"sqlite:///{tmp_path / 'resume.db'}"
    first, new = LADDER[:2], LADDER[2]

    def session(ladder: Sequence[ts.Scale], create: bool) -> optuna.Study:
        sampler = TransferSampler(SPACE, ladder, seed=0, trials_per_rung=2)
        open_study = optuna.create_study if create else optuna.load_study
        study = open_study(storage=storage, study_name="s", sampler=sampler)
        study.optimize(lambda t: (sampler.suggest(t), 1.0)[1], n_trials=2)
        return study

    session(first, create=True)
    cheaper = ts.Scale({**dict(first[0]), "width": first[0]["width"] / 2})
    with pytest.raises(ts.TransferSearchError, match="store their rung by index"):
        session([cheaper, *first], create=False)
    study = session([*first, new], create=False)
    states = [t.state for t in study.trials]  # the refused session's trial is not left RUNNING
    assert (
        states
        == [optuna.trial.TrialState.COMPLETE] * 2
        + [optuna.trial.TrialState.FAIL]
        + [optuna.trial.TrialState.COMPLETE] * 2
    )


def test_a_trial_enqueued_without_a_rung_is_labelled_enqueued_not_by_the_plan() -> None:
    """``study.enqueue_trial(params)`` with no rung runs its own parameters where the plan sends
    the next trial; it was labelled with the plan's source ("law-point", "base") although the
    plan's coordinates never ran."""
    sampler = TransferSampler(SPACE, LADDER, seed=0, trials_per_rung=2)
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({"base_lr": 0.5, "tau_epoch": 10.0})
    study.optimize(lambda t: (sampler.suggest(t), 1.0)[1], n_trials=2)
    first, second = study.trials
    assert first.params == {"base_lr": 0.5, "tau_epoch": 10.0}
    assert (
        first.user_attrs["transfer"] == "enqueued" and second.user_attrs["transfer"] != "enqueued"
    )
    assert first.user_attrs["rung"] == 0


def test_a_nan_of_any_numeric_type_the_objective_returns_is_a_divergence() -> None:
    """``return loss`` where the loss is a numpy float32 or a 0-d torch tensor: Optuna casts it
    with ``float()``, and a NaN of that kind is a divergence like a Python NaN (it was recorded
    as a crash and left out of the fit)."""
    torch = pytest.importorskip("torch")
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=2))
    study = optuna.create_study(sampler=sampler)
    told = [math.nan, np.float64("nan"), np.float32("nan"), torch.tensor(math.nan)]

    def objective(trial: optuna.Trial) -> Any:
        sampler.suggest(trial)
        return told[trial.number]

    study.optimize(objective, n_trials=len(told))
    observations = observations_from_study(study)
    assert [(o.diverged, o.crashed) for o in observations] == [(True, False)] * len(told)


def test_a_trial_interrupted_by_ctrl_c_is_no_divergence_and_runs_again_next_time() -> None:
    """Issue 21: KeyboardInterrupt in the objective (Ctrl-C) is recorded as interrupted: no
    budget used, not fitted, not told to the base sampler; the next optimize reruns it."""
    recording = Recording(optuna.samplers.RandomSampler(seed=0))
    sampler = TransferSampler(SPACE, LADDER, base_sampler=recording, trials_per_rung=3)
    study = optuna.create_study(sampler=sampler)
    study.optimize(make_objective(sampler), n_trials=2)
    interrupt = True

    def objective(trial: optuna.Trial) -> float:
        scale, _ = sampler.suggest(trial)
        if interrupt:
            raise KeyboardInterrupt
        return 1.0 + regret(scale, trial.params)

    with pytest.raises(KeyboardInterrupt):
        study.optimize(objective, n_trials=1)
    cut = study.trials[2]
    assert cut.state == optuna.trial.TrialState.FAIL
    assert cut.user_attrs["transfersearch:interrupted"] is True
    assert "transfersearch:told-fail" not in cut.system_attrs
    assert [o.state for o in observations_from_study(study)] == ["complete", "complete"]
    rerun = study.trials[3]
    assert rerun.state == optuna.trial.TrialState.WAITING
    assert rerun.params == cut.params and rerun.system_attrs["failed_trial"] == 2
    interrupt = False
    study.optimize(objective, n_trials=2)
    assert study.trials[3].state == optuna.trial.TrialState.COMPLETE  # the rerun ran first
    assert study.trials[3].params == cut.params
    assert study.trials[3].user_attrs["transfer"] == "retry"
    # Rung 0's budget of 3: two complete, the rerun; the interrupted one used none of it.
    assert [sampler.rung(t) for t in study.trials] == [0, 0, 0, 0, 1]


#: The issue's landscape: six rungs of the known law; past a cliff 5x above a rung's optimal
#: base_lr the run diverges and the objective returns NaN (as the README tells users to do).
CLIFF_LADDER = [BASE.replace(width=w) for w in (64, 96, 128, 192, 256, 384)]
CLIFF_FACTOR = 5.0


def cliff_objective(sampler: TransferSampler) -> Any:
    def objective(trial: optuna.Trial) -> float:
        scale, _ = sampler.suggest(trial)
        if math.log(trial.params["base_lr"]) > optimum(scale)[0] + math.log(CLIFF_FACTOR):
            return math.nan
        return 1.0 + regret(scale, trial.params)

    return objective


def test_a_sweep_with_diverging_trials_climbs_every_rung_and_extrapolates() -> None:
    sampler = TransferSampler(
        SPACE, CLIFF_LADDER, base_sampler=optuna.samplers.TPESampler(seed=0), seed=0
    )
    study = optuna.create_study(sampler=sampler)
    study.optimize(cliff_objective(sampler), n_trials=150)
    states = [(t.system_attrs[RUNG_ATTR], t.state) for t in study.trials]
    failed = [rung for rung, state in states if state == optuna.trial.TrialState.FAIL]
    assert failed, "the landscape has a cliff: some trials must diverge"
    # Diverged trials cost compute and use up their rung's budget, so the sweep climbs.
    per_rung = [sum(rung == r for rung, _ in states) for r in range(len(CLIFF_LADDER))]
    assert all(n >= budget for n, budget in zip(per_rung, sampler.planner.budgets)), per_rung
    result = ts.extrapolate(study, target=BASE.replace(width=1024))
    lr_star = optimum(BASE.replace(width=1024))[0]
    assert abs(math.log(result.params["base_lr"]) - lr_star) < 0.5


def test_the_base_sampler_is_told_a_diverged_trial_as_the_worst_value() -> None:
    seen: dict[int, float] = {}

    class Watching(Recording):
        def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
            for other in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
                seen[other.number] = other.value
            return super().sample_independent(study, trial, name, dist)

    sampler = TransferSampler(
        SPACE, CLIFF_LADDER, base_sampler=Watching(optuna.samplers.RandomSampler(seed=1))
    )
    study = optuna.create_study(sampler=sampler)
    study.optimize(cliff_objective(sampler), n_trials=12)
    rung0 = [t for t in study.trials if t.system_attrs[RUNG_ATTR] == 0][:-1]
    complete = [t.value for t in rung0 if t.state == optuna.trial.TrialState.COMPLETE]
    diverged = [t.number for t in rung0 if t.state == optuna.trial.TrialState.FAIL]
    assert complete and diverged
    assert all(seen[n] == max(complete) for n in diverged if n > rung0[0].number), seen
    # The study itself still holds the truth: FAIL, no value; the fit reads it as diverged.
    assert study.trials[diverged[0]].value is None


def test_the_base_sampler_never_hears_of_a_crashed_trial() -> None:
    """A trial that raised (an out-of-memory crash) stays FAIL in the base sampler's view, which
    TPE and GP skip; only a NaN (diverged) is shown as the rung's worst value."""
    seen: dict[int, Any] = {}

    class Watching(Recording):
        def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
            for other in study.get_trials(deepcopy=False):
                seen[other.number] = (other.state, other.value)
            return super().sample_independent(study, trial, name, dist)

    sampler = TransferSampler(
        SPACE, CLIFF_LADDER, base_sampler=Watching(optuna.samplers.RandomSampler(seed=1))
    )
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        scale, _ = sampler.suggest(trial)
        if trial.number % 3 == 1:
            raise MemoryError("CUDA out of memory (simulated by the objective)")
        return math.nan if trial.number % 3 == 2 else 1.0 + regret(scale, trial.params)

    study.optimize(objective, n_trials=12, catch=(MemoryError,))
    rung0 = [t for t in study.trials if t.system_attrs[RUNG_ATTR] == 0][:-1]
    crashed = [t.number for t in rung0 if t.number % 3 == 1]
    diverged = [t.number for t in rung0 if t.number % 3 == 2]
    assert crashed and diverged
    fail = optuna.trial.TrialState.FAIL
    assert all(seen[n] == (fail, None) for n in crashed if n in seen), seen
    assert all(seen[n][0] == optuna.trial.TrialState.COMPLETE for n in diverged if n in seen)
    assert any(n in seen for n in crashed)


def test_running_and_waiting_trials_are_not_observations() -> None:
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=3))
    study = optuna.create_study(sampler=sampler)
    study.optimize(make_objective(sampler), n_trials=2)
    study.ask()  # RUNNING
    study.enqueue_trial({"base_lr": 1e-3, "tau_epoch": 1.0})  # WAITING
    assert len(observations_from_study(study)) == 2


def test_reading_a_study_without_scales_says_how_to_fix_it() -> None:
    study = optuna.create_study()
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    with pytest.raises(ts.TransferSearchError, match="scale"):
        observations_from_study(study)


def test_rung_pruner_compares_within_a_rung() -> None:
    """Rung 1's curves lie 100× above rung 0's; an unwrapped median pruner prunes all of rung 1.

    Within each rung every trial improves on the last except one (index 4), which alone is
    worse than its rung's median and must be pruned.
    """
    levels = [9.0, 8.0, 7.0, 6.0, 50.0, 5.0, 4.0, 3.0]
    pruned = {}
    for wrap in (True, False):
        sampler = TransferSampler(
            SPACE, LADDER[:2], base_sampler=optuna.samplers.RandomSampler(seed=4),
            trials_per_rung=[8, 8],
        )  # fmt: skip
        median = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
        study = optuna.create_study(sampler=sampler, pruner=RungPruner(median) if wrap else median)

        def objective(trial: optuna.Trial, sampler: TransferSampler = sampler) -> float:
            sampler.suggest(trial, record=False)
            rung = sampler.rung(trial)
            index = sum(
                t.system_attrs.get(RUNG_ATTR) == rung
                for t in trial.study.get_trials(deepcopy=False)
                if t.number < trial.number
            )
            value = levels[index] * (100.0 if rung == 1 else 1.0)
            for step in range(3):
                trial.report(value * (3 - step), step)
                if trial.should_prune():
                    raise optuna.TrialPruned()
            return value

        study.optimize(objective, n_trials=16)
        pruned[wrap] = [
            (t.system_attrs[RUNG_ATTR], t.number)
            for t in study.trials
            if t.state == optuna.trial.TrialState.PRUNED
        ]
    assert pruned[True] == [(0, 4), (1, 12)]
    assert [n for rung, n in pruned[False] if rung == 1] == list(range(8, 16))


def test_extrapolate_reads_a_study() -> None:
    sampler = TransferSampler(
        SPACE, LADDER[:3], base_sampler=optuna.samplers.TPESampler(seed=5), trials_per_rung=14
    )
    study = optuna.create_study(sampler=sampler)
    study.optimize(make_objective(sampler, noise=0.0), n_trials=42)
    result = extrapolate(study, target=TOP, params=["base_lr", "tau_epoch"])
    lr_star, tau_star = optimum(TOP)
    assert abs(math.log(result.params["base_lr"]) - lr_star) < 0.35
    assert abs(math.log(result.params["tau_epoch"]) - tau_star) < 0.35


def test_a_maximised_study_transfers_the_maximum() -> None:
    sampler = TransferSampler(
        SPACE,
        LADDER,
        base_sampler=optuna.samplers.TPESampler(seed=6),
        trials_per_rung=[12, 12, 12, 4],
        seed=0,  # the rungs' base copies too (unseeded, they drew from OS entropy and the test failed now and then)
    )
    study = optuna.create_study(sampler=sampler, direction="maximize")
    objective = make_objective(sampler, noise=0.0)
    study.optimize(lambda trial: -objective(trial), n_trials=40)  # maximum at the loss optimum
    assert sampler.planner.direction == "maximize"  # learnt from the study
    top = [t for t in study.trials if t.system_attrs[RUNG_ATTR] == 3]
    assert top[0].user_attrs["transfer"] == "law-point"
    assert regret(TOP, top[0].params) < 0.05
    # the planner is fed the raw values: minimising them would look for the valley's rim
    minimizing = TransferSampler(SPACE, LADDER, trials_per_rung=[12, 12, 12, 4])
    wrong = minimizing.planner.prediction(3, observations_from_study(study))
    assert wrong is None or regret(TOP, wrong.center) > 0.2
    with pytest.raises(ts.TransferSearchError, match="direction='maximize'"):
        TransferSampler(SPACE, LADDER, direction="maximize")


def test_the_study_reader_returns_a_sweep_with_the_stored_space_and_the_direction() -> None:
    for direction in ("minimize", "maximize"):
        sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0))
        study = optuna.create_study(sampler=sampler, direction=direction)
        study.optimize(make_objective(sampler), n_trials=3)
        sweep = sweep_from_study(study)
        assert isinstance(sweep, Sweep)
        assert sweep.observations == tuple(observations_from_study(study))
        assert len(sweep.observations) == 3
        assert sweep.direction == direction
        assert sweep.space is not None and space_to_json(sweep.space) == space_to_json(SPACE)
        read = ts.read_sweep(study)  # through the registered reader
        assert (read.observations, read.direction) == (sweep.observations, direction)
        assert read.space is not None and space_to_json(read.space) == space_to_json(SPACE)
    bare = sweep_from_study(optuna.create_study(direction="maximize"))  # no sampler ran: no space
    assert bare == Sweep((), space=None, direction="maximize")


def test_bad_arguments_raise_with_the_fix() -> None:
    with pytest.raises(ts.TransferSearchError, match="BaseSampler"):
        bad: Any = "tpe"
        TransferSampler(SPACE, LADDER, base_sampler=bad)
    with pytest.raises(ts.TransferSearchError, match="ladder"):
        TransferSampler(SPACE, [])
    sampler = TransferSampler(SPACE, LADDER)
    study = optuna.create_study(sampler=sampler, directions=["minimize", "minimize"])
    with pytest.raises(ts.TransferSearchError, match="one metric"):
        study.ask()
    other = optuna.create_study()
    trial = other.ask()
    with pytest.raises(ts.TransferSearchError, match="no rung"):
        sampler.suggest(trial)


# ----------------------------------------------------------------------------------------------
# Transfer on a synthetic landscape with a known law
# ----------------------------------------------------------------------------------------------
def trials_to_target(seed: int, transfer: bool, target: float = 0.02) -> int:
    """Trials (all rungs, in order) until a top-rung trial is within ``target`` of the optimum."""
    budgets: Sequence[int] = (12, 12, 12, 60)
    sampler = TransferSampler(
        SPACE, LADDER, base_sampler=optuna.samplers.TPESampler(seed=seed),
        trials_per_rung=list(budgets), seed=seed, transfer=transfer,
    )  # fmt: skip
    study = optuna.create_study(sampler=sampler)
    noisy = make_objective(sampler, noise=0.01, seed=seed)
    reached: list[int] = []

    def objective(trial: optuna.Trial) -> float:
        value = noisy(trial)
        if sampler.rung(trial) == 3 and regret(TOP, trial.params) <= target:
            reached.append(trial.number + 1)
            trial.study.stop()
        return value

    study.optimize(objective, n_trials=sum(budgets))
    return reached[0] if reached else sum(budgets) + 1


@pytest.mark.xfail(
    strict=True,
    reason="issue 25's one model (2f5ced1): guided runs need [53, 49, 49] trials (<= 39 asked; "
    "independent rungs need more): the symmetric valley reads each rung's optimum toward the "
    "gentle side of synthetic's asymmetric wall (docs/science.md §7.2), so the law's first "
    "top-rung trial misses by about 0.2 in log base_lr",
)
def test_transfer_reaches_the_target_regret_in_fewer_trials_than_independent_rungs() -> None:
    seeds = range(3)
    guided = [trials_to_target(seed, transfer=True) for seed in seeds]
    independent = [trials_to_target(seed, transfer=False) for seed in seeds]
    proxy_trials = 36  # both spend the same 12 + 12 + 12 trials below the top rung
    assert max(guided) <= proxy_trials + 3, guided
    assert np.mean(independent) > np.mean(guided) + 10, (guided, independent)
    # and it is the law, not luck: the first top-rung trial is the law's point
    assert min(independent) > proxy_trials + 1, independent


@pytest.mark.xfail(
    strict=True,
    reason="issue 25's one model: the law's |log error| 0.255 (< 0.2 asked) on synthetic's "
    "asymmetric valley, the gentle-side bias of a symmetric quadratic (docs/science.md §7.2)",
)
def test_extrapolate_fixture_sanity() -> None:
    """The synthetic law is recoverable from noise-free Observations (guards the test above).

    Read on the law's point, which the posterior draws do not move: the decision's (``params``)
    lies 0.18–0.24 from the truth across draw seeds (0.205 before 2026-11-27's change to the
    drift across a fold's span), so whether it passed 0.2 was the draws' luck."""
    rng = np.random.default_rng(0)
    observations = []
    for scale in LADDER[:3]:
        for _ in range(20):
            params = {
                "base_lr": float(math.exp(rng.uniform(math.log(1e-4), math.log(1e-1)))),
                "tau_epoch": float(math.exp(rng.uniform(-2.0, 2.0))),
            }
            observations.append(ts_obs(scale, params, 1.0 + regret(scale, params)))
    result = extrapolate(observations, target=TOP, params=["base_lr", "tau_epoch"])
    assert abs(math.log(result.law_params["base_lr"]) - optimum(TOP)[0]) < 0.2


def ts_obs(scale: ts.Scale, params: dict[str, float], value: float) -> Any:
    from transfersearch.observations import Observation

    return Observation(scale=scale, params=params, value=value)


def rung_draws(**kwargs: Any) -> dict[int, list[float]]:
    """base_lr of the first four trials of rungs 0 and 1, drawn by the base sampler alone."""
    sampler = TransferSampler(
        SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0), trials_per_rung=4,
        transfer=False, **kwargs,
    )  # fmt: skip
    study = optuna.create_study(sampler=sampler)
    study.optimize(make_objective(sampler), n_trials=8)
    return {
        rung: [t.params["base_lr"] for t in study.trials if t.system_attrs[RUNG_ATTR] == rung]
        for rung in (0, 1)
    }


def test_each_rung_copy_of_the_base_sampler_draws_its_own_points() -> None:
    for kwargs in ({}, {"seed": 3}):
        draws = rung_draws(**kwargs)
        assert not set(draws[0]) & set(draws[1]), f"rung 1 replayed rung 0's draws ({kwargs})"
    assert rung_draws(seed=3) == rung_draws(seed=3), "an explicit seed must reproduce the sweep"


def test_an_unknown_keyword_or_a_bad_seed_names_the_fix() -> None:
    with pytest.raises(ts.TransferSearchError, match="trials_per_rung"):
        TransferSampler(SPACE, LADDER, trial_per_rung=4)
    with pytest.raises(ts.TransferSearchError, match="seed"):
        TransferSampler(SPACE, LADDER, seed="x")


def test_a_finished_trial_s_hyperparameters_are_what_suggest_returned() -> None:
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0))
    study = optuna.create_study(sampler=sampler)
    returned = {}

    def objective(trial: optuna.Trial) -> float:
        scale, hp = returned[trial.number] = sampler.suggest(trial)
        return 1.0 + synthetic.regret(scale, hp.coordinates)

    study.optimize(objective, n_trials=3)
    for trial in study.trials:
        assert sampler.hyperparameters(trial) == returned[trial.number]


def test_a_sampler_keeps_its_study_s_direction_and_logs_its_rungs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0))
    with caplog.at_level(logging.DEBUG, logger="transfersearch"):
        optuna.create_study(sampler=sampler).optimize(make_objective(sampler), n_trials=2)
    assert "rung 0 by the budget order" in caplog.text
    with pytest.raises(ts.TransferSearchError, match="one sampler per direction"):
        optuna.create_study(sampler=sampler, direction="maximize").ask()


def test_a_base_scale_without_a_variable_the_ladder_varies_fails_at_construction() -> None:
    # Issue 27 item 10: it used to build fine and fail at the first trial, inside Optuna.
    space = ts.TransferSpace(
        ts.Scale(dataset_size=2e4, batch_size=64),
        {"base_lr": ts.Float(1e-5, 1.0, log=True), "tau_epoch": ts.Float(1e-2, 1e2, log=True)},
    )
    ladder = [ts.Scale(width=w, dataset_size=2e4, batch_size=64) for w in (64, 128)]
    with pytest.raises(ts.TransferSearchError) as caught:
        TransferSampler(space, ladder)
    message = str(caught.value)
    assert "rung 0 Scale(batch_size=64, dataset_size=20000, width=64)" in message
    assert "Add width=... to the base scale" in message
    assert "The ladder varies ['width']" in message


def test_study_optimize_logs_per_rung_progress_and_when_the_law_takes_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Issue 27 item 11: the in-process path says, at INFO, where each trial goes, how far its
    # rung is, and when law-guided sampling starts at a rung.
    sampler = TransferSampler(
        SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0),
        trials_per_rung=[6, 6, 3, 3], min_trials=3, seed=0,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="transfersearch.integrations.optuna"):
        optuna.create_study(sampler=sampler).optimize(make_objective(sampler), n_trials=18)
    text = caplog.text
    assert "trial 0: rung 0 (batch_size=64, dataset_size=20000, width=64), its trial 1 of 6" in text
    assert "rung 0: trial 5 uses the last of its budget of 6" in text
    assert "rung 2: law-guided sampling starts with trial 12" in text
    assert "coordinates at the law's predicted optimum" in text
    assert text.count("law-guided sampling starts") == 2  # rungs 2 and 3, once each


def test_workers_of_one_seeded_sampler_draw_different_trials() -> None:
    # Issue 27 item 3: with a seed, every launcher worker replayed one stream (its rung copies
    # are seeded from (seed, rung)). Each worker now reseeds from its own derived seed.
    from transfersearch.integrations._launcher_workers import worker_seed

    def first_draws(worker: int) -> list[tuple[float, float]]:
        sampler = TransferSampler(
            SPACE, LADDER, base_sampler=optuna.samplers.TPESampler(seed=0), seed=0
        )
        sampler.reseed_rng(worker_seed(123, worker))
        study = optuna.create_study(sampler=sampler)
        study.optimize(make_objective(sampler), n_trials=20)
        return [(t.params["base_lr"], t.params["tau_epoch"]) for t in study.trials]

    one, other = first_draws(0), first_draws(1)
    assert not set(one) & set(other), "two workers drew the same trial"
    assert first_draws(0) == one, "a worker's derived seed must reproduce its draws"


def test_the_sampler_passes_diverged_beyond_to_the_law_and_refuses_a_bad_one() -> None:
    sampler = TransferSampler(SPACE, LADDER, diverged_beyond=6.0)
    assert sampler.planner.options.diverged_beyond == 6.0
    # math.inf is the documented "fit every finite value" (no level, no automatic reading)
    assert (
        TransferSampler(SPACE, LADDER, diverged_beyond=math.inf).planner.options.diverged_beyond
        == math.inf
    )
    with pytest.raises(ts.TransferSearchError, match=r"diverged_beyond.*e\.g\. diverged_beyond=6"):
        TransferSampler(SPACE, LADDER, diverged_beyond=math.nan)


def test_a_settled_law_is_refitted_ever_more_rarely_as_the_study_grows() -> None:
    """Issue 48: every refit of the law costs a fit (~0.1 s), and a rung's law was refitted each
    time one of its rungs grew by 1.25x, about 14-20 times per rung over 600 trials. On a
    noiseless landscape the law stops moving once each rung has a few trials of its own; a refit
    that leaves the neighbourhood in place squares the growth the next one waits for (up to 4x),
    so past the budgets each law is refitted a couple of times (O(log log N) while it stays
    put), and it is still refitted: the study's later trials reach it."""
    sampler = TransferSampler(
        SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0), seed=0
    )
    study = optuna.create_study(sampler=sampler)
    study.optimize(make_objective(sampler, noise=0.0), n_trials=600)
    attempts = sampler.planner.fit_attempts
    assert all(a.ok for a in attempts)
    for rung in range(len(LADDER)):
        fitted = [sum(a.trials.values()) for a in attempts if a.rung == rung]
        late = [n for n in fitted if n >= 100]  # fits after the budgets (48 trials) had grown 2x
        assert 1 <= len(late) <= 2, (rung, fitted)
        gaps = [b / a for a, b in itertools.pairwise(fitted) if a >= 48]
        assert gaps == sorted(gaps), (rung, fitted)  # settled: each wait at least the last
    assert len(attempts) <= 40  # 68 over 1,000 trials before (the fits of the budgets: ~20)
    kinds = [t.user_attrs["transfer"] for t in study.trials[100:]]
    assert kinds.count("law-neighbourhood") > len(kinds) / 2  # the law still leads its draws


def test_budgets_under_min_trials_warn_at_construction_naming_it() -> None:
    """Issue 49, item 3: `trials_per_rung=4` with the default `min_trials=6` never transferred
    (every trial `"base"`) and nothing said so. The sampler warns when it is built, naming
    `min_trials` and the value that would let the law in; with it, the law takes over."""
    from transfersearch import TransferSearchWarning

    def run(sampler: TransferSampler) -> list[str]:
        study = optuna.create_study(sampler=sampler)
        study.optimize(
            lambda t: 2.0 + synthetic.regret(*_suggested(sampler, t)), n_trials=len(LADDER) * 4
        )
        return [t.user_attrs["transfer"] for t in study.trials]

    with pytest.warns(TransferSearchWarning, match=r"min_trials=6 .*Pass min_trials=4 or fewer"):
        silent = TransferSampler(SPACE, LADDER, trials_per_rung=4, seed=0)
    assert set(run(silent)) == {"base"}  # what the warning says
    with warnings.catch_warnings():
        warnings.simplefilter("error", TransferSearchWarning)
        fixed = TransferSampler(SPACE, LADDER, trials_per_rung=4, min_trials=4, seed=0)
        TransferSampler(SPACE, LADDER, trials_per_rung=4, transfer=False, seed=0)
    assert any(kind.startswith("law") for kind in run(fixed))


def _suggested(sampler: TransferSampler, trial: Any) -> tuple[Any, Any]:
    scale, hp = sampler.suggest(trial)
    return scale, hp.coordinates


@pytest.mark.parametrize(
    "weight_decay", [ts.Choice([0.0, 0.01, 0.1]), ts.Float(0.0, 0.3)], ids=["choice", "linear"]
)
def test_a_weight_decay_of_zero_is_swept_fitted_and_transferred(weight_decay: Any) -> None:
    """Issue 49, item 7: `Float(0.0, 0.3)` and `Choice([0.0, 0.01, 0.1])` were refused (low > 0,
    "must be a positive finite number"), while a table with 0 rows was fitted. A weight decay of
    0 (no decay) is swept, fitted and carried to the target's groups."""
    space = ts.TransferSpace(
        base=BASE, coords={"base_lr": ts.Float(1e-4, 0.3, log=True), "weight_decay": weight_decay}
    )
    sampler = TransferSampler(space, LADDER, trials_per_rung=8, seed=0)
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({"base_lr": 3e-3, "weight_decay": 0.0})

    def objective(trial: optuna.Trial) -> float:
        _, hp = sampler.suggest(trial)
        coords = hp.coordinates
        return 2.0 + math.log(coords["base_lr"] / 3e-3) ** 2 + 3.0 * coords["weight_decay"]

    study.optimize(objective, n_trials=32)
    assert 0.0 in {t.params["weight_decay"] for t in study.trials}
    best = study.best_trial.params  # no decay is best: the enqueued trial's, or one like it
    assert best["weight_decay"] == 0.0
    target = TOP.replace(width=1024)
    hp = space.concretize(best, target)
    assert {group["weight_decay"] for group in hp.groups.values()} == {0.0}
    assert space.coordinates(hp, target) == pytest.approx(best)
    res = extrapolate(study, target=target)  # the study's 0 rows are read and fitted
    assert math.isfinite(res.params["weight_decay"])


def test_a_choice_a_coordinate_cannot_take_is_named_with_the_declaration_that_works() -> None:
    """The refusal names the Choice and the option, not only `coords.weight_decay`."""
    with pytest.raises(ts.TransferSearchError, match=r"declared Choice\(choices=\(-0.1, 0.1\)\)"):
        ts.TransferSpace(
            base=BASE,
            coords={
                "base_lr": ts.Float(1e-4, 0.3, log=True),
                "weight_decay": ts.Choice([-0.1, 0.1]),
            },
        )
    with pytest.raises(ts.TransferSearchError, match=r"weight_decay=ts.Float\(0.0, 0.3\)"):
        ts.TransferSpace(
            base=BASE,
            coords={"base_lr": ts.Float(1e-4, 0.3, log=True), "weight_decay": ts.Float(-0.1, 0.3)},
        )

"""The public boundary (transfersearch.api): every source gives one answer, the options are one
set of keywords, and what the user must act on is warned at the user's own line."""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _tables import TARGET, observations, sweep_rows, write_csv

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.cli import parse_scale
from transfersearch.observations import Observation
from transfersearch.scale import Scale

TARGET_SCALE = parse_scale(TARGET)
#: Far beyond the ladder (width 1e6 against 64-256): the fit says its prediction leans on the law.
FAR_TARGET = {"width": 1e6, "dataset_size": 3.2e5}


def _same(a: ts.Extrapolation, b: ts.Extrapolation) -> None:
    assert a.params == b.params and a.law_params == b.law_params
    assert a.interval() == b.interval() and a.model == b.model
    np.testing.assert_array_equal(a.samples, b.samples)


def test_a_frame_a_list_a_csv_read_frame_and_a_sweep_give_one_answer(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    rows = sweep_rows()
    trials = observations(rows)
    from_list = ts.extrapolate(trials, target=TARGET_SCALE)
    from_frame = ts.extrapolate(pd.DataFrame(rows), target=TARGET_SCALE)
    # round_trip: the same numbers as written (pandas 2.0's default parser, the oldest pandas
    # supported, may move a float's last digit: .ci/run-oldest)
    read = pd.read_csv(write_csv(tmp_path / "trials.csv", rows), float_precision="round_trip")
    from_csv = ts.extrapolate(read, target=TARGET_SCALE)
    sweep = ts.Sweep(tuple(trials))
    from_sweep = ts.extrapolate(sweep, target=TARGET_SCALE)
    for other in (from_frame, from_csv, from_sweep):
        _same(from_list, other)
    assert ts.read_sweep(sweep) is sweep
    assert ts.read_sweep(pd.DataFrame(rows)) == sweep == ts.read_sweep(trials)
    checked = ts.validate(trials)
    assert ts.validate(sweep).predicted == checked.predicted
    assert ts.validate(read).predicted == checked.predicted


def test_options_by_keyword_and_as_fit_options_are_one_fit() -> None:
    trials = observations(sweep_rows())
    chosen = {"params": ["base_lr", "tau_epoch"], "seed": 3}
    by_keyword = ts.extrapolate(trials, target=TARGET_SCALE, **chosen)  # type: ignore[arg-type]
    options = ts.FitOptions(params=("base_lr", "tau_epoch"), seed=3)
    _same(by_keyword, ts.extrapolate(trials, target=TARGET_SCALE, options=options))
    # a keyword given with options= replaces that field only
    reseeded = ts.extrapolate(
        trials, target=TARGET_SCALE, options=dataclasses.replace(options, seed=0), seed=3
    )
    _same(by_keyword, reseeded)
    default = ts.extrapolate(trials, target=TARGET_SCALE)
    assert not np.array_equal(default.samples, by_keyword.samples)  # the seed is felt
    checked = ts.validate(trials, options=options)
    assert checked.predicted == ts.validate(trials, **chosen).predicted  # type: ignore[arg-type]


def test_an_unknown_keyword_is_named_with_its_closest_option() -> None:
    trials = observations(sweep_rows())
    with pytest.raises(ts.TransferSearchError, match="'n_boostrap'.*Did you mean 'n_bootstrap'"):
        ts.extrapolate(trials, target=TARGET_SCALE, n_boostrap=10)  # type: ignore[call-arg]
    with pytest.raises(ts.TransferSearchError, match="'sed'.*Did you mean 'seed'"):
        ts.validate(trials, sed=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda obs: ts.Sweep((*obs[:2], 3.5)), r"entries at 2 are not \(the first: 3.5\)"),
        (lambda obs: ts.Sweep(tuple(obs), direction="up"), "direction='up'"),
        (lambda obs: ts.Sweep(tuple(obs), cost=64), "cost=64"),
    ],
)
def test_a_malformed_sweep_is_refused_with_the_fix(build: Any, message: str) -> None:
    with pytest.raises(ts.TransferSearchError, match=message):
        ts.extrapolate(build(observations(sweep_rows())), target=TARGET)


def test_a_sweep_keeps_a_list_of_trials_as_a_tuple() -> None:
    obs = observations(sweep_rows())
    assert ts.Sweep(obs) == ts.Sweep(tuple(obs))


def test_options_that_are_not_fit_options_are_refused_with_the_fix() -> None:
    with pytest.raises(ts.TransferSearchError, match=r"`options` must be a FitOptions.*keywords"):
        ts.extrapolate(observations(sweep_rows()), target=TARGET, options={"n_bootstrap": 0})  # type: ignore[arg-type]


def test_extrapolate_warns_at_the_callers_line_and_keeps_the_record() -> None:
    trials = observations(sweep_rows())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line() + 1
        result = ts.extrapolate(trials, target=FAR_TARGET)
    acted = [d for d in result.diagnostics if d.act]
    assert [d.kind for d in acted] == ["far_target"]
    assert [str(w.message) for w in caught] == [d.message for d in acted]
    assert all(w.category is ts.TransferSearchWarning for w in caught)
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]


def test_validate_warns_at_the_callers_line_for_the_fit_without_the_held_out_rung() -> None:
    scenario = synthetic.make_scenario("one_rung", 0)
    dead = Scale(width=16, dataset_size=1e4)  # every trial there diverged: left out, and said
    trials = [*scenario.observations, *(Observation(dead, {"lr": 1e-3, "tau": 1.0}, math.nan),) * 3]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line() + 1
        result = ts.validate(trials)
    acted = [d for d in result.extrapolation.diagnostics if d.act]
    assert acted and {d.kind for d in acted} == {"dropped"}
    assert [str(w.message) for w in caught] == [d.message for d in acted]
    assert {(w.filename, w.lineno) for w in caught} == {(__file__, line)}


def test_estimate_optimum_on_three_trials_answers_without_a_fallback_or_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    few = [o for o in observations(sweep_rows()) if o.scale == synthetic.LADDER[0]][:3]
    with warnings.catch_warnings(), caplog.at_level("INFO", "transfersearch.api"):
        warnings.simplefilter("error")  # an edge note asks nothing of the user: logged
        optimum = ts.estimate_optimum(few, ["base_lr", "tau_epoch"])
    assert optimum.method == "pooled" and optimum.n_trials == 3
    assert all(math.isfinite(v) and v > 0 for v in optimum.params.values())
    logged = [r.getMessage() for r in caplog.records if r.name == "transfersearch.api"]
    assert all("past the trials' edge" in m for m in logged)
    assert len(logged) == len(optimum.past_edge)


def _line() -> int:
    """The caller's line number."""
    import inspect

    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def test_what_asks_nothing_of_the_user_is_logged_not_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scenario = synthetic.make_scenario("collinear", 0)  # two scale variables moved together
    with (
        warnings.catch_warnings(record=True) as caught,
        caplog.at_level("INFO", "transfersearch.api"),
    ):
        warnings.simplefilter("always")
        result = ts.extrapolate(scenario.observations, target=scenario.target)
    quiet = [d for d in result.diagnostics if not d.act]
    assert "collinearity" in {d.kind for d in quiet}
    logged = [r.getMessage() for r in caplog.records if r.name == "transfersearch.api"]
    assert logged == [d.message for d in quiet]
    assert [str(w.message) for w in caught] == [d.message for d in result.diagnostics if d.act]

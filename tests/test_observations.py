"""Observation validation, and the readers (transfersearch.readers) for lists, DataFrames and sweeps."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest

from transfersearch.errors import TransferSearchError
from transfersearch.fitting.coords import observation_arrays
from transfersearch.observations import Observation, check_scale_names, collapse_duplicates
from transfersearch.readers import (
    as_observations,
    observations_from_frame,
    read_sweep,
    register_reader,
)
from transfersearch.scale import Scale
from transfersearch.sweep import Sweep


def test_observation_converts_scale_and_marks_divergence() -> None:
    obs = Observation({"width": 64}, {"lr": 1e-3}, float("nan"))
    assert isinstance(obs.scale, Scale)
    assert obs.diverged and not obs.usable and not obs.crashed
    assert Observation({"width": 64}, {"lr": 1e-3}, math.inf).diverged


def test_a_failed_run_crashed_and_did_not_diverge() -> None:
    """State "failed" is a run that raised (an OOM, an exception): crashed, never diverged,
    whatever value it carries."""
    for value in (2.0, math.nan):
        crash = Observation({"width": 64}, {"lr": 1e-3}, value, state="failed")
        assert crash.crashed and not crash.diverged and not crash.usable
    pruned = Observation({"width": 64}, {"lr": 1e-3}, 2.0, state="pruned")
    assert not pruned.diverged and not pruned.usable
    fine = Observation({"width": 64}, {"lr": 1e-3}, 2.0)
    assert fine.usable and not fine.diverged
    assert hash(fine) == hash(Observation(Scale(width=64), {"lr": 1e-3}, 2.0))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"scale": {"width": -1}, "params": {"lr": 1e-3}, "value": 1.0}, "scale.width"),
        ({"scale": {"width": 8}, "params": {"lr": math.nan}, "value": 1.0}, "params.lr"),
        ({"scale": {"width": 8}, "params": {"lr": 1e-3}, "value": "low"}, "value"),
        ({"scale": {"width": 8}, "params": {"lr": 1e-3}, "value": 1.0, "state": "ok"}, "state"),
        ({"scale": {"width": 8}, "params": [("lr", 1e-3)], "value": 1.0}, "params"),
    ],
)
def test_observation_rejects_bad_fields(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(TransferSearchError, match=fragment):
        Observation(**kwargs)  # type: ignore[arg-type]


def test_as_observations_rejects_other_sources() -> None:
    with pytest.raises(TransferSearchError, match="Observation"):
        as_observations([{"width": 1}])
    with pytest.raises(TransferSearchError, match="list of Observation"):
        as_observations(42)


def test_read_sweep_returns_a_sweep_as_it_is_and_wraps_a_list() -> None:
    trials = [Observation({"width": w}, {"lr": 1e-3}, 2.0) for w in (64, 128)]
    sweep = Sweep(tuple(trials), direction="maximize")
    assert read_sweep(sweep) is sweep
    assert as_observations(sweep) == trials
    turned = read_sweep(sweep, direction="minimize")  # the caller's direction wins
    assert turned.direction == "minimize" and turned.observations == sweep.observations
    plain = read_sweep(trials)
    assert plain == Sweep(tuple(trials))  # a list says nothing of space, direction or cost
    assert plain.space is None and plain.direction is None and plain.cost is None


class _Trials:
    """A framework's object, as far as the reader registry can tell: its type's top-level module
    is ``fakeframework``, which names its reader."""

    def __init__(self, trials: list[Observation], as_sweep: bool) -> None:
        self.trials, self.as_sweep = trials, as_sweep


_Trials.__module__ = "fakeframework.study"


def _read_trials(source: _Trials) -> Sweep | list[Observation]:
    if source.as_sweep:
        return Sweep(tuple(source.trials), direction="maximize")
    return list(source.trials)


def test_a_registered_reader_may_return_a_sweep_or_the_observations() -> None:
    trials = [Observation({"width": w}, {"lr": 1e-3}, 2.0) for w in (64, 128)]
    with pytest.raises(TransferSearchError, match="list of Observation"):
        read_sweep(_Trials(trials, as_sweep=True))  # no reader for fakeframework yet
    register_reader("fakeframework", _read_trials)
    from_sweep = read_sweep(_Trials(trials, as_sweep=True))
    assert from_sweep == Sweep(tuple(trials), direction="maximize")
    assert read_sweep(_Trials(trials, as_sweep=False)) == Sweep(tuple(trials))
    bad = _Trials([{"width": 1}], as_sweep=False)  # type: ignore[list-item]
    with pytest.raises(TransferSearchError, match=r"observations\[0\] must be an Observation"):
        read_sweep(bad)


def test_a_path_that_is_not_a_directory_is_refused_naming_the_accepted_sources(
    tmp_path: pathlib.Path,
) -> None:
    results = tmp_path / "results.txt"
    results.write_text("width,lr,value\n64,0.001,2.0\n")
    for source in (str(results), results, str(tmp_path / "missing")):
        with pytest.raises(TransferSearchError, match="neither a directory nor a .csv") as info:
            as_observations(source)
        assert "directory of a Ray Tune experiment" in str(info.value)
        assert str(source) in str(info.value)
    table = tmp_path / "results.csv"  # a CSV is read: its error is about its columns
    table.write_text("width,lr,value\n64,0.001,2.0\n")
    with pytest.raises(TransferSearchError, match="scale_columns="):
        as_observations(table)
    read = as_observations(table, scale_columns=["width"], params=["lr"])
    assert read[0].scale == Scale(width=64) and read[0].params == {"lr": 0.001}


def test_frame_convention_prefixes_and_plain_columns() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "scale.width": [64, 128],
            "params.lr": [1e-3, 2e-3],
            "bs": [32, 64],
            "value": [2.0, float("nan")],
            "state": ["complete", "failed"],
        }
    )
    obs = as_observations(frame, params=["lr", "bs"])
    assert obs[0].scale == Scale(width=64)
    assert obs[0].params == {"lr": 1e-3, "bs": 32.0}
    assert obs[1].state == "failed" and obs[1].crashed and not obs[1].diverged
    plain = pd.DataFrame({"N": [1e6], "lr": [1e-3], "loss": [3.0]})
    read = observations_from_frame(plain, params=["lr"], scale_columns=["N"], value_column="loss")
    assert read[0].scale == Scale(N=1e6) and read[0].value == 3.0


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"params": ["wd"]}, "'wd'"),
        ({"params": ["lr"], "value_column": "loss"}, "value_column"),
        ({"params": ["lr"], "scale_columns": ["depth"]}, "scale_columns"),
    ],
)
def test_frame_missing_columns_are_named(options: dict[str, object], fragment: str) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"scale.width": [64], "params.lr": [1e-3], "value": [2.0]})
    with pytest.raises(TransferSearchError, match=fragment):
        as_observations(frame, **options)  # type: ignore[arg-type]


def test_frame_without_scale_columns_says_how_to_name_them() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"lr": [1e-3], "value": [2.0]})
    with pytest.raises(TransferSearchError, match="scale_columns"):
        as_observations(frame, params=["lr"])


def test_core_import_does_not_pull_pandas_or_frameworks() -> None:
    import subprocess

    code = (
        "import sys, transfersearch, transfersearch.readers;"
        "print(any(m in sys.modules for m in ('pandas', 'optuna', 'ray', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_scale_variable_missing_from_some_trials_is_named_with_the_trials() -> None:
    """Trials without `width` would make the laws drop width and ignore width=1024 at the target."""
    with_width = [Observation({"width": 64, "dataset_size": 1e4}, {"lr": 1e-3}, 2.0)] * 3
    without = [Observation({"dataset_size": 4e4}, {"lr": 1e-3}, 2.0)] * 7
    trials = with_width + without
    with pytest.raises(TransferSearchError, match="'width' is missing from 7 of 10") as info:
        check_scale_names(trials, target={"width": 1024, "dataset_size": 1.6e5})
    message = str(info.value)
    assert "3, 4, 5, 6, 7 and 2 more" in message and "width=1024" in message
    with pytest.raises(TransferSearchError, match="'width'"):
        check_scale_names(trials)  # no target (validate): any mismatch is an error
    check_scale_names(trials, target={"dataset_size": 1.6e5})  # width is not asked for
    check_scale_names(with_width, target={"width": 1024, "dataset_size": 1.6e5})


def test_frame_with_an_empty_scale_cell_names_the_column_and_rows() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "scale.width": [64, float("nan"), 128, float("nan")],
            "params.lr": [1e-3] * 4,
            "value": [2.0] * 4,
        }
    )
    with pytest.raises(TransferSearchError, match=r"'scale.width' is empty in 2 of 4 rows \(1, 3;"):
        as_observations(frame)


def test_complete_target_fills_only_what_never_varied() -> None:
    """batch_size=64 on every trial: kept at the target; width varies: left for the fit to ask."""
    from transfersearch.observations import complete_target

    trials = [
        Observation({"width": w, "batch_size": 64}, {"lr": 1e-3}, 2.0) for w in (64, 128, 256)
    ]
    target, added = complete_target(trials, {"dataset_size": 1e6})
    assert added == {"batch_size": 64.0}
    assert target == Scale(dataset_size=1e6, batch_size=64)  # width varied: not invented
    given, none = complete_target(trials, Scale(width=1024, batch_size=256))
    assert given == Scale(width=1024, batch_size=256) and none == {}
    mixed = [*trials, Observation({"width": 64}, {"lr": 1e-3}, 2.0)]
    assert complete_target(mixed, {"width": 1024})[1] == {}  # not recorded by every trial


def test_read_sweep_takes_a_csv_path_and_names_the_way_to_read_a_storage(
    tmp_path: pathlib.Path,
) -> None:
    # issue 27 item 4: a .db path or sqlite URL failed with "not a directory" and no way forward
    path = tmp_path / "sweep.csv"
    path.write_text("scale.width,params.lr,value,state\n64,0.001,2.0,complete\n64,0.01,,failed\n")
    sweep = read_sweep(str(path))
    assert [o.state for o in sweep.observations] == ["complete", "failed"]
    assert read_sweep(path).observations == sweep.observations  # a Path as well
    for source in ("sqlite:///proxy.db", str(tmp_path / "proxy.db")):
        with pytest.raises(TransferSearchError) as info:
            read_sweep(source)
        message = str(info.value)
        assert "optuna.load_study(study_name='<name>', storage='sqlite:///" in message
        assert "--storage sqlite:///" in message and "not a directory" not in message


def test_extrapolate_takes_the_csv_path_and_says_how_to_read_a_storage(
    tmp_path: pathlib.Path,
) -> None:
    # issue 27 item 4, through the public call: ts.extrapolate("sqlite:///proxy.db") said
    # "not a directory"
    from _tables import TARGET, sweep_rows, write_csv

    import transfersearch as ts
    from transfersearch.cli import parse_scale

    path = write_csv(tmp_path / "sweep.csv", sweep_rows())
    target = parse_scale(TARGET)
    from_path = ts.extrapolate(str(path), target=target)
    from_rows = ts.extrapolate(as_observations(path), target=target)
    assert from_path.params == from_rows.params
    with pytest.raises(TransferSearchError, match=r"optuna\.load_study\(study_name='<name>'"):
        ts.extrapolate("sqlite:///proxy.db", target=target)


def test_exact_copies_are_collapsed_and_near_copies_kept() -> None:
    """A copy (same scale, parameters in any order, value and state; NaN counts as one value)
    is kept once, the first; a trial sharing only its value, or only its parameters, stays."""
    w64 = {"width": 64}
    first = Observation(w64, {"lr": 0.01, "wd": 0.1}, 2.5)
    rows = [
        first,
        Observation(w64, {"wd": 0.1, "lr": 0.01}, 2.5),  # the same, parameters reordered
        Observation(w64, {"lr": 0.02, "wd": 0.1}, 2.5),  # same value, other parameters
        Observation(w64, {"lr": 0.01, "wd": 0.1}, 2.6),  # same parameters, other value
        Observation(w64, {"lr": 0.04, "wd": 0.1}, math.nan),
        Observation(w64, {"lr": 0.04, "wd": 0.1}, math.nan),  # a diverged copy
        Observation({"width": 128}, {"lr": 0.01, "wd": 0.1}, 2.5),  # another scale
        Observation(w64, {"lr": 0.01, "wd": 0.1}, 2.5, state="pruned"),  # another state
    ]
    kept, removed = collapse_duplicates(rows)
    assert removed == 2
    assert kept[0] is first and [rows.index(k) for k in kept] == [0, 2, 3, 4, 6, 7]


def test_observation_arrays_names_a_missing_parameter_and_a_non_positive_log_one() -> None:
    rows = [Observation({"width": 64}, {"lr": 0.01, "wd": 0.0}, 2.5)]
    coords, values = observation_arrays(rows, ["lr", "wd"], ["lr"], -1.0)
    assert coords.tolist() == [[math.log(0.01), 0.0]] and values.tolist() == [-2.5]
    with pytest.raises(TransferSearchError, match="lacks parameter 'tau'"):
        observation_arrays(rows, ["lr", "tau"], ["lr"], 1.0)
    with pytest.raises(TransferSearchError, match="must be positive, but got 0.0"):
        observation_arrays(rows, ["lr", "wd"], ["lr", "wd"], 1.0)

"""CSV and observation tables read as written, never silently misread (issue 21).

A byte-order mark changes nothing; exact duplicate rows are one measurement (a copy is not a
replicate: a true replicate has its own noise), so repeating every trial gives the identical
prediction; plain parameter columns and a categorical column are read as documented.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from _tables import TARGET, observations, sweep_rows, write_csv

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.cli import main

#: Bootstrap resamples: enough that the interval depends on every observation's weight.


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    status = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    data: dict[str, Any] = json.loads(captured.out)
    return data


def _extrapolate(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    return _json(["extrapolate", "--csv", str(path), "--target", TARGET, *extra], capsys)


def test_a_byte_order_mark_reads_exactly_like_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21: base_lr 0.002966 with a BOM vs 0.001137 without (the first column was lost)."""
    plain = write_csv(tmp_path / "plain.csv", sweep_rows())
    marked = write_csv(tmp_path / "bom.csv", sweep_rows(), encoding="utf-8-sig")
    assert marked.read_bytes()[:3] == b"\xef\xbb\xbf"
    with_mark, without = _extrapolate(marked, capsys), _extrapolate(plain, capsys)
    assert with_mark["params"] == without["params"]
    assert with_mark["interval"] == without["interval"]
    assert with_mark["target"] == without["target"]


def test_exact_duplicates_are_one_measurement_python(caplog: pytest.LogCaptureFixture) -> None:
    """Every observation five times: the identical prediction and interval (it moved 2.6x)."""
    obs = observations(sweep_rows())
    once = ts.extrapolate(obs, target=synthetic.TOP.replace(width=1024))
    with caplog.at_level("INFO", logger="transfersearch.observations"):
        five = ts.extrapolate(
            [o for o in obs for _ in range(5)],
            target=synthetic.TOP.replace(width=1024),
        )
    assert five.params == once.params and five.interval() == once.interval()
    assert five.duplicates_collapsed == 4 * len(obs) and once.duplicates_collapsed == 0
    assert f"{4 * len(obs)} exact duplicate observation(s)" in five.summary()
    assert "192 of 240 observations are exact copies" in caplog.text
    # a replicate with its own noise is not a copy: it counts
    replicate = [*obs, ts.Observation(obs[0].scale, obs[0].params, obs[0].value + 1e-9)]
    assert ts.extrapolate(replicate, target=synthetic.TOP).duplicates_collapsed == 0
    # validate collapses them as well
    assert ts.validate(obs * 5).predicted == ts.validate(obs).predicted


def test_the_same_48_trials_repeated_to_many_rows_give_the_same_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """48 trials repeated 500 times (24,000 rows; the issue's million rows moved base_lr x0.1)."""
    rows = sweep_rows()
    once = _extrapolate(write_csv(tmp_path / "once.csv", rows), capsys)
    many = _extrapolate(write_csv(tmp_path / "many.csv", rows * 500), capsys)
    assert many["params"] == once["params"] and many["interval"] == once["interval"]
    assert many["duplicates_collapsed"] == 48 * 499 and once["duplicates_collapsed"] == 0


def test_plain_parameter_columns_are_read_with_params(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`params.<name>` or `<name>`, as documented, also on the command line."""
    rows = sweep_rows()
    prefixed = _extrapolate(write_csv(tmp_path / "prefixed.csv", rows), capsys)
    plain_rows = [{k.removeprefix("params."): v for k, v in r.items()} for r in rows]
    plain = write_csv(tmp_path / "plain.csv", plain_rows)
    assert (
        _extrapolate(plain, capsys, "--params", "base_lr,tau_epoch")["params"]
        == (prefixed["params"])
    )
    # plain scale columns too, named with --scale-columns
    bare = [{k.removeprefix("scale."): v for k, v in r.items()} for r in plain_rows]
    bare_csv = write_csv(tmp_path / "bare.csv", bare)
    data = _extrapolate(
        bare_csv, capsys, "--params", "base_lr,tau_epoch",
        "--scale-columns", "width,dataset_size,batch_size",
    )  # fmt: skip
    assert data["params"] == prefixed["params"]


def test_a_categorical_column_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """`params.optimizer` (text) beside numeric coordinates: read when --params names the
    numeric ones, and left out (logged) without --params; a column mixing numbers and text is
    an error naming its rows."""
    rows = sweep_rows()
    reference = _extrapolate(write_csv(tmp_path / "ref.csv", rows), capsys)
    with_text = [{**r, "params.optimizer": "adamw"} for r in rows]
    path = write_csv(tmp_path / "optimizer.csv", with_text)
    named = _extrapolate(path, capsys, "--params", "base_lr,tau_epoch")
    assert named["params"] == reference["params"]
    with caplog.at_level("INFO", logger="transfersearch.readers"):
        assert _extrapolate(path, capsys)["params"] == reference["params"]
    assert "'params.optimizer' holds text ('adamw' in row 0)" in caplog.text
    mixed = [{**r, "params.tau_epoch": "long" if i in (3, 9) else r["params.tau_epoch"]}
             for i, r in enumerate(rows)]  # fmt: skip
    status = main(["extrapolate", "--csv", str(write_csv(tmp_path / "m.csv", mixed)),
                   "--target", TARGET])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and "'params.tau_epoch' mixes numbers and text" in err
    assert "rows 3, 9" in err and "--params base_lr,tau_epoch" in err


def test_states_in_any_case_and_unfinished_rows(tmp_path: Path) -> None:
    """Optuna's spellings: COMPLETE / FAIL / PRUNED / RUNNING / WAITING, and TrialState.X."""
    pd = pytest.importorskip("pandas")
    rows = sweep_rows()[:24] + sweep_rows()[36:]  # three rungs
    states = ["COMPLETE", "complete", "TrialState.COMPLETE", "", "FAIL", "PRUNED", "RUNNING"]
    frame = pd.DataFrame([{**r, "state": states[i % len(states)]} for i, r in enumerate(rows)])
    obs = ts.readers.as_observations(frame)
    expected = [s for i in range(len(rows)) if (s := states[i % len(states)]) != "RUNNING"]
    assert len(obs) == len(expected)
    names = {"COMPLETE": "complete", "complete": "complete", "TrialState.COMPLETE": "complete",
             "": "complete", "FAIL": "failed", "PRUNED": "pruned"}  # fmt: skip
    assert [o.state for o in obs] == [names[s] for s in expected]
    frame.loc[5, "state"] = "DONE"
    with pytest.raises(ts.TransferSearchError, match="row 5 has state 'DONE'"):
        ts.readers.as_observations(frame)


def test_plain_parameter_columns_without_params_name_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = [{k.removeprefix("params."): v for k, v in r.items()} for r in sweep_rows()]
    path = write_csv(tmp_path / "plain.csv", plain)
    assert main(["extrapolate", "--csv", str(path), "--target", TARGET]) == 2
    err = capsys.readouterr().err
    assert "no parameter columns" in err and "--params base_lr,tau_epoch" in err


def test_a_trial_failed_by_the_heartbeat_is_skipped_as_the_study_reader_does() -> None:
    """TransferSampler's trials carry the rung as a system attribute; a FAIL the objective did
    not report (its worker died; the retry stands for it) is not a divergence."""
    pd = pytest.importorskip("pandas")
    rows = [{**r, "state": "COMPLETE", "system_attrs_transfersearch:rung": 0} for r in sweep_rows()]
    rows[3] = {**rows[3], "state": "FAIL", "value": float("nan")}  # died: no told-fail
    rows[4] = {**rows[4], "state": "FAIL", "value": float("nan"),
               "system_attrs_transfersearch:told-fail": True}  # fmt: skip
    obs = ts.readers.as_observations(pd.DataFrame(rows))
    assert len(obs) == len(rows) - 1
    assert [o.state for o in obs].count("failed") == 1


def test_a_parameter_column_params_leaves_out_is_recorded_and_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Optuna table that swept warmup beside the coordinates, fitted with --params naming
    the coordinates alone: the warmup column is recorded (not fitted), so rows that differ only
    in it are not read as copies of one run, and the fit warns that they read as repeats
    (`unfitted`, docs/science.md §7). Before, the column was dropped and the rows at one
    configuration with equal losses were collapsed as copies, without a word."""
    rows = [
        {**r, "params_warmup": warmup, "params_schedule": "cosine", "value": r["value"] + bump}
        for r in sweep_rows()
        for warmup, bump in ((100.0, 0.0), (500.0, 0.01), (1000.0, 0.0))
    ]  # warmup 1000 ties warmup 100's loss: two runs, not a copy
    path = write_csv(tmp_path / "warmup.csv", rows)
    with pytest.warns(ts.TransferSearchWarning, match=r"also differ in \['warmup'\]"):
        data = _extrapolate(path, capsys, "--params", "base_lr,tau_epoch")
    assert data["duplicates_collapsed"] == 0
    assert set(data["params"]) == {"base_lr", "tau_epoch"}
    sweep = ts.read_sweep(path, params=["base_lr", "tau_epoch"])
    assert {o.params["warmup"] for o in sweep.observations} == {100.0, 500.0, 1000.0}
    assert all("schedule" not in o.params for o in sweep.observations)  # text: left out
    # read with params, then fitted without naming them: the named ones, not warmup too
    assert sweep.params == ("base_lr", "tau_epoch")
    with pytest.warns(ts.TransferSearchWarning, match=r"also differ in \['warmup'\]"):
        two_step = ts.extrapolate(
            sweep, target=ts.Scale(width=1024, dataset_size=3.2e5, batch_size=64)
        )
    assert set(two_step.params) == {"base_lr", "tau_epoch"}
    assert ts.Sweep(sweep.observations).params is None
    # the rows that hold warmup fixed fit without the warning
    fixed = write_csv(tmp_path / "fixed.csv", [r for r in rows if r["params_warmup"] == 100.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ts.TransferSearchWarning)
        _extrapolate(fixed, capsys, "--params", "base_lr,tau_epoch")


def test_a_metric_cell_of_text_is_refused_naming_its_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Marin's published tables write a loss that blew up as '>10': the error names the rows and
    says to write NaN (a divergence); before, it said only that `value` must be a number. A
    crashed row's metric is ignored, whatever its cell holds."""
    rows = sweep_rows()
    rows[7]["value"], rows[30]["value"] = ">10", ">10"
    status = main(["extrapolate", "--csv", str(write_csv(tmp_path / "t.csv", rows)),
                   "--target", TARGET])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and "the metric column 'value' holds text in 2 rows (rows 7, 30" in err
    assert "write NaN" in err
    diverged = [{**r, "value": "nan" if r["value"] == ">10" else r["value"]} for r in rows]
    reference = _extrapolate(write_csv(tmp_path / "nan.csv", diverged), capsys)
    crashed = [{**r, "state": "FAIL" if r["value"] == ">10" else "COMPLETE"} for r in rows]
    crashed[7]["value"] = "OOM"
    data = _extrapolate(write_csv(tmp_path / "crash.csv", crashed), capsys)
    assert data["n_crashed"] == 2 and reference["n_crashed"] == 0


def test_the_command_line_prints_warnings_as_lines_in_its_flags_spelling(tmp_path: Path) -> None:
    """At a terminal a warning is one line `warning: ...` naming the command line's flags
    (`--params`, `--diverged-beyond inf`), not Python's `file.py:293: TransferSearchWarning`
    with a source line and `params=`."""
    rows = [
        {**r, "params_warmup": warmup, "value": r["value"] + bump}
        for r in sweep_rows()
        for warmup, bump in ((100.0, 0.0), (500.0, 0.01))
    ]
    rows[3]["value"] = 1e4  # a run that blew up: the far-diverged warning names its flag
    path = write_csv(tmp_path / "warmup.csv", rows)
    argv = ["extrapolate", "--csv", str(path), "--target", TARGET, "--params", "base_lr,tau_epoch"]
    run = subprocess.run(
        [sys.executable, "-m", "transfersearch.cli", *argv], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert any(
        line.startswith("warning: trials at one scale also differ in ['warmup'], which --params")
        for line in lines
    ), run.stderr
    assert any("--diverged-beyond inf to fit every finite value" in line for line in lines)
    assert "TransferSearchWarning" not in run.stderr and "params=" not in run.stderr


def test_the_flags_spelling_rewrites_option_names_only(tmp_path: Path) -> None:
    """Issue 49, item 6: a scale variable named `params` kept its spelling in the warning that
    names a rung (`Scale(..., --params 98688, ...)` before); the option beside it is a flag."""
    rows = [{**r, "scale.params": 98688 * (r["scale.width"] / 64) ** 2} for r in sweep_rows()]
    rows[3]["value"] = 1e4  # a run that blew up: the far-gap warning names its rung's Scale
    path = write_csv(tmp_path / "params.csv", rows)
    target = TARGET + ",params=5e7"
    argv = ["extrapolate", "--csv", str(path), "--target", target, "--params", "base_lr,tau_epoch"]
    run = subprocess.run(
        [sys.executable, "-m", "transfersearch.cli", *argv], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    far = [line for line in run.stderr.splitlines() if "far past the rest" in line]
    assert far and "params=98688" in far[0] and "--params 98688" not in far[0], run.stderr
    assert "--diverged-beyond inf" in far[0]


def test_rows_read_as_copies_that_differ_in_a_settings_column_are_warned_of(
    tmp_path: Path,
) -> None:
    """A published one-at-a-time table with plain columns (Marin's): rows that vary warmup at
    the best (lr, tau) with the same loss as another row are different runs, yet read with
    --params naming the coordinates they look like copies of one measurement, and count once.
    The reader warns, naming the rows and warmup; a table exported twice (copies, every column
    equal), an identifier that differs per row (Optuna's `number`) and a label column do not."""
    base = [{k.removeprefix("params."): v for k, v in r.items()} for r in sweep_rows()]
    rows = [{**r, "warmup": 100.0, "varied": "best", "number": i} for i, r in enumerate(base)]
    rows += [{**rows[5], "warmup": 500.0, "varied": "warmup", "number": 48}]  # the same loss
    path = write_csv(tmp_path / "plain.csv", rows)
    params = ["base_lr", "tau_epoch"]
    with pytest.warns(ts.TransferSearchWarning, match=r"rows 48 \(counted from 0 .*\['warmup'\]"):
        ts.read_sweep(path, params=params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ts.TransferSearchWarning)
        ts.read_sweep(write_csv(tmp_path / "twice.csv", rows[:48] * 2), params=params)
        renumbered = [{**r, "number": i} for i, r in enumerate(rows[:48] * 2)]
        ts.read_sweep(write_csv(tmp_path / "numbered.csv", renumbered), params=params)


def _strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it (as `jq` and other languages' parsers read it): no NaN, no
    Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", ["extrapolate", "validate"])
def test_json_output_is_valid_json_with_null_for_no_value(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 49, item 10: `--json` printed `"r_squared": NaN`, which `jq` and `json.loads` in
    other languages refuse; a value that is not a number is null."""
    path = write_csv(tmp_path / "sweep.csv", sweep_rows())
    argv = [command, "--csv", str(path), "--json"]
    if command == "extrapolate":
        argv[3:3] = ["--target", TARGET]
    assert main(argv) == 0
    data = _strict_json(capsys.readouterr().out)
    laws = data["laws"] if command == "extrapolate" else data["fit"]["laws"]
    assert [law["r_squared"] for law in laws.values()] == [None] * len(laws)


def test_fail_rows_of_an_optuna_style_csv_count_as_crashes_and_the_summary_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 49, item 5: a table with TransferSampler's rung column but no told-fail or
    fail-kind column dropped its FAIL rows (read as a dead worker's), and rows written `failed`
    or `crashed`, with only an INFO log. They are crashes: counted, and the summary says so."""
    rows = [{**r, "state": "COMPLETE", "system_attrs_transfersearch:rung": 0} for r in sweep_rows()]
    for i, state in ((3, "FAIL"), (5, "failed"), (7, "crashed")):
        rows[i] = {**rows[i], "state": state, "value": ""}
    data = _extrapolate(write_csv(tmp_path / "fails.csv", rows), capsys)
    assert data["n_crashed"] == 3
    assert "crashed: 3 trial(s) raised" in data["summary"]


def test_the_summary_names_the_trials_the_gap_rule_read_as_diverged_and_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 49, item 4: a finite value far past its rung's rest is read as a run that blew up
    (the 10x-gap rule); only a warning said so. The summary, what people paste into their
    notes, names the trials (their values and rung) and `diverged_beyond`, which stops it."""
    rows = sweep_rows()
    rows[3]["value"] = 1e4
    data = _extrapolate(write_csv(tmp_path / "far.csv", rows), capsys)
    lines = [line for line in data["summary"].splitlines() if "reclassified as diverged" in line]
    assert lines and "1 trial(s) at 1e+04" in lines[0], data["summary"]
    assert "diverged_beyond=math.inf" in lines[0]
    kept = _extrapolate(write_csv(tmp_path / "far.csv", rows), capsys, "--diverged-beyond", "inf")
    assert "reclassified as diverged" not in kept["summary"]


def test_a_csv_says_why_it_has_no_hyperparameters_and_takes_the_space_from_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 49, item 8: the CSV path printed `"hyperparameters": null` and no per-group table,
    without saying why (a CSV stores no space). It says so and how to pass it; with `--space`
    (the space as space_to_json writes it) the per-group table is there."""
    from transfersearch.stored_space import space_to_json

    path = write_csv(tmp_path / "sweep.csv", sweep_rows())
    bare = _extrapolate(path, capsys)
    assert bare["hyperparameters"] is None and "--space" in bare["hyperparameters_missing"]
    assert main(["extrapolate", "--csv", str(path), "--target", TARGET]) == 0
    assert "no hyperparameters at the target: the source stores no search space" in (
        capsys.readouterr().out
    )
    space = tmp_path / "space.json"
    space.write_text(json.dumps(space_to_json(synthetic.make_space())))
    given = _extrapolate(path, capsys, "--space", str(space))
    assert set(given["hyperparameters"]["groups"]) >= {"hidden"}
    assert "hyperparameters_missing" not in given
    assert given["params"] == bare["params"]
    assert (
        main(["extrapolate", "--csv", str(path), "--target", TARGET, "--space", "nope.json"]) == 2
    )
    assert "--space nope.json: no such file" in capsys.readouterr().err

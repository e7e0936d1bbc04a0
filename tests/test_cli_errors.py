"""Every bad input a clean error (issue 21): the command line exits 2 with one ``error:`` line, the
Python API raises ``TransferSearchError``, and the message names the bad value.

The table rows replay the probes as the user met them: a repeated ``--target`` name, flags that
were silently ignored, a misspelt coordinate, negative learning rates, a deeply nested JSON file,
a malformed stored space, and a PostgreSQL password that must never be printed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _tables import TARGET, negative_rows, observations, sweep_rows, write_csv

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.cli import main
from transfersearch.observations import check_log_swept


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    obs_json = tmp_path / "obs.json"
    obs_json.write_text(
        json.dumps(
            [
                {"scale": {k[6:]: v for k, v in r.items() if k.startswith("scale.")},
                 "params": {k[7:]: v for k, v in r.items() if k.startswith("params.")},
                 "value": r["value"]}
                for r in sweep_rows()
            ]
        )
    )  # fmt: skip
    plain = [
        {"width": r["scale.width"], "base_lr": r["params.base_lr"], "loss": r["value"]}
        for r in sweep_rows()
    ]
    return {
        "csv": write_csv(tmp_path / "sweep.csv", sweep_rows()),
        "negative": write_csv(tmp_path / "negative.csv", negative_rows()),
        "plain": write_csv(tmp_path / "plain.csv", plain),
        "nested": nested,
        "json": obs_json,
        "db": tmp_path / "proxy.db",
        "dir": tmp_path,
    }


CLI_CASES = [
    # (argv, the fragment the one error line must hold: it names the bad value or flag)
    (["extrapolate", "--csv", "{csv}", "--target", "width=1024,width=2048"], "'width' twice"),
    (["validate", "--csv", "{csv}", "--held-out", "width=64,width=64"], "'width' twice"),
    (
        ["report", "--csv", "{csv}", "--target", TARGET, "--artifact-dir", "{dir}/art"],
        "--artifact-dir",
    ),
    (["report", "--csv", "{csv}", "--target", TARGET, "--publish"], "--publish"),
    (["extrapolate", "--csv", "{csv}", "--study", "proxy", "--target", TARGET], "--study 'proxy'"),
    (
        ["extrapolate", "--json-file", "{json}", "--scale-columns", "width", "--target", TARGET],
        "--scale-columns",
    ),
    (
        ["validate", "--json-file", "{json}", "--value-column", "loss"],
        "--value-column",
    ),
    (
        ["extrapolate", "--csv", "{csv}", "--target", TARGET, "--params", "base_lr,tau_epcoh"],
        "'tau_epcoh' has no column in the table",
    ),
    (
        ["extrapolate", "--csv", "{csv}", "--target", TARGET, "--params", "base_lr,tau_epcoh"],
        "Did you mean 'tau_epoch'?",
    ),
    (
        ["extrapolate", "--json-file", "{json}", "--target", TARGET, "--params", "tau_epcoh"],
        "Did you mean 'tau_epoch'?",
    ),
    (
        ["extrapolate", "--csv", "{negative}", "--target", TARGET],
        "3 trials have base_lr < 0 (trials 5, 17, 40",
    ),
    (["validate", "--csv", "{negative}"], "base_lr=-0.0099"),
    (["extrapolate", "--json-file", "{nested}", "--target", TARGET], "nested too deeply"),
    (["extrapolate", "--csv", "{plain}", "--target", "width=1024"], "--scale-columns width"),
    (
        [
            "extrapolate",
            "--csv",
            "{plain}",
            "--scale-columns",
            "width",
            "--target",
            "width=1024",
            "--params",
            "base_lr",
        ],
        "'value' is not a column",
    ),
    (
        [
            "extrapolate",
            "--csv",
            "{plain}",
            "--scale-columns",
            "widht",
            "--value-column",
            "loss",
            "--target",
            "width=1024",
        ],
        "['widht']",
    ),
    (
        ["extrapolate", "--storage", "sqlite:///{db}", "--study", "nope", "--target", TARGET],
        "holds ['proxy']",
    ),
    (  # issue 27 item 9: was "lacks ['dataset_size', 'width']", widht never named
        ["extrapolate", "--csv", "{csv}", "--target", "widht=256"],
        "('widht' -> did you mean 'width'?)",
    ),
]


@pytest.mark.parametrize(("argv", "fragment"), CLI_CASES)
def test_bad_command_line_input_is_one_error_line_naming_it(
    argv: list[str], fragment: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    if "{db}" in " ".join(argv):
        optuna = pytest.importorskip("optuna")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        optuna.create_study(storage=f"sqlite:///{files['db']}", study_name="proxy")
    status = main([a.format(**files) for a in argv])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 2, captured
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert fragment in lines[0]


def test_the_cli_hint_names_the_flag_and_python_the_keyword(files: dict[str, Path]) -> None:
    """A table without scale columns: `--scale-columns` on the command line, `scale_columns=` in
    Python (the issue: the CLI named the Python keyword)."""
    pd = pytest.importorskip("pandas")
    with pytest.raises(ts.TransferSearchError, match=r"scale_columns=\['width'") as info:
        ts.extrapolate(pd.read_csv(files["plain"]), target={"width": 1024}, value_column="loss")
    assert "--scale-columns" not in str(info.value)


def _nonpositive(value: float) -> list[ts.Observation]:
    obs = observations(sweep_rows())
    bad = obs[7]
    obs[7] = ts.Observation(bad.scale, {**bad.params, "base_lr": value}, bad.value)
    return obs


API_CASES: list[tuple[str, Any, str]] = [
    # (what, a call that must raise TransferSearchError, the fragment naming the value)
    ("scale None", lambda: ts.Observation(scale=None, params={"lr": 1e-3}, value=1.0), "None"),  # type: ignore[arg-type]
    ("scale {}", lambda: ts.Observation(scale={}, params={"lr": 1e-3}, value=1.0), "scale={}"),
    ("state list", lambda: ts.Observation({"width": 8}, {"lr": 1e-3}, 1.0, ["ok"]), "['ok']"),  # type: ignore[arg-type]
    (
        "model list",
        lambda: ts.extrapolate(observations(sweep_rows()), target=synthetic.TOP, model=["auto"]),  # type: ignore[arg-type]
        "['auto']",
    ),
    (
        "negative lr",
        lambda: ts.extrapolate(observations(negative_rows()), target=synthetic.TOP),
        "trials 5, 17, 40",
    ),
    (
        "misspelt param",
        lambda: ts.extrapolate(
            observations(sweep_rows()), target=synthetic.TOP, params=["base_lr", "tau_epcoh"]
        ),
        "'tau_epcoh' is recorded by no trial",
    ),
]


@pytest.mark.parametrize(("what", "call", "fragment"), API_CASES, ids=[c[0] for c in API_CASES])
def test_bad_python_input_is_a_transfersearch_error_naming_it(
    what: str, call: Any, fragment: str
) -> None:
    with pytest.raises(ts.TransferSearchError) as info:
        call()
    assert fragment in str(info.value), what


def test_a_log_swept_parameter_is_decided_by_the_stored_space_first() -> None:
    """Float(log=True) in the space: one non-positive value is refused even where most are
    negative; a parameter the space sweeps linearly may cross zero; without a space a parameter
    that is mostly negative is linear (no error)."""
    obs = observations(sweep_rows())
    half = [
        ts.Observation(o.scale, {**o.params, "base_lr": -o.params["base_lr"]}, o.value)
        if i % 2
        else o
        for i, o in enumerate(obs)
    ]
    check_log_swept(half, ["base_lr"])  # half negative, no space: a linear parameter
    with pytest.raises(ts.TransferSearchError, match="the stored space sweeps it on a log scale"):
        check_log_swept(half, ["base_lr"], space=synthetic.make_space())
    linear = ts.TransferSpace(
        synthetic.BASE,
        {"base_lr": ts.Float(1e-5, 1.0), "tau_epoch": ts.Float(1e-2, 1e2, log=True)},
    )
    check_log_swept(_nonpositive(-1e-3), ["base_lr"], space=linear)
    # the CLI way out for a truly linear parameter: --log-params without it
    res = ts.extrapolate(
        observations(negative_rows()), target=synthetic.TOP, log_params=["tau_epoch"],
    )  # fmt: skip
    assert "base_lr" not in res.log_params


def test_a_zero_is_an_ordinary_value_fitted_on_a_linear_axis_with_a_note() -> None:
    """Without a space a 0 (a weight decay of 0: "off") is no error: the parameter goes on a
    linear axis, a 'linear' note says so, and a space that declares it log refuses it."""
    res = ts.extrapolate(_nonpositive(0.0), target=synthetic.TOP)
    assert "base_lr" not in res.log_params
    notes = [d for d in res.diagnostics if d.kind == "linear"]
    assert len(notes) == 1 and "base_lr has 1 value(s) <= 0" in notes[0].message
    assert not notes[0].act and notes[0].message in res.summary()
    with pytest.raises(ts.TransferSearchError, match="the stored space sweeps it on a log scale"):
        ts.extrapolate(ts.Sweep(tuple(_nonpositive(0.0)), space=synthetic.make_space()),
                       target=synthetic.TOP)  # fmt: skip


def test_log_params_flag_fits_a_parameter_linearly(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["extrapolate", "--csv", str(files["negative"]), "--target", TARGET, "--json"]
    assert main([*argv, "--log-params", "tau_epoch"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["base_lr"] != 0


def test_a_postgresql_password_is_never_printed(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--study 'x' is not in storage ...` and a refused connection name the URL without its
    password (the server trusts local connections, so any password connects)."""
    pytest.importorskip("optuna")
    password = "s3cret-Pw"
    url = postgres_url.replace("postgres@", f"postgres:{password}@")
    assert main(["extrapolate", "--storage", url, "--study", "nope", "--target", TARGET]) == 2
    err = capsys.readouterr().err
    assert "--study 'nope' is not in storage" in err and "postgres:***@" in err
    assert password not in err
    refused = "postgresql://tuner:" + password + "@127.0.0.1:1/proxy"  # no server on port 1
    assert main(["validate", "--storage", refused, "--study", "proxy"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and password not in err, err


def test_report_publish_on_postgresql_prints_no_password(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report --publish` prints the optuna-dashboard command with the storage URL: masked."""
    optuna = pytest.importorskip("optuna")
    pytest.importorskip("matplotlib")
    pytest.importorskip("optuna_dashboard")
    pytest.importorskip("plotly")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    password = "s3cret-Pw"
    url = postgres_url.replace("postgres@", f"postgres:{password}@")
    study = optuna.create_study(storage=url, study_name="published")
    dists = {n: optuna.distributions.FloatDistribution(1e-5, 100.0, log=True)
             for n in ("base_lr", "tau_epoch")}  # fmt: skip
    for row in sweep_rows():
        study.add_trial(
            optuna.trial.create_trial(
                params={k[7:]: v for k, v in row.items() if k.startswith("params.")},
                distributions=dists,
                value=row["value"],
                user_attrs={k: v for k, v in row.items() if k.startswith("scale.")},
            )
        )
    argv = ["report", "--storage", url, "--study", "published", "--target", TARGET]
    argv += ["--out", str(tmp_path / "r.png")]
    status = main([*argv, "--publish", "--artifact-dir", str(tmp_path / "art")])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "optuna-dashboard postgresql://postgres:***@" in captured.out
    assert password not in captured.out + captured.err


def test_report_without_matplotlib_names_the_extra_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by .ci/run-oldest (no matplotlib there): `report --out` said only "No module named
    'matplotlib'"; it names the extra to install."""
    path = write_csv(tmp_path / "sweep.csv", sweep_rows())
    monkeypatch.setitem(sys.modules, "matplotlib.backend_bases", None)  # import fails
    argv = ["report", "--csv", str(path), "--target", TARGET, "--out", str(tmp_path / "r.png")]
    assert main(argv) == 2
    assert "pip install 'transfersearch[plot]'" in capsys.readouterr().err

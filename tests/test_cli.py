"""The ``transfersearch`` command line: each subcommand on a synthetic ladder, and bad input.

The synthetic ladder has a known law: the optimal log(lr) = log(0.01) − 0.5·log(width / 64), and the
optimal tau_epoch does not move. Extrapolating to width 1024 must recover lr ≈ 0.01 · 4^−0.5.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transfersearch.cli import main, parse_scale
from transfersearch.errors import TransferSearchError

WIDTHS = (64, 128, 256)
SIZES = (1e4, 4e4)


def optimum_lr(width: float) -> float:
    return 0.01 * (width / 64) ** -0.5


def synthetic_rows(seed: int = 0) -> list[dict[str, float]]:
    """A quadratic bowl in (log lr, log tau) per scale, with small noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for width in WIDTHS:
        for size in SIZES:
            for _ in range(30):
                lr = float(math.exp(rng.uniform(math.log(1e-4), math.log(1.0))))
                tau = float(math.exp(rng.uniform(math.log(0.05), math.log(20.0))))
                value = (
                    2.0
                    + 0.1 * (math.log(lr) - math.log(optimum_lr(width))) ** 2
                    + 0.05 * (math.log(tau) - math.log(0.7)) ** 2
                    + float(rng.normal(0, 0.002))
                )
                rows.append(
                    {
                        "scale.width": width,
                        "scale.dataset_size": size,
                        "params.lr": lr,
                        "params.tau_epoch": tau,
                        "value": value,
                    }
                )
    return rows


@pytest.fixture()
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "trials.csv"
    rows = synthetic_rows()
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture()
def json_file(tmp_path: Path) -> Path:
    path = tmp_path / "trials.json"
    items = [
        {
            "scale": {"width": r["scale.width"], "dataset_size": r["scale.dataset_size"]},
            "params": {"lr": r["params.lr"], "tau_epoch": r["params.tau_epoch"]},
            "value": r["value"],
        }
        for r in synthetic_rows(1)
    ]
    path.write_text(json.dumps({"observations": items}))
    return path


TARGET = "width=1024,dataset_size=1.6e5"


def test_extrapolate_csv_json_output_recovers_the_law(
    csv_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["extrapolate", "--csv", str(csv_file), "--target", TARGET, "--json"])
    assert status == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"] == {"width": 1024.0, "dataset_size": 1.6e5}
    lr = data["params"]["lr"]
    assert lr == pytest.approx(optimum_lr(1024), rel=0.15)
    assert data["params"]["tau_epoch"] == pytest.approx(0.7, rel=0.25)
    low, high = data["interval"]["lr"]
    assert low < lr < high
    assert data["laws"]["lr"]["exponents"]["width"] == pytest.approx(-0.5, abs=0.1)


def test_extrapolate_json_file_prints_a_table(
    json_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "extrapolate",
            "--json-file",
            str(json_file),
            "--target",
            TARGET,
            "--params",
            "lr,tau_epoch",
        ]
    )
    assert status == 0
    out = capsys.readouterr().out
    assert "predicted" in out and "lr" in out and "tau_epoch" in out
    line = next(row for row in out.splitlines() if row.startswith("lr "))
    assert float(line.split()[1]) == pytest.approx(optimum_lr(1024), rel=0.15)


def test_extrapolate_reads_an_optuna_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=storage, study_name="cli")
    dists = {
        "lr": optuna.distributions.FloatDistribution(1e-4, 1.0, log=True),
        "tau_epoch": optuna.distributions.FloatDistribution(0.05, 20.0, log=True),
    }
    for row in synthetic_rows(2):
        trial = optuna.trial.create_trial(
            params={"lr": row["params.lr"], "tau_epoch": row["params.tau_epoch"]},
            distributions=dists,
            value=row["value"],
            user_attrs={
                "scale.width": row["scale.width"],
                "scale.dataset_size": row["scale.dataset_size"],
            },
        )
        study.add_trial(trial)
    status = main(
        [
            "extrapolate",
            "--storage",
            storage,
            "--study",
            "cli",
            "--target",
            TARGET,
            "--params",
            "lr,tau_epoch",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    if status != 0:
        pytest.fail(f"extrapolate from an Optuna storage failed: {captured.err}")
    data = json.loads(captured.out)
    assert data["params"]["lr"] == pytest.approx(optimum_lr(1024), rel=0.15)


def test_a_maximized_study_is_fitted_as_one_without_direction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--direction defaults to the study's, as Python's direction= does: the score -loss of a
    maximised study gives the loss's optimum; --direction minimize would chase the worst lr."""
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{tmp_path / 'max.db'}"
    study = optuna.create_study(storage=storage, study_name="max", direction="maximize")
    dists = {"lr": optuna.distributions.FloatDistribution(1e-4, 1.0, log=True)}
    for row in synthetic_rows(3):
        scale = {"scale.width": row["scale.width"], "scale.dataset_size": row["scale.dataset_size"]}
        study.add_trial(
            optuna.trial.create_trial(
                params={"lr": row["params.lr"]}, distributions=dists, value=-row["value"],
                user_attrs=scale,
            )
        )  # fmt: skip
    argv = ["extrapolate", "--storage", storage, "--study", "max", "--target", TARGET, "--json"]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["params"]["lr"] == pytest.approx(optimum_lr(1024), rel=0.25)
    assert main([*argv, "--direction", "minimize"]) == 0
    turned = json.loads(capsys.readouterr().out)
    assert not turned["params"]["lr"] == pytest.approx(optimum_lr(1024), rel=0.25)


def test_validate_holds_out_the_largest_scale(
    csv_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["validate", "--csv", str(csv_file), "--json"])
    assert status == 0
    data = json.loads(capsys.readouterr().out)
    assert data["held_out"] == {"width": 256.0, "dataset_size": 4e4}
    assert data["predicted"]["lr"] == pytest.approx(optimum_lr(256), rel=0.15)
    assert abs(data["relative_error"]["lr"]) < 0.15


def test_validate_prints_a_table(csv_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--csv", str(csv_file)]) == 0
    out = capsys.readouterr().out
    assert "held out" in out and "rel. error" in out


def test_report_writes_a_png(csv_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "pics" / "report.png"
    status = main(
        [
            "report",
            "--csv",
            str(csv_file),
            "--target",
            TARGET,
            "--out",
            str(out),
        ]
    )
    assert status == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 20_000


def test_report_html_can_load_plotlyjs_from_the_cdn(csv_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    pytest.importorskip("matplotlib")
    argv = ["report", "--csv", str(csv_file), "--target", TARGET]
    argv += ["--out", str(tmp_path / "r.png"), "--html", str(tmp_path / "r.html")]
    assert main([*argv, "--plotlyjs", "cdn"]) == 0
    page = (tmp_path / "r.html").read_text()
    assert 'src="https://cdn.plot.ly/plotly-' in page
    assert (tmp_path / "r.html").stat().st_size < 300_000  # inline plotly.js is about 4.8 MB


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["extrapolate", "--csv", "missing.csv", "--target", TARGET], "no such file"),
        (["extrapolate", "--target", TARGET], "exactly one source"),
        (["extrapolate", "--csv", "{csv}", "--target", "width=-3"], "scale.width"),
        (["extrapolate", "--csv", "{csv}", "--target", "width"], "name=number"),
        (["extrapolate", "--csv", "{csv}", "--target", "width=abc"], "must be a number"),
        (["extrapolate", "--csv", "{csv}", "--target", TARGET, "--params", "momentum"], "momentum"),
        (["extrapolate", "--csv", "{csv}", "--target", "dataset_size=1e6"], "width"),
        (["extrapolate", "--json-file", "{bad_json}", "--target", TARGET], "not valid JSON"),
        (["extrapolate", "--storage", "sqlite:///x.db", "--target", TARGET], "--study"),
        (["validate", "--csv", "{csv}", "--held-out", "width=7,dataset_size=1e4"], "width=7"),
        (["extrapolate", "--csv", "{binary}", "--target", TARGET], "not UTF-8 text"),
        (["extrapolate", "--json-file", "{binary}", "--target", TARGET], "not UTF-8 text"),
        (["extrapolate", "--csv", "{long_row}", "--target", TARGET], "line 3 has 6 cells"),
        (["extrapolate", "--csv", "{csv}", "--target", TARGET, "--seed", "-1"], "--seed -1"),
        (["validate", "--csv", "{csv}", "--seed", "-1"], "non-negative"),
        (["report", "--csv", "{csv}", "--target", TARGET, "--out", "x.xyz"], "'.xyz'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    argv: list[str],
    fragment: str,
    csv_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    binary = tmp_path / "trials.bin"
    binary.write_bytes(bytes(range(256)) * 4)  # e.g. a .parquet or .db given as --csv/--json-file
    long_row = tmp_path / "long.csv"
    lines = csv_file.read_text().splitlines()
    long_row.write_text("\n".join([lines[0], lines[1], lines[2] + ",0.5", *lines[3:]]) + "\n")
    monkeypatch.chdir(tmp_path)
    args = [
        a.format(csv=csv_file, bad_json=bad_json, binary=binary, long_row=long_row) for a in argv
    ]
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]


def test_trials_without_a_scale_variable_the_target_moves_are_named(
    json_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trials missing `width` would fit a dataset-size-only law and ignore width=1024."""
    data = json.loads(json_file.read_text())
    for item in data["observations"]:
        if item["scale"]["width"] == 256:
            del item["scale"]["width"]
    nowidth = tmp_path / "nowidth.json"
    nowidth.write_text(json.dumps(data))
    status = main(["extrapolate", "--json-file", str(nowidth), "--target", TARGET])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "'width' is missing from 60 of 180 trials (observations 120, 121" in err
    assert "width=1024" in err
    csv_path = tmp_path / "nowidth.csv"
    rows = synthetic_rows()
    for row in rows[:2]:
        row["scale.width"] = ""  # type: ignore[assignment]
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    status = main(["validate", "--csv", str(csv_path)])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "'scale.width' is empty in 2 of 180 rows (0, 1;" in err


def test_report_prints_the_file_it_wrote(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out DIR` (no extension) writes DIR.png and says so (first line; the summary follows)."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "figures"
    status = main(
        [
            "report",
            "--csv",
            str(csv_file),
            "--target",
            TARGET,
            "--out",
            str(out),
        ]
    )
    assert status == 0
    written = tmp_path / "figures.png"
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {written}"
    assert out[1].startswith(
        "target Scale(dataset_size=160000, width=1024): 0.85 decades from the nearest rung"
    )
    assert written.read_bytes()[:4] == b"\x89PNG"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["extrapolate", "--csv", "x.csv"])  # --target is required
    assert info.value.code == 2
    assert "--target" in capsys.readouterr().err


def test_help_describes_every_subcommand() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "transfersearch.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for command in ("demo", "extrapolate", "validate", "report"):
        assert command in run.stdout
    demo = subprocess.run(
        [sys.executable, "-m", "transfersearch.cli", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for flag in ("--out", "--full", "--device", "--trials"):
        assert flag in demo.stdout


def test_help_does_not_import_frameworks() -> None:
    code = (
        "import sys; from transfersearch.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'optuna', 'ray', 'matplotlib') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_demo_rejects_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("optuna")
    if not torch.cuda.is_available():
        assert main(["demo", "--out", str(tmp_path / "gpu"), "--quick", "--device", "cuda"]) == 2
        assert "no CUDA GPU" in capsys.readouterr().err
        assert not (tmp_path / "gpu").exists()
    status = main(["demo", "--out", str(tmp_path), "--quick", "--full"])
    assert status == 2
    assert "--full and --quick" in capsys.readouterr().err
    status = main(["demo", "--out", str(tmp_path), "--quick", "--trials", "1"])
    assert status == 2
    assert "--trials" in capsys.readouterr().err


def test_parse_scale() -> None:
    assert parse_scale("width=4096, dataset_size=1e7") == {"width": 4096.0, "dataset_size": 1e7}
    with pytest.raises(TransferSearchError, match="empty"):
        parse_scale(" , ")


def test_diverged_beyond_on_the_command_line_counts_blown_up_rows_as_diverged(
    csv_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows whose loss blew up to 50 (the synthetic sweep's values stay near 5 or below): with
    --diverged-beyond 10 the summary counts them as diverged, as Python's keyword does."""
    with csv_file.open() as handle:
        rows = list(csv.DictReader(handle))
    for row in rows[::10]:
        row["value"] = "50.0"
    with csv_file.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    argv = ["extrapolate", "--csv", str(csv_file), "--target", TARGET, "--diverged-beyond", "10"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{len(rows[::10])} trial(s) past diverged_beyond=10 (50) counted as diverged" in out

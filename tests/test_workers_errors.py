"""Bad input to the Optuna adapter and its workers command: one clean error naming the value
(issue 21), and no password in what is printed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

optuna = pytest.importorskip("optuna")

from test_optuna_storages import write_objective  # noqa: E402

import transfersearch as ts  # noqa: E402
from transfersearch import synthetic  # noqa: E402
from transfersearch.integrations.launcher import launch_workers, make_storage  # noqa: E402
from transfersearch.integrations.optuna import TransferSampler  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::transfersearch.experimental.ExperimentalWarning")


def sampler(**kwargs: Any) -> TransferSampler:
    return TransferSampler(synthetic.make_space(), list(synthetic.LADDER), **kwargs)


def launch(tmp_path: Path, **kwargs: Any) -> Any:
    objective = write_objective(tmp_path, (64,), [2])
    return launch_workers(f"sqlite:///{tmp_path / 'x.db'}", "x", objective, 2, **kwargs)


#: (case, call, text the message must contain)
API_CASES: list[tuple[str, Callable[[Path], Any], str]] = [
    ("trials_per_rung=True", lambda _: sampler(trials_per_rung=True), "trials_per_rung=True"),
    ("trials_per_rung=2.5", lambda _: sampler(trials_per_rung=2.5), "trials_per_rung=2.5"),
    ("min_spread=nan", lambda _: sampler(min_spread=math.nan), "min_spread=nan"),
    ("min_spread=-1", lambda _: sampler(min_spread=-1), "min_spread=-1"),
    ("transfer='no'", lambda _: sampler(transfer="no"), "transfer='no'"),
    ("n_bootstrap=-1", lambda _: sampler(n_bootstrap=-1), "n_bootstrap=-1"),
    ("min_trials='3'", lambda _: sampler(min_trials="3"), "min_trials='3'"),
    ("focus='0.5'", lambda _: sampler(focus="0.5"), "focus='0.5'"),
    ("cpu_workers=0", lambda p: launch(p, gpus=0, cpu_workers=0), "cpu_workers=0"),
    ("gpus='-1'", lambda p: launch(p, gpus="-1"), "gpus='-1'"),
    ("gpus=-1", lambda p: launch(p, gpus=-1), "gpus=-1"),
    ("n_trials=2.5", lambda p: launch_workers("sqlite:///x.db", "x", "m:f", 2.5), "n_trials=2.5"),
    (
        "heartbeat_interval='10'",
        lambda p: make_storage(f"sqlite:///{p / 'x.db'}", heartbeat_interval="10"),
        "heartbeat_interval='10'",
    ),
    (
        "grace_period=0",
        lambda p: make_storage(f"sqlite:///{p / 'x.db'}", grace_period=0),
        "grace_period=0",
    ),
]


@pytest.mark.parametrize(
    ("call", "needle"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES]
)
def test_bad_api_input_is_one_error_naming_the_value(
    call: Callable[[Path], Any], needle: str, tmp_path: Path
) -> None:
    with pytest.raises(ts.TransferSearchError) as info:
        call(tmp_path)
    assert needle in str(info.value), str(info.value)


# ----------------------------------------------------------------------------------------------
# The workers command
# ----------------------------------------------------------------------------------------------
def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "transfersearch.integrations.launcher", *args]
    environment = {k: v for k, v in os.environ.items() if k != "TRANSFERSEARCH_STORAGE"}
    environment.update(env or {})
    return subprocess.run(command, capture_output=True, text=True, timeout=90, cwd=cwd,
                          env=environment)  # fmt: skip


#: Objective modules that cannot be imported: (case, source, text the error line must contain).
BROKEN_MODULES = [
    ("syntax error", "def objective(trial:\n    return 1\n", "SyntaxError"),
    ("raises at import", "raise RuntimeError('no dataset at /data')\n", "no dataset at /data"),
    (
        "lacks a dependency",
        "import transfersearch_no_such_dependency\n",
        "'transfersearch_no_such_dependency', which is not installed",
    ),
]


@pytest.mark.parametrize(
    ("source", "needle"), [c[1:] for c in BROKEN_MODULES], ids=[c[0] for c in BROKEN_MODULES]
)
def test_an_objective_module_that_cannot_be_imported_is_one_error_line(
    source: str, needle: str, tmp_path: Path
) -> None:
    (tmp_path / "broken_objective.py").write_text(source)
    args = (
        "workers", "--storage", f"sqlite:///{tmp_path / 'x.db'}", "--study-name", "x",
        "--objective", "broken_objective:objective", "--total-trials", "2", "--gpus", "0",
    )  # fmt: skip
    out = run(*args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("error: cannot import the objective module 'broken_objective'")
    assert needle in out.stderr, out.stderr
    assert "broken_objective.py" in out.stderr or "not installed" in out.stderr, out.stderr
    verbose = run(*args, "--verbose", cwd=tmp_path)
    assert verbose.returncode == 2
    assert "Traceback" in verbose.stderr or "SyntaxError" in verbose.stderr.splitlines()[-2]
    assert verbose.stderr.splitlines()[-1] == out.stderr.strip()


def test_cli_errors_are_one_line_with_exit_2(tmp_path: Path) -> None:
    objective = write_objective(tmp_path, (64,), [2])
    url = f"sqlite:///{tmp_path / 'x.db'}"
    (tmp_path / "a-file").write_text("")
    cases = [
        (
            ("workers", "--storage", url, "--study-name", "x", "--objective", objective,
             "--total-trials", "2", "--gpus", "0", "--log-dir", str(tmp_path / "a-file" / "logs")),
            "cannot write worker logs to --log-dir",
        ),
        (
            ("worker", "--storage", url, "--study-name", "x", "--objective", objective,
             "--total-trials", "2", "--units", "{not json"),
            "--units must be a JSON object",
        ),
        (
            ("worker", "--storage", url, "--study-name", "no-such-study", "--objective",
             objective, "--total-trials", "2"),
            "study 'no-such-study' is not in storage",
        ),
        (
            ("workers", "--storage", url, "--study-name", "x", "--objective", objective,
             "--total-trials", "2", "--gpus", "-1"),
            "gpus='-1'",
        ),
        (
            ("workers", "--storage", url, "--study-name", "x", "--objective", objective,
             "--total-trials", "2", "--gpus", "0", "--cpu-workers", "0"),
            "cpu_workers=0",
        ),
    ]  # fmt: skip
    for args, needle in cases:
        out = run(*args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
        assert needle in out.stderr, out.stderr


def test_a_password_in_the_storage_url_is_never_printed(tmp_path: Path) -> None:
    objective = write_objective(tmp_path, (64,), [2])
    url = "postgresql://tuner:s3cret-pw@127.0.0.1:1/proxy"  # nothing listens on port 1
    with pytest.raises(ts.TransferSearchError) as info:
        make_storage(url)
    assert "s3cret-pw" not in str(info.value) and "tuner:***@" in str(info.value)
    for args, env in [
        (("--storage", url), {}),
        ((), {"TRANSFERSEARCH_STORAGE": url}),
    ]:
        for command in ("workers", "worker"):
            out = run(command, *args, "--study-name", "x", "--objective", objective,
                      "--total-trials", "2", "--gpus" if command == "workers" else "--capacity",
                      "0" if command == "workers" else "1", cwd=tmp_path, env=env)  # fmt: skip
            assert out.returncode == 2, out.stderr
            assert "s3cret-pw" not in out.stdout + out.stderr, out.stderr
            assert "tuner:***@127.0.0.1" in out.stderr, out.stderr


def test_the_help_says_what_the_total_is_and_that_the_module_defines_a_sampler(
    tmp_path: Path,
) -> None:
    out = run("workers", "--help", cwd=tmp_path)
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "--total-trials" in text and "the study's total" in text and "--add-trials" in text
    assert "Not additive like study.optimize(n_trials=)" in text
    top = " ".join(run("--help", cwd=tmp_path).stdout.split())
    assert "module-level `sampler`" in top


def test_a_misspelt_objective_function_names_its_close_match(tmp_path: Path) -> None:
    # Issue 27 item 9: `workers ...:objectiv` said only that there is no such function.
    objective = write_objective(tmp_path, (64,), [2])
    out = run(
        "workers", "--storage", f"sqlite:///{tmp_path / 'x.db'}", "--study-name", "x",
        "--objective", objective[: -len("objective")] + "objectiv", "--total-trials", "2",
        "--gpus", "0", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert "has no callable 'objectiv'" in out.stderr
    assert f"Did you mean {objective}?" in out.stderr, out.stderr

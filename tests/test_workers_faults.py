"""The worker launcher under load and faults, on real SQLite and PostgreSQL storages with 8
worker processes: Ctrl-C, processes starting together on a new database, enqueued trials, the
exact total, two launchers on one study (issue 21)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

optuna = pytest.importorskip("optuna")

from test_optuna_storages import write_objective  # noqa: E402

from transfersearch.integrations.launcher import launch_workers, make_storage  # noqa: E402
from transfersearch.integrations.optuna import RUNG_ATTR, observations_from_study  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
TrialState = optuna.trial.TrialState
#: The issue's load: 8 worker processes on one study.
WORKERS = 8


def new_url(kind: str, tmp_path: Path, request: Any) -> str:
    """A URL of a database nobody has used yet (a fresh file, or a new PostgreSQL database)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    import sqlalchemy

    server = request.getfixturevalue("postgres_url")
    name = f"fresh_{os.getpid()}_{time.monotonic_ns()}"
    engine = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


def cli(*args: str, url: str) -> list[str]:
    return [
        sys.executable, "-m", "transfersearch.integrations.optuna", "workers", "--storage", url,
        *args,
    ]  # fmt: skip


def states(url: str, name: str) -> collections.Counter[str]:
    study = optuna.load_study(study_name=name, storage=make_storage(url))
    return collections.Counter(t.state.name for t in study.trials)


def objectives_running(url: str, name: str) -> int:
    """RUNNING trials whose objective has begun: its worker has written the trial's worker
    attributes, which it does inside the objective's Ctrl-C handling. A trial is RUNNING from the
    moment it is created, while the sampler still picks its parameters; a Ctrl-C then ends the
    worker before its objective starts (under load that window is long enough to hit)."""
    study = optuna.load_study(study_name=name, storage=make_storage(url))
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return sum(1 for t in running if "worker.pid" in t.user_attrs)


# ----------------------------------------------------------------------------------------------
# Ctrl-C
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["postgresql"])
def test_ctrl_c_records_running_trials_as_interrupted_and_the_next_start_reruns_them(
    kind: str, tmp_path: Path, request: Any
) -> None:
    url = new_url(kind, tmp_path, request)
    objective = write_objective(tmp_path, (64, 128), [12, 12])
    total = 24
    command = cli(
        "--study-name", "ctrl-c", "--objective", objective, "--total-trials", str(total),
        "--gpus", "0", "--cpu-workers", "4", "--heartbeat-interval", "1", "--progress-interval",
        "0.5", url=url,
    )  # fmt: skip
    env = {**os.environ, "TS_TEST_SLEEP": "3"}
    # Its own process group, as a terminal gives a command: Ctrl-C reaches every worker.
    launcher = subprocess.Popen(
        command, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert time.monotonic() < deadline, "the workers never had 4 objectives running"
            time.sleep(0.3)
            try:
                if objectives_running(url, "ctrl-c") >= 4:
                    break
            except KeyError:
                continue  # the launcher has not created the study yet
        os.killpg(launcher.pid, signal.SIGINT)
        _, stderr = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    assert launcher.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert "[workers] ctrl-c:" in stderr, "no progress line"

    study = optuna.load_study(study_name="ctrl-c", storage=make_storage(url))
    failed = [t for t in study.trials if t.state == TrialState.FAIL]
    assert len(failed) >= 4, [(t.number, t.state) for t in study.trials]
    assert all(t.user_attrs.get("transfersearch:interrupted") for t in failed), [
        (t.number, t.user_attrs, t.system_attrs) for t in failed
    ]
    assert not any("transfersearch:told-fail" in t.system_attrs for t in failed)
    waiting = {t.system_attrs["failed_trial"]: t for t in study.trials if t.state.name == "WAITING"}
    assert sorted(waiting) == sorted(t.number for t in failed), "each is re-enqueued once"
    for trial in failed:
        rerun = waiting[trial.number]
        assert rerun.params == trial.params
        assert rerun.system_attrs[RUNG_ATTR] == trial.system_attrs[RUNG_ATTR]
        assert "transfersearch:interrupted" not in rerun.user_attrs
    # Not divergences: the fit reads none of them.
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(observations_from_study(study)) == len(complete)

    # The same command again finishes the study: the reruns first, then the rest, exactly.
    again = subprocess.run(command, env={**os.environ, "TS_TEST_SLEEP": "0.01"},
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr
    study = optuna.load_study(study_name="ctrl-c", storage=make_storage(url))
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == total
    reruns = {t.system_attrs.get("failed_trial") for t in complete} - {None}
    assert reruns == {t.number for t in failed}
    assert len(observations_from_study(study)) == total
    assert not [t for t in study.trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]


# ----------------------------------------------------------------------------------------------
# Starting together on a new database
# ----------------------------------------------------------------------------------------------
STARTER = textwrap.dedent(
    """
    import os, sys, time
    import optuna
    from transfersearch.integrations.launcher import make_storage

    url, go = sys.argv[1], sys.argv[2]
    while not os.path.exists(go):
        time.sleep(0.001)
    study = optuna.create_study(study_name="together", storage=make_storage(url),
                                load_if_exists=True)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_processes_started_together_on_a_new_database_all_open_it(
    kind: str, tmp_path: Path, request: Any
) -> None:
    url = new_url(kind, tmp_path, request)
    script = tmp_path / "starter.py"
    script.write_text(STARTER)
    go = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), url, str(go)], stderr=subprocess.PIPE, text=True
        )
        for _ in range(WORKERS)
    ]
    time.sleep(3.0)  # every process imported Optuna and waits
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in processes]
    codes = [p.returncode for p in processes]
    assert codes == [0] * WORKERS, "\n".join(errors)
    assert states(url, "together")["COMPLETE"] == 2 * WORKERS


# ----------------------------------------------------------------------------------------------
# Enqueued trials under 8 workers
# ----------------------------------------------------------------------------------------------
POPPER = textwrap.dedent(
    """
    import os, sys
    import optuna
    from transfersearch.integrations.launcher import make_storage

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url, log = sys.argv[1], sys.argv[2]
    study = optuna.load_study(study_name="queue", storage=make_storage(url))

    def objective(trial):
        with open(log, "a") as f:
            f.write(f"{trial.number}\\n")
        return trial.suggest_float("x", 0, 1)

    while any(t.state.name == "WAITING" for t in study.get_trials(deepcopy=False)):
        study.optimize(objective, n_trials=1)
    """
)


@pytest.mark.parametrize("kind", ["sqlite"])  # SQLite's claim was the racy one (PostgreSQL locks)
def test_enqueued_trials_are_each_run_by_exactly_one_of_eight_workers(
    kind: str, tmp_path: Path, request: Any
) -> None:
    url = new_url(kind, tmp_path, request)
    n_enqueued = 100
    study = optuna.create_study(study_name="queue", storage=make_storage(url))
    for i in range(n_enqueued):
        study.enqueue_trial({"x": i / n_enqueued})
    script = tmp_path / "popper.py"
    script.write_text(POPPER)
    logs = [tmp_path / f"ran-{i}.txt" for i in range(WORKERS)]
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), url, str(log)], stderr=subprocess.PIPE, text=True
        )
        for log in logs
    ]
    errors = [p.communicate(timeout=180)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * WORKERS, "\n".join(errors)
    ran = [int(n) for log in logs if log.exists() for n in log.read_text().split()]
    twice = [n for n, count in collections.Counter(ran).items() if count > 1]
    assert twice == [], f"{len(twice)} enqueued trials ran twice: {twice}"
    # A worker that saw the queue non-empty but found it emptied by the time it asked creates a
    # fresh trial (plain optimize does): numbers past the queue, each run once too.
    assert sorted(n for n in ran if n < n_enqueued) == list(range(n_enqueued))
    assert states(url, "queue") == {"COMPLETE": len(ran)}


# ----------------------------------------------------------------------------------------------
# The exact total, two launchers on one study
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_eight_workers_stop_at_exactly_the_total(kind: str, tmp_path: Path, request: Any) -> None:
    url = new_url(kind, tmp_path, request)
    objective = write_objective(tmp_path, (64, 128, 256), [40, 30, 20])
    total = 90
    results = launch_workers(
        url, "exact", objective, total, gpus=0, cpu_workers=WORKERS, heartbeat_interval=2,
        env={"TS_TEST_SLEEP": "0.01"}, log_dir=tmp_path / "logs", timeout=200,
    )  # fmt: skip
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").iterdir())
    assert [r.returncode for r in results] == [0] * WORKERS, logs
    assert states(url, "exact") == {"COMPLETE": total}, "overshoot (or a failure)"


def test_two_launchers_on_one_study_share_the_total_and_a_third_is_not_needed(
    tmp_path: Path, request: Any
) -> None:
    url = new_url("postgresql", tmp_path, request)
    objective = write_objective(tmp_path, (64, 128), [30, 30])
    total = 60
    command = cli(
        "--study-name", "shared", "--objective", objective, "--total-trials", str(total),
        "--gpus", "0", "--cpu-workers", "4", "--heartbeat-interval", "2", url=url,
    )  # fmt: skip
    env = {**os.environ, "TS_TEST_SLEEP": "0.05"}
    launchers = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=200) for p in launchers]
    for process, (out, err) in zip(launchers, outputs, strict=True):
        assert process.returncode == 0, out + err
    study = optuna.load_study(study_name="shared", storage=make_storage(url))
    assert states(url, "shared") == {"COMPLETE": total}
    hosts = {t.user_attrs["worker.pid"] for t in study.trials}
    assert len(hosts) > 4, "the second launcher's workers did not join"
    third = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0, third.stderr
    assert "no worker is needed" in third.stderr, third.stderr
    assert states(url, "shared") == {"COMPLETE": total}


ASKER = textwrap.dedent(
    """
    import sys, time, optuna
    from transfersearch.integrations.launcher import make_storage
    url, ours = sys.argv[1], sys.argv[2] == "make_storage"
    study = optuna.load_study(study_name="asked", storage=make_storage(url) if ours else url)
    print(study.ask().number, flush=True)
    time.sleep(120)  # a notebook left open: alive, never tells, never beats
    """
)


@pytest.mark.parametrize("storage", ["make_storage", "plain"])
def test_a_trial_no_worker_owns_does_not_hold_the_pool(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 49, item 2: a live process that called `study.ask()` and never told held the pool
    as long as it lived (300.7 s for 4 s of work), its progress line saying only `1 running`.
    Through make_storage its trial has an owner but no heartbeat: failed after the grace period
    like any silent trial (only a registered worker's is spared while it lives); without an
    owner it is left alone, and the progress line says which trial and why."""
    url = f"sqlite:///{tmp_path / 'asked.db'}"
    objective = write_objective(tmp_path, (64, 128), [4, 4])
    launch_workers(url, "asked", objective, 2, gpus=0, cpu_workers=1, heartbeat_interval=1)
    asker = subprocess.Popen(
        [sys.executable, "-c", ASKER, url, storage], stdout=subprocess.PIPE, text=True
    )
    try:
        asked = int(asker.stdout.readline())  # type: ignore[union-attr]
        start = time.monotonic()
        results = launch_workers(
            url, "asked", objective, 6, gpus=0, cpu_workers=1, heartbeat_interval=1,
            grace_period=3, timeout=90, progress_interval=0.5,
        )  # fmt: skip
        took = time.monotonic() - start
        assert asker.poll() is None, "the asker must still be alive"
    finally:
        asker.kill()
        asker.wait()
    err = capsys.readouterr().err
    assert [r.returncode for r in results] == [0], err
    assert took < 60, f"waited {took:.0f} s on a trial no worker owns"
    trial = optuna.load_study(study_name="asked", storage=url).trials[asked]
    if storage == "make_storage":
        assert trial.state == TrialState.FAIL
        assert f"trial {asked}: pid {asker.pid}'s" in err and "grace period" in err, err
    else:
        assert trial.state == TrialState.RUNNING
        last = err.strip().splitlines()[-1]
        assert f"trial {asked}: not created through make_storage" in last and "left alone" in last
    assert states(url, "asked")["COMPLETE"] >= 5

"""Real storages and real processes: SQLite, PostgreSQL, journal; killed workers; GPU slots."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

optuna = pytest.importorskip("optuna")

import transfersearch as ts  # noqa: E402
from transfersearch import extrapolate  # noqa: E402
from transfersearch.integrations import _optuna_shim as shim  # noqa: E402
from transfersearch.integrations.launcher import (  # noqa: E402
    detect_gpus,
    launch_workers,
    lease_units,
    make_storage,
    plan_slots,
    resolve_packing,
)
from transfersearch.integrations.optuna import (  # noqa: E402
    RUNG_ATTR,
    TransferSampler,
    observations_from_study,
)
from transfersearch.resources import trials_per_gpu  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
pytestmark = pytest.mark.timeout(120)

#: The objective module every worker imports (written to a temporary file per test).
OBJECTIVE = textwrap.dedent(
    '''
    """Synthetic proxy training: loss = 1 + 0.5 (log lr - log lr*(width))^2 + ..."""
    import math
    import os
    import random
    import signal
    import time

    import optuna
    import transfersearch as ts
    from transfersearch.integrations.optuna import TransferSampler

    BASE = ts.Scale(width=64, dataset_size=2e4, batch_size=64)
    space = ts.TransferSpace(
        BASE, {"base_lr": ts.Float(1e-5, 1.0, log=True), "tau_epoch": ts.Float(1e-2, 1e2, log=True)}
    )
    ladder = [BASE.replace(width=w) for w in WIDTHS]
    SLEEP = float(os.environ.get("TS_TEST_SLEEP", "0.05"))
    HANG = os.environ.get("TS_TEST_HANG")
    # Fault injection: "point=probability,..." kills this worker with SIGKILL at a point (at most
    # once per point per run: a marker file in TS_TEST_MARKS claims it).
    KILL = dict(
        (point, float(p)) for point, p in
        (item.split("=") for item in os.environ.get("TS_TEST_KILL", "").split(",") if item)
    )
    STEAL = os.environ.get("TS_TEST_STEAL")


    def maybe_die(point):
        if point not in KILL or random.random() >= KILL[point]:
            return
        try:
            mark = os.path.join(os.environ["TS_TEST_MARKS"], point)
            os.close(os.open(mark, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)


    class Sampler(TransferSampler):
        def before_trial(self, study, trial):
            super().before_trial(study, trial)
            maybe_die("before_heartbeat")  # the trial exists and has its rung; no heartbeat yet


    sampler = Sampler(
        space, ladder, base_sampler=optuna.samplers.RandomSampler(seed=0),
        trials_per_rung=BUDGETS, min_trials=3,
    )


    def objective(trial):
        scale, hp = sampler.suggest(trial)
        maybe_die("start")
        trial.set_user_attr("t_start", time.time())
        if os.environ.get("TS_TEST_ARGV"):
            with open("/proc/self/cmdline", "rb") as f:
                trial.set_user_attr("argv", f.read().decode().split("\\0"))
        if STEAL:
            try:
                os.close(os.open(STEAL, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:  # another process fails this trial while it runs (as a stale-trial check may)
                from transfersearch.integrations._optuna_shim import trial_id
                from transfersearch.integrations.launcher import make_storage
                other = make_storage(os.environ["TRANSFERSEARCH_STORAGE"])
                other.set_trial_state_values(trial_id(trial), optuna.trial.TrialState.FAIL)
        if HANG:
            try:
                fd = os.open(HANG, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:  # the first trial to get here hangs until the test kills its worker
                os.write(fd, f"{os.getpid()} {trial.number}".encode())
                os.close(fd)
                time.sleep(600)
        time.sleep(SLEEP)
        trial.set_user_attr("t_end", time.time())
        s = math.log(scale["width"] / 64)
        lr_star, tau_star = math.log(3e-3) - 0.6 * s, 0.4 * s
        maybe_die("end")  # the value is computed but never told
        return (
            1.0
            + 0.5 * (math.log(trial.params["base_lr"]) - lr_star) ** 2
            + 0.3 * (math.log(trial.params["tau_epoch"]) - tau_star) ** 2
        )
    '''
)


def write_objective(folder: Path, widths: tuple[int, ...], budgets: list[int]) -> str:
    path = folder / "proxy_objective.py"
    source = OBJECTIVE.replace("WIDTHS", repr(widths)).replace("BUDGETS", repr(budgets))
    path.write_text(source)
    return f"{path}:objective"


def finished(study: Any) -> list[Any]:
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def check_shared_study(url: str, name: str, n_trials: int, workers: int) -> Any:
    study = optuna.load_study(study_name=name, storage=make_storage(url))
    complete = finished(study)
    assert n_trials <= len(complete) <= n_trials + workers - 1
    assert all(t.state != optuna.trial.TrialState.RUNNING for t in study.trials)
    pids = {t.user_attrs["worker.pid"] for t in complete}
    assert len(pids) >= 2, f"one process ran every trial: {pids}"
    rungs = [t.system_attrs[RUNG_ATTR] for t in complete]
    assert rungs.count(0) >= 5 and rungs.count(2) >= 1
    observations = observations_from_study(study)
    assert len(observations) == len(complete)
    return study


# ----------------------------------------------------------------------------------------------
# Several worker processes on one study, per storage
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "journal"])
def test_worker_processes_share_one_study(kind: str, tmp_path: Path, request: Any) -> None:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'proxy.db'}"
    elif kind == "journal":
        url = f"journal://{tmp_path / 'proxy.log'}"
    else:
        url = request.getfixturevalue("postgres_url")
    name = f"shared-{kind}-{os.getpid()}-{time.monotonic_ns()}"
    objective = write_objective(tmp_path, (64, 128, 256), [6, 6, 4])
    results = launch_workers(
        url, name, objective, 16, gpus=0, cpu_workers=3, heartbeat_interval=2,
        log_dir=tmp_path / "logs", timeout=100,
    )  # fmt: skip
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").iterdir())
    assert [r.returncode for r in results] == [0, 0, 0], logs
    assert all(r.slot.gpu is None for r in results)
    study = check_shared_study(url, name, 16, 3)
    # The law took over on the top rung once rungs 0 and 1 had 3 finished trials each.
    top = [t for t in finished(study) if t.system_attrs[RUNG_ATTR] == 2]
    assert any(t.user_attrs["transfer"].startswith("law") for t in top)
    # ...and the fit reads the study back from its storage.
    result = extrapolate(
        study, target=ts.Scale(width=1024, dataset_size=2e4, batch_size=64),
        params=["base_lr"],
    )  # fmt: skip
    assert 1e-5 <= result.params["base_lr"] <= 1.0 and math.isfinite(result.params["base_lr"])


# ----------------------------------------------------------------------------------------------
# A worker killed mid-trial
# ----------------------------------------------------------------------------------------------
def test_a_killed_worker_loses_no_trial_and_its_trial_is_retried(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    hang = tmp_path / "hang"
    objective = write_objective(tmp_path, (64, 128), [6, 6])
    results: list[Any] = []
    launcher = threading.Thread(
        target=lambda: results.extend(
            launch_workers(
                url, "killed", objective, 12, gpus=0, cpu_workers=2, heartbeat_interval=1,
                grace_period=2, env={"TS_TEST_HANG": str(hang), "TS_TEST_SLEEP": "0.2"},
                log_dir=tmp_path / "logs", timeout=100,
            )
        )
    )  # fmt: skip
    launcher.start()
    deadline = time.monotonic() + 60
    while not (hang.exists() and hang.read_text()):
        assert time.monotonic() < deadline, "no trial reached the hang point"
        time.sleep(0.05)
    pid, number = (int(x) for x in hang.read_text().split())
    time.sleep(0.5)  # let the other worker finish a trial or two meanwhile
    study = optuna.load_study(study_name="killed", storage=make_storage(url))
    before = {t.number: t.value for t in finished(study)}
    os.kill(pid, signal.SIGKILL)
    launcher.join(timeout=100)
    assert not launcher.is_alive()
    assert sorted(r.returncode for r in results) == [-signal.SIGKILL, 0]

    study = optuna.load_study(study_name="killed", storage=make_storage(url))
    after = {t.number: t.value for t in finished(study)}
    assert before.items() <= after.items(), "a completed trial was lost or changed"
    killed = study.trials[number]
    assert killed.state == optuna.trial.TrialState.FAIL
    retries = [t for t in study.trials if t.system_attrs.get("failed_trial") == number]
    assert len(retries) == 1
    retry = retries[0]
    assert retry.state == optuna.trial.TrialState.COMPLETE
    assert retry.params == killed.params
    assert retry.system_attrs[RUNG_ATTR] == killed.system_attrs[RUNG_ATTR]
    assert retry.user_attrs["transfer"] == "retry"
    assert 12 <= len(after) <= 13
    # The dead worker's trial is not evidence about its hyperparameters: the fit skips it.
    numbers = [t.number for t in study.trials if t.state.is_finished() and t.number != number]
    assert len(observations_from_study(study)) == len(numbers)


@pytest.mark.slow  # worker processes end to end (9-24 s idle): CI's further step
# ----------------------------------------------------------------------------------------------
# GPU slots
# ----------------------------------------------------------------------------------------------
def test_gpu_slots_pack_small_rungs_and_run_the_large_rung_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    objective = write_objective(tmp_path, (64, 128, 256), [8, 4, 4])
    results = launch_workers(
        url, "gpus", objective, 16, gpus=2, trials_per_gpu={0: 2, 1: 2, 2: 1},
        heartbeat_interval=2, env={"TS_TEST_SLEEP": "0.4"}, log_dir=tmp_path / "logs",
        timeout=100,
    )  # fmt: skip
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").iterdir())
    assert [r.returncode for r in results] == [0] * 4, logs
    assert sorted((r.slot.gpu, r.slot.slot) for r in results) == [
        ("0", 0), ("0", 1), ("1", 0), ("1", 1)
    ]  # fmt: skip
    study = optuna.load_study(study_name="gpus", storage=make_storage(url))
    trials = finished(study)
    devices = {t.user_attrs["worker.cuda_visible_devices"] for t in trials}
    assert devices == {"0", "1"}, "each worker sees exactly one GPU"

    def overlap(a: Any, b: Any) -> bool:
        return (
            a.user_attrs["t_start"] < b.user_attrs["t_end"]
            and b.user_attrs["t_start"] < (a.user_attrs["t_end"])
        )

    packed = alone_violations = 0
    for i, a in enumerate(trials):
        for b in trials[i + 1 :]:
            same_gpu = (
                a.user_attrs["worker.cuda_visible_devices"]
                == (b.user_attrs["worker.cuda_visible_devices"])
            )
            if not (same_gpu and overlap(a, b)):
                continue
            rungs = {a.system_attrs[RUNG_ATTR], b.system_attrs[RUNG_ATTR]}
            if 2 in rungs:
                alone_violations += 1
            else:
                packed += 1
    assert alone_violations == 0, "a top-rung trial shared its GPU"
    assert packed >= 2, "small-rung trials never shared a GPU"
    assert sum(t.system_attrs[RUNG_ATTR] == 2 for t in trials) >= 2


def test_slot_planning_and_packing_rules() -> None:
    assert lease_units((4, 2, 1)) == (4, {0: 1, 1: 2, 2: 4})
    assert lease_units((3, 2, 1)) == (6, {0: 2, 1: 3, 2: 6})
    slots = plan_slots(["0", "1"], (4, 2, 1), cpu_workers=3)
    assert [(s.gpu, s.slot) for s in slots] == [("0", i) for i in range(4)] + [
        ("1", i) for i in range(4)
    ]
    assert [s.cuda_visible_devices for s in plan_slots([], (4, 1), cpu_workers=2)] == ["", ""]
    assert resolve_packing({0: 3}, 3, None) == (3, 1, 1)
    assert resolve_packing(None, 3, (4, 2, 1)) == (4, 2, 1)
    with pytest.raises(ts.TransferSearchError, match="names rungs"):
        resolve_packing({5: 2}, 3, None)
    with pytest.raises(ts.TransferSearchError, match=">= 1"):
        plan_slots([], (1,), cpu_workers=0)
    # The default rule packs by cost relative to the top rung: width² ratios 16, 4, 1.
    space = ts.TransferSpace(
        ts.Scale(width=64), {"base_lr": ts.Float(1e-4, 1, log=True), "weight_decay": 0.1}
    )
    sampler = TransferSampler(space, [ts.Scale(width=w) for w in (64, 128, 256)])
    assert trials_per_gpu(sampler.planner.costs, max_per_gpu=8) == (8, 4, 1)
    assert trials_per_gpu(sampler.planner.costs) == (4, 4, 1)


def test_detect_gpus_reads_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert detect_gpus() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_gpus() == []


def test_cli_falls_back_to_cpu_workers_without_gpus(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    objective = write_objective(tmp_path, (64, 128), [4, 4])
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    command = [
        sys.executable, "-m", "transfersearch.integrations.optuna", "workers",
        "--storage", url, "--study-name", "cli", "--objective", objective, "--n-trials", "8",
        "--gpus", "auto", "--cpu-workers", "2", "--heartbeat-interval", "2",
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=100, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    # The documented command warns about nothing (issue 19: two ExperimentalWarnings per worker);
    # --n-trials is the old spelling of --total-trials; a progress line opens and ends the run.
    assert "Warning" not in out.stderr, out.stderr
    assert out.stderr.count("[workers] cli: ") >= 2 and "8/8 trials done" in out.stderr, out.stderr
    has_gpu = bool(detect_gpus())
    if not has_gpu:
        assert out.stdout.count("(cpu): exit 0") == 2, out.stdout
    study = optuna.load_study(study_name="cli", storage=make_storage(url))
    assert 8 <= len(finished(study)) <= 9


def test_bad_worker_arguments_raise(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    with pytest.raises(ts.TransferSearchError, match="module:function"):
        launch_workers(url, "x", "no_colon", 4)
    objective = write_objective(tmp_path, (64,), [2])
    with pytest.raises(ts.TransferSearchError, match="n_trials"):
        launch_workers(url, "x", objective, 0)
    with pytest.raises(ts.TransferSearchError, match="heartbeat_interval"):
        make_storage(url, heartbeat_interval=0)


# ----------------------------------------------------------------------------------------------
# Dead workers: before the first heartbeat, races on a stale trial, faults at random points
# ----------------------------------------------------------------------------------------------
def origin(trial: Any) -> int:
    """The trial a retry stands for (itself for a first run)."""
    return int(trial.system_attrs.get("failed_trial", trial.number))


ORPHAN = """
import os, signal, sys, warnings, optuna
from transfersearch.integrations.launcher import make_storage
warnings.simplefilter("ignore")
from transfersearch.integrations._launcher_workers import _gate_new_trials
storage = make_storage(sys.argv[1], heartbeat_interval=int(sys.argv[3]))
study = optuna.load_study(study_name=sys.argv[2], storage=storage)
_gate_new_trials(study, 100)  # a launcher worker, as run_worker makes one: registered on the study
trial = study.ask()
print(trial.number, flush=True)
if sys.argv[4] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)  # a worker dying before its objective starts
value = sys.stdin.readline()  # a live worker that sends no heartbeat (SIGSTOP) until told
optuna.load_study(study_name=sys.argv[2], storage=storage).tell(trial, float(value))
print("told", flush=True)
"""


def test_a_trial_created_but_never_heartbeating_is_failed_and_retried(tmp_path: Path) -> None:
    # The repro: a worker asks a trial and is killed before its first heartbeat; the
    # workers must not wait on it forever: its pid is gone, so it is failed and retried.
    url = f"sqlite:///{tmp_path / 'h.db'}"
    objective = write_objective(tmp_path, (64, 128), [4, 4])
    optuna.create_study(study_name="h", storage=make_storage(url, heartbeat_interval=1))
    killed = subprocess.run(
        [sys.executable, "-c", ORPHAN, url, "h", "60", "kill"], capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    orphan = optuna.load_study(study_name="h", storage=make_storage(url)).trials[int(killed.stdout)]
    start = time.monotonic()
    results = launch_workers(
        url, "h", objective, 6, gpus=0, cpu_workers=1, heartbeat_interval=1, grace_period=2,
        log_dir=tmp_path / "logs", timeout=40,
    )  # fmt: skip
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").iterdir())
    assert [r.returncode for r in results] == [0], logs
    assert time.monotonic() - start < 35, "the worker waited on the orphan until the timeout"
    study = optuna.load_study(study_name="h", storage=make_storage(url))
    assert study.trials[orphan.number].state == optuna.trial.TrialState.FAIL
    retries = [t for t in study.trials if t.system_attrs.get("failed_trial") == orphan.number]
    assert [t.state for t in retries] == [optuna.trial.TrialState.COMPLETE]
    assert len(finished(study)) >= 6
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]


@pytest.mark.slow  # worker processes end to end (9-24 s idle): CI's further step
def test_a_live_workers_trial_is_never_failed_however_late_its_heartbeat(tmp_path: Path) -> None:
    # A loaded machine at its worst: a worker on this host that sends no heartbeat at all
    # (SIGSTOP) for many grace periods. Its pid lives, so its trial is not failed, not retried,
    # and its value is kept when it resumes; the other workers wait for it, then finish.
    url = f"sqlite:///{tmp_path / 'live.db'}"
    objective = write_objective(tmp_path, (64, 128), [4, 4])
    optuna.create_study(study_name="live", storage=make_storage(url, heartbeat_interval=1))
    holder = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, url, "live", "1", "stop"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdin is not None and holder.stdout is not None
    number = int(holder.stdout.readline())
    holder.send_signal(signal.SIGSTOP)
    done: list[Any] = []
    launcher = threading.Thread(
        target=lambda: done.append(
            launch_workers(
                url, "live", objective, 6, gpus=0, cpu_workers=2, heartbeat_interval=1,
                grace_period=1, log_dir=tmp_path / "logs", timeout=90,
            )
        )
    )  # fmt: skip
    launcher.start()
    try:
        study = optuna.load_study(study_name="live", storage=make_storage(url))
        deadline = time.monotonic() + 60
        while len(finished(study)) < 5 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(4)  # four grace periods more without a heartbeat
        assert study.trials[number].state == optuna.trial.TrialState.RUNNING
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.stdin.write("1.5\n")
        holder.stdin.flush()
    assert holder.stdout.readline().strip() == "told"
    assert holder.wait(timeout=30) == 0
    launcher.join(timeout=60)
    assert [r.returncode for r in done[0]] == [0, 0]
    study = optuna.load_study(study_name="live", storage=make_storage(url))
    assert study.trials[number].state == optuna.trial.TrialState.COMPLETE
    assert study.trials[number].value == 1.5
    assert not [t for t in study.trials if t.system_attrs.get("failed_trial") == number]
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]


def test_a_stale_trial_failed_by_many_processes_at_once_is_retried_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    storages = [make_storage(url, heartbeat_interval=1, grace_period=1) for _ in range(6)]
    optuna.create_study(study_name="race", storage=storages[0])
    studies = [optuna.load_study(study_name="race", storage=s) for s in storages]
    trial = studies[0].ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    storages[0].record_heartbeat(shim.trial_id(trial))
    time.sleep(2.2)  # the heartbeat is now older than the grace period
    # Every process saw the trial RUNNING and failed it (SQLite lets all of them through):
    stale = shim.storage_of(studies[0]).get_trial(shim.trial_id(trial))
    storages[0].set_trial_state_values(shim.trial_id(trial), optuna.trial.TrialState.FAIL)
    barrier = threading.Barrier(len(studies))

    def retry(study: Any) -> None:
        barrier.wait()
        backend = shim.rdb_backend(shim.storage_of(study))
        assert backend is not None
        backend.get_heartbeat_stale_trial_callback()(study, stale)

    threads = [threading.Thread(target=retry, args=(s,)) for s in studies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    study = optuna.load_study(study_name="race", storage=make_storage(url))
    retries = [t for t in study.trials if t.system_attrs.get("failed_trial") == trial.number]
    assert len(retries) == 1, [t.number for t in retries]


def test_a_worker_survives_losing_its_trial_to_another_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'steal.db'}"
    objective = write_objective(tmp_path, (64,), [6])
    results = launch_workers(
        url, "steal", objective, 6, gpus=0, cpu_workers=1, heartbeat_interval=1,
        env={"TS_TEST_STEAL": str(tmp_path / "stolen")}, log_dir=tmp_path / "logs", timeout=60,
    )  # fmt: skip
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").iterdir())
    assert [r.returncode for r in results] == [0], logs
    assert "storage error" in logs
    study = optuna.load_study(study_name="steal", storage=make_storage(url))
    assert len(finished(study)) >= 6


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("seed", [0, 1])
def test_workers_killed_at_random_points_lose_nothing_and_run_nothing_twice(
    kind: str, seed: int, tmp_path: Path, request: Any
) -> None:
    """Fault injection: two of the three workers die (SIGKILL) at random points: before a
    trial's first heartbeat, at the start of the objective, or with the value computed but not
    told; and a process killed after asking leaves one trial RUNNING before its objective."""
    import random

    rng = random.Random(seed)
    url = (
        f"sqlite:///{tmp_path / 'faults.db'}"
        if kind == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    name = f"faults-{kind}-{seed}-{os.getpid()}-{time.monotonic_ns()}"
    points = rng.sample(["before_heartbeat", "start", "end"], 2)
    kill = ",".join(f"{point}={rng.uniform(0.2, 0.6):.2f}" for point in points)
    (tmp_path / "marks").mkdir()
    objective = write_objective(tmp_path, (64, 128, 256), [5, 5, 4])
    optuna.create_study(study_name=name, storage=make_storage(url, heartbeat_interval=1))
    orphan = subprocess.run([sys.executable, "-c", ORPHAN, url, name, "60", "kill"])
    assert orphan.returncode == -signal.SIGKILL  # a trial left RUNNING by a dead process
    n_trials = 14
    snapshots: list[dict[int, float]] = []
    stop = threading.Event()

    def watch() -> None:
        study = optuna.load_study(study_name=name, storage=make_storage(url))
        while not stop.wait(0.3):
            snapshots.append({t.number: t.value for t in finished(study)})

    watcher = threading.Thread(target=watch)
    watcher.start()
    start = time.monotonic()
    try:
        results = launch_workers(
            url, name, objective, n_trials, gpus=0, cpu_workers=3, heartbeat_interval=1,
            grace_period=2, env={"TS_TEST_KILL": kill, "TS_TEST_MARKS": str(tmp_path / "marks")},
            log_dir=tmp_path / "logs", timeout=90,
        )  # fmt: skip
    finally:
        stop.set()
        watcher.join()
    elapsed = time.monotonic() - start
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").iterdir())
    fired = sorted(p.name for p in (tmp_path / "marks").iterdir())
    codes = sorted(r.returncode for r in results)
    assert codes == sorted([-signal.SIGKILL] * len(fired) + [0] * (3 - len(fired))), logs
    assert elapsed < 80, f"bounded time: {elapsed:.0f} s"

    study = optuna.load_study(study_name=name, storage=make_storage(url))
    final = {t.number: t.value for t in finished(study)}
    for snapshot in snapshots:
        assert snapshot.items() <= final.items(), "a completed trial was lost or changed"
    assert not [t.number for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    # Every dead trial was retried exactly once per death, and no trial completed twice.
    completed_origins = [origin(t) for t in finished(study)]
    assert len(completed_origins) == len(set(completed_origins)), completed_origins
    for trial in study.trials:
        retries = [
            t
            for t in study.trials
            if t.system_attrs.get("retry_history", [None])[-1] == trial.number
        ]
        assert len(retries) <= 1, (trial.number, [t.number for t in retries])
        if trial.state == optuna.trial.TrialState.FAIL:
            assert len(retries) == 1, f"dead trial {trial.number} was not retried"
    assert len(final) >= n_trials, (fired, len(final))


# ----------------------------------------------------------------------------------------------
# The README's URLs, passwords, bad input
# ----------------------------------------------------------------------------------------------
def test_the_readme_postgresql_url_opens_a_storage(postgres_url: str) -> None:
    # The README's form: no driver named, so SQLAlchemy 2.1 uses psycopg 3.
    assert postgres_url.startswith("postgresql://")
    name = f"readme-{os.getpid()}-{time.monotonic_ns()}"
    study = optuna.create_study(study_name=name, storage=make_storage(postgres_url))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    assert len(optuna.load_study(study_name=name, storage=make_storage(postgres_url)).trials) == 2
    with pytest.raises(ts.TransferSearchError, match="not installed"):
        make_storage("postgresql+pg8000://user@127.0.0.1:1/db")


def test_workers_get_the_storage_url_from_the_environment_not_their_command_line(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'secret.db'}"
    objective = write_objective(tmp_path, (64,), [2])
    results = launch_workers(
        url, "argv", objective, 2, gpus=0, cpu_workers=1, heartbeat_interval=1,
        env={"TS_TEST_ARGV": "1"}, log_dir=tmp_path / "logs", timeout=60,
    )  # fmt: skip
    assert [r.returncode for r in results] == [0]
    study = optuna.load_study(study_name="argv", storage=make_storage(url))
    argv = finished(study)[0].user_attrs["argv"]
    assert "worker" in argv and not any(url in arg or "secret" in arg for arg in argv), argv
    # The CLI reads the URL from TRANSFERSEARCH_STORAGE when --storage is left out.
    env = {**os.environ, "TRANSFERSEARCH_STORAGE": url}
    command = [
        sys.executable, "-m", "transfersearch.integrations.launcher", "worker", "--study-name",
        "argv", "--objective", objective, "--n-trials", "3", "--heartbeat-interval", "1",
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert len(finished(optuna.load_study(study_name="argv", storage=make_storage(url)))) >= 3


def cli_workers(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "transfersearch.integrations.launcher", "workers", *args]
    env = {k: v for k, v in os.environ.items() if k != "TRANSFERSEARCH_STORAGE"}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("sqlite:////nodir/x.db", "directory '/nodir' does not exist"),
        ("sqlite:///NOTDB", "is not a SQLite database"),
        ("garbage", "is not a database URL"),
        ("foo://bar", "unknown database 'foo'"),
    ],
)
def test_bad_storage_urls_are_one_error_line(url: str, match: str, tmp_path: Path) -> None:
    (tmp_path / "NOTDB").write_text("name,value\na,1\n")
    url = url.replace("NOTDB", str(tmp_path / "NOTDB"))
    with pytest.raises(ts.TransferSearchError, match=match):
        make_storage(url)
    objective = write_objective(tmp_path, (64,), [2])
    out = cli_workers(
        "--storage", url, "--study-name", "x", "--objective", objective, "--n-trials", "2",
        "--gpus", "0", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert match in out.stderr


def test_a_read_only_open_never_creates_a_file(tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    with pytest.raises(ts.TransferSearchError, match="does not exist"):
        make_storage(f"sqlite:///{typo}", must_exist=True)
    with pytest.raises(ts.TransferSearchError, match="does not exist"):
        make_storage(f"journal://{tmp_path / 'typo.log'}", must_exist=True)
    assert not list(tmp_path.iterdir())


def test_a_missing_objective_module_is_one_error_line(tmp_path: Path) -> None:
    out = cli_workers(
        "--storage", f"sqlite:///{tmp_path / 'x.db'}", "--study-name", "x", "--objective",
        "no_such_module:objective", "--n-trials", "2", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "no_such_module" in out.stderr
    out = cli_workers("--study-name", "x", "--objective", "m:f", "--n-trials", "2", cwd=tmp_path)
    assert out.returncode == 2 and "TRANSFERSEARCH_STORAGE" in out.stderr, out.stderr


@pytest.mark.slow  # worker processes end to end (9-24 s idle): CI's further step
def test_a_launcher_killed_with_sigkill_leaves_no_gpu_locks_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    hang = tmp_path / "hang"
    objective = write_objective(tmp_path, (64,), [4])
    command = [
        sys.executable, "-m", "transfersearch.integrations.launcher", "workers", "--storage", url,
        "--study-name", "locks", "--objective", objective, "--n-trials", "4", "--gpus", "7",
        "--trials-per-gpu", "1", "--heartbeat-interval", "1",
    ]  # fmt: skip
    env = {**os.environ, "TS_TEST_HANG": str(hang)}
    launcher = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (hang.exists() and hang.read_text()):
            assert time.monotonic() < deadline, "no trial started"
            time.sleep(0.05)
        tmp = Path(tempfile.gettempdir())
        mine = list(tmp.glob(f"transfersearch-gpu-locks-{launcher.pid}-*"))
        assert len(mine) == 1, "the launcher names its lock directory after its pid"
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and its worker, as `kill -9`
        launcher.wait()
    assert mine[0].exists(), "SIGKILL left the lock directory behind"
    # The next launcher on this machine removes it.
    hang.unlink()
    objective = write_objective(tmp_path, (64,), [2])
    results = launch_workers(
        f"sqlite:///{tmp_path / 'next.db'}", "next", objective, 2, gpus=["7"],
        trials_per_gpu=1, heartbeat_interval=1, timeout=60,
    )  # fmt: skip
    assert [r.returncode for r in results] == [0]
    assert not mine[0].exists()


def test_reading_a_mistyped_sqlite_path_in_the_cli_creates_no_file(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "transfersearch.cli", "extrapolate", "--storage",
        "sqlite:///typo.db", "--study", "proxy", "--target", "width=1024",
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: ") and "does not exist" in out.stderr, out.stderr
    assert not (tmp_path / "typo.db").exists()


# ----------------------------------------------------------------------------------------------
# The README's first example: a plain sqlite:/// URL, several processes, enqueued trials
# ----------------------------------------------------------------------------------------------
README_PROCESS = """
import os, sys, time, optuna, transfersearch as ts
from transfersearch.integrations.optuna import TransferSampler
optuna.logging.set_verbosity(optuna.logging.ERROR)
space = ts.TransferSpace(
    ts.Scale(width=64, dataset_size=2e4, batch_size=64),
    {"base_lr": ts.Float(1e-5, 1.0, log=True), "tau_epoch": ts.Float(1e-2, 1e2, log=True)},
)
ladder = [ts.Scale(width=w, dataset_size=2e4, batch_size=64) for w in (64, 128)]
sampler = TransferSampler(space, ladder, base_sampler=optuna.samplers.TPESampler(seed=0))
study = optuna.create_study(storage=sys.argv[1], study_name="proxy", sampler=sampler,
                            load_if_exists=True)

def objective(trial):
    scale, hp = sampler.suggest(trial)
    with open(sys.argv[3], "a") as log:
        log.write(f"{trial.number}\\n")
    return hp.coordinates["base_lr"]

start = float(sys.argv[4])
while time.time() < start:  # every process claims its first trial at the same moment
    time.sleep(0.001)
study.optimize(objective, n_trials=int(sys.argv[2]))
"""


@pytest.mark.slow  # worker processes end to end (9-24 s idle): CI's further step
def test_the_readme_plain_sqlite_url_runs_each_enqueued_trial_once(tmp_path: Path) -> None:
    # Issue 28: the claim fix held only for make_storage's storages. With the README's plain
    # URL, six processes start together on a study holding 40 enqueued trials (Optuna's claim
    # reads FOR UPDATE, which SQLite ignores: before, trials ran twice and processes died with
    # "Cannot tell a COMPLETE trial").
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    script, log = tmp_path / "readme.py", tmp_path / "ran.log"
    script.write_text(README_PROCESS)
    first = subprocess.run(
        [sys.executable, str(script), url, "2", str(log), "0"], capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr  # the README's first run
    study = optuna.load_study(study_name="proxy", storage=url)
    enqueued = [10.0 ** (-5 + 5 * i / 40) for i in range(40)]
    for lr in enqueued:
        study.enqueue_trial({"base_lr": lr, "tau_epoch": 1.0})
    start = time.time() + 4
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), url, "8", str(log), str(start)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    errors = [p.communicate(timeout=200)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * 6, "\n".join(errors)
    numbers = log.read_text().split()
    assert len(numbers) == len(set(numbers)) == 2 + 6 * 8, "a trial ran twice"
    study = optuna.load_study(study_name="proxy", storage=url)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    ran = sorted(t.params["base_lr"] for t in done if t.params["tau_epoch"] == 1.0)
    assert ran == pytest.approx(sorted(enqueued)), "an enqueued trial ran twice or never"


@pytest.mark.slow  # worker processes end to end (9-24 s idle): CI's further step
# ----------------------------------------------------------------------------------------------
# Extra trials on the rungs a user names (issue 27 item 5)
# ----------------------------------------------------------------------------------------------
def test_add_trials_to_the_largest_rung_as_a_user_types_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    objective = write_objective(tmp_path, (64, 128, 256), [3, 3, 2])
    common = ("--storage", url, "--study-name", "more", "--objective", objective, "--gpus", "0",
              "--cpu-workers", "2", "--heartbeat-interval", "2")  # fmt: skip
    first = cli_workers(*common, "--total-trials", "8", cwd=tmp_path, timeout=200)
    assert first.returncode == 0, first.stderr
    held = len(optuna.load_study(study_name="more", storage=make_storage(url)).trials)
    more = cli_workers(
        *common, "--add-trials", "6", "--rungs", "largest", cwd=tmp_path, timeout=200
    )
    assert more.returncode == 0, more.stderr
    study = optuna.load_study(study_name="more", storage=make_storage(url))
    added = study.trials[held:]
    assert len(added) == 6
    assert [t.system_attrs[RUNG_ATTR] for t in added] == [2] * 6
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in added)
    assert all(t.user_attrs["scale.width"] == 256 for t in added)
    # By index, spread over the rungs named, in turn.
    again = cli_workers(*common, "--add-trials", "4", "--rungs", "0,2", cwd=tmp_path, timeout=200)
    assert again.returncode == 0, again.stderr
    study = optuna.load_study(study_name="more", storage=make_storage(url))
    assert sorted(t.system_attrs[RUNG_ATTR] for t in study.trials[held + 6 :]) == [0, 0, 2, 2]


def test_a_rung_the_ladder_lacks_is_one_error_line_naming_the_rungs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    objective = write_objective(tmp_path, (64, 128), [3, 3])
    for rungs, needle in (("largst", "Did you mean 'largest'?"), ("5", "indices 0..1")):
        out = cli_workers(
            "--storage", url, "--study-name", "x", "--objective", objective, "--gpus", "0",
            "--add-trials", "2", "--rungs", rungs, cwd=tmp_path,
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and needle in out.stderr, out.stderr
        assert "0: batch_size=64, dataset_size=20000, width=64; 1: " in out.stderr

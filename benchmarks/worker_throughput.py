"""Benchmark: trials per second of the worker launcher against plain ``study.optimize`` in as
many processes, on the same storage (SQLite and PostgreSQL).

Run: ``python benchmarks/worker_throughput.py [--workers 8 --trials-per-worker 50 --repeats 2]``.
Writes ``benchmarks/results/worker_throughput.md``. PostgreSQL: ``--postgres URL`` of an empty
database, or (default) a throw-away cluster started here from the server binaries that
``.ci/postgres.sh`` installs; without them the PostgreSQL rows are left out.

Both arms run the same objective module: a ``TransferSampler`` over the synthetic four-rung
ladder with ``RandomSampler(seed=0)`` as the base and an objective that costs nothing (the
ladder's known loss), so the figures are the per-trial machinery only: sampling, storage writes,
heartbeats, the claim of a trial. Both open the storage with ``make_storage(url,
heartbeat_interval=10)``. *Plain*: ``workers`` processes each call ``study.optimize(objective,
n_trials=trials_per_worker)``. *Launcher*: ``launch_workers(..., n_trials=workers ×
trials_per_worker, cpu_workers=workers)``. Two rates per run: over the wall time from starting
the processes to the last exit (process start included), and over the trials' own span (first
trial's start to the last one's end). Each run also counts trials run twice (by trial number
in per-process logs) and trials beyond the total (launcher).
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import optuna

from transfersearch.integrations.launcher import launch_workers, make_storage

RESULTS = Path(__file__).resolve().parent / "results" / "worker_throughput.md"
#: What a profile of one worker against one plain process showed (cProfile, 150 trials, SQLite),
#: and what was changed; printed under the table.
NOTE = (
    "What the launcher does per trial that plain `optimize` does not: it creates a fresh trial "
    "through its gate (a shared study lock, one count of the study's trials and one read of the "
    "registered workers while the study is far from its total; the exclusive lock and an exact "
    "count for the last trials, which is what makes the total exact), and it writes the trial's "
    "three `worker.*` attributes in one commit before the objective. Both arms share the rest: "
    "the sampler's attributes in one commit, the owner of each trial in its creating "
    "transaction, the stale-trial check before each trial. *Wall* also holds the launcher's own "
    "start (it imports the objective and creates the study before its workers start). What bounds "
    "the ratio on PostgreSQL (0.8 here): the gate's round trips (the advisory lock and its "
    "release, the count, the registered workers) and the worker commit, six beside the ~25 "
    "statements of a plain trial; folding the worker attributes into the creating transaction "
    "and reading the worker count once every few seconds are what is left to try. On SQLite "
    "these are local and cheap (0.95)."
)


#: The figures issue 28 reported before the owner/claim fixes, printed under the load table.
BEFORE = (
    "Before (issue 28, the same scenario with `make_storage`'s SQLite on a busy 2-core machine): "
    '4 workers × 25: 16 live workers\' trials failed as "RUNNING … without a heartbeat", 5 '
    "trials ran to completion twice, one `UpdateFinishedTrialError`; 8 workers × 25: 64 failed "
    "that way, 20 ran twice, 197 of 200 done, one traceback. With the README's plain `sqlite:///` "
    "URL (no `make_storage`), 8 plain `study.optimize` processes on 60 enqueued trials ran 7 "
    "twice and 6 of the 8 died (`tests/test_optuna_storages.py` runs 6 such processes on 40)."
)

OBJECTIVE = textwrap.dedent(
    """
    import os
    import random
    import signal
    import time
    import optuna
    from transfersearch import synthetic
    from transfersearch.integrations.optuna import TransferSampler

    sampler = TransferSampler(
        synthetic.make_space(), synthetic.LADDER,
        base_sampler=optuna.samplers.RandomSampler(seed=0), trials_per_rung=[400] * 4,
    )
    LOG = os.environ.get("BENCH_LOG")  # set for the processes that run trials


    SLEEP = float(os.environ.get("BENCH_SLEEP", "0"))
    KILL = float(os.environ.get("BENCH_KILL", "0"))  # the fault arm: die at random points


    def maybe_die():
        marks = os.environ.get("BENCH_MARKS")
        if not KILL or random.random() >= KILL:
            return
        for i in range(int(os.environ.get("BENCH_MAX_KILLS", "0"))):
            try:  # at most BENCH_MAX_KILLS deaths in all: a marker file claims each
                os.close(os.open(f"{marks}/kill-{i}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue
            os.kill(os.getpid(), signal.SIGKILL)


    def objective(trial):
        scale, hp = sampler.suggest(trial)
        maybe_die()  # before the objective's work
        time.sleep(SLEEP)
        value = 1.0 + synthetic.regret(scale, hp.coordinates)
        maybe_die()  # the value computed, never told
        with open(f"{LOG}-{os.getpid()}", "a") as f:
            f.write(f"{trial.number} {trial.user_attrs.get('job', -1)}\\n")
        return value
    """
)

PLAIN = textwrap.dedent(
    """
    import sys
    import optuna
    from transfersearch.integrations.launcher import make_storage

    sys.path.insert(0, sys.argv[3])
    import bench_objective as module

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name=sys.argv[2], sampler=module.sampler,
                              storage=make_storage(sys.argv[1], heartbeat_interval=10))
    study.optimize(module.objective, n_trials=int(sys.argv[4]))
    """
)


def run_plain(url: str, name: str, folder: Path, workers: int, per_worker: int) -> float:
    script = folder / "plain.py"
    script.write_text(PLAIN)
    env = {**os.environ, "BENCH_LOG": str(folder / f"ran-{name}")}
    start = time.perf_counter()  # the study's creation counts, as the launcher's does
    optuna.create_study(study_name=name, storage=make_storage(url, heartbeat_interval=10))
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), url, name, str(folder), str(per_worker)], env=env
        )
        for _ in range(workers)
    ]
    codes = [p.wait() for p in processes]
    if any(codes):
        raise RuntimeError(f"plain optimize processes exited with {codes}")
    return time.perf_counter() - start


def run_launcher(url: str, name: str, folder: Path, workers: int, per_worker: int) -> float:
    env = {"BENCH_LOG": str(folder / f"ran-{name}")}
    start = time.perf_counter()
    results = launch_workers(
        url, name, "bench_objective:objective", workers * per_worker, gpus=0,
        cpu_workers=workers, heartbeat_interval=10, env=env, log_dir=folder / f"logs-{name}",
    )  # fmt: skip
    if any(r.returncode for r in results):
        raise RuntimeError(f"workers exited with {[r.returncode for r in results]}")
    return time.perf_counter() - start


def measure(url: str, name: str, folder: Path, wall: float) -> dict[str, float]:
    study = optuna.load_study(study_name=name, storage=make_storage(url))
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    starts = [t.datetime_start for t in complete if t.datetime_start]
    ends = [t.datetime_complete for t in complete if t.datetime_complete]
    span = (max(ends) - min(starts)).total_seconds()
    ran = [int(line.split()[0]) for f in folder.glob(f"ran-{name}-*") for line in _lines(f)]
    twice = sum(c - 1 for c in collections.Counter(ran).values() if c > 1)
    return {
        "trials": len(complete),
        "all": len(study.trials),
        "wall_rate": len(complete) / wall,
        "span_rate": len(complete) / span,
        "twice": twice,
    }


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def run_enqueued(
    url: str, name: str, folder: Path, workers: int, per_worker: int, *, kill: float,
    max_kills: int, sleep: float, timeout: float,
) -> dict[str, float]:  # fmt: skip
    """Issue 28's load scenario (``kill=0``) and the fault one: ``workers`` × ``per_worker``
    enqueued trials (each with user attribute ``job``) run by the launcher with a heartbeat every
    second and a grace period of two, the objective sleeping ``sleep`` s; with ``kill`` > 0 a
    worker kills itself (SIGKILL) with that probability before or after its objective's work,
    ``max_kills`` times in all. Counts what matters: every job completed exactly once (lost,
    duplicated), live workers' trials failed (FAIL trials beyond the kills), hung (the launcher
    ran into its timeout, or trials left RUNNING), tracebacks in the workers' logs."""
    import random

    jobs = workers * per_worker
    study = optuna.create_study(study_name=name, storage=make_storage(url, heartbeat_interval=1))
    rng = random.Random(0)
    for job in range(jobs):
        params = {"base_lr": 10 ** rng.uniform(-5, 0), "tau_epoch": 10 ** rng.uniform(-2, 2)}
        study.enqueue_trial(params, user_attrs={"job": job})
    marks = folder / f"marks-{name}"
    marks.mkdir()
    env = {
        "BENCH_LOG": str(folder / f"ran-{name}"), "BENCH_SLEEP": str(sleep),
        "BENCH_KILL": str(kill), "BENCH_MAX_KILLS": str(max_kills), "BENCH_MARKS": str(marks),
    }  # fmt: skip
    load = os.getloadavg()[0]
    start = time.perf_counter()
    results = launch_workers(
        url, name, "bench_objective:objective", jobs, gpus=0, cpu_workers=workers,
        heartbeat_interval=1, grace_period=2, env=env, log_dir=folder / f"logs-{name}",
        timeout=timeout,
    )  # fmt: skip
    wall = time.perf_counter() - start
    kills = len(list(marks.iterdir()))
    study = optuna.load_study(study_name=name, storage=make_storage(url))
    states = collections.Counter(t.state for t in study.trials)
    done = collections.Counter(
        t.user_attrs.get("job") for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
    )
    logs = "".join(p.read_text() for p in (folder / f"logs-{name}").iterdir())
    return {
        "jobs": jobs,
        "complete": states[optuna.trial.TrialState.COMPLETE],
        "kills": kills,
        "exits": sorted(r.returncode for r in results),  # type: ignore[dict-item]
        "lost": sum(1 for job in range(jobs) if done[job] == 0),
        "duplicated": sum(c - 1 for c in done.values() if c > 1),
        "live_failed": states[optuna.trial.TrialState.FAIL] - kills,
        "hung": int(wall >= timeout - 1 or states[optuna.trial.TrialState.RUNNING] > 0),
        "tracebacks": logs.count("Traceback"),
        "load": load,
        "load_end": os.getloadavg()[0],
        "wall": wall,
    }


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """``processes`` CPU-bound processes for the duration: a busy machine on purpose."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@contextmanager
def postgres_cluster() -> Iterator[str | None]:
    """A throw-away PostgreSQL server's URL (None without server binaries), as the tests' one."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import conftest  # the tests' fixture: initdb + pg_ctl on a free port

    generator = conftest.postgres_url.__wrapped__()  # type: ignore[attr-defined]
    try:
        url = next(generator)
    except Exception as exc:  # pytest.skip raises an Exception subclass without binaries
        print(f"no PostgreSQL server: {exc}", file=sys.stderr)
        yield None
        return
    try:
        yield url
    finally:
        generator.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials-per-worker", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--postgres", default=None, help="URL of an empty database")
    parser.add_argument("--kinds", default="sqlite,postgresql")
    parser.add_argument("--load-workers", default="4,8", help="the load/fault runs' pool sizes")
    parser.add_argument("--load-per-worker", type=int, default=25)
    parser.add_argument("--fault-kills", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="CPU burners during the load runs")
    parser.add_argument("--sections", default="throughput,load")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    folder = Path(tempfile.mkdtemp(prefix="worker-throughput-"))
    (folder / "bench_objective.py").write_text(OBJECTIVE)
    os.chdir(folder)  # the launcher and its workers import bench_objective from here
    sys.path.insert(0, str(folder))
    started = time.perf_counter()
    rows: list[str] = []
    load_rows: list[str] = []
    kinds = args.kinds.split(",")
    sections = args.sections.split(",")
    with (
        postgres_cluster()
        if "postgresql" in kinds and not args.postgres
        else _given(args.postgres) as pg_url
    ):
        for kind in kinds:
            url = f"sqlite:///{folder / f'bench-{kind}.db'}" if kind == "sqlite" else pg_url
            if url is None:
                continue
            if "throughput" in sections:
                rows += _throughput_rows(kind, url, folder, args)
            if "load" in sections:
                load_rows += _load_rows(kind, url, folder, args)
    text = _report(args, rows, load_rows, time.perf_counter() - started)
    RESULTS.write_text(text, encoding="utf-8")
    print(text)
    shutil.rmtree(folder, ignore_errors=True)
    return 0


def _throughput_rows(kind: str, url: str, folder: Path, args: argparse.Namespace) -> list[str]:
    results: dict[str, list[dict[str, float]]] = {"plain": [], "launcher": []}
    for repeat in range(args.repeats):
        for arm, run in (("plain", run_plain), ("launcher", run_launcher)):
            name = f"{kind}-{arm}-{repeat}"
            load = os.getloadavg()[0]
            wall = run(url, name, folder, args.workers, args.trials_per_worker)
            results[arm].append({**measure(url, name, folder, wall), "load": load})
            print(kind, arm, repeat, results[arm][-1], file=sys.stderr)
    rows = []
    for arm, runs in results.items():
        rows.append(
            f"| {kind} | {arm} | "
            + " / ".join(f"{r['trials']:.0f}" for r in runs)
            + " | "
            + " / ".join(f"{r['wall_rate']:.1f}" for r in runs)
            + f" (median {statistics.median(r['wall_rate'] for r in runs):.1f}) | "
            + " / ".join(f"{r['span_rate']:.1f}" for r in runs)
            + f" (median {statistics.median(r['span_rate'] for r in runs):.1f}) | "
            + f"{sum(r['twice'] for r in runs):.0f} | "
            + " / ".join(f"{r['load']:.1f}" for r in runs)
            + " |"
        )
    ratio = [
        launcher["span_rate"] / plain["span_rate"]
        for plain, launcher in zip(results["plain"], results["launcher"])
    ]
    rows.append(
        f"| {kind} | launcher / plain (span) | | | "
        + " / ".join(f"{r:.2f}" for r in ratio)
        + f" (median {statistics.median(ratio):.2f}) | | |"
    )
    return rows


def _load_rows(kind: str, url: str, folder: Path, args: argparse.Namespace) -> list[str]:
    rows = []
    with busy(args.busy):
        for workers in (int(w) for w in args.load_workers.split(",")):
            for arm, kill, kills in (("load", 0.0, 0), ("faults", 0.15, args.fault_kills)):
                name = f"{kind}-{arm}-{workers}"
                r = run_enqueued(
                    url, name, folder, workers, args.load_per_worker, kill=kill,
                    max_kills=kills, sleep=0.05, timeout=600,
                )  # fmt: skip
                print(kind, arm, workers, r, file=sys.stderr)
                rows.append(
                    f"| {kind} | {arm} | {workers} × {args.load_per_worker} | {r['kills']} | "
                    f"{r['complete']} | {r['lost']} | {r['duplicated']} | {r['live_failed']} | "
                    f"{r['hung']} | {r['tracebacks']} | {r['load']:.1f} / {r['load_end']:.1f} | "
                    f"{r['wall']:.0f} |"
                )
    return rows


def _report(args: argparse.Namespace, rows: list[str], load_rows: list[str], seconds: float) -> str:
    total = args.workers * args.trials_per_worker
    command = (
        f"python benchmarks/worker_throughput.py --workers {args.workers} --trials-per-worker "
        f"{args.trials_per_worker} --repeats {args.repeats} --kinds {args.kinds} "
        f"--load-workers {args.load_workers} --load-per-worker {args.load_per_worker} "
        f"--fault-kills {args.fault_kills} --busy {args.busy} --sections {args.sections}"
    )
    lines = [
        "# Worker launcher against plain `study.optimize`; the launcher under load and faults",
        "",
        f"Produced by `{command}`.",
        "",
    ]
    if rows:
        lines += [
            "## Throughput",
            "",
            f"{args.workers} processes, {total} trials per run (plain: {args.trials_per_worker} "
            f"per process; launcher: a total of {total}), a `TransferSampler` over the synthetic "
            "ladder with `RandomSampler(seed=0)`, an objective that costs nothing, "
            "`make_storage(url, heartbeat_interval=10)` for both. *Wall*: complete trials / "
            "seconds from starting the processes to the last exit; *span*: complete trials / "
            "seconds from the first trial's start to the last one's end. *Run twice*: trial "
            "numbers two processes both ran. *Load*: the machine's 1-minute load average when the "
            "run started.",
            "",
            "| storage | arm | complete trials per run | wall, trials/s | span, trials/s | "
            "run twice | load |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            NOTE,
            "",
        ]
    if load_rows:
        lines += [
            "## Load and faults",
            "",
            "Issue 28's scenario: the launcher on enqueued trials (each with user attribute "
            "`job`), `make_storage` with a heartbeat every second and a grace period of two, an "
            f"objective of 0.05 s, {args.busy} CPU-bound processes running beside it on purpose. "
            "*load*: no worker killed. *faults*: a worker kills itself (SIGKILL) with probability "
            "0.15 before or after its objective's work, at most the kills shown. *Lost*: jobs "
            "never completed; *duplicated*: completions of a job beyond its first; *live failed*: "
            "FAIL trials beyond the kills (a live worker's trial taken for dead); *hung*: the "
            "launcher ran into its 600 s timeout or left a trial RUNNING; *tracebacks*: in the "
            "workers' logs. *Load*: 1-minute load average at start / end.",
            "",
            "| storage | arm | workers × jobs | kills | complete | lost | duplicated | "
            "live failed | hung | tracebacks | load | wall, s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *load_rows,
            "",
            BEFORE,
            "",
        ]
    lines += [
        f"Python {platform.python_version()}, Optuna {optuna.__version__}, "
        f"{os.cpu_count()} CPU cores ({platform.machine()}; shared with other work when this was "
        f"run, so compare the arms within a table, not across machines); {seconds:.0f} s in all.",
        "",
    ]
    return "\n".join(lines)


@contextmanager
def _given(url: str | None) -> Iterator[str | None]:
    yield url


if __name__ == "__main__":
    sys.exit(main())

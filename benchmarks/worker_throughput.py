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

from transfersearch.integrations.optuna import launch_workers, make_storage

RESULTS = Path(__file__).resolve().parent / "results" / "worker_throughput.md"
#: What a profile of one worker against one plain process showed (cProfile, 150 trials, SQLite),
#: and what was changed; printed under the table.
NOTE = (
    "Where the launcher's extra time went (cProfile of one worker beside one plain process on "
    "SQLite, before the changes): three `worker.*` user attributes written with a commit each "
    "(~3 of ~20 commits a trial), a read of the trial's system attributes for the GPU lease on "
    "CPU workers too, a read of every trial before each trial (the budget check) and another "
    "for dead workers' silent trials. Now: a trial's attributes go in one transaction (the "
    "worker's three; the sampler's rung, scale and transfer attributes, which plain `optimize` "
    "with `TransferSampler` shares), the rung is read only for a GPU lease, the silent-trial "
    "check runs once per poll interval, and the budget check is one count per state under the "
    "study lock (which also makes the total exact: 0 overshoot). What stays: the launcher "
    "imports the objective and creates the study before its workers start (in *wall*, not in "
    "*span*), one commit for the worker attributes, and the lock around creating a trial."
)

OBJECTIVE = textwrap.dedent(
    """
    import os
    import optuna
    from transfersearch import synthetic
    from transfersearch.integrations.optuna import TransferSampler

    sampler = TransferSampler(
        synthetic.make_space(), synthetic.LADDER,
        base_sampler=optuna.samplers.RandomSampler(seed=0), trials_per_rung=[400] * 4,
    )
    LOG = os.environ.get("BENCH_LOG")  # set for the processes that run trials


    def objective(trial):
        scale, hp = sampler.suggest(trial)
        with open(f"{LOG}-{os.getpid()}", "a") as f:
            f.write(f"{trial.number}\\n")
        return 1.0 + synthetic.regret(scale, hp.coordinates)
    """
)

PLAIN = textwrap.dedent(
    """
    import sys
    import optuna
    from transfersearch.integrations.optuna import make_storage

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
    ran = [int(n) for f in folder.glob(f"ran-{name}-*") for n in f.read_text().split()]
    twice = sum(c - 1 for c in collections.Counter(ran).values() if c > 1)
    return {
        "trials": len(complete),
        "all": len(study.trials),
        "wall_rate": len(complete) / wall,
        "span_rate": len(complete) / span,
        "twice": twice,
    }


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
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    folder = Path(tempfile.mkdtemp(prefix="worker-throughput-"))
    (folder / "bench_objective.py").write_text(OBJECTIVE)
    os.chdir(folder)  # the launcher and its workers import bench_objective from here
    sys.path.insert(0, str(folder))
    started = time.perf_counter()
    rows: list[str] = []
    kinds = args.kinds.split(",")
    with (
        postgres_cluster()
        if "postgresql" in kinds and not args.postgres
        else _given(args.postgres) as pg_url
    ):
        for kind in kinds:
            url = f"sqlite:///{folder / 'bench.db'}" if kind == "sqlite" else pg_url
            if url is None:
                continue
            results: dict[str, list[dict[str, float]]] = {"plain": [], "launcher": []}
            for repeat in range(args.repeats):
                for arm, run in (("plain", run_plain), ("launcher", run_launcher)):
                    name = f"{kind}-{arm}-{repeat}"
                    wall = run(url, name, folder, args.workers, args.trials_per_worker)
                    results[arm].append(measure(url, name, folder, wall))
                    print(kind, arm, repeat, results[arm][-1], file=sys.stderr)
            for arm, runs in results.items():
                rows.append(
                    f"| {kind} | {arm} | "
                    + " / ".join(f"{r['trials']:.0f}" for r in runs)
                    + " | "
                    + " / ".join(f"{r['wall_rate']:.1f}" for r in runs)
                    + f" (median {statistics.median(r['wall_rate'] for r in runs):.1f}) | "
                    + " / ".join(f"{r['span_rate']:.1f}" for r in runs)
                    + f" (median {statistics.median(r['span_rate'] for r in runs):.1f}) | "
                    + f"{sum(r['twice'] for r in runs):.0f} |"
                )
    total = args.workers * args.trials_per_worker
    text = "\n".join(
        [
            "# Worker launcher against plain `study.optimize`: trials per second",
            "",
            f"Produced by `python benchmarks/worker_throughput.py --workers {args.workers} "
            f"--trials-per-worker {args.trials_per_worker} --repeats {args.repeats}`. "
            f"{args.workers} processes, {total} trials per run (plain: {args.trials_per_worker} "
            f"per process; launcher: a total of {total}), a `TransferSampler` over the synthetic "
            "ladder with `RandomSampler(seed=0)`, an objective that costs nothing, "
            "`make_storage(url, heartbeat_interval=10)` for both. *Wall*: complete trials / "
            "seconds from starting the processes to the last exit; *span*: complete trials / "
            "seconds from the first trial's start to the last one's end. *Run twice*: trial "
            "numbers two processes both ran.",
            "",
            "| storage | arm | complete trials per run | wall, trials/s | span, trials/s | "
            "run twice |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            NOTE,
            "",
            f"Python {platform.python_version()}, Optuna {optuna.__version__}, "
            f"{os.cpu_count()} CPU cores ({platform.machine()}; shared with other work when "
            f"this was run, so compare the arms within a table, not across machines); "
            f"{time.perf_counter() - started:.0f} s in all.",
            "",
        ]
    )
    RESULTS.write_text(text, encoding="utf-8")
    print(text)
    shutil.rmtree(folder, ignore_errors=True)
    return 0


@contextmanager
def _given(url: str | None) -> Iterator[str | None]:
    yield url


if __name__ == "__main__":
    sys.exit(main())

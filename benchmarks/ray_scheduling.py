"""Ray Tune GPU scheduling over a three-rung ladder: which trials ran together, on what share.

``TransferSearch.resources(gpu=0.25)`` (``max_gpu=1``) asks, per rung, for ``cost / cost of the
largest rung`` of a GPU, at least 0.25: with widths 256, 1024 and 4096 (cost grows as width²) the
two smaller rungs ask for a quarter of a GPU and the largest for a whole one. One ``Tuner.fit``
runs ``--trials-per-rung`` trials on each rung (all of them allowed at once,
``max_concurrent_trials``); each trial trains a small MLP (as ``ray_packing.py``) and reports its
rung, the resources Ray assigned it, ``ray.get_gpu_ids()``, ``CUDA_VISIBLE_DEVICES``, the GPU
share Ray had free when it started, and wall-clock start and end. From those the script checks
that the whole-GPU rung ran alone, that the shares running at any instant never exceeded the GPUs
there are, and how many trials of each rung ran at once.

With no CUDA the run still schedules: Ray is started with one *declared* GPU (``num_gpus=1``) and
the trials train on CPU, at ``cpu=0.5`` by default so that four quarter-GPU trials fit two cores.
Writes ``benchmarks/results/ray_scheduling.md`` (``--out`` another file)::

    python benchmarks/ray_scheduling.py [--widths 256 1024 4096] [--trials-per-rung 4] \
        [--steps 200] [--large-steps 10]
    python benchmarks/ray_scheduling.py --steps 1000 --large-steps 3000 \
        --out benchmarks/results/ray_scheduling.gpu.md      # on a GPU machine
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
import ray_packing
import torch
from ray import cloudpickle, tune

import transfersearch as ts
from transfersearch.integrations.ray import TransferSearch, hyperparameters

# the trainable calls ray_packing.train_mlp: Ray's workers get it by value (benchmarks/ is on
# the driver's path, not theirs)
cloudpickle.register_pickle_by_value(ray_packing)
train_mlp = ray_packing.train_mlp

RESULTS = Path(__file__).resolve().parent / "results" / "ray_scheduling.md"
BASE = ts.Scale(width=256, dataset_size=4096, batch_size=64)
#: Two instants closer than this count as one (an end and a start at the same instant: no overlap).
EPS = 1e-6
#: One trial's reported figures, with its rung, request and start/end from the fit's start.
Record = dict[str, Any]


def say(*parts: Any) -> None:
    """Print at once (a killed run still shows what it had)."""
    print(*parts, flush=True)


def train_fn(config: dict[str, Any]) -> None:
    """Train the rung's MLP on the trial's device; report what Ray gave the trial and when."""
    started = time.time()
    scale, hp = hyperparameters(config)
    assigned = ray.get_runtime_context().get_assigned_resources()  # type: ignore[no-untyped-call,unused-ignore]
    free_gpu = ray.available_resources().get(  # type: ignore[no-untyped-call,unused-ignore]
        "GPU", 0.0
    )
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if not cuda:
        torch.set_num_threads(max(1, int(assigned.get("CPU", 1))))
    top = int(config["rung"]) == int(config["top_rung"])
    steps = int(config["large_steps"] if top else config["steps"])
    width, batch = int(scale["width"]), int(scale["batch_size"])
    loss, train_s = train_mlp(width, batch, steps, hp, device)
    tune.report(
        {
            "loss": loss,
            "train_s": train_s,
            "steps": steps,
            "width": width,
            "assigned_gpu": float(assigned.get("GPU", 0.0)),
            "assigned_cpu": float(assigned.get("CPU", 0.0)),
            "free_gpu_at_start": float(free_gpu),
            "gpu_ids": ",".join(str(g) for g in ray.get_gpu_ids()),
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES") or "-",
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "t_start": started,
            "t_end": time.time(),
        }
    )


class Progress(tune.Callback):
    """Print each trial's line as its result arrives."""

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: Record, **info: Any
    ) -> None:
        say(
            f"trial {trial.trial_id}: rung {trial.config.get('rung')} width {result.get('width')}"
            f" GPU={result.get('assigned_gpu'):g} ids=[{result.get('gpu_ids')}]"
            f" CUDA_VISIBLE_DEVICES={result.get('visible')} train {result.get('train_s'):.2f} s"
            f" loss {result.get('loss'):.4g}"
        )


def fit(args: argparse.Namespace, cpu: float, storage: str) -> tuple[list[Record], float, int]:
    """Run the ladder through one ``Tuner.fit``; return a record per trial, the wall seconds and
    the number of errored trials."""
    space = ts.TransferSpace(
        BASE,
        {"base_lr": ts.Float(1e-4, 1e-2, log=True), "tau_epoch": ts.Float(0.1, 10.0, log=True)},
    )
    ladder = [BASE.replace(width=w) for w in args.widths]
    k = args.trials_per_rung
    search = TransferSearch(space, ladder, metric="loss", mode="min", trials_per_rung=k)
    resources = search.resources(gpu=0.25, cpu=cpu)  # max_gpu=1: the largest rung, a whole GPU
    say(f"resources: {resources!r}")
    trials = k * len(ladder)
    tuner = tune.Tuner(
        tune.with_resources(train_fn, resources=resources),
        param_space={
            "steps": args.steps,
            "large_steps": args.large_steps,
            "top_rung": len(ladder) - 1,
        },
        tune_config=tune.TuneConfig(
            search_alg=search,
            num_samples=trials,
            max_concurrent_trials=args.max_concurrent or trials,
            reuse_actors=args.reuse_actors,
        ),
        run_config=tune.RunConfig(
            storage_path=storage, name="ray_scheduling", verbose=0, callbacks=[Progress()]
        ),
    )
    start = time.time()
    grid = tuner.fit()
    wall = time.time() - start
    records: list[Record] = []
    for i in range(len(grid)):
        result = grid[i]
        metrics, config = result.metrics or {}, result.config or {}
        if result.error is not None or "t_start" not in metrics:
            continue
        record = dict(metrics)
        record["rung"] = int(config["rung"])
        record["request"] = resources.request(config)
        record["start"] = record["t_start"] - start
        record["end"] = record["t_end"] - start
        records.append(record)
    records.sort(key=lambda r: r["start"])
    return records, wall, len(grid.errors)


def sweep(intervals: Sequence[tuple[float, float, float]]) -> float:
    """The largest sum of weights of intervals ``(start, end, weight)`` open at one instant
    (an interval ending where another starts does not overlap it)."""
    events = sorted(
        [(s, 1, w) for s, _e, w in intervals] + [(e - EPS, 0, -w) for _s, e, w in intervals]
    )
    level = peak = 0.0
    for _t, _kind, weight in events:
        level += weight
        peak = max(peak, level)
    return peak


def overlaps(a: Record, b: Record) -> bool:
    """Whether two trials' [start, end] intervals share an instant."""
    return bool(a["start"] < b["end"] - EPS and b["start"] < a["end"] - EPS)


def phases(records: Sequence[Record]) -> list[str]:
    """The timeline as segments between events: which rungs ran, and the GPU share in use."""
    instants = sorted({r["start"] for r in records} | {r["end"] for r in records})
    lines = []
    for left, right in itertools.pairwise(instants):
        middle = (left + right) / 2
        running = [r for r in records if r["start"] < middle < r["end"]]
        if not running:
            lines.append(f"+{left:.1f}–{right:.1f} s: none running")
            continue
        rungs = sorted({r["rung"] for r in running})
        parts = [f"r{g}×{sum(r['rung'] == g for r in running)}" for g in rungs]
        share = sum(r["request"].get("GPU", 0.0) for r in running)
        lines.append(f"+{left:.1f}–{right:.1f} s: {' '.join(parts)} (GPU {share:g})")
    return lines


def rung_rows(records: Sequence[Record], args: argparse.Namespace) -> list[str]:
    """One table row per rung: trials, shares, training time, most running at once."""
    rows = []
    top = len(args.widths) - 1
    for rung, width in enumerate(args.widths):
        mine = [r for r in records if r["rung"] == rung]
        if not mine:
            rows.append(f"| {rung} | {width} | 0 | | | | | | |")
            continue
        request = ", ".join(sorted({_fmt(r["request"]) for r in mine}))
        assigned = ", ".join(sorted({f"{r['assigned_gpu']:g}" for r in mine}))
        steps = args.large_steps if rung == top else args.steps
        at_once = sweep([(r["start"], r["end"], 1.0) for r in mine])
        row = (
            f"| {rung} | {width} | {steps} | {len(mine)} | {request} | {assigned} | "
            f"{sum(r['train_s'] for r in mine) / len(mine):.2f} | {at_once:.0f} | "
            f"+{min(r['start'] for r in mine):.1f}–{max(r['end'] for r in mine):.1f} |"
        )
        say(row)
        rows.append(row)
    return rows


def _fmt(request: dict[str, float]) -> str:
    return " ".join(f"{k}={v:g}" for k, v in sorted(request.items()))


def trial_rows(records: Sequence[Record]) -> list[str]:
    """One table row per trial, in start order."""
    rows = []
    for r in records:
        row = (
            f"| +{r['start']:.1f} | +{r['end']:.1f} | {r['rung']} | {r['width']} | "
            f"{_fmt(r['request'])} | {r['assigned_gpu']:g} | {r['free_gpu_at_start']:g} | "
            f"{r['gpu_ids'] or '-'} | {r['visible']} | {r['device']} | {r['steps']} | "
            f"{r['train_s']:.2f} | {r['loss']:.4g} |"
        )
        say(row)
        rows.append(row)
    return rows


def checks(records: Sequence[Record], gpus: float, top: int) -> list[str]:
    """The scheduling verdicts: the whole-GPU rung alone, the shares within the GPUs there are."""
    large = [r for r in records if r["rung"] == top]
    clashes = [
        (a, b) for a in large for b in records if a is not b and overlaps(a, b)
    ]  # a pair of two large trials is listed twice
    peak = sweep([(r["start"], r["end"], r["request"].get("GPU", 0.0)) for r in records])
    free = [r["free_gpu_at_start"] for r in large]
    lines = [
        f"- Largest rung (rung {top}) overlapping another trial: "
        + ("**none**" if not clashes else f"**{len(clashes)} overlapping pairs** (unexpected)")
        + f" ({len(large)} trials; GPU share Ray had free when each started: "
        + ", ".join(f"{f:g}" for f in free)
        + ").",
        f"- Most GPU share in use at one instant (sum of requests of trials running then): "
        f"**{peak:g}** of {gpus:g} GPU(s) — "
        + ("within the GPUs there are." if peak <= gpus + EPS else "**over** (unexpected)."),
        f"- Most trials running at once, any rung: "
        f"{sweep([(r['start'], r['end'], 1.0) for r in records]):.0f}.",
        f"- Devices seen: CUDA_VISIBLE_DEVICES ∈ {{{', '.join(sorted({r['visible'] for r in records}))}}}, "
        f"ray.get_gpu_ids() ∈ {{{', '.join(sorted({r['gpu_ids'] or '-' for r in records}))}}}.",
    ]
    for line in lines:
        say(line)
    return lines


def command(args: argparse.Namespace) -> str:
    """The options of this run as a command line (``--out`` named relative to the repository)."""
    parts = [
        f"--widths {' '.join(str(w) for w in args.widths)} --trials-per-rung "
        f"{args.trials_per_rung} --steps {args.steps} --large-steps {args.large_steps}"
    ]
    if args.cpu is not None:
        parts.append(f"--cpu {args.cpu:g}")
    if args.max_concurrent:
        parts.append(f"--max-concurrent {args.max_concurrent}")
    if args.reuse_actors:
        parts.append("--reuse-actors")
    if Path(args.out).name != RESULTS.name:
        parts.append(f"--out benchmarks/results/{Path(args.out).name}")
    return " ".join(parts)


def header(args: argparse.Namespace, *, cpus: float, gpus: float, cpu: float) -> list[str]:
    """The title and the line naming the command, the versions and the machine."""
    cuda = torch.cuda.device_count()
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(cuda)) if cuda else ""
    machine = (
        f"GPUs: {gpus:g} ({names})" if cuda else f"GPUs: {gpus:g} (declared GPU, trained on CPU)"
    )
    return [
        "# Ray Tune GPU scheduling across a three-rung ladder",
        "",
        f"Measured {datetime.date.today()} by `python benchmarks/ray_scheduling.py "
        f"{command(args)}`; Ray {ray.__version__}, torch {torch.__version__}, Python "
        f"{platform.python_version()}; {cpus:g} CPUs, {machine}; `cpu={cpu:g}` per trial.",
        "",
        "`TransferSearch(space, ladder, trials_per_rung=K)` with `resources(gpu=0.25)` (`max_gpu=1`)"
        ": a rung asks for `cost / cost of the largest rung` of a GPU, at least 0.25, so the "
        "largest asks for a whole one. One `Tuner.fit`, all trials allowed at once "
        "(`max_concurrent_trials`). Each trial: MLP 64→width→width→1, AdamW, batch 64, one "
        "`tune.report`. Times are seconds from the start of `Tuner.fit`, measured *inside* the "
        "trial (function entry to its report): a trial holds its request a little longer (worker "
        "start before, teardown after), so an overlap found here is real and one not found is "
        "strong but not complete evidence; `GPU free at start` is `ray.available_resources()` "
        "read by the trial as it began (Ray's own accounting: reserved but not yet started "
        "trials count as in use). `loss` only shows that a trial trained: the space's decoupled "
        "weight decay (up to ~10⁴ at short `tau_epoch`) collapses some models to one constant.",
        "",
    ]


def write(
    records: list[Record], args: argparse.Namespace, *, wall: float, errors: int, **machine: float
) -> None:
    """Print and save the markdown: per-rung table, checks, per-trial timeline."""
    lines = header(args, **machine)
    lines += [
        "| rung | width | steps | trials | request per trial | GPU assigned | train s (mean) | "
        "most at once | span s |",
        "|---:|---:|---:|---:|---|---|---:|---:|---|",
        *rung_rows(records, args),
        "",
        f"Wall time of `Tuner.fit`: **{wall:.1f} s** for {len(records)} trials ({errors} errored): "
        f"**{len(records) / wall * 3600:.0f} trials / hour**.",
        "",
        *checks(records, machine["gpus"], len(args.widths) - 1),
        "",
        "Timeline (segments between trial starts and ends; `rN×k`: k trials of rung N running):",
        "",
        *(f"    {line}" for line in phases(records)),
        "",
        "| start s | end s | rung | width | request | GPU assigned | GPU free at start | "
        "ray.get_gpu_ids() | CUDA_VISIBLE_DEVICES | device | steps | train s | loss |",
        "|---:|---:|---:|---:|---|---:|---:|---|---|---|---:|---:|---:|",
        *trial_rows(records),
        "",
    ]
    text = "\n".join(lines)
    say(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    say(f"wrote {os.path.relpath(out)}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--trials-per-rung", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200, help="steps of the smaller rungs")
    parser.add_argument("--large-steps", type=int, default=10, help="steps of the largest rung")
    parser.add_argument(
        "--cpu", type=float, default=None, help="CPUs per trial (default 1; 0.5 without CUDA)"
    )
    parser.add_argument("--max-concurrent", type=int, default=0, help="0: all trials")
    parser.add_argument(
        "--reuse-actors", action="store_true", help="Tune keeps a trial's worker for the next"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if sorted(args.widths) != args.widths or len(set(args.widths)) != len(args.widths):
        parser.error("--widths must increase")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Start Ray (one declared GPU without CUDA), run the ladder, write the tables."""
    args = parse(argv)
    if torch.cuda.is_available():
        ray.init(include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    cluster = ray.cluster_resources()  # type: ignore[no-untyped-call,unused-ignore]
    cpus, gpus = float(cluster.get("CPU", 0)), float(cluster.get("GPU", 0))
    cpu = args.cpu if args.cpu is not None else (1.0 if torch.cuda.is_available() else 0.5)
    say(f"Ray {ray.__version__}: {cpus:g} CPUs, {gpus:g} GPUs; cpu={cpu:g} per trial")
    with tempfile.TemporaryDirectory() as storage:
        records, wall, errors = fit(args, cpu, storage)
    ray.shutdown()
    write(records, args, wall=wall, errors=errors, cpus=cpus, gpus=gpus, cpu=cpu)


if __name__ == "__main__":
    main()

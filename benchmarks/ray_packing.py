"""Proxies per hour with Ray Tune: small proxies packed onto shared GPUs vs one trial per GPU.

Each trial trains a small MLP (AdamW, the per-group hyperparameters :class:`TransferSearch`
suggests) for a fixed number of steps. Configurations, all driven by ``TransferSearch`` and its
``resources()``:

* with GPUs: ``gpu=1`` (one proxy per GPU) vs ``gpu=0.5`` and ``gpu=0.25`` (2 or 4 per GPU);
* always: ``noop`` (a trainable that reports at once: Tune's scheduling overhead per trial) and
  the training loop on CPUs at ``cpu=1`` and at ``cpu=0.5`` (two trials per core).

Writes ``benchmarks/results/ray_packing.md`` (``--out`` another file). On a GPU machine,
``--gpu-only`` skips the CPU rows and ``--large-width``/``--large-steps`` add a second, larger proxy
(where the GPU, not Tune's per-trial cost, bounds the rate); the GPU table is
``benchmarks/results/ray_packing.gpu.md``:

    python benchmarks/ray_packing.py [--trials 12] [--steps 150] [--width 256]
    python benchmarks/ray_packing.py --gpu-only --trials 16 --large-width 2048 --large-steps 2000 \
        --out benchmarks/results/ray_packing.gpu.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
import torch
from ray import tune

import transfersearch as ts
from transfersearch.integrations.ray import TransferSearch, hyperparameters

RESULTS = Path(__file__).resolve().parent / "results" / "ray_packing.md"
BASE = ts.Scale(width=256, dataset_size=4096, batch_size=64)


def noop_fn(config: dict) -> None:
    """Report at once: what is left is Tune's per-trial cost (actor start, bookkeeping)."""
    hyperparameters(config)
    tune.report({"loss": 1.0, "train_s": 0.0})


def train_mlp(width: int, batch: int, steps: int, hp: Any, device: str) -> tuple[float, float]:
    """Train MLP 64→width→width→1 with AdamW at ``hp``'s values for ``steps`` steps of ``batch``
    on ``device``; return the last loss and the training seconds (after the GPU finished)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, 1),
    ).to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=hp.lr, weight_decay=hp.weight_decay, betas=hp.betas, eps=hp.eps
    )
    inputs = torch.randn(4096, 64, device=device)
    targets = torch.sin(inputs.sum(dim=1, keepdim=True))
    start = time.perf_counter()
    loss = torch.zeros(())
    for _step in range(steps):
        index = torch.randint(0, 4096, (batch,), device=device)
        loss = torch.nn.functional.mse_loss(model(inputs[index]), targets[index])
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call,unused-ignore]
        optimizer.step()
    if device == "cuda":
        torch.cuda.synchronize()
    return float(loss.item()), time.perf_counter() - start


def train_fn(config: dict) -> None:
    """A fixed-length MLP run on the trial's device (Ray sets CUDA_VISIBLE_DEVICES)."""
    scale, hp = hyperparameters(config)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    width, batch = int(config.get("width", scale["width"])), int(scale["batch_size"])
    loss, seconds = train_mlp(width, batch, int(config["steps"]), hp, device)
    tune.report({"loss": loss, "train_s": seconds})


def run(
    name: str,
    trainable,
    *,
    trials: int,
    steps: int,
    width: int,
    gpu: float,
    cpu: float,
    storage: str,
    reuse: bool = False,
    large: bool = False,
) -> dict[str, float | str]:
    """Run ``trials`` proxies under one resource rule; return throughput figures."""
    space = ts.TransferSpace(
        BASE,
        {"base_lr": ts.Float(1e-4, 1e-2, log=True), "tau_epoch": ts.Float(0.1, 10.0, log=True)},
    )
    ladder = [BASE.replace(width=width)]
    search = TransferSearch(space, ladder, metric="loss", mode="min", trials_per_rung=trials)
    # a one-rung ladder's rung is its own largest, which gets max_gpu: without max_gpu=gpu every
    # row asked for a whole GPU and nothing packed (the H200 run of 2026-11-26, ray_packing.md)
    shares = {"max_gpu": gpu} if gpu > 0 else {}  # CPU rows: no GPU to share
    resources = search.resources(gpu=gpu, cpu=cpu, **shares)
    request = resources.request({"scale": ladder[0].to_dict()})
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources=resources),
        param_space={"steps": steps, "width": width},
        # as the README's Tune example: with a custom searcher and no max_concurrent_trials,
        # Ray 2.60's Tune keeps one trial pending at a time, so packed trials start one by one
        tune_config=tune.TuneConfig(
            search_alg=search,
            num_samples=trials,
            reuse_actors=reuse,
            max_concurrent_trials=trials,
        ),
        run_config=tune.RunConfig(storage_path=storage, name=name, verbose=0),
    )
    start = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - start
    train = [r.metrics.get("train_s", float("nan")) for r in grid]
    return {
        "name": name,
        "proxy": f"width {width}, {steps} steps",
        "request": ", ".join(f"{k}={v:g}" for k, v in request.items()),
        "trials": trials,
        "errors": len(grid.errors),
        "wall_s": wall,
        "per_trial_s": wall / trials,
        "train_s": sum(train) / len(train),
        "per_hour": trials / wall * 3600,
    }


def cpu_rows(storage: str, common: dict) -> list[dict]:
    """Tune's overhead (a no-op trainable) and the proxy on CPUs, packed and with reused actors."""
    return [
        run("noop (scheduling overhead)", noop_fn, gpu=0, cpu=1, storage=storage, **common),
        run("train, CPU, cpu=1", train_fn, gpu=0, cpu=1, storage=storage, **common),
        run(
            "train, CPU, cpu=0.5 (2 per core)", train_fn, gpu=0, cpu=0.5, storage=storage, **common
        ),
        run(
            "train, CPU, cpu=1, reuse_actors=True",
            train_fn,
            gpu=0,
            cpu=1,
            storage=storage,
            reuse=True,
            **common,
        ),
    ]


def gpu_rows(storage: str, common: dict, *, gpus: int, cpus: float) -> list[dict]:
    """One proxy per GPU against 2 and 4 sharing one (and 4 with reused actors)."""
    rows = []
    for share, reuse in ((1.0, False), (0.5, False), (0.25, False), (0.25, True)):
        label = "one per GPU" if share == 1 else f"{round(1 / share)} per GPU"
        label += ", reuse_actors=True" if reuse else ""
        row = run(
            f"train, GPU, gpu={share:g} ({label})",
            train_fn,
            gpu=share,
            cpu=min(1.0, cpus / (gpus / share)),
            storage=storage,
            reuse=reuse,
            **common,
        )
        row["vs_one"] = row["per_hour"] / rows[0]["per_hour"] if rows else 1.0
        rows.append(row)
    return rows


def main() -> None:
    """Measure, print and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--gpu-only", action="store_true", help="skip the CPU rows")
    parser.add_argument("--large-width", type=int, default=0, help="a second, larger proxy")
    parser.add_argument("--large-steps", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    gpus = torch.cuda.device_count()
    ray.init(include_dashboard=False, log_to_driver=False)
    cpus = ray.cluster_resources().get("CPU", 0)
    rows = []
    common = dict(trials=args.trials, steps=args.steps, width=args.width)
    with tempfile.TemporaryDirectory() as storage:
        if not args.gpu_only:
            rows += cpu_rows(storage, common)
        if gpus:
            sizes = [(args.width, args.steps)]
            if args.large_width:
                sizes.append((args.large_width, args.large_steps or args.steps))
            for width, steps in sizes:
                size = dict(common, width=width, steps=steps)
                rows += gpu_rows(storage, size, gpus=gpus, cpus=cpus)
    ray.shutdown()
    write(rows, gpus=gpus, cpus=cpus, args=args)


def command(args: argparse.Namespace) -> str:
    """The options of this run as a command line (``--out`` named relative to the repository)."""
    parts = [f"--trials {args.trials} --steps {args.steps} --width {args.width}"]
    if args.gpu_only:
        parts.append("--gpu-only")
    if args.large_width:
        parts.append(f"--large-width {args.large_width} --large-steps {args.large_steps}")
    if Path(args.out).name != RESULTS.name:
        parts.append(f"--out benchmarks/results/{Path(args.out).name}")
    return " ".join(parts)


def write(rows: list[dict], *, gpus: int, cpus: float, args: argparse.Namespace) -> None:
    """Print and save the markdown table with the machine and an honest note."""
    device = torch.cuda.get_device_name(0) if gpus else "none"
    lines = [
        "# Ray Tune proxy packing: proxies per hour",
        "",
        f"Measured {datetime.date.today()} by `python benchmarks/ray_packing.py "
        f"{command(args)}`; Ray {ray.__version__}, torch "
        f"{torch.__version__}, Python {platform.python_version()}; {cpus:g} CPUs, GPUs: {gpus} "
        f"({device}).",
        "",
        "Each trial: MLP 64→width→width→1, AdamW, fixed steps at batch 64, one `tune.report`. "
        "`per trial` is wall time / trials (the whole Tuner.fit, trials overlapping as resources "
        "allow); `train` the mean in-trial training time; `noop` measures Tune's per-trial cost.",
        "",
        "| configuration | proxy | request per trial | trials | errors | wall s | s per trial | "
        "train s | proxies / hour | vs one per GPU |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['proxy']} | {row['request']} | {row['trials']} | "
            f"{row['errors']} | {row['wall_s']:.1f} | {row['per_trial_s']:.2f} | "
            f"{row['train_s']:.2f} | {row['per_hour']:.0f} | "
            + (f"{row['vs_one']:.2f}× |" if "vs_one" in row else "|")
        )
    if args.gpu_only:
        lines += [
            "",
            "`vs one per GPU`: proxies per hour relative to the same proxy at `gpu=1`. Each row "
            "is one `Tuner.fit` (one run; trials overlap as the GPU share allows).",
            "",
        ]
        return save("\n".join(lines), Path(args.out))
    lines += [
        "",
        "Reading: with proxies this small, a trial's wall time is mostly Tune's per-trial cost "
        "(a fresh worker process, importing torch) rather than training; `reuse_actors=True` "
        "keeps workers (and their imports) across trials with equal resource requests, which "
        "matters more than packing on CPU. On a 2-core machine the figures are noisy: two "
        "runs of the CPU training rows differed by up to 30%.",
        "",
    ]
    if not gpus:
        lines += [
            "**GPU figures await a GPU machine.** This run had no GPU, so it records only what a "
            "CPU machine can: Tune's scheduling overhead per trial and CPU throughput. The "
            "packed-vs-one-per-GPU comparison (`gpu=1` vs `gpu=0.5` / `0.25`) runs automatically "
            "when `torch.cuda.device_count() > 0`; the packing *logic* (two small proxies "
            "sharing one GPU id concurrently, whole GPUs for the largest rung) is checked on a "
            "cluster with declared GPUs in `tests/test_ray.py`.",
            "",
        ]
    save("\n".join(lines), Path(args.out))


def save(text: str, out: Path) -> None:
    """Print the table and write it to ``out``."""
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {os.path.relpath(out)}")


if __name__ == "__main__":
    main()

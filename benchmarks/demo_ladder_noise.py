"""Is the demo's ladder one the project's guidance would recommend? Seed noise vs signal per rung.

For each rung of a ladder (the demo's task, ``transfersearch_demo.task``), trains a base_lr × tau_epoch
grid with several training seeds (initialisation and data order) and reports:

- ``seed sd``: the standard deviation of the final validation loss across seeds, pooled over the grid;
- ``step``: the loss difference between the rung's best grid point (mean over seeds) and its
  nearest neighbour in the grid, the smallest difference the rung has to resolve to place its
  optimum within one grid step (a factor 3 in each coordinate);
- ``step / sd``: that difference in units of the seed noise (below ~2 a single run per
  configuration cannot tell the best point from its neighbour);
- ``paired sd``: the standard deviation across seeds of (neighbour − best) within one seed: the
  noise a sweep that trains every configuration with one seed (common random numbers, as the demo
  does) actually faces; ``step / paired sd`` the signal in its units;
- ``same best``: in how many seeds the single-seed grid argmin is the mean's argmin.

Writes ``benchmarks/results/demo_ladder_noise.md`` (or ``--out``).

Usage::

    python benchmarks/demo_ladder_noise.py [--widths 16,32,64] [--dataset-sizes 1024,4096]
        [--epochs 4] [--seeds 0,1,2,3] [--label "the demo's default ladder"]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch

from transfersearch import Scale
from transfersearch_demo import app as demo
from transfersearch_demo import task

RESULTS = Path(__file__).resolve().parent / "results" / "demo_ladder_noise.md"
GRID_LR = (0.005, 0.015, 0.045, 0.135)
GRID_TAU = (0.3, 1.0, 3.0)


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(",") if v)


def measure(
    widths: list[int],
    sizes: list[int],
    epochs: float,
    seeds: list[int],
    batch: int,
    grid_lr: tuple[float, ...] = GRID_LR,
    grid_tau: tuple[float, ...] = GRID_TAU,
) -> list[list[object]]:
    # one coordinate system for every ladder measured: base width 16, N 1024 (the demo's before
    # it dropped width 16), so that the tables stay comparable
    space = demo.build_space(replace(demo.MODES["default"], widths=(16,), dataset_sizes=(1024,)))
    corpus = task.load_corpus()
    rows: list[list[object]] = []
    for width, size in itertools.product(widths, sizes):
        scale = Scale(width=width, dataset_size=size, batch_size=batch)
        started = time.perf_counter()
        losses: dict[tuple[float, float], list[float]] = {}
        for lr, tau in itertools.product(grid_lr, grid_tau):
            hp = space.concretize({"base_lr": lr, "tau_epoch": tau}, scale)
            losses[(lr, tau)] = [
                task.train(scale, hp, epochs=epochs, device="cpu", seed=s, corpus=corpus).val_loss
                for s in seeds
            ]
        means = {k: statistics.fmean(v) for k, v in losses.items()}
        sd = statistics.fmean(statistics.stdev(v) for v in losses.values()) if len(seeds) > 1 else 0
        best = min(means, key=means.__getitem__)
        i, j = grid_lr.index(best[0]), grid_tau.index(best[1])
        neighbours = [
            (grid_lr[a], grid_tau[b])
            for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1))
            if 0 <= a < len(grid_lr) and 0 <= b < len(grid_tau)
        ]
        closest = min(neighbours, key=lambda n: means[n] - means[best])
        step = means[closest] - means[best]
        # under common random numbers (one seed for every config) what matters is the noise of
        # the difference: the same seed's loss at the neighbour minus at the best point
        diffs = [a - b for a, b in zip(losses[closest], losses[best], strict=True)]
        paired_sd = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
        same = sum(
            min(losses, key=lambda k, s=index: losses[k][s]) == best for index in range(len(seeds))
        )
        rows.append(
            [
                f"({width}, {size})",
                f"{means[best]:.4f}",
                f"base_lr {best[0]:g}, tau {best[1]:g}",
                f"{sd:.4f}",
                f"{step:.4f}",
                f"{step / sd:.1f}" if sd > 0 else "–",
                f"{paired_sd:.4f}",
                f"{step / paired_sd:.1f}" if paired_sd > 0 else "–",
                f"{same}/{len(seeds)}",
                f"{time.perf_counter() - started:.0f}",
            ]
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="16,32,64")
    parser.add_argument("--dataset-sizes", default="1024,4096")
    parser.add_argument("--epochs", type=float, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--grid-lr", default=",".join(f"{v:g}" for v in GRID_LR))
    parser.add_argument("--grid-tau", default=",".join(f"{v:g}" for v in GRID_TAU))
    parser.add_argument(
        "--val-size",
        type=int,
        default=task.VAL_SIZE,
        help=f"validation windows (default {task.VAL_SIZE}, the demo's)",
    )
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--append", action="store_true", help="add a section to --out")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.val_size != task.VAL_SIZE:  # a larger validation set: is the noise evaluation's?
        task.VAL_SIZE = args.val_size
        task.load_corpus.cache_clear()
    grid_lr, grid_tau = floats(args.grid_lr), floats(args.grid_tau)
    rows = measure(
        ints(args.widths),
        ints(args.dataset_sizes),
        args.epochs,
        ints(args.seeds),
        args.batch_size,
        grid_lr,
        grid_tau,
    )
    from transfersearch.report import format_table

    table = format_table(
        [
            "rung (width, N)",
            "best mean loss",
            "best grid point",
            "seed sd",
            "step",
            "step / sd",
            "paired sd",
            "step / paired sd",
            "same best",
            "s",
        ],
        rows,
    )
    section = "\n".join(
        [
            f"## {args.label or 'ladder'}: widths {args.widths} x dataset sizes "
            f"{args.dataset_sizes}, {args.epochs:g} epochs",
            "",
            f"Command: `python benchmarks/demo_ladder_noise.py --widths {args.widths} "
            f"--dataset-sizes {args.dataset_sizes} --epochs {args.epochs:g} --seeds {args.seeds} "
            f"--grid-lr {args.grid_lr} --grid-tau {args.grid_tau} --val-size {args.val_size}`",
            "",
            "```",
            table,
            "```",
            "",
        ]
    )
    head = "\n".join(
        [
            "# The demo's ladder: seed noise vs the loss differences a rung must resolve",
            "",
            "Training seeds as listed, CPU, one thread, coordinates of the default demo's space "
            "(µP, base width 16, N 1024, as before the demo dropped width 16). Columns: see the "
            "script's docstring.",
            "",
        ]
    )
    if args.append and args.out.is_file():
        args.out.write_text(args.out.read_text() + "\n" + section)
    else:
        args.out.write_text(head + "\n" + section)
    print(section)


if __name__ == "__main__":
    main()

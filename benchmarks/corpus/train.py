"""Train one corpus family's grid on its rungs and target; resumable; one row per run.

    python benchmarks/corpus/train.py --family mlp_width          # or --family all
    python benchmarks/corpus/train.py --list                      # families and their cost

Each finished run is appended to ``benchmarks/corpus/data/<family>.csv`` at once; a rerun skips
(rung, its sizes, base_lr, tau_epoch, seed) already there, so a killed job resumes where it stopped. One
CPU thread per process (run two families side by side on two cores). A diverged run is written
with an empty loss (NaN).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
import warnings
from pathlib import Path

from families import FAMILIES, MAX_SAMPLES, SEEDS, Family, Size
from tasks import train

import transfersearch as ts

DATA = Path(__file__).resolve().parent / "data"
COLUMNS = (
    "family", "role", "rung", "width", "depth", "dataset_size", "batch_size", "epochs", "params",
    "base_lr", "tau_epoch", "lr", "weight_decay", "seed", "loss", "steps", "seconds",
)  # fmt: skip


Key = tuple[str, int, int, int, int, float, float, int]


def _key(rung: str, size: Size, lr: float, tau: float, seed: int) -> Key:
    """A run's identity: where (rung and size: a family's sizes may change), what, which seed."""
    return (rung, size.width, size.depth, size.dataset_size, size.batch_size, lr, tau, seed)


def _done(path: Path) -> set[Key]:
    if not path.exists():
        return set()
    with path.open() as f:
        return {
            (r["rung"], int(r["width"]), int(r["depth"]), int(r["dataset_size"]),
             int(r["batch_size"]), float(r["base_lr"]), float(r["tau_epoch"]), int(r["seed"]))
            for r in csv.DictReader(f)
        }  # fmt: skip


def run_family(
    family: Family, seeds: tuple[int, ...] = SEEDS, part: tuple[int, int] = (0, 1)
) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"{family.name}.csv"
    done = _done(path)
    space = family.space()
    sizes: list[tuple[str, str, Size]] = [("proxy", str(i), s) for i, s in enumerate(family.rungs)]
    sizes.append(("target", "target", family.target))
    todo = [
        (role, rung, size, lr, tau, seed)
        for seed in seeds
        for role, rung, size in sizes
        for lr, tau in family.grid()
        if _key(rung, size, lr, tau, seed) not in done
    ]
    todo = todo[part[0] :: part[1]]
    print(f"{family.name}: {len(todo)} runs to go ({len(done)} done)", flush=True)
    new = not path.exists()
    started = time.perf_counter()
    with path.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(COLUMNS)
        for k, (role, rung, size, lr, tau, seed) in enumerate(todo, 1):
            scale = family.scale(size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ts.TransferSearchWarning)
                hp = space.concretize({"base_lr": lr, "tau_epoch": tau}, scale=scale)
            run = train(
                model=family.model,
                width=size.width,
                depth=size.depth,
                context=family.context,
                dataset_size=size.dataset_size,
                batch_size=size.batch_size,
                epochs=size.epochs,
                hp=hp,
                optimizer=family.optimizer,
                seed=seed,
                max_samples=MAX_SAMPLES,
            )
            hidden = hp.groups["hidden"]
            loss = "" if math.isnan(run.loss) else f"{run.loss:.6f}"
            writer.writerow(
                (family.name, role, rung, size.width, size.depth, size.dataset_size,
                 size.batch_size, size.epochs, int(scale["params"]), lr, tau,
                 f"{hidden['lr']:.6g}", f"{hidden['weight_decay']:.6g}", seed, loss, run.steps,
                 f"{run.seconds:.2f}")
            )  # fmt: skip
            f.flush()
            if k % 10 == 0 or k == len(todo):
                elapsed = time.perf_counter() - started
                print(f"  {family.name} {k}/{len(todo)} runs, {elapsed:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="a family name, or 'all'")
    parser.add_argument("--list", action="store_true", help="list the families and stop")
    parser.add_argument("--seed", type=int, action="append", help="only this seed")
    parser.add_argument(
        "--part", default="0/1", help="K/N: every N-th run to go from the K-th (N processes)"
    )
    args = parser.parse_args(argv)
    if args.list or not args.family:
        for fam in FAMILIES.values():
            top = max(fam.compute(s) for s in fam.rungs)
            print(
                f"{fam.name:20s} {fam.regime:11s} {fam.optimizer:5s} moves {fam.moves:22s} "
                f"target/top compute {fam.compute(fam.target) / top:.1f}x  {fam.description}"
            )
        return 0
    names = list(FAMILIES) if "all" in args.family else args.family
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        print(f"unknown family {unknown}; known: {', '.join(FAMILIES)}", file=sys.stderr)
        return 2
    for name in names:
        k, n = (int(v) for v in args.part.split("/"))
        run_family(FAMILIES[name], tuple(args.seed) if args.seed else SEEDS, (k, n))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Someone else's sweep, as a CSV in the Step Law format → the optimal (lr, batch size) at a larger run.

Step Law (Li et al. 2025, "Predictable Scale: Part I", github.com/step-law/steplaw) published its
grids as one row per run: model size ``N`` (total) and ``Na`` (active parameters), training tokens
``D``, learning rate ``lr``, batch size ``bs`` (sequences of ``seq_len`` tokens), and the final
``smooth loss``. This example reads such a CSV, holds out the largest ``D`` of every model shape,
fits how the optimal lr and bs move with (Na, D) on the rest, predicts them at each held-out scale
and scores the prediction on the held-out grid (the loss of the grid run nearest to the prediction,
in log lr × log bs, above the grid's best).

Without ``--csv`` it writes and reads a small synthetic CSV in that format, generated from Step
Law's own fitted formulas (η_opt = 1.79 N^−0.713 D^0.307, B_opt = 0.58 D^0.571 tokens) plus a
quadratic valley and noise, so the example runs anywhere in a second. Point ``--csv`` at the real
file (e.g. ``data/steplaw_moe_lr_bs_loss.csv`` from the Step Law repository) to use theirs.

Usage::

    python examples/steplaw_csv_extrapolate.py [--csv PATH] [--out synthetic.csv]
"""

from __future__ import annotations

import argparse
import csv
import math
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

import transfersearch as ts

COLUMNS = ["seq_len", "lr", "bs", "loss", "smooth loss", "N", "Na", "D", "moe_name"]
SEQ_LEN = 2048
LRS = [1.726e-4 * 2 ** (k / 2) for k in range(9)]
BATCHES = [32, 64, 128, 256, 512]


def write_synthetic_csv(path: Path, seed: int = 0) -> Path:
    """A small grid per (shape, D) in the Step Law CSV format, from Step Law's published laws."""
    rng = np.random.default_rng(seed)
    shapes = {"small": 1.9e8, "medium": 5.9e8, "large": 1.24e9}
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for name, active in shapes.items():
            for tokens in (2e9, 4e9, 8e9, 2e10):
                lr_opt = 1.79 * active**-0.713 * tokens**0.307
                bs_opt = 0.58 * tokens**0.571 / SEQ_LEN  # tokens -> sequences
                floor = 1.8 + 400.0 * active**-0.3 + 300.0 * tokens**-0.3
                for lr in LRS:
                    for bs in BATCHES:
                        d_lr, d_bs = math.log(lr / lr_opt), math.log(bs / bs_opt)
                        loss = floor + 0.012 * d_lr**2 + 0.006 * d_bs**2 + 0.002 * d_lr * d_bs
                        loss += float(rng.normal(0.0, 0.0015))
                        writer.writerow(
                            {
                                "seq_len": SEQ_LEN,
                                "lr": f"{lr:.4e}",
                                "bs": bs,
                                "loss": f"{loss + 0.04:.6f}",
                                "smooth loss": f"{loss:.6f}",
                                "N": f"{active * 4:.0f}",
                                "Na": f"{active:.0f}",
                                "D": f"{tokens:.0f}",
                                "moe_name": name,
                            }
                        )
    return path


def read_steplaw_csv(path: Path) -> dict[str, list[ts.Observation]]:
    """Observations per model shape: scale (params = Na, tokens = D), params (lr, bs), smooth loss."""
    by_shape: dict[str, list[ts.Observation]] = defaultdict(list)
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            value = row.get("smooth loss") or row.get("loss") or "nan"
            by_shape[row.get("moe_name", "all")].append(
                ts.Observation(
                    scale={"params": float(row["Na"]), "tokens": float(row["D"])},
                    params={"lr": float(row["lr"]), "bs": float(row["bs"])},
                    value=float(value),
                )
            )
    return dict(by_shape)


def nearest_grid_regret(held: list[ts.Observation], predicted: dict[str, float]) -> float:
    """Relative loss of the held-out grid run nearest to the prediction, over the grid's best."""
    usable = [o for o in held if o.usable]
    best = min(o.value for o in usable)
    nearest = min(
        usable,
        key=lambda o: (
            math.log(o.params["lr"] / predicted["lr"]) ** 2
            + math.log(o.params["bs"] / predicted["bs"]) ** 2
        ),
    )
    return nearest.value / best - 1.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--csv",
        type=Path,
        default=None,
        help="a Step Law format CSV (default: generate a synthetic one)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write the synthetic CSV (default: a temporary folder)",
    )
    args = parser.parse_args(argv)
    if args.csv is None:
        folder = Path(tempfile.mkdtemp(prefix="steplaw-"))
        path = write_synthetic_csv(args.out or folder / "steplaw_synthetic.csv")
        print(f"wrote a synthetic Step Law CSV to {path}")
    else:
        path = args.csv
    by_shape = read_steplaw_csv(path)
    everything = [o for obs in by_shape.values() for o in obs]
    largest = {name: max(o.scale["tokens"] for o in obs) for name, obs in by_shape.items()}
    train = [o for name, obs in by_shape.items() for o in obs if o.scale["tokens"] < largest[name]]
    scales = sorted({o.scale for o in train}, key=lambda s: (s["params"], s["tokens"]))
    print(
        f"{len(everything)} runs in {len(by_shape)} shapes; fitting on {len(train)} runs at "
        f"{len(scales)} scales, holding out each shape's largest D"
    )
    print(
        f"{'shape':8} {'Na':>9} {'D':>8} {'lr pred':>9} {'lr best':>9} {'bs pred':>8} "
        f"{'bs best':>8} {'regret':>8}"
    )
    regrets = []
    for name, obs in sorted(by_shape.items()):
        held = [o for o in obs if o.scale["tokens"] == largest[name]]
        target = held[0].scale
        result = ts.extrapolate(train, target=target, params=["lr", "bs"], seed=0)
        best = min((o for o in held if o.usable), key=lambda o: o.value)
        regret = nearest_grid_regret(held, result.params)
        regrets.append(regret)
        print(
            f"{name:8} {target['params']:9.3g} {target['tokens']:8.2g} "
            f"{result.params['lr']:9.3g} {best.params['lr']:9.3g} {result.params['bs']:8.3g} "
            f"{best.params['bs']:8.3g} {100 * regret:7.3f}%"
        )
    print(
        f"mean regret at the held-out scales: {100 * float(np.mean(regrets)):.3f}% "
        "(loss of the nearest grid run over the grid's best)"
    )
    final = ts.extrapolate(
        everything,
        target=ts.Scale(params=2e9, tokens=1e11),
        params=["lr", "bs"],
        n_bootstrap=100,
        seed=0,
    )
    low_high = final.interval(0.9)
    print("fitted on every run, predicted for Na=2e9, D=1e11:")
    for key, value in final.params.items():
        law = final.laws[key]
        exps = " · ".join(f"{k}^{v:+.3f}" for k, v in sorted(law.exponents.items()))
        print(
            f"  {key} = {value:.4g}  90% [{low_high[key][0]:.4g}, {low_high[key][1]:.4g}]  "
            f"law {law.coefficient:.3g} · {exps}"
        )


if __name__ == "__main__":
    main()

"""Step Law MoE benchmark: predict (lr, batch size) at the largest data size of each MoE shape.

Data: ``steplaw_moe_lr_bs_loss.csv`` (Li et al. 2025, "Predictable Scale: Part I", the
step-law/steplaw release): 16 configurations (4 MoE shapes × 4 data sizes D), each a 9 lr ×
5 batch-size grid with the smoothed final loss.

For each shape the largest D is held out. Methods fit the rest and predict (lr, bs) there:

- ``transfersearch``: ``extrapolate(params=["lr", "bs"])`` (local quadratic optima, power laws or
  joint valley, default settings);
- ``steplaw``: Step Law's method — per-configuration grid argmin, then ordinary least squares of
  log lr* and log bs* on the log scale variables;
- ``nearest``: copy the grid best of the nearest proxy configuration (in log scale distance).

Two fitting pools: ``global`` fits every shape's remaining configurations at once with scale
variables (Na, D) — as Step Law fits across model sizes; ``per-shape`` fits each shape's own three
smaller D with D as the only scale variable.

Regret = smooth loss at the prediction (linear interpolation in log lr × log bs on the held-out
grid, the prediction clipped to the grid) over the grid's best, minus 1.

Usage: ``python benchmarks/steplaw_moe.py --data ../shared/data/steplaw_moe_lr_bs_loss.csv``;
writes ``benchmarks/results/steplaw_moe.md``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator

from transfersearch import extrapolate
from transfersearch.scale import Scale

RESULTS = Path(__file__).resolve().parent / "results" / "steplaw_moe.md"
LOSS = "smooth loss"


def regret(grid: pd.DataFrame, lr: float, bs: float) -> float:
    """Relative loss excess of (lr, bs) on a held-out grid, interpolated in log-log."""
    points = np.log(grid[["lr", "bs"]].to_numpy(dtype=float))
    losses = grid[LOSS].to_numpy(dtype=float)
    query = np.clip(np.log([lr, bs]), points.min(axis=0), points.max(axis=0))
    value = float(LinearNDInterpolator(points, losses)(query[None, :])[0])
    if not math.isfinite(value):  # outside the hull of a grid with missing corners
        value = float(NearestNDInterpolator(points, losses)(query[None, :])[0])
    return value / float(losses.min()) - 1.0


def steplaw(
    train: pd.DataFrame, variables: list[str], target: dict[str, float]
) -> dict[str, float]:
    """Per-configuration grid argmin, then OLS of log optimum on log scale variables."""
    best = train.loc[train.groupby(variables)[LOSS].idxmin()]
    design = np.column_stack([np.ones(len(best))] + [np.log(best[v]) for v in variables])
    row = np.array([1.0] + [math.log(target[v]) for v in variables])
    out = {}
    for param in ("lr", "bs"):
        coef, *_ = np.linalg.lstsq(design, np.log(best[param].to_numpy(float)), rcond=None)
        out[param] = float(math.exp(row @ coef))
    return out


def nearest(
    train: pd.DataFrame, variables: list[str], target: dict[str, float]
) -> dict[str, float]:
    """The grid best of the proxy configuration nearest to the target in log scale."""
    configs = train[variables].drop_duplicates()
    distance = sum((np.log(configs[v]) - math.log(target[v])) ** 2 for v in variables)
    chosen = configs.loc[distance.idxmin()]
    rows = train[np.all([train[v] == chosen[v] for v in variables], axis=0)]
    best = rows.loc[rows[LOSS].idxmin()]
    return {"lr": float(best["lr"]), "bs": float(best["bs"])}


def flops_cost(scale: Scale) -> float:
    """A run's relative cost: the product of its scale variables (N·D or Na·D, ∝ 6·N·D FLOPs).

    Passed as ``cost=`` because ``default_cost`` knows width, dataset_size and epochs only and
    gives every Step Law configuration the same cost, which leaves walk-forward without a fold.
    """
    return math.prod(float(v) for v in scale.to_dict().values())


def ours(train: pd.DataFrame, variables: list[str], target: dict[str, float]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return extrapolate(
            train,
            target=Scale(target),
            params=["lr", "bs"],
            scale_columns=variables,
            value_column=LOSS,
            n_bootstrap=200,
            seed=0,
            cost=flops_cost,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="path to steplaw_moe_lr_bs_loss.csv")
    parser.add_argument("--out", default=str(RESULTS), help="markdown table to write")
    args = parser.parse_args()
    frame = pd.read_csv(args.data)
    frame = frame[np.isfinite(frame[LOSS])]
    shapes = sorted(frame["moe_name"].unique())
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()[0]
    fitting = 0.0
    started = time.perf_counter()
    for pool in ("global", "per-shape"):
        for shape in shapes:
            own = frame[frame["moe_name"] == shape]
            d_max = own["D"].max()
            held = own[own["D"] == d_max]
            target = {"Na": float(held["Na"].iloc[0]), "D": float(d_max)}
            if pool == "global":
                train = frame[frame["D"] < frame.groupby("moe_name")["D"].transform("max")]
                variables = ["Na", "D"]
            else:
                train = own[own["D"] < d_max]
                variables = ["D"]
            fit_start = time.perf_counter()
            result = ours(train, variables, target)
            fitting += time.perf_counter() - fit_start
            low_high = result.interval(0.9)
            best = held.loc[held[LOSS].idxmin()]
            predictions = {
                "transfersearch": result.params,
                "steplaw": steplaw(train, variables, target),
                "nearest": nearest(train, variables, target),
            }
            row: dict[str, Any] = {"pool": pool, "shape": shape, "model": result.model}
            for name, pred in predictions.items():
                row[name] = regret(held, pred["lr"], pred["bs"])
                row[f"{name}_lr"] = pred["lr"]
                row[f"{name}_bs"] = pred["bs"]
            row["best_lr"], row["best_bs"] = float(best["lr"]), float(best["bs"])
            row["interval_lr"] = low_high["lr"]
            row["interval_bs"] = low_high["bs"]
            rows.append(row)
    elapsed = time.perf_counter() - started
    table = pd.DataFrame(rows)
    lines = [
        "# Step Law MoE benchmark: regret at the held-out largest D",
        "",
        f"Command: `python benchmarks/steplaw_moe.py --data {args.data}`",
        "",
        "Regret = smooth loss at the predicted (lr, bs), linearly interpolated in log lr × log bs on",
        "the held-out grid, over that grid's best, minus 1 (in %). Methods: transfersearch",
        "`extrapolate(params=['lr', 'bs'], cost=Na·D)`, otherwise defaults; Step Law (per-configuration grid argmin +",
        "log-linear OLS); copy the best of the nearest proxy. `global` fits all shapes' smaller D",
        "with scale variables (Na, D); `per-shape` fits each shape's three smaller D on D alone.",
        "",
        "| pool | shape | transfersearch | Step Law | nearest proxy | model | ts (lr, bs) |"
        " Step Law (lr, bs) | grid best (lr, bs) | ts 90% interval lr | ts 90% interval bs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['pool']} | {row['shape']} | {100 * row['transfersearch']:.3f}% | "
            f"{100 * row['steplaw']:.3f}% | {100 * row['nearest']:.3f}% | {row['model']} | "
            f"({row['transfersearch_lr']:.2e}, {row['transfersearch_bs']:.0f}) | "
            f"({row['steplaw_lr']:.2e}, {row['steplaw_bs']:.0f}) | "
            f"({row['best_lr']:.2e}, {row['best_bs']:.0f}) | "
            f"{row['interval_lr'][0]:.2e}–{row['interval_lr'][1]:.2e} | "
            f"{row['interval_bs'][0]:.0f}–{row['interval_bs'][1]:.0f} |"
        )
    lines += [
        "",
        "| pool | mean regret: transfersearch | Step Law | nearest proxy |",
        "|---|---|---|---|",
    ]
    for pool, group in table.groupby("pool", sort=False):
        lines.append(
            f"| {pool} | {100 * group['transfersearch'].mean():.3f}% | "
            f"{100 * group['steplaw'].mean():.3f}% | {100 * group['nearest'].mean():.3f}% |"
        )
    lines += [
        "",
        f"Time in `extrapolate` (8 fits, 200 bootstrap resamples each): {fitting:.2f} s; whole "
        f"run {elapsed:.1f} s; 1-minute load average {load_before:.1f} before and "
        f"{os.getloadavg()[0]:.1f} after (the CPUs were shared with other work).",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Step Law MoE benchmark: predict (lr, batch size) at the largest data size of each MoE shape.

Data: ``steplaw_moe_lr_bs_loss.csv`` (Li et al. 2025, "Predictable Scale: Part I", the
step-law/steplaw release): 16 configurations (4 MoE shapes × 4 data sizes D), each a 9 lr ×
5 batch-size grid with the smoothed final loss.

For each shape the largest D is held out. Methods fit the rest and predict (lr, bs) there:

- ``transfersearch``: ``extrapolate(params=["lr", "bs"])`` (local quadratic optima, power laws or
  joint valley, default settings);
- the baselines of ``benchmarks/baselines.py``: the null (copy the grid best of the costliest
  training configuration, cost Na·D), per-configuration grid argmin + log-linear least squares,
  and Step Law's own band regression (every run within 0.25% of its configuration's least smooth
  loss, then the same least squares; docs/science.md §6);
- the null, ``nearest proxy``: copy the grid best of the nearest proxy configuration (in log scale
  distance; per shape, the next smaller D).

Two fitting pools: ``global`` fits every shape's remaining configurations at once with scale
variables (Na, D) — as Step Law fits across model sizes; ``per-shape`` fits each shape's own three
smaller D with D as the only scale variable.

Regret = smooth loss at the prediction (linear interpolation in log lr × log bs on the held-out
grid, the prediction clipped to the grid) over the grid's best, minus 1.

Usage: ``python benchmarks/steplaw_moe.py --data-dir ../shared/data`` (or ``--data PATH``);
writes ``benchmarks/results/steplaw_moe.md``.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from baselines import ARGMIN, BAND, NULL, baselines
from fit_call import accepted, dropped_note, readout
from provenance import header
from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator

from transfersearch import Observation, extrapolate
from transfersearch.scale import Scale

RESULTS = Path(__file__).resolve().parent / "results" / "steplaw_moe.md"
#: The null: copy the grid best of the proxy configuration nearest the target in log scale.
NEAREST = "null (nearest proxy's best)"
#: baselines.copy_top_rung: the grid best of the costliest proxy (N·D), whatever its D.
COSTLIEST = "copy costliest proxy's best"
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


def as_observations(frame: pd.DataFrame, variables: list[str]) -> list[Observation]:
    """The grid's runs as Observations: scale = ``variables``, params (lr, bs), the smooth loss."""
    return [
        Observation(
            {v: float(row[v]) for v in variables},
            {"lr": float(row["lr"]), "bs": float(row["bs"])},
            float(row[LOSS]),
        )
        for _, row in frame.iterrows()
    ]


def baseline_predictions(
    train: pd.DataFrame, variables: list[str], target: dict[str, float]
) -> dict[str, dict[str, float]]:
    """``benchmarks/baselines.py``'s three, lr and bs in log space, rungs ordered by N·D.

    Its null (the costliest proxy's best) is named :data:`COSTLIEST` here: on these grids the
    target is not beyond every proxy (a smaller D than the costliest proxy's), so the null the data's
    README states is :data:`NEAREST` (the largest proxy N at the nearest D, nearest in log scale).
    """
    predicted = baselines(
        as_observations(train, variables), target, ["lr", "bs"], ["lr", "bs"], flops_cost
    )
    return {COSTLIEST if name == NULL else name: value for name, value in predicted.items()}


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
    keywords, _ = accepted(
        {
            "scale_columns": variables,
            "value_column": LOSS,
            "seed": 0,
            "cost": flops_cost,
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return extrapolate(train, target=Scale(target), params=["lr", "bs"], **keywords)


#: The table's methods, in column order.
METHODS = ["transfersearch", NEAREST, ARGMIN, BAND, COSTLIEST]
FILENAME = "steplaw_moe_lr_bs_loss.csv"


def data_path(args: argparse.Namespace, filename: str) -> Path:
    """``--data`` if given, else ``--data-dir``/filename."""
    if args.data:
        return Path(args.data)
    if args.data_dir:
        return Path(args.data_dir) / filename
    raise SystemExit(f"give --data-dir (the folder holding {filename}) or --data")


def add_data_arguments(parser: argparse.ArgumentParser, filename: str) -> None:
    parser.add_argument("--data-dir", help=f"the folder holding {filename}")
    parser.add_argument("--data", help=f"the path of {filename} (instead of --data-dir)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, FILENAME)
    parser.add_argument("--out", default=str(RESULTS), help="markdown table to write")
    args = parser.parse_args(argv)
    frame = pd.read_csv(data_path(args, FILENAME))
    frame = frame[np.isfinite(frame[LOSS])]
    shapes = sorted(frame["moe_name"].unique())
    rows: list[dict[str, Any]] = []
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
                **baseline_predictions(train, variables, target),
                NEAREST: nearest(train, variables, target),
            }
            row: dict[str, Any] = {"pool": pool, "shape": shape, "model": readout(result, "model")}
            for name, pred in predictions.items():
                row[name] = regret(held, pred["lr"], pred["bs"])
                row[f"{name}_pred"] = (pred["lr"], pred["bs"])
            row["best_pred"] = (float(best["lr"]), float(best["bs"]))
            row["interval_lr"] = low_high["lr"]
            row["interval_bs"] = low_high["bs"]
            rows.append(row)
            print(f"{pool} {shape}: done", flush=True)
    elapsed = time.perf_counter() - started
    table = pd.DataFrame(rows)
    shown = None if argv is None else [__file__, *argv]
    lines = header("Step Law MoE benchmark: regret at the held-out largest D", shown)
    lines += [
        "Regret = smooth loss at the predicted (lr, bs), linearly interpolated in log lr × log bs on",
        "the held-out grid, over that grid's best, minus 1 (in %). Methods: transfersearch",
        "`extrapolate(params=['lr', 'bs'], cost=Na·D, seed=0)`, otherwise",
        "defaults; the baselines of `benchmarks/baselines.py` (lr, bs in log space, rungs by Na·D):",
        f"`{COSTLIEST}` (the costliest training configuration's grid best),",
        f"`{ARGMIN}` (per-configuration grid argmin + log-linear least squares),",
        f"`{BAND}` (every run within 0.25% of its",
        "configuration's least smooth loss + the same least squares, SCIENCE.md §6); the null",
        f"`{NEAREST}` copies the grid best of the configuration nearest the target in log scale.",
        "`global` fits all shapes' smaller D with scale variables (Na, D); `per-shape` fits each",
        "shape's three smaller D on D alone.",
        "",
        "| pool | mean regret: " + " | ".join(METHODS) + " |",
        "|---|" + "---|" * len(METHODS),
    ]
    for pool, group in table.groupby("pool", sort=False):
        cells = " | ".join(f"{100 * group[m].mean():.3f}%" for m in METHODS)
        lines.append(f"| {pool} | {cells} |")
    lines += [
        "",
        "| pool | shape | " + " | ".join(METHODS) + " | model | ts (lr, bs) | "
        f"{BAND} (lr, bs) | grid best (lr, bs) | ts 90% interval lr | ts 90% interval bs |",
        "|---|---|" + "---|" * (len(METHODS) + 6),
    ]
    for row in rows:
        cells = " | ".join(f"{100 * row[m]:.3f}%" for m in METHODS)
        lines.append(
            f"| {row['pool']} | {row['shape']} | {cells} | {row['model']} | "
            + " | ".join(
                f"({row[key][0]:.2e}, {row[key][1]:.0f})"
                for key in ("transfersearch_pred", f"{BAND}_pred", "best_pred")
            )
            + f" | {row['interval_lr'][0]:.2e}–{row['interval_lr'][1]:.2e} | "
            f"{row['interval_bs'][0]:.0f}–{row['interval_bs'][1]:.0f} |"
        )
    lines += [
        "",
        f"Time in `extrapolate` (8 fits): {fitting:.2f} s; whole run {elapsed:.1f} s.",
        "",
    ]
    note = dropped_note({"seed": 0, "cost": flops_cost, "prior_exponents": None})
    lines += [note, ""] if note else []
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

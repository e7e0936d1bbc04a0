"""Step Law, other hold-outs: the same data as ``steplaw_dense.py``/``steplaw_moe.py``, held out
in ways the engine was not developed on (a guard against fitting one table).

Protocols (each predicts (lr, bs) at every held-out configuration; regret as in
``steplaw_moe.py``: the smooth loss at the prediction, interpolated on the held-out grid, over
the grid's best, minus 1):

* ``dense N=537M`` — the development protocol (``steplaw_dense.py``), for reference;
* ``dense N=429M`` — fit N = 215M and 268M (8 configurations), predict N = 429M's four D;
* ``dense 215M+268M -> 537M`` — the same fit, predict N = 537M's three D: 2.5× in model size
  past the largest proxy, the farthest extrapolation in size these grids allow (added
  2026-11-26, session 14, for the larger held-out sizes the data README mentions);
* ``dense largest D`` — fit every configuration except each N's largest D, predict those four
  (extrapolation in data at every size at once);
* ``MoE largest D`` — the development protocol of ``steplaw_moe.py`` (global pool);
* ``MoE largest Na`` — fit the three shapes of fewer active parameters, predict every D of the
  largest (``3in8``, Na = 1.24B): extrapolation in active size.

Methods: ``transfersearch`` (``extrapolate(params=["lr", "bs"])``, defaults), its ``law`` point,
the null (the grid best of the nearest proxy configuration in log scale), per-configuration
argmin + log-linear, and Step Law's band regression (``benchmarks/baselines.py``).

Coverage (a second table, added 2026-11-27, session 22): whether ours' 90% interval
(``res.interval(0.9)``) holds the held-out grid's optimum, per parameter — the grid's own optimum
(``estimate_optimum`` on that grid's runs alone: the one model on a single rung, as a walk-forward
fold reads a held-out rung; its standard error is 0.03–0.11 log units on these grids) and the
grid's best run (a factor-√2 or 2 grid's argmin: a cruder yardstick) — with the intervals' median
width in decades. A calibrated interval holds the first in about 90% of targets.

Usage: ``python benchmarks/steplaw_holdouts.py --data-dir ../shared/data``; writes
``benchmarks/results/steplaw_holdouts.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from baselines import ARGMIN, BAND
from fit_call import readout
from provenance import holdout_arguments, write_holdouts
from steplaw_moe import LOSS, NEAREST, as_observations, baseline_predictions, nearest, ours, regret

from transfersearch import estimate_optimum

RESULTS = Path(__file__).resolve().parent / "results" / "steplaw_holdouts.md"
DENSE = "steplaw_dense_lr_bs_loss_below_1B.csv"
MOE = "steplaw_moe_lr_bs_loss.csv"
METHODS = ["transfersearch", "law", NEAREST, ARGMIN, BAND]
Split = tuple[pd.DataFrame, pd.DataFrame]


def _largest_d(frame: pd.DataFrame, group: str) -> Split:
    """Hold out each ``group`` value's largest D."""
    top = frame.groupby(group)["D"].transform("max")
    return frame[frame["D"] != top], frame[frame["D"] == top]


def _dense_size(frame: pd.DataFrame, held: int) -> Split:
    """Fit the sizes below ``held``, predict ``held``."""
    return frame[frame["N"] < held], frame[frame["N"] == held]


def _dense_far(frame: pd.DataFrame) -> Split:
    """Fit N = 215M and 268M, predict N = 537M (429M left out)."""
    return frame[frame["N"] < 429_260_800], frame[frame["N"] == 536_872_960]


def _moe_top_shape(frame: pd.DataFrame) -> Split:
    top = frame["Na"].max()
    return frame[frame["Na"] != top], frame[frame["Na"] == top]


#: name -> (file, scale variables, the split).
PROTOCOLS: dict[str, tuple[str, list[str], Callable[[pd.DataFrame], Split]]] = {
    "dense N=537M": (DENSE, ["N", "D"], lambda f: _dense_size(f, 536_872_960)),
    "dense N=429M": (DENSE, ["N", "D"], lambda f: _dense_size(f, 429_260_800)),
    "dense 215M+268M -> 537M": (DENSE, ["N", "D"], _dense_far),
    "dense largest D": (DENSE, ["N", "D"], lambda f: _largest_d(f, "N")),
    "MoE largest D": (MOE, ["Na", "D"], lambda f: _largest_d(f, "Na")),
    "MoE largest Na": (MOE, ["Na", "D"], _moe_top_shape),
}


def _targets(held: pd.DataFrame, variables: list[str]) -> Iterator[tuple[dict, pd.DataFrame]]:
    for key, grid in held.groupby(variables):
        yield dict(zip(variables, map(float, key), strict=True)), grid


def run_protocol(frame: pd.DataFrame, variables: list[str], split: Callable) -> list[dict]:
    """One row per held-out configuration: each method's regret."""
    train, held = split(frame)
    rows = []
    for target, grid in _targets(held, variables):
        res = ours(train, variables, target)
        predictions: dict[str, Any] = {
            "transfersearch": res.params,
            "law": readout(res, "law_params", res.params),
            **baseline_predictions(train, variables, target),
            NEAREST: nearest(train, variables, target),
        }
        rows.append({m: regret(grid, predictions[m]["lr"], predictions[m]["bs"]) for m in METHODS})
        rows[-1].update(coverage(res, grid, variables))
        print(f"  {target}: " + ", ".join(f"{m} {100 * rows[-1][m]:.3f}%" for m in METHODS))
    return rows


#: The interval whose coverage the second table counts.
LEVEL = 0.9
COVERED = ("lr", "bs")


def coverage(res: Any, grid: pd.DataFrame, variables: list[str]) -> dict[str, float]:
    """Whether ours' :data:`LEVEL` interval holds the held-out grid's own optimum and its best
    run (1.0 or 0.0 per parameter), and the interval's width in decades."""
    own = estimate_optimum(as_observations(grid, variables), list(COVERED), warn=False)
    best = grid.loc[grid[LOSS].idxmin()]
    bounds = res.interval(LEVEL)
    out: dict[str, float] = {}
    for name in COVERED:
        low, high = bounds[name]
        out[f"{name} own"] = float(low <= own.params[name] <= high)
        out[f"{name} best"] = float(low <= float(best[name]) <= high)
        out[f"{name} width"] = float(np.log10(high / low))
    return out


def coverage_table(results: dict[str, list[dict[str, float]]]) -> str:
    """The second table: per protocol (and over every target), how many targets' intervals hold
    each yardstick, and their median width."""
    lines = [
        f"Coverage of ours' {LEVEL:.0%} interval (see above):",
        "",
        "| protocol | targets | lr: grid's own optimum | bs: grid's own optimum | lr: grid's best "
        "run | bs: grid's best run | median width, decades (lr / bs) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    every = [r for found in results.values() for r in found]
    for name, found in [*results.items(), ("**every target**", every)]:
        counts = [
            f"{int(sum(r[f'{p} {kind}'] for r in found))}/{len(found)}"
            for kind in ("own", "best")
            for p in COVERED
        ]
        widths = " / ".join(f"{np.median([r[f'{p} width'] for r in found]):.2f}" for p in COVERED)
        lines.append(f"| {name} | {len(found)} | " + " | ".join(counts) + f" | {widths} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = holdout_arguments(__doc__ or "", RESULTS, argv)
    started = time.perf_counter()
    results = {}
    for name, (filename, variables, split) in PROTOCOLS.items():
        frame = pd.read_csv(args.data_dir / filename)
        frame = frame[np.isfinite(frame[LOSS])]
        print(name, flush=True)
        results[name] = run_protocol(frame, variables, split)
    write_holdouts(
        args.out,
        "Step Law, other hold-outs: mean regret (%) per protocol",
        None if argv is None else [__file__, *argv],
        __doc__ or "",
        results,
        (METHODS, "transfersearch", NEAREST),
        "{:.3%}",
        "targets",
        time.perf_counter() - started,
    )
    table = coverage_table(results)
    with open(args.out, "a", encoding="utf-8") as handle:
        handle.write("\n" + table)
    print(table)


if __name__ == "__main__":
    main()

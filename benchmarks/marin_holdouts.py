"""Marin Lion and Mars, other hold-outs: the tables of ``marin_sweeps.py`` held out in ways the
engine was not developed on (a guard against fitting one protocol).

Protocols (each optimizer; scored per target table as ``marin_sweeps.py`` scores the 8× one:
per parameter, the loss of the row nearest the prediction minus the least among the best row and
the rows varying it, summed over lr, weight_decay and batch_size):

* ``1-4x -> 8x, per size`` — the development protocol, for reference;
* ``1-2x -> 4x, per size`` — two training tables only;
* ``1-4x -> 8x, sizes pooled`` — every size's 1, 2, 4× tables in one fit, each 8× predicted;
* ``130M+300M -> 520M`` — both smaller sizes' tables at every multiple, predict 520M's four:
  extrapolation in model size.

Methods: ``ours`` (``extrapolate(params=[lr, weight_decay, batch_size],
log_params=["lr", "batch_size"], seed=0)``, as ``marin_sweeps.py``), ``ours (every row)`` (the
same given every row of the training tables, also those varying beta1, beta2, warmup or
grad_clip, as ``marin_sweeps.py``), the null (the row labelled
best of the nearest training table in log (N, D)), per-table argmin + log-linear and Step Law's
band (``benchmarks/baselines.py``, weight decay linear).

Usage: ``python benchmarks/marin_holdouts.py --data-dir ../shared/data``; writes
``benchmarks/results/marin_holdouts.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from baselines import ARGMIN, BAND, baselines
from marin_sweeps import (
    EVERY_ROW,
    HYPERPARAMETERS,
    LOG_PARAMS,
    OPTIMIZERS,
    PREDICTED,
    fit_ours,
    load,
    observations,
    predicted_rows,
    score,
)
from provenance import holdout_arguments, write_holdouts

RESULTS = Path(__file__).resolve().parent / "results" / "marin_holdouts.md"
NEAREST = "null (nearest table's best)"
METHODS = ["ours", EVERY_ROW, NEAREST, ARGMIN, BAND]
#: (training frame, target table) pairs of one optimizer's rows.
Split = Iterator[tuple[pd.DataFrame, pd.DataFrame]]


def _per_size(frame: pd.DataFrame, train: tuple[int, ...], target: int) -> Split:
    for _, own in frame.groupby("N"):
        yield own[own["chinchilla"].isin(train)], own[own["chinchilla"] == target]


def _pooled(frame: pd.DataFrame) -> Split:
    train = frame[frame["chinchilla"].isin((1, 2, 4))]
    for _, own in frame.groupby("N"):
        yield train, own[own["chinchilla"] == 8]


def _by_size(frame: pd.DataFrame) -> Split:
    top = frame["N"].max()
    for _, table in frame[frame["N"] == top].groupby("chinchilla"):
        yield frame[frame["N"] != top], table


PROTOCOLS = {
    "1-4x -> 8x, per size": lambda f: _per_size(f, (1, 2, 4), 8),
    "1-2x -> 4x, per size": lambda f: _per_size(f, (1, 2), 4),
    "1-4x -> 8x, sizes pooled": _pooled,
    "130M+300M -> 520M": _by_size,
}


def nearest_best(train: pd.DataFrame, table: pd.DataFrame) -> dict[str, float]:
    """The row labelled best of the training table nearest the target in log (N, D)."""
    target = np.log([float(table["N"].iloc[0]), float(table["D"].iloc[0])])
    best = train[train["varied"] == "best"]
    gap = np.log(best[["N", "D"]].to_numpy(dtype=float)) - target
    row = best.iloc[int(np.argmin((gap**2).sum(axis=1)))]
    return {name: float(row[name]) for name in PREDICTED}


def predictions(rows: pd.DataFrame, table: pd.DataFrame) -> dict[str, dict[str, float] | None]:
    """Each method's prediction for ``table`` from the training tables' ``rows`` (every row:
    ``ours (every row)`` fits them all, the others the best rows and those varying a predicted
    parameter)."""
    target = {"N": float(table["N"].iloc[0]), "D": float(table["D"].iloc[0])}
    train = predicted_rows(rows)
    obs = observations(train)
    out: dict[str, dict[str, float] | None] = {"ours": fit_ours(obs, target, False).prediction}
    every = observations(rows, HYPERPARAMETERS)
    out[EVERY_ROW] = fit_ours(every, target, False).prediction
    simple = baselines(obs, target, list(PREDICTED), log_params=LOG_PARAMS)
    out.update({ARGMIN: simple[ARGMIN], BAND: simple[BAND], NEAREST: nearest_best(train, table)})
    return out


def run_protocol(frames: dict[str, pd.DataFrame], name: str) -> list[dict[str, float]]:
    """One row per (optimizer, target table): each method's summed score (NaN: no prediction)."""
    rows = []
    for optimizer, frame in frames.items():
        for train, table in PROTOCOLS[name](frame):
            row: dict[str, float] = {}
            for method, pred in predictions(train, table).items():
                finite = pred is not None and all(math.isfinite(v) for v in pred.values())
                row[method] = score(table, pred).total if finite and pred else math.nan
            rows.append(row)
            n, c = float(table["N"].iloc[0]), int(table["chinchilla"].iloc[0])
            print(
                f"  {optimizer} N={n:.3g} {c}x: " + ", ".join(f"{m} {row[m]:.4f}" for m in METHODS)
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    args = holdout_arguments(__doc__ or "", RESULTS, argv)
    started = time.perf_counter()
    frames = {opt: load(args.data_dir, opt, every_row=True) for opt in OPTIMIZERS}
    results = {}
    for name in PROTOCOLS:
        print(name, flush=True)
        results[name] = run_protocol(frames, name)
    write_holdouts(
        args.out,
        "Marin Lion and Mars, other hold-outs: mean summed score per protocol",
        None if argv is None else [__file__, *argv],
        __doc__ or "",
        results,
        (METHODS, "ours", NEAREST),
        "{:.4f}",
        "target tables",
        time.perf_counter() - started,
    )


if __name__ == "__main__":
    main()

"""Step Law dense benchmark: predict (lr, batch size) at a model size the fit has never seen.

Data: ``steplaw_dense_lr_bs_loss_below_1B.csv`` (Li et al. 2025, the step-law/steplaw
release): 15 (N, D) configurations, each a learning-rate × batch-size grid
with the smoothed final loss. Protocol: hold out N = 536,872,960 (three D),
fit on the three smaller N with scale variables (N, D), predict (lr, bs) at each held-out (N, D).

Methods: ``transfersearch`` (``extrapolate(params=["lr", "bs"])``, defaults: no prior drift);
``ts + Step Law prior`` (the same with ``prior_exponents`` set to the published Step Law exponents,
lr ∝ N^−0.713 D^0.307 and bs ∝ N^0 D^0.571 — theory a user would bring); ``law`` (the chosen
model's point before the decision); the baselines of ``benchmarks/baselines.py`` (the null: copy
the grid best of the costliest training configuration, N·D; per-configuration grid argmin +
log-linear least squares; Step Law's own band regression through every run within 0.25% of its
configuration's least smooth loss); the null here is ``nearest`` (copy the grid best of the
nearest proxy configuration in log scale: N = 429M at the nearest D), ``copy_top_rung``'s
costliest proxy beside it. Regret as in ``steplaw_moe.py``.

Usage: ``python benchmarks/steplaw_dense.py --data-dir ../shared/data`` (or ``--data PATH``);
writes ``benchmarks/results/steplaw_dense.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from baselines import ARGMIN, BAND
from fit_call import accepted, dropped_note, readout
from provenance import header
from steplaw_moe import (
    COSTLIEST,
    LOSS,
    NEAREST,
    add_data_arguments,
    baseline_predictions,
    data_path,
    flops_cost,
    nearest,
    regret,
)

from transfersearch import Scale, extrapolate

RESULTS = Path(__file__).resolve().parent / "results" / "steplaw_dense.md"
HELD_OUT_N = 536_872_960
STEP_LAW_PRIOR = {"lr": {"N": -0.713, "D": 0.307}, "bs": {"N": 0.0, "D": 0.571}}
VARIABLES = ["N", "D"]


def fit(train: pd.DataFrame, target: dict[str, float], prior: Any, seed: int) -> Any:
    keywords, _ = accepted(
        {
            "scale_columns": VARIABLES,
            "value_column": LOSS,
            "prior_exponents": prior,
            "seed": seed,
            "cost": flops_cost,  # N·D
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return extrapolate(train, target=Scale(target), params=["lr", "bs"], **keywords)


FILENAME = "steplaw_dense_lr_bs_loss_below_1B.csv"
METHODS = ["transfersearch", "law", "ts + Step Law prior", NEAREST, ARGMIN, BAND, COSTLIEST]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, FILENAME)
    parser.add_argument("--out", default=str(RESULTS), help="markdown table to write")
    parser.add_argument("--seed", type=int, default=0, help="the fits' seed (0)")
    args = parser.parse_args(argv)
    frame = pd.read_csv(data_path(args, FILENAME))
    frame = frame[np.isfinite(frame[LOSS])]
    train = frame[frame["N"] != HELD_OUT_N]
    held_all = frame[frame["N"] == HELD_OUT_N]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for d_value in sorted(held_all["D"].unique()):
        held = held_all[held_all["D"] == d_value]
        target = {"N": float(HELD_OUT_N), "D": float(d_value)}
        ours = fit(train, target, None, args.seed)
        primed = fit(train, target, STEP_LAW_PRIOR, args.seed)
        predictions = {
            "transfersearch": ours.params,
            "law": readout(ours, "law_params", ours.params),
            "ts + Step Law prior": primed.params,
            **baseline_predictions(train, VARIABLES, target),
            NEAREST: nearest(train, VARIABLES, target),
        }
        row: dict[str, Any] = {
            "D": d_value,
            "model": readout(ours, "model"),
            "primed_model": readout(primed, "model"),
        }
        for name, pred in predictions.items():
            row[name] = regret(held, pred["lr"], pred["bs"])
        row["pred"] = (ours.params["lr"], ours.params["bs"])
        row["band"] = (predictions[BAND]["lr"], predictions[BAND]["bs"])
        best = held.loc[held[LOSS].idxmin()]
        row["best"] = (float(best["lr"]), float(best["bs"]))
        row["scores"] = readout(ours, "model_scores", {})
        rows.append(row)
        print(f"D = {d_value:.3g}: done", flush=True)
    elapsed = time.perf_counter() - started
    shown = None if argv is None else [__file__, *argv]
    lines = header("Step Law dense benchmark: regret at a held-out model size (N = 537M)", shown)
    lines += [
        "Fit on N = 215M, 268M, 429M (12 configurations, every D), predict (lr, bs) at N = 537M for",
        "each of its three D; regret = smoothed loss at the prediction (linear interpolation in",
        "log lr × log bs on the held-out grid) over the grid's best, minus 1, in %. Seed",
        f"{args.seed} (the posterior draws'); rungs ordered by cost = N·D (`cost=`, see steplaw_moe.py's "
        "flops_cost). Baselines: `benchmarks/baselines.py` (lr, bs in log space); the null",
        f"`{NEAREST}` copies the grid best of the proxy nearest in log (N, D) (N = 429M at the",
        f"nearest D, the data README's null); `{COSTLIEST}` copies N = 429M, D = 100B's for every",
        "target. See the script's docstring for the methods.",
        "",
        "| D | " + " | ".join(METHODS) + " | model (prior) | ts (lr, bs) | band (lr, bs) |"
        " grid best (lr, bs) |",
        "|---|" + "---|" * (len(METHODS) + 4),
    ]
    for row in rows:
        cells = " | ".join(f"{100 * row[m]:.3f}%" for m in METHODS)
        lines.append(
            f"| {row['D']:.3g} | {cells} | {row['model']} ({row['primed_model']}) | "
            + " | ".join(f"({row[k][0]:.2e}, {row[k][1]:.0f})" for k in ("pred", "band", "best"))
            + " |"
        )
    means = " | ".join(f"{100 * np.mean([r[m] for r in rows]):.3f}%" for m in METHODS)
    lines += ["| **mean** | " + means + " | | | | |", ""]
    scores = rows[0]["scores"]
    lines += [
        "Walk-forward weighted mean regret per model (loss units, the fit for the first D; the",
        "fit is the same for every D): "
        + ", ".join(f"{k} {v:.4g}" for k, v in scores.items())
        + ".",
        "",
        f"Whole run {elapsed:.1f} s (six fits).",
        "",
    ]
    note = dropped_note({"seed": 0, "cost": flops_cost, "prior_exponents": None})
    lines += [note, ""] if note else []
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

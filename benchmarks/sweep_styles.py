"""Sweep styles on real data: the Step Law hold-outs with each proxy's grid thinned the ways
people sweep, ours beside the null and the baselines on the same thinned trials.

The held-out sets this project is judged on differ from its development data in their sweep
style as much as in their optimizer or size: a one-at-a-time table around a known-good run, a
random search, a tuner's trials bunched near the best. Step Law's grids (``../shared/data``) run
every (lr, bs) pair at every configuration, so each style can be cut from them and scored on the
held-out grid that is left whole. Each training configuration's runs are thinned alike:

* ``full grid`` — every run (``steplaw_holdouts.py`` itself);
* ``coarse grid`` — every other lr value and every other bs value of the configuration's grid;
* ``cross`` — the configuration's best run, every lr at its bs and every bs at its lr (the
  one-at-a-time tables of the Marin sweeps);
* ``cross + diagonals`` — the cross and the four runs one grid step from the best in both lr
  and bs (a one-at-a-time table with its two parameters' tilt measured: ``summary()``'s
  ``interaction`` note, docs/science.md §7.3);
* ``near best 16`` — the 16 runs nearest the best in (log lr, log bs), each axis over its grid's
  range: a tuner's trials bunched where it found the optimum;
* ``random 16`` — 16 runs drawn at random (three draws, seeds 0–2, each its own row set).

The protocols are ``steplaw_holdouts.py``'s six (22 held-out configurations); regret as there
(the smooth loss at the prediction, interpolated on the held-out grid, over the grid's best,
minus 1). Methods: ``transfersearch`` (``extrapolate(params=["lr", "bs"])``, defaults), its
``law`` point, the null (the grid best of the nearest proxy configuration in log scale, on the
thinned trials), per-configuration argmin + log-linear and Step Law's band regression
(``benchmarks/baselines.py``), every one on the same thinned trials.

Usage: ``python benchmarks/sweep_styles.py --data-dir ../shared/data``; writes
``benchmarks/results/sweep_styles.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from provenance import header, holdout_arguments
from steplaw_holdouts import METHODS, PROTOCOLS, run_protocol
from steplaw_moe import LOSS, NEAREST

from transfersearch.fitting.findings import diagonal_runs

RESULTS = Path(__file__).resolve().parent / "results" / "sweep_styles.md"
#: Runs kept per configuration by the ``near best`` and ``random`` styles.
KEPT = 16
RANDOM_SEEDS = (0, 1, 2)
Thin = Callable[[pd.DataFrame, np.random.Generator], pd.DataFrame]


def _best(rows: pd.DataFrame) -> pd.Series:
    return rows.loc[rows[LOSS].idxmin()]


def _coarse(rows: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    keep = {c: np.sort(rows[c].unique())[::2] for c in ("lr", "bs")}
    return rows[rows["lr"].isin(keep["lr"]) & rows["bs"].isin(keep["bs"])]


def _cross(rows: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    best = _best(rows)
    return rows[(rows["lr"] == best["lr"]) | (rows["bs"] == best["bs"])]


def _cross_diagonals(rows: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The cross and the runs ``summary()``'s ``interaction`` note names for it
    (``diagonal_runs``: the grid values next to the best run's in both lr and bs)."""
    cross = _cross(rows, rng)
    coords = cross[["lr", "bs"]].to_numpy(dtype=float)
    runs = diagonal_runs(coords, cross[LOSS].to_numpy(dtype=float), 0, 1)
    diagonal = pd.Series(list(zip(rows["lr"], rows["bs"])), index=rows.index).isin(runs)
    return pd.concat([cross, rows[diagonal]]).sort_index()


def _near_best(rows: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    best = _best(rows)
    distance = np.zeros(len(rows))
    for c in ("lr", "bs"):
        logs = np.log(rows[c].to_numpy(dtype=float))
        span = float(np.ptp(logs)) or 1.0
        distance += ((logs - np.log(float(best[c]))) / span) ** 2
    return rows.iloc[np.argsort(distance, kind="stable")[:KEPT]]


def _random(rows: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    picked = rng.choice(len(rows), size=min(KEPT, len(rows)), replace=False)
    return rows.iloc[np.sort(picked)]


def thinned(
    train: pd.DataFrame, variables: list[str], thin: Thin, rng: np.random.Generator
) -> pd.DataFrame:
    """Every training configuration's runs thinned by ``thin``."""
    parts = [thin(rows, rng) for _, rows in train.groupby(variables, sort=True)]
    return pd.concat(parts)


#: style name -> (how a configuration's runs are thinned, the seeds it is drawn with).
STYLES: dict[str, tuple[Thin | None, tuple[int, ...]]] = {
    "full grid": (None, (0,)),
    "coarse grid": (_coarse, (0,)),
    "cross": (_cross, (0,)),
    "cross + diagonals": (_cross_diagonals, (0,)),
    f"near best {KEPT}": (_near_best, (0,)),
    f"random {KEPT}": (_random, RANDOM_SEEDS),
}


def run_style(
    frame: pd.DataFrame,
    variables: list[str],
    split: Callable[[pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]],
    thin: Thin | None,
    seed: int,
) -> list[dict[str, float]]:
    """One protocol under one style and seed: each held-out configuration's regrets."""

    def thinned_split(f: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        train, held = split(f)
        if thin is None:
            return train, held
        return thinned(train, variables, thin, np.random.default_rng(seed)), held

    return run_protocol(frame, variables, thinned_split)


def _means(rows: list[dict[str, float]]) -> str:
    means = " | ".join(f"{sum(r[m] for r in rows) / len(rows):.3%}" for m in METHODS)
    wins = sum(r["transfersearch"] <= r[NEAREST] for r in rows)
    return f"{len(rows)} | {means} | {wins}/{len(rows)}"


def report(
    results: dict[tuple[str, str], list[dict[str, float]]],
    argv: list[str] | None,
    runs: dict[str, int],
    seconds: float,
) -> str:
    """The markdown report: every style over all protocols, then each protocol by style."""
    doc = (__doc__ or "").split("\n\n", 1)[1].split("Usage:")[0].strip()
    lines = [*header("Sweep styles on real data: mean regret (%) per style", argv), doc, ""]
    head = "| targets | " + " | ".join(METHODS) + " | ours ≤ null |"
    rule = "---:|" * (len(METHODS) + 2)
    lines += ["## Every protocol, by style", "", "| style | runs a configuration " + head]
    lines.append("|---|---:|" + rule)
    for style in STYLES:
        pooled = [r for (s, _), rows in results.items() if s == style for r in rows]
        lines.append(f"| {style} | {runs[style]} | {_means(pooled)} |")
    lines += ["", "## By protocol", "", "| protocol | style " + head, "|---|---|" + rule]
    for (style, protocol), rows in results.items():
        lines.append(f"| {protocol} | {style} | {_means(rows)} |")
    lines += ["", f"Whole run {seconds:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = holdout_arguments(__doc__ or "", RESULTS, argv)
    started = time.perf_counter()
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    runs: dict[str, list[int]] = {style: [] for style in STYLES}
    for protocol, (filename, variables, split) in PROTOCOLS.items():
        frame = pd.read_csv(args.data_dir / filename)
        frame = frame[np.isfinite(frame[LOSS])]
        for style, (thin, seeds) in STYLES.items():
            found: list[dict[str, float]] = []
            for seed in seeds:
                print(f"{protocol} / {style} / seed {seed}", flush=True)
                found += run_style(frame, variables, split, thin, seed)
                train = split(frame)[0]
                kept = (
                    train
                    if thin is None
                    else thinned(train, variables, thin, np.random.default_rng(seed))
                )
                runs[style] += kept.groupby(variables).size().tolist()
            results[(style, protocol)] = found
    typical = {style: int(np.median(counts)) for style, counts in runs.items()}
    text = report(
        results, None if argv is None else [__file__, *argv], typical, time.perf_counter() - started
    )
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()

"""Speed of extrapolate() and of the planner's refit (issue 25's goals: 10,000 observations in
≤ 0.1 s, the planner's 100-observation refit in ≤ 10 ms).

Synthetic trials (two log-scale parameters, an asymmetric valley with noise and a divergence
cliff) at 6 scales varying width and dataset size; times ``extrapolate(...)`` (the one model with
its walk-forward folds, which calibrate the interval) for ``model="auto"`` and ``"constant"``
after one warm-up call, best and median of several repeats. The small rows are the Optuna
sampler's case, ~100 observations over 3 scales: ``extrapolate`` and the planner's own refit,
``fit_sweep(..., walk_forward=False)`` (what ``LawCache`` calls: no folds).
Writes ``benchmarks/results/extrapolate_speed.md``.

Usage: ``python benchmarks/extrapolate_speed.py [--repeats 7]``
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from transfersearch import extrapolate
from transfersearch.errors import TransferSearchWarning
from transfersearch.fitting.engine import fit_sweep
from transfersearch.fitting.options import FitOptions
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.sweep import Sweep

RESULTS = Path(__file__).resolve().parent / "results" / "extrapolate_speed.md"
LADDER = [(64, 1e5), (128, 4e5), (256, 2e5), (512, 8e5), (128, 1e5), (256, 8e5)]
#: The sampler's case: a width ladder at one dataset size.
SMALL_LADDER = [(64, 1e5), (128, 1e5), (256, 1e5)]


def trials(
    n_total: int, seed: int = 0, ladder: Sequence[tuple[int, float]] = LADDER
) -> list[Observation]:
    """``n_total`` observations spread evenly over ``ladder`` (width, dataset size)."""
    rng = np.random.default_rng(seed)
    per_scale = math.ceil(n_total / len(ladder))
    out: list[Observation] = []
    for width, size in ladder:
        lr_opt = 2.0 * width**-0.8 * size**0.15
        tau_opt = 0.5 * width**0.2
        for _ in range(per_scale):
            if len(out) == n_total:
                break
            d1 = rng.uniform(math.log(1 / 8), math.log(4))
            d2 = rng.uniform(math.log(1 / 4), math.log(4))
            up = (math.exp(1.5 * d1) - 1 - 1.5 * d1) / 1.5**2
            value = 3.0 + 0.2 * up + 0.2 * (math.exp(-d2) - 1 + d2) + rng.normal(0, 0.002)
            out.append(
                Observation(
                    {"width": width, "dataset_size": size},
                    {"lr": lr_opt * math.exp(d1), "tau": tau_opt * math.exp(d2)},
                    math.nan if d1 > math.log(3) else value,
                )
            )
    return out


def timed(call: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Best and median seconds of ``repeats`` calls after one warm-up, and the last result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TransferSearchWarning)
        call()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            result = call()
            times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    big_target = Scale(width=4096, dataset_size=6.4e6)
    small_target = Scale(width=1024, dataset_size=1e5)
    load_before = os.getloadavg()[0]
    rows = []
    for n_obs, ladder, target, model, repeats in (
        (10_000, LADDER, big_target, "auto", args.repeats),
        (10_000, LADDER, big_target, "constant", args.repeats),
        (1_000, LADDER, big_target, "auto", args.repeats),
        (102, SMALL_LADDER, small_target, "auto", 3 * args.repeats),
    ):
        obs = trials(n_obs, ladder=ladder)
        best, median, res = timed(
            lambda obs=obs, target=target, model=model: extrapolate(
                obs, target=target, params=["lr", "tau"], model=model, seed=0
            ),
            repeats,
        )
        rows.append((n_obs, len(ladder), f"extrapolate(model={model!r})", best, median, res))
    obs = trials(102, ladder=SMALL_LADDER)
    options = FitOptions(params=("lr", "tau"), seed=0)
    best, median, res = timed(
        lambda: fit_sweep(Sweep(tuple(obs)), small_target, options, walk_forward=False),
        3 * args.repeats,
    )
    rows.append((102, 3, "planner refit: fit_sweep(walk_forward=False)", best, median, res))
    write(rows, load_before, os.getloadavg()[0], Path(args.out))


def write(rows: list[tuple[Any, ...]], load_before: float, load_after: float, out: Path) -> None:
    """Print and save the table, with the machine and the goals."""
    lines = [
        "# extrapolate() speed",
        "",
        "Command: `python benchmarks/extrapolate_speed.py`",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}; 1-minute load average "
        f"{load_before:.1f} before and {load_after:.1f} after the run (the best of the repeats is "
        "the closer to an idle machine).",
        "",
        "Two log-scale parameters, `params=['lr', 'tau']`; the one model of every trial "
        "(docs/science.md §7-9). `extrapolate` runs the walk-forward folds (one solve of the valley "
        "per fold, its weights held at the full fit's: they calibrate the interval); the planner's refit skips them. Goals (issue "
        "25): 10,000 observations in <= 0.1 s, the planner's ~100-observation refit in <= 10 ms.",
        "",
        "| observations | scales | call | best (s) | median (s) | model kept |",
        "|---|---|---|---|---|---|",
    ]
    for n_obs, n_scales, call, best, median, res in rows:
        lines.append(
            f"| {n_obs:,} | {n_scales} | `{call}` | {best:.3f} | {median:.3f} | {res.model} |"
        )
    lines.append("")
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

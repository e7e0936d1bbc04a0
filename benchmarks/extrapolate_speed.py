"""Speed of extrapolate(): 10,000 observations over 6 scales, 200 bootstrap resamples.

Synthetic trials (two log-scale parameters, an asymmetric valley with noise and a divergence
cliff) at 6 scales varying width and dataset size; times ``extrapolate(...)``
for each ``model=`` after one warm-up call, best and median of several repeats. Also the small
call the Optuna sampler makes when new rung data arrive: ~100 observations over 3 scales,
``n_bootstrap=40``. Writes ``benchmarks/results/extrapolate_speed.md``.

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
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from transfersearch import extrapolate
from transfersearch.errors import TransferSearchWarning
from transfersearch.observations import Observation
from transfersearch.scale import Scale

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    big_target = Scale(width=4096, dataset_size=6.4e6)
    small_target = Scale(width=1024, dataset_size=1e5)
    cases: list[tuple[int, int, str, Sequence[tuple[int, float]], Scale, int]] = [
        (10_000, 200, "auto", LADDER, big_target, args.repeats),
        (10_000, 200, "shrunk", LADDER, big_target, args.repeats),
        (10_000, 50, "auto", LADDER, big_target, args.repeats),
        (1_000, 50, "auto", LADDER, big_target, args.repeats),
        (102, 40, "auto", SMALL_LADDER, small_target, 10 * args.repeats),
        (102, 40, "shrunk", SMALL_LADDER, small_target, 10 * args.repeats),
    ]
    load_before = os.getloadavg()[0]
    rows = []
    for n_obs, n_boot, model, ladder, target, repeats in cases:
        obs = trials(n_obs, ladder=ladder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TransferSearchWarning)
            extrapolate(obs, target=target, params=["lr", "tau"], model=model)
            times = []
            for repeat in range(repeats):
                start = time.perf_counter()
                res = extrapolate(
                    obs,
                    target=target,
                    params=["lr", "tau"],
                    model=model,
                    seed=repeat,
                )
                times.append(time.perf_counter() - start)
        rows.append(
            (n_obs, len(ladder), n_boot, model, min(times), statistics.median(times), res.model)
        )
    load_after = os.getloadavg()[0]
    lines = [
        "# extrapolate() speed",
        "",
        "Command: `python benchmarks/extrapolate_speed.py`",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}; 1-minute load average "
        f"{load_before:.1f} before and {load_after:.1f} after the run (other work shared the "
        "CPUs, so the median is pessimistic; the best is the closer to an idle machine).",
        "",
        "Two log-scale parameters, `params=['lr', 'tau']`. `model='auto'` fits the pooled valley, scores",
        "every model walk-forward (refitting the valley per fold), then bootstraps the kept one by rung;",
        "a named model skips only the choice (the walk-forward table is still computed and reported);",
        "and bootstrap one. The 102-observation rows are the Optuna sampler's refit when new rung",
        "data arrive (3 widths, 34 trials each, 40 resamples).",
        "",
        "| observations | scales | bootstrap resamples | model= | best (s) | median (s) | model kept |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_obs, n_scales, n_boot, asked, best, median, kept in rows:
        lines.append(
            f"| {n_obs:,} | {n_scales} | {n_boot} | {asked} | {best:.3f} | {median:.3f} | {kept} |"
        )
    lines.append("")
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""The developers' scenario suite: synthetic ladders with known truth, one family per failure class.

Each family (``transfersearch.synthetic.FAMILIES``) draws, per seed, a true loss surface over
(lr, tau) whose optimum follows a known law in scale, with an asymmetric upper wall and a divergence
boundary (trials past it are NaN), a ladder of four rungs with fewer trials at the top, noise, and a
target 4–16× beyond the top rung. Through the public API only (``ts.extrapolate(observations,
target=..., model=...)``), for each family and model it scores, at the target:

- regret: the true surface at the recommendation (``res.params``) minus the true optimum; a pick
  past the true divergence boundary counts ``synthetic.DIVERGED_REGRET`` (1.0 loss units);
- diverged picks: recommendations past the true boundary;
- coverage: how often ``res.interval(0.9)`` holds the true optimum, per parameter;

and the same regret and divergence for the null model computed directly: copy the (lr, tau) of the
top rung's best finite trial (the costliest rung with one). Writes ``benchmarks/results/scenarios.md``.

Usage::

    python benchmarks/scenarios.py [--families cliff,one_rung] [--seeds 0-19] [--models auto,nearest]
        [--out benchmarks/results/scenarios.md] [--note "baseline: ..."]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.report import format_table

RESULTS = Path(__file__).resolve().parent / "results" / "scenarios.md"
DEFAULT_SEEDS = "0-19"
#: Resamples per fit: half extrapolate()'s default, so that the default run (7 families x 20 seeds
#: x 2 models) stays within about 5 minutes on a shared 2-core machine.
DEFAULT_BOOTSTRAP = 100
NULL = "null (copy top rung's best)"


@dataclass
class Tally:
    """Per (family, model): the scores of every seed."""

    regrets: list[float] = field(default_factory=list)
    diverged: list[bool] = field(default_factory=list)
    covered: dict[str, list[bool]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)


def parse_seeds(text: str) -> list[int]:
    """``"0-29"`` or ``"0,1,5"`` (or a mix) -> a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            seeds += list(range(int(low), int(high) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def score(scenario: synthetic.Scenario, params: dict[str, float]) -> tuple[float, bool]:
    """(regret at the target, diverged?) of a recommendation on the true surface."""
    regret = scenario.surface.regret(scenario.target, params)
    if math.isnan(regret):
        return synthetic.DIVERGED_REGRET, True
    return regret, False


def null_params(scenario: synthetic.Scenario) -> dict[str, float]:
    """The (lr, tau) of the best finite trial on the costliest rung that has one."""
    finite = [o for o in scenario.observations if math.isfinite(o.value)]
    top_cost = max(ts.default_cost(o.scale) for o in finite)
    top = [o for o in finite if ts.default_cost(o.scale) == top_cost]
    return dict(min(top, key=lambda o: o.value).params)


def commit() -> str:
    """The checked-out commit, with ``+dirty`` when the engine's files differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "transfersearch"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + ("+dirty (uncommitted changes under transfersearch/)" if dirty else "")


def run(families: list[str], seeds: list[int], models: list[str], n_bootstrap: int) -> dict:
    tallies: dict[tuple[str, str], Tally] = {}
    for family in families:
        for seed in seeds:
            scenario = synthetic.make_scenario(family, seed)
            truth = scenario.surface.optimum(scenario.target)
            null = tallies.setdefault((family, NULL), Tally())
            regret, diverged = score(scenario, null_params(scenario))
            null.regrets.append(regret)
            null.diverged.append(diverged)
            for model in models:
                tally = tallies.setdefault((family, model), Tally())
                started = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        res = ts.extrapolate(
                            list(scenario.observations),
                            target=scenario.target,
                            params=["lr", "tau"],
                            model=model,
                            n_bootstrap=n_bootstrap,
                            seed=seed,
                        )
                except ts.TransferSearchError as exc:
                    tally.errors.append(f"seed {seed}: {exc}")
                    continue
                tally.seconds.append(time.perf_counter() - started)
                regret, diverged = score(scenario, res.params)
                tally.regrets.append(regret)
                tally.diverged.append(diverged)
                tally.chosen.append(res.model)
                for name, (low, high) in res.interval(0.9).items():
                    tally.covered.setdefault(name, []).append(low <= truth[name] <= high)
            print(f"{family} seed {seed} done", flush=True)
    return tallies


def coverage(tally: Tally, name: str) -> str:
    hits = tally.covered.get(name, [])
    return f"{sum(hits)}/{len(hits)}" if hits else "–"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--families",
        default=",".join(synthetic.FAMILIES),
        help="comma-separated families (default: all)",
    )
    parser.add_argument(
        "--seeds", default=DEFAULT_SEEDS, help=f"e.g. 0-29 or 0,1,2 (default {DEFAULT_SEEDS})"
    )
    parser.add_argument(
        "--models", default="auto,nearest", help="models passed to extrapolate (auto,nearest)"
    )
    parser.add_argument(
        "--n-bootstrap",
        type=int,
        default=DEFAULT_BOOTSTRAP,
        help=f"resamples per fit ({DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="the markdown table to write")
    parser.add_argument("--note", default="", help="a line for the table's header")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    seeds = parse_seeds(args.seeds)
    models = [m for m in args.models.split(",") if m]
    started = time.perf_counter()
    tallies = run(families, seeds, models, args.n_bootstrap)
    elapsed = time.perf_counter() - started

    rows = []
    for family in families:
        null = tallies[(family, NULL)]
        for model in [*models, NULL]:
            tally = tallies[(family, model)]
            worse = (
                "–"
                if model == NULL or tally.errors
                else str(
                    sum(r > n + 1e-12 for r, n in zip(tally.regrets, null.regrets, strict=True))
                )
            )
            chosen = ", ".join(
                f"{name} {tally.chosen.count(name)}" for name in sorted(set(tally.chosen))
            )
            rows.append(
                [
                    family,
                    model,
                    len(tally.regrets),
                    f"{statistics.fmean(tally.regrets):.4f}" if tally.regrets else "–",
                    f"{statistics.median(tally.regrets):.4f}" if tally.regrets else "–",
                    sum(tally.diverged),
                    worse,
                    coverage(tally, "lr"),
                    coverage(tally, "tau"),
                    len(tally.errors),
                    chosen or "–",
                ]
            )
    table = format_table(
        [
            "family",
            "model",
            "seeds",
            "mean regret",
            "median regret",
            "diverged picks",
            "seeds worse than null",
            "90% covers lr",
            "90% covers tau",
            "errors",
            "model kept",
        ],
        rows,
    )
    goal_rows = []
    for family in families:
        null = tallies[(family, NULL)]
        auto = tallies.get((family, "auto"))
        if auto is None or auto.errors:
            continue
        new_diverged = sum(a and not n for a, n in zip(auto.diverged, null.diverged, strict=True))
        cov = [
            sum(auto.covered[name]) / len(auto.covered[name])
            for name in auto.covered
            if auto.covered[name]
        ]
        goal_rows.append(
            [
                family,
                "yes" if new_diverged == 0 else f"no ({new_diverged})",
                "yes" if statistics.fmean(auto.regrets) <= statistics.fmean(null.regrets) else "no",
                "yes" if cov and all(0.8 <= c <= 0.95 for c in cov) else "no",
            ]
        )
    goals = format_table(
        [
            "family",
            "auto: no diverged pick where the null had none",
            "auto: mean regret <= null's",
            "auto: 90% coverage in 80-95% (both)",
        ],
        goal_rows,
    )
    command = "python benchmarks/scenarios.py" + "".join(
        f" {flag} {value}"
        for flag, value, default in (
            ("--families", args.families, ",".join(synthetic.FAMILIES)),
            ("--seeds", args.seeds, DEFAULT_SEEDS),
            ("--models", args.models, "auto,nearest"),
            ("--n-bootstrap", str(args.n_bootstrap), str(DEFAULT_BOOTSTRAP)),
        )
        if value != default
    )
    description = "\n".join(f"- `{name}`: {synthetic.FAMILIES[name][0]}." for name in families)
    errors = [
        f"- {family}, {model}: {message}"
        for (family, model), tally in tallies.items()
        for message in tally.errors[:3]
    ]
    text = "\n".join(
        [
            "# Scenario suite: known truth, one family per failure class",
            "",
            f"Command: `{command}`  ",
            f"Seeds: {seeds[0]}–{seeds[-1]} ({len(seeds)})"
            if seeds == list(range(seeds[0], seeds[-1] + 1))
            else f"Seeds: {seeds}",
            f"Engine: commit {commit()}; {elapsed:.0f} s wall on a shared 2-core machine.",
            *([f"**{args.note}**"] if args.note else []),
            "",
            "Each seed draws the truth's free constants (the optimum at the smallest rung, the drift "
            "exponents within each family's range), the trials and the noise "
            "(`transfersearch.synthetic.make_scenario(family, seed)`). Regret = true loss at "
            "`res.params` minus the true optimum at the target (loss units; a pick past the true "
            f"divergence boundary counts {synthetic.DIVERGED_REGRET}). Coverage: seeds whose "
            "`res.interval(0.9)` holds the true optimum. The null model copies the (lr, tau) of the "
            f"top rung's best finite trial. `extrapolate(..., n_bootstrap={args.n_bootstrap}, "
            "seed=seed)`, warnings silenced.",
            "",
            "Families:",
            "",
            description,
            "",
            "```",
            table,
            "```",
            "",
            "Goals (issue 18, item 6):",
            "",
            "```",
            goals,
            "```",
            "",
            *(["Errors (first three per cell):", "", *errors, ""] if errors else []),
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

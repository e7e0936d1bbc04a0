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

and the same regret and divergence for the baselines of ``benchmarks/baselines.py`` (lr and tau in
log space): the null (copy the (lr, tau) of the top rung's best finite trial, the costliest rung
with one), per-rung argmin + log-linear least squares, and Step Law's 0.25% band + the same least
squares. Writes ``benchmarks/results/scenarios.md``.

``one_rung`` is redrawn here (:func:`one_rung`, issue 25): ``synthetic``'s generator draws each
larger rung's trials around that rung's true optimum, which hands the null the answer.

``--models default`` (the default) calls ``extrapolate`` without ``model=``; other names are passed
as ``model=``. Usage::

    python benchmarks/scenarios.py [--families cliff,one_rung] [--seeds 0-79] [--models default,nearest]
        [--out benchmarks/results/scenarios.md] [--note "baseline: ..."]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import statistics
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from baselines import ARGMIN, BAND, NULL, baselines
from fit_call import accepted, dropped_note, readout
from provenance import commit

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.report import format_table

RESULTS = Path(__file__).resolve().parent / "results" / "scenarios.md"
#: 80 seeds: a calibrated 90% interval then holds the truth in 66-77 of them in 95% of repeats
#: (:func:`calibrated_range`), against 15-20 of 20, where 20/20 happens one time in eight.
DEFAULT_SEEDS = "0-79"
DEFAULT_MODELS = "default"
#: ``--models`` name for ``extrapolate`` called without ``model=``, and its row's label.
OURS = "ours"
BASELINES = (NULL, ARGMIN, BAND)
PARAMS = ("lr", "tau")
ONE_RUNG_NOTE = (
    "; **redrawn here** (`scenarios.one_rung`, issue 25): the larger rungs' 1-2 trials are drawn "
    "log-uniformly in the box searched on the smallest rung, as that rung's were, not around "
    "each rung's true optimum as `synthetic`'s generator does (which hands the null the answer)."
)


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


def one_rung(seed: int) -> synthetic.Scenario:
    """``one_rung`` with its larger rungs' trials drawn as a user without the answer would place them.

    ``synthetic.make_scenario("one_rung", seed)`` draws the truth, the 24 trials of the smallest rung
    (log-uniform in a box around the user's guess) and 1-2 trials per larger rung at that rung's
    *true* optimum times a log-normal factor (sd 0.4): the null copying the top rung's best then
    copies a point 0.4 log units from the answer (issue 25). Here the larger rungs keep their
    scales and trial counts, but each trial is drawn the way the smallest rung's were: log-uniform
    in the box searched there (the smallest rung's trials' range in lr and tau), from a
    generator seeded by ``(seed, 25)``.
    """
    drawn = synthetic.make_scenario("one_rung", seed)
    costs = sorted({ts.default_cost(o.scale) for o in drawn.observations})
    rungs = [[o for o in drawn.observations if ts.default_cost(o.scale) == c] for c in costs]
    first = rungs[0]
    box = {
        name: (
            math.log(min(o.params[name] for o in first)),
            math.log(max(o.params[name] for o in first)),
        )
        for name in PARAMS
    }
    rng = np.random.default_rng([seed, 25])
    observations = list(first)
    for rung in rungs[1:]:
        for _ in rung:
            params = {name: math.exp(rng.uniform(*box[name])) for name in PARAMS}
            observations.append(drawn.surface.observe(rung[0].scale, params, rng))
    return dataclasses.replace(drawn, observations=tuple(observations))


def make_scenario(family: str, seed: int) -> synthetic.Scenario:
    """``synthetic.make_scenario``, with ``one_rung`` redrawn by :func:`one_rung`."""
    return one_rung(seed) if family == "one_rung" else synthetic.make_scenario(family, seed)


def run(families: list[str], seeds: list[int], models: list[str]) -> dict[tuple[str, str], Tally]:
    tallies: dict[tuple[str, str], Tally] = {}
    for family in families:
        for seed in seeds:
            scenario = make_scenario(family, seed)
            truth = scenario.surface.optimum(scenario.target)
            observations = list(scenario.observations)
            try:
                predicted = baselines(observations, scenario.target, PARAMS, PARAMS)
            except ValueError as exc:
                predicted = {}
                for name in BASELINES:
                    tallies.setdefault((family, name), Tally()).errors.append(f"seed {seed}: {exc}")
            for name, params in predicted.items():
                tally = tallies.setdefault((family, name), Tally())
                regret, diverged = score(scenario, params)
                tally.regrets.append(regret)
                tally.diverged.append(diverged)
            for model in models:
                tally = tallies.setdefault((family, label(model)), Tally())
                wanted: dict[str, object] = {"seed": seed}
                if model != DEFAULT_MODELS:
                    wanted["model"] = model
                keywords, _ = accepted(wanted)
                started = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        res = ts.extrapolate(
                            observations, target=scenario.target, params=list(PARAMS), **keywords
                        )
                except ts.TransferSearchError as exc:
                    tally.errors.append(f"seed {seed}: {exc}")
                    continue
                tally.seconds.append(time.perf_counter() - started)
                regret, diverged = score(scenario, res.params)
                tally.regrets.append(regret)
                tally.diverged.append(diverged)
                tally.chosen.append(str(readout(res, "model")))
                for name, (low, high) in res.interval(0.9).items():
                    tally.covered.setdefault(name, []).append(low <= truth[name] <= high)
            print(f"{family} seed {seed} done", flush=True)
    return tallies


def calibrated_range(n: int, level: float = 0.9, mass: float = 0.95) -> tuple[int, int]:
    """The central ``mass`` range of hits of an interval of coverage ``level`` over ``n``
    independent seeds (binomial, by hand: the least ``k`` with ``P(X <= k) >= (1 - mass)/2`` and
    the least with ``P(X <= k) >= (1 + mass)/2``)."""
    pmf = [math.comb(n, k) * level**k * (1.0 - level) ** (n - k) for k in range(n + 1)]
    cdf = list(itertools.accumulate(pmf))
    low = next(k for k, c in enumerate(cdf) if c >= (1.0 - mass) / 2.0)
    high = next(k for k, c in enumerate(cdf) if c >= (1.0 + mass) / 2.0)
    return low, high


def label(model: str) -> str:
    """A ``--models`` entry's row label."""
    return OURS if model == DEFAULT_MODELS else f"ours, model={model}"


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
        "--models",
        default=DEFAULT_MODELS,
        help=f"models passed to extrapolate; {DEFAULT_MODELS!r}: no model= ({DEFAULT_MODELS})",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="the markdown table to write")
    parser.add_argument("--note", default="", help="a line for the table's header")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    seeds = parse_seeds(args.seeds)
    models = [m for m in args.models.split(",") if m]
    started = time.perf_counter()
    tallies = run(families, seeds, models)
    elapsed = time.perf_counter() - started

    rows = []
    for family in families:
        null = tallies[(family, NULL)]
        for model in [*(label(m) for m in models), *BASELINES]:
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
        auto = tallies.get((family, OURS))
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
            "ours: no diverged pick where the null had none",
            "ours: mean regret <= null's",
            "ours: 90% coverage in 80-95% (both)",
        ],
        goal_rows,
    )
    command = "python benchmarks/scenarios.py" + "".join(
        f" {flag} {value}"
        for flag, value, default in (
            ("--families", args.families, ",".join(synthetic.FAMILIES)),
            ("--seeds", args.seeds, DEFAULT_SEEDS),
            ("--models", args.models, DEFAULT_MODELS),
        )
        if value != default
    )
    description = "\n".join(
        f"- `{name}`: {synthetic.FAMILIES[name][0]}"
        + (ONE_RUNG_NOTE if name == "one_rung" else ".")
        for name in families
    )
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
            f"Date: {time.strftime('%Y-%m-%d %H:%M %Z')}; engine: commit {commit()}; "
            f"{elapsed:.0f} s wall on a shared 2-core machine.",
            *([f"**{args.note}**"] if args.note else []),
            "",
            "Each seed draws the truth's free constants (the optimum at the smallest rung, the drift "
            "exponents within each family's range), the trials and the noise "
            "(`transfersearch.synthetic.make_scenario(family, seed)`; `one_rung` redrawn, below). "
            "Regret = true loss at "
            "`res.params` minus the true optimum at the target (loss units; a pick past the true "
            f"divergence boundary counts {synthetic.DIVERGED_REGRET}). Coverage: seeds whose "
            "`res.interval(0.9)` holds the true optimum; a calibrated interval holds it in "
            f"{'–'.join(map(str, calibrated_range(len(seeds))))} of {len(seeds)} seeds in 95% of "
            "repeats (binomial). `ours` = `extrapolate(obs, target, "
            "params=['lr', 'tau'], seed=seed)`, warnings "
            "silenced. Baselines (`benchmarks/baselines.py`, lr and tau in log space): "
            f"`{NULL}` copies the (lr, tau) of the top rung's best finite trial; `{ARGMIN}` "
            f"regresses each rung's best trial, `{BAND}` every trial within 0.25% of its rung's "
            "best, by least squares of log(param) on log(width), log(dataset_size).",
            *([note, ""] if (note := dropped_note({"seed": 0})) else []),
            "",
            "Families:",
            "",
            description,
            "",
            "```",
            table,
            "```",
            "",
            "Goals (issue 25's benchmarks table):",
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

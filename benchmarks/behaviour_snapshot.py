"""Behaviour snapshot: the engine's, the planner's and the Optuna sampler's numbers, for refactors.

A refactor that claims "behaviour unchanged" runs ``--check``: every number the snapshot holds must
equal the committed one (relative tolerance 1e-9; texts are not compared, so a reworded message is
not a difference). What it records, all deterministic (fixed seeds):

- ``extrapolate`` on every family of :mod:`transfersearch.synthetic` (seeds 0-2): the
  decision, the law's point, standard errors, the 90% interval, the model scores, P(diverge), the
  stable-up-to bound and a 2-run portfolio; ``validate`` on seed 0 of each family;
- a 120-trial Optuna study driven by ``TransferSampler`` over the synthetic ladder with
  ``RandomSampler(seed=0)``: every trial's parameters and value, then ``extrapolate`` on the study.

Usage: ``python benchmarks/behaviour_snapshot.py --check`` (compare with
``benchmarks/results/behaviour_snapshot.json``); ``--write`` replaces that file, after a change that
is meant to move the numbers (say which in the commit).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import optuna

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.integrations.optuna import TransferSampler

SNAPSHOT = Path(__file__).parent / "results" / "behaviour_snapshot.json"
#: Sweep seeds per family, resamples per fit, trials of the Optuna study.
SEEDS, N_TRIALS = (0, 1, 2), 120
#: The Optuna study's target.
TARGET = ts.Scale(width=1024, dataset_size=2e4, batch_size=64)
#: Relative tolerance of the comparison: the same arithmetic on the same machine gives equal bits;
#: this allows for a reordered but equivalent sum.
RTOL = 1e-9


def _rounded(value: Any) -> Any:
    """JSON-ready, floats to 10 significant digits (and inf/NaN as text)."""
    if isinstance(value, float):
        return float(f"{value:.10g}") if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _fit(observations: list[ts.Observation], target: ts.Scale, seed: int) -> dict[str, Any]:
    res = ts.extrapolate(observations, target=target, seed=seed)
    return {
        "params": res.params,
        "law": res.law_params,
        "stderr": res.stderr,
        "model": res.model,
        "interval": {k: list(v) for k, v in res.interval(0.9).items()},
        "scores": res.model_scores,
        "p_diverge": res.p_diverge,
        "stable_up_to": res.stable_up_to,
        "cand2": [c.params for c in res.candidates(2)],
    }


def _scenarios() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for family in synthetic.FAMILIES:
        for seed in SEEDS:
            scenario = synthetic.make_scenario(family, seed)
            out[f"{family}/{seed}"] = _fit(list(scenario.observations), scenario.target, seed)
        first = list(synthetic.make_scenario(family, 0).observations)
        held = ts.validate(first, seed=0)
        out[f"validate/{family}"] = {
            "pred": held.predicted,
            "regret": held.regret,
            "obs": held.observed,
        }
    return out


def _optuna_study() -> dict[str, Any]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = synthetic.make_space()
    base = optuna.samplers.RandomSampler(seed=0)
    sampler = TransferSampler(space, synthetic.LADDER, base_sampler=base, seed=0)

    def objective(trial: optuna.Trial) -> float:
        scale, hp = sampler.suggest(trial)
        return 1.0 + synthetic.regret(scale, hp.coordinates)

    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=N_TRIALS)
    res = ts.extrapolate(study, target=TARGET)
    return {"optuna": [[t.params, t.value] for t in study.trials], "optuna_extrap": res.params}


def snapshot() -> dict[str, Any]:
    """Every number the snapshot records, rounded for JSON."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(_rounded({**_scenarios(), **_optuna_study()}))


def differences(expected: Any, got: Any, path: str = "") -> list[str]:
    """Where two snapshots' numbers differ (texts are not compared)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        out = [f"{path}/{k}: on one side only" for k in sorted(set(expected) ^ set(got))]
        for key in sorted(set(expected) & set(got)):
            out += differences(expected[key], got[key], f"{path}/{key}")
        return out
    if isinstance(expected, list) and isinstance(got, list):
        if len(expected) != len(got):
            return [f"{path}: {len(expected)} entries, now {len(got)}"]
        return [
            d
            for i, pair in enumerate(zip(expected, got))
            for d in differences(*pair, f"{path}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(got, numbers):
        close = math.isclose(expected, got, rel_tol=RTOL, abs_tol=1e-12)
        return [] if close else [f"{path}: {expected!r}, now {got!r}"]
    if isinstance(expected, str) and isinstance(got, str):
        return []
    return [] if expected == got else [f"{path}: {expected!r:.80}, now {got!r:.80}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare with the committed snapshot")
    mode.add_argument("--write", action="store_true", help="replace the committed snapshot")
    args = parser.parse_args()
    now = snapshot()
    if args.write:
        SNAPSHOT.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {SNAPSHOT} ({len(now)} entries)")
        return 0
    found = differences(json.loads(SNAPSHOT.read_text()), now)
    print("\n".join(found[:40]))
    print(f"{len(found)} differences from {SNAPSHOT.name}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

"""Random sub-problems of the real sweeps: does ``extrapolate`` crash, refuse, or answer absurdly?

Each problem draws one data set (Marin Lion or Mars, Step Law dense or MoE, ``../shared/data``),
2-6 of its scales as the ladder, a held-out scale as the target, and one of these modes:

* ``plain``: every swept parameter fitted, minimised as published;
* ``maximize``: the metric negated and maximised (the same problem seen from the other side);
* ``far``: the target 30-1000 times the largest rung's scale;
* ``few``: 1-3 trials per rung;
* ``scale_bs``: the batch size moved from the parameters into the scale;
* ``subset``: 1-3 parameters fitted while the rest still vary (the ``unfitted`` warning);
* ``raw``: Marin's blown-up losses (7-10 nats) left as finite values (the ``far`` warning).

Marin losses above 6 are diverged runs (NaN) except in ``raw``, as the data's README says. A
problem *crashes* when ``extrapolate``, ``summary()``, ``interval()`` or ``candidates(2)`` raises
anything but a ``TransferSearchError``; it is *absurd* when an answer (the decision or a
candidate) is not finite, a momentum coefficient (``beta*``) is at or past 1, a parameter whose
trials are all >= 0 goes negative, or (except for ``far``) a log parameter lands more than
max(1, its trials' log range) beyond every trial. Writes ``benchmarks/results/real_sweep_fuzz.md``.

    python benchmarks/real_sweep_fuzz.py --data-dir ../shared/data [--problems 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import random
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import transfersearch as ts

RESULTS = Path(__file__).resolve().parent / "results" / "real_sweep_fuzz.md"
MODES = ("plain", "maximize", "far", "few", "scale_bs", "subset", "raw")
#: Marin's README: losses above ~6 nats are diverged runs.
DIVERGED_LOSS = 6.0


def sources(data_dir: Path) -> dict[str, tuple[pd.DataFrame, list[str], list[str], str]]:
    """Each data set: its rows, scale columns, parameter columns and metric column."""
    out = {}
    for opt in ("lion", "mars"):
        frame = pd.read_csv(data_dir / f"marin_{opt}_sweeps.csv", dtype={"loss": str})
        frame["loss"] = [math.nan if str(v).startswith(">") else float(v) for v in frame["loss"]]
        params = ["lr", "weight_decay", "batch_size", "beta1", "beta2", "warmup"]
        out[opt] = (frame, ["N", "D"], params, "loss")
    dense = pd.read_csv(data_dir / "steplaw_dense_lr_bs_loss_below_1B.csv")
    out["dense"] = (dense, ["N", "D"], ["lr", "bs"], "smooth loss")
    moe = pd.read_csv(data_dir / "steplaw_moe_lr_bs_loss.csv")
    out["moe"] = (moe, ["Na", "D"], ["lr", "bs"], "smooth loss")
    return out


def problem(rng: random.Random, data: dict[str, Any]) -> tuple[str, str, list, dict, list]:
    """One random problem: (data set, mode, observations, target, fitted parameters)."""
    name = rng.choice(sorted(data))
    frame, svars, params, metric = data[name]
    mode = rng.choice(MODES if name in ("lion", "mars") else MODES[:-1])
    scales = frame[svars].drop_duplicates().values.tolist()
    rng.shuffle(scales)
    k = rng.randint(2, min(6, len(scales) - 1))
    ladder, held = scales[:k], scales[k]
    target = dict(zip(svars, held, strict=True))
    if mode == "far":
        factor = rng.choice([30, 100, 1000])
        target = {v: max(s[i] for s in ladder) * factor for i, v in enumerate(svars)}
    obs = []
    for scale in ladder:
        rows = frame[(frame[svars[0]] == scale[0]) & (frame[svars[1]] == scale[1])]
        if mode == "few":
            rows = rows.sample(
                n=min(len(rows), rng.randint(1, 3)), random_state=rng.randint(0, 9999)
            )
        obs += [observation(row, svars, params, metric, mode) for row in rows.to_dict("records")]
    fitted = [p for p in params if p in obs[0].params]
    if mode == "subset":
        fitted = rng.sample(fitted, rng.randint(1, min(3, len(fitted))))
    if mode == "scale_bs":
        moved = "bs" if "bs" in params else "batch_size"
        target[moved] = float(np.median([o.scale[moved] for o in obs]))
    return name, mode, obs, target, fitted


def observation(row: dict, svars: Sequence[str], params: Sequence[str], metric: str, mode: str):
    value = float(row[metric])
    if metric == "loss" and mode != "raw" and value > DIVERGED_LOSS:
        value = math.nan
    scale = {v: float(row[v]) for v in svars}
    values = {p: float(row[p]) for p in params}
    if mode == "scale_bs":
        moved = "bs" if "bs" in values else "batch_size"
        scale[moved] = values.pop(moved)
    return ts.Observation(scale, values, -value if mode == "maximize" else value)


def absurd(obs: list, fitted: list[str], runs: list[dict[str, float]], mode: str) -> list[str]:
    """What is wrong with the answers ``runs`` (the decision first), by the module's rules."""
    found = []
    for run in runs:
        for name in fitted:
            value = run[name]
            tried = np.array([o.params[name] for o in obs])
            if not math.isfinite(value):
                found.append(f"{name} not finite")
            elif name.startswith("beta") and value >= 1.0:
                found.append(f"{name}={value:.4g} >= 1")
            elif value < 0 <= tried.min():
                found.append(f"{name}={value:.4g} < 0")
            elif mode != "far" and tried.min() > 0 and value > 0:
                span = math.log(tried.max() / tried.min())
                out = max(math.log(tried.min() / value), math.log(value / tried.max()), 0.0)
                if out > max(1.0, span):
                    found.append(f"{name}={value:.4g}, {out:.1f} log units past the trials")
    return found


def run_one(obs, target, fitted, mode) -> tuple[str, str, set[str]]:
    """(outcome, detail, diagnostic kinds) of one problem."""
    direction = "maximize" if mode == "maximize" else "minimize"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ts.extrapolate(obs, target=target, params=fitted, seed=0, direction=direction)
            res.summary()
            res.interval(0.9)
            runs = [dict(res.params)] + [dict(c.params) for c in res.candidates(2)]
    except ts.TransferSearchError as exc:
        return "refused", str(exc).split(":")[0][:70], set()
    except Exception:  # a bug: counted, the run goes on
        return "crashed", traceback.format_exc(limit=1).strip().splitlines()[-1][:120], set()
    kinds = {d.kind for d in res.diagnostics}
    wrong = absurd(obs, fitted, runs, mode)
    return ("absurd", "; ".join(wrong)[:160], kinds) if wrong else ("ok", "", kinds)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--problems", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rng, data = random.Random(args.seed), sources(args.data_dir)
    tally: Counter[tuple[str, str]] = Counter()
    warned: Counter[tuple[str, str]] = Counter()
    examples: list[str] = []
    start = time.perf_counter()
    for i in range(args.problems):
        name, mode, obs, target, fitted = problem(rng, data)
        outcome, detail, kinds = run_one(obs, target, fitted, mode)
        tally[(mode, outcome)] += 1
        warned.update((mode, kind) for kind in kinds & {"unfitted", "far", "held", "blown_up"})
        if outcome in ("crashed", "absurd", "refused") and len(examples) < 30:
            examples.append(f"| {i} | {name} | {mode} | {outcome} | {detail} |")
        print(f"{i} {name} {mode}: {outcome} {detail}", flush=True)
    write(args, tally, warned, examples, time.perf_counter() - start)


def write(args, tally, warned, examples, seconds: float) -> None:
    lines = [
        "# extrapolate on random sub-problems of the real sweeps",
        "",
        f"Command: `python benchmarks/real_sweep_fuzz.py --data-dir ../shared/data --problems "
        f"{args.problems} --seed {args.seed}`; {seconds:.0f} s. The modes and the rules for "
        "*crashed* and *absurd* are in the script's docstring.",
        "",
        "| mode | problems | ok | refused | crashed | absurd | warned `unfitted` | warned `far` "
        "| warned `held` |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        counts = [tally[(mode, o)] for o in ("ok", "refused", "crashed", "absurd")]
        marks = [warned[(mode, k)] for k in ("unfitted", "far", "held")]
        lines.append(f"| {mode} | {sum(counts)} | " + " | ".join(map(str, counts + marks)) + " |")
    lines += ["", "Problems not ok (the first 30):", ""]
    if examples:
        lines += ["| # | data | mode | outcome | detail |", "|---:|---|---|---|---|", *examples]
    else:
        lines.append("(none)")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

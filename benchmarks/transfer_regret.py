"""Regret at the target vs proxy compute: transfersearch, naive copy, µP with fixed weight decay, TPE.

The task is the demo's (a character-level MLP language model trained for several epochs on Python's
standard-library source, see ``transfersearch_demo.task``) on a bigger ladder than
``transfersearch demo``: widths 16, 32, 64 × dataset sizes 1024, 2048, 4096 (nine rungs), and the
same target, width 256 with 32768 samples (4× wider, 8× more data than the largest proxy). The two
ratios differ on purpose: were they equal, constant τ_epoch under µP (weight decay ∝ width, ∝ 1/N)
would give the same hidden weight decay as holding it fixed, and ``transfersearch`` and
``mup_fixed_wd`` would differ only in the input group's decay and in their coordinates.

For each proxy budget (trials over the whole ladder, run by Optuna with ``TransferSampler``) and
each sweep seed (the samplers' seeds; training itself is seeded identically everywhere):

- ``transfersearch``: extrapolate the fitted laws to the target, concretise with µP (weight decay ∝
  width, constant τ_epoch across dataset size);
- ``copy_best_proxy``: the largest rung's best trial, its (lr, weight_decay) copied to every group;
- ``mup_fixed_wd``: the same trial under µP learning rates with weight decay held fixed;
- ``no_extrapolation``: the null model, ``extrapolate(..., model="constant")``: the one model with
  no drift (the rungs' optimum held in the invariant coordinates), concretised at the target as
  ``transfersearch`` is.

Against them, Optuna's TPE tuning directly at the target (one study per seed): regret of the best of
its first k runs.
"Same compute" means the number of target runs whose cost (width² × dataset_size × epochs) equals
the proxy sweep's; the proxies here are so much cheaper that even the largest sweep costs less than
one target run, so the TPE row at equal compute gets one run (more compute than the proxies).

Regret = final validation loss − the best loss any target run reached (a 4 × 3 grid over base_lr ×
tau_epoch at the target, every method's runs and every TPE run). All target runs share one seed
(common random numbers). Writes ``benchmarks/results/transfer_regret.md``.

Usage::

    python benchmarks/transfer_regret.py [--budgets 54,108,216] [--seeds 0,1] [--tpe-runs 8]
        [--ladder older|demo] [--target-width W] [--target-dataset-size N] [--grid-lr L1,L2,...]

``--ladder demo`` runs the demo's own ladder (widths 32 and 64 × the same dataset sizes; see
:data:`LADDERS`) and writes ``results/transfer_regret.demo_ladder.md``.

The target runs are cached in ``--out`` (``target_runs.json``, keyed by the concrete hyperparameters);
``--prefill`` trains only those no engine change affects (TPE at the target and the grid) ahead of
a full run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import torch

from transfersearch import default_cost, extrapolate
from transfersearch.readers import as_observations
from transfersearch.report import format_table
from transfersearch.space import Float
from transfersearch_demo import app as demo
from transfersearch_demo import task

CONFIG = demo.DemoConfig(
    name="benchmark",
    widths=(16, 32, 64),
    dataset_sizes=(1024, 2048, 4096),
    batch_size=64,
    epochs=4,
    target_width=256,
    target_dataset_size=32768,
    trials=216,
    grid_lr=(0.003, 0.008, 0.02, 0.05),
    grid_tau=(0.3, 1.0, 3.0),
)
#: ``--ladder``: the older ladder above (widths 16, 32, 64; the default, comparable across engine
#: versions) or ``transfersearch demo``'s own (widths 32 and 64, 240 trials: width 16's runs are
#: too noisy to place an optimum, README "The demo"), with the same target, reference grid and
#: target-run cache (a target run depends only on the target and its hyperparameters).
LADDERS = {
    "older": CONFIG,
    "demo": replace(
        CONFIG, widths=demo.MODES["default"].widths, trials=demo.MODES["default"].trials
    ),
}
#: The null model: no drift in the invariant coordinates (``model="constant"``), concretised at the
#: target like transfersearch's own prediction (µP, constant tau_epoch). extrapolate() must not do
#: worse than this (issue 25: ≤ the null in every seed).
NULL = "no_extrapolation"
METHODS = (*demo.METHODS, NULL)
RESULTS = Path(__file__).resolve().parent / "results" / "transfer_regret.md"
DEMO_LADDER_RESULTS = "transfer_regret.demo_ladder.md"


def proxy_compute(study: optuna.Study, config: demo.DemoConfig) -> tuple[float, float]:
    """(Σ cost of the finished proxy trials / cost of one target run, Σ training seconds)."""
    target_cost = default_cost(config.target.replace(epochs=config.epochs))
    relative = seconds = 0.0
    for trial in study.trials:
        if not trial.state.is_finished():
            continue
        scale = {k[6:]: v for k, v in trial.user_attrs.items() if k.startswith("scale.")}
        if not scale:
            continue
        relative += default_cost(config.target.replace(**scale, epochs=config.epochs)) / target_cost
        seconds += float(trial.user_attrs.get("seconds", 0.0))
    return relative, seconds


def positive_int(text: str) -> int:
    """An argparse type: a whole number > 0 (a width, a dataset size)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a whole number > 0, got {text!r}; e.g. 1024")
    return value


def positive_floats(text: str) -> tuple[float, ...]:
    """An argparse type: comma-separated numbers > 0 (the reference grid's base_lr values)."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers > 0, got {text!r}; e.g. 0.003,0.008,0.02"
        )
    return values


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budgets",
        default="54,108,216",
        help="proxy trials per sweep, comma-separated (default 54,108,216)",
    )
    parser.add_argument(
        "--seeds", default="0,1", help="sweep seeds (samplers), comma-separated (default 0,1)"
    )
    parser.add_argument("--tpe-runs", type=int, default=8, help="TPE runs at the target (8)")
    parser.add_argument(
        "--ladder",
        choices=sorted(LADDERS),
        default="older",
        help="the proxy ladder: 'older' (widths 16/32/64, default) or 'demo' (the demo's 32/64)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("benchmark-transfer-regret"),
        help="working folder: studies and the target-run cache (resumable)",
    )
    parser.add_argument(
        "--target-width",
        type=positive_int,
        default=None,
        help="the target's width (default 256; a larger one needs a GPU for its target runs)",
    )
    parser.add_argument(
        "--target-dataset-size",
        type=positive_int,
        default=None,
        help="the target's dataset size in samples (default 32768)",
    )
    parser.add_argument(
        "--grid-lr",
        type=positive_floats,
        default=None,
        help="the reference grid's base_lr values at the target, comma-separated (default "
        "0.003,0.008,0.02,0.05; a farther target's optimum may want lower ones)",
    )
    parser.add_argument("--device", default="auto", choices=("cpu", "cuda", "auto"))
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="the markdown table to write (default: results/transfer_regret.md for the older "
        "ladder, results/transfer_regret.demo_ladder.md for the demo's)",
    )
    parser.add_argument(
        "--prefill",
        action="store_true",
        help="train only the target runs no extrapolation engine affects (TPE at the target, the "
        "reference grid) into the --out cache, and exit; a later full run reuses them",
    )
    args = parser.parse_args(argv)
    config_ = replace(
        LADDERS[args.ladder],
        target_width=CONFIG.target_width if args.target_width is None else args.target_width,
        target_dataset_size=(
            CONFIG.target_dataset_size
            if args.target_dataset_size is None
            else args.target_dataset_size
        ),
    )
    if args.grid_lr is not None:
        config_ = replace(config_, grid_lr=args.grid_lr)
    # the proxy sweeps do not depend on the target (the sampler sees the ladder only), so a sweep
    # folder is reused across targets; the TPE studies at the target are named by it
    target_tag = f"{config_.target_width}x{config_.target_dataset_size}"
    target_options = "".join(
        f" --{flag} {value}"
        for flag, value, default in (
            ("target-width", config_.target_width, CONFIG.target_width),
            ("target-dataset-size", config_.target_dataset_size, CONFIG.target_dataset_size),
        )
        if value != default
    )
    if args.results is None:
        args.results = RESULTS if args.ladder == "older" else RESULTS.with_name(DEMO_LADDER_RESULTS)
        if target_options:
            args.results = args.results.with_suffix(f".target{target_tag}.md")
    prefix = "benchmark" if args.ladder == "older" else f"benchmark-{args.ladder}-ladder"
    started = time.perf_counter()
    budgets = [int(b) for b in args.budgets.split(",")]
    seeds = [int(b) for b in args.seeds.split(",")]
    device = task.resolve_device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    space = demo.build_space(config_)
    storage = f"sqlite:///{args.out / 'studies.db'}"
    runs = demo.TargetRuns(args.out / "target_runs.json", config_, device)
    target = config_.target
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    # 1. proxy sweeps and the three methods, per budget and seed (skipped by --prefill)
    sweeps: list[dict[str, Any]] = []
    for budget in [] if args.prefill else budgets:
        for seed in seeds:
            config = replace(config_, trials=budget)
            study = demo.sweep(
                config,
                space,
                storage,
                device,
                budget,
                seed,
                study_name=f"{prefix}-{budget}-seed{seed}",
                progress=False,
            )
            observations = as_observations(study)
            result = extrapolate(observations, target=target, params=list(demo.PARAMS), seed=seed)
            null = extrapolate(
                observations,
                target=target,
                params=list(demo.PARAMS),
                model="constant",
                seed=seed,
            )
            best_trial = demo.best_proxy(observations)
            hps = demo.method_hyperparameters(config, space, result.params, best_trial)
            hps[NULL] = demo.method_hyperparameters(config, space, null.params, best_trial)[
                "transfersearch"
            ]
            losses = {m: runs.loss(f"{m} @ {budget} trials seed {seed}", hps[m]) for m in METHODS}
            relative, seconds = proxy_compute(study, config_)
            sweeps.append(
                {
                    "budget": budget,
                    "seed": seed,
                    "relative_compute": relative,
                    "proxy_seconds": seconds,
                    "losses": losses,
                    "predicted": dict(result.params),
                    "model": result.model,
                }
            )
            print(f"budget {budget} seed {seed}: {losses}")

    # 2. TPE directly at the target, one study per seed
    def objective(trial: optuna.Trial) -> float:
        coords = {
            name: trial.suggest_float(name, dist.low, dist.high, log=dist.log)
            for name, dist in space.distributions.items()
            if isinstance(dist, Float)
        }
        return float(runs.loss(f"tpe #{trial.number}", space.concretize(coords, target)))

    tpe_values: dict[int, list[float]] = {}
    for seed in seeds:
        tpe = optuna.create_study(
            storage=storage,
            study_name=f"benchmark-tpe-seed{seed}"
            + ("" if not target_options else f"-{target_tag}"),
            load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=3),
        )
        done = len([t for t in tpe.trials if t.state.is_finished()])
        if done < args.tpe_runs:
            tpe.optimize(objective, n_trials=args.tpe_runs - done)
        tpe_values[seed] = [
            t.value if t.value is not None else math.nan
            for t in sorted(tpe.trials, key=lambda t: t.number)[: args.tpe_runs]
        ]

    # 3. the reference grid at the target
    for lr in config_.grid_lr:
        for tau in config_.grid_tau:
            runs.loss(
                f"grid {lr:g} {tau:g}", space.concretize({"base_lr": lr, "tau_epoch": tau}, target)
            )

    if args.prefill:
        print(f"prefilled {len(runs.cache)} target runs in {args.out}")
        return

    # the runs at this target on this device (a folder reused across targets holds others too)
    here_runs = [
        v for k, v in runs.cache.items() if json.loads(k)[1:3] == [device.type, target.to_dict()]
    ]
    finite = [v["val_loss"] for v in here_runs if math.isfinite(v["val_loss"])]
    best = min(finite)
    best_label = next(v["label"] for v in here_runs if v["val_loss"] == best)

    def regret(value: float) -> float:
        return value - best if math.isfinite(value) else math.inf

    def tpe_regret(seed: int, k: int) -> float:
        head = [v for v in tpe_values[seed][:k] if math.isfinite(v)]
        return regret(min(head)) if head else math.inf

    def cell(values: list[float]) -> str:
        return f"{mean(values):.4f} (" + ", ".join(f"{v:.3f}" for v in values) + ")"

    rows = []
    for budget in budgets:
        here = [e for e in sweeps if e["budget"] == budget]
        relative = mean([e["relative_compute"] for e in here])
        equal_k = max(1, math.floor(relative))
        rows.append(
            [
                budget,
                f"{relative:.3f}",
                f"{mean([e['proxy_seconds'] for e in here]):.0f}",
                *[cell([regret(e["losses"][m]) for e in here]) for m in METHODS],
                cell([tpe_regret(seed, equal_k) for seed in seeds]) + f" [{equal_k} run]",
            ]
        )
    table = format_table(
        [
            "proxy trials",
            "proxy compute (target runs)",
            "proxy train s",
            *METHODS,
            "TPE at target, same compute",
        ],
        rows,
    )
    tpe_rows = [
        [k, cell([tpe_regret(seed, k) for seed in seeds])]
        for k in (1, 2, 4, 8, 16)
        if k <= args.tpe_runs
    ]
    tpe_table = format_table(["TPE runs at the target", "regret: mean (per seed)"], tpe_rows)
    elapsed = time.perf_counter() - started
    target_seconds = sum(v["seconds"] for v in here_runs) / max(1, len(here_runs))
    text = "\n".join(
        [
            "# Regret at the target vs proxy compute",
            "",
            f"Command: `python benchmarks/transfer_regret.py --budgets {args.budgets} "
            f"--seeds {args.seeds} --tpe-runs {args.tpe_runs}"
            + ("" if args.ladder == "older" else f" --ladder {args.ladder}")
            + target_options
            + (
                ""
                if args.grid_lr is None
                else " --grid-lr " + ",".join(f"{v:g}" for v in args.grid_lr)
            )
            + "`",
            "",
            f"Written by `benchmarks/transfer_regret.py` ({time.strftime('%Y-%m-%d')}, "
            f"{platform.machine()}, {os.cpu_count()} CPU cores, device {device.type}, "
            f"torch {torch.__version__}, optuna {optuna.__version__}; {elapsed:.0f} s wall, "
            "shared with other processes).",
            "",
            "Task: the demo's character-level MLP language model on Python's standard-library source, "
            f"{config_.epochs} epochs, batch {config_.batch_size}. Ladder: widths {config_.widths} x "
            f"dataset sizes {config_.dataset_sizes}. Target: {target!r}. Regret = final validation "
            f"loss (nats/char) minus the best loss any of the {len(here_runs)} target runs reached "
            f"({best:.4f}, {best_label}). Each cell: mean over sweep seeds {seeds}, then per seed. "
            "Proxy compute = sum over proxy trials of width^2 x dataset_size x epochs, divided by the "
            "same for one target run; 'proxy train s' is the measured training time of the sweep "
            f"(one target run trained in {target_seconds:.0f} s on average here: small proxies are "
            "dominated by per-step overhead, so in seconds the sweeps cost more than in FLOPs).",
            "",
            "```",
            table,
            "```",
            "",
            "TPE (n_startup_trials=3) directly at the target, same coordinates and ranges:",
            "",
            "```",
            tpe_table,
            "```",
            "",
            "Predicted coordinates at the target: "
            + "; ".join(
                f"{e['budget']} trials seed {e['seed']} (model {e['model']}): "
                + ", ".join(f"{k}={v:.3g}" for k, v in e["predicted"].items())
                for e in sweeps
            )
            + ".",
            "",
            "Raw target losses: `"
            + json.dumps(
                {f"{e['budget']}/seed{e['seed']}": e["losses"] for e in sweeps}, sort_keys=True
            )
            + "`",
            "",
        ]
    )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

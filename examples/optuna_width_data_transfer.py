"""Optuna + transfersearch: sweep a ladder of widths × dataset sizes, extrapolate to the big run.

Runs in a few seconds: the "training run" is a cheap stand-in, a noisy loss surface over the swept
coordinates whose optimum moves with scale by a known law, so you can see the law recovered:

    optimal base_lr   = 0.02 · (width / 64)^−0.3        (µP removes most, not all, of the drift)
    optimal tau_epoch = 0.8 · (dataset_size / 1e4)^0.15  (τ_epoch is nearly, not exactly, constant)

Replace ``train`` with your own training function: it receives the rung's Scale and concrete
per-group hyperparameters (``hp.groups["hidden"]["lr"]``, ``hp.weight_decay``, ...), for example
through ``transfersearch.integrations.torch.param_groups(model, hp, base_model=...)``.

Usage::

    python examples/optuna_width_data_transfer.py [--trials 120] [--storage sqlite:///proxy.db]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import optuna

import transfersearch as ts
from transfersearch.integrations.optuna import TransferSampler

BASE = ts.Scale(width=64, dataset_size=1e4, batch_size=64)
LADDER = [
    ts.Scale(width=w, dataset_size=n, batch_size=64) for w in (64, 128, 256) for n in (1e4, 4e4)
]
TARGET = ts.Scale(width=2048, dataset_size=6.4e5, batch_size=64)


def true_optimum(scale: ts.Scale) -> dict[str, float]:
    """The stand-in's optimum (what a real sweep would have to discover)."""
    return {
        "base_lr": 0.02 * (scale["width"] / 64) ** -0.3,
        "tau_epoch": 0.8 * (scale["dataset_size"] / 1e4) ** 0.15,
    }


def train(scale: ts.Scale, coords: dict[str, float], rng: np.random.Generator) -> float:
    """A stand-in for training at ``scale``: final loss over log-coordinates, with noise.

    The valley is asymmetric (too high a learning rate costs more than too low) and the loss
    floor falls with scale, as a real run's would.
    """
    best = true_optimum(scale)
    d_lr = math.log(coords["base_lr"] / best["base_lr"])
    d_tau = math.log(coords["tau_epoch"] / best["tau_epoch"])
    if d_lr > 2.5:
        return math.nan  # diverged
    floor = 3.0 * (scale["width"] * scale["dataset_size"]) ** -0.05
    penalty = 0.08 * d_lr**2 * (1.6 if d_lr > 0 else 1.0) + 0.04 * d_tau**2 + 0.01 * d_lr * d_tau
    return floor + penalty + float(rng.normal(0.0, 0.002))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=120, help="proxy trials (default 120)")
    parser.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL, e.g. sqlite:///proxy.db (default: in memory)",
    )
    args = parser.parse_args(argv)

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # diverged (NaN) trials fail quietly
    space = ts.TransferSpace(
        BASE,
        {"base_lr": ts.Float(1e-4, 1.0, log=True), "tau_epoch": ts.Float(0.05, 20.0, log=True)},
        ts.rules.MuP(),  # µP lr, weight decay ∝ width, constant τ_epoch across dataset size
    )
    sampler = TransferSampler(
        space, LADDER, base_sampler=optuna.samplers.TPESampler(seed=0), seed=0
    )
    study = optuna.create_study(
        storage=args.storage,
        study_name="width-data-transfer",
        sampler=sampler,
        load_if_exists=True,
    )
    rng = np.random.default_rng(0)

    def objective(trial: optuna.Trial) -> float:
        scale, hp = sampler.suggest(trial)  # the rung and its concrete hyperparameters
        # A real objective trains with hp.groups (per-group lr and weight decay) at `scale`; the
        # stand-in reads the swept coordinates that produced them.
        return train(scale, dict(hp.coordinates), rng)

    study.optimize(objective, n_trials=args.trials)

    result = ts.extrapolate(study, target=TARGET, params=["base_lr", "tau_epoch"], seed=0)
    truth = true_optimum(TARGET)
    interval = result.interval(0.9)
    print(f"{len(study.trials)} proxy trials on {len(LADDER)} rungs; target {TARGET!r}")
    print(f"{'param':10} {'predicted':>10} {'90% interval':>22} {'truth':>9}")
    for name, value in result.params.items():
        low, high = interval[name]
        print(f"{name:10} {value:10.4g} {f'[{low:.4g}, {high:.4g}]':>22} {truth[name]:9.4g}")
    for name, law in result.laws.items():
        print(
            f"law {name}: {law.coefficient:.4g} · "
            + " · ".join(f"{k}^{v:+.3f}" for k, v in sorted(law.exponents.items()))
        )
    hp = result.hyperparameters(space)
    print("concrete AdamW settings at the target (coupled weight decay, torch.optim.AdamW):")
    for group, values in hp.groups.items():
        print(f"  {group:7} lr={values['lr']:.3g} weight_decay={values['weight_decay']:.3g}")
    print(f"  betas={hp.betas} eps={hp.eps:g} tau_epoch={hp.tau_epoch:.3g}")


if __name__ == "__main__":
    main()

"""Tune on a synthetic proxy ladder with the hub's TransferSampler and transfer to a larger scale.

Run from this folder: python example.py (needs `pip install optunahub 'transfersearch[optuna]'`).
"""

from __future__ import annotations

import os

import optuna
import optunahub

from transfersearch import synthetic

here = os.path.dirname(os.path.abspath(__file__))
module = optunahub.load_local_module(
    "samplers/transfersearch", registry_root=os.path.dirname(os.path.dirname(here))
)
sampler = module.TransferSampler(
    synthetic.make_space(), synthetic.LADDER, trials_per_rung=10, seed=0
)
study = optuna.create_study(sampler=sampler)


def objective(trial: optuna.Trial) -> float:
    scale, hp = sampler.suggest(trial)  # the trial's rung and its concrete hyperparameters
    return 2.0 + synthetic.regret(scale, hp.coordinates)  # stands in for training at `scale`


optuna.logging.set_verbosity(optuna.logging.WARNING)
study.optimize(objective, n_trials=40)
target = module.Scale(width=1024, dataset_size=3.2e5, batch_size=64)
res = module.extrapolate(study, target=target)
print(res.summary())
print(
    "hidden lr / weight decay at the target:",
    res.hyperparameters(sampler.space).lr,
    res.hyperparameters(sampler.space).weight_decay,
)

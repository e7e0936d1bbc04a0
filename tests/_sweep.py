"""A real TransferSampler sweep of the synthetic ladder into a SQLite study (shared by tests)."""

from __future__ import annotations

from pathlib import Path

import transfersearch as ts
from transfersearch import synthetic

#: 4 rungs × 10 trials: enough for every rung's optimum and a law.
N_TRIALS = 40
TARGET = ts.Scale(width=1024, dataset_size=3.2e5, batch_size=64)


def run_sweep(directory: Path, study_name: str = "proxy", *, n_trials: int = N_TRIALS) -> str:
    """Run the sweep into ``directory/proxy.db`` and return the storage URL."""
    import optuna

    from transfersearch.integrations.optuna import TransferSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{directory / 'proxy.db'}"
    sampler = TransferSampler(
        synthetic.make_space(),
        synthetic.LADDER,
        base_sampler=optuna.samplers.RandomSampler(seed=0),
        trials_per_rung=10,
        seed=0,
    )
    study = optuna.create_study(storage=storage, study_name=study_name, sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        scale, hp = sampler.suggest(trial)
        return 2.0 + synthetic.regret(scale, hp.coordinates)

    study.optimize(objective, n_trials=n_trials)
    return storage

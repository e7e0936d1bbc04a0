"""Muon through the whole public path (issue 50): an Optuna study driven by ``TransferSampler``
over a Muon space, ``extrapolate(study)``, the big run's hyperparameters with their optimizer per
group, and ``make_optimizer`` stepping a model with them."""

from __future__ import annotations

import math
import warnings

import pytest

import transfersearch as ts

optuna = pytest.importorskip("optuna")
torch = pytest.importorskip("torch")
if not hasattr(torch.optim, "Muon"):
    pytest.skip("torch.optim.Muon needs torch >= 2.9", allow_module_level=True)

from transfersearch.integrations.optuna import TransferSampler  # noqa: E402
from transfersearch.integrations.torch import make_optimizer  # noqa: E402
from transfersearch.optimizers import Muon  # noqa: E402

#: The synthetic optimum in the swept coordinates (no drift with width: what the rule promises).
BEST = {"muon_base_lr": 0.02, "tau_epoch": 1.0}


def _loss(coords: dict[str, float], width: float) -> float:
    """A valley in log coordinates whose optimum is :data:`BEST` at every width."""
    return (
        1.0
        + 0.3 * math.log(coords["muon_base_lr"] / BEST["muon_base_lr"]) ** 2
        + 0.1 * math.log(coords["tau_epoch"] / BEST["tau_epoch"]) ** 2
        - 0.05 * math.log(width)
    )


def _model(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(8, width), torch.nn.Linear(width, width), torch.nn.Linear(width, 4)
    )


def test_a_muon_space_runs_optuna_extrapolate_and_make_optimizer() -> None:
    space = ts.TransferSpace(
        base=ts.Scale(width=16, dataset_size=1000, batch_size=16),
        coords={
            "base_lr": 0.01,
            "muon_base_lr": ts.Float(0.002, 0.2, log=True),
            "tau_epoch": ts.Float(0.1, 10.0, log=True),
        },
        rule=ts.rules.MuP(),
        optimizers={"hidden": Muon()},
    )
    ladder = [ts.Scale(width=w, dataset_size=1000, batch_size=16) for w in (16, 32)]
    sampler = TransferSampler(
        space, ladder, base_sampler=optuna.samplers.RandomSampler(seed=0), trials_per_rung=12
    )
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        scale, hp = sampler.suggest(trial)
        assert hp.optimizer("hidden") == "muon" and hp.optimizer("input") == "adamw"
        coords = space.coordinates(hp, scale)
        return _loss(coords, float(scale["width"]))

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=24)
    target = ts.Scale(width=128, dataset_size=1000, batch_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        res = ts.extrapolate(study, target=target)
    # the fitted coordinates land near the valley's floor (a factor of 2 on lr, 3 on tau)
    assert abs(math.log(res.params["muon_base_lr"] / BEST["muon_base_lr"])) < math.log(2.0)
    assert abs(math.log(res.params["tau_epoch"] / BEST["tau_epoch"])) < math.log(3.0)
    hp = res.hyperparameters()
    assert hp.optimizer("hidden") == "muon" and hp.optimizer("output") == "adamw"
    # under adjust_lr_fn="original" Muon's γ is width-free: the hidden lr is the swept base lr
    assert hp.groups["hidden"]["lr"] == pytest.approx(res.params["muon_base_lr"], rel=1e-9)
    model = _model(128)
    optimizer = make_optimizer(model, hp, base_model=_model(64))
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.randn(5, 8)).square().mean()
    loss.backward()
    optimizer.step()
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))

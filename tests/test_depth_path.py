"""The whole path at depth: a TransferSampler ladder over width and depth, extrapolate() to a
deeper, wider target, and param_groups for the target model (issue 26 item 6)."""

from __future__ import annotations

import math

import pytest

optuna = pytest.importorskip("optuna")
torch = pytest.importorskip("torch")

from test_depth_torch import TinyGPT, meta  # noqa: E402

import transfersearch as ts  # noqa: E402
from transfersearch.integrations.optuna import TransferSampler  # noqa: E402
from transfersearch.integrations.torch import param_groups  # noqa: E402

BASE = ts.Scale(width=32, depth=2, dataset_size=1e5, batch_size=64)
TARGET = ts.Scale(width=256, depth=16, dataset_size=1e5, batch_size=64)
#: The synthetic valley's optimum in the swept coordinates (invariant: no drift with scale).
BEST = {"base_lr": 3e-3, "tau_epoch": 1.0}


def test_a_depth_and_width_ladder_extrapolates_to_param_groups_for_a_deeper_wider_model() -> None:
    space = ts.TransferSpace(
        BASE,
        {"base_lr": ts.Float(1e-4, 1e-1, log=True), "tau_epoch": ts.Float(0.05, 20.0, log=True)},
        rule=ts.rules.MuP(depth="completep"),
    )
    ladder = [BASE.replace(width=w, depth=d) for w in (32, 64) for d in (2, 4)]
    sampler = TransferSampler(
        space, ladder, base_sampler=optuna.samplers.RandomSampler(seed=0), seed=0
    )
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        scale, hp = sampler.suggest(trial)
        assert hp.residual_multiplier == pytest.approx(2 / scale["depth"])  # m_L^−1, base 2
        coords = space.coordinates(hp)
        return sum(math.log(coords[k] / BEST[k]) ** 2 for k in BEST)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=48)
    assert {t.user_attrs.get("rung") for t in study.trials} >= {0, 1, 2, 3}
    with pytest.warns(ts.TransferSearchWarning, match="decades from the nearest proxy"):
        res = ts.extrapolate(study, target=TARGET, seed=0)
    hp = res.hyperparameters(space)
    assert hp.scale["depth"] == 16 and hp.residual_multiplier == pytest.approx(1 / 8)
    assert any("residual_multiplier = 0.125" in note for note in hp.notes)
    model = TinyGPT(256, 16, residual=hp.residual_multiplier)
    groups = {g["name"]: g for g in param_groups(model, hp, base_model=meta(TinyGPT, 32, 16))}
    # CompleteP α = 1: lrs are depth-free, hidden ÷ s = 8; ε ÷ m_L = 8 in the blocks only
    assert groups["hidden"]["lr"] == pytest.approx(hp.group("input")["lr"] / 8)
    assert groups["block_vector"]["lr"] == pytest.approx(groups["vector"]["lr"])
    assert groups["block_vector"]["eps"] == pytest.approx(groups["vector"]["eps"] / 8)
    assert "h.15.ln_2.weight" in groups["block_vector"]["param_names"]
    assert groups["vector"]["param_names"] == ["ln_f.weight", "ln_f.bias"]
    # the decision lands near the invariant optimum the valley was built with
    assert space.coordinates(hp)["base_lr"] == pytest.approx(BEST["base_lr"], rel=0.5)

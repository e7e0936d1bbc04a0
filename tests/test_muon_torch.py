"""make_optimizer / param_groups for Muon + AdamW (and Lion), and the coordinate check across
widths that establishes each family's width rule (docs/science.md §11.5)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import transfersearch as ts  # noqa: E402
from transfersearch.integrations.torch import (  # noqa: E402
    GroupedOptimizer,
    Lion,
    make_optimizer,
    param_groups,
)
from transfersearch.optimizers import Lion as LionFamily  # noqa: E402
from transfersearch.optimizers import Muon  # noqa: E402

VOCAB = 64
BASE = ts.Scale(width=32, dataset_size=10_000, batch_size=128)


def make_model(width: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Embedding(VOCAB, width),
        nn.Linear(width, width, bias=False),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, VOCAB, bias=False),
    )


def hyperparameters(width: int, family: Any = None, **coords: float) -> ts.Hyperparameters:
    family = family or Muon()
    base = {"base_lr": 1e-2, "tau_epoch": 1.0, f"{family.prefix}base_lr": 0.02, **coords}
    space = ts.TransferSpace(BASE, base, optimizers={"hidden": family})
    return space.concretize({}, {"width": width})


def reference(width: int) -> nn.Module:
    with torch.device("meta"):
        return make_model(64 if width == 32 else 32)


def test_make_optimizer_builds_adamw_and_muon_with_hps_values() -> None:
    hp = hyperparameters(128, Muon(adjust_lr_fn="match_rms_adamw", momentum=0.9))
    model = make_model(128)
    opt = make_optimizer(model, hp, base_model=reference(128))
    assert isinstance(opt, GroupedOptimizer)
    assert isinstance(opt.optimizers["adamw"], torch.optim.AdamW)
    assert isinstance(opt.optimizers["muon"], torch.optim.Muon)
    for group in opt.param_groups:
        values = hp.group(group["name"])
        assert group["lr"] == values["lr"] and group["weight_decay"] == values["weight_decay"]
        assert group["eps"] == values["eps"] and group["optimizer"] == hp.optimizer(group["name"])
    (muon,) = opt.optimizers["muon"].param_groups
    assert muon["param_names"] == ["1.weight", "3.weight"]
    assert muon["momentum"] == 0.9 and muon["adjust_lr_fn"] == "match_rms_adamw"
    x = torch.randint(VOCAB, (8,))
    hidden: Any = model[1]
    before = hidden.weight.detach().clone()
    nn.functional.cross_entropy(model(x), x).backward()  # type: ignore[no-untyped-call]
    opt.step()
    opt.zero_grad()
    assert not torch.equal(before, hidden.weight) and hidden.weight.grad is None
    state = opt.state_dict()
    opt.load_state_dict(state)
    assert set(state) == {"adamw", "muon"}


def test_param_groups_refuses_a_muon_hp_for_one_adamw() -> None:
    with pytest.raises(ts.TransferSearchError, match="make_optimizer"):
        param_groups(make_model(128), hyperparameters(128), base_model=reference(128))


def test_adamw_only_param_groups_unchanged_by_by_optimizer() -> None:
    hp = ts.TransferSpace(BASE, {"base_lr": 1e-2, "tau_epoch": 1.0}).concretize({}, {"width": 128})
    plain = param_groups(make_model(128), hp, base_model=reference(128))
    assert all("optimizer" not in g for g in plain)
    grouped = param_groups(make_model(128), hp, base_model=reference(128), by_optimizer=True)
    assert list(grouped) == ["adamw"] and grouped["adamw"][0]["betas"] == (0.9, 0.999)


def test_a_non_matrix_in_the_muon_group_is_refused_naming_the_override() -> None:
    class Conv(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, width)
            self.conv = nn.Conv1d(width, width, 3)
            self.head = nn.Linear(width, VOCAB)

    with pytest.raises(ts.TransferSearchError, match=r"overrides=\{'conv.weight': 'input'\}"):
        make_optimizer(Conv(128), hyperparameters(128), base_model=Conv(32))


def test_a_torch_without_muon_names_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch.optim, "Muon")
    with pytest.raises(ts.TransferSearchError, match=r"torch>=2\.9"):
        make_optimizer(make_model(128), hyperparameters(128), base_model=reference(128))


def test_lion_step_by_hand() -> None:
    param = nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = Lion([param], lr=0.1, betas=(0.9, 0.99), weight_decay=0.5)
    param.grad = torch.tensor([0.3, -0.0001])
    opt.step()
    # θ(1 − γλ) − γ·sign(0.1·g): [1·0.95 − 0.1, −2·0.95 + 0.1]
    assert param.detach().tolist() == pytest.approx([0.85, -1.8])


# ----------------------------------------------------------------------------------------------
# Coordinate check: the update each hidden layer makes to its own output, relative to its input,
# RMS(ΔW·h)/RMS(h) after a few steps, is Θ(1) across widths under the rule (slope of log ratio
# vs log width near 0) and not without it. Measured: Muon original −0.02 vs −1.0 (µP's 1/s);
# match_rms_adamw −0.02 vs −0.5; Lion (µP's 1/s) −0.04…−0.08 vs +0.75 (no width rule).
# ----------------------------------------------------------------------------------------------
WIDTHS = (32, 64, 256)
#: |slope| below which the update is Θ(1) in width: a quarter of the 1/√s a wrong rule gives at
#: least (match_rms_adamw under µP's 1/s), far above the −0.02…−0.08 measured.
FLAT = 0.15


def update_slope(family: Any, rule: bool, steps: int = 3) -> float:
    """Slope of log RMS(ΔW·h)/RMS(h) against log width for the hidden layers (the mean of two)."""
    ratios = []
    for width in WIDTHS:
        torch.manual_seed(0)
        model: Any = make_model(width)
        hp = hyperparameters(width, family)
        if not rule:  # the other rule: µP's 1/s for Muon, no width rule for Lion
            data = hp.to_dict()
            base_lr = 0.02
            s = width / 32
            data["groups"]["hidden"]["lr"] = base_lr / s if family.family == "muon" else base_lr
            hp = ts.Hyperparameters.from_dict(data)
        opt = make_optimizer(model, hp, base_model=reference(width))
        gen = torch.Generator().manual_seed(1)
        x, y = (
            torch.randint(VOCAB, (128,), generator=gen),
            torch.randint(VOCAB, (128,), generator=gen),
        )
        start = [model[1].weight.detach().clone(), model[3].weight.detach().clone()]
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()  # type: ignore[no-untyped-call]
            opt.step()
        with torch.no_grad():
            h1 = model[0](x)
            h2 = torch.relu(model[1](h1))
            layer = [
                float((h @ (model[i].weight - w0).T).pow(2).mean().sqrt() / h.pow(2).mean().sqrt())
                for i, h, w0 in ((1, h1, start[0]), (3, h2, start[1]))
            ]
        ratios.append(np.mean(layer))
    return float(np.polyfit(np.log(WIDTHS), np.log(ratios), 1)[0])


def test_coordinate_check_muon_original() -> None:
    assert abs(update_slope(Muon(), rule=True)) < FLAT
    assert update_slope(Muon(), rule=False) < -0.8  # µP's 1/s: updates vanish as 1/s


@pytest.mark.slow
def test_coordinate_check_muon_match_rms_and_lion() -> None:
    match_rms = Muon(adjust_lr_fn="match_rms_adamw")
    assert abs(update_slope(match_rms, rule=True)) < FLAT
    assert update_slope(match_rms, rule=False) < -0.35  # 1/s where s^(−½) is due
    lion = LionFamily()
    assert abs(update_slope(lion, rule=True)) < FLAT
    assert update_slope(lion, rule=False) > 0.5  # a width-free lr: updates grow with width

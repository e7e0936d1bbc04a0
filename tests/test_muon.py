"""Muon (and Lion) groups beside AdamW in a TransferSpace: hand-computed factors, round trips,
refusals (docs/science.md §11)."""

from __future__ import annotations

import json
import math

import pytest

import transfersearch as ts
from transfersearch.optimizers import Lion, Muon, muon_width_lr_factor
from transfersearch.stored_space import space_from_json, space_to_json

BASE = ts.Scale(width=256, depth=4, dataset_size=50_000, batch_size=128)
COORDS = {"base_lr": 3e-3, "tau_epoch": 1.0, "muon_base_lr": 0.02}


def muon_space(rule: ts.rules.Rule | None = None, muon: Muon | None = None) -> ts.TransferSpace:
    return ts.TransferSpace(
        BASE,
        {
            "base_lr": ts.Float(1e-4, 1e-1, log=True),
            "tau_epoch": ts.Float(0.05, 20.0, log=True),
            "muon_base_lr": ts.Float(1e-3, 1.0, log=True),
        },
        rule or ts.rules.MuP(),
        optimizers={"hidden": muon or Muon()},
    )


def test_muon_width_factor_by_hand() -> None:
    # original: γ_adj = γ·√max(1, A/B): ‖ΔW‖* width-free; match_rms_adamw: 0.2γ√max(A, B) ∝ √s
    assert muon_width_lr_factor("original", 4.0) == 1.0
    assert muon_width_lr_factor("match_rms_adamw", 4.0) == pytest.approx(0.5)
    assert muon_width_lr_factor("match_rms_adamw", 1 / 16) == pytest.approx(4.0)


def test_base_scale_muon_group_by_hand() -> None:
    hp = muon_space().concretize(COORDS)
    # shared τ_epoch: γλ = B/(τN) = 128/50000; λ = γλ/γ
    assert hp.groups["hidden"]["lr"] == pytest.approx(0.02)
    assert hp.groups["hidden"]["weight_decay"] == pytest.approx(128 / 50_000 / 0.02)
    assert hp.groups["hidden"]["eps"] == 1e-7 and hp.groups["hidden"]["momentum"] == 0.95
    assert hp.optimizer("hidden") == "muon" and hp.optimizer("input") == "adamw"
    assert hp.tau_epoch == pytest.approx(1.0)


def test_adamw_groups_are_the_adamw_space_ones() -> None:
    adamw = ts.TransferSpace(BASE, {"base_lr": 3e-3, "tau_epoch": 1.0}, ts.rules.MuP())
    for target in (None, {"width": 1024, "batch_size": 512}):
        mixed = muon_space().concretize(COORDS, target)
        plain = adamw.concretize({}, target)
        for group in ("input", "output", "vector"):
            assert dict(mixed.groups[group]) == dict(plain.groups[group])


@pytest.mark.parametrize(
    ("adjust", "lr_mult", "wd_mult"), [("original", 1.0, 1.0), ("match_rms_adamw", 0.5, 2.0)]
)
def test_four_times_width_by_hand(adjust: str, lr_mult: float, wd_mult: float) -> None:
    space = muon_space(muon=Muon(adjust_lr_fn=adjust))  # type: ignore[arg-type]
    base, wide = space.concretize(COORDS), space.concretize(COORDS, {"width": 1024})
    hidden, hidden0 = wide.groups["hidden"], base.groups["hidden"]
    assert hidden["lr"] == pytest.approx(hidden0["lr"] * lr_mult)
    assert hidden["weight_decay"] == pytest.approx(hidden0["weight_decay"] * wd_mult)
    assert wide.tau_iter == pytest.approx(base.tau_iter)  # constant τ: γλ kept
    assert wide.width_lr_multipliers["hidden"] == pytest.approx(lr_mult)


def test_weight_decay_follows_the_rules_eta_lambda() -> None:
    # MuP(wd_width_exponent=0): ηλ ∝ 1/s, so with γ width-free ("original") λ ÷ 4 at s = 4
    space = muon_space(ts.rules.MuP(wd_width_exponent=0.0))
    base, wide = space.concretize(COORDS), space.concretize(COORDS, {"width": 1024})
    assert wide.weight_decay == pytest.approx(base.weight_decay / 4)


@pytest.mark.parametrize(("alpha", "factor"), [(1.0, 1.0), (0.5, 0.5)])
def test_depth_factor_is_completeps(alpha: float, factor: float) -> None:
    # CompleteP: hidden lr × m_L^(α−1); m_L = 16/4 = 4 → α = ½: × 0.5; α = 1: × 1
    space = muon_space(ts.rules.MuP(depth=ts.rules.CompleteP(alpha=alpha)))
    deep = space.concretize(COORDS, {"depth": 16})
    assert deep.groups["hidden"]["lr"] == pytest.approx(0.02 * factor)
    # γλ follows the rule's hidden ηλ: m_L^(α−1) × m_L^0 (wd_depth_exponent 0), as AdamW's
    assert deep.groups["hidden"]["lr"] * deep.groups["hidden"]["weight_decay"] == pytest.approx(
        128 / 50_000 * factor
    )


def test_batch_size_lr_kept_and_decay_matched_by_hand() -> None:
    hp = muon_space().concretize(COORDS, {"batch_size": 512})
    eta_lambda = 128 / 50_000
    assert hp.groups["hidden"]["lr"] == pytest.approx(0.02)  # no verified rule: kept
    expected = (1 - (1 - eta_lambda) ** 4) / 0.02  # Busbridge Eq. 11–13, κ = 4
    assert hp.groups["hidden"]["weight_decay"] == pytest.approx(expected)
    assert hp.groups["hidden"]["momentum"] == 0.95
    assert any("no verified batch rule for muon" in note for note in hp.notes)
    chosen = muon_space(muon=Muon(batch_lr_exponent=0.5)).concretize(COORDS, {"batch_size": 512})
    assert chosen.groups["hidden"]["lr"] == pytest.approx(0.04)


@pytest.mark.parametrize(
    "target",
    [None, {"width": 1024}, {"width": 64, "batch_size": 512, "dataset_size": 200_000}],
)
def test_coordinates_round_trip(target: dict[str, float] | None) -> None:
    space = muon_space(
        ts.rules.MuP(depth="depth_mup"), Muon(adjust_lr_fn="match_rms_adamw", batch_lr_exponent=0.3)
    )
    coords = {"base_lr": 2e-3, "tau_epoch": 3.0, "muon_base_lr": 0.05}
    back = space.coordinates(space.concretize(coords, target))
    for name, value in coords.items():
        assert back[name] == pytest.approx(value, rel=1e-9)


def test_own_tau_and_momentum_coordinates() -> None:
    space = ts.TransferSpace(
        BASE,
        {
            "base_lr": 3e-3,
            "tau_epoch": 1.0,
            "muon_base_lr": 0.02,
            "muon_tau_epoch": ts.Float(0.1, 10.0, log=True),
            "muon_momentum": ts.Float(0.8, 0.99),
        },
        optimizers={"hidden": Muon()},
    )
    hp = space.concretize({"muon_tau_epoch": 4.0, "muon_momentum": 0.9})
    assert hp.groups["hidden"]["lr"] * hp.groups["hidden"]["weight_decay"] == pytest.approx(
        128 / (4.0 * 50_000)
    )
    assert hp.groups["hidden"]["momentum"] == 0.9 and "muon_momentum" not in hp.extra
    assert space.coordinates(hp) == pytest.approx({"muon_tau_epoch": 4.0, "muon_momentum": 0.9})


def test_lion_takes_the_rules_adamw_factors() -> None:
    space = ts.TransferSpace(
        BASE,
        {"base_lr": 3e-3, "tau_epoch": 1.0, "lion_base_lr": 1e-4},
        optimizers={"hidden": Lion()},
    )
    wide = space.concretize({}, {"width": 1024})
    assert wide.groups["hidden"]["lr"] == pytest.approx(1e-4 / 4)  # µP's 1/s (§11.5's check)
    assert wide.groups["hidden"]["beta1"] == 0.9 and wide.groups["hidden"]["beta2"] == 0.99
    assert wide.optimizer("hidden") == "lion"


def test_hyperparameters_and_stored_space_round_trip() -> None:
    space = muon_space(muon=Muon(adjust_lr_fn="match_rms_adamw", momentum=0.9))
    hp = space.concretize(COORDS, {"width": 512})
    data = json.loads(json.dumps(hp.to_dict()))
    assert data["optimizers"]["hidden"]["family"] == "muon"
    assert ts.Hyperparameters.from_dict(data) == hp
    again = space_from_json(json.loads(json.dumps(space_to_json(space))))
    assert again.concretize(COORDS, {"width": 512}) == hp


def test_adamw_only_to_dict_has_no_optimizers_key() -> None:
    hp = ts.TransferSpace(BASE, {"base_lr": 3e-3, "tau_epoch": 1.0}).concretize({})
    assert "optimizers" not in hp.to_dict() and hp.optimizer("hidden") == "adamw"


def test_refusals_name_the_fix() -> None:
    with pytest.raises(ts.TransferSearchError, match="derived\\s+for the groups \\('hidden',\\)"):
        ts.TransferSpace(BASE, COORDS, optimizers={"input": Muon()})
    with pytest.raises(ts.TransferSearchError, match="muon group's coordinates"):
        ts.TransferSpace(BASE, {**COORDS, "muon_weight_decay": 0.1}, optimizers={"hidden": Muon()})
    with pytest.raises(ts.TransferSearchError, match="adjust_lr_fn"):
        Muon(adjust_lr_fn="spectral")  # type: ignore[arg-type]
    with pytest.raises(ts.TransferSearchError, match="coords.momentum|momentum"):
        ts.TransferSpace(BASE, {**COORDS, "muon_momentum": 1.5}, optimizers={"hidden": Muon()})
    with pytest.warns(ts.TransferSearchWarning, match="no group of this space runs"):
        ts.TransferSpace(BASE, COORDS)


def test_muon_width_rule_keeps_the_spectral_update_by_hand() -> None:
    # ‖ΔW‖* of one step = γ_adj (O's singular values are 1): original γ√max(1, A/B),
    # match_rms 0.2γ√max(A, B). Under the rule it is the same at s = 1 and s = 16.
    for adjust in ("original", "match_rms_adamw"):
        space = muon_space(muon=Muon(adjust_lr_fn=adjust))
        norms = []
        for width in (256, 4096):
            lr = space.concretize(COORDS, {"width": width}).groups["hidden"]["lr"]
            adj = math.sqrt(max(1, 1)) if adjust == "original" else 0.2 * math.sqrt(width)
            norms.append(lr * adj)
        assert norms[0] == pytest.approx(norms[1])

"""The training-length ("batch and duration") rule and the dataset rule's regime, by hand.

Digest numbers (Mlodozeniec et al. 2025, Table 1, last column): B 0.5M → 1M tokens, D 10B → 160B,
so κ_S = S_base / S = m_B / m_D = 2 / 16 = 1/8; η_b = 1e-2, λ_b = 0.1, ε_b = 1e-8, β = (0.9, 0.95).
"""

from __future__ import annotations

import math
import warnings

import pytest

import transfersearch as ts
from transfersearch import rules

BASE = ts.Scale(width=64, batch_size=5e5, dataset_size=1e10, steps=2e4)
TARGET = ts.Scale(batch_size=1e6, dataset_size=1.6e11)
COORDS = {"lr": 1e-2}


def space(rule: rules.Rule, base: ts.Scale = BASE) -> ts.TransferSpace:
    return ts.TransferSpace(
        base,
        {"lr": ts.Float(1e-4, 1e-1, log=True), "weight_decay": 0.1},
        rule=rule,
        betas=(0.9, 0.95),
        eps=1e-8,
    )


def test_batch_and_duration_by_hand() -> None:
    hp = space(rules.MuP(dataset=None, horizon="completed")).concretize(COORDS, TARGET)
    assert hp.total_steps == pytest.approx(160_000)  # 20,000 · 16 / 2
    assert hp.lr == pytest.approx(1e-2 * 0.35355339)  # × √(1/8)
    assert hp.eps == pytest.approx(1e-8 * 2.8284271)  # ÷ √(1/8)
    assert hp.group("hidden")["eps"] == pytest.approx(2.8284271e-8)
    # decay matched: (1 − (1 − 1e-3)^(1/8)) / 3.5355e-3 = 0.035371 (the √κ form gives 0.035355)
    assert hp.weight_decay == pytest.approx(0.035371, rel=1e-4)
    # β^κ_S (default): 0.9^(1/8) = 0.986917, 0.95^(1/8) = 0.993609
    assert hp.betas == pytest.approx((0.9869167, 0.9936089))
    # τ_epoch = B/(ηλN): 5e5 / (1e-3 · 1e10) = 0.05 at the base, unchanged to 1e-3
    assert space(rules.MuP(dataset=None, horizon="completed")).concretize(
        COORDS
    ).tau_epoch == pytest.approx(0.05)
    assert hp.tau_epoch == pytest.approx(0.05, rel=1e-3)


def test_batch_and_duration_linear_betas_by_hand() -> None:
    """1 − (1 − β)·κ_S: 0.9 → 0.9875, 0.95 → 0.99375 (the table's own form)."""
    rule = rules.MuP(dataset=None, batch=rules.AdamBatch(beta_form="linear"), horizon="completed")
    hp = space(rule).concretize(COORDS, TARGET)
    assert hp.betas == pytest.approx((0.9875, 0.99375))
    assert space(rule).coordinates(hp)["lr"] == pytest.approx(1e-2)


def test_kappa_s_reads_steps_tokens_or_data_by_hand() -> None:
    rule = rules.MuP(dataset=None, horizon="completed")
    assert rule.kappa(BASE, BASE.replace(steps=1.6e5)) == pytest.approx(1 / 8)
    tokens = ts.Scale(batch_size=5e5, tokens=1e10)
    assert rule.kappa(tokens, ts.Scale(batch_size=1e6, tokens=1.6e11)) == pytest.approx(1 / 8)
    data = ts.Scale(batch_size=5e5, dataset_size=1e10, epochs=2)
    assert rule.kappa(data, data.replace(epochs=8)) == pytest.approx(1 / 4)
    # without a horizon rule κ is the batch ratio alone
    assert rules.MuP().kappa(BASE, TARGET) == pytest.approx(2.0)


def test_the_batch_rule_and_the_duration_rule_compose_into_one() -> None:
    """Adam's rule at κ = m_B, then at 1/m_D, equals one step at κ_S = m_B / m_D."""
    adam = rules.AdamBatch()
    once = adam.transfer(1e-2, 0.1, (0.9, 0.95), 1e-8, 1 / 8)
    first = adam.transfer(1e-2, 0.1, (0.9, 0.95), 1e-8, 2.0)
    twice = adam.transfer(first.lr, first.weight_decay, first.betas, first.eps, 1 / 16)
    assert twice.lr == pytest.approx(once.lr)
    assert twice.weight_decay == pytest.approx(once.weight_decay)
    assert twice.betas == pytest.approx(once.betas)
    assert twice.eps == pytest.approx(once.eps)


def test_horizon_refuses_a_dataset_rule_and_sgd() -> None:
    with pytest.raises(ts.TransferSearchError, match=r"counted twice.*dataset=None"):
        rules.MuP(horizon="completed")  # the default dataset rule is 'tau_epoch'
    with pytest.raises(ts.TransferSearchError, match="counted twice"):
        rules.MuP(dataset="power_lines", horizon="completed")
    with pytest.raises(ts.TransferSearchError, match="batch='adam'"):
        rules.MuP(dataset=None, batch="sgd", horizon="completed")
    with pytest.raises(ts.TransferSearchError, match="'completed'"):
        rules.MuP(dataset=None, horizon="bjorck")


def test_horizon_and_depth_compose() -> None:
    base = BASE.replace(depth=4)
    rule = rules.MuP(dataset=None, horizon="completed", depth="completep")
    hp = space(rule, base).concretize(COORDS, TARGET.replace(depth=16))
    # depth: ε ÷ 4; duration: ε ÷ √(1/8); hidden lr depth-free at α = 1, × √(1/8)
    assert hp.group("hidden")["eps"] == pytest.approx(1e-8 / 4 * math.sqrt(8))
    assert hp.lr == pytest.approx(1e-2 * math.sqrt(1 / 8))
    assert space(rule, base).coordinates(hp)["lr"] == pytest.approx(1e-2)


def test_one_pass_scales_get_a_loud_note_naming_power_lines() -> None:
    one_pass = ts.Scale(width=64, dataset_size=1e6, batch_size=64, epochs=1)
    with pytest.warns(ts.TransferSearchWarning, match="power_lines"):
        hp = space(rules.MuP(), one_pass).concretize(COORDS, ts.Scale(dataset_size=4e6))
    assert any("one-pass regime" in note for note in hp.notes)
    # stated as intended: no note
    quiet = rules.MuP(dataset=rules.ConstantTauEpoch(allow_one_pass=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hp = space(quiet, one_pass).concretize(COORDS, ts.Scale(dataset_size=4e6))
        assert not any("one-pass" in n for n in hp.notes)
        # multi-epoch scales: no note
        many = one_pass.replace(epochs=8)
        assert space(rules.MuP(), many).concretize(COORDS, ts.Scale(dataset_size=4e6)).notes == ()
    tokens = ts.Scale(width=64, dataset_size=1e6, batch_size=64, tokens=1e6)
    with pytest.warns(ts.TransferSearchWarning, match="one-pass"):
        space(rules.MuP(), tokens).concretize(COORDS, ts.Scale(dataset_size=4e6, tokens=4e6))
    with pytest.raises(ts.TransferSearchError, match="allow_one_pass"):
        rules.ConstantTauEpoch(allow_one_pass="yes")  # type: ignore[arg-type]

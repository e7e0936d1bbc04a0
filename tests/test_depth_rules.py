"""The depth rule (CompleteP / depth-µP) and per-group ε against hand computations.

Numbers: η_b = 1e-2, λ_b = 0.1, ε_b = 1e-8, β = (0.9, 0.95), s = 2 (width 64 → 128), L_base = 4,
L = 16 → m_L = 4 (Dey et al. 2025, Table 1; Mlodozeniec et al. 2025, Table 1 for ε).
"""

from __future__ import annotations

import itertools
import math
import warnings

import pytest

import transfersearch as ts
from transfersearch import rules

BASE = ts.Scale(width=64, depth=4)
TARGET = ts.Scale(width=128, depth=16)
COORDS = {"lr": 1e-2}


def space(rule: rules.Rule) -> ts.TransferSpace:
    return ts.TransferSpace(
        BASE,
        {"lr": ts.Float(1e-4, 1e-1, log=True), "weight_decay": 0.1},
        rule=rule,
        betas=(0.9, 0.95),
        eps=1e-8,
    )


def values(hp: ts.Hyperparameters, group: str) -> tuple[float, float, float]:
    g = hp.group(group)
    return (g["lr"], g["weight_decay"], g["eps"])


def test_depth_mup_alpha_half_by_hand() -> None:
    """α = ½: residual 4^−½ = 0.5; hidden lr 1e-2/2/2, wd 0.1·2, ε 1e-8/2/2 (eps_width on)."""
    rule = rules.MuP(dataset=None, batch=None, depth="depth_mup", eps_width=True)
    hp = space(rule).concretize(COORDS, TARGET)
    assert hp.residual_multiplier == pytest.approx(0.5)
    assert values(hp, "hidden") == pytest.approx((2.5e-3, 0.2, 2.5e-9))
    assert values(hp, "block_vector") == pytest.approx((5e-3, 0.0, 2.5e-9))
    assert values(hp, "input") == pytest.approx((1e-2, 0.1, 5e-9))
    assert values(hp, "output") == pytest.approx((5e-3, 0.2, 1e-8))
    assert values(hp, "vector") == pytest.approx((1e-2, 0.0, 1e-8))  # the final norm
    assert hp.eps == 1e-8  # the optimizer-wide ε: no batch change here


def test_completep_alpha_one_by_hand() -> None:
    """α = 1: residual 0.25; hidden lr 1e-2/2 (depth-free), ε 1e-8/2/4; block LN lr 1e-2."""
    rule = rules.MuP(dataset=None, batch=None, depth="completep", eps_width=True)
    hp = space(rule).concretize(COORDS, TARGET)
    assert hp.residual_multiplier == pytest.approx(0.25)
    assert values(hp, "hidden") == pytest.approx((5e-3, 0.2, 1.25e-9))
    assert values(hp, "block_vector") == pytest.approx((1e-2, 0.0, 1.25e-9))
    assert values(hp, "output") == pytest.approx((5e-3, 0.2, 1e-8))
    # without eps_width (the default) ε moves with depth only: 1e-8 / 4
    default = space(rules.MuP(dataset=None, batch=None, depth="completep")).concretize(
        COORDS, TARGET
    )
    assert values(default, "hidden") == pytest.approx((5e-3, 0.2, 2.5e-9))
    assert values(default, "input")[2] == 1e-8


@pytest.mark.parametrize(
    ("alpha", "width_mult", "depth_mult"),
    list(itertools.product([0.5, 0.75, 1.0], [0.5, 2.0, 8.0], [0.25, 1.0, 4.0, 32.0])),
)
def test_hidden_group_matches_nanogpt_mup_formulas(
    alpha: float, width_mult: float, depth_mult: float
) -> None:
    """Independent oracle: nanoGPT-mup (EleutherAI, branch completep) ``configure_optimizers``:
    lr_scale = (1/m_N)·m_L^(α−1), hidden weight decay λ/(1/m_N), adam_eps·(1/m_N)·m_L^(−α), and
    ``Block.residual_scaling = 1/depth_multiplier**depth_alpha_exp``."""
    rule = rules.MuP(dataset=None, batch=None, depth=rules.CompleteP(alpha=alpha), eps_width=True)
    target = ts.Scale(width=64 * width_mult, depth=4 * depth_mult)
    hp = space(rule).concretize(COORDS, target)
    width_lr_scaling = 1 / width_mult
    depth_lr_scaling = depth_mult ** (alpha - 1)
    assert hp.group("hidden")["lr"] == pytest.approx(1e-2 * width_lr_scaling * depth_lr_scaling)
    assert hp.group("hidden")["weight_decay"] == pytest.approx(0.1 / width_lr_scaling)
    assert hp.group("hidden")["eps"] == pytest.approx(
        1e-8 * (1 / width_mult) * depth_mult ** (-1 * alpha)
    )
    assert hp.group("block_vector")["lr"] == pytest.approx(1e-2 * depth_lr_scaling)
    assert hp.residual_multiplier == pytest.approx(1 / depth_mult**alpha)
    # the space's inverse undoes width and depth
    assert space(rule).coordinates(hp)["lr"] == pytest.approx(1e-2)


@pytest.mark.parametrize("depth", ["completep", "depth_mup", rules.CompleteP(alpha=0.7)])
def test_at_the_base_depth_the_depth_rule_is_the_width_rule(depth: object) -> None:
    """m_L = 1: every depth multiplier is exactly 1, and the groups equal MuP()'s."""
    target = ts.Scale(width=256, depth=4)
    with_depth = space(rules.MuP(dataset=None, batch=None, depth=depth)).concretize(COORDS, target)  # type: ignore[arg-type]
    plain = space(rules.MuP(dataset=None, batch=None)).concretize(COORDS, target)
    for group in rules.GROUPS:
        assert dict(with_depth.groups[group]) == dict(plain.groups[group])
    assert dict(with_depth.groups["block_vector"]) == dict(plain.groups["vector"])
    assert with_depth.residual_multiplier == 1.0 and plain.residual_multiplier == 1.0
    assert "block_vector" not in plain.groups  # no depth rule: the schema is unchanged
    factors = rules.CompleteP(alpha=0.5).depth_factors(1.0)
    assert set(factors.values()) == {rules.GroupFactors(1.0, 1.0, 1.0)}


def test_residual_multiplier_function_by_hand() -> None:
    assert rules.residual_multiplier(4, 16, alpha=1.0) == 0.25
    assert rules.residual_multiplier(4, 16, alpha=0.5) == 0.5
    assert rules.residual_multiplier(4, 4) == 1.0
    # a shallower target: m_L = ½ → 2 (α = 1)
    assert rules.residual_multiplier(8, 4) == 2.0


@pytest.mark.parametrize("alpha", [0.0, 0.49, 1.5, math.nan, "1", True])
def test_alpha_outside_the_literature_range_names_both_values(alpha: object) -> None:
    with pytest.raises(ts.TransferSearchError) as info:
        rules.CompleteP(alpha=alpha)  # type: ignore[arg-type]
    assert "alpha=1 for CompleteP" in str(info.value)
    assert "alpha=0.5 for depth-muP" in str(info.value)
    with pytest.raises(ts.TransferSearchError, match="alpha=0.5 for depth-muP"):
        rules.residual_multiplier(4, 16, alpha=alpha)  # type: ignore[arg-type]


def test_unknown_depth_rule_names_the_options() -> None:
    with pytest.raises(ts.TransferSearchError, match="'completep'.*'depth_mup'"):
        rules.MuP(depth="complete_p")


def test_wd_depth_exponent_is_our_optional_extension() -> None:
    """e = ½ with α = ½ keeps the hidden ηλ fixed in depth: lr × 4^−½, λ × 4^½."""
    rule = rules.MuP(
        dataset=None, batch=None, depth=rules.CompleteP(alpha=0.5, wd_depth_exponent=0.5)
    )
    deep = space(rule).concretize(COORDS, ts.Scale(depth=16))
    base = space(rule).concretize(COORDS)
    assert deep.lr == pytest.approx(5e-3) and deep.weight_decay == pytest.approx(0.2)
    assert deep.lr * deep.weight_decay == pytest.approx(base.lr * base.weight_decay)


def test_depth_change_notes_the_residual_multiplier_or_the_missing_rule() -> None:
    deep = space(rules.MuP(depth="completep")).concretize(COORDS, ts.Scale(depth=16))
    [note] = [n for n in deep.notes if "residual" in n]
    assert "depth 4 -> 16 (m_L = 4)" in note and "residual_multiplier = 0.25" in note
    assert "cannot check" in note
    plain = space(rules.MuP()).concretize(COORDS, ts.Scale(depth=16))
    assert any("no depth rule" in n and "depth='completep'" in n for n in plain.notes)
    assert plain.residual_multiplier == 1.0
    assert space(rules.MuP(depth="completep")).concretize(COORDS).notes == ()


def test_a_target_depth_needs_a_base_depth() -> None:
    no_depth = ts.TransferSpace(
        ts.Scale(width=64),
        {"lr": ts.Float(1e-4, 1e-1, log=True), "weight_decay": 0.1},
        rule=rules.MuP(depth="completep"),
    )
    with pytest.raises(ts.TransferSearchError, match="depth"):
        no_depth.concretize(COORDS, ts.Scale(depth=16))


def test_hyperparameters_round_trip_the_depth_fields() -> None:
    rule = rules.MuP(dataset=None, batch=None, depth="depth_mup", eps_width=True)
    hp = space(rule).concretize(COORDS, TARGET)
    again = ts.Hyperparameters.from_dict(hp.to_dict())
    assert again.residual_multiplier == hp.residual_multiplier
    assert dict(again.groups["block_vector"]) == dict(hp.groups["block_vector"])
    # a dict from before the depth rule: no block_vector, no per-group eps
    old = hp.to_dict()
    del old["groups"]["block_vector"], old["residual_multiplier"]
    for group in old["groups"].values():
        del group["eps"]
    read = ts.Hyperparameters.from_dict(old)
    assert read.group("block_vector") == read.groups["vector"] and read.residual_multiplier == 1.0
    assert read.groups["hidden"]["eps"] == read.eps
    with pytest.raises(ts.TransferSearchError, match="no group 'blocks'"):
        read.group("blocks")


def test_eps_width_is_off_by_default_and_changes_nothing_else() -> None:
    on = space(rules.MuP(dataset=None, batch=None, eps_width=True)).concretize(COORDS, TARGET)
    off = space(rules.MuP(dataset=None, batch=None)).concretize(COORDS, TARGET)
    assert {g: off.group(g)["eps"] for g in rules.ALL_GROUPS} == dict.fromkeys(
        rules.ALL_GROUPS, 1e-8
    )
    assert [on.group(g)["eps"] for g in rules.ALL_GROUPS] == pytest.approx(
        [5e-9, 5e-9, 1e-8, 1e-8, 5e-9]  # input, hidden, output, vector, block_vector
    )
    for group in rules.GROUPS:
        assert on.group(group)["lr"] == off.group(group)["lr"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        space(rules.MuP(eps_width=True)).concretize(COORDS)

"""Schedules and rule objects against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

import transfersearch as ts
from transfersearch import rules


def test_su_constant_weight_decay_schedule_by_hand() -> None:
    # η_s = η_max / (λ η_max s + 1): η_max=0.01, λ=0.1, s=1000 → 0.01 / 2
    assert rules.su_constant_wd_lr(1000, 0.01, 0.1) == pytest.approx(0.005)
    assert rules.su_constant_wd_lr(0, 0.01, 0.1) == pytest.approx(0.01)


def test_su_constant_schedule_weights_every_batch_equally() -> None:
    steps = np.arange(1, 2001)
    lrs = rules.su_constant_wd_lr(steps, 0.01, 0.1)
    weights = rules.update_weights(lrs, np.full_like(lrs, 0.1))
    assert weights.max() / weights.min() == pytest.approx(1.0, rel=0.01)


def test_su_proportional_schedule_by_hand() -> None:
    # √(2 · 0.1 · 0.01 · 1500 + 1) = √4 = 2
    lr, wd = rules.su_proportional_lr_wd(1500, 0.01, 0.1)
    assert lr == pytest.approx(0.005) and wd == pytest.approx(0.05)


def test_kosson_warmup_factors_by_hand() -> None:
    # s^(−max(0, 1 − t/T_w)): s=4, t=50, T_w=100 → 4^−0.5 = 0.5
    assert rules.exp_warmup_factor(50, 4.0, 100) == pytest.approx(0.5)
    assert rules.exp_warmup_factor(0, 4.0, 100) == pytest.approx(0.25)
    assert rules.exp_warmup_factor(500, 4.0, 100) == pytest.approx(1.0)
    # 1 − (1 − 1/s)(1 − ηλ)^t: s=4, ηλ=0.01, t=100 → 1 − 0.75 · 0.99^100
    got = rules.decay_away_warmup_factor(100, 4.0, 0.1, 0.1)
    assert got == pytest.approx(1 - 0.75 * 0.99**100)
    assert rules.decay_away_warmup_factor(0, 4.0, 0.1, 0.1) == pytest.approx(0.25)


def test_update_weights_exact_product_by_hand() -> None:
    # w_3 coefficients: η1(1−η2λ2)(1−η3λ3), η2(1−η3λ3), η3
    got = rules.update_weights([0.1, 0.2, 0.3], [1.0, 1.0, 1.0])
    assert got == pytest.approx([0.1 * 0.8 * 0.7, 0.2 * 0.7, 0.3])
    with pytest.raises(ts.TransferSearchError, match="equal length"):
        rules.update_weights([0.1], [0.1, 0.2])


def test_ema_momentum_rule_and_bad_values() -> None:
    assert rules.scale_ema_momentum(0.99, 2) == pytest.approx(0.9801)
    with pytest.raises(ts.TransferSearchError, match="ema_momentum=1.5"):
        rules.scale_ema_momentum(1.5, 2)


def test_decay_matching_refuses_an_unstable_product() -> None:
    with pytest.raises(ts.TransferSearchError, match="Lower lr or weight_decay"):
        rules.AdamBatch().transfer(1.0, 2.0, (0.9, 0.999), 1e-8, 4.0)


def test_rule_strings_resolve_and_bad_strings_say_the_options() -> None:
    assert isinstance(rules.MuP(batch="sgd").batch_rule, rules.SGDBatch)
    assert isinstance(rules.MuP(dataset="power_lines").dataset_rule, rules.PowerLinesTau)
    with pytest.raises(ts.TransferSearchError, match="'adam', 'sgd'"):
        rules.MuP(batch="lamb")
    with pytest.raises(ts.TransferSearchError, match="power_lines"):
        rules.MuP(dataset="chinchilla")


def test_vector_weight_decay_is_optional() -> None:
    on = rules.MuP(vector_weight_decay=True).group_multipliers(4.0)
    off = rules.MuP().group_multipliers(4.0)
    assert on["vector"] == (1.0, 1.0) and off["vector"] == (1.0, 0.0)
    assert off["hidden"] == (0.25, 4.0)
    assert math.isclose(rules.MuP(wd_width_exponent=0.5).group_multipliers(4.0)["hidden"][1], 2.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "1", None])
def test_mup_refuses_a_non_finite_exponent_at_construction(bad: object) -> None:
    with pytest.raises(ts.TransferSearchError, match="wd_width_exponent"):
        rules.MuP(wd_width_exponent=bad)  # type: ignore[arg-type]


def test_rules_list_the_scale_names_they_read() -> None:
    assert rules.MuP().scale_names == ("width", "dataset_size", "batch_size")
    assert rules.MuP(dataset="power_lines", batch=None).scale_names == (
        "width",
        "tokens",
        "dataset_size",
        "params",
    )


@pytest.mark.parametrize("batch", [rules.AdamBatch(), rules.SGDBatch()])
def test_batch_rules_refuse_betas_that_are_not_a_pair(batch: rules.BatchRule) -> None:
    with pytest.raises(ts.TransferSearchError, match=r"betas=0\.9\. Write betas=\(0\.9, 0\.999\)"):
        batch.transfer(1e-3, 0.1, 0.9, 1e-8, 4.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kappa", "beta1"),
    [
        # κ(1 − β) < 1, the regime where the linear form is defined: 0.9^4 = 0.6561 (linear 0.6)
        (4.0, 0.6561),
        # just below κ(1 − β) = 1: 0.9^9.988 = exp(9.988 · ln 0.9) = exp(−1.052338) = 0.349120
        (9.988, 0.3491196),
        # at it: 0.9^10 = 0.3486784401 (the linear form gives 0, Adam without momentum)
        (10.0, 0.3486784401),
        # past it: 0.9^10.004 = exp(10.004 · ln 0.9) = exp(−1.054027) = 0.348532
        (10.004, 0.3485315),
        # fewer steps' worth of averaging (κ < 1): 0.9^(1/8) = exp(ln 0.9 / 8) = 0.986917
        (0.125, 0.9869167),
    ],
)
def test_adam_beta_rule_is_beta_to_the_kappa_on_both_sides_of_the_old_switch(
    kappa: float, beta1: float
) -> None:
    """β̂ = β^κ, continuous in κ (issue 26 item 4): no jump at κ(1 − β₁) = 1."""
    moved = rules.AdamBatch().transfer(1e-3, 0.1, (0.9, 0.999), 1e-8, kappa)
    assert moved.betas[0] == pytest.approx(beta1, rel=1e-6)
    assert moved.beta_forms == ("power", "power")
    assert moved.betas[1] == pytest.approx(0.999**kappa)
    # the former 'auto' name gives the same numbers
    assert rules.AdamBatch(beta_form="auto").transfer(1e-3, 0.1, (0.9, 0.999), 1e-8, kappa) == moved


def test_adam_beta1_moves_continuously_across_the_old_switch() -> None:
    """Across κ(1 − β₁) = 1 the default β₁ moves by about as much as κ does (it jumped 0.0012 →
    0.349 before); the linear form, where defined, agrees to first order in κ(1 − β)."""
    kappas = np.linspace(9.9, 10.1, 41)
    beta1 = [rules.AdamBatch().transfer(1e-3, 0.1, (0.9, 0.999), 1e-8, k).betas[0] for k in kappas]
    assert max(abs(np.diff(beta1))) < 0.001
    small = rules.AdamBatch(beta_form="linear").transfer(1e-3, 0.1, (0.9, 0.999), 1e-8, 1.01)
    assert small.betas[0] == pytest.approx(0.9**1.01, abs=1e-4)


def test_linear_beta_form_refuses_the_boundary_and_power_form_matches_ema_rule() -> None:
    with pytest.raises(ts.TransferSearchError, match=r"open interval \(0, 1\)"):
        rules.AdamBatch(beta_form="linear").transfer(1e-3, 0.1, (0.9, 0.999), 1e-8, 10.0)
    # the power form of a beta and the model-EMA rule are one formula, ρ̂ = ρ^κ (Def. 1.2)
    power = rules.AdamBatch(beta_form="power").transfer(1e-3, 0.1, (0.9, 0.999), 1e-8, 10.0)
    assert power.betas[0] == pytest.approx(rules.scale_ema_momentum(0.9, 10.0))
    # ε̂ = ε/√κ and η̂ = √κ·η (Busbridge et al. App. C)
    assert power.eps == pytest.approx(1e-8 / math.sqrt(10)) and power.lr == pytest.approx(
        1e-3 * math.sqrt(10)
    )


def test_swept_beta1_round_trips_across_the_form_switch() -> None:
    """coordinates() undoes whichever form concretize used, on either side of κ(1 − β) = 1."""
    base = ts.Scale(width=64, dataset_size=1e5, batch_size=100)
    space = ts.TransferSpace(
        base, {"lr": ts.Float(1e-4, 1e-1, log=True), "tau_epoch": 1.0, "beta1": ts.Float(0.8, 0.95)}
    )
    for batch in (998.8, 1000.0, 1000.4):
        hp = space.concretize({"lr": 1e-3, "beta1": 0.9}, {"batch_size": batch})
        assert space.coordinates(hp)["beta1"] == pytest.approx(0.9)

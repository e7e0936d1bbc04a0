"""TransferSpace and the coordinates: hand computations, round trips, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import transfersearch as ts
from transfersearch.space import base_point, eta_lambda_from_tau_epoch, tau_epoch_from_eta_lambda

BASE = ts.Scale(width=256, dataset_size=50_000, batch_size=128)


def make_space(rule: ts.rules.Rule | None = None, **kwargs: object) -> ts.TransferSpace:
    return ts.TransferSpace(
        base=BASE,
        coords={
            "base_lr": ts.Float(1e-4, 1e-1, log=True),
            "tau_epoch": ts.Float(0.05, 20.0, log=True),
        },
        rule=rule or ts.rules.MuP(wd_width_exponent=1.0),
        **kwargs,  # type: ignore[arg-type]
    )


def test_base_scale_gives_the_coordinates_back_by_hand() -> None:
    hp = make_space().concretize({"base_lr": 3e-3, "tau_epoch": 1.0})
    # λ = B / (η N τ_epoch) = 128 / (3e-3 · 50000 · 1) (Wang & Aitchison Eq. 11)
    assert hp.lr == pytest.approx(3e-3)
    assert hp.weight_decay == pytest.approx(128 / (3e-3 * 50_000))
    assert hp.tau_epoch == pytest.approx(1.0)
    assert hp.betas == (0.9, 0.999) and hp.eps == 1e-8
    assert hp.groups["vector"]["weight_decay"] == 0.0
    assert hp.groups["input"]["lr"] == pytest.approx(3e-3)


def test_four_times_width_divides_hidden_lr_and_multiplies_weight_decay() -> None:
    coords = {"base_lr": 3e-3, "tau_epoch": 1.0}
    base = make_space().concretize(coords)
    wide = make_space().concretize(coords, ts.Scale(width=1024))
    assert wide.groups["hidden"]["lr"] == pytest.approx(base.lr / 4)
    assert wide.groups["hidden"]["weight_decay"] == pytest.approx(base.weight_decay * 4)
    assert wide.groups["output"]["lr"] == pytest.approx(base.lr / 4)
    assert wide.groups["input"]["lr"] == pytest.approx(base.lr)
    assert wide.groups["input"]["weight_decay"] == pytest.approx(base.weight_decay)
    assert wide.groups["vector"]["lr"] == pytest.approx(base.lr)
    assert wide.tau_iter == pytest.approx(base.tau_iter)
    fan = make_space(ts.rules.MuP(wd_width_exponent=0.5)).concretize(coords, ts.Scale(width=1024))
    assert fan.weight_decay == pytest.approx(base.weight_decay * 2)
    std_wd = make_space(ts.rules.MuP(wd_width_exponent=0.0)).concretize(
        coords, ts.Scale(width=1024)
    )
    assert std_wd.weight_decay == pytest.approx(base.weight_decay)


def test_standard_and_sqrt_width_rules_by_hand() -> None:
    coords = {"base_lr": 3e-3, "tau_epoch": 1.0}
    base = make_space().concretize(coords)
    std = make_space(ts.rules.Standard()).concretize(coords, ts.Scale(width=1024))
    assert std.lr == pytest.approx(base.lr) and std.weight_decay == pytest.approx(base.weight_decay)
    sqrt = make_space(ts.rules.SqrtWidth()).concretize(coords, ts.Scale(width=1024))
    assert sqrt.lr == pytest.approx(base.lr / 2)
    assert sqrt.weight_decay == pytest.approx(base.weight_decay * 2)
    assert sqrt.groups["input"]["lr"] == pytest.approx(base.lr)


def test_four_times_dataset_divides_weight_decay() -> None:
    coords = {"base_lr": 3e-3, "tau_epoch": 1.0}
    base = make_space().concretize(coords)
    more = make_space().concretize(coords, ts.Scale(dataset_size=200_000))
    assert more.lr == pytest.approx(base.lr)
    assert more.weight_decay == pytest.approx(base.weight_decay / 4)
    assert more.tau_epoch == pytest.approx(1.0)
    fixed = make_space(ts.rules.MuP(dataset=None)).concretize(
        coords, ts.Scale(dataset_size=200_000)
    )
    assert fixed.weight_decay == pytest.approx(base.weight_decay)


def test_four_times_batch_under_adam_by_hand() -> None:
    coords = {"base_lr": 3e-3, "tau_epoch": 1.0}
    space = make_space(ema_momentum=0.999)
    base = space.concretize(coords)
    big = space.concretize(coords, ts.Scale(batch_size=512))
    assert big.lr == pytest.approx(base.lr * 2)
    assert big.eps == pytest.approx(base.eps / 2)
    # β̂ = β^κ (continuous in κ; Busbridge's 1 − κ(1 − β) to first order): 0.999^4, 0.9^4
    assert big.betas[1] == pytest.approx(0.999**4) and big.betas[0] == pytest.approx(0.6561)
    assert big.ema_momentum == pytest.approx(0.999**4)
    # exact decay matching: 1 − η̂λ̂ = (1 − ηλ)^4 (Busbridge et al. Eq. 11–13)
    assert 1 - big.lr * big.weight_decay == pytest.approx((1 - base.lr * base.weight_decay) ** 4)
    assert big.tau_epoch == pytest.approx(1.0, rel=0.01)
    assert big.batch_size == 512


def test_large_batch_ratio_keeps_beta1_to_the_kappa_and_says_where_linear_fails() -> None:
    hp = make_space().concretize({"base_lr": 3e-3, "tau_epoch": 1.0}, ts.Scale(batch_size=128 * 16))
    assert hp.betas[0] == pytest.approx(0.9**16)
    assert hp.betas[1] == pytest.approx(0.999**16)
    # κ(1 − β₁) = 1.6 >= 1: the note names the linear form's value; β₂'s 0.016 gets none
    assert [n for n in hp.notes if "beta" in n] == [
        "beta1 = beta**kappa = 0.1853 at kappa=16 (the linear form 1 - kappa*(1 - beta) would be -0.6)"
    ]
    linear = ts.rules.MuP(batch=ts.rules.AdamBatch(beta_form="linear"))
    with pytest.raises(ts.TransferSearchError, match="beta_form='power'"):
        make_space(linear).concretize(
            {"base_lr": 3e-3, "tau_epoch": 1.0}, ts.Scale(batch_size=2048)
        )


def test_sgd_batch_rule_is_linear_and_none_changes_nothing() -> None:
    coords = {"base_lr": 3e-3, "tau_epoch": 1.0}
    base = make_space().concretize(coords)
    sgd = make_space(ts.rules.MuP(batch="sgd")).concretize(coords, ts.Scale(batch_size=512))
    assert sgd.lr == pytest.approx(base.lr * 4) and sgd.betas == base.betas
    assert sgd.eps == base.eps
    # λ̂ = (1 − (1 − ηλ)^κ)/η̂ ≈ λ for SGD
    expected = (1 - (1 - base.lr * base.weight_decay) ** 4) / (4 * base.lr)
    assert sgd.weight_decay == pytest.approx(expected)
    none = make_space(ts.rules.MuP(batch=None)).concretize(coords, ts.Scale(batch_size=512))
    assert none.lr == base.lr and none.weight_decay == base.weight_decay


def test_independent_wd_batch_transform_by_hand() -> None:
    """The independent decay λ' = ηλ at κB is 1 − (1 − λ')^κ (Busbridge et al. Eq. 11–13)."""
    moved = ts.rules.AdamBatch().transfer(0.02, 0.5, (0.9, 0.999), 1e-8, 4.0)
    assert moved.lr * moved.weight_decay == pytest.approx(1 - 0.99**4)


def test_tau_epoch_conversions_are_a_matched_pair() -> None:
    scale = ts.Scale(batch_size=64, dataset_size=2e4)
    tau = tau_epoch_from_eta_lambda(0.004, scale)
    assert tau == pytest.approx(64 / (0.004 * 2e4))
    assert eta_lambda_from_tau_epoch(tau, scale) == pytest.approx(0.004)
    with pytest.raises(ts.TransferSearchError, match="dataset_size"):
        tau_epoch_from_eta_lambda(0.004, ts.Scale(batch_size=64))


def test_power_lines_prior_by_hand() -> None:
    prior = ts.rules.PowerLinesTau()
    assert prior.tau_opt(20.0) == pytest.approx(1.084 * 20.0**-0.527)
    base = ts.Scale(dataset_size=1e9, batch_size=1e6, params=1e8)
    target = ts.Scale(dataset_size=4e9, batch_size=1e6, params=1e8)
    factor = prior.eta_lambda_factor(base, target)
    # ηλ ∝ 1/(N τ_opt): (1/4) · τ(10)/τ(40) = (1/4) · 4^0.527
    assert factor == pytest.approx(0.25 * 4**0.527)
    with pytest.raises(ts.TransferSearchError, match="params"):
        prior.eta_lambda_factor(ts.Scale(dataset_size=1.0), ts.Scale(dataset_size=2.0))


def test_every_sufficient_pair_gives_the_same_point() -> None:
    lr, wd = 3e-3, 0.1
    product = lr * wd
    tau_epoch = BASE["batch_size"] / (product * BASE["dataset_size"])
    pairs = [
        {"lr": lr, "weight_decay": wd},
        {"base_lr": lr, "eta_lambda": product},
        {"lr": lr, "independent_wd": product},
        {"lr": lr, "tau_iter": 1 / product},
        {"lr": lr, "tau_epoch": tau_epoch},
        {"weight_decay": wd, "tau_epoch": tau_epoch},
        {"weight_decay": wd, "eta_lambda": product},
    ]
    for pair in pairs:
        got = base_point(pair, BASE)
        assert got == pytest.approx((lr, wd)), pair


@pytest.mark.parametrize(
    ("coords", "match"),
    [
        ({"base_lr": ts.Float(1e-4, 1.0, log=True)}, "not enough"),
        ({"lr": 1e-3, "base_lr": 1e-3}, "conflicting"),
        ({"lr": 1e-3, "weight_decay": 0.1, "tau_epoch": 1.0}, "conflicting"),
        ({"tau_epoch": 1.0, "tau_iter": 100.0}, "conflicting"),
    ],
)
def test_insufficient_or_conflicting_coordinates_say_what_is_needed(
    coords: dict[str, object], match: str
) -> None:
    with pytest.raises(ts.TransferSearchError, match=match) as info:
        ts.TransferSpace(base=BASE, coords=coords)  # type: ignore[arg-type]
    assert "base_lr + tau_epoch" in str(info.value)


@pytest.mark.parametrize("bad", [0.0, -1e-3, math.nan, math.inf])
def test_non_positive_or_non_finite_coordinates_are_refused(bad: float) -> None:
    space = ts.TransferSpace(base=BASE, coords={"lr": ts.Float(1e-4, 1.0), "tau_epoch": 1.0})
    with pytest.raises(ts.TransferSearchError, match="lr"):
        space.concretize({"lr": bad})


def test_coordinates_past_the_swept_range_warn_in_decades_and_still_concretize() -> None:
    """A prediction past the box is what extrapolation is for: a warning and a note, no error."""
    with pytest.warns(ts.TransferSearchWarning) as caught:
        hp = make_space().concretize({"base_lr": 0.5, "tau_epoch": 1.0})
    # log10(0.5 / 0.1) = 0.699 decades above [1e-4, 0.1]
    message = str(caught[0].message)
    assert "base_lr 0.5 lies 0.70 decades above the swept range [0.0001, 0.1]" in message
    assert hp.lr == pytest.approx(0.5)
    assert any("0.70 decades above" in note for note in hp.notes)
    assert any("0.70 decades above" in note for note in hp.to_dict()["notes"])
    with pytest.warns(ts.TransferSearchWarning, match=r"tau_epoch 0\.001 lies 1\.70 decades below"):
        make_space().concretize({"base_lr": 1e-3, "tau_epoch": 1e-3})


def test_missing_unknown_and_conflicting_fixed_values() -> None:
    space = ts.TransferSpace(BASE, {"lr": ts.Float(1e-4, 1.0), "tau_epoch": 1.0, "dropout": 0.1})
    with pytest.raises(ts.TransferSearchError, match="missing"):
        space.concretize({})
    with pytest.raises(ts.TransferSearchError, match="not in this space"):
        space.concretize({"lr": 1e-3, "momentum": 0.9})
    with pytest.raises(ts.TransferSearchError, match="conflicts"):
        space.concretize({"lr": 1e-3, "tau_epoch": 2.0})
    hp = space.concretize({"lr": 1e-3})
    assert hp.extra == {"dropout": 0.1}


def test_target_with_a_name_the_base_lacks_is_refused() -> None:
    space = ts.TransferSpace(ts.Scale(width=64), {"lr": ts.Float(1e-4, 1.0), "weight_decay": 0.1})
    with pytest.raises(ts.TransferSearchError, match="batch_size"):
        space.concretize({"lr": 1e-3}, ts.Scale(batch_size=64))


def test_distribution_validation() -> None:
    with pytest.raises(ts.TransferSearchError, match="low <= high"):
        ts.Float(1.0, 0.1)
    with pytest.raises(ts.TransferSearchError, match="low > 0"):
        ts.Float(0.0, 1.0, log=True)
    with pytest.raises(ts.TransferSearchError, match="empty"):
        ts.Choice([])
    assert ts.Int(1, 9, step=2).contains(5) and not ts.Int(1, 9, step=2).contains(4)
    assert ts.Choice(["a", "b"]).contains("a")


def test_optimizer_coordinates_are_carried_by_the_batch_rule() -> None:
    space = ts.TransferSpace(
        BASE,
        {"lr": ts.Float(1e-4, 1.0, log=True), "tau_epoch": 1.0, "beta2": ts.Float(0.9, 0.9999)},
    )
    hp = space.concretize({"lr": 1e-3, "beta2": 0.99}, ts.Scale(batch_size=256))
    assert hp.betas[1] == pytest.approx(0.99**2)
    back = space.coordinates(hp)
    assert back["beta2"] == pytest.approx(0.99) and back["lr"] == pytest.approx(1e-3)


def test_to_dict_round_trip() -> None:
    hp = make_space(ema_momentum=0.99).concretize(
        {"base_lr": 3e-3, "tau_epoch": 1.0}, ts.Scale(width=512, batch_size=256)
    )
    again = ts.Hyperparameters.from_dict(hp.to_dict())
    assert again == hp
    assert hp.width_mult == 2.0 and hp.base == BASE


def test_total_steps_divided_by_batch_ratio() -> None:
    space = ts.TransferSpace(
        ts.Scale(dataset_size=50_000, batch_size=128, epochs=2),
        {"lr": ts.Float(1e-4, 1.0), "tau_epoch": 1.0},
    )
    base = space.concretize({"lr": 1e-3})
    big = space.concretize({"lr": 1e-3}, ts.Scale(batch_size=512))
    assert big.total_steps == pytest.approx(base.total_steps / 4)  # type: ignore[operator]


scales = st.builds(
    lambda w, n, b: ts.Scale(width=w, dataset_size=n, batch_size=b),
    st.sampled_from([32, 64, 256, 1024, 8192]),
    st.floats(1e3, 1e8),
    st.sampled_from([16, 64, 128, 512, 1024]),
)
rules = st.sampled_from(
    [
        ts.rules.MuP(),
        ts.rules.MuP(wd_width_exponent=0.5),
        ts.rules.MuP(wd_width_exponent=0.0, batch="sgd"),
        ts.rules.Standard(),
        ts.rules.SqrtWidth(batch=None),
        ts.rules.MuP(dataset=None),
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    base_lr=st.floats(1e-4, 3e-2),
    tau_epoch=st.floats(0.05, 20.0),
    scale=scales,
    rule=rules,
)
def test_round_trip_coordinates_to_hyperparameters_and_back(
    base_lr: float, tau_epoch: float, scale: ts.Scale, rule: ts.rules.Rule
) -> None:
    space = make_space(rule)
    coords = {"base_lr": base_lr, "tau_epoch": tau_epoch}
    try:
        hp = space.concretize(coords, scale)
    except ts.TransferSearchError as exc:  # decay matching needs lr*wd < 1
        assert "(0, 1)" in str(exc)
        return
    back = space.coordinates(hp, scale)
    assert back["base_lr"] == pytest.approx(base_lr, rel=1e-9)
    assert back["tau_epoch"] == pytest.approx(tau_epoch, rel=1e-7)


@settings(max_examples=100, deadline=None)
@given(tau_epoch=st.floats(0.05, 10.0), factor=st.floats(1.01, 100.0), scale=scales)
def test_longer_tau_epoch_means_less_weight_decay_and_wider_lowers_hidden_lr(
    tau_epoch: float, factor: float, scale: ts.Scale
) -> None:
    space = make_space()
    try:
        hp = space.concretize({"base_lr": 1e-3, "tau_epoch": tau_epoch}, scale)
        longer_tau = min(20.0, tau_epoch * factor)
        longer = space.concretize({"base_lr": 1e-3, "tau_epoch": longer_tau}, scale)
        wider = space.concretize(
            {"base_lr": 1e-3, "tau_epoch": tau_epoch}, scale.replace(width=scale["width"] * 2)
        )
    except ts.TransferSearchError:  # lr*wd >= 1 at tiny datasets: no valid AdamW step
        assume(False)
        raise
    assert longer.weight_decay < hp.weight_decay
    assert wider.lr < hp.lr and wider.weight_decay > hp.weight_decay


def test_unstable_target_names_the_scale_and_group() -> None:
    with pytest.raises(
        ts.TransferSearchError,
        match=r"at Scale\(.*dataset_size=100.*group \(lr=.*Lower lr or weight_decay",
    ):
        make_space().concretize(
            {"base_lr": 0.1, "tau_epoch": 0.05}, ts.Scale(batch_size=256, dataset_size=100)
        )


# ----------------------------------------------------------------------------------------------
# Issue 11: steps, Power Lines tokens and params, target names, betas
# ----------------------------------------------------------------------------------------------
def steps_space() -> ts.TransferSpace:
    return ts.TransferSpace(
        ts.Scale(width=256, dataset_size=50_000, batch_size=256, steps=10_000),
        {"lr": ts.Float(1e-4, 1.0, log=True), "tau_epoch": 1.0},
    )


def test_base_steps_are_divided_by_the_batch_ratio_and_follow_the_data_by_hand() -> None:
    # Busbridge et al. 2023 App. C: N̂_iter = N_iter / κ at fixed data.
    space = steps_space()
    assert space.concretize({"lr": 1e-3}).total_steps == 10_000
    big = space.concretize({"lr": 1e-3}, ts.Scale(batch_size=1024))
    assert big.total_steps == pytest.approx(10_000 / 4)  # κ = 4: 2500
    assert big.scale["steps"] == pytest.approx(2_500)
    more = space.concretize({"lr": 1e-3}, ts.Scale(batch_size=1024, dataset_size=400_000))
    assert more.total_steps == pytest.approx(10_000 * 8 / 4)  # 8× data, κ = 4: 20000
    assert space.coordinates(more)["lr"] == pytest.approx(1e-3)
    # a target that states its own steps or epochs keeps them
    assert space.concretize({"lr": 1e-3}, {"batch_size": 1024, "steps": 7}).total_steps == 7
    epochs = space.concretize({"lr": 1e-3}, ts.Scale(epochs=3, batch_size=512))
    assert epochs.total_steps == pytest.approx(3 * 50_000 / 512)


def test_base_steps_follow_tokens_when_the_base_counts_tokens() -> None:
    space = ts.TransferSpace(
        ts.Scale(tokens=1e9, batch_size=512, steps=1_000),
        {"lr": ts.Float(1e-4, 1.0, log=True), "eta_lambda": 1e-4},
        ts.rules.MuP(dataset=None),
    )
    hp = space.concretize({"lr": 1e-3}, ts.Scale(tokens=4e9, batch_size=1024))
    assert hp.total_steps == pytest.approx(1_000 * 4 / 2)


def power_lines_space() -> ts.TransferSpace:
    return ts.TransferSpace(
        ts.Scale(width=256, tokens=1e9, params=1e8, batch_size=256),
        {"lr": ts.Float(1e-4, 1.0, log=True), "eta_lambda": 1e-4},
        ts.rules.MuP(dataset="power_lines", batch=None),
    )


def test_power_lines_moves_eta_lambda_with_tokens_by_hand() -> None:
    # ηλ = B/(τD) (Wang & Aitchison Eq. 10, one epoch: N = D tokens) with τ_opt ∝ TPP^−0.527
    # (Bergsma et al. 2025, quoted in Wang & Aitchison §5.1). 4× tokens at fixed params:
    # factor = (1/4) · 4^0.527 = 0.519 — ηλ falls (it rose to 2.076 when tokens were ignored).
    hp = power_lines_space().concretize({"lr": 1e-3}, ts.Scale(tokens=4e9))
    assert hp.lr == pytest.approx(1e-3)
    assert hp.lr * hp.weight_decay == pytest.approx(1e-4 * 0.25 * 4**0.527)
    assert 0.25 * 4**0.527 == pytest.approx(0.519, abs=5e-4)


def test_power_lines_target_changing_width_must_give_params() -> None:
    space = power_lines_space()
    with pytest.raises(
        ts.TransferSearchError, match=r"width=1024 but gives no `params`.*params=\.\.\."
    ):
        space.concretize({"lr": 1e-3}, ts.Scale(width=1024))
    # 16× params at fixed tokens: TPP ÷ 16, τ_opt × 16^0.527, so ηλ ÷ 16^0.527 (µP keeps ηλ in width)
    hp = space.concretize({"lr": 1e-3}, ts.Scale(width=1024, params=1.6e9))
    assert hp.lr == pytest.approx(1e-3 / 4)
    assert hp.lr * hp.weight_decay == pytest.approx(1e-4 * 16**-0.527)
    with pytest.raises(ts.TransferSearchError, match="tokens"):
        ts.rules.PowerLinesTau().eta_lambda_factor(
            ts.Scale(dataset_size=1e9, params=1e8),
            ts.Scale(tokens=4e9, dataset_size=1e9, params=1e8),
        )


def test_misspelt_target_scale_name_is_refused_with_the_close_match() -> None:
    coords = {"base_lr": 3e-3, "tau_epoch": 1.0}
    with pytest.raises(
        ts.TransferSearchError, match=r"'widht' -> did you mean 'width'\?.*custom_scale_names"
    ):
        make_space().concretize(coords, scale={"widht": 1024})
    declared = make_space(custom_scale_names=("heads",))
    hp = declared.concretize(coords, ts.Scale(heads=8))
    assert hp.scale["heads"] == 8 and hp.lr == pytest.approx(3e-3)
    assert make_space().concretize(coords, ts.Scale(depth=8)).lr == pytest.approx(3e-3)


@pytest.mark.parametrize("bad", [0.9, "0.9", (0.9,), (0.9, 1.0), (0.9, math.nan), None])
def test_betas_must_be_a_pair_in_the_unit_interval(bad: object) -> None:
    with pytest.raises(ts.TransferSearchError, match=r"betas=.*Write betas=\(0\.9, 0\.999\)"):
        make_space(betas=bad)
    hp = make_space().concretize({"base_lr": 3e-3, "tau_epoch": 1.0})
    with pytest.raises(ts.TransferSearchError, match="a pair"):
        ts.Hyperparameters(scale=hp.scale, groups=hp.groups, betas=bad)  # type: ignore[arg-type]


def test_extrapolated_optimum_past_the_swept_box_gives_hyperparameters_with_a_warning() -> None:
    """Issue 18 item 5: a law that drifts past the box still yields hyperparameters.

    Swept box base_lr in [1e-3, 1e-2]; the synthetic law (synthetic.log_optimum) puts every
    rung's optimum inside it but the target's at 3e-3 · 64^-0.6 · 4^0.25 = 3.5e-4, below it.
    """
    from transfersearch import synthetic

    box = ts.TransferSpace(
        synthetic.BASE,
        {"base_lr": ts.Float(1e-3, 1e-2, log=True), "tau_epoch": ts.Float(0.1, 10.0, log=True)},
    )
    rng = np.random.default_rng(0)
    observations = []
    for rung in synthetic.LADDER:
        for _ in range(16):
            point = box.sample(rng)
            loss = synthetic.regret(rung, point) + rng.normal(0.0, 0.002)
            observations.append(ts.Observation(rung, point, loss))
    target = ts.Scale(width=4096, dataset_size=8e4, batch_size=64)
    result = ts.extrapolate(observations, target=target, seed=0)
    predicted = result.params["base_lr"]
    assert predicted < 1e-3, "precondition: the prediction lies below the swept box"
    decades = math.log10(1e-3 / predicted)
    with pytest.warns(ts.TransferSearchWarning, match="below the swept range") as caught:
        hp = result.hyperparameters(box)
    assert f"{decades:.2f} decades below the swept range [0.001, 0.01]" in str(caught[0].message)
    # µP at s = 64: hidden lr = base_lr / 64, and the note travels with the JSON form
    assert hp.lr == pytest.approx(predicted / 64)
    assert any("decades below" in note for note in hp.to_dict()["notes"])
    assert box.coordinates(hp)["base_lr"] == pytest.approx(predicted)


def test_cli_json_gives_hyperparameters_past_the_swept_box(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18 item 5 through ``transfersearch extrapolate --json`` on a study with its space."""
    optuna = pytest.importorskip("optuna")
    from transfersearch import synthetic
    from transfersearch.cli import main
    from transfersearch.stored_space import SPACE_ATTR, space_to_json

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    box = ts.TransferSpace(
        synthetic.BASE,
        {"base_lr": ts.Float(1e-3, 1e-2, log=True), "tau_epoch": ts.Float(0.1, 10.0, log=True)},
    )
    storage = f"sqlite:///{tmp_path / 'box.db'}"
    study = optuna.create_study(storage=storage, study_name="box")
    study.set_user_attr(SPACE_ATTR, space_to_json(box))
    dists = {
        name: optuna.distributions.FloatDistribution(dist.low, dist.high, log=True)
        for name, dist in box.distributions.items()
        if isinstance(dist, ts.Float)
    }
    rng = np.random.default_rng(0)
    for rung in synthetic.LADDER:
        for _ in range(16):
            point = box.sample(rng)
            study.add_trial(
                optuna.trial.create_trial(
                    params=point,
                    distributions=dists,
                    value=synthetic.regret(rung, point) + rng.normal(0.0, 0.002),
                    user_attrs={f"scale.{k}": v for k, v in rung.items()},
                )
            )
    argv = ["extrapolate", "--storage", storage, "--study", "box", "--json"]
    argv += ["--target", "width=4096,dataset_size=8e4,batch_size=64"]
    with pytest.warns(ts.TransferSearchWarning, match="decades below the swept range"):
        status = main(argv)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    data = json.loads(captured.out)
    assert data["params"]["base_lr"] < 1e-3, "precondition: the prediction lies below the box"
    notes = data["hyperparameters"]["notes"]
    assert any("decades below the swept range [0.001, 0.01]" in note for note in notes)
    with pytest.warns(ts.TransferSearchWarning, match="decades below the swept range"):
        assert main([a for a in argv if a != "--json"]) == 0
    text = capsys.readouterr().out  # the table's reader sees the note too, not only stderr
    assert "note: base_lr" in text and "decades below the swept range [0.001, 0.01]" in text


def test_a_linear_coordinate_past_its_range_is_measured_in_its_own_units() -> None:
    """Decades only mean something for positive log quantities; a beta is off by a difference."""
    space = ts.TransferSpace(
        BASE,
        {"lr": ts.Float(1e-4, 1e-1, log=True), "tau_epoch": 1.0, "beta1": ts.Float(0.8, 0.95)},
    )
    # 0.97 − 0.95 = 0.02, i.e. 0.02 / 0.15 = 13% of the range's width
    with pytest.warns(ts.TransferSearchWarning, match=r"beta1 0\.97 lies 0\.02 \(13% of the"):
        hp = space.concretize({"lr": 1e-3, "beta1": 0.97})
    assert hp.betas[0] == pytest.approx(0.97)


def test_an_extrapolated_int_coordinate_lands_on_its_grid() -> None:
    """A fitted optimum is real-valued; an Int coordinate of the result goes to its grid."""
    space = ts.TransferSpace(
        BASE,
        {
            "lr": ts.Float(1e-4, 1e-1, log=True),
            "tau_epoch": 1.0,
            "warmup_steps": ts.Int(10, 100, step=10),
        },
    )
    assert space.on_grid({"lr": 1e-3, "warmup_steps": 47.2}) == {"lr": 1e-3, "warmup_steps": 50}
    assert space.on_grid({"warmup_steps": 163.0})["warmup_steps"] == 160  # the grid extended
    rng = np.random.default_rng(0)
    obs = []
    for width in (64, 128, 256):
        for _ in range(24):
            lr = float(np.exp(rng.uniform(np.log(1e-4), np.log(1e-1))))
            warmup = int(rng.integers(1, 11)) * 10
            loss = (np.log(lr / 3e-3)) ** 2 + 0.01 * ((warmup - 43.0) / 10) ** 2
            obs.append(
                ts.Observation(
                    scale={"width": width},
                    params={"lr": lr, "warmup_steps": warmup},
                    value=float(loss + rng.normal(0, 1e-3)),
                )
            )
    res = ts.extrapolate(obs, target={"width": 1024})
    assert res.params["warmup_steps"] != round(res.params["warmup_steps"])  # precondition
    hp = res.hyperparameters(space)
    assert hp.extra["warmup_steps"] % 10 == 0
    assert abs(hp.extra["warmup_steps"] - res.params["warmup_steps"]) <= 5


def test_every_documented_mapping_of_the_hyperparameters_serialises() -> None:
    """Issue 49, item 9: `json.dumps(hp.groups)` raised (a `mappingproxy`). The mappings are
    read-only dicts: JSON, pickle and copies take them; a change is refused."""
    import copy
    import json
    import pickle

    from transfersearch import synthetic

    hp = synthetic.make_space().concretize({"base_lr": 3e-3, "tau_epoch": 1.0}, synthetic.TOP)
    for mapping in (hp.groups, hp.coordinates, hp.extra, hp.width_lr_multipliers):
        assert json.loads(json.dumps(mapping)) == mapping
    data = json.loads(json.dumps(hp.to_dict(), allow_nan=False))
    assert ts.Hyperparameters.from_dict(data) == hp
    assert pickle.loads(pickle.dumps(hp)) == hp == copy.deepcopy(hp)
    with pytest.raises(TypeError, match="read-only"):
        hp.groups["hidden"]["lr"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        hp.groups.pop("hidden")  # type: ignore[attr-defined]

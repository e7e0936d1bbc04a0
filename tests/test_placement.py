"""Power Lines places τ_epoch's optimum: the rule's absolute τ_opt, the fit's prior centre
(docs/science.md §7.3) — by hand, and on a ladder whose trials cannot tell τ_epoch apart."""

from __future__ import annotations

import math

import numpy as np
import pytest

import transfersearch as ts

BASE = ts.Scale(width=64, params=16_384, tokens=65_536, dataset_size=2_048, batch_size=32)


def _space(dataset: str = "power_lines", **coords: ts.Float) -> ts.TransferSpace:
    return ts.TransferSpace(
        base=BASE,
        coords=coords
        or {"base_lr": ts.Float(1e-3, 1e-1, log=True), "tau_epoch": ts.Float(0.1, 10, log=True)},
        rule=ts.rules.MuP(dataset=dataset, batch=None),
    )


def test_power_lines_places_tau_epoch_by_hand() -> None:
    # TPP = 65,536 / 16,384 = 4; Bergsma et al. Eq. 3: 1.084 · 4^-0.527.
    expected = 1.084 * 4.0**-0.527
    assert expected == pytest.approx(0.5221, abs=1e-4)
    assert ts.rules.PowerLinesTau().tau_epoch_optimum(BASE) == pytest.approx(expected)
    assert _space().optimum_prior() == {"tau_epoch": pytest.approx(expected)}


def test_eta_lambda_is_placed_through_tau_epoch_at_the_base() -> None:
    space = _space(
        base_lr=ts.Float(1e-3, 1e-1, log=True), eta_lambda=ts.Float(1e-4, 1e-1, log=True)
    )
    tau = 1.084 * 4.0**-0.527
    # ηλ = B / (τ_epoch · N) = 32 / (τ · 2048).
    assert space.optimum_prior() == {"eta_lambda": pytest.approx(32 / (tau * 2048))}


def test_nothing_is_placed_without_tokens_or_by_other_rules() -> None:
    no_tokens = ts.Scale(width=64, params=16_384, dataset_size=2_048, batch_size=32)
    assert ts.rules.PowerLinesTau().tau_epoch_optimum(no_tokens) is None
    assert ts.rules.ConstantTauEpoch().tau_epoch_optimum(BASE) is None
    assert _space(dataset="tau_epoch").optimum_prior() == {}


def _flat_in_tau() -> list[ts.Observation]:
    """Three width rungs of a 5 × 5 grid whose loss depends on the lr only: the trials cannot
    tell τ_epoch apart, so only the prior says where along it the optimum lies."""
    out = []
    for width, params in ((64, 16_384), (128, 65_536), (256, 262_144)):
        scale = ts.Scale(
            width=width, params=params, tokens=65_536, dataset_size=2_048, batch_size=32
        )
        for lr in np.geomspace(0.0025, 0.04, 5):
            for tau in np.geomspace(0.1, 10.0, 5):
                loss = 2.0 + 0.03 * math.log(lr / 0.01) ** 2
                out.append(ts.Observation(scale, {"base_lr": lr, "tau_epoch": tau}, loss))
    return out


def test_a_ladder_flat_in_tau_leans_toward_the_placed_optimum() -> None:
    obs = _flat_in_tau()
    target = ts.Scale(width=512, params=1_048_576, tokens=65_536, dataset_size=2_048, batch_size=32)
    placed = ts.extrapolate(ts.Sweep(tuple(obs), space=_space()), target=target)
    unplaced = ts.extrapolate(obs, target=target)
    law = 1.084 * 4.0**-0.527
    # Without the space the box prior's centre, the grid's middle (τ = 1), is all there is; with
    # it, the centre is the law's 0.52 and the pick leans there.
    assert unplaced.params["tau_epoch"] == pytest.approx(1.0, rel=0.02)
    assert law < placed.params["tau_epoch"] < 0.95
    assert placed.params["base_lr"] == pytest.approx(0.01, rel=0.02)


def test_the_box_prior_is_centred_on_the_placement_within_the_trials() -> None:
    from transfersearch.fitting.valley import BOX_PRIOR_SD, _boxes

    u = np.array([[0.0, -1.0], [1.0, 0.0], [2.0, 1.0], [0.0, 1.0]])
    rung = np.array([0, 0, 0, 0])
    plain_centres, plain_sds = _boxes(u, rung, 1)
    centres, sds = _boxes(u, rung, 1, np.array([np.nan, -0.5]))
    np.testing.assert_allclose(plain_centres, [[1.0, 0.0]])
    np.testing.assert_allclose(centres, [[1.0, -0.5]])  # placed along the second only
    np.testing.assert_allclose(sds, plain_sds)  # the design's spread is kept
    np.testing.assert_allclose(plain_sds, [[BOX_PRIOR_SD * 2.0, BOX_PRIOR_SD * 2.0]])
    far, _ = _boxes(u, rung, 1, np.array([5.0, -9.0]))
    np.testing.assert_allclose(far, [[2.0, -1.0]])  # held within the trials' range

"""The optimum's path given its second-order term (docs/science.md §7.6): the bend features by
hand, a bent path followed, a straight one left straight, and the no-drift model without it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from transfersearch import Observation, Scale, TransferSearchError, extrapolate
from transfersearch.fitting.engine import _check
from transfersearch.fitting.onemodel import BEND_PREFIX, _with_bend, fit_ladder
from transfersearch.fitting.options import FitOptions
from transfersearch.sweep import Sweep

WIDTHS = (64, 128, 256, 512, 1024, 2048)
TARGET = Scale(width=8192)


def _ladder_trials(curvature: float, seed: int = 0) -> list[Observation]:
    """Six widths; the lr optimum's log path ``ln lr* = ln 0.01 − 0.5ℓ + ½·curvature·ℓ²`` in
    ``ℓ = ln(width/64)``; nine lr values a factor √2 apart about each rung's optimum on an
    exactly quadratic valley (curvature 0.1 per log unit²) with noise sd 1e-4."""
    rng = np.random.default_rng(seed)
    out = []
    for width in WIDTHS:
        ell = math.log(width / 64)
        centre = math.log(0.01) - 0.5 * ell + 0.5 * curvature * ell**2
        for k in range(-4, 5):
            x = centre + 0.5 * k * math.log(2.0) + rng.uniform(-0.1, 0.1)
            value = 3.0 + 0.05 * (x - centre) ** 2 + rng.normal(0.0, 1e-4)
            out.append(Observation({"width": width}, {"lr": math.exp(x)}, value))
    return out


def _fit(curvature: float):  # type: ignore[no-untyped-def]
    obs = _ladder_trials(curvature)
    options = FitOptions(params=("lr",), seed=0)
    checked = _check(Sweep(tuple(obs)), obs, TARGET, options, ("lr",), 0)
    ladder = checked.ladder
    return ladder, fit_ladder(ladder, ladder.target_logs(checked.target), seed=0)


def _truth(curvature: float) -> float:
    ell = math.log(TARGET["width"] / 64)
    return math.log(0.01) - 0.5 * ell + 0.5 * curvature * ell**2


def test_the_bend_features_by_hand() -> None:
    obs = [
        Observation({"width": w, "dataset_size": n}, {"lr": lr}, 1.0 + lr)
        for w, n in ((64, 1e6), (128, 4e6), (256, 2e6))
        for lr in (0.01, 0.02)
    ]
    options = FitOptions(params=("lr",), seed=0)
    target = Scale(width=1024, dataset_size=1.6e7)
    checked = _check(Sweep(tuple(obs)), obs, target, options, ("lr",), 0)
    ladder = checked.ladder
    bent, target_logs = _with_bend(ladder, ladder.target_logs(target))
    assert bent.variables == (
        *ladder.variables,
        f"{BEND_PREFIX}dataset_size*dataset_size",
        f"{BEND_PREFIX}dataset_size*width",
        f"{BEND_PREFIX}width*width",
    )
    # by hand: the rungs' mean log scale, then ½(ℓ_i − ℓ̄_i)(ℓ_j − ℓ̄_j)/ln 10
    n_bar = (math.log(1e6) + math.log(4e6) + math.log(2e6)) / 3
    w_bar = (math.log(64) + math.log(128) + math.log(256)) / 3
    dn, dw = math.log(4e6) - n_bar, math.log(128) - w_bar
    expected = [0.5 * dn * dn, 0.5 * dn * dw, 0.5 * dw * dw]
    np.testing.assert_allclose(bent.log_scales[1, 2:], np.array(expected) / math.log(10.0))
    np.testing.assert_allclose(bent.log_scales[:, :2], ladder.log_scales)
    tn, tw = math.log(1.6e7) - n_bar, math.log(1024) - w_bar
    np.testing.assert_allclose(
        target_logs[2:], np.array([0.5 * tn * tn, 0.5 * tn * tw, 0.5 * tw * tw]) / math.log(10.0)
    )


def test_a_path_that_bends_is_followed() -> None:
    # the path's slope moves from −0.5 to +0.08 across the ladder: a straight law through the
    # rungs misses the target by ~0.5 log units
    _, fit = _fit(0.15)
    assert fit.valley.bend_weight > 0.9
    assert abs(fit.law_point[0] - _truth(0.15)) < 0.15
    straight = math.log(0.01) - 0.5 * math.log(TARGET["width"] / 64)
    assert abs(straight - _truth(0.15)) > 0.5


def test_a_straight_path_keeps_its_bend_off() -> None:
    _, fit = _fit(0.0)
    assert fit.valley.bend_weight < 0.5
    assert abs(fit.law_point[0] - _truth(0.0)) < 0.1


def test_the_no_drift_model_has_no_bend() -> None:
    obs = _ladder_trials(0.15)
    options = FitOptions(params=("lr",), seed=0)
    checked = _check(Sweep(tuple(obs)), obs, TARGET, options, ("lr",), 0)
    ladder = checked.ladder
    fit = fit_ladder(ladder, ladder.target_logs(checked.target), seed=0, drift=False)
    assert fit.valley.bend_weight == 0.0
    assert fit.valley.m == len(ladder.variables)


def test_summary_gives_the_bend_s_weight() -> None:
    bent = extrapolate(_ladder_trials(0.15), target=TARGET, params=["lr"], seed=0)
    assert "of a bend in the path" in bent.summary()
    weight = bent.summary().split("of a bend in the path ")[1].split("%")[0]
    assert int(weight) > 90
    constant = extrapolate(
        _ladder_trials(0.15), target=TARGET, params=["lr"], seed=0, model="constant"
    )
    assert "bend" not in constant.summary()


def test_a_fixed_exponent_holds_the_bend_in_its_variable() -> None:
    # the caller's lr ∝ width^-0.5 says the path is straight in width: no bend there, and the
    # law's point moves exactly as width^-0.5 between two targets
    fixed = {"lr": {"width": -0.5}}
    points = []
    for width in (4096, 8192):
        res = extrapolate(
            _ladder_trials(0.15),
            target=Scale(width=width),
            params=["lr"],
            seed=0,
            fixed_exponents=fixed,
        )
        assert "bend" not in res.summary()
        assert res.laws["lr"].bends == {}  # and the reported law is the straight one
        assert res.laws["lr"].predict(res.target) == pytest.approx(res.law_params["lr"])
        points.append(math.log(res.law_params["lr"]))
    assert points[1] - points[0] == pytest.approx(-0.5 * math.log(2.0), abs=1e-4)


def test_a_scale_variable_named_like_a_bend_column_is_refused() -> None:
    obs = [
        Observation({"bend:width": o.scale["width"]}, o.params, o.value)
        for o in _ladder_trials(0.0)
    ]
    with pytest.raises(TransferSearchError, match=r"'bend:width'.*Rename it, e\.g\. 'width'"):
        extrapolate(obs, target=Scale({"bend:width": 8192}), params=["lr"], seed=0)


def test_a_scale_variable_whose_name_holds_a_star_bends_too() -> None:
    # the bend columns are looked up by name, not parsed: "tokens*epochs" stays one variable
    obs = [
        Observation({"tokens*epochs": o.scale["width"]}, o.params, o.value)
        for o in _ladder_trials(0.15)
    ]
    res = extrapolate(obs, target=Scale({"tokens*epochs": 8192}), params=["lr"], seed=0)
    assert "of a bend in the path" in res.summary()
    assert set(res.laws["lr"].bends) == {("tokens*epochs", "tokens*epochs")}
    assert res.laws["lr"].predict(res.target) == pytest.approx(res.law_params["lr"])
    assert abs(math.log(res.law_params["lr"]) - _truth(0.15)) < 0.15


def test_the_reported_law_follows_the_bent_path() -> None:
    """``res.laws`` carry the bend: ``predict`` is the law's point at the target (the model's
    path, not its tangent), the exponents are the path's slope at the rungs' centre, and the
    path through the rungs' centre and the target is what the data bent (the truth's
    curvature 0.15 per log unit², ln 10 × that per decade)."""
    res = extrapolate(_ladder_trials(0.15), target=TARGET, params=["lr"], seed=0)
    law = res.laws["lr"]
    assert set(law.bends) == {("width", "width")}
    assert law.names == ("intercept", "width", f"{BEND_PREFIX}width*width")
    assert law.covariance.shape == (3, 3)
    assert law.predict(TARGET) == pytest.approx(res.law_params["lr"], rel=1e-9)
    centre = math.exp(law.centre["width"])
    assert centre == pytest.approx(math.exp(np.mean([math.log(w) for w in WIDTHS])))
    # the tangent at the centre, by central differences of predict_coord in ln width
    step = 1e-4
    up = law.predict_coord({"width": centre * math.exp(step)})[0]
    down = law.predict_coord({"width": centre * math.exp(-step)})[0]
    assert (up - down) / (2 * step) == pytest.approx(law.exponents["width"], rel=1e-6)
    assert law.bends[("width", "width")] == pytest.approx(0.15 * math.log(10.0), rel=0.3)
    # a straight law through the same tangent misses the target by the bend's whole share
    straight = law.intercept + law.exponents["width"] * math.log(TARGET["width"])
    assert abs(straight - math.log(res.law_params["lr"])) > 0.3


def test_a_bent_law_s_prediction_by_hand() -> None:
    """``predict_coord`` adds ``Σ C_ij · ½(ℓ_i − ℓ̄_i)(ℓ_j − ℓ̄_j)/ln 10`` to the line, and its
    variance takes the bend's feature as one more column of the gradient."""
    from transfersearch.fitting.laws import PowerLaw

    cov = np.diag([0.01, 0.0004, 0.0009, 0.0016])
    law = PowerLaw(
        param="lr",
        log_space=True,
        intercept=-2.0,
        exponents={"N": -0.5, "D": 0.25},
        fixed=(),
        shrunk=(),
        names=("intercept", "D", "N", f"{BEND_PREFIX}D*N"),
        covariance=cov,
        r_squared=math.nan,
        chi2_per_dof=math.nan,
        n_scales=4,
        scatter=0.1,
        bends={("D", "N"): 0.3},
        centre={"D": math.log(1e9), "N": math.log(1e8)},
    )
    d, n = 4e10, 1e9
    feature = 0.5 * math.log(d / 1e9) * math.log(n / 1e8) / math.log(10.0)
    value = -2.0 - 0.5 * math.log(n) + 0.25 * math.log(d) + 0.3 * feature
    gradient = np.array([1.0, math.log(d), math.log(n), feature])
    sd = math.sqrt(float(gradient @ cov @ gradient) + 0.1**2)
    got_value, got_sd = law.predict_coord({"N": n, "D": d})
    assert got_value == pytest.approx(value, rel=1e-12)
    assert got_sd == pytest.approx(sd, rel=1e-12)
    assert law.predict({"N": n, "D": d}) == pytest.approx(math.exp(value), rel=1e-12)


def test_a_hand_built_law_whose_bends_cannot_be_evaluated_is_refused() -> None:
    """A bend without its variable's centre, or a covariance that is not square over the
    names, is refused naming what is missing (before: a KeyError or a shape error at predict)."""
    from transfersearch.fitting.laws import PowerLaw

    base = {
        "param": "lr",
        "log_space": True,
        "intercept": -2.0,
        "exponents": {"N": -0.5},
        "fixed": (),
        "shrunk": (),
        "r_squared": math.nan,
        "chi2_per_dof": math.nan,
        "n_scales": 3,
        "bends": {("N", "N"): 0.2},
    }
    names = ("intercept", "N", f"{BEND_PREFIX}N*N")
    with pytest.raises(TransferSearchError, match=r"bends name \['N'\], which centre lacks"):
        PowerLaw(**base, names=names, covariance=np.eye(3))  # type: ignore[arg-type]
    with pytest.raises(TransferSearchError, match=r"covariance has shape \(2, 2\)"):
        PowerLaw(  # type: ignore[arg-type]
            **base, names=names[:2], covariance=np.eye(2), centre={"N": math.log(1e8)}
        )
    law = PowerLaw(**base, names=names, covariance=np.eye(3), centre={"N": 0.0})  # type: ignore[arg-type]
    assert law.predict({"N": 10.0}) == pytest.approx(
        math.exp(-2.0 - 0.5 * math.log(10.0) + 0.2 * 0.5 * math.log(10.0) ** 2 / math.log(10.0))
    )

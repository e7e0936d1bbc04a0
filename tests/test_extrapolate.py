"""extrapolate() and validate() on synthetic landscapes with known optimum-vs-scale laws."""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings
from collections.abc import Sequence

import numpy as np
import pytest

from transfersearch.errors import TransferSearchError
from transfersearch.extrapolate import extrapolate, validate
from transfersearch.observations import Observation, TransferSearchWarning
from transfersearch.scale import Scale

#: The module itself (the package re-exports its function under the same name).
ex = sys.modules["transfersearch.extrapolate"]

LADDER: list[tuple[float, float]] = [
    (64, 1e5),
    (128, 4e5),
    (256, 2e5),
    (512, 8e5),
    (128, 1e5),
    (256, 8e5),
]
#: 8x beyond the ladder's largest width and dataset size.
TARGET = Scale(width=4096, dataset_size=6.4e6)


def truth(scale: Scale) -> dict[str, float]:
    """Known laws: lr* = 2 width^-0.8 N^0.15, tau* = 0.5 width^0.2 (no dataset drift)."""
    return {
        "lr": 2.0 * scale["width"] ** -0.8 * scale["dataset_size"] ** 0.15,
        "tau": 0.5 * scale["width"] ** 0.2,
    }


def landscape(
    seed: int, n: int = 150, noise: float = 0.002, ladder: Sequence[tuple[float, float]] = LADDER
) -> list[Observation]:
    """Asymmetric valley (steeper above the optimum lr), interaction, noise, divergence cliff."""
    rng = np.random.default_rng(seed)
    out = []
    for width, size in ladder:
        scale = Scale(width=width, dataset_size=size)
        best = truth(scale)
        shift = rng.normal(0.0, 0.3, 2)  # the sweep is not centred on the truth
        for _ in range(n):
            d1 = rng.uniform(math.log(1 / 8), math.log(4)) + shift[0]
            d2 = rng.uniform(math.log(1 / 4), math.log(4)) + shift[1]
            up = (math.exp(1.5 * d1) - 1 - 1.5 * d1) / 1.5**2
            down = math.exp(-d2) - 1 + d2
            value = 3.0 - 0.1 * math.log(width) + 0.2 * up + 0.2 * down + 0.03 * d1 * d2
            value += rng.normal(0.0, noise)
            if d1 > math.log(3.0):
                value = math.nan  # diverged above the optimum
            params = {"lr": best["lr"] * math.exp(d1), "tau": best["tau"] * math.exp(d2)}
            out.append(Observation(scale, params, value))
    return out


def test_recovers_known_laws_8x_beyond_ladder_with_covering_intervals() -> None:
    expected = truth(TARGET)
    errors, covered = [], []
    for seed in range(8):
        with warnings.catch_warnings():
            warnings.simplefilter("error", TransferSearchWarning)  # 8x is not "far"
            res = extrapolate(
                landscape(seed), target=TARGET, params=["lr", "tau"], n_bootstrap=100, seed=seed
            )
        interval = res.interval(0.9)
        for name in ("lr", "tau"):
            errors.append(abs(res.params[name] / expected[name] - 1.0))
            covered.append(interval[name][0] <= expected[name] <= interval[name][1])
    assert float(np.mean(errors)) < 0.05  # within a few percent on average
    assert max(errors) < 0.15
    assert np.mean(covered) >= 0.75  # 90% intervals cover the truth in most seeds


def test_result_fields_and_law_shapes() -> None:
    res = extrapolate(landscape(0), target=TARGET, params=["lr", "tau"], n_bootstrap=50, seed=1)
    assert set(res.params) == {"lr", "tau"}
    assert res.model in ("independent", "joint")
    assert set(res.model_scores) == {"independent", "joint"}
    assert all(math.isfinite(v) for v in res.model_scores.values())
    assert len(res.optima) == len(LADDER)
    assert all(o.method == "quadratic" for o in res.optima)
    law = res.laws["lr"]
    assert set(law.exponents) == {"width", "dataset_size"}
    assert law.exponents["width"] == pytest.approx(-0.8, abs=0.1)
    assert law.predict(TARGET) == pytest.approx(res.params["lr"])
    assert res.samples.shape == (50, 2)
    narrow, wide = res.interval(0.5), res.interval(0.95)
    assert wide["lr"][0] <= narrow["lr"][0] <= res.params["lr"] <= narrow["lr"][1] <= wide["lr"][1]
    assert res.extrapolation_decades > 0 and res.ladder_span_decades > 0
    # Seeded bootstrap is reproducible.
    again = extrapolate(landscape(0), target=TARGET, params=["lr", "tau"], n_bootstrap=50, seed=1)
    assert again.interval(0.9) == res.interval(0.9)


def test_tau_dataset_exponent_is_shrunk_and_fixed_exponents_are_kept() -> None:
    res = extrapolate(
        landscape(2), target=TARGET, params=["lr", "tau"], model="independent", n_bootstrap=0
    )
    assert res.laws["tau"].exponents["dataset_size"] == 0.0
    assert "dataset_size" in res.laws["tau"].shrunk
    fixed = extrapolate(
        landscape(2),
        target=TARGET,
        params=["lr", "tau"],
        fixed_exponents={"lr": {"width": -1.0}},
        n_bootstrap=0,
    )
    assert fixed.laws["lr"].exponents["width"] == -1.0
    assert fixed.model == "independent"  # a partly fixed variable rules the joint model out


def test_joint_model_can_be_forced_and_agrees() -> None:
    obs = landscape(3)
    joint = extrapolate(obs, target=TARGET, params=["lr", "tau"], model="joint", n_bootstrap=20)
    alone = extrapolate(
        obs, target=TARGET, params=["lr", "tau"], model="independent", n_bootstrap=20
    )
    assert joint.model == "joint" and alone.model == "independent"
    assert joint.params["lr"] == pytest.approx(alone.params["lr"], rel=0.2)


def _joint_samples_one_by_one(obs: list[Observation], seed: int, n_bootstrap: int) -> np.ndarray:
    """The joint bootstrap written plainly: each resample's trials refitted by _joint_laws."""
    setup = ex._prepare(obs, ["lr", "tau"], "minimize", None, None, None, TARGET)
    picks = ex._draw_resamples(setup, n_bootstrap, np.random.default_rng(seed))
    every = list(range(len(setup.rungs)))
    samples = np.full((n_bootstrap, 2), np.nan)
    for b in range(n_bootstrap):
        data = [(r.coords[p[b]], r.values[p[b]]) for r, p in zip(setup.rungs, picks, strict=True)]
        laws = ex._joint_laws(setup, data, every, with_covariance=False)
        if laws is not None:
            samples[b] = [laws[name].predict_coord(TARGET)[0] for name in ("lr", "tau")]
    return samples


@pytest.mark.parametrize("n", [12, 40])
def test_batched_joint_bootstrap_equals_refitting_each_resample(n: int) -> None:
    # Few trials per scale: resamples vary a lot, some regions hold repeated draws.
    obs = landscape(5, n=n, ladder=LADDER[:4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TransferSearchWarning)
        res = extrapolate(
            obs, target=TARGET, params=["lr", "tau"], model="joint", n_bootstrap=60, seed=11
        )
    assert res.model == "joint"
    plain = _joint_samples_one_by_one(obs, seed=11, n_bootstrap=60)
    assert np.isfinite(plain).sum() >= 100
    np.testing.assert_array_equal(np.isnan(res.samples), np.isnan(plain))
    np.testing.assert_allclose(res.samples, plain, rtol=1e-9, atol=1e-9)
    batched = res.interval(0.9)
    looped = dataclasses.replace(res, samples=plain).interval(0.9)
    for name in ("lr", "tau"):
        assert batched[name] == pytest.approx(looped[name], rel=1e-9)


def test_batched_joint_bootstrap_falls_back_to_the_plain_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Treat every Gram matrix as ill-conditioned: each resample goes through the plain refit.
    obs = landscape(6, n=30, ladder=LADDER[:4])
    setup = ex._prepare(obs, ["lr", "tau"], "minimize", None, None, None, TARGET)
    picks = ex._draw_resamples(setup, 30, np.random.default_rng(2))
    batched = ex._joint_bootstrap(setup, TARGET, picks)
    monkeypatch.setattr(ex, "_MAX_CONDITION", 1.0)
    refitted = ex._joint_bootstrap(setup, TARGET, picks)
    np.testing.assert_allclose(batched, refitted, rtol=1e-9, atol=1e-9)


def test_batched_joint_bootstrap_with_fixed_exponents() -> None:
    obs = landscape(7, n=30, ladder=LADDER[:4])
    fixed = {"lr": {"dataset_size": 0.15}, "tau": {"dataset_size": 0.0}}
    setup = ex._prepare(obs, ["lr", "tau"], "minimize", None, None, fixed, TARGET)
    picks = ex._draw_resamples(setup, 40, np.random.default_rng(3))
    batched = ex._joint_bootstrap(setup, TARGET, picks)
    plain = ex._joint_bootstrap_loop(setup, TARGET, picks, range(40))
    assert np.isfinite(plain).all()
    np.testing.assert_allclose(batched, plain, rtol=1e-9, atol=1e-9)


def test_maximize_and_dataframe_source() -> None:
    pd = pytest.importorskip("pandas")
    obs = landscape(4, n=60)
    frame = pd.DataFrame(
        {
            "scale.width": [o.scale["width"] for o in obs],
            "N": [o.scale["dataset_size"] for o in obs],
            "params.lr": [o.params["lr"] for o in obs],
            "tau": [o.params["tau"] for o in obs],
            "score": [-o.value for o in obs],
        }
    )
    frame = frame.rename(columns={"scale.width": "width"})
    res = extrapolate(
        frame,
        target=Scale(width=4096, N=6.4e6),
        params=["lr", "tau"],
        direction="maximize",
        scale_columns=["width", "N"],
        value_column="score",
        n_bootstrap=0,
    )
    plain = extrapolate(obs, target=TARGET, params=["lr", "tau"], n_bootstrap=0)
    assert res.params["lr"] == pytest.approx(plain.params["lr"], rel=1e-9)


def test_far_target_warns_in_decades() -> None:
    with pytest.warns(TransferSearchWarning, match="decades"):
        res = extrapolate(
            landscape(0, n=60),
            target=Scale(width=1e6, dataset_size=1e10),
            params=["lr", "tau"],
            n_bootstrap=0,
        )
    assert res.extrapolation_decades > 2 * res.ladder_span_decades


def test_all_diverged_scale_is_dropped_with_warning_and_pruned_ignored() -> None:
    obs = landscape(5, n=60)
    dead = Scale(width=1024, dataset_size=1e6)
    obs += [Observation(dead, {"lr": 1e-3, "tau": 1.0}, math.nan) for _ in range(5)]
    obs += [Observation(dead, {"lr": 1e-4, "tau": 1.0}, 0.0, state="pruned")]
    with pytest.warns(TransferSearchWarning, match="diverged"):
        res = extrapolate(obs, target=TARGET, params=["lr", "tau"], n_bootstrap=0)
    assert dead not in [o.scale for o in res.optima]


def test_constant_ladder_variable_that_target_changes_warns() -> None:
    obs = [Observation(o.scale.replace(depth=4), o.params, o.value) for o in landscape(6, n=60)]
    with pytest.warns(TransferSearchWarning, match="depth"):
        res = extrapolate(obs, target=TARGET.replace(depth=32), params=["lr", "tau"], n_bootstrap=0)
    assert "depth" not in res.scale_variables


def test_hyperparameters_delegates_to_space() -> None:
    res = extrapolate(landscape(7, n=60), target=TARGET, params=["lr", "tau"], n_bootstrap=0)

    class Space:
        def concretize(self, coords: dict[str, float], scale: Scale) -> tuple[object, ...]:
            return ("concrete", dict(coords), scale)

    concrete: object = res.hyperparameters(Space())  # type: ignore[arg-type]
    assert concrete == ("concrete", res.params, TARGET)


def test_validate_reports_error_interval_and_regret() -> None:
    report = validate(landscape(1), params=["lr", "tau"], n_bootstrap=50, seed=0)
    assert report.held_out == Scale(width=512, dataset_size=8e5)
    expected = truth(report.held_out)
    assert report.observed["lr"] == pytest.approx(expected["lr"], rel=0.15)
    assert abs(report.relative_error["lr"]) < 0.2
    assert report.log_error["lr"] == pytest.approx(
        math.log(report.predicted["lr"] / report.observed["lr"])
    )
    assert report.regret is not None and 0.0 <= report.regret < 0.01
    assert report.relative_regret is not None
    assert set(report.within_interval) == {"lr", "tau"}


def test_validate_detects_a_broken_law() -> None:
    # Optimum jumps at the largest scale: the held-out error must show it.
    obs = landscape(2, n=80)
    largest = Scale(width=512, dataset_size=8e5)
    moved = [
        Observation(o.scale, {"lr": o.params["lr"] * 3, "tau": o.params["tau"]}, o.value)
        if o.scale == largest
        else o
        for o in obs
    ]
    good = validate(obs, params=["lr", "tau"], n_bootstrap=0)
    bad = validate(moved, params=["lr", "tau"], n_bootstrap=0)
    assert abs(bad.log_error["lr"]) > abs(good.log_error["lr"]) + 0.8
    assert bad.regret is not None and good.regret is not None and bad.regret > good.regret


def _few(n_scales: int) -> list[Observation]:
    """Trials at the first ``n_scales`` rungs of the ladder."""
    return landscape(0, n=40, ladder=LADDER[:n_scales])


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: extrapolate(_few(1), target=TARGET, params=["lr"]), "two or more scales"),
        (lambda: extrapolate(_few(3), target=TARGET, params=["lr", "wd"]), "'wd'"),
        (lambda: extrapolate(_few(3), target=TARGET, params=[]), "empty"),
        (lambda: extrapolate(_few(3), target=Scale(width=4096), params=["lr"]), "dataset_size"),
        (lambda: extrapolate(_few(3), target=4096, params=["lr"]), "target"),  # type: ignore[arg-type]
        (
            lambda: extrapolate(_few(3), target=TARGET, params=["lr"], model="x"),  # type: ignore[arg-type]
            "model",
        ),
        (lambda: extrapolate(_few(3), target=TARGET, params=["lr"], n_bootstrap=-1), "n_bootstrap"),
        (
            lambda: extrapolate(_few(3), target=TARGET, params=["lr"], direction="up"),  # type: ignore[arg-type]
            "direction",
        ),
        (
            lambda: extrapolate(
                _few(3), target=TARGET, params=["lr"], fixed_exponents={"tau": {"width": 0.0}}
            ),
            "'tau'",
        ),
        (
            lambda: extrapolate(
                _few(3), target=TARGET, params=["lr"], fixed_exponents={"lr": {"depth": 0.0}}
            ),
            "'depth'",
        ),
        (
            lambda: extrapolate(_few(3), target=TARGET, params=["lr"], scale_variables=["depth"]),
            "depth",
        ),
        (lambda: extrapolate("trials.csv", target=TARGET, params=["lr"]), "list of Observation"),
        (lambda: validate(_few(2), params=["lr"]), "three or more"),
        (
            lambda: validate(_few(3), params=["lr"], held_out=Scale(width=3, dataset_size=1e5)),
            "held_out",
        ),
    ],
)
def test_bad_input_names_problem_and_fix(call: object, fragment: str) -> None:
    with pytest.raises(TransferSearchError, match=fragment):
        call()  # type: ignore[operator]


def test_non_positive_value_on_log_coordinate() -> None:
    bad = Observation(Scale(width=64, dataset_size=1e5), {"lr": -1e-3, "tau": 1.0}, 3.0)
    obs = [*_few(3), bad]
    with pytest.raises(TransferSearchError, match="log coordinate"):
        extrapolate(obs, target=TARGET, params=["lr"], log_params=["lr"])


def test_interval_level_is_checked() -> None:
    res = extrapolate(_few(3), target=TARGET, params=["lr"], n_bootstrap=0)
    with pytest.raises(TransferSearchError, match="level"):
        res.interval(1.5)


def test_params_default_to_those_every_complete_trial_records() -> None:
    obs = landscape(3, n=60)
    explicit = extrapolate(obs, target=TARGET, params=["lr", "tau"], n_bootstrap=0)
    inferred = extrapolate(obs, target=TARGET, n_bootstrap=0)
    assert list(inferred.params) == ["lr", "tau"]
    assert inferred.params == pytest.approx(explicit.params)
    with pytest.raises(TransferSearchError, match="params=\\[...\\]"):
        extrapolate([Observation(TARGET, {"lr": 1.0}, math.nan, "failed")], target=TARGET)

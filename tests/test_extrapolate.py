"""extrapolate() and validate() on synthetic landscapes with known optimum-vs-scale laws."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import transfersearch as ts
from transfersearch import extrapolate, synthetic, validate
from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.observations import Observation
from transfersearch.scale import Scale

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


def no_drift(scale: Scale) -> dict[str, float]:
    """The optimum the invariant coordinates promise: the same at every scale."""
    return {"lr": 1e-3, "tau": 0.5}


def landscape(
    seed: int,
    n: int = 150,
    noise: float = 0.002,
    ladder: Sequence[tuple[float, float]] = LADDER,
    optimum: Callable[[Scale], dict[str, float]] = truth,
) -> list[Observation]:
    """Asymmetric valley (steeper above the optimum lr), interaction, noise, divergence cliff."""
    rng = np.random.default_rng(seed)
    out = []
    for width, size in ladder:
        scale = Scale(width=width, dataset_size=size)
        best = optimum(scale)
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
            res = extrapolate(landscape(seed), target=TARGET, params=["lr", "tau"], seed=seed)
        interval = res.interval(0.9)
        for name in ("lr", "tau"):
            errors.append(abs(res.params[name] / expected[name] - 1.0))
            covered.append(interval[name][0] <= expected[name] <= interval[name][1])
    assert float(np.mean(errors)) < 0.05  # within a few percent on average
    assert max(errors) < 0.15
    assert np.mean(covered) >= 0.75  # 90% intervals cover the truth in most seeds


def test_recovers_the_exponents_of_an_asymmetric_valley() -> None:
    for seed in range(3):
        res = extrapolate(landscape(seed), target=TARGET, params=["lr", "tau"], seed=seed)
        assert res.laws["lr"].exponents["width"] == pytest.approx(-0.8, abs=0.05)
        assert res.laws["lr"].exponents["dataset_size"] == pytest.approx(0.15, abs=0.05)
        assert res.laws["tau"].exponents["width"] == pytest.approx(0.2, abs=0.05)
        assert res.laws["tau"].exponents["dataset_size"] == pytest.approx(0.0, abs=0.05)


def test_result_fields_and_law_shapes() -> None:
    res = extrapolate(landscape(0), target=TARGET, params=["lr", "tau"], seed=1)
    assert set(res.params) == set(res.law_params) == {"lr", "tau"}
    assert res.model == "drift"
    # the law's walk-forward regret beside the null's (copy the cheaper rungs' best trial)
    assert set(res.model_scores) == {res.model, "copy"}
    assert all(math.isfinite(v) for v in res.model_scores.values())
    assert res.walk_forward and all(
        set(f.regret) == set(res.model_scores) for f in res.walk_forward
    )
    assert res.selection_reason
    assert len(res.optima) == len(LADDER)
    assert all(o.method == "pooled" for o in res.optima)
    law = res.laws["lr"]
    assert set(law.exponents) == {"width", "dataset_size"}
    assert law.exponents["width"] == pytest.approx(-0.8, abs=0.1)
    assert law.predict(TARGET) == pytest.approx(res.law_params["lr"], rel=0.05)
    for name in ("lr", "tau"):  # the decision is the law's point moved by decision_shift
        moved = math.log(res.params[name] / res.law_params[name])
        assert moved == pytest.approx(res.decision_shift[name], abs=1e-12)
    assert res.samples.shape[1] == 2 and len(res.samples) >= 1000
    assert 0.0 < res.calibration < 10.0
    narrow, wide = res.interval(0.5), res.interval(0.95)
    point = res.law_params["lr"]
    assert wide["lr"][0] <= narrow["lr"][0] <= point <= narrow["lr"][1] <= wide["lr"][1]
    assert res.extrapolation_decades > 0 and res.ladder_span_decades > 0
    # Seeded draws are reproducible.
    again = extrapolate(landscape(0), target=TARGET, params=["lr", "tau"], seed=1)
    assert again.interval(0.9) == res.interval(0.9)


def test_constant_model_holds_the_prior_and_fixed_exponents_are_exact() -> None:
    obs = landscape(2)
    constant = extrapolate(obs, target=TARGET, params=["lr", "tau"], model="constant")
    assert constant.model == "constant" and "no drift" in constant.selection_reason
    for law in constant.laws.values():
        assert all(abs(e) < 1e-3 for e in law.exponents.values())
    prior = {"lr": {"width": -0.8}}
    held = extrapolate(
        obs, target=TARGET, params=["lr", "tau"], prior_exponents=prior, model="constant"
    )
    assert held.laws["lr"].exponents["width"] == pytest.approx(-0.8, abs=1e-3)
    assert held.laws["lr"].exponents["dataset_size"] == pytest.approx(0.0, abs=1e-3)
    fixed = extrapolate(
        obs, target=TARGET, params=["lr", "tau"], fixed_exponents={"lr": {"width": -1.0}}
    )
    # held in G = HB given the current curvature; the law's B = H⁻¹G then moves with H's
    # posterior draws by a fraction of a percent
    assert fixed.laws["lr"].exponents["width"] == pytest.approx(-1.0, abs=0.01)
    assert fixed.laws["lr"].fixed == ("width",)


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
    )
    plain = extrapolate(obs, target=TARGET, params=["lr", "tau"])
    assert res.params["lr"] == pytest.approx(plain.params["lr"], rel=1e-9)


def test_far_target_warns_in_decades() -> None:
    with pytest.warns(TransferSearchWarning, match="decades"):
        res = extrapolate(
            landscape(0, n=60),
            target=Scale(width=1e6, dataset_size=1e10),
            params=["lr", "tau"],
        )
    assert res.extrapolation_decades > 2 * res.ladder_span_decades


def test_all_diverged_scale_is_dropped_with_warning_and_pruned_ignored() -> None:
    obs = landscape(5, n=60)
    dead = Scale(width=1024, dataset_size=1e6)
    obs += [Observation(dead, {"lr": 1e-3, "tau": 1.0}, math.nan) for _ in range(5)]
    obs += [Observation(dead, {"lr": 1e-4, "tau": 1.0}, 0.0, state="pruned")]
    with pytest.warns(TransferSearchWarning, match="diverged"):
        res = extrapolate(obs, target=TARGET, params=["lr", "tau"])
    assert dead not in [o.scale for o in res.optima]


def test_constant_ladder_variable_that_target_changes_warns() -> None:
    obs = [Observation(o.scale.replace(depth=4), o.params, o.value) for o in landscape(6, n=60)]
    with pytest.warns(TransferSearchWarning, match="depth"):
        res = extrapolate(obs, target=TARGET.replace(depth=32), params=["lr", "tau"])
    # The ladder says nothing of depth: its exponent is the prior's (0), and the prior's
    # uncertainty (the drift scale integrated over) widens the interval.
    without = extrapolate(landscape(6, n=60), target=TARGET, params=["lr", "tau"])
    for name in ("lr", "tau"):
        assert res.laws[name].exponents["depth"] == pytest.approx(0.0, abs=0.05)
        assert res.law_params[name] == pytest.approx(without.law_params[name], rel=0.1)
        assert res.stderr[name] > without.stderr[name]


def test_hyperparameters_delegates_to_space() -> None:
    res = extrapolate(landscape(7, n=60), target=TARGET, params=["lr", "tau"])

    space = ts.TransferSpace(
        Scale(width=64, dataset_size=1e5),
        {"lr": ts.Float(1e-4, 1.0, log=True), "weight_decay": 0.1, "tau": ts.Float(0.01, 100.0)},
        rule=ts.rules.Standard(),
    )
    hp = res.hyperparameters(space)
    assert hp.to_dict() == space.concretize(res.params, TARGET).to_dict()
    assert hp.scale == TARGET and hp.extra["tau"] == res.params["tau"]


def test_validate_reports_error_interval_and_regret() -> None:
    report = validate(synthetic_trials(1), seed=0)
    assert report.held_out == max(SYNTHETIC_RUNGS, key=ts.cost.default_cost)
    log_lr, _ = synthetic.log_optimum(report.held_out)
    assert math.log(report.observed["base_lr"]) == pytest.approx(log_lr, abs=0.1)
    assert abs(report.log_error["base_lr"]) < 0.2
    assert report.log_error["base_lr"] == pytest.approx(
        math.log(report.predicted["base_lr"] / report.observed["base_lr"])
    )
    assert report.regret is not None and 0.0 <= report.regret < 0.01
    assert report.relative_regret is not None
    assert set(report.within_interval) == {"base_lr", "tau_epoch"}


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
    good = validate(obs, params=["lr", "tau"])
    bad = validate(moved, params=["lr", "tau"])
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
    with pytest.warns(TransferSearchWarning, match="decades"):  # three rungs: TARGET is far
        res = extrapolate(_few(3), target=TARGET, params=["lr"])
    with pytest.raises(TransferSearchError, match="level"):
        res.interval(1.5)


def test_params_default_to_those_every_complete_trial_records() -> None:
    obs = landscape(3, n=60)
    explicit = extrapolate(obs, target=TARGET, params=["lr", "tau"])
    inferred = extrapolate(obs, target=TARGET)
    assert list(inferred.params) == ["lr", "tau"]
    assert inferred.params == pytest.approx(explicit.params)
    with pytest.raises(TransferSearchError, match="params=\\[...\\]"):
        extrapolate([Observation(TARGET, {"lr": 1.0}, math.nan, "failed")], target=TARGET)


# ------------------------------------------------------------------------------------------------
# No drift, nested (docs/science.md §7.3: drift must be earned)
# ------------------------------------------------------------------------------------------------
def test_no_drift_ladder_keeps_a_no_drift_model() -> None:
    chosen = []
    for seed in range(8):
        res = extrapolate(
            landscape(seed, n=40, noise=0.03, optimum=no_drift),
            target=TARGET,
            params=["lr", "tau"],
        )
        assert set(res.model_scores) == {res.model, "copy"}
        assert all(math.isfinite(v) and v >= 0.0 for v in res.model_scores.values())
        chosen.append(max(abs(e) for law in res.laws.values() for e in law.exponents.values()))
    assert sum(e < 0.05 for e in chosen) >= 6  # the nested null: no drift found


#: transfersearch.synthetic's ladder plus three rungs, so walk-forward has folds to judge drift.
SYNTHETIC_RUNGS: tuple[Scale, ...] = (
    *synthetic.LADDER,
    *(
        Scale(width=w, dataset_size=n, batch_size=64)
        for w, n in [(128, 8e4), (256, 3.2e5), (512, 1.6e5)]
    ),
)
#: 8x beyond the ladder's largest width and dataset size.
SYNTHETIC_TARGET = Scale(width=8 * 512, dataset_size=8 * 3.2e5, batch_size=64)


def synthetic_trials(seed: int, n: int = 30, noise: float = 0.003) -> list[Observation]:
    """``n`` trials per rung on :mod:`transfersearch.synthetic`'s known law, sweeps off-centre."""
    rng = np.random.default_rng(seed)
    out = []
    for scale in SYNTHETIC_RUNGS:
        log_lr, log_tau = synthetic.log_optimum(scale)
        off = rng.normal(0.0, 0.3, 2)
        for _ in range(n):
            d_lr, d_tau = off + rng.uniform(-1.5, 1.5, 2)
            params = {"base_lr": math.exp(log_lr + d_lr), "tau_epoch": math.exp(log_tau + d_tau)}
            value = 1.0 + synthetic.regret(scale, params) + rng.normal(0.0, noise)
            out.append(Observation(scale, params, value))
    return out


def test_known_synthetic_law_is_earned_and_recovered_8x_beyond_the_ladder() -> None:
    truth_coords = dict(zip(("base_lr", "tau_epoch"), synthetic.log_optimum(SYNTHETIC_TARGET)))
    good = 0
    for seed in range(4):
        with warnings.catch_warnings():
            warnings.simplefilter("error", TransferSearchWarning)  # 8x is not "far"
            res = extrapolate(synthetic_trials(seed), target=SYNTHETIC_TARGET, seed=seed)
        assert res.model == "drift", res.selection_reason
        assert res.laws["base_lr"].exponents["width"] == pytest.approx(-0.6, abs=0.05)
        interval = res.interval(0.9)
        ok = True
        for name, log_true in truth_coords.items():
            ok &= abs(math.log(res.law_params[name]) - log_true) <= 0.1
            ok &= interval[name][0] <= math.exp(log_true) <= interval[name][1]
        good += ok
    assert good >= 3


# ------------------------------------------------------------------------------------------------
# Collinear ladders, stability, the model registry, units
# ------------------------------------------------------------------------------------------------
def test_collinear_ladder_is_reported_with_a_separating_rung() -> None:
    # dataset_size = 1000·width on every rung: only their joint drift is identifiable.
    ladder = [(64, 6.4e4), (128, 1.28e5), (256, 2.56e5), (512, 5.12e5)]
    res = extrapolate(
        landscape(0, n=40, ladder=ladder),
        target=Scale(width=4096, dataset_size=4.096e6),
        params=["lr", "tau"],
    )
    assert res.collinearity is not None
    assert set(res.collinearity.variables) == {"width", "dataset_size"}
    assert res.collinearity.correlation == pytest.approx(1.0)
    corner = res.collinearity.suggested_scale
    off_diagonal = [
        {"width": 64.0, "dataset_size": 5.12e5},
        {"width": 512.0, "dataset_size": 6.4e4},
    ]
    assert any(corner.to_dict() == pytest.approx(c) for c in off_diagonal)
    assert "collinear" in res.summary() and repr(corner) in res.summary()
    # A ladder that varies width and dataset size apart says nothing of the kind.
    plain = extrapolate(landscape(0, n=40), target=TARGET, params=["lr", "tau"])
    assert plain.collinearity is None and "collinear" not in plain.summary()


def _with_params(obs: list[Observation], per_width: float = 12.0) -> list[Observation]:
    """The same trials, each scale also giving ``params`` = per_width · width² (what a model's
    parameter count does as its width grows)."""
    out = []
    for o in obs:
        scale = Scale({**o.scale, "params": per_width * o.scale["width"] ** 2})
        out.append(Observation(scale, dict(o.params), o.value))
    return out


def test_params_riding_with_width_gets_no_impossible_rung() -> None:
    """``params`` follows from the width: no rung sets them apart, and none is suggested (a rung
    "params=768 at width 512" could not be built); the note says how to fit one law in them."""
    obs = _with_params(landscape(0, n=40))
    res = extrapolate(
        obs,
        target=Scale(width=1024, dataset_size=4e5, params=12.0 * 1024**2),
        params=["lr", "tau"],
    )
    assert res.collinearity is not None
    assert set(res.collinearity.variables) == {"width", "params"}
    assert res.collinearity.suggested_scale is None
    assert "no rung separates them" in res.summary()
    assert "scale_variables=" in res.summary()


def test_a_suggested_rung_takes_the_model_s_sizes_from_one_rung() -> None:
    """Width and data grow together, ``params`` with the width: the suggested rung separates
    width from data, and its ``params`` is the one its width has on the ladder."""
    ladder = [(64, 6.4e4), (128, 1.28e5), (256, 2.56e5), (512, 5.12e5)]
    obs = _with_params(landscape(0, n=40, ladder=ladder))
    res = extrapolate(
        obs,
        target=Scale(width=4096, dataset_size=4.096e6, params=12.0 * 4096**2),
        params=["lr", "tau"],
    )
    assert res.collinearity is not None
    corner = res.collinearity.suggested_scale
    assert corner is not None
    assert corner["params"] == pytest.approx(12.0 * corner["width"] ** 2)
    assert {corner["width"], corner["dataset_size"]} in ({64.0, 5.12e5}, {512.0, 6.4e4})


def test_stderr_is_the_spread_of_the_calibrated_draws() -> None:
    res = extrapolate(landscape(1, n=40), target=TARGET, params=["lr", "tau"], seed=0)
    for j, name in enumerate(("lr", "tau")):
        low, high = np.quantile(res.samples[:, j], [0.158655, 0.841345])
        assert res.stderr[name] == pytest.approx(0.5 * float(high - low), rel=1e-6)
    # every fold's standardised error enters the calibration; none: the factor stays 1
    assert res.walk_forward and res.calibration > 0
    two = extrapolate(_few(2), target=TARGET, params=["lr", "tau"])
    assert not two.walk_forward and two.calibration == 1.0


def test_the_removed_models_keyword_is_an_unknown_option() -> None:
    with pytest.raises(TransferSearchError, match="models"):
        extrapolate(landscape(4, n=40), target=TARGET, models=())  # type: ignore[call-arg]


def test_metric_units_do_not_move_the_extrapolation() -> None:
    # Every threshold is relative to the data's scale.
    obs = landscape(3, n=60)
    tiny = [Observation(o.scale, o.params, o.value * 1e-12, o.state) for o in obs]
    plain = extrapolate(obs, target=TARGET, params=["lr", "tau"], seed=0)
    scaled = extrapolate(tiny, target=TARGET, params=["lr", "tau"], seed=0)
    # equal up to the noise fit's and the decision's optimiser tolerances
    assert scaled.model == plain.model
    assert scaled.params == pytest.approx(plain.params, rel=1e-2)  # the decision's flat bottom
    assert scaled.law_params == pytest.approx(plain.law_params, rel=1e-4)
    assert scaled.stderr == pytest.approx(plain.stderr, rel=1e-2)
    for name, score in plain.model_scores.items():
        assert scaled.model_scores[name] == pytest.approx(score * 1e-12, rel=1e-3)


def test_an_interval_past_the_float_range_is_unbounded_not_an_error() -> None:
    res = extrapolate(landscape(0, n=60), target=TARGET, params=["lr", "tau"])
    samples = res.samples.copy()
    samples[: len(samples) // 2, 0] = -1e4  # draws of log lr past the float range
    samples[len(samples) // 2 :, 0] = 1e4
    vague = dataclasses.replace(res, samples=samples)
    low, high = vague.interval(0.9)["lr"]
    assert low == 0.0 and high == math.inf
    assert vague.interval(0.9)["tau"] == res.interval(0.9)["tau"]


def test_a_target_the_ladder_holds_is_read_off_its_own_trials() -> None:
    """A target that is one of the fitted rungs (a study whose top rung has run) is that rung's
    own posterior optimum, which its trials inform: not a new rung drawn about the law of the
    others (docs/science.md §7.5)."""
    rng = np.random.default_rng(0)
    obs = []
    for width in (64, 128, 256, 512):
        centre = math.log(0.01) - 0.5 * math.log(width / 64) + (0.6 if width == 512 else 0.0)
        for _ in range(20 if width < 512 else 12):
            x = centre + rng.uniform(-1.5, 1.5)
            value = 3.0 + 0.5 * (x - centre) ** 2 + rng.normal(0.0, 0.003)
            obs.append(Observation({"width": width}, {"lr": math.exp(x)}, value))
    truth = math.log(0.01) - 0.5 * math.log(8.0) + 0.6
    res = extrapolate(obs, target=Scale(width=512), params=["lr"], seed=0)
    assert abs(math.log(res.params["lr"]) - truth) < 0.05
    low, high = res.interval(0.9)["lr"]
    assert low < math.exp(truth) < high and math.log(high / low) < 0.5
    assert res.calibration == 1.0 and "not calibrated" in res.selection_reason
    # its summary says why the decision sits off the law's line (not a hedge: the rung's trials)
    assert "from the law's line: this rung's own trials place its optimum there" in res.summary()
    # without the top rung's trials the same target is a new rung: the law of the others
    cheaper = [o for o in obs if o.scale["width"] < 512]
    law = extrapolate(cheaper, target=Scale(width=512), params=["lr"], seed=0)
    assert abs(math.log(law.params["lr"]) - (truth - 0.6)) < 0.2


def test_a_scale_variable_the_ladder_never_varied_widens_the_interval_by_its_hyperprior() -> None:
    """README: a target that moves along a scale variable the ladder never varied gets that
    exponent from the prior, its scale from the hyperprior. A width-only ladder whose optimum
    does not move, a target at the same width with 16x the data: the 90% interval of lr spans
    about 2 x 0.493 x ln 16 = 2.73 log units (the log-uniform scale mixture's 90% range per ln
    unit, by quadrature in test_onemodel.py), while the same ladder's interval at a target it
    holds on its span is a fraction of that."""
    rng = np.random.default_rng(0)
    obs = []
    for width in (64, 128, 256, 512):
        for x in math.log(0.01) + rng.uniform(-1.5, 1.5, 14):
            value = 3.0 + 0.4 * (x - math.log(0.01)) ** 2 + rng.normal(0.0, 0.002)
            obs.append(
                Observation(Scale(width=width, dataset_size=1e6), {"lr": math.exp(x)}, value)
            )
    with warnings.catch_warnings():  # the target's move along a variable the ladder never varied
        warnings.simplefilter("ignore", TransferSearchWarning)
        off = extrapolate(obs, target=Scale(width=512, dataset_size=1.6e7), params=["lr"])
        along = extrapolate(obs, target=Scale(width=1024, dataset_size=1e6), params=["lr"])
    low, high = off.interval(0.9)["lr"]
    assert math.log(high / low) == pytest.approx(2.0 * 0.493 * math.log(16.0), rel=0.15)
    low, high = along.interval(0.9)["lr"]
    assert math.log(high / low) < 0.5

"""The benchmarks' baselines (``benchmarks/baselines.py``) on tiny sweeps computed by hand.

The null copies the costliest rung's best finite trial; the argmin baseline regresses each rung's
best trial, Step Law's band every trial within 0.25% of its rung's best, by least squares of
log(param) (or the param itself when the sweep has a value ≤ 0) on the log scale variables.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from transfersearch import Observation

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "baselines.py"
NAN = float("nan")


@pytest.fixture(scope="module")
def baselines() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_benchmark_baselines", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def trial(data: float, lr: float, value: float, wd: float = 0.1, **state: str) -> Observation:
    return Observation({"N": 100.0, "D": data}, {"lr": lr, "weight_decay": wd}, value, **state)


def test_the_null_copies_the_best_finite_trial_of_the_costliest_rung(
    baselines: ModuleType,
) -> None:
    sweep = [
        trial(1.0, 0.5, 0.1),  # the best value overall, but on the cheap rung
        trial(8.0, 4.0, NAN),  # diverged: no value to compare
        trial(8.0, 0.01, 0.5, state="failed"),  # crashed: left out whatever it reports
        trial(8.0, 2.0, 1.5, wd=0.3),
        trial(8.0, 1.0, 1.2, wd=0.0),
    ]
    assert baselines.copy_top_rung(sweep) == {"lr": 1.0, "weight_decay": 0.0}
    # a cost that ranks D = 1 above D = 8 makes that rung the top
    assert baselines.copy_top_rung(sweep, ["lr"], cost=lambda s: 1 / s["D"]) == {"lr": 0.5}


def test_argmin_loglinear_is_least_squares_through_each_rungs_best(baselines: ModuleType) -> None:
    e = math.e
    # argmin lr = 1, 2, 8 at log D = 0, 1, 2 (each beside a worse and a diverged trial)
    sweep = []
    for data, lr_best in ((1.0, 1.0), (e, 2.0), (e**2, 8.0)):
        sweep += [trial(data, lr_best, 1.0), trial(data, 3 * lr_best, 1.1), trial(data, 0.1, NAN)]
    # slope = Σ(x − 1)(y − ȳ) / Σ(x − 1)² = 1.5 ln 2, intercept = ȳ − slope = −ln 2 / 6:
    # at log D = 3 the law gives ln lr = 13/3 ln 2.
    out = baselines.argmin_loglinear(sweep, {"N": 100.0, "D": e**3}, ["lr"])
    assert out["lr"] == pytest.approx(2 ** (13 / 3))
    # N is constant over the rungs, so it is dropped: the target's N does not matter
    moved = baselines.argmin_loglinear(sweep, {"N": 1e9, "D": e**3}, ["lr"])
    assert moved["lr"] == pytest.approx(out["lr"])


def test_a_parameter_with_a_zero_in_the_sweep_is_regressed_linearly(baselines: ModuleType) -> None:
    e = math.e
    sweep = [trial(1.0, 1.0, 1.0, wd=0.0), trial(1.0, 1.0, 1.2, wd=0.5)]
    sweep += [trial(e, 1.0, 1.0, wd=0.1), trial(e**2, 1.0, 1.0, wd=0.2)]
    out = baselines.argmin_loglinear(sweep, {"D": e**3})
    assert out["weight_decay"] == pytest.approx(0.3)  # linear in log D: 0, 0.1, 0.2 -> 0.3
    assert out["lr"] == pytest.approx(1.0)
    # declared log where it cannot be, it is refused, naming the parameter
    with pytest.raises(ValueError, match="weight_decay"):
        baselines.argmin_loglinear(sweep, {"D": e**3}, log_params=["weight_decay"])


def test_the_band_keeps_every_trial_within_a_quarter_percent_of_its_rungs_best(
    baselines: ModuleType,
) -> None:
    e = math.e
    sweep = [
        trial(1.0, 1.0, 1.000),  # rung D = 1: the best
        trial(1.0, 4.0, 1.002),  # within 0.25%: in the band
        trial(1.0, 8.0, 1.003),  # 0.3% above: out
        trial(1.0, 16.0, NAN),
        trial(e, 2.0, 2.000),  # rung D = e: one trial in the band
        trial(e, 1.0, 2.010),
    ]
    band = baselines.near_best(sweep)
    assert sorted((o.scale["D"], o.params["lr"]) for o in band) == [
        (1.0, 1.0),
        (1.0, 4.0),
        (e, 2.0),
    ]
    # log lr = 0, ln 4 at log D = 0 (mean ln 2) and ln 2 at log D = 1: slope 0, lr = 2 anywhere
    assert baselines.band_loglinear(sweep, {"D": e**2}, ["lr"])["lr"] == pytest.approx(2.0)
    # the argmins (1 at log D = 0, 2 at log D = 1) give slope ln 2: lr = 4 at log D = 2
    assert baselines.argmin_loglinear(sweep, {"D": e**2}, ["lr"])["lr"] == pytest.approx(4.0)
    # all three by name
    named = baselines.baselines(sweep, {"N": 100.0, "D": e**2}, ["lr"])
    assert named == {
        baselines.NULL: {"lr": 2.0},
        baselines.ARGMIN: {"lr": pytest.approx(4.0)},
        baselines.BAND: {"lr": pytest.approx(2.0)},
    }


def test_a_target_without_a_varying_scale_variable_is_refused(baselines: ModuleType) -> None:
    sweep = [trial(1.0, 1.0, 1.0), trial(2.0, 1.0, 1.0)]
    with pytest.raises(ValueError, match="D"):
        baselines.argmin_loglinear(sweep, {"N": 100.0}, ["lr"])
    with pytest.raises(ValueError, match="finite"):
        baselines.copy_top_rung([trial(1.0, 1.0, NAN)])

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


def test_the_marin_score_takes_the_nearest_row_per_parameter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """benchmarks/marin_sweeps.py's score on a hand-made 8x table (the Marin protocol, Wen et al. 2025)."""
    pd = pytest.importorskip("pandas")  # the benchmark reads its CSVs with pandas
    monkeypatch.syspath_prepend(str(PATH.parent))
    spec = importlib.util.spec_from_file_location(
        "_benchmark_marin", PATH.parent / "marin_sweeps.py"
    )
    assert spec is not None and spec.loader is not None
    marin = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, marin)
    spec.loader.exec_module(marin)
    rows = [  # varied, lr, weight_decay, batch_size, loss (NaN: diverged)
        ("best", 1e-3, 0.1, 128, 3.000),
        ("lr", 5e-4, 0.1, 128, 3.010),
        ("lr", 2e-3, 0.1, 128, NAN),
        ("lr", 4e-3, 0.1, 128, 3.050),  # finite, yet above a diverged lr: the worst finite
        ("weight_decay", 1e-3, 0.0, 128, 3.004),
        ("weight_decay", 1e-3, 0.2, 128, 2.998),  # better than the best row: the least
        ("batch_size", 1e-3, 0.1, 256, 3.020),
        ("beta1", 1e-3, 0.1, 128, 2.900),  # varies no predicted parameter: never read
    ]
    table = pd.DataFrame(rows, columns=["varied", "lr", "weight_decay", "batch_size", "loss"])
    # lr 1.5e-3 is nearer 2e-3 in log distance (0.29) than 1e-3 (0.41): diverged, scored as the
    # worst finite lr row, 3.050 - 3.000; weight_decay 0.04 is nearest 0.0 (linear):
    # 3.004 - 2.998; batch size 190 is nearer 256 (log): 3.020 - 3.000
    score = marin.score(table, {"lr": 1.5e-3, "weight_decay": 0.04, "batch_size": 190.0})
    assert score.diverged == ["lr"]
    assert [round(s.regret, 6) for s in score.params.values()] == [0.05, 0.006, 0.02]
    assert score.total == pytest.approx(0.076)
    assert [s.picked for s in score.params.values()] == [2e-3, 0.0, 256.0]
    # exactly at the best row: 0 + (3.000 - 2.998) + 0
    best = marin.score(table, {"lr": 1e-3, "weight_decay": 0.1, "batch_size": 128.0})
    assert best.total == pytest.approx(0.002) and best.diverged == []
    # a published ">10", NaN or a loss above 6 is a diverged run
    assert marin.final_loss("3.5") == 3.5
    assert all(math.isnan(marin.final_loss(v)) for v in (">10", "NaN", "7.8"))

"""A portfolio of target runs (docs/science.md §9): the k runs minimising E[min_i L(x_i)].

For a quadratic valley ``L = ½h(x − x*)²`` with ``x* ~ N(0, σ²)`` the best k runs are the optimal
k-level quantiser of the normal (Lloyd-Max): ``±σ·√(2/π)`` for two runs, ``0, ±1.2240σ`` for
three; the tests find them again by brute force.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

import transfersearch as ts
from transfersearch.cli import main
from transfersearch.errors import TransferSearchError
from transfersearch.fitting.portfolio import choose_candidates
from transfersearch.fitting.target import TargetLoss
from transfersearch.observations import Observation
from transfersearch.scale import Scale

SIGMA = 0.4
CURVATURE = 2.0
WIDE = Scale(width=1024)


def _valley(sd: float = SIGMA, upper: float = math.inf) -> TargetLoss:
    """1-D: the optimum ~ N(0, sd²) (20 000 stratified draws), the valley ½·h·δ², no divergence;
    runs up to ``upper``."""
    draws = sd * np.sqrt(2.0) * _erfinv(np.linspace(-1, 1, 20_002)[1:-1])
    return TargetLoss(
        names=("lr",),
        log_params=(),
        optima=draws[:, None],
        curvatures=np.full((len(draws), 1, 1), CURVATURE),
        skews=None,
        divergence=None,
        divergence_cost=1.0,
        lower=np.array([-10.0 * sd]),
        upper=np.array([min(upper, 10.0 * sd)]),
        decision=np.zeros(1),
        full_names=("lr",),
        full_logs=(),
        fixed_values=np.array([math.nan]),
        active=(0,),
    )


def _erfinv(values: np.ndarray) -> np.ndarray:
    from scipy.special import erfinv

    return np.asarray(erfinv(values))


def _expected_best(points: np.ndarray, sd: float) -> np.ndarray:
    """E[min_i ½h(x_i − x*)²] by quadrature over x* ~ N(0, sd²), for rows of ``points``."""
    nodes = np.linspace(-8 * sd, 8 * sd, 2001)
    weights = np.exp(-0.5 * (nodes / sd) ** 2)
    weights /= weights.sum()
    losses = 0.5 * CURVATURE * (points[:, :, None] - nodes[None, None, :]) ** 2
    return np.asarray(losses.min(axis=1) @ weights)


def test_two_runs_are_the_symmetric_pair_found_by_brute_force() -> None:
    grid = np.linspace(-1.5 * SIGMA, 1.5 * SIGMA, 121)
    pairs = np.array([(a, b) for a in grid for b in grid if a < b])
    scores = _expected_best(pairs, SIGMA)
    brute = pairs[int(np.argmin(scores))]
    assert brute == pytest.approx(
        [-SIGMA * math.sqrt(2 / math.pi), SIGMA * math.sqrt(2 / math.pi)], abs=0.01 * SIGMA + 1e-12
    )

    portfolio = choose_candidates(_valley(), WIDE, 2)
    found = sorted(c.params["lr"] for c in portfolio)
    assert found == pytest.approx(sorted(brute), abs=0.01 * SIGMA)
    assert portfolio.expected_best_regret == pytest.approx(float(scores.min()), rel=0.02)
    # the closed form: ½hσ²(1 − 2/π), against ½hσ² for the single run at the mean
    assert portfolio.expected_best_regret == pytest.approx(
        0.5 * CURVATURE * SIGMA**2 * (1 - 2 / math.pi), rel=0.02
    )


def test_three_runs_are_the_lloyd_max_quantiser() -> None:
    found = sorted(c.params["lr"] for c in choose_candidates(_valley(), WIDE, 3))
    assert found == pytest.approx([-1.2240 * SIGMA, 0.0, 1.2240 * SIGMA], abs=0.01 * SIGMA)


def test_one_run_is_the_decision_and_its_regret_is_the_spread() -> None:
    portfolio = choose_candidates(_valley(), WIDE, 1)
    (only,) = portfolio
    assert only.params == {"lr": 0.0}
    assert only.expected_regret == pytest.approx(0.5 * CURVATURE * SIGMA**2, rel=1e-3)  # ½hσ²
    assert only.p_diverge == 0.0


def test_runs_keep_the_decision_s_limits() -> None:
    limit = 0.1 * SIGMA
    portfolio = choose_candidates(_valley(upper=limit), WIDE, 3)
    assert all(c.params["lr"] <= limit + 1e-12 for c in portfolio)


def test_the_portfolio_is_deterministic_for_a_seed() -> None:
    first = choose_candidates(_valley(), WIDE, 2, seed=7)
    again = choose_candidates(_valley(), WIDE, 2, seed=7)
    assert [c.params for c in first] == [c.params for c in again]
    assert first.expected_best_regret == again.expected_best_regret


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_k_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(TransferSearchError, match="positive integer"):
        choose_candidates(_valley(), WIDE, bad)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# Through extrapolate(): a width ladder whose lr diverges past a cliff
# ----------------------------------------------------------------------------------------------
BASE = Scale(width=64, dataset_size=1e4, batch_size=32)
TARGET = Scale(width=1024, dataset_size=1e5, batch_size=32)
SPACE = ts.TransferSpace(
    BASE, {"lr": ts.Float(1e-4, 0.3, log=True), "tau_epoch": ts.Float(0.05, 20.0, log=True)}
)


def _ladder(seed: int = 0) -> list[Observation]:
    rng = np.random.default_rng(seed)
    obs = []
    for width in (64, 128, 256):
        for size in (1e4, 4e4):
            lr_opt = 0.01 * (width / 64) ** -0.5
            for _ in range(24):
                lr = float(math.exp(rng.uniform(math.log(1e-4), math.log(0.3))))
                tau = float(math.exp(rng.uniform(math.log(0.05), math.log(20.0))))
                value = (
                    2.0
                    + 0.1 * math.log(lr / lr_opt) ** 2
                    + 0.05 * math.log(tau / 0.7) ** 2
                    + float(rng.normal(0, 0.002))
                )
                diverged = lr > 3.0 * lr_opt
                obs.append(
                    Observation(
                        {"width": width, "dataset_size": size, "batch_size": 32},
                        {"lr": lr, "tau_epoch": tau},
                        math.nan if diverged else value,
                    )
                )
    return obs


@pytest.fixture(scope="module")
def result() -> ts.Extrapolation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ts.extrapolate(_ladder(), target=TARGET)


def test_candidates_of_an_extrapolation(result: ts.Extrapolation) -> None:
    assert result.target_loss is not None and result.target_loss.divergence is not None
    (single,) = result.candidates(1)
    assert single.params == pytest.approx(result.params)
    assert single.p_diverge == pytest.approx(result.p_diverge)
    three = result.candidates(3)
    assert len(three) == 3
    assert result.candidates(3).candidates == three.candidates  # same default seed, same runs
    for run in three:
        assert run.p_diverge < 0.5
        assert run.hyperparameters is None  # no space: nothing to concretise
    regrets = [run.expected_regret for run in three]
    assert regrets == sorted(regrets)
    best = [result.candidates(k).expected_best_regret for k in (1, 2, 3)]
    assert best[0] >= best[1] >= best[2]


def test_candidates_are_concretised_with_a_space(result: ts.Extrapolation) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = result.candidates(2, space=SPACE)
        for run in runs:
            assert run.hyperparameters is not None
            expected = SPACE.concretize(run.params, result.target)
            assert run.hyperparameters.to_dict() == expected.to_dict()


# ----------------------------------------------------------------------------------------------
# The command line: transfersearch extrapolate --candidates K
# ----------------------------------------------------------------------------------------------
TARGET_ARG = "width=1024,dataset_size=1e5,batch_size=32"


@pytest.fixture(scope="module")
def study_storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite Optuna study of the ladder with its space stored; diverged runs as FAIL trials
    marked as the sampler marks a returned NaN."""
    optuna = pytest.importorskip("optuna")
    from transfersearch.integrations._optuna_trials import FAIL_DIVERGED, FAIL_KIND_ATTR
    from transfersearch.stored_space import SPACE_ATTR, space_to_json

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{tmp_path_factory.mktemp('portfolio') / 'study.db'}"
    study = optuna.create_study(storage=storage, study_name="proxy")
    study.set_user_attr(SPACE_ATTR, space_to_json(SPACE))
    dists = {
        "lr": optuna.distributions.FloatDistribution(1e-4, 0.3, log=True),
        "tau_epoch": optuna.distributions.FloatDistribution(0.05, 20.0, log=True),
    }
    for obs in _ladder(1):
        failed = not math.isfinite(obs.value)
        study.add_trial(
            optuna.trial.create_trial(
                params=dict(obs.params),
                distributions=dists,
                value=None if failed else obs.value,
                state=optuna.trial.TrialState.FAIL if failed else optuna.trial.TrialState.COMPLETE,
                user_attrs={f"scale.{k}": v for k, v in obs.scale.items()},
                system_attrs={FAIL_KIND_ATTR: FAIL_DIVERGED} if failed else None,
            )
        )
    return storage


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_json_carries_the_candidates_of_a_study(
    study_storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["extrapolate", "--storage", study_storage, "--study", "proxy", "--target", TARGET_ARG]
    status, out, err = _cli([*argv, "--json", "--candidates", "2"], capsys)
    assert status == 0, err
    data = json.loads(out)
    block = data["candidates"]
    assert block["k"] == 2 and len(block["runs"]) == 2
    assert 0.0 < block["expected_best_regret"] < math.inf
    for run in block["runs"]:
        assert set(run["params"]) == {"lr", "tau_epoch"}
        assert run["p_diverge"] < 0.5
        assert run["hyperparameters"]["groups"]["hidden"]["lr"] > 0  # the study's space
    # the same study through the Python API gives the same runs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optuna = pytest.importorskip("optuna")
        res = ts.extrapolate(
            optuna.load_study(study_name="proxy", storage=study_storage),
            target=TARGET,
        )
    assert res.target_loss is not None and res.target_loss.divergence is not None  # the cliff
    for run, again in zip(block["runs"], res.candidates(2), strict=True):
        assert run["params"] == pytest.approx(again.params)


def test_cli_prints_the_candidates_as_a_table(
    study_storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["extrapolate", "--storage", study_storage, "--study", "proxy", "--target", TARGET_ARG]
    status, out, err = _cli([*argv, "--candidates", "3"], capsys)
    assert status == 0, err
    assert "3 target run(s) minimising the expected best loss" in out
    assert "P(diverge)" in out and "run 3 hyperparameters:" in out
    assert "P(diverge):" in out  # the summary gives the divergence risk and its cost


def test_cli_refuses_zero_candidates(
    study_storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["extrapolate", "--storage", study_storage, "--study", "proxy", "--target", TARGET_ARG]
    status, _, err = _cli([*argv, "--candidates", "0"], capsys)
    assert status == 2
    assert err.count("\n") == 1 and "positive integer" in err

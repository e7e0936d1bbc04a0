"""A crash (the run raised) is not a divergence (a NaN or inf metric): every reader keeps them
apart, through the path a user takes (``study.optimize``, ``study.tell``, ``trials_dataframe()``,
a CSV on the command line)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from transfersearch import synthetic  # noqa: E402
from transfersearch.cli import build_parser, load_observations  # noqa: E402
from transfersearch.integrations.optuna import (  # noqa: E402
    TransferSampler,
    observations_from_study,
)
from transfersearch.readers import as_observations  # noqa: E402

SPACE = synthetic.make_space()
LADDER = list(synthetic.LADDER)


def _study(outcomes: list[str]) -> tuple[optuna.Study, TransferSampler]:
    """A study whose objective, trial by trial, returns a loss (ok), NaN, inf or raises."""
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0))
    study = optuna.create_study(sampler=sampler)
    todo = iter(outcomes)

    def objective(trial: optuna.Trial) -> float:
        sampler.suggest(trial)
        outcome = next(todo)
        if outcome == "raise":
            raise MemoryError("CUDA out of memory")
        return {"nan": math.nan, "inf": math.inf}.get(outcome, 1.0)

    study.optimize(objective, n_trials=len(outcomes), catch=(MemoryError,))
    return study, sampler


def test_study_optimize_keeps_a_raised_objective_apart_from_a_returned_nan() -> None:
    study, _ = _study(["ok", "raise", "nan", "inf", "raise"])
    fail = optuna.trial.TrialState.FAIL
    assert [t.state for t in study.trials].count(fail) == 3  # Optuna: FAIL for NaN and raise
    obs = observations_from_study(study)
    assert [o.crashed for o in obs] == [False, True, False, False, True]
    assert [o.diverged for o in obs] == [False, False, True, True, False]
    assert obs[2].state == "complete" and math.isnan(obs[2].value)


def test_ask_and_tell_nan_is_a_divergence_and_state_fail_a_crash() -> None:
    sampler = TransferSampler(SPACE, LADDER, base_sampler=optuna.samplers.RandomSampler(seed=0))
    study = optuna.create_study(sampler=sampler)
    for told in (math.nan, None):
        trial = study.ask()
        sampler.suggest(trial)
        with pytest.warns(UserWarning, match="nan") if told is not None else _nothing():
            if told is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, told)
    diverged, crashed = observations_from_study(study)
    assert diverged.diverged and not diverged.crashed
    assert crashed.crashed and not crashed.diverged


def test_trials_dataframe_and_its_csv_keep_crashes_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pandas")
    study, _ = _study(["ok", "raise", "nan", "ok"])
    frame = study.trials_dataframe()
    obs = as_observations(frame, params=["base_lr"])
    assert [o.crashed for o in obs] == [False, True, False, False]
    assert [o.diverged for o in obs] == [False, False, True, False]
    path = tmp_path / "trials.csv"
    frame.to_csv(path, index=False)
    args = build_parser().parse_args(["extrapolate", "--csv", str(path), "--target", "width=512"])
    read = load_observations(args)  # the command line reads the CSV as Python does
    assert [o.crashed for o in read] == [False, True, False, False]
    assert [o.diverged for o in read] == [False, False, True, False]


def test_a_table_marks_crashes_by_state_or_a_crashed_column() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "scale.width": [64, 64, 64, 64, 64],
            "params.lr": [1e-3, 2e-3, 3e-3, 4e-3, 5e-3],
            "value": [2.0, float("nan"), 1.5, float("nan"), 3.0],
            "state": ["complete", "complete", "failed", "diverged", "crashed"],
            "crashed": [False, False, False, False, False],
        }
    )
    obs = as_observations(frame)
    assert [o.crashed for o in obs] == [False, False, True, False, True]
    assert [o.diverged for o in obs] == [False, True, False, True, False]
    frame["crashed"] = [True, False, False, False, False]
    assert as_observations(frame)[0].crashed


class _nothing:
    """A context that expects nothing (``study.tell(state=FAIL)`` warns of nothing)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


def test_a_fail_that_records_no_kind_is_read_as_a_crash_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A study written before the sampler recorded the kind: its FAILs are crashes, and the log
    says how many were read so."""
    study = optuna.create_study()
    study.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.FAIL,
            params={"base_lr": 1e-3},
            distributions={"base_lr": optuna.distributions.FloatDistribution(1e-4, 1e-1)},
            user_attrs={"scale.width": 64},
        )
    )
    with caplog.at_level("INFO", logger="transfersearch.integrations.optuna"):
        (obs,) = observations_from_study(study)
    assert obs.crashed and not obs.diverged
    assert "1 FAIL trials of study" in caplog.text and "read as crashes" in caplog.text

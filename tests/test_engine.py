"""The pure engine: fit_sweep / validate_sweep on a Sweep, FitOptions, Diagnostic records, models."""

from __future__ import annotations

import dataclasses
import math
import re
import warnings

import numpy as np
import pytest
from _models import Pinned

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.fitting import (
    DEFAULT_MODELS,
    KINDS,
    Diagnostic,
    FitOptions,
    fit_sweep,
    validate_sweep,
)
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.summary import extrapolation_to_dict
from transfersearch.sweep import Sweep

SCENARIO = synthetic.make_scenario("no_drift", 0)
OBS = tuple(SCENARIO.observations)
#: 10⁴x the scenario's target on each variable: decades past the ladder's span.
FAR = Scale({k: v * 1e4 for k, v in SCENARIO.target.items()})


def _fit_quietly(
    sweep: Sweep, target: Scale, options: FitOptions, **kwargs: object
) -> ts.Extrapolation:
    """fit_sweep with every warning an error: the engine must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fit_sweep(sweep, target, options, **kwargs)  # type: ignore[arg-type]


def test_fit_sweep_equals_the_public_extrapolate() -> None:
    engine = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions(n_bootstrap=20, seed=3))
    public = ts.extrapolate(list(OBS), target=SCENARIO.target, n_bootstrap=20, seed=3)
    assert engine.params == public.params
    assert engine.law_params == public.law_params
    assert engine.stderr == public.stderr
    assert engine.model == public.model
    assert engine.model_scores == pytest.approx(public.model_scores, nan_ok=True)
    assert np.array_equal(engine.samples, public.samples, equal_nan=True)
    assert engine.diagnostics == public.diagnostics
    assert engine.summary() == public.summary()


def test_the_sweeps_direction_and_space_reach_the_result() -> None:
    space = synthetic.make_space()
    flipped = tuple(Observation(o.scale, o.params, -o.value, o.state) for o in OBS)
    lower = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions(n_bootstrap=0))
    higher = fit_sweep(
        Sweep(flipped, space=space, direction="maximize"),
        SCENARIO.target,
        FitOptions(n_bootstrap=0),
    )
    assert higher.direction == "maximize" and lower.direction == "minimize"
    assert higher.params == pytest.approx(lower.params, rel=1e-9)
    assert higher.space is space and lower.space is None


def test_a_far_target_is_an_act_record_the_engine_does_not_warn_and_the_boundary_does() -> None:
    result = _fit_quietly(Sweep(OBS), FAR, FitOptions(n_bootstrap=0))
    far = [d for d in result.diagnostics if d.kind == "far_target"]
    assert len(far) == 1 and far[0].act and far[0].scale == FAR
    decades = result.extrapolation_decades
    assert f"the target lies {decades:.2g} decades from the nearest proxy" in far[0].message
    assert far[0].message not in result.summary()  # summary() shows the act=False records only
    with pytest.warns(TransferSearchWarning, match=re.escape(far[0].message)):
        ts.extrapolate(list(OBS), target=FAR, n_bootstrap=0)


def test_every_record_is_typed_and_summary_renders_the_quiet_ones() -> None:
    result = _fit_quietly(Sweep(OBS), FAR, FitOptions(n_bootstrap=20))
    assert result.diagnostics and all(isinstance(d, Diagnostic) for d in result.diagnostics)
    assert all(d.kind in KINDS for d in result.diagnostics)
    quiet = [d for d in result.diagnostics if not d.act]
    assert quiet, "the no-drift scenario reports at least its stability-boundary line"
    text = result.summary()
    for note in quiet:
        assert note.message in text
    records = extrapolation_to_dict(result)["diagnostics"]  # what --json and the dashboard carry
    assert [(r["kind"], r["message"], r["act"]) for r in records] == [
        (d.kind, d.message, d.act) for d in result.diagnostics
    ]


def test_an_all_diverged_scale_and_a_thin_rung_are_records_not_warnings() -> None:
    scales = sorted({o.scale for o in OBS}, key=lambda s: s["width"])
    diverged = Scale(width=1024, dataset_size=1.6e7)
    extra = [Observation(diverged, {"lr": 1e-3, "tau": 1.0}, math.nan)] * 3
    thin = scales[-1]
    kept = [o for o in OBS if o.scale != thin] + [o for o in OBS if o.scale == thin][:2]
    result = _fit_quietly(Sweep(tuple(kept + extra)), SCENARIO.target, FitOptions(n_bootstrap=0))
    kinds = {d.kind: d for d in result.diagnostics}
    assert kinds["dropped"].act and repr(diverged) in kinds["dropped"].message
    assert kinds["fallback"].act and kinds["fallback"].scale == thin
    assert "too few finite trials" in kinds["fallback"].message
    with pytest.warns(TransferSearchWarning) as caught:
        ts.extrapolate(kept + extra, target=SCENARIO.target, n_bootstrap=0)
    shown = {str(w.message) for w in caught}
    assert {kinds["dropped"].message, kinds["fallback"].message} <= shown


def test_validate_sweep_carries_the_sweeps_space_and_matches_the_public_validate() -> None:
    space = synthetic.make_space()
    check = validate_sweep(Sweep(OBS, space=space), FitOptions(n_bootstrap=10))
    public = ts.validate(list(OBS), n_bootstrap=10)
    assert check.extrapolation.space is space
    assert check.predicted == public.predicted and check.regret == public.regret
    assert check.held_out == max({o.scale for o in OBS}, key=ts.default_cost)


def test_fit_options_check_themselves_and_replace_checks_again() -> None:
    options = FitOptions(params=["lr", "tau"], log_params="lr")  # type: ignore[arg-type]
    assert options.params == ("lr", "tau") and options.log_params == ("lr",)
    assert dataclasses.replace(options, n_bootstrap=5).n_bootstrap == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 1  # type: ignore[misc]
    with pytest.raises(TransferSearchError, match="`seed` must be None or a non-negative integer"):
        dataclasses.replace(options, seed=-1)
    with pytest.raises(TransferSearchError, match="`n_bootstrap` must be a non-negative integer"):
        FitOptions(n_bootstrap=True)
    with pytest.raises(TransferSearchError, match=r"one model's name \(nearest, constant"):
        FitOptions(model=3)  # type: ignore[arg-type]
    with pytest.raises(TransferSearchError, match=r"Write params=\['lr'\]"):
        FitOptions(params="lr")  # type: ignore[arg-type]
    with pytest.raises(TransferSearchError, match="Did you mean 'n_bootstrap'"):
        FitOptions.from_kwargs(n_bootstraps=10)
    assert FitOptions.from_kwargs(seed=None).seed is None


def test_a_model_passed_is_scored_and_can_be_chosen() -> None:
    family = (*DEFAULT_MODELS, Pinned())
    forced = fit_sweep(
        Sweep(OBS), SCENARIO.target, FitOptions(model="pinned", n_bootstrap=0), family
    )
    assert forced.model == "pinned" and forced.law_params == pytest.approx(
        {"lr": 0.05, "tau": 0.05}
    )
    auto = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions(n_bootstrap=0), family)
    assert "pinned" in auto.model_scores
    with pytest.raises(TransferSearchError, match=r"one of \['nearest', 'constant'"):
        fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions(model="pinned", n_bootstrap=0))


def test_applies_filters_the_candidates() -> None:
    never = Pinned(name="never", only="no such parameter")
    one = Pinned(name="one", only="lr")
    family = (*DEFAULT_MODELS, never, one)
    result = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions(n_bootstrap=0), family)
    assert "never" not in result.model_scores  # applies to no parameter's data
    assert "one" in result.model_scores  # applies to one of them
    assert "prior" not in result.model_scores  # every prior exponent is 0
    prior = FitOptions(n_bootstrap=0, prior_exponents={"lr": {"width": -0.5}})
    assert "prior" in fit_sweep(Sweep(OBS), SCENARIO.target, prior).model_scores

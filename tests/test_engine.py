"""The pure engine: fit_sweep / validate_sweep on a Sweep, FitOptions, Diagnostic records, models."""

from __future__ import annotations

import dataclasses
import math
import re
import warnings

import numpy as np
import pytest

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.errors import TransferSearchError, TransferSearchWarning
from transfersearch.fitting import (
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
    engine = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions(seed=3))
    public = ts.extrapolate(list(OBS), target=SCENARIO.target, seed=3)
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
    lower = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions())
    higher = fit_sweep(
        Sweep(flipped, space=space, direction="maximize"),
        SCENARIO.target,
        FitOptions(),
    )
    assert higher.direction == "maximize" and lower.direction == "minimize"
    assert higher.params == pytest.approx(lower.params, rel=1e-9)
    assert higher.space is space and lower.space is None


def test_a_far_target_is_an_act_record_the_engine_does_not_warn_and_the_boundary_does() -> None:
    result = _fit_quietly(Sweep(OBS), FAR, FitOptions())
    far = [d for d in result.diagnostics if d.kind == "far_target"]
    assert len(far) == 1 and far[0].act and far[0].scale == FAR
    decades = result.extrapolation_decades
    assert f"the target lies {decades:.2g} decades from the nearest proxy" in far[0].message
    assert far[0].message not in result.summary()  # summary() shows the act=False records only
    with pytest.warns(TransferSearchWarning, match=re.escape(far[0].message)):
        ts.extrapolate(list(OBS), target=FAR)


def test_every_record_is_typed_and_summary_renders_the_quiet_ones() -> None:
    result = _fit_quietly(Sweep(OBS), FAR, FitOptions())
    assert result.diagnostics and all(isinstance(d, Diagnostic) for d in result.diagnostics)
    assert all(d.kind in KINDS for d in result.diagnostics)
    quiet = [d for d in result.diagnostics if not d.act]
    assert quiet, "the no-drift scenario reports at least how far its trials stayed stable"
    text = result.summary()
    for note in quiet:
        assert note.message in text
    records = extrapolation_to_dict(result)["diagnostics"]  # what --json and the dashboard carry
    assert [(r["kind"], r["message"], r["act"]) for r in records] == [
        (d.kind, d.message, d.act) for d in result.diagnostics
    ]


def test_an_all_diverged_scale_is_a_record_and_a_thin_rung_still_informs_the_law() -> None:
    scales = sorted({o.scale for o in OBS}, key=lambda s: s["width"])
    diverged = Scale(width=1024, dataset_size=1.6e7)
    extra = [Observation(diverged, {"lr": 1e-3, "tau": 1.0}, math.nan)] * 3
    thin = scales[-1]
    kept = [o for o in OBS if o.scale != thin] + [o for o in OBS if o.scale == thin][:2]
    result = _fit_quietly(Sweep(tuple(kept + extra)), SCENARIO.target, FitOptions())
    kinds = {d.kind: d for d in result.diagnostics}
    assert kinds["dropped"].act and repr(diverged) in kinds["dropped"].message
    assert "fallback" not in kinds  # two trials go through the same likelihood as the others
    assert thin in [o.scale for o in result.optima]
    with pytest.warns(TransferSearchWarning) as caught:
        ts.extrapolate(kept + extra, target=SCENARIO.target)
    shown = {str(w.message) for w in caught}
    assert kinds["dropped"].message in shown


def test_validate_sweep_carries_the_sweeps_space_and_matches_the_public_validate() -> None:
    space = synthetic.make_space()
    check = validate_sweep(Sweep(OBS, space=space), FitOptions())
    public = ts.validate(list(OBS))
    assert check.extrapolation.space is space
    assert check.predicted == public.predicted and check.regret == public.regret
    assert check.held_out == max({o.scale for o in OBS}, key=ts.default_cost)


def test_fit_options_check_themselves_and_replace_checks_again() -> None:
    options = FitOptions(params=["lr", "tau"], log_params="lr")  # type: ignore[arg-type]
    assert options.params == ("lr", "tau") and options.log_params == ("lr",)
    assert dataclasses.replace(options, divergence_cost=0.5).divergence_cost == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 1  # type: ignore[misc]
    with pytest.raises(TransferSearchError, match="`seed` must be None or a non-negative integer"):
        dataclasses.replace(options, seed=-1)
    with pytest.raises(TransferSearchError, match="`divergence_cost` must be None"):
        FitOptions(divergence_cost=-1.0)
    # infinite: every run's expected loss would be inf, the decision left unoptimised
    with pytest.raises(TransferSearchError, match="give a large finite cost"):
        FitOptions(divergence_cost=math.inf)
    with pytest.raises(TransferSearchError, match="`n_bootstrap` must be a non-negative integer"):
        FitOptions(n_bootstrap=True)
    with pytest.warns(DeprecationWarning, match="n_bootstrap is deprecated"):
        FitOptions(n_bootstrap=10)
    with pytest.raises(TransferSearchError, match=r"'auto' .* or 'constant'"):
        FitOptions(model=3)  # type: ignore[arg-type]
    with pytest.raises(TransferSearchError, match=r"Write params=\['lr'\]"):
        FitOptions(params="lr")  # type: ignore[arg-type]
    with pytest.raises(TransferSearchError, match="Did you mean 'divergence_cost'"):
        FitOptions.from_kwargs(divergence_costs=10)
    assert FitOptions.from_kwargs(seed=None).seed is None


def test_the_constant_model_is_the_null_nested_in_the_drift_model() -> None:
    drift = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions())
    constant = fit_sweep(Sweep(OBS), SCENARIO.target, FitOptions(model="constant"))
    assert drift.model == "drift" and constant.model == "constant"
    for law in constant.laws.values():
        assert all(abs(e) < 1e-3 for e in law.exponents.values())
    # on a no-drift scenario the integrated drift scale finds next to no drift either
    for law in drift.laws.values():
        assert all(abs(e) < 0.1 for e in law.exponents.values())


def test_a_rung_whose_trials_all_report_one_value_is_warned_about() -> None:
    """Every finite trial at a scale with one value (a metric that was not recorded) says nothing
    of where the optimum lies: a warning names the scale, and a rung that varies does not."""
    obs = [
        Observation(Scale(D=d), {"lr": lr}, 3.5 if d == 2.0 else 3.0 + math.log(lr / 2e-3) ** 2)
        for d in (1.0, 2.0, 4.0)
        for lr in (1e-3, 2e-3, 4e-3, 8e-3)
    ]
    with pytest.warns(TransferSearchWarning, match=r"every finite trial at \['Scale\(D=2\)'\]"):
        res = ts.extrapolate(obs, target={"D": 8.0}, params=["lr"], seed=0)
    flat = [d for d in res.diagnostics if d.kind == "flat"]
    assert len(flat) == 1 and flat[0].act and "Scale(D=1)" not in flat[0].message


@pytest.mark.parametrize("option", ["prior_exponents", "fixed_exponents"])
def test_an_exponent_s_refusal_names_the_option_it_came_in(option: str) -> None:
    obs = [
        Observation(Scale(D=d), {"lr": lr}, 3.0 + math.log(lr / 2e-3) ** 2)
        for d in (1.0, 2.0)
        for lr in (1e-3, 2e-3, 4e-3)
    ]
    with pytest.raises(
        TransferSearchError, match=rf"`{option}\['lr'\]\['D'\]` must be a finite number"
    ):
        ts.extrapolate(obs, target={"D": 4.0}, params=["lr"], **{option: {"lr": {"D": math.inf}}})


def test_an_interval_wider_than_the_trials_range_is_said_in_the_summary() -> None:
    """Ten trials over six rungs (one or two a rung): the target's 90% interval spans more than
    every trial's range, and the summary says the decision leans on the priors; a well-sampled
    ladder (the scenario's 20 trials a rung) does not get the note."""
    rows = [  # width, dataset_size, base_lr, tau_epoch, loss: a small Ray sweep's complete trials
        (64, 1e4, 0.0353, 0.252, 1.7418), (64, 1e4, 0.0267, 3.955, 1.7713),
        (128, 1e4, 0.0481, 2.415, 1.7534), (64, 4e4, 0.0289, 0.498, 1.5890),
        (64, 4e4, 0.0567, 0.514, 1.6634), (64, 4e4, 0.0552, 2.463, 1.6757),
        (256, 1e4, 0.0126, 0.321, 1.5931), (128, 4e4, 0.0238, 0.379, 1.5590),
        (128, 4e4, 0.0193, 0.344, 1.5573), (256, 4e4, 0.0022, 0.123, 2.0169),
    ]  # fmt: skip
    obs = [
        Observation(Scale(width=w, dataset_size=n), {"base_lr": lr, "tau_epoch": tau}, v)
        for w, n, lr, tau, v in rows
    ]
    res = _fit_quietly(Sweep(tuple(obs)), Scale(width=2048, dataset_size=6.4e5), FitOptions())
    wide = [d for d in res.diagnostics if d.kind == "wide"]
    assert len(wide) == 1 and not wide[0].act and "base_lr" in wide[0].message
    assert wide[0].message in res.summary()
    full = _fit_quietly(Sweep(tuple(OBS)), SCENARIO.target, FitOptions())
    assert not [d for d in full.diagnostics if d.kind == "wide"]


def test_lies_on_a_cross_by_hand() -> None:
    from transfersearch.fitting.findings import lies_on_a_cross

    a = np.array
    assert lies_on_a_cross(a([1.0, 2.0, 3.0, 2.0, 2.0]), a([5.0, 5.0, 5.0, 4.0, 6.0]))  # a cross
    assert lies_on_a_cross(a([1.0, 2.0]), a([1.0, 2.0]))  # two points: the lines a=1, b=2
    assert lies_on_a_cross(a([1.0, 1.0, 2.0, 3.0]), a([1.0, 2.0, 3.0, 3.0]))  # a=1 and b=3
    assert not lies_on_a_cross(a([1.0, 2.0, 3.0]), a([1.0, 2.0, 3.0]))  # a diagonal
    # a cross and one diagonal neighbour of its centre
    assert not lies_on_a_cross(a([1.0, 2.0, 3.0, 2.0, 2.0, 3.0]), a([5.0, 5.0, 5.0, 4.0, 6.0, 6.0]))


def test_diagonal_runs_are_the_best_s_neighbours_in_both_coordinates() -> None:
    from transfersearch.fitting.findings import diagonal_runs

    coords = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [2.0, 4.0], [2.0, 6.0], [2.0, 7.0]])
    values = np.array([3.0, 1.0, 3.0, 2.0, 2.0, 2.5])  # the best at (2, 5)
    assert diagonal_runs(coords, values, 0, 1) == [(1.0, 4.0), (1.0, 6.0), (3.0, 4.0), (3.0, 6.0)]
    values = np.array([3.0, 2.0, 1.0, 2.0, 2.0, 2.5])  # the best at (3, 5): the edge in the first
    assert diagonal_runs(coords, values, 0, 1) == [(2.0, 4.0), (2.0, 6.0)]
    assert diagonal_runs(coords[:0], values[:0], 0, 1) == []


def test_the_interaction_finding_reads_a_rung_without_finite_trials() -> None:
    """A rung whose trials all diverged has no finite trial to read (no crash); the other rung's
    cross decides, and the example runs come from it."""
    from transfersearch.fitting.findings import interaction_findings

    cross = np.array([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    rungs = [(np.zeros((0, 2)), np.zeros(0)), (cross, np.array([1.0, 2.0, 2.0, 2.0, 2.0]))]
    scales = [Scale(width=64), Scale(width=128)]
    (note,) = interaction_findings(["a", "b"], rungs, scales, [])
    assert "a × b" in note.message and "a=-1, b=-1; a=-1, b=1; a=1, b=-1; a=1, b=1" in note.message


def _tilted_cross(width: float, diagonals: bool) -> list[Observation]:
    """One rung of a one-at-a-time table on a tilted bowl in (log lr, log bs): five lr values at
    the best bs and five bs values at the best lr (and, with ``diagonals``, the four runs one
    step from the best in both)."""
    best = (math.log(0.01 * (width / 64) ** -0.5), math.log(256.0))
    steps = [-2, -1, 0, 1, 2]
    points = {(i, 0) for i in steps} | {(0, j) for j in steps}
    if diagonals:
        points |= {(i, j) for i in (-1, 1) for j in (-1, 1)}
    out = []
    for i, j in sorted(points):
        x, y = 0.5 * i, 0.5 * j
        loss = 3.0 + 0.2 * x * x + 0.2 * x * y + 0.1 * y * y  # tilt: optimum lr rises with bs
        params = {"lr": math.exp(best[0] + x), "bs": math.exp(best[1] + y)}
        out.append(Observation(Scale(width=width), params, loss))
    return out


def test_a_one_at_a_time_table_is_said_to_leave_the_pair_s_tilt_to_the_prior() -> None:
    """Through extrapolate() and summary(): a ladder of crosses gets one `interaction` note naming
    the pair, shown in the summary and not warned; the same ladder with the four diagonal
    neighbours of one rung's best measures the tilt, and the note goes."""
    target = Scale(width=1024)
    crosses = [o for w in (64, 128, 256) for o in _tilted_cross(w, diagonals=False)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = ts.extrapolate(crosses, target=target, params=["lr", "bs"], seed=0)
    notes = [d for d in res.diagnostics if d.kind == "interaction"]
    assert len(notes) == 1 and not notes[0].act
    assert "lr × bs" in notes[0].message and notes[0].message in res.summary()
    # the runs that would measure it, at the costliest rung: its best (lr 0.01·4^-0.5 = 0.005,
    # bs 256) one step (e^±0.5) away in both
    for lr, bs in [
        (0.005 * math.exp(-0.5), 256 * math.exp(-0.5)),
        (0.005 * math.exp(0.5), 256 * math.exp(0.5)),
    ]:
        assert f"lr={lr:.4g}, bs={bs:.4g}" in notes[0].message
    assert not [w for w in caught if "no rung varies" in str(w.message)]
    measured = _tilted_cross(64, diagonals=True)
    measured += [o for w in (128, 256) for o in _tilted_cross(w, diagonals=False)]
    res = _fit_quietly(Sweep(tuple(measured)), target, FitOptions(params=("lr", "bs")))
    assert not [d for d in res.diagnostics if d.kind == "interaction"]


def _bowl_rung(width: float, data: float) -> list[Observation]:
    """A 3 × 3 grid on a bowl whose lr optimum moves as width^-1 (no scatter about that law)."""
    best = math.log(0.01 * 64 / width)
    return [
        Observation(
            Scale(width=width, dataset_size=data),
            {"lr": math.exp(best + x), "bs": math.exp(math.log(128.0) + y)},
            2.0 + 0.2 * x * x + 0.1 * y * y,
        )
        for x in (-1.0, 0.0, 1.0)
        for y in (-1.0, 0.0, 1.0)
    ]


def test_as_many_rungs_as_the_law_s_coefficients_is_said_to_leave_the_scatter_unidentified() -> (
    None
):
    """Through extrapolate() and summary(): three rungs that vary two scale variables carry the
    `scatter` note (not warned); a fourth rung, the no-drift model and a target that is a rung
    do not."""
    target = Scale(width=1024, dataset_size=1.6e5)
    three = [o for w, n in ((64, 1e4), (128, 1e4), (64, 4e4)) for o in _bowl_rung(w, n)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = ts.extrapolate(three, target=target, params=["lr", "bs"], seed=0)
    notes = [d for d in res.diagnostics if d.kind == "scatter"]
    assert len(notes) == 1 and not notes[0].act and notes[0].message in res.summary()
    assert notes[0].message.startswith("3 rungs vary 2 direction(s) of scale")
    assert not [w for w in caught if "not identified" in str(w.message)]
    four = three + _bowl_rung(128, 4e4)
    options = FitOptions(params=("lr", "bs"))
    for sweep, at, opts in (
        (four, target, options),
        (three, target, dataclasses.replace(options, model="constant")),
        (three, Scale(width=64, dataset_size=4e4), options),
    ):
        res = _fit_quietly(Sweep(tuple(sweep)), at, opts)
        assert not [d for d in res.diagnostics if d.kind == "scatter"]

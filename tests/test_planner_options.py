"""PlannerOptions: the planner's options as one frozen, self-checking value."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.ladder import PlannerOptions, TransferPlanner

SPACE = synthetic.make_space()
LADDER = list(synthetic.LADDER)


def test_defaults_are_the_planner_s_and_a_copy_is_checked_again() -> None:
    options = PlannerOptions()
    assert (options.min_trials, options.focus, options.n_bootstrap) == (6, 0.75, None)
    assert options.direction == "minimize" and options.seed is None
    assert TransferPlanner(SPACE, LADDER).options == options
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.focus = 0.5  # type: ignore[misc]
    with pytest.raises(ts.TransferSearchError, match="focus"):
        dataclasses.replace(options, focus=2.0)


def test_a_list_budget_is_kept_as_a_tuple_and_its_entries_are_checked() -> None:
    assert PlannerOptions(trials_per_rung=[4, 3, 2, 1]).trials_per_rung == (4, 3, 2, 1)  # type: ignore[arg-type]
    with pytest.raises(ts.TransferSearchError, match="trials_per_rung"):
        PlannerOptions(trials_per_rung=(4, 0))
    with pytest.raises(ts.TransferSearchError, match="later_rungs_trials"):
        PlannerOptions(later_rungs_trials=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_spread": 0.0}, "min_spread"),
        ({"n_bootstrap": -1}, "n_bootstrap"),
        ({"seed": 1.5}, "seed"),
        ({"transfer": "no"}, "transfer"),
        ({"refit_growth": 0.9}, "refit_growth"),
        ({"gate_on_law": 1}, "gate_on_law"),
        ({"detour_limit": 0.5}, "detour_limit"),
        ({"direction": "max"}, "direction"),
        ({"cost": 3.0}, "cost"),
    ],
)
def test_a_bad_value_names_its_option(kwargs: dict, match: str) -> None:
    with pytest.raises(ts.TransferSearchError, match=match):
        PlannerOptions(**kwargs)


def test_an_unknown_keyword_names_the_closest_option() -> None:
    with pytest.raises(ts.TransferSearchError, match="Did you mean 'trials_per_rung'"):
        PlannerOptions.from_kwargs(trial_per_rung=4)
    with pytest.raises(ts.TransferSearchError, match="no option 'colour'.*The options are"):
        PlannerOptions.from_kwargs(colour="red")
    assert PlannerOptions.from_kwargs(min_trials=4) == PlannerOptions(min_trials=4)
    with pytest.raises(ts.TransferSearchError, match="Did you mean 'focus'"):
        TransferPlanner(SPACE, LADDER, focsu=0.5)
    with pytest.raises(ts.TransferSearchError, match="Did you mean 'min_spread'"):
        TransferPlanner(SPACE, LADDER).replace(min_sprad=0.2)


def test_options_and_keywords_make_the_same_planner() -> None:
    by_keywords = TransferPlanner(SPACE, LADDER, min_trials=4, seed=3)
    by_options = TransferPlanner(SPACE, LADDER, PlannerOptions(min_trials=4, seed=3))
    changed = TransferPlanner(SPACE, LADDER, PlannerOptions(seed=3), min_trials=4)
    assert by_keywords.options == by_options.options == changed.options
    assert by_keywords.replace(focus=0.5).options == dataclasses.replace(
        by_keywords.options, focus=0.5
    )
    with pytest.raises(ts.TransferSearchError, match="PlannerOptions"):
        TransferPlanner(SPACE, LADDER, {"min_trials": 4})  # type: ignore[arg-type]


def test_the_planner_s_signature_spells_out_its_options() -> None:
    parameters = inspect.signature(TransferPlanner).parameters
    assert list(parameters)[:3] == ["space", "ladder", "options"]
    fields = dataclasses.fields(PlannerOptions)
    assert {name: p.default for name, p in list(parameters.items())[3:]} == {
        f.name: f.default for f in fields
    }

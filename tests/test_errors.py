"""The declared argument checks (``transfersearch.errors``): each kind of constraint refuses its
counter-example with one message naming the argument, the value, the rule and the fix, and lets
the nearest good value through."""

from __future__ import annotations

import dataclasses
import math
import typing
from numbers import Integral, Real

import numpy as np
import pytest

import transfersearch as ts
from transfersearch.api import READ_KEYWORDS, FitKeywords
from transfersearch.errors import (
    Allowed,
    Boolean,
    Function,
    InstanceOf,
    Interval,
    Names,
    Options,
    TransferSearchError,
    check_int,
    check_table,
    check_value,
    options_from,
)
from transfersearch.fitting.options import FitOptions

#: (constraint, a value it refuses, a value it holds, what the message must say of the rule).
CASES: list[tuple[object, object, object, str]] = [
    (Interval(Integral, 0), -1, 0, "a non-negative integer (int >= 0)"),
    (Interval(Integral, 1), 2.0, 3, "a positive integer (int >= 1)"),
    (Interval(Integral, 2, 8), 9, 8, "an int in [2, 8]"),
    (Interval(Real, 0, None, closed="neither"), 0.0, 1e-9, "a positive finite number"),
    (Interval(Real, 0, None, closed="neither"), math.inf, 1e300, "a positive finite number"),
    (Interval(Real, 0, 1, closed="left"), 1.0, 0.0, "a finite number in [0, 1)"),
    (Interval(Real, 1), math.nan, 1.0, "a finite number >= 1"),
    (Interval(Real, 1, finite=False), 0.5, math.inf, "a number >= 1"),
    (Options("auto", "constant"), "lin", "auto", "one of 'auto', 'constant'"),
    (Boolean(), "no", False, "True or False"),
    (Names(), "width", ("width",), "a list of names"),
    (Names(), ["width", ""], ["width"], "a list of names"),
    (Function(), 3, len, "a function"),
    (InstanceOf(dict, "a dict of exponents"), [1], {}, "a dict of exponents"),
]


@pytest.mark.parametrize(("constraint", "bad", "good", "rule"), CASES)
def test_each_constraint_refuses_its_counter_example_naming_value_rule_and_fix(
    constraint: typing.Any, bad: object, good: object, rule: str
) -> None:
    allowed = Allowed(constraint, fix="Write it so.")
    with pytest.raises(TransferSearchError) as info:
        check_value("knob", bad, allowed)
    message = str(info.value)
    assert message.startswith(f"`knob` must be {rule}, but got knob=")
    assert f"knob={bad!r}" in message or f"knob={float(bad)!r}" in message  # type: ignore[arg-type]
    assert message.endswith(" Write it so.")
    check_value("knob", good, allowed)  # the nearest good value passes


def test_the_type_is_named_only_when_the_type_is_what_is_wrong() -> None:
    allowed = Allowed(Interval(Integral, 1))
    with pytest.raises(TransferSearchError, match=r"got knob='3' \(str\)\.$"):
        check_value("knob", "3", allowed)
    with pytest.raises(TransferSearchError, match=r"got knob=True \(bool\)\.$"):
        check_value("knob", True, allowed)  # a bool is no int here
    with pytest.raises(TransferSearchError, match=r"got knob=0\.$"):
        check_value("knob", 0, allowed)


def test_none_is_allowed_only_where_the_table_says_and_is_named_first() -> None:
    assert check_value("seed", None, Allowed(None, Interval(Integral, 0))) is None
    with pytest.raises(TransferSearchError, match="`seed` must be None or a non-negative integer"):
        check_value("seed", -1, Allowed(None, Interval(Integral, 0)))
    with pytest.raises(TransferSearchError, match=r"must be a non-negative integer.*\(NoneType\)"):
        check_value("seed", None, Allowed(Interval(Integral, 0)))


def test_values_come_back_normalised_and_a_fix_may_quote_the_value() -> None:
    assert type(check_value("k", np.int64(3), Allowed(Interval(Integral, 1)))) is int
    assert type(check_value("x", np.float32(0.5), Allowed(Interval(Real, 0, 1)))) is float
    assert check_value("names", ["a", "b"], Allowed(Names())) == ("a", "b")
    quoting = Allowed(Names(), fix=lambda value: f"Write names=[{value!r}].")
    with pytest.raises(TransferSearchError, match=r"Write names=\['lr'\]\.$"):
        check_value("names", "lr", quoting)


def test_a_table_checks_every_entry_in_order_naming_the_owner() -> None:
    table = {"low": Allowed(Interval(Integral)), "step": Allowed(Interval(Integral, 1))}
    assert check_table(table, {"low": 0, "step": 2}) == {"low": 0, "step": 2}
    with pytest.raises(TransferSearchError, match=r"^Int `step` must be a positive integer"):
        check_table(table, {"low": 0, "step": 0}, owner="Int")
    with pytest.raises(TransferSearchError, match="`low` must be an int, but got low=0.5"):
        check_table(table, {"low": 0.5, "step": 0})  # the first entry that breaks is named


def test_the_thin_wrappers_keep_their_messages() -> None:
    with pytest.raises(TransferSearchError, match=r"`n` must be an int >= 2, but got n=1\. Fix\."):
        check_int("n", 1, minimum=2, fix="Fix.")
    with pytest.raises(
        TransferSearchError, match=r"`lr` must be a positive finite number.*lr=-1\.0"
    ):
        ts.errors.check_positive("lr", -1)
    with pytest.raises(TransferSearchError, match=r"`on` must be True or False.*\(str\)"):
        ts.errors.check_bool("on", "yes")


def test_options_from_merges_keywords_into_the_options_object_once() -> None:
    base = FitOptions(seed=3)
    assert options_from(FitOptions, None, {"seed": 1}, unknown="no {name!r}", fix="") == FitOptions(
        seed=1
    )
    merged = options_from(FitOptions, base, {"model": "constant"}, unknown="no {name!r}", fix="")
    assert (merged.seed, merged.model) == (3, "constant")
    assert options_from(FitOptions, base, {}, unknown="no {name!r}", fix="") is base
    with pytest.raises(TransferSearchError, match=r"no 'sed'\. Did you mean 'seed'\?"):
        options_from(FitOptions, base, {"sed": 1}, unknown="no {name!r}", fix="")
    with pytest.raises(TransferSearchError, match=r"`options` must be a FitOptions.*Use one\.$"):
        options_from(FitOptions, {"seed": 1}, {}, unknown="no {name!r}", fix="Use one.")


def test_fit_keywords_are_the_fit_options_and_the_read_keywords_exactly() -> None:
    """FitKeywords is written out for editors and mypy; it must name each FitOptions field and
    each of read_sweep's keywords, and nothing else."""
    typed = set(typing.get_type_hints(FitKeywords))
    fields = {f.name for f in dataclasses.fields(FitOptions)}
    assert typed == fields | set(READ_KEYWORDS)
    read_sweep = typing.get_type_hints(ts.read_sweep)
    assert set(READ_KEYWORDS) == set(read_sweep) - {"source", "return"}

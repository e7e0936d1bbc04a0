"""The distributions a coordinate is swept over: :class:`Float`, :class:`Int` and :class:`Choice`.

Each checks its own bounds and answers three questions: does it contain a value (``contains``),
a draw (``sample``), and the nearest point of its range or grid (``snap``). Public through
:mod:`transfersearch.space` and ``transfersearch``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Union

import numpy as np

from transfersearch.errors import Allowed, Boolean, Interval, TransferSearchError, check_table

__all__ = ["FLOAT_FIELDS", "INT_FIELDS", "Choice", "Distribution", "Float", "Int", "is_number"]


def is_number(value: object) -> bool:
    """Whether ``value`` is a finite real number (a bool is not one)."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


_LOG = Allowed(Boolean(), fix="Write log=True for a log-uniform range, log=False otherwise.")
#: What the fields of :class:`Float` may be (the bounds' order is checked after).
FLOAT_FIELDS: Mapping[str, Allowed] = {
    "low": Allowed(Interval(Real)),
    "high": Allowed(Interval(Real)),
    "log": _LOG,
}
#: What the fields of :class:`Int` may be.
INT_FIELDS: Mapping[str, Allowed] = {
    "low": Allowed(Interval(Integral)),
    "high": Allowed(Interval(Integral)),
    "step": Allowed(Interval(Integral, 1), fix="E.g. step=1 (every integer)."),
    "log": _LOG,
}


def _check_fields(dist: Float | Int, table: Mapping[str, Allowed], *, store: bool) -> None:
    """Check ``dist``'s fields against ``table``; with ``store``, keep the normalised values (a
    numpy integer becomes an int)."""
    checked = check_table(table, dist, owner=type(dist).__name__)
    for name, value in checked.items() if store else ():
        object.__setattr__(dist, name, value)


def _check_bounds(low: float, high: float, log: bool) -> None:
    if low > high:
        raise TransferSearchError(f"`low <= high` must hold, but got ({low=}, {high=}).")
    if log and low <= 0:
        raise TransferSearchError(
            f"a log-scale distribution needs `low > 0`, but got {low=}. Raise `low` or set log=False."
        )


@dataclass(frozen=True)
class Float:
    """A real coordinate on [low, high], sampled uniformly or log-uniformly (``log=True``)."""

    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        _check_fields(self, FLOAT_FIELDS, store=False)  # the bounds are kept as given
        _check_bounds(self.low, self.high, self.log)

    def contains(self, value: object) -> bool:
        return (
            isinstance(value, Real) and is_number(value) and self.low <= float(value) <= self.high
        )

    def sample(self, rng: np.random.Generator) -> float:
        if self.log:
            return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        return float(rng.uniform(self.low, self.high))

    def snap(self, value: float) -> float:
        """``value`` clipped to [low, high]."""
        return float(min(max(float(value), self.low), self.high))


@dataclass(frozen=True)
class Int:
    """An integer coordinate on [low, high] with ``step``, optionally log-uniform."""

    low: int
    high: int
    log: bool = False
    step: int = 1

    def __post_init__(self) -> None:
        _check_fields(self, INT_FIELDS, store=True)
        if self.log and self.step != 1:
            raise TransferSearchError("Int(log=True) needs step=1 (as in Optuna).")
        _check_bounds(self.low, self.high, self.log)

    def contains(self, value: object) -> bool:
        if not isinstance(value, Real) or not is_number(value):
            return False
        as_float = float(value)
        if as_float != round(as_float):
            return False
        number = round(as_float)
        return self.low <= number <= self.high and (number - self.low) % self.step == 0

    def sample(self, rng: np.random.Generator) -> int:
        if self.log:
            return round(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        n = (self.high - self.low) // self.step
        return int(self.low + self.step * int(rng.integers(0, n + 1)))

    def snap(self, value: float) -> int:
        """The point of the grid ``low, low + step, …, <= high`` nearest to ``value``."""
        clipped = min(max(float(value), self.low), self.high)
        steps = min(round((clipped - self.low) / self.step), (self.high - self.low) // self.step)
        return int(self.low + self.step * steps)


@dataclass(frozen=True)
class Choice:
    """A categorical coordinate: one of ``choices`` (numbers, strings, booleans or None)."""

    choices: tuple[Any, ...]

    def __init__(self, choices: Iterable[Any]) -> None:
        if isinstance(choices, (str, bytes)):
            raise TransferSearchError(
                f"Choice takes a list of options, but got the string {choices!r}, which would "
                f"become the options {tuple(choices)!r}. Write Choice([{choices!r}])."
            )
        if isinstance(choices, (Mapping, set, frozenset)) or not isinstance(choices, Iterable):
            why = (
                ": a set or dict has no fixed order"
                if isinstance(choices, (Mapping, set, frozenset))
                else ""
            )
            raise TransferSearchError(
                f"Choice takes a list of options (numbers, strings, booleans or None), but got "
                f"{choices!r} ({type(choices).__name__}){why}. Write Choice(['adamw', 'lion'])."
            )
        values = tuple(choices)
        if not values:
            raise TransferSearchError("Choice needs at least one option, but got an empty list.")
        bad = [v for v in values if v is not None and not isinstance(v, (str, Real))]
        if bad:
            raise TransferSearchError(
                f"Choice options must be numbers, strings, booleans or None (what Optuna and Ray "
                f"store), but got {bad!r} in {values!r}."
            )
        object.__setattr__(self, "choices", values)

    def contains(self, value: object) -> bool:
        return value in self.choices

    def sample(self, rng: np.random.Generator) -> Any:
        return self.choices[int(rng.integers(0, len(self.choices)))]

    def snap(self, value: Any) -> Any:
        """``value`` itself: a choice has no nearest neighbour.

        Raises:
            TransferSearchError: ``value`` is not one of the choices.
        """
        if value not in self.choices:
            raise TransferSearchError(
                f"{value!r} is not one of the choices {self.choices}; pick one of them."
            )
        return value


Distribution = Union[Float, Int, Choice]

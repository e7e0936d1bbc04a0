"""The one error family of transfersearch, and the declared argument checks.

A table maps each argument to what it may be (:class:`Allowed`: constraints such as
``Interval(Integral, 0)``, ``Options("auto", "constant")``, ``None``) and one function,
:func:`check_table`, checks the arguments against it, so every message has one shape: the rule,
the value that broke it, its type when that is what is wrong, and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, TypeVar

__all__ = [
    "POSITIVE",
    "Allowed",
    "Boolean",
    "Constraint",
    "Function",
    "InstanceOf",
    "Interval",
    "Names",
    "Options",
    "TransferSearchError",
    "TransferSearchWarning",
    "check_bool",
    "check_int",
    "check_keywords",
    "check_positive",
    "check_table",
    "check_value",
    "options_from",
    "shown_positions",
]

#: How many offending rows or trials an error message lists before "and N more": enough to find
#: the pattern (a whole rung, every n-th row), short enough to stay one readable line.
SHOWN_POSITIONS = 5

_Options = TypeVar("_Options")


class TransferSearchError(ValueError):
    """Bad input to transfersearch: the message names the field, the bad value and the fix."""


class TransferSearchWarning(UserWarning):
    """A result was produced, but something about it deserves the user's attention."""


class Constraint:
    """What an argument may be: :meth:`holds` decides, :meth:`describe` words it for a message."""

    def holds(self, value: object) -> bool:
        """Whether ``value`` satisfies the constraint."""
        raise NotImplementedError

    def describe(self) -> str:
        """The rule, to follow "`name` must be ", e.g. ``"an int >= 2"``."""
        raise NotImplementedError

    def typed(self, value: object) -> bool:
        """Whether ``value`` has the right type (a message shows the type when it has not)."""
        return self.holds(value)

    def normalised(self, value: Any) -> Any:
        """The value as stored once it holds (``Interval`` turns a numpy number into a float)."""
        return value

    def shown(self, value: object) -> str:
        """The value as a message quotes it, once its type is right."""
        return repr(value)


@dataclass(frozen=True)
class Interval(Constraint):
    """A number of ``kind`` (``Integral`` or ``Real``; a bool is neither) between ``low`` and
    ``high`` (None: unbounded); ``closed`` says which ends are included. A ``Real`` is finite
    unless ``finite=False`` (NaN never holds)."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"
    finite: bool = True

    def typed(self, value: object) -> bool:
        return isinstance(value, self.kind) and not isinstance(value, bool)

    def holds(self, value: object) -> bool:
        if not self.typed(value):
            return False
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number) or (self.finite and math.isinf(number)):
            return False
        low_ok = self.low is None or number > self.low or (self._closed_low and number == self.low)
        high_ok = (
            self.high is None or number < self.high or (self._closed_high and number == self.high)
        )
        return low_ok and high_ok

    @property
    def _closed_low(self) -> bool:
        return self.closed in ("both", "left")

    @property
    def _closed_high(self) -> bool:
        return self.closed in ("both", "right")

    def normalised(self, value: Any) -> Any:
        return int(value) if self.kind is Integral else float(value)

    def shown(self, value: object) -> str:
        return repr(self.normalised(value))

    def describe(self) -> str:
        low, high = self.low, self.high
        if self.kind is Integral:
            if high is None and low in (0, 1) and self._closed_low:
                word = "non-negative" if low == 0 else "positive"
                return f"a {word} integer (int >= {low:g})"
            return f"an int {self._bounds()}".rstrip()
        number = "finite number" if self.finite else "number"
        if low == 0 and high is None and not self._closed_low:
            return f"a positive {number}"
        return f"a {number} {self._bounds()}".rstrip()

    def _bounds(self) -> str:
        low, high = self.low, self.high
        if low is not None and high is not None:
            left, right = "[" if self._closed_low else "(", "]" if self._closed_high else ")"
            return f"in {left}{low:g}, {high:g}{right}"
        if low is not None:
            return f"{'>=' if self._closed_low else '>'} {low:g}"
        if high is not None:
            return f"{'<=' if self._closed_high else '<'} {high:g}"
        return ""


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values, e.g. ``Options("auto", "constant")``."""

    values: tuple[object, ...]

    def __init__(self, *values: object) -> None:
        object.__setattr__(self, "values", values)

    def holds(self, value: object) -> bool:
        return any(isinstance(value, type(v)) and value == v for v in self.values)

    def typed(self, value: object) -> bool:
        return any(isinstance(value, type(v)) for v in self.values)

    def describe(self) -> str:
        return f"one of {', '.join(repr(v) for v in self.values)}"


@dataclass(frozen=True)
class Boolean(Constraint):
    """``True`` or ``False`` only: a truthy ``'no'`` or ``1`` would silently mean something."""

    def holds(self, value: object) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "True or False"


@dataclass(frozen=True)
class Names(Constraint):
    """A list (or other iterable) of non-empty strings; a single string is refused, since it
    would be read as its letters."""

    def typed(self, value: object) -> bool:
        return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))

    def holds(self, value: object) -> bool:
        if not self.typed(value):
            return False
        return all(isinstance(n, str) and n for n in value)  # type: ignore[attr-defined]

    def normalised(self, value: Any) -> Any:
        return tuple(value)

    def describe(self) -> str:
        return "a list of names"


@dataclass(frozen=True)
class Function(Constraint):
    """A callable."""

    what: str = "a function"

    def holds(self, value: object) -> bool:
        return callable(value)

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class InstanceOf(Constraint):
    """An instance of ``cls``; ``what`` words it (default: "a <cls name>")."""

    cls: type
    what: str = ""

    def holds(self, value: object) -> bool:
        return isinstance(value, self.cls)

    def describe(self) -> str:
        return self.what or f"a {self.cls.__name__}"


@dataclass(frozen=True)
class Allowed:
    """One argument's entry in a table: the constraints any one of which it must satisfy
    (``None`` among them allows None) and the fix the message ends with (a string, or a
    function of the bad value for a fix that quotes it)."""

    constraints: tuple[Constraint | None, ...]
    fix: str | Callable[[object], str] = ""

    def __init__(self, *constraints: Constraint | None, fix: str | Callable[[object], str] = ""):
        object.__setattr__(self, "constraints", constraints)
        object.__setattr__(self, "fix", fix)


def check_value(name: str, value: object, allowed: Allowed, *, owner: str = "") -> Any:
    """Return ``value`` (normalised: an ``Interval`` gives an int or a float) after checking it
    against ``allowed``.

    Args:
        name: the argument, quoted in the message.
        value: its value.
        allowed: what it may be.
        owner: the class or function it belongs to, opening the message (``"Int"``).

    Raises:
        TransferSearchError: "`name` must be <the rule>, but got name=<value> (<type> when the
            type is wrong).<the fix>".
    """
    for constraint in allowed.constraints:
        if constraint is None:
            if value is None:
                return None
        elif constraint.holds(value):
            return constraint.normalised(value)
    real = [c for c in allowed.constraints if c is not None]
    rule = " or ".join(
        ["None"] * (len(real) < len(allowed.constraints)) + [c.describe() for c in real]
    )
    typed = [c for c in real if c.typed(value)]
    shown = typed[0].shown(value) if typed else f"{value!r:.80} ({type(value).__name__})"
    fix = allowed.fix(value) if callable(allowed.fix) else allowed.fix
    opening = f"{owner} `{name}`" if owner else f"`{name}`"
    raise TransferSearchError(
        f"{opening} must be {rule}, but got {name}={shown}.{f' {fix}' if fix else ''}"
    )


def check_table(table: Mapping[str, Allowed], values: object, *, owner: str = "") -> dict[str, Any]:
    """Check each argument ``table`` names (read from ``values``, a mapping or an object's
    attributes), in the table's order; return them normalised.

    Raises:
        TransferSearchError: the first argument that breaks its entry (see :func:`check_value`).
    """
    read = values.__getitem__ if isinstance(values, Mapping) else lambda n: getattr(values, n)
    return {
        name: check_value(name, read(name), entry, owner=owner) for name, entry in table.items()
    }


def check_positive(name: str, value: object, *, fix: str = "") -> float:
    """Return ``value`` as a float after checking that it is a finite number > 0.

    Raises:
        TransferSearchError: the value is not a real number, is NaN, infinite, zero or negative.
    """
    # The common case, a plain float in (0, inf), is what POSITIVE accepts and returns unchanged;
    # anything else (NaN fails both comparisons) takes the full check and its message.
    if type(value) is float and 0.0 < value < math.inf:
        return value
    number: float = check_value(name, value, Allowed(POSITIVE, fix=fix))
    return number


def check_bool(name: str, value: object, *, fix: str = "") -> bool:
    """Return ``value`` after checking that it is a ``bool`` (``'no'`` or ``1`` are refused).

    Raises:
        TransferSearchError: the value is not a bool.
    """
    flag: bool = check_value(name, value, Allowed(Boolean(), fix=fix))
    return flag


def check_int(name: str, value: object, *, minimum: int, fix: str = "") -> int:
    """Return ``value`` after checking that it is an ``int`` (not a bool) >= ``minimum``.

    Raises:
        TransferSearchError: the value is not an int (``2.5``, ``'3'``, ``True``) or is too small.
    """
    number: int = check_value(name, value, Allowed(Interval(Integral, minimum), fix=fix))
    return number


#: A finite number > 0: a learning rate, a scale, a cost.
POSITIVE = Interval(Real, 0, None, closed="neither")


def options_from(
    cls: type[_Options],
    options: _Options | None,
    keywords: Mapping[str, Any],
    *,
    unknown: str,
    fix: str,
) -> _Options:
    """Options of the dataclass ``cls`` from a public function's ``options=`` and its keywords:
    ``options`` (default: the defaults) with the keywords replacing its fields.

    Args:
        cls: the options' dataclass (``FitOptions``, ``PlannerOptions``).
        options: the caller's options object, or None.
        keywords: the caller's keywords, each a field of ``cls``.
        unknown: the message's opening for an unknown keyword (see :func:`check_keywords`).
        fix: the end of the message when ``options`` is not a ``cls``.

    Raises:
        TransferSearchError: an unknown keyword (naming the closest field), ``options`` of
            another type, or a value ``cls`` refuses.
    """
    known = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    check_keywords(keywords, known, unknown=unknown)
    if options is None:
        return cls(**keywords)
    if not isinstance(options, cls):
        raise TransferSearchError(
            f"`options` must be a {cls.__name__}, but got {options!r:.80}. {fix}"
        )
    return dataclasses.replace(options, **keywords) if keywords else options  # type: ignore[type-var]


def shown_positions(positions: Sequence[int]) -> str:
    """``"3, 4, 7"`` or ``"3, 4, 7, 8, 9 and 12 more"``: the first few offending positions, for an
    error message."""
    shown = ", ".join(str(p) for p in positions[:SHOWN_POSITIONS])
    rest = len(positions) - SHOWN_POSITIONS
    return f"{shown} and {rest} more" if rest > 0 else shown


def check_keywords(given: Iterable[str], known: Sequence[str], *, unknown: str) -> None:
    """Refuse a keyword that is not in ``known``, naming the closest known one (difflib).

    Args:
        given: the keywords passed.
        known: the accepted names, in the order the message lists them.
        unknown: the message's opening for a bad ``name``, with ``{name!r}`` to fill in, e.g.
            ``"the planner has no option {name!r}"``.

    Raises:
        TransferSearchError: a keyword of ``given`` is not in ``known``.
    """
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            also = f" Did you mean {close[0]!r}?" if close else ""
            raise TransferSearchError(
                f"{unknown.format(name=name)}.{also} The options are: {', '.join(known)}."
            )

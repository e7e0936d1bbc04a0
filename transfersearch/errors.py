"""The one error family of transfersearch."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence
from numbers import Integral, Real

__all__ = [
    "TransferSearchError",
    "TransferSearchWarning",
    "check_bool",
    "check_int",
    "check_keywords",
    "check_positive",
    "shown_positions",
]

#: How many offending rows or trials an error message lists before "and N more": enough to find
#: the pattern (a whole rung, every n-th row), short enough to stay one readable line.
SHOWN_POSITIONS = 5


class TransferSearchError(ValueError):
    """Bad input to transfersearch: the message names the field, the bad value and the fix."""


class TransferSearchWarning(UserWarning):
    """A result was produced, but something about it deserves the user's attention."""


def check_positive(name: str, value: object, *, fix: str = "") -> float:
    """Return ``value`` as a float after checking that it is a finite number > 0.

    Args:
        name: the field the value belongs to, quoted in the error.
        value: the value to check.
        fix: an optional hint appended to the message.

    Raises:
        TransferSearchError: the value is not a real number, is NaN, infinite, zero or negative.
    """
    hint = f" {fix}" if fix else ""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TransferSearchError(
            f"`{name}` must be a positive finite number, but got {value!r} "
            f"({type(value).__name__}).{hint}"
        )
    number = float(value)
    if not math.isfinite(number) or number <= 0.0:
        raise TransferSearchError(
            f"`{name}` must be a positive finite number, but got {name}={number!r}.{hint}"
        )
    return number


def check_bool(name: str, value: object, *, fix: str = "") -> bool:
    """Return ``value`` after checking that it is a ``bool`` (``'no'`` or ``1`` are refused).

    A truthy string such as ``'no'`` would silently mean True; so only ``True``/``False`` pass.

    Raises:
        TransferSearchError: the value is not a bool.
    """
    if not isinstance(value, bool):
        hint = f" {fix}" if fix else ""
        raise TransferSearchError(
            f"`{name}` must be True or False, but got {name}={value!r} ({type(value).__name__})."
            f"{hint}"
        )
    return value


def check_int(name: str, value: object, *, minimum: int, fix: str = "") -> int:
    """Return ``value`` after checking that it is an ``int`` (not a bool) >= ``minimum``.

    Raises:
        TransferSearchError: the value is not an int (``2.5``, ``'3'``, ``True``) or is too small.
    """
    hint = f" {fix}" if fix else ""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TransferSearchError(
            f"`{name}` must be an int >= {minimum}, but got {name}={value!r} "
            f"({type(value).__name__}).{hint}"
        )
    if value < minimum:
        raise TransferSearchError(f"`{name}` must be >= {minimum}, but got {name}={value!r}.{hint}")
    return int(value)


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

"""The one error family of transfersearch."""

from __future__ import annotations

import math
from numbers import Real

__all__ = ["TransferSearchError", "TransferSearchWarning", "check_positive"]


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

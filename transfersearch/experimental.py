"""Marking experimental APIs the way Optuna does (``optuna._experimental``).

An experimental function or class works and is tested, but its interface may change in a minor
release without a deprecation period. Its docstring says so, and its first use in a process warns
with :class:`ExperimentalWarning` (filter it with
``warnings.filterwarnings("ignore", category=ts.experimental.ExperimentalWarning)``).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from transfersearch.errors import TransferSearchWarning

__all__ = ["ExperimentalWarning", "experimental"]

F = TypeVar("F", bound=Callable[..., Any])


class ExperimentalWarning(TransferSearchWarning):
    """Using an API whose interface may change in a minor release."""


def experimental(version: str) -> Callable[[F], F]:
    """Mark a function as experimental since ``version``: a note in its docstring, and an
    :class:`ExperimentalWarning` on its first call.

    Args:
        version: the transfersearch version that added it, e.g. ``"0.1.0"``.
    """

    def decorate(func: F) -> F:
        name = f"{func.__module__}.{func.__qualname__}"
        note = (
            f"\n\n    .. note::\n        Added in v{version} as an experimental feature. The interface "
            "may change in newer versions without prior notice.\n"
        )
        warned = False

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal warned
            if not warned:
                warned = True
                warnings.warn(
                    f"{name} is experimental (added in v{version}); its interface may change "
                    "in a minor release.",
                    ExperimentalWarning,
                    stacklevel=2,
                )
            return func(*args, **kwargs)

        wrapper.__doc__ = (func.__doc__ or "").rstrip() + note
        return wrapper  # type: ignore[return-value]

    return decorate

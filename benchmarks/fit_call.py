"""Call ``transfersearch.extrapolate`` the same way on today's engine and on its rewrite (issue 25).

The benchmarks pass options a user would (``seed``, ``model``, ``cost``); the rewrite may
drop some (the bootstrap, the model selection). :func:`accepted` keeps the keywords the installed
engine declares and names the ones it dropped, so one command re-runs every table on either engine,
and the table says what was left out. :func:`readout` reads a result field that may be gone.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from collections.abc import Mapping
from typing import Any

import transfersearch as ts

logger = logging.getLogger(__name__)


def declared_keywords() -> set[str] | None:
    """The keyword names ``extrapolate(**keywords)`` declares, or None when they cannot be read."""
    names = {field.name for field in dataclasses.fields(ts.FitOptions)}
    try:
        hints = typing.get_type_hints(ts.extrapolate, include_extras=True)
        (typed,) = typing.get_args(hints["keywords"])  # Unpack[FitKeywords]
        names |= set(typing.get_type_hints(typed))
    except (KeyError, TypeError, ValueError, NameError) as exc:
        logger.info("extrapolate's keywords not readable (%s): passing them all", exc)
        return None
    return names


def accepted(keywords: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the keywords the installed ``extrapolate`` declares, the names of those it does not)."""
    declared = declared_keywords()
    if declared is None:
        return dict(keywords), []
    kept = {k: v for k, v in keywords.items() if k in declared}
    return kept, [k for k in keywords if k not in declared]


def readout(result: Any, name: str, default: Any = "–") -> Any:
    """``result.<name>``, or ``default`` where the engine's result has no such field."""
    return getattr(result, name, default)


def dropped_note(keywords: Mapping[str, Any]) -> str:
    """A table's line naming the options the installed engine did not declare ("" if none)."""
    _, dropped = accepted(keywords)
    if not dropped:
        return ""
    return f"Options left out (the installed `extrapolate` does not declare them): {dropped}."

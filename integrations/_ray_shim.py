"""Every private Ray name transfersearch touches, in one module (one comment per use).

A new Ray version that renames one of these breaks here and nowhere else.
"""

from __future__ import annotations

from typing import Any

__all__ = ["experiment_analysis"]


def experiment_analysis(grid: Any) -> Any | None:
    """The ``ExperimentAnalysis`` behind a ``ResultGrid`` (None where the grid has none).

    A ``Result`` of a trial that raised before reporting has no config; the analysis keeps every
    trial's config, so the reader goes through it.
    """
    return getattr(grid, "_experiment_analysis", None)  # ResultGrid._experiment_analysis

"""Experimental APIs are marked as Optuna marks them: a docstring note and one warning per process."""

from __future__ import annotations

import warnings

import pytest

from transfersearch.experimental import ExperimentalWarning, experimental


def test_an_experimental_function_says_so_once_and_in_its_docstring() -> None:
    @experimental("0.1.0")
    def double(x: int) -> int:
        """Twice ``x``."""
        return 2 * x

    with pytest.warns(ExperimentalWarning, match="experimental"):
        assert double(2) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert double(3) == 6  # the second call is quiet
    assert (
        double.__doc__ is not None
        and "Added in v0.1.0 as an experimental feature" in double.__doc__
    )
    assert double.__name__ == "double"


def test_the_launcher_and_the_coord_check_are_marked() -> None:
    pytest.importorskip("optuna")
    pytest.importorskip("torch")
    from transfersearch.integrations.optuna import launch_workers
    from transfersearch.integrations.torch import coord_check

    for func in (launch_workers, coord_check):
        assert "experimental feature" in (func.__doc__ or "")

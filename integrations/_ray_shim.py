"""Every private Ray name transfersearch touches, in one module (one comment per use).

A new Ray version that renames one of these breaks here and nowhere else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["experiment_analysis", "seed_searcher"]


def experiment_analysis(grid: Any) -> Any | None:
    """The ``ExperimentAnalysis`` behind a ``ResultGrid`` (None where the grid has none).

    A ``Result`` of a trial that raised before reporting has no config; the analysis keeps every
    trial's config, so the reader goes through it.
    """
    return getattr(grid, "_experiment_analysis", None)  # ResultGrid._experiment_analysis


def seed_searcher(searcher: Any, seed: int) -> bool:
    """Seed a Ray searcher's random generator; False where it has none this knows of.

    Known: ``OptunaSearch`` (its Optuna sampler, or the seed of the TPE sampler it makes when
    given its search space) and ``HyperOptSearch`` (its ``rstate``).
    """
    if _is_optuna_search(searcher):
        # OptunaSearch._ot_study: the study made once it has a space; OptunaSearch._sampler: the
        # sampler the user gave; OptunaSearch._seed: the seed of the TPESampler it makes itself.
        study = getattr(searcher, "_ot_study", None)
        sampler = study.sampler if study is not None else getattr(searcher, "_sampler", None)
        if sampler is not None:
            from transfersearch.integrations._optuna_shim import seed_sampler

            return bool(seed_sampler(sampler, seed))
        searcher._seed = seed
        return True
    state = getattr(searcher, "rstate", None)  # HyperOptSearch.rstate, a public attribute
    if isinstance(state, np.random.RandomState):
        state.seed(seed)
        return True
    return False


def _is_optuna_search(searcher: Any) -> bool:
    try:
        from ray.tune.search.optuna import OptunaSearch
    except ImportError:  # Optuna is not installed: nothing is an OptunaSearch
        return False
    return isinstance(searcher, OptunaSearch)

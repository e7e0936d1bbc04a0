"""Temporary public path: read a source, call the engine, warn. Goes when transfersearch/api.py
(the public boundary) lands."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from transfersearch.fitting.coords import Direction
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.engine import (
    VALIDATE_BOOTSTRAP,
    fit_sweep,
    infer_params,
    validate_sweep,
)
from transfersearch.fitting.models import DEFAULT_MODELS, LawModel
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.result import Extrapolation, Validation
from transfersearch.fitting.rungs import Exponents
from transfersearch.observations import TransferSearchWarning
from transfersearch.scale import Scale
from transfersearch.stored_space import stored_space
from transfersearch.sweep import Sweep

__all__ = ["extrapolate", "infer_params", "validate"]


def _report(diagnostics: Sequence[Diagnostic]) -> None:
    for note in diagnostics:
        if note.act:
            warnings.warn(note.message, TransferSearchWarning, stacklevel=3)


def _sweep(
    source: Any,
    params: Sequence[str] | None,
    scale_columns: Sequence[str] | None,
    value_column: str,
    direction: Direction,
    cost: Callable[[Scale], float] | None,
) -> Sweep:
    try:  # the readers move to transfersearch.readers
        from transfersearch.readers import as_observations
    except ImportError:
        from transfersearch.observations import as_observations  # type: ignore[attr-defined,no-redef,unused-ignore]
    obs = as_observations(
        source, params=params, scale_columns=scale_columns, value_column=value_column
    )
    return Sweep(tuple(obs), stored_space(source), direction, cost)


def extrapolate(
    observations: Any,
    *,
    target: Scale | Mapping[str, float],
    params: Sequence[str] | None = None,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    scale_variables: Sequence[str] | None = None,
    fixed_exponents: Exponents | None = None,
    prior_exponents: Exponents | None = None,
    model: str = "auto",
    n_bootstrap: int = 200,
    seed: int | None = 0,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    cost: Callable[[Scale], float] | None = None,
    models: Sequence[LawModel] = DEFAULT_MODELS,
) -> Extrapolation:
    """Predict the optimal ``params`` at ``target`` from proxy trials (see
    :func:`transfersearch.fitting.engine.fit_sweep`)."""
    options = FitOptions.from_kwargs(
        params=params,
        log_params=log_params,
        scale_variables=scale_variables,
        fixed_exponents=fixed_exponents,
        prior_exponents=prior_exponents,
        model=model,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    sweep = _sweep(observations, params, scale_columns, value_column, direction, cost)
    result = fit_sweep(sweep, target, options, models)
    _report(result.diagnostics)
    return result


def validate(
    observations: Any,
    *,
    params: Sequence[str] | None = None,
    held_out: Scale | Mapping[str, float] | None = None,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    scale_variables: Sequence[str] | None = None,
    fixed_exponents: Exponents | None = None,
    prior_exponents: Exponents | None = None,
    model: str = "auto",
    n_bootstrap: int = VALIDATE_BOOTSTRAP,
    seed: int | None = 0,
    scale_columns: Sequence[str] | None = None,
    value_column: str = "value",
    cost: Callable[[Scale], float] | None = None,
    models: Sequence[LawModel] = DEFAULT_MODELS,
) -> Validation:
    """Hold the costliest rung out and predict it from the rest (see
    :func:`transfersearch.fitting.engine.validate_sweep`)."""
    options = FitOptions.from_kwargs(
        params=params,
        log_params=log_params,
        scale_variables=scale_variables,
        fixed_exponents=fixed_exponents,
        prior_exponents=prior_exponents,
        model=model,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    sweep = _sweep(observations, params, scale_columns, value_column, direction, cost)
    result = validate_sweep(sweep, options, held_out, models)
    _report(result.extrapolation.diagnostics)
    return replace(result)

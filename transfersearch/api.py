"""The public functions: read any source at the boundary, fit with the pure engine, report.

:func:`extrapolate` and :func:`validate` read their source with
:func:`~transfersearch.readers.read_sweep`, build :class:`~transfersearch.fitting.options.FitOptions`
from the same keywords (:class:`FitKeywords`, written once), call the engine
(:mod:`transfersearch.fitting.engine`), and report its diagnostics: one
:class:`~transfersearch.errors.TransferSearchWarning` at the caller's line for each record the user
must act on, a log line for the rest.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from transfersearch.errors import TransferSearchWarning
from transfersearch.fitting.coords import check_direction
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.engine import fit_sweep, validate_sweep
from transfersearch.fitting.onemodel import rung_optimum
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.options import FitOptions
from transfersearch.fitting.result import Extrapolation, Validation
from transfersearch.readers import as_observations, read_sweep
from transfersearch.scale import Scale
from transfersearch.sweep import Direction, Sweep

__all__ = [
    "READ_KEYWORDS",
    "FitKeywords",
    "estimate_optimum",
    "extrapolate",
    "report_diagnostics",
    "validate",
]

logger = logging.getLogger(__name__)

#: The keywords that choose how the source is read (:func:`~transfersearch.readers.read_sweep`'s);
#: the others of :class:`FitKeywords` are the fields of
#: :class:`~transfersearch.fitting.options.FitOptions` (``tests/test_api.py`` checks both).
READ_KEYWORDS = ("params", "scale_columns", "value_column", "direction", "cost")
#: The read keywords that are fit options too: ``params`` chooses a DataFrame's columns and what
#: is fitted.
_SHARED = tuple(n for n in READ_KEYWORDS if n in {f.name for f in dataclasses.fields(FitOptions)})


class FitKeywords(TypedDict, total=False):
    """The keywords :func:`extrapolate` and :func:`validate` share.

    ``params``, ``log_params``, ``scale_variables``, ``fixed_exponents``, ``prior_exponents``,
    ``model``, ``divergence_cost``, ``diverged_beyond``, ``seed`` and the deprecated
    ``n_bootstrap`` are the fields of
    :class:`~transfersearch.fitting.options.FitOptions` (documented there); ``params`` also
    chooses a DataFrame's parameter columns. The others say how the source is read
    (:func:`~transfersearch.readers.read_sweep`).

    Attributes:
        direction: ``"minimize"`` or ``"maximize"`` the value (default: what the source says, an
            Optuna study its direction; else ``"minimize"``).
        scale_columns: DataFrame only: plain columns holding scale variables.
        value_column: DataFrame only: the metric column (default ``"value"``).
        cost: relative cost of a scale, which orders the rungs for walk-forward validation
            (default :func:`transfersearch.cost.default_cost`; a planner passes its ladder's).
    """

    params: Sequence[str] | None
    direction: Direction | None
    log_params: Iterable[str] | None
    scale_variables: Sequence[str] | None
    fixed_exponents: Mapping[str, Mapping[str, float]] | None
    prior_exponents: Mapping[str, Mapping[str, float]] | None
    model: str
    divergence_cost: float | None
    diverged_beyond: float | None
    seed: int | None
    n_bootstrap: int | None
    scale_columns: Sequence[str] | None
    value_column: str
    cost: Callable[[Scale], float] | None


def report_diagnostics(diagnostics: Iterable[Diagnostic], stacklevel: int = 1) -> None:
    """Warn once for each record the user must act on; log the others.

    Args:
        diagnostics: the engine's records (``Extrapolation.diagnostics``).
        stacklevel: whose line the warnings point at, counted as :func:`warnings.warn` counts
            from the caller of this function: 1 that caller, 2 its caller (the user's line when
            a public function calls this).
    """
    for record in diagnostics:
        if record.act:
            warnings.warn(record.message, TransferSearchWarning, stacklevel=stacklevel + 1)
        else:
            logger.info("%s", record.message)


def _boundary(
    source: Any, keywords: FitKeywords, options: FitOptions | None
) -> tuple[Sweep, FitOptions]:
    """The sweep read from ``source`` and the fit's options: the one place where the keywords
    both public functions share are split into read keywords and fit options and merged with
    ``options`` (checked first, as the source may be slow to read)."""
    given: dict[str, Any] = dict(keywords)
    read = {name: given.pop(name) for name in READ_KEYWORDS if name in given}
    fit = {name: read[name] for name in _SHARED if name in read}
    checked = FitOptions.from_kwargs(options, **fit, **given)
    read.setdefault("params", checked.params)
    return read_sweep(source, **read), checked


def extrapolate(
    source: Any,
    *,
    target: Scale | Mapping[str, float],
    options: FitOptions | None = None,
    **keywords: Unpack[FitKeywords],
) -> Extrapolation:
    """Predict the optimal ``params`` at ``target`` from proxy trials over a ladder of scales.

    The method is the engine's, :func:`~transfersearch.fitting.engine.fit_sweep` (docs/science.md
    §7–9): this function reads the source, builds the options once and reports the diagnostics.

    Args:
        source: a :class:`~transfersearch.sweep.Sweep`, a list of
            :class:`~transfersearch.observations.Observation`, a pandas DataFrame (``scale.*`` /
            ``params.*`` / ``value`` columns, or ``scale_columns=`` and plain parameter columns),
            an Optuna Study, or a Ray Tune ResultGrid or experiment directory
            (:func:`~transfersearch.readers.read_sweep`).
        target: the scale to predict for. A scale variable it leaves out that never varied over
            the ladder (``batch_size=64`` on every rung) keeps the ladder's value
            (``target_from_ladder`` on the result says which); every other variable the laws use
            must be given.
        options: the fit's options as one :class:`~transfersearch.fitting.options.FitOptions`
            (the keywords below, when given too, replace its fields).
        **keywords: the options of :class:`FitKeywords` (``params``, ``direction``,
            ``log_params``, ``scale_variables``, ``fixed_exponents``, ``prior_exponents``,
            ``model``, ``divergence_cost``, ``seed`` = 0, ``scale_columns``, ``value_column``,
            ``cost``).

    Returns:
        An :class:`~transfersearch.fitting.result.Extrapolation`; its ``diagnostics`` hold what
        the fit found worth saying (those the user must act on are also warned, at the caller's
        line, as :class:`~transfersearch.errors.TransferSearchWarning`).

    Raises:
        TransferSearchError: fewer than two scales, a missing parameter, a non-positive value on a
            log coordinate, a target missing a scale variable the laws need, a bad or unknown
            option (the message names the close match).
    """
    sweep, checked = _boundary(source, keywords, options)
    result = fit_sweep(sweep, target, checked)
    report_diagnostics(result.diagnostics, stacklevel=2)
    return result


def validate(
    source: Any,
    *,
    held_out: Scale | Mapping[str, float] | None = None,
    options: FitOptions | None = None,
    **keywords: Unpack[FitKeywords],
) -> Validation:
    """Hold the costliest rung out, predict it from the rest, and charge the regret there.

    The same model as :func:`extrapolate`; the held-out rung's optimum and valley are read off
    the model fitted to every rung, and the regret is the prediction's excess on it, in the
    metric's units.

    Args:
        source: as for :func:`extrapolate`; needs three or more scales.
        held_out: the scale to hold out (default: the costliest by ``cost``, the order of
            :func:`transfersearch.cost.by_cost`).
        options: as for :func:`extrapolate`.
        **keywords: as for :func:`extrapolate` (:class:`FitKeywords`).

    Returns:
        A :class:`~transfersearch.fitting.result.Validation`.

    Raises:
        TransferSearchError: fewer than three scales, ``held_out`` is not a proxy scale, or any
            error :func:`extrapolate` raises.
    """
    sweep, checked = _boundary(source, keywords, options)
    result = validate_sweep(sweep, checked, held_out=held_out)
    report_diagnostics(result.extrapolation.diagnostics, stacklevel=2)
    return result


def estimate_optimum(
    observations: Any,
    params: Sequence[str],
    *,
    direction: Direction = "minimize",
    log_params: Iterable[str] | None = None,
    warn: bool = True,
) -> ScaleOptimum:
    """Estimate the optimum of the trials at one scale: the one model (docs/science.md §7) on a
    single rung — a quadratic valley whose misfit grows with the excess it predicts, near-optimal
    trials weighing most, its centre held near the trials by the box prior.

    Args:
        observations: trials at a single scale (any source
            :func:`~transfersearch.readers.read_sweep` reads).
        params: the swept parameters to locate jointly.
        direction: ``"minimize"`` (default) or ``"maximize"`` the value.
        log_params: names fitted in log space (default: every all-positive parameter).
        warn: warn (TransferSearchWarning) for what the user must act on (an optimum past the
            trials' edge is only logged).

    Returns:
        A :class:`~transfersearch.fitting.optimum.ScaleOptimum`.

    Raises:
        TransferSearchError: no observations, more than one scale, an empty or unknown ``params``,
            a trial lacks a parameter, a non-positive value on a log coordinate, or every trial
            diverged.
    """
    check_direction(direction)
    obs = as_observations(observations, params=params)
    optimum, diagnostics = rung_optimum(obs, params, direction=direction, log_params=log_params)
    if warn:
        report_diagnostics(diagnostics, stacklevel=2)
    else:
        for record in diagnostics:
            logger.info("%s", record.message)
    return optimum

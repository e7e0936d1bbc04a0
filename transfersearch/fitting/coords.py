"""Fitted coordinates: which parameters are log, trials as arrays, checks shared by every fit.

A parameter is fitted as ``log(p)`` when it is a log quantity (learning rate, weight decay, τ,
batch size: every all-positive parameter by default) and as ``p`` otherwise. Values are turned to
the minimisation sign, diverged trials (NaN, inf, failed) to NaN; pruned trials are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from operator import itemgetter

import numpy as np
from numpy.typing import NDArray

from transfersearch.errors import Allowed, Interval, TransferSearchError, check_value
from transfersearch.observations import Observation
from transfersearch.scale import Scale

__all__ = [
    "FloatArray",
    "check_direction",
    "check_fixed_exponents",
    "check_params",
    "common_variables",
    "covariance_factor",
    "gaussian_draws",
    "natural_params",
    "observation_arrays",
    "resolve_log_params",
    "to_fitted",
    "to_natural",
]

FloatArray = NDArray[np.float64]


def to_natural(value: float, log_space: bool) -> float:
    """One fitted coordinate back in the parameter's own units: ``exp(c)`` on a log coordinate
    (docs/notation.md), ``c`` itself otherwise."""
    return math.exp(value) if log_space else float(value)


def to_fitted(value: float, log_space: bool) -> float:
    """One natural value in fitted coordinates: ``log(p)`` on a log coordinate, ``p`` otherwise.

    Raises:
        TransferSearchError: a log coordinate's value is not positive.
    """
    if not log_space:
        return float(value)
    if not value > 0:
        raise TransferSearchError(
            f"a log-fitted parameter must be positive, but got {value!r}. Fit it on a linear "
            "axis (leave it out of log_params) or drop the non-positive trials."
        )
    return math.log(value)


def natural_params(
    names: Sequence[str], coords: Iterable[float], log_params: Iterable[str]
) -> dict[str, float]:
    """``{name: to_natural(c)}`` for a point given in fitted coordinates, in ``names`` order."""
    logs = frozenset(log_params)
    return {n: to_natural(float(c), n in logs) for n, c in zip(names, coords, strict=True)}


def resolve_log_params(
    observations: Sequence[Observation],
    params: Sequence[str],
    log_params: Iterable[str] | None,
) -> tuple[str, ...]:
    """Which parameters are fitted in log space.

    Default: every parameter whose observed values are all > 0 (lr, weight decay, τ and batch size
    are log quantities). ``log_params`` overrides: exactly those names are log.

    Raises:
        TransferSearchError: ``log_params`` names an unknown parameter, or a log parameter has a
            non-positive value.
    """
    if log_params is None:
        return tuple(
            p for p in params if all(o.params[p] > 0.0 for o in observations if p in o.params)
        )
    chosen = tuple(log_params) if not isinstance(log_params, str) else (log_params,)
    unknown = [p for p in chosen if p not in params]
    if unknown:
        raise TransferSearchError(
            f"log_params names {unknown}, which are not in params={list(params)}. "
            "List only fitted parameters."
        )
    for p in chosen:
        for obs in observations:
            value = obs.params.get(p)
            if value is not None and value <= 0.0:
                raise TransferSearchError(
                    f"`{p}` is a log coordinate, but a trial at {obs.scale!r} has {p}={value!r} "
                    "<= 0. Fix the trial, or fit it linearly: leave it out of log_params."
                )
    return chosen


def check_direction(direction: str) -> float:
    if direction == "minimize":
        return 1.0
    if direction == "maximize":
        return -1.0
    raise TransferSearchError(
        f"`direction` must be 'minimize' or 'maximize', but got direction={direction!r}."
    )


def observation_arrays(
    observations: Sequence[Observation],
    params: Sequence[str],
    log_params: Sequence[str],
    sign: float,
) -> tuple[FloatArray, FloatArray]:
    """Fitted coordinates (n, d) and minimisation-sign values (NaN for diverged); pruned dropped."""
    rows = [o for o in observations if o.state != "pruned"]
    spec = [(name, name in log_params) for name in params]
    fetch = itemgetter(*params) if params else (lambda _: ())
    try:
        table = [fetch(obs.params) for obs in rows]
    except KeyError:
        obs, name = next((o, n) for o in rows for n in params if n not in o.params)
        raise TransferSearchError(
            f"a trial at {obs.scale!r} lacks parameter {name!r} (it has "
            f"{sorted(obs.params)}). Record every swept parameter, or drop {name!r} from "
            "params."
        ) from None
    coords = np.array(table, dtype=float).reshape(len(rows), len(params))
    for j, (_, log_space) in enumerate(spec):
        if log_space:
            column = coords[:, j]
            bad = ~(column > 0)
            if bad.any():  # to_fitted names the first value ≤ 0 in its error
                to_fitted(float(column[bad][0]), True)
            coords[:, j] = np.log(column)
    raw = np.fromiter((o.value for o in rows), dtype=float, count=len(rows))
    complete = np.fromiter((o.state == "complete" for o in rows), dtype=bool, count=len(rows))
    values = np.where(complete & np.isfinite(raw), sign * raw, math.nan)  # Observation.usable
    return coords, values


def check_params(params: Sequence[str]) -> tuple[str, ...]:
    if isinstance(params, str):
        raise TransferSearchError(
            f"`params` must be a list of names, but got the string {params!r}. "
            f"Write params=[{params!r}]."
        )
    names = tuple(params)
    if not names:
        raise TransferSearchError(
            "`params` is empty. Name the swept parameters to fit, e.g. params=['lr']."
        )
    bad = [p for p in names if not isinstance(p, str) or not p]
    if bad or len(set(names)) != len(names):
        raise TransferSearchError(
            f"`params` must be distinct non-empty names, but got {list(names)}."
        )
    return names


def common_variables(
    scales: Sequence[Scale], requested: Sequence[str] | None, *, purpose: str
) -> list[str]:
    if requested is not None:
        if isinstance(requested, str):
            raise TransferSearchError(
                f"`scale_variables` must be a list of names, but got the string {requested!r}. "
                f"Write scale_variables=[{requested!r}]."
            )
        for scale in scales:
            scale.require(*requested, purpose=purpose)
        return list(dict.fromkeys(requested))
    common = set(scales[0])
    for scale in scales[1:]:
        common &= set(scale)
    return sorted(common)


#: What an exponent held fixed may be.
EXPONENT = Allowed(Interval(Real), fix="E.g. 0.0 (no drift with that scale variable).")


def check_fixed_exponents(
    param: str,
    fixed: Mapping[str, float],
    variables: Sequence[str],
    label: str = "fixed_exponents",
) -> dict[str, float]:
    """Validate one parameter's exponents (``label``: the option they came in, named in the
    error): known scale variables, finite numbers.

    Raises:
        TransferSearchError: an unknown scale variable or a non-finite exponent.
    """
    checked: dict[str, float] = {}
    for name, value in fixed.items():
        if name not in variables:
            raise TransferSearchError(
                f"{label}[{param!r}] names scale variable {name!r}, which not every "
                f"trial's scale has (common variables: {list(variables)}). Fix the name or add "
                "it to every Scale."
            )
        checked[name] = check_value(f"{label}[{param!r}][{name!r}]", value, EXPONENT)
    return checked


def covariance_factor(cov: FloatArray) -> FloatArray | None:
    """The lower Cholesky factor of ``cov`` (symmetrised), None where round-off leaves it not
    positive definite."""
    try:
        return np.asarray(np.linalg.cholesky(0.5 * (cov + cov.T)))
    except np.linalg.LinAlgError:
        return None


def gaussian_draws(
    mean: FloatArray,
    cov: FloatArray,
    n: int,
    rng: np.random.Generator,
    factor: FloatArray | None = None,
) -> FloatArray:
    """``n`` draws of ``N(mean, cov)`` through the Cholesky factor (``factor`` when the caller
    keeps it, :func:`covariance_factor`), which moves only by round-off when ``cov`` does (an
    eigendecomposition's vectors rotate freely between near-equal eigenvalues, so the same seed
    gave other draws when the trials' order changed); a covariance round-off leaves not
    positive definite is drawn through its eigenvalues."""
    if factor is None:
        factor = covariance_factor(cov)
    if factor is None:
        return np.asarray(rng.multivariate_normal(mean, cov, size=n, method="eigh"))
    return np.asarray(mean + rng.standard_normal((n, len(mean))) @ factor.T)

"""The options of a fit, typed and checked once: :class:`FitOptions`.

``dataclasses.replace(options, n_bootstrap=0)`` copies with a change (and checks again).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from transfersearch.errors import (
    Allowed,
    Interval,
    Names,
    Options,
    check_table,
    options_from,
)

__all__ = ["DEPRECATED", "MODELS", "OPTIONS", "FitOptions"]


@dataclass(frozen=True)
class FitOptions:
    """How :func:`~transfersearch.fitting.fit_sweep` fits (the sweep itself carries the direction
    and the cost order).

    Attributes:
        params: the swept parameters to predict, jointly (None: every parameter all complete
            trials record).
        log_params: parameters fitted in log space (None: every all-positive parameter; a single
            name is one parameter).
        scale_variables: scale names the laws may use (None: those all proxies share).
        fixed_exponents: exponents held exactly, per parameter, e.g.
            ``{"lr": {"dataset_size": 0.0}}``.
        prior_exponents: theory's exponents per parameter, the centre of the ``"prior"`` and
            ``"shrunk"`` models (0 for any not given: no drift).
        model: ``"auto"`` (the drift prior's scale integrated over, no drift nested in it) or
            ``"constant"`` (no drift: the prior's exponents held exactly, 0 unless
            ``prior_exponents`` gives them).
        divergence_cost: the loss charged to a run that diverges, in the metric's units (None:
            the sweep's worst excess — the largest amount by which a finished trial exceeded its
            rung's best; a diverged run is at least that bad).
        diverged_beyond: a finite value past this, on the metric's worse side (above it when
            minimising, below when maximising), counts as a diverged run, as NaN does: a loss
            that blew up without reaching NaN (Marin's tables: above ~6 nats). None: NaN and ±inf
            do, and so do a rung's worst values where they lie an order of magnitude past the
            rest (runs that blew up: read as diverged, with a warning naming them;
            docs/science.md §8). ``math.inf`` (either sign): every finite value is fitted.
        seed: seed of the posterior draws (None: a fresh draw each call).
        n_bootstrap: deprecated since 0.4 and ignored: the interval is the posterior
            predictive, calibrated walk-forward (docs/science.md §7.5); giving it warns.

    Raises:
        TransferSearchError: a value :data:`OPTIONS` refuses (``model`` not one of
            :data:`MODELS`, ``seed`` or ``n_bootstrap`` not a non-negative integer, ``params`` or
            ``scale_variables`` a single string); the message names the value and the fix.
    """

    params: tuple[str, ...] | None = None
    log_params: tuple[str, ...] | None = None
    scale_variables: tuple[str, ...] | None = None
    fixed_exponents: Mapping[str, Mapping[str, float]] | None = None
    prior_exponents: Mapping[str, Mapping[str, float]] | None = None
    model: str = "auto"
    divergence_cost: float | None = None
    diverged_beyond: float | None = None
    seed: int | None = 0
    n_bootstrap: int | None = None

    def __post_init__(self) -> None:
        for name in ("params", "log_params", "scale_variables"):
            object.__setattr__(self, name, _as_names(getattr(self, name), one=name == "log_params"))
        for name, value in check_table(OPTIONS, self).items():
            object.__setattr__(self, name, value)
        if self.n_bootstrap is not None:
            check_table(DEPRECATED, self)
            warnings.warn(
                "n_bootstrap is deprecated and ignored since transfersearch 0.4: the interval is "
                "the one model's posterior predictive. Drop the argument.",
                DeprecationWarning,
                stacklevel=3,
            )

    @classmethod
    def from_kwargs(cls, options: FitOptions | None = None, /, **kwargs: Any) -> FitOptions:
        """``options`` (default: the defaults) with ``kwargs`` replacing its fields; an unknown
        keyword is named along with its closest option.

        Raises:
            TransferSearchError: an unknown keyword, ``options`` not a FitOptions, or a bad value
                (see the class).
        """
        return options_from(
            cls,
            options,
            kwargs,
            unknown="unknown fit option {name!r}",
            fix="Pass e.g. FitOptions(seed=1), or the options as keywords: extrapolate(source, "
            "target=..., seed=1).",
        )


#: The values of ``FitOptions.model``.
MODELS = ("auto", "constant")


def _write_list(name: str) -> Callable[[object], str]:
    """The fix for a single string given where a list of names belongs."""
    return lambda value: f"Write {name}=[{value!r}]." if isinstance(value, str) else ""


#: What each option may be (``log_params`` may be one name: it is made a tuple first).
OPTIONS: Mapping[str, Allowed] = {
    "params": Allowed(None, Names(), fix=_write_list("params")),
    "log_params": Allowed(None, Names()),
    "scale_variables": Allowed(None, Names(), fix=_write_list("scale_variables")),
    "model": Allowed(
        Options(*MODELS),
        fix="Write 'auto' (the drift's prior scale integrated over) or 'constant' (no drift), "
        "e.g. model='auto'.",
    ),
    "divergence_cost": Allowed(
        None,
        Interval(Real, 0, None, closed="neither"),
        fix="None charges the sweep's worst excess; a number is a finite loss in the metric's "
        "units (an infinite one makes every run's expected loss infinite: to rule divergence "
        "out, give a large finite cost, e.g. 10 times the worst excess).",
    ),
    "diverged_beyond": Allowed(
        None,
        Interval(Real, None, None, finite=False),
        fix="A number in the metric's units between the converged runs and the blown-up ones, "
        "e.g. diverged_beyond=6.0 for a language model's loss; None: NaN/inf and values far past "
        "the rest of their rung diverge; math.inf: every finite value is fitted.",
    ),
    "seed": Allowed(
        None,
        Interval(Integral, 0),
        fix="E.g. seed=0 (the same draws every call), or None for fresh ones.",
    ),
}
#: The deprecated options, checked only when given.
DEPRECATED: Mapping[str, Allowed] = {
    "n_bootstrap": Allowed(Interval(Integral, 0), fix="Drop it: it is ignored since 0.4."),
}


def _as_names(value: object, *, one: bool) -> object:
    """A list of names as a tuple (a single string too when ``one``); anything else as it is,
    for the table to refuse."""
    if isinstance(value, str):
        return (value,) if one else value
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        return tuple(value)
    return value

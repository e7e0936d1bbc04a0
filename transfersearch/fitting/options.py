"""The options of a fit, typed and checked once: :class:`FitOptions`.

``dataclasses.replace(options, n_bootstrap=0)`` copies with a change (and checks again).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from transfersearch.errors import TransferSearchError, check_keywords
from transfersearch.fitting.coords import check_params

__all__ = ["MODELS", "FitOptions"]


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


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
        seed: seed of the posterior draws (None: a fresh draw each call).
        n_bootstrap: deprecated since 0.4 and ignored: the interval is the posterior
            predictive, calibrated walk-forward (docs/science.md §7.5); giving it warns.

    Raises:
        TransferSearchError: ``model`` is not a string, ``seed`` or ``n_bootstrap`` is not a
            non-negative integer, ``params`` or ``scale_variables`` is a single string.
    """

    params: tuple[str, ...] | None = None
    log_params: tuple[str, ...] | None = None
    scale_variables: tuple[str, ...] | None = None
    fixed_exponents: Mapping[str, Mapping[str, float]] | None = None
    prior_exponents: Mapping[str, Mapping[str, float]] | None = None
    model: str = "auto"
    divergence_cost: float | None = None
    seed: int | None = 0
    n_bootstrap: int | None = None

    def __post_init__(self) -> None:
        _check_model(self.model)
        seed, n_bootstrap = self.seed, self.n_bootstrap
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise TransferSearchError(
                f"`seed` must be None or a non-negative integer, but got seed={seed!r}."
            )
        if n_bootstrap is not None:
            if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 0:
                raise TransferSearchError(
                    f"`n_bootstrap` must be a non-negative integer, but got "
                    f"n_bootstrap={n_bootstrap!r}."
                )
            warnings.warn(
                "n_bootstrap is deprecated and ignored since transfersearch 0.4: the interval is "
                "the one model's posterior predictive. Drop the argument.",
                DeprecationWarning,
                stacklevel=3,
            )
        cost = self.divergence_cost
        if cost is not None and (
            isinstance(cost, bool) or not isinstance(cost, (int, float)) or not cost > 0
        ):
            raise TransferSearchError(
                f"`divergence_cost` must be None (the sweep's worst excess) or a positive number "
                f"in the metric's units, but got divergence_cost={cost!r}."
            )
        if isinstance(self.params, str):
            check_params(self.params)  # raises, naming the fix
        if isinstance(self.scale_variables, str):
            raise TransferSearchError(
                f"`scale_variables` must be a list of names, but got the string "
                f"{self.scale_variables!r}. Write scale_variables=[{self.scale_variables!r}]."
            )
        log_params = self.log_params
        object.__setattr__(self, "params", _names(self.params))
        object.__setattr__(self, "scale_variables", _names(self.scale_variables))
        object.__setattr__(
            self, "log_params", (log_params,) if isinstance(log_params, str) else _names(log_params)
        )

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> FitOptions:
        """``FitOptions(**kwargs)``, with an unknown keyword named along with its closest option.

        Raises:
            TransferSearchError: an unknown keyword, or a bad value (see the class).
        """
        known = [f.name for f in fields(cls)]
        check_keywords(kwargs, known, unknown="unknown fit option {name!r}")
        return cls(**kwargs)


#: The values of ``FitOptions.model``.
MODELS = ("auto", "constant")


def _check_model(model: object) -> None:
    if model not in MODELS:
        raise TransferSearchError(
            f"`model` must be 'auto' (the drift's prior scale integrated over) or 'constant' (no "
            f"drift), but got model={model!r}. Write model='auto'."
        )

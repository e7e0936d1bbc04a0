"""Search spaces over invariant coordinates, and the concrete hyperparameters they map to.

Coordinates (all defined at the space's ``base`` scale, for the *hidden* group):

========================  ===================================================================
``lr``, ``base_lr``       η: the hidden group's learning rate at the base scale (µP's base lr;
                          the rule gives every group's lr at other scales).
``weight_decay``          λ in PyTorch's coupled convention ``w ← (1 − ηλ)w − ηu``.
``independent_wd``        λ' = ηλ, the per-step decay of the independent (Loshchilov–Hutter)
                          convention ``w ← (1 − λ')w − ηu``.
``eta_lambda``            ηλ, Kosson et al.'s invariant of "independent scaling" (Eq. 8).
``tau_iter``              τ_iter = 1/(ηλ) iterations (Wang & Aitchison Eq. 4–6).
``tau_epoch``             τ_epoch = B/(ηλN) = τ_iter/M epochs (Wang & Aitchison Eq. 10).
========================  ===================================================================

Any pair from two different classes — {lr, base_lr}, {weight_decay}, {independent_wd,
eta_lambda, tau_iter, tau_epoch} — determines (η, λ). Optional extra coordinates ``beta1``,
``beta2``, ``eps`` and ``ema_momentum`` replace the space's defaults (then carried by the batch
rule); any other name passes through unchanged into :attr:`Hyperparameters.extra`.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from types import MappingProxyType
from typing import Any, Union

import numpy as np

from transfersearch.errors import (
    TransferSearchError,
    TransferSearchWarning,
    check_bool,
    check_positive,
)
from transfersearch.rules import (
    BLOCK_VECTOR,
    GROUPS,
    AppliedBetaForm,
    BatchRule,
    BatchTransfer,
    MuP,
    Rule,
    check_betas,
    scale_ema_momentum,
)
from transfersearch.scale import KNOWN_SCALE_NAMES, Scale, whole_number

__all__ = [
    "COORDINATES",
    "Choice",
    "Distribution",
    "Float",
    "Hyperparameters",
    "Int",
    "TransferSpace",
    "base_point",
    "coordinate_from_base_point",
    "eta_lambda_from_tau_epoch",
    "tau_epoch_from_eta_lambda",
]

LR_COORDS = ("lr", "base_lr")
WD_COORDS = ("weight_decay",)
PRODUCT_COORDS = ("eta_lambda", "independent_wd", "tau_iter", "tau_epoch")
OPTIMIZER_COORDS = ("beta1", "beta2", "eps", "ema_momentum")
#: Coordinates that are sizes or rates: finite and > 0 (their distributions too).
POSITIVE_COORDS = (*LR_COORDS, *WD_COORDS, *PRODUCT_COORDS, "eps")
#: Coordinates that are EMA weights: in [0, 1) (their distributions too).
UNIT_COORDS = ("beta1", "beta2", "ema_momentum")
#: Every coordinate name with a built-in meaning.
COORDINATES: tuple[str, ...] = LR_COORDS + WD_COORDS + PRODUCT_COORDS + OPTIMIZER_COORDS


# ----------------------------------------------------------------------------------------------
# Distributions
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Float:
    """A real coordinate on [low, high], sampled uniformly or log-uniformly (``log=True``)."""

    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        _check_log(self.log)
        _check_bounds(self.low, self.high, self.log)

    def contains(self, value: object) -> bool:
        return (
            isinstance(value, Real) and _is_number(value) and self.low <= float(value) <= self.high
        )

    def sample(self, rng: np.random.Generator) -> float:
        if self.log:
            return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        return float(rng.uniform(self.low, self.high))

    def snap(self, value: float) -> float:
        """``value`` clipped to [low, high]."""
        return float(min(max(float(value), self.low), self.high))


@dataclass(frozen=True)
class Int:
    """An integer coordinate on [low, high] with ``step``, optionally log-uniform."""

    low: int
    high: int
    log: bool = False
    step: int = 1

    def __post_init__(self) -> None:
        for name in ("low", "high", "step"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TransferSearchError(f"Int `{name}` must be an int, but got {name}={value!r}.")
        if self.step < 1:
            raise TransferSearchError(f"Int `step` must be >= 1, but got step={self.step}.")
        _check_log(self.log)
        if self.log and self.step != 1:
            raise TransferSearchError("Int(log=True) needs step=1 (as in Optuna).")
        _check_bounds(self.low, self.high, self.log)

    def contains(self, value: object) -> bool:
        if not isinstance(value, Real) or not _is_number(value):
            return False
        as_float = float(value)
        if as_float != round(as_float):
            return False
        number = round(as_float)
        return self.low <= number <= self.high and (number - self.low) % self.step == 0

    def sample(self, rng: np.random.Generator) -> int:
        if self.log:
            return round(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        n = (self.high - self.low) // self.step
        return int(self.low + self.step * int(rng.integers(0, n + 1)))

    def snap(self, value: float) -> int:
        """The point of the grid ``low, low + step, …, <= high`` nearest to ``value``."""
        clipped = min(max(float(value), self.low), self.high)
        steps = min(round((clipped - self.low) / self.step), (self.high - self.low) // self.step)
        return int(self.low + self.step * steps)


@dataclass(frozen=True)
class Choice:
    """A categorical coordinate: one of ``choices`` (numbers, strings, booleans or None)."""

    choices: tuple[Any, ...]

    def __init__(self, choices: Iterable[Any]) -> None:
        if isinstance(choices, (str, bytes)):
            raise TransferSearchError(
                f"Choice takes a list of options, but got the string {choices!r}, which would "
                f"become the options {tuple(choices)!r}. Write Choice([{choices!r}])."
            )
        if isinstance(choices, (Mapping, set, frozenset)) or not isinstance(choices, Iterable):
            why = (
                ": a set or dict has no fixed order"
                if isinstance(choices, (Mapping, set, frozenset))
                else ""
            )
            raise TransferSearchError(
                f"Choice takes a list of options (numbers, strings, booleans or None), but got "
                f"{choices!r} ({type(choices).__name__}){why}. Write Choice(['adamw', 'lion'])."
            )
        values = tuple(choices)
        if not values:
            raise TransferSearchError("Choice needs at least one option, but got an empty list.")
        bad = [v for v in values if v is not None and not isinstance(v, (str, Real))]
        if bad:
            raise TransferSearchError(
                f"Choice options must be numbers, strings, booleans or None (what Optuna and Ray "
                f"store), but got {bad!r} in {values!r}."
            )
        object.__setattr__(self, "choices", values)

    def contains(self, value: object) -> bool:
        return value in self.choices

    def sample(self, rng: np.random.Generator) -> Any:
        return self.choices[int(rng.integers(0, len(self.choices)))]

    def snap(self, value: Any) -> Any:
        """``value`` itself: a choice has no nearest neighbour.

        Raises:
            TransferSearchError: ``value`` is not one of the choices.
        """
        if value not in self.choices:
            raise TransferSearchError(
                f"{value!r} is not one of the choices {self.choices}; pick one of them."
            )
        return value


Distribution = Union[Float, Int, Choice]


def _is_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _check_log(log: object) -> None:
    check_bool("log", log, fix="Write log=True for a log-uniform range, log=False otherwise.")


def _check_bounds(low: float, high: float, log: bool) -> None:
    if not (_is_number(low) and _is_number(high)):
        raise TransferSearchError(f"bounds must be finite numbers, but got ({low=}, {high=}).")
    if low > high:
        raise TransferSearchError(f"`low <= high` must hold, but got ({low=}, {high=}).")
    if log and low <= 0:
        raise TransferSearchError(
            f"a log-scale distribution needs `low > 0`, but got {low=}. Raise `low` or set log=False."
        )


def _check_value(name: str, value: object) -> None:
    """Refuse a value a built-in coordinate cannot take (other names pass through unchecked).

    Raises:
        TransferSearchError: a learning rate, weight decay, timescale or eps that is not a finite
            number > 0; a beta or EMA momentum outside [0, 1).
    """
    if name in POSITIVE_COORDS:
        check_positive(
            f"coords.{name}",
            value,
            fix=f"`{name}` is a learning rate, weight decay, timescale or eps: it must be > 0.",
        )
    elif name in UNIT_COORDS and not (
        isinstance(value, Real) and _is_number(value) and 0.0 <= float(value) < 1.0
    ):
        raise TransferSearchError(
            f"`{name}` must lie in [0, 1), but got {name}={value!r}. It is an EMA weight, "
            "e.g. beta1=0.9, beta2=0.999, ema_momentum=0.999."
        )


def _check_distribution(name: str, dist: Distribution) -> None:
    """Refuse a distribution for a built-in coordinate that reaches values it cannot take.

    Raises:
        TransferSearchError: e.g. ``Float(0, 0.1)`` for a learning rate (must be > 0), or
            ``Float(0.8, 1.5)`` for ``beta1`` (betas lie in [0, 1)).
    """
    if isinstance(dist, Choice):
        for choice in dist.choices:
            _check_value(name, choice)
        return
    if name in POSITIVE_COORDS and dist.low <= 0:
        raise TransferSearchError(
            f"coordinate {name!r} is positive (a learning rate, weight decay, timescale or eps), "
            f"so its distribution must have low > 0, but got {dist!r}. Sweep it on a log scale, "
            f"e.g. {name}=ts.Float({_log_example(dist.high)}, log=True)."
        )
    if name in UNIT_COORDS and not (dist.low >= 0 and dist.high < 1):
        raise TransferSearchError(
            f"coordinate {name!r} is an EMA weight in [0, 1), so its distribution must have "
            f"low >= 0 and high < 1, but got {dist!r}. E.g. {name}=ts.Float(0.8, 0.99)."
        )


def _log_example(high: float) -> str:
    """``"0.0001, 0.1"``: three decades below ``high`` (or below 1 when ``high`` <= 0)."""
    top = float(high) if high > 0 else 1.0
    return f"{top / 1000:g}, {top:g}"


def _outside_note(name: str, value: float, dist: Float | Int) -> str:
    """How far ``value`` lies past ``dist``'s range: in decades for positive quantities."""
    low, high = float(dist.low), float(dist.high)
    side, bound = ("above", high) if value > high else ("below", low)
    if value > 0 and bound > 0 and (dist.log or name in POSITIVE_COORDS):
        past = f"{abs(math.log10(value / bound)):.2f} decades"
    else:
        span = high - low
        share = f" ({abs(value - bound) / span:.0%} of the range's width)" if span > 0 else ""
        past = f"{abs(value - bound):.3g}{share}"
    return (
        f"{name} {value:.4g} lies {past} {side} the swept range [{low:g}, {high:g}]: an "
        "extrapolation past what the proxies tried; check it at the target before a long run"
    )


# ----------------------------------------------------------------------------------------------
# Coordinate conversions (the hidden group at the base scale)
# ----------------------------------------------------------------------------------------------
def tau_epoch_from_eta_lambda(eta_lambda: float, scale: Scale) -> float:
    """τ_epoch = B/(ηλN) in epochs at ``scale`` (Wang & Aitchison Eq. 10); inf for ηλ = 0."""
    scale.require("batch_size", "dataset_size", purpose="convert tau_epoch = B/(lr*wd*N)")
    if eta_lambda == 0.0:
        return math.inf
    return scale["batch_size"] / (eta_lambda * scale["dataset_size"])


def eta_lambda_from_tau_epoch(tau_epoch: float, scale: Scale) -> float:
    """ηλ = B/(τ_epoch·N) at ``scale``: the inverse of :func:`tau_epoch_from_eta_lambda`."""
    scale.require("batch_size", "dataset_size", purpose="convert tau_epoch = B/(lr*wd*N)")
    return scale["batch_size"] / (tau_epoch * scale["dataset_size"])


def _product_from(name: str, value: float, base: Scale) -> float:
    """ηλ from a product-class coordinate (Wang & Aitchison Eq. 4–6 and 10)."""
    if name in ("eta_lambda", "independent_wd"):
        return value
    if name == "tau_iter":
        return 1.0 / value  # τ_iter = 1/(ηλ)
    return eta_lambda_from_tau_epoch(value, base)


def coordinate_from_base_point(name: str, lr: float, weight_decay: float, base: Scale) -> float:
    """The value of coordinate ``name`` for the hidden group's (η, λ) at scale ``base``.

    ``lr``/``base_lr`` = η; ``weight_decay`` = λ (coupled); ``eta_lambda``/``independent_wd`` = ηλ;
    ``tau_iter`` = 1/(ηλ); ``tau_epoch`` = B/(ηλN) (Wang & Aitchison Eq. 10).
    """
    if name in LR_COORDS:
        return lr
    if name in WD_COORDS:
        return weight_decay
    product = lr * weight_decay
    if name in ("eta_lambda", "independent_wd"):
        return product
    if name == "tau_iter":
        return 1.0 / product
    if name == "tau_epoch":
        return tau_epoch_from_eta_lambda(product, base)
    raise TransferSearchError(f"unknown lr/weight-decay coordinate {name!r}; known: {COORDINATES}.")


def _classes(names: Iterable[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"lr": [], "wd": [], "product": []}
    for name in names:
        if name in LR_COORDS:
            found["lr"].append(name)
        elif name in WD_COORDS:
            found["wd"].append(name)
        elif name in PRODUCT_COORDS:
            found["product"].append(name)
    return found


_NEEDED = (
    "Give exactly two coordinates from different classes: one of {lr, base_lr}, "
    "{weight_decay}, {eta_lambda, independent_wd, tau_iter, tau_epoch} — e.g. base_lr + tau_epoch."
)


#: difflib similarity above which a pass-through name in a *sufficient* space is taken for a typo
#: of a coordinate (``beta_1``, ``weight_decy``: 0.91, 0.96) and warned about; SGD's ``momentum``
#: (0.8 to ``ema_momentum``) stays below it. Insufficient sets use difflib's default 0.6: they
#: fail anyway, and the hint only helps.
TYPO_SIMILARITY = 0.85


def _close_coordinates(names: Iterable[str], cutoff: float = 0.6) -> str:
    """``" ('tau_epcoh' -> did you mean 'tau_epoch'?)"`` for names that look like misspelt coordinates."""
    hints = []
    for name in names:
        if not isinstance(name, str) or name in COORDINATES:
            continue
        close = difflib.get_close_matches(name, COORDINATES, n=1, cutoff=cutoff)
        if close:
            hints.append(f"{name!r} -> did you mean {close[0]!r}?")
    return f" ({'; '.join(hints)})" if hints else ""


def check_sufficient(names: Iterable[str]) -> None:
    """Raise unless ``names`` holds a sufficient, non-conflicting set of lr/wd coordinates.

    Names that are no built-in coordinate pass through (:attr:`Hyperparameters.extra`); when the set
    is insufficient, those close to a coordinate name are named as likely typos (``tau_epcoh``).
    """
    names = list(names)
    found = _classes(names)
    given = [n for group in found.values() for n in group]
    used = [cls for cls, group in found.items() if group]
    if any(len(group) > 1 for group in found.values()) or len(used) > 2:
        raise TransferSearchError(
            f"coordinates {given} over-determine lr and weight decay (conflicting). {_NEEDED}"
        )
    if len(used) < 2:
        others = [n for n in names if n not in COORDINATES]
        passed = (
            f" The other names {others} are no lr/weight-decay coordinates and would pass through "
            f"unchanged{_close_coordinates(others)}."
            if others
            else ""
        )
        raise TransferSearchError(
            f"coordinates {given} are not enough to determine lr and weight decay.{passed} {_NEEDED}"
        )


def base_point(coords: Mapping[str, float], base: Scale) -> tuple[float, float]:
    """The hidden group's (lr η, coupled weight decay λ) at ``base`` from a sufficient pair.

    η + λ direct; η + ηλ gives λ = ηλ/η; λ + ηλ gives η = ηλ/λ, where ηλ comes from
    ``eta_lambda``/``independent_wd`` (ηλ), ``tau_iter`` (1/τ) or ``tau_epoch`` (B/(τN), Eq. 11 of
    Wang & Aitchison).

    Raises:
        TransferSearchError: an insufficient or conflicting set, or a non-positive value.
    """
    check_sufficient(coords)
    found = _classes(coords)
    values = {n: check_positive(f"coords.{n}", coords[n]) for cls in found.values() for n in cls}
    lr = values[found["lr"][0]] if found["lr"] else None
    wd = values[found["wd"][0]] if found["wd"] else None
    product = (
        _product_from(found["product"][0], values[found["product"][0]], base)
        if found["product"]
        else None
    )
    if lr is not None and wd is not None:
        return lr, wd
    if lr is not None and product is not None:
        return lr, product / lr
    if wd is not None and product is not None:
        return product / wd, wd
    raise TransferSearchError(_NEEDED)  # pragma: no cover - check_sufficient covers this


# ----------------------------------------------------------------------------------------------
# Hyperparameters
# ----------------------------------------------------------------------------------------------
def _check_group(group: str, values: object) -> None:
    """Refuse a group whose ``lr`` is not finite and > 0 or whose decay is not finite and >= 0.

    Raises:
        TransferSearchError: naming the group, the field and the value (e.g. a NaN lr).
    """
    if not isinstance(values, Mapping) or "lr" not in values or "weight_decay" not in values:
        raise TransferSearchError(
            f"Hyperparameters.groups[{group!r}] must be a dict with 'lr' and 'weight_decay', but "
            f"got {values!r}."
        )
    check_positive(f"groups.{group}.lr", values["lr"], fix="A learning rate must be > 0.")
    if "eps" in values:
        check_positive(f"groups.{group}.eps", values["eps"], fix="Adam's eps must be > 0.")
    for name in ("weight_decay", "independent_wd"):
        if name not in values:
            continue
        value = values[name]
        if not (isinstance(value, Real) and _is_number(value) and float(value) >= 0.0):
            raise TransferSearchError(
                f"`groups.{group}.{name}` must be a finite number >= 0, but got {name}={value!r}. "
                "Weight decay is 0 (none) or positive."
            )


def _frozen_groups(groups: Mapping[str, Mapping[str, float]]) -> Mapping[str, Mapping[str, float]]:
    return MappingProxyType({g: MappingProxyType(dict(groups[g])) for g in groups})


def _batch_transfer(
    batch_rule: BatchRule,
    group: str,
    lr: float,
    wd: float,
    betas: tuple[float, float],
    eps: float,
    kappa: float,
    target: Scale,
) -> BatchTransfer:
    """One group's (lr, weight decay, betas, eps) moved by the batch rule at ``kappa``; an error
    names the scale, the group and its values before the rule."""
    try:
        return batch_rule.transfer(lr, wd, betas, eps, kappa)
    except TransferSearchError as exc:
        raise TransferSearchError(
            f"at {target!r}, {group} group (lr={lr:g}, weight_decay={wd:g} before the "
            f"batch rule, kappa={kappa:g}): {exc}"
        ) from exc


@dataclass(frozen=True)
class Hyperparameters:
    """Concrete AdamW hyperparameters at one scale (frozen).

    ``groups`` maps "input", "hidden", "output", "vector" and "block_vector" to ``{"lr",
    "weight_decay", "independent_wd", "eps"}``: ``weight_decay`` is PyTorch's coupled λ
    (torch.optim.AdamW), ``independent_wd`` = lr·weight_decay is the per-step decay for optimizers
    that decay by λ' alone, and ``eps`` is the group's Adam ε (``eps`` times the rule's width and
    depth factors; equal to ``eps`` unless ``eps_width`` or a depth rule moves it; a group given
    without ``eps`` gets ``eps``). "block_vector" (in-block norm gains and biases) is there only
    when the rule has a depth rule or ``eps_width``; :meth:`group` reads it as "vector" otherwise.
    ``residual_multiplier`` is m_L^(−α) of the rule's depth rule (1 without one): the factor the
    model must put on every residual branch (:func:`transfersearch.rules.residual_multiplier`).
    ``lr`` and ``weight_decay`` are the hidden group's. ``width_lr_multipliers`` records, per group,
    the factor the rule's width scaling put on the learning rate (µP: 1/s for hidden and output;
    empty when unknown), so that schedules can tell whether µP's 1/s is already applied.
    ``batch_size`` and ``total_steps`` are ``int`` when whole (``DataLoader(batch_size=...)``
    refuses ``128.0``); ``total_steps`` = epochs × N / B may be fractional (1562.5): round it as
    your loader counts batches (``math.ceil`` without ``drop_last``).

    Raises:
        TransferSearchError: a missing group, or ``betas`` that are not a pair in [0, 1).
    """

    scale: Scale
    groups: Mapping[str, Mapping[str, float]]
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    ema_momentum: float | None = None
    batch_size: float | None = None
    total_steps: float | None = None
    coordinates: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: The space's base scale (where the coordinates are defined), when known.
    base: Scale | None = None
    #: Per group, the rule's width multiplier of the lr (µP: 1/s on hidden and output); {} = unknown.
    width_lr_multipliers: Mapping[str, float] = field(default_factory=dict)
    #: How the batch rule moved (beta1, beta2) from the base batch size: "unchanged", "linear"
    #: (1 − κ(1 − β)) or "power" (β^κ); :meth:`TransferSpace.coordinates` undoes the same form.
    beta_forms: tuple[AppliedBetaForm, AppliedBetaForm] = ("unchanged", "unchanged")
    #: m_L^(−α): the factor the model must put on every residual branch (1 at the base depth).
    residual_multiplier: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.scale, Scale):
            object.__setattr__(self, "scale", Scale(self.scale))
        if self.base is not None and not isinstance(self.base, Scale):
            object.__setattr__(self, "base", Scale(self.base))
        if not isinstance(self.groups, Mapping):
            raise TransferSearchError(
                f"Hyperparameters.groups must map each of {GROUPS} to {{'lr', 'weight_decay'}}, "
                f"but got {self.groups!r}."
            )
        missing = [g for g in GROUPS if g not in self.groups]
        if missing:
            raise TransferSearchError(f"Hyperparameters.groups lacks groups {missing}.")
        for group in GROUPS:
            _check_group(group, self.groups[group])
        groups = {g: dict(v) for g, v in self.groups.items()}
        if BLOCK_VECTOR in groups:
            _check_group(BLOCK_VECTOR, groups[BLOCK_VECTOR])
        object.__setattr__(self, "eps", check_positive("eps", self.eps))
        for values in groups.values():
            values.setdefault("eps", self.eps)
        object.__setattr__(self, "groups", _frozen_groups(groups))
        object.__setattr__(self, "coordinates", MappingProxyType(dict(self.coordinates)))
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))
        object.__setattr__(self, "betas", check_betas(self.betas))
        object.__setattr__(
            self,
            "residual_multiplier",
            check_positive("residual_multiplier", self.residual_multiplier),
        )
        if self.ema_momentum is not None:
            _check_value("ema_momentum", self.ema_momentum)
        for name in ("batch_size", "total_steps"):  # counts: an int when whole (DataLoader)
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, whole_number(check_positive(name, value)))
        forms = tuple(self.beta_forms)
        if len(forms) != 2 or any(f not in ("unchanged", "linear", "power") for f in forms):
            raise TransferSearchError(
                "`beta_forms` must be a pair of 'unchanged', 'linear' or 'power', but got "
                f"beta_forms={self.beta_forms!r}."
            )
        object.__setattr__(self, "beta_forms", forms)
        object.__setattr__(
            self,
            "width_lr_multipliers",
            MappingProxyType({g: float(v) for g, v in self.width_lr_multipliers.items()}),
        )

    def group(self, name: str) -> Mapping[str, float]:
        """One group's values; "block_vector" is the "vector" group's when the rule does not
        split it (no depth rule, no ``eps_width``: the two groups get the same numbers).

        Raises:
            TransferSearchError: ``name`` is not a group.
        """
        if name == BLOCK_VECTOR and name not in self.groups:
            return self.groups["vector"]
        if name not in self.groups:
            raise TransferSearchError(
                f"no group {name!r}: the groups are {(*GROUPS, BLOCK_VECTOR)}."
            )
        return self.groups[name]

    @property
    def lr(self) -> float:
        """The hidden group's learning rate."""
        return self.groups["hidden"]["lr"]

    @property
    def weight_decay(self) -> float:
        """The hidden group's weight decay (PyTorch's coupled convention)."""
        return self.groups["hidden"]["weight_decay"]

    @property
    def width_mult(self) -> float | None:
        """s = width / base width (None unless both this scale and the base give ``width``)."""
        if self.base is None or "width" not in self.base or "width" not in self.scale:
            return None
        return self.scale["width"] / self.base["width"]

    @property
    def tau_iter(self) -> float:
        """τ_iter = 1/(ηλ) of the hidden group, in iterations (inf without weight decay)."""
        product = self.lr * self.weight_decay
        return math.inf if product == 0 else 1.0 / product

    @property
    def tau_epoch(self) -> float | None:
        """τ_epoch = B/(ηλN) of the hidden group (None without N and B in the scale)."""
        if self.scale.iters_per_epoch is None:
            return None
        return tau_epoch_from_eta_lambda(self.lr * self.weight_decay, self.scale)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict; :meth:`from_dict` reads it back."""
        return {
            "scale": self.scale.to_dict(),
            "groups": {g: dict(v) for g, v in self.groups.items()},
            "lr": self.lr,
            "weight_decay": self.weight_decay,
            "betas": list(self.betas),
            "eps": self.eps,
            "ema_momentum": self.ema_momentum,
            "batch_size": self.batch_size,
            "total_steps": self.total_steps,
            "coordinates": dict(self.coordinates),
            "extra": dict(self.extra),
            "notes": list(self.notes),
            "base": None if self.base is None else self.base.to_dict(),
            "width_lr_multipliers": dict(self.width_lr_multipliers),
            "beta_forms": list(self.beta_forms),
            "residual_multiplier": self.residual_multiplier,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hyperparameters:
        """Inverse of :meth:`to_dict`.

        Raises:
            TransferSearchError: ``data`` is not such a dict, or holds an invalid value (a NaN lr, a
                negative weight decay, a beta outside [0, 1), ...).
        """
        if not isinstance(data, Mapping):
            raise TransferSearchError(
                f"Hyperparameters.from_dict takes a dict made by Hyperparameters.to_dict(), but "
                f"got {data!r} ({type(data).__name__})."
            )
        try:
            return cls(
                scale=Scale(data["scale"]),
                groups=data["groups"],
                betas=data.get("betas", (0.9, 0.999)),
                eps=float(data.get("eps", 1e-8)),
                ema_momentum=data.get("ema_momentum"),
                batch_size=data.get("batch_size"),
                total_steps=data.get("total_steps"),
                coordinates=data.get("coordinates", {}),
                extra=data.get("extra", {}),
                notes=tuple(data.get("notes", ())),
                base=None if data.get("base") is None else Scale(data["base"]),
                width_lr_multipliers=data.get("width_lr_multipliers", {}),
                beta_forms=tuple(data.get("beta_forms", ("unchanged", "unchanged"))),
                residual_multiplier=float(data.get("residual_multiplier", 1.0)),
            )
        except TransferSearchError:
            raise
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise TransferSearchError(
                f"cannot read Hyperparameters from the dict with keys {sorted(map(str, data))}: "
                f"{exc!r}. Pass a dict made by Hyperparameters.to_dict()."
            ) from exc


def _moved_groups(
    rule: Rule,
    base: Scale,
    target: Scale,
    base_point: tuple[float, float],
    betas: tuple[float, float],
    eps: float,
    kappa: float,
) -> tuple[dict[str, dict[str, float]], BatchTransfer]:
    """Each group's values at ``target`` from the base point (η₀, λ₀ with the dataset factor):
    the rule's width and depth factors, then its batch rule at ``kappa``; and the space-wide
    (betas, eps) the batch rule gives (``hp.eps``: ε before any group's factor)."""
    lr0, wd0 = base_point
    factors = rule.factors(base, target)
    if not rule.splits_block_vectors:
        del factors[BLOCK_VECTOR]
    moves = rule.batch_rule is not None and kappa != 1.0
    space_wide = BatchTransfer(lr0, 0.0, betas, eps, ("unchanged", "unchanged"))
    if rule.batch_rule is not None and moves:
        space_wide = _batch_transfer(rule.batch_rule, "eps", lr0, 0.0, betas, eps, kappa, target)
    groups: dict[str, dict[str, float]] = {}
    for group, factor in factors.items():
        lr, wd, group_eps = lr0 * factor.lr, wd0 * factor.weight_decay, eps * factor.eps
        if rule.batch_rule is not None and moves:
            moved = _batch_transfer(rule.batch_rule, group, lr, wd, betas, group_eps, kappa, target)
            lr, wd, group_eps = moved.lr, moved.weight_decay, moved.eps
        groups[group] = {"lr": lr, "weight_decay": wd, "independent_wd": lr * wd, "eps": group_eps}
    return groups, space_wide


def _beta_notes(
    betas: tuple[float, float], forms: tuple[AppliedBetaForm, AppliedBetaForm], kappa: float
) -> list[str]:
    """A note per beta moved as β^κ where the linear form 1 − κ(1 − β) would leave (0, 1)."""
    return [
        f"{name} = beta**kappa = {beta**kappa:.4g} at kappa={kappa:g} (the linear form "
        f"1 - kappa*(1 - beta) would be {1.0 - kappa * (1.0 - beta):.3g})"
        for name, beta, form in zip(("beta1", "beta2"), betas, forms)
        if form == "power" and kappa * (1.0 - beta) >= 1.0
    ]


def _depth_notes(rule: Rule, base: Scale, target: Scale) -> list[str]:
    """What the user's model must do when ``target`` changes the depth (CompleteP, Dey et al.
    2025, Table 1): apply the residual multiplier, or get a depth rule."""
    depth_mult = target.ratio(base, "depth")
    if depth_mult == 1.0:
        return []
    shown = f"depth {base['depth']:g} -> {target['depth']:g} (m_L = {depth_mult:g})"
    if rule.depth_rule is None:
        return [
            f"{shown}, but the rule has no depth rule, so no lr, weight decay or eps moves with "
            "depth. For CompleteP pass the rule depth='completep' (or 'depth_mup'), e.g. "
            "MuP(depth='completep')."
        ]
    multiplier = rule.residual_multiplier(base, target)
    return [
        f"{shown}: the model must multiply every residual branch by residual_multiplier = "
        f"{multiplier:.6g} (x + {multiplier:.4g} * attn(norm(x)), the same for the MLP); the "
        "library cannot check this. Put the block vectors (in-block norm gains, biases) in the "
        "'block_vector' group (param_groups finds the blocks, or pass blocks='...')."
    ]


# ----------------------------------------------------------------------------------------------
# TransferSpace
# ----------------------------------------------------------------------------------------------
_RULE_NAMES = ("width", "dataset_size", "batch_size")


def _target_steps(base: Scale, given: Scale, merged: Scale) -> float | None:
    """The target's ``steps`` when the base states steps and the target does not, else None.

    T = T_base · (D / D_base) / κ (Busbridge et al. 2023, App. C: steps ÷ κ at fixed data; the
    samples seen grow with the data), D = ``tokens`` (training tokens seen) when the base gives it,
    else ``dataset_size`` × ``epochs``. A target giving ``epochs`` the base lacks: T = epochs · N / B.
    Without a base ``steps``, :attr:`Scale.total_steps` derives T from the merged epochs, N and B.

    Raises:
        TransferSearchError: the target gives ``epochs`` but no ``dataset_size``/``batch_size``.
    """
    if "steps" in given or "steps" not in base:
        return None
    if "epochs" in given and "epochs" not in base:
        per_epoch = merged.iters_per_epoch
        if per_epoch is None:
            raise TransferSearchError(
                f"the target gives epochs={given['epochs']:g} but the steps cannot be derived "
                f"(steps = epochs × dataset_size / batch_size) from {merged!r}. Add dataset_size "
                "and batch_size to the base, or give steps=... in the target."
            )
        return given["epochs"] * per_epoch
    if "tokens" in base:
        data_ratio = merged.ratio(base, "tokens")
    else:
        data_ratio = merged.ratio(base, "dataset_size") * merged.ratio(base, "epochs")
    return base["steps"] * data_ratio / merged.ratio(base, "batch_size")


class TransferSpace:
    """Sweep invariant coordinates at a base scale; get concrete hyperparameters at any scale.

    Args:
        base: the scale at which the coordinates are defined.
        coords: coordinate name -> distribution (:class:`Float`, :class:`Int`, :class:`Choice`,
            swept) or a number (fixed). Must hold a sufficient pair of lr/weight-decay coordinates
            (see the module docstring).
        rule: the scaling rule (default ``rules.MuP()``: µP lr, weight decay ∝ width, constant
            τ_epoch across dataset size, Adam's √κ batch rule).
        betas, eps: Adam's defaults at the base batch size (``betas`` is a pair, e.g. (0.9, 0.999)).
        ema_momentum: base model-EMA momentum ρ (carried as ρ^κ across batch sizes), or None.
        custom_scale_names: your own scale names (beyond :data:`~transfersearch.scale.KNOWN_SCALE_NAMES`,
            the base's names and the rule's) that a target may give; the rule ignores them. Any
            other unknown name in a target is refused as a likely typo (``widht``).

    Raises:
        TransferSearchError: an insufficient or conflicting coordinate set, or a bad value.
    """

    def __init__(
        self,
        base: Scale | Mapping[str, float],
        coords: Mapping[str, Distribution | float | int | str],
        rule: Rule | None = None,
        *,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        ema_momentum: float | None = None,
        custom_scale_names: Iterable[str] = (),
    ) -> None:
        self.base = base if isinstance(base, Scale) else Scale(base)
        self.rule: Rule = MuP() if rule is None else rule
        if not isinstance(self.rule, Rule):
            raise TransferSearchError(
                f"`rule` must be a transfersearch.rules.Rule such as rules.MuP(), but got {rule!r}."
            )
        if not isinstance(coords, Mapping) or not coords:
            raise TransferSearchError(
                "`coords` must be a non-empty dict of name -> distribution or fixed value, e.g. "
                "{'base_lr': ts.Float(1e-4, 1e-1, log=True), 'tau_epoch': ts.Float(0.05, 20, log=True)}."
            )
        bad_names = [n for n in coords if not isinstance(n, str) or not n]
        if bad_names:
            raise TransferSearchError(
                f"coordinate names must be non-empty strings, but got {bad_names!r} in `coords`."
            )
        check_sufficient(coords)
        typos = _close_coordinates(coords, cutoff=TYPO_SIMILARITY)
        if typos:
            warnings.warn(
                f"coordinates {[n for n in coords if n not in COORDINATES]} are no built-in "
                f"coordinate and pass through unchanged into hp.extra{typos}. Fix the name if it "
                "was meant to set an optimizer coordinate.",
                TransferSearchWarning,
                stacklevel=2,
            )
        self.distributions: dict[str, Distribution] = {}
        self.fixed: dict[str, Any] = {}
        for name, value in coords.items():
            if isinstance(value, (Float, Int, Choice)):
                _check_distribution(name, value)
                self.distributions[name] = value
            else:
                self.fixed[name] = value
        self._validate_values(self.fixed)
        self.betas = check_betas(betas)
        self.eps = check_positive("eps", eps)
        if ema_momentum is not None:
            scale_ema_momentum(ema_momentum, 1.0)
        self.ema_momentum = ema_momentum
        if isinstance(custom_scale_names, str):
            custom_scale_names = (custom_scale_names,)
        self.custom_scale_names: tuple[str, ...] = tuple(custom_scale_names)
        bad = [n for n in self.custom_scale_names if not isinstance(n, str) or not n]
        if bad:
            raise TransferSearchError(
                f"`custom_scale_names` must be non-empty strings, but got {bad!r}, e.g. "
                "custom_scale_names=('heads',)."
            )

    def __repr__(self) -> str:
        return (
            f"TransferSpace(base={self.base!r}, coords={ {**self.distributions, **self.fixed} }, "
            f"rule={self.rule!r})"
        )

    @property
    def names(self) -> tuple[str, ...]:
        """The swept coordinate names, in declaration order."""
        return tuple(self.distributions)

    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """One random point of the swept coordinates (uniform / log-uniform per distribution)."""
        return {name: dist.sample(rng) for name, dist in self.distributions.items()}

    def _validate_values(self, values: Mapping[str, Any]) -> list[str]:
        """Check each value; return a note for each swept one that lies past its distribution.

        A value outside its swept range is valid (an extrapolation: what the proxies' law predicts
        past the box), so it gets a note, not an error. Invalid values raise: a non-positive
        learning rate, weight decay, timescale or eps, a beta outside [0, 1), NaN, a choice that is
        not one of the options, a non-integer for an :class:`Int`.
        """
        outside: list[str] = []
        for name, value in values.items():
            _check_value(name, value)
            dist = self.distributions.get(name)
            if dist is None or dist.contains(value):
                continue
            if isinstance(dist, Choice) or not _is_number(value):
                raise TransferSearchError(
                    f"coordinate {name}={value!r} is not a value of its distribution {dist!r}. "
                    + (
                        "Pick one of the choices."
                        if isinstance(dist, Choice)
                        else "Give a finite number."
                    )
                )
            number = float(value)
            if isinstance(dist, Int) and number != round(number):
                raise TransferSearchError(
                    f"coordinate {name}={value!r} must be an integer for {dist!r}."
                )
            if dist.low <= number <= dist.high:
                raise TransferSearchError(
                    f"coordinate {name}={value!r} is not on the grid of {dist!r}: pick low + k*step."
                )
            outside.append(_outside_note(name, number, dist))
        return outside

    def _full_coords(self, coords: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(coords, Mapping):
            raise TransferSearchError(f"`coords` must be a mapping, but got {coords!r}.")
        unknown = [n for n in coords if n not in self.distributions and n not in self.fixed]
        missing = [n for n in self.distributions if n not in coords]
        if unknown:
            known = sorted([*self.distributions, *self.fixed])
            hints = [
                f"{name!r} -> did you mean {close[0]!r}?"
                for name in unknown
                if (close := difflib.get_close_matches(str(name), known, n=1))
            ]
            raise TransferSearchError(
                f"coordinates {unknown} are not in this space"
                + (f" ({'; '.join(hints)})" if hints else "")
                + (f", and swept coordinates {missing} have no value" if missing else "")
                + f". The space has {known}: fix the names, or remove them from `coords`."
            )
        if missing:
            raise TransferSearchError(
                f"missing values for swept coordinates {missing}. Give every one of {self.names}."
            )
        for name, value in coords.items():
            if name in self.fixed and value != self.fixed[name]:
                raise TransferSearchError(
                    f"coordinate {name}={value!r} conflicts with its fixed value {self.fixed[name]!r}."
                )
        return {**self.fixed, **coords}

    def _target(self, scale: Scale | Mapping[str, float] | None) -> Scale:
        """The full target scale: the given names over the base's, with ``steps`` rescaled.

        Raises:
            TransferSearchError: an unknown (likely misspelt) name, a name the rule scales by that
                the base lacks, or a target the dataset rule cannot read (see
                :meth:`~transfersearch.rules.DatasetRule.check_target`).
        """
        if scale is None:
            return self.base
        given = scale if isinstance(scale, Scale) else Scale(scale)
        self._check_names(given)
        for name in dict.fromkeys((*_RULE_NAMES, *self.rule.scale_names)):
            if name in given and name not in self.base:
                raise TransferSearchError(
                    f"the target scale gives `{name}` but the space's base {self.base!r} does not, "
                    f"so the rule cannot scale by it. Add {name}=... to the base scale."
                )
        if self.rule.dataset_rule is not None:
            self.rule.dataset_rule.check_target(self.base, given)
        # Names the target leaves out keep their base values, except `steps` (below).
        merged = Scale({**self.base.to_dict(), **given.to_dict()})
        steps = _target_steps(self.base, given, merged)
        return merged if steps is None else merged.replace(steps=steps)

    def _check_names(self, given: Scale) -> None:
        """Refuse target names nothing reads: not known, not in the base, rule or custom names."""
        allowed = sorted(
            {*KNOWN_SCALE_NAMES, *self.base, *self.rule.scale_names, *self.custom_scale_names}
        )
        unknown = [name for name in given if name not in allowed]
        if not unknown:
            return
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, allowed, n=1)
            if close:
                hints.append(f"{name!r} -> did you mean {close[0]!r}?")
        hint = f" ({'; '.join(hints)})" if hints else ""
        raise TransferSearchError(
            f"target scale names {unknown} are unknown{hint}: the rule does not use them and the "
            f"base {self.base!r} lacks them, so the target would silently keep the base's sizes. "
            f"Fix the name (known: {allowed}), or declare your own name with "
            f"TransferSpace(..., custom_scale_names={tuple(unknown)!r})."
        )

    def on_grid(self, coords: Mapping[str, Any]) -> dict[str, Any]:
        """``coords`` with each :class:`Int` coordinate moved to its integer grid.

        A fitted or extrapolated optimum is a real number; an Int coordinate (a warmup length, a
        number of heads) must be one of ``low, low + step, ...``. Inside the range the nearest grid
        point is taken (:meth:`Int.snap`); past it, the nearest point of the grid extended beyond
        ``high`` (or below ``low``, but never below 1 on a log scale), so that an extrapolation
        keeps its distance from the box and :meth:`concretize` notes how far it lies. Other
        coordinates come back unchanged.
        """
        moved = dict(coords)
        for name, dist in self.distributions.items():
            value = moved.get(name)
            if not isinstance(dist, Int) or not _is_number(value):
                continue
            number = float(value)  # type: ignore[arg-type]  # _is_number checked it
            if not math.isfinite(number):
                continue
            if dist.low <= number <= dist.high:
                moved[name] = dist.snap(number)
                continue
            steps = round((number - dist.low) / dist.step)
            moved[name] = max(int(dist.low + dist.step * steps), 1 if dist.log else -(2**62))
        return moved

    def concretize(
        self, coords: Mapping[str, Any], scale: Scale | Mapping[str, float] | None = None
    ) -> Hyperparameters:
        """Concrete per-group hyperparameters for ``coords`` at ``scale`` (default: the base).

        The coordinates give the hidden group's (η, λ) at the base scale (:func:`base_point`); the
        rule then applies width and depth multipliers per group (e.g. µP: hidden lr ÷ s, weight
        decay × s^e; CompleteP: block lr × m_L^(α−1), block ε × m_L^−α), the dataset rule to ηλ
        (constant τ_epoch: ηλ ∝ N_base/N), and the batch rule at κ = B/B_base, or at
        κ_S = S_base/S with ``horizon="completed"`` (Adam: lr × √κ, β → β^κ, ε ÷ √κ, weight decay by
        decay matching, EMA ρ^κ). ``residual_multiplier`` and ``notes`` say what a model at another
        depth must apply.
        Names the target leaves out keep their base values, except ``steps``: a base ``steps`` that
        the target does not restate is rescaled so that the samples seen follow the target
        (Busbridge et al. 2023, App. C: N̂_iter = N_iter / κ at fixed data), i.e.
        T = T_base · (D / D_base) / κ with D the data seen: ``tokens`` when the base gives it, else
        ``dataset_size`` × ``epochs``. Base batch 256, 10000 steps → batch 1024: 2500 steps; with
        8× the data as well: 20000. A target that gives ``epochs`` (and the base does not) gets
        T = epochs × N / B.

        A swept coordinate past its distribution's range (an extrapolated optimum) is used as given:
        a :class:`~transfersearch.errors.TransferSearchWarning` and a line in ``notes`` say how far
        past (in decades for positive coordinates: ``base_lr 0.2 lies 0.30 decades above the swept
        range [0.0001, 0.1]``).

        Raises:
            TransferSearchError: a missing, unknown, invalid (lr ≤ 0, NaN, a beta outside [0, 1), not
                one of a Choice's options) or conflicting coordinate, or a scale the rule cannot use.
        """
        merged = self._full_coords(coords)
        outside = self._validate_values(merged)
        target = self._target(scale)
        lr0, wd0 = base_point(merged, self.base)
        rule = self.rule
        notes: list[str] = list(outside)
        for note in outside:
            warnings.warn(note, TransferSearchWarning, stacklevel=2)
        dataset_factor = 1.0
        if rule.dataset_rule is not None:
            dataset_factor = rule.dataset_rule.eta_lambda_factor(self.base, target)
            for note in rule.dataset_rule.notes(self.base, target):
                notes.append(note)
                warnings.warn(note, TransferSearchWarning, stacklevel=2)
        notes.extend(_depth_notes(rule, self.base, target))
        kappa = rule.kappa(self.base, target)
        betas = (
            float(merged.get("beta1", self.betas[0])),
            float(merged.get("beta2", self.betas[1])),
        )
        eps = float(merged.get("eps", self.eps))
        ema = merged.get("ema_momentum", self.ema_momentum)
        width_mult = target.ratio(self.base, "width")
        lr_multipliers = {g: m for g, (m, _) in rule.group_multipliers(width_mult).items()}
        groups, moved = _moved_groups(
            rule, self.base, target, (lr0, wd0 * dataset_factor), betas, eps, kappa
        )
        new_betas, new_eps, beta_forms = moved.betas, moved.eps, moved.beta_forms
        notes.extend(_beta_notes(betas, beta_forms, kappa))
        if ema is not None and rule.batch_rule is not None:
            ema = scale_ema_momentum(float(ema), kappa)
        extra = {k: v for k, v in merged.items() if k not in COORDINATES}
        return Hyperparameters(
            scale=target,
            groups=groups,
            betas=new_betas,
            eps=new_eps,
            ema_momentum=None if ema is None else float(ema),
            batch_size=target.get("batch_size"),
            total_steps=target.total_steps,
            coordinates={k: v for k, v in merged.items() if k in self.distributions},
            extra=extra,
            notes=tuple(notes),
            base=self.base,
            width_lr_multipliers=lr_multipliers,
            beta_forms=beta_forms,
            residual_multiplier=rule.residual_multiplier(self.base, target),
        )

    def coordinates(
        self, hp: Hyperparameters, scale: Scale | Mapping[str, float] | None = None
    ) -> dict[str, Any]:
        """Invert :meth:`concretize`: the swept coordinates that give ``hp`` at ``scale``.

        Undoes the batch rule (η = η̂/κ^a, ηλ = 1 − (1 − η̂λ̂)^(1/κ)), the dataset rule and the width
        multipliers of the hidden group, then expresses the base (η, λ) in this space's coordinates.
        Optimizer coordinates (beta1, beta2, eps, ema_momentum) and pass-through ones are read back
        from ``hp``.

        Raises:
            TransferSearchError: the hidden group has no positive lr or weight decay.
        """
        if not isinstance(hp, Hyperparameters):
            raise TransferSearchError(
                f"`hp` must be the Hyperparameters that TransferSpace.concretize returns, but got "
                f"{hp!r} ({type(hp).__name__}). For a dict from Hyperparameters.to_dict(), pass "
                "Hyperparameters.from_dict(data)."
            )
        target = self._target(hp.scale if scale is None else scale)
        lr_hat = check_positive("hp.lr", hp.lr)
        wd_hat = check_positive("hp.weight_decay", hp.weight_decay)
        rule = self.rule
        kappa = rule.kappa(self.base, target)
        lr_w, product = lr_hat, lr_hat * wd_hat
        betas, eps, ema = hp.betas, hp.eps, hp.ema_momentum
        if rule.batch_rule is not None and kappa != 1.0:
            forms = ["power" if form == "power" else "linear" for form in hp.beta_forms]
            lr_w, product, betas, eps = rule.batch_rule.invert(
                lr_hat, wd_hat, hp.betas, hp.eps, kappa, (forms[0], forms[1])
            )
            if ema is not None:
                ema = float(ema) ** (1.0 / kappa)
        if rule.dataset_rule is not None:
            product /= rule.dataset_rule.eta_lambda_factor(self.base, target)
        lr_mult, wd_mult, _ = rule.factors(self.base, target)["hidden"]
        lr0 = lr_w / lr_mult
        wd0 = product / lr_w / wd_mult
        out: dict[str, Any] = {}
        for name in self.distributions:
            if name in LR_COORDS + WD_COORDS + PRODUCT_COORDS:
                out[name] = coordinate_from_base_point(name, lr0, wd0, self.base)
            elif name == "beta1":
                out[name] = betas[0]
            elif name == "beta2":
                out[name] = betas[1]
            elif name == "eps":
                out[name] = eps
            elif name == "ema_momentum":
                out[name] = ema
            else:
                out[name] = hp.extra.get(name, hp.coordinates.get(name))
        return out

"""The coordinates' names and algebra: which pairs determine (η, λ), and the conversions between
them at the base scale (Wang & Aitchison 2025 Eq. 4–6 and 10; Kosson et al. Eq. 8).

Also the checks of a coordinate's value and distribution against its meaning (a learning rate is
> 0, a beta lies in [0, 1)). The table of coordinates is :mod:`transfersearch.space`'s docstring.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from numbers import Real

from transfersearch import errors
from transfersearch._distributions import Choice, Distribution, Float, Int
from transfersearch.errors import Allowed, Interval, TransferSearchError, check_positive
from transfersearch.scale import Scale

__all__ = [
    "COORDINATES",
    "EMA_WEIGHT",
    "LR_COORDS",
    "PRODUCT_COORDS",
    "TYPO_SIMILARITY",
    "WD_COORDS",
    "base_point",
    "check_distribution",
    "check_sufficient",
    "check_value",
    "check_weight_decay",
    "close_coordinates",
    "coordinate_from_base_point",
    "eta_lambda_from_tau_epoch",
    "outside_note",
    "tau_epoch_from_eta_lambda",
]

LR_COORDS = ("lr", "base_lr")
WD_COORDS = ("weight_decay",)
PRODUCT_COORDS = ("eta_lambda", "independent_wd", "tau_iter", "tau_epoch")
OPTIMIZER_COORDS = ("beta1", "beta2", "eps", "ema_momentum")
#: Coordinates that are sizes or rates: finite and > 0 (their distributions too)...
POSITIVE_COORDS = (*LR_COORDS, *WD_COORDS, *PRODUCT_COORDS, "eps")
#: ... but for a weight decay, which may be 0 (no decay: a value a sweep over it often holds),
#: swept linearly (``Float(0.0, 0.3)``) or in a grid (``Choice([0.0, 0.01, 0.1])``).
ZERO_ALLOWED = WD_COORDS
_NON_NEGATIVE = Allowed(
    Interval(Real, 0),
    fix="A weight decay is >= 0 (0: no decay), e.g. weight_decay=0.1.",
)
#: Coordinates that are EMA weights: in [0, 1) (their distributions too).
UNIT_COORDS = ("beta1", "beta2", "ema_momentum")
#: Every coordinate name with a built-in meaning.
COORDINATES: tuple[str, ...] = LR_COORDS + WD_COORDS + PRODUCT_COORDS + OPTIMIZER_COORDS


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


def close_coordinates(names: Iterable[str], cutoff: float = 0.6) -> str:
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
            f"unchanged{close_coordinates(others)}."
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
    values = {n: _checked(n, coords[n]) for cls in found.values() for n in cls}
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
        if wd == 0.0:
            raise TransferSearchError(
                f"weight_decay=0 with {found['product'][0]} leaves the learning rate undefined "
                "(lr = ηλ/λ). Sweep weight_decay = 0 beside a learning rate instead: "
                "coords={'base_lr': ts.Float(1e-4, 1e-1, log=True), "
                "'weight_decay': ts.Choice([0.0, 0.01, 0.1])}."
            )
        return product / wd, wd
    raise TransferSearchError(_NEEDED)  # pragma: no cover - check_sufficient covers this


#: What a beta or an EMA momentum may be.
EMA_WEIGHT = Allowed(
    Interval(Real, 0, 1, closed="left"),
    fix="It is an EMA weight, e.g. beta1=0.9, beta2=0.999, ema_momentum=0.999.",
)


def check_weight_decay(label: str, value: object) -> float:
    """``value`` as a float after checking that it is a weight decay: finite and >= 0.

    Raises:
        TransferSearchError: naming ``label`` and the value.
    """
    number: float = errors.check_value(label, value, _NON_NEGATIVE)
    return number


def _checked(name: str, value: object) -> float:
    """``value`` as a float: > 0, or >= 0 for a weight decay (:data:`ZERO_ALLOWED`)."""
    if name in ZERO_ALLOWED:
        return check_weight_decay(f"coords.{name}", value)
    return check_positive(f"coords.{name}", value)


def check_value(name: str, value: object) -> None:
    """Refuse a value a built-in coordinate cannot take (other names pass through unchecked).

    Raises:
        TransferSearchError: a learning rate, weight decay, timescale or eps that is not a finite
            number > 0; a beta or EMA momentum outside [0, 1).
    """
    if name in ZERO_ALLOWED:
        _checked(name, value)
    elif name in POSITIVE_COORDS:
        check_positive(
            f"coords.{name}",
            value,
            fix=f"`{name}` is a learning rate, weight decay, timescale or eps: it must be > 0.",
        )
    elif name in UNIT_COORDS:
        errors.check_value(name, value, EMA_WEIGHT)


def check_distribution(name: str, dist: Distribution) -> None:
    """Refuse a distribution for a built-in coordinate that reaches values it cannot take.

    Raises:
        TransferSearchError: e.g. ``Float(0, 0.1)`` for a learning rate (must be > 0), or
            ``Float(0.8, 1.5)`` for ``beta1`` (betas lie in [0, 1)).
    """
    if isinstance(dist, Choice):
        for choice in dist.choices:
            try:
                check_value(name, choice)
            except TransferSearchError as exc:
                raise TransferSearchError(
                    f"coordinate {name!r} is declared {dist!r}, whose option {choice!r} it cannot "
                    f"take: {exc}"
                ) from None
        return
    if name in ZERO_ALLOWED and dist.low == 0 and not dist.log:
        return  # a linear sweep from no decay up
    if name in POSITIVE_COORDS and dist.low <= 0:
        raise TransferSearchError(
            f"coordinate {name!r} is positive (a learning rate, weight decay, timescale or eps), "
            f"so its distribution must have low > 0, but got {dist!r}. Sweep it on a log scale, "
            f"e.g. {name}=ts.Float({_log_example(dist.high)}, log=True)"
            + (
                f", or linearly from no decay, {name}=ts.Float(0.0, {float(dist.high):g})."
                if name in ZERO_ALLOWED and dist.high > 0
                else "."
            )
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


def outside_note(name: str, value: float, dist: Float | Int) -> str:
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

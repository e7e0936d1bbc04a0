"""Optimizer families beside AdamW: Muon for the hidden matrices, Lion; their transfer rules.

A :class:`~transfersearch.TransferSpace` runs AdamW on every group unless ``optimizers=`` names
another family for a group, e.g. ``{"hidden": Muon()}``. Each family's group gets its own base
point from coordinates with the family's prefix (``muon_base_lr``, ``muon_tau_epoch``); a class
of coordinates (learning rate; weight decay; the product ηλ and its timescales) that the prefix
does not give is shared with the unprefixed (AdamW) coordinates. Derivations and sources:
docs/science.md §11; what the model must do: docs/muon.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Literal, Union

from transfersearch._coordinates import (
    LR_COORDS,
    PRODUCT_COORDS,
    WD_COORDS,
    base_point,
    check_sufficient,
    coordinate_from_base_point,
)
from transfersearch.errors import (
    Allowed,
    Boolean,
    Interval,
    Options,
    TransferSearchError,
    check_table,
)
from transfersearch.rules import Rule, check_betas, match_decay
from transfersearch.scale import Scale

__all__ = [
    "FAMILIES",
    "Lion",
    "Muon",
    "Optimizer",
    "family_base_point",
    "family_coordinate_names",
    "family_group",
    "muon_width_lr_factor",
    "optimizer_from_dict",
    "optimizer_to_dict",
]

AdjustLR = Literal["original", "match_rms_adamw"]

#: The base-point coordinates a family's prefix may take (one sufficient pair, as for AdamW).
_BASE_POINT_COORDS: tuple[str, ...] = LR_COORDS + WD_COORDS + PRODUCT_COORDS

_BATCH_LR_EXPONENT = Allowed(
    Interval(Real),
    fix="It is your choice (no verified batch rule, docs/science.md §11.4): 0 keeps the lr.",
)


def muon_width_lr_factor(adjust_lr_fn: str, width_mult: float) -> float:
    """The factor on Muon's γ at width ratio s that keeps ‖ΔW‖* = Θ(1) (docs/science.md §11.1).

    Muon's step is γ_adj·O with O ≈ UVᵀ (singular values ≈ 1, so ‖O‖* ≈ 1). The spectral
    condition (Yang, Simon & Bernstein 2023, arXiv 2310.17813) asks ‖ΔW‖* = Θ(√(fan_out/fan_in)).
    ``"original"``: γ_adj = γ·√max(1, A/B), so ‖ΔW‖* = γ·√max(1, fan_out/fan_in), width-free for
    a fixed aspect ratio: factor 1. ``"match_rms_adamw"``: γ_adj = 0.2·γ·√max(A, B), so
    ‖ΔW‖* = 0.2γ√max(A, B) ∝ γ·√s: factor s^(−½). (torch.optim.Muon's ``_adjust_lr``; A, B the
    matrix's rows (fan-out) and columns (fan-in).) By hand, s = 4: 1 and 0.5.
    """
    if adjust_lr_fn == "original":
        return 1.0
    if adjust_lr_fn == "match_rms_adamw":
        return 1.0 / math.sqrt(width_mult)
    raise TransferSearchError(
        f"`adjust_lr_fn` must be 'original' or 'match_rms_adamw', but got {adjust_lr_fn!r}."
    )


@dataclass(frozen=True)
class Muon:
    """``torch.optim.Muon`` on the hidden matrices (2-D, both dimensions growing with width).

    Its learning rate γ moves with width by :func:`muon_width_lr_factor` (factor 1 under
    ``adjust_lr_fn="original"``, s^(−½) under ``"match_rms_adamw"``), with depth by the rule's
    depth factor on the hidden group (CompleteP: m_L^(α−1); Muon's step, like Adam's, does not
    depend on the gradient's scale), and its weight decay λ so that γλ moves as the rule's
    AdamW hidden group's ηλ (constant under ``MuP()``: τ_iter = 1/(γλ) is kept; γ unadjusted, as
    torch applies the decay ``θ ← θ − γλθ``). Batch size: no verified rule; γ × κ^batch_lr_exponent
    (default 0: unchanged), momentum unchanged, λ decay-matched so τ_epoch holds
    (docs/science.md §11).

    Args:
        adjust_lr_fn: torch's choice, ``"original"`` (Keller Jordan's, torch's default) or
            ``"match_rms_adamw"`` (Moonshot, arXiv 2502.16982).
        momentum, nesterov, ns_steps, eps: torch.optim.Muon's (defaults 0.95, True, 5, 1e-7);
            ``muon_momentum`` as a coordinate replaces ``momentum``.
        batch_lr_exponent: γ̂ = γ·κ^batch_lr_exponent at κ = B/B_base (default 0).
    """

    adjust_lr_fn: AdjustLR = "original"
    momentum: float = 0.95
    nesterov: bool = True
    ns_steps: int = 5
    eps: float = 1e-7
    batch_lr_exponent: float = 0.0
    family: ClassVar[str] = "muon"
    prefix: ClassVar[str] = "muon_"
    #: The groups this family may run: Muon's rule is derived for hidden matrices only.
    groups: ClassVar[tuple[str, ...]] = ("hidden",)
    #: Coordinates of the family's own settings (beyond the base point).
    settings: ClassVar[tuple[str, ...]] = ("momentum",)

    _TABLE: ClassVar[Mapping[str, Allowed]] = {
        "adjust_lr_fn": Allowed(
            Options("original", "match_rms_adamw"),
            fix="torch.optim.Muon's two rules; 'original' is torch's default.",
        ),
        "momentum": Allowed(Interval(Real, 0, 1, closed="left"), fix="E.g. 0.95."),
        "nesterov": Allowed(Boolean()),
        "ns_steps": Allowed(Interval(Integral, 1), fix="torch's default is 5."),
        "eps": Allowed(Interval(Real, 0, closed="neither"), fix="torch's default is 1e-7."),
        "batch_lr_exponent": _BATCH_LR_EXPONENT,
    }

    def __post_init__(self) -> None:
        for name, value in check_table(self._TABLE, self, owner="Muon").items():
            object.__setattr__(self, name, value)

    def lr_factor(self, rule: Rule, group: str, base: Scale, target: Scale) -> float:
        """γ's width and depth factor from ``base`` to ``target`` (see the class docstring)."""
        width = muon_width_lr_factor(self.adjust_lr_fn, target.ratio(base, "width"))
        return width * _depth_lr_factor(rule, group, base, target)

    def group_values(self, coords: Mapping[str, Any]) -> dict[str, float]:
        """The family's own per-group values: ``momentum`` (a coordinate may replace it)."""
        return {"momentum": float(coords.get(self.prefix + "momentum", self.momentum))}


@dataclass(frozen=True)
class Lion:
    """Lion (Chen et al. 2023, arXiv 2302.06675): θ ← θ − γ·sign(β₁m + (1 − β₁)g) − γλθ.

    Its update has every entry ±1, like Adam's in its sign-descent limit, so it takes the rule's
    AdamW width and depth factors for its group (µP: hidden and output γ ÷ s); the coordinate
    check of docs/science.md §11.5 establishes this for the hidden matrices. Weight decay as for
    Muon (γλ follows the rule's ηλ). Batch size: no established rule; γ × κ^batch_lr_exponent
    (default 0), betas unchanged, λ decay-matched.

    Args:
        betas: (β₁, β₂), Lion's defaults (0.9, 0.99); ``lion_beta1``/``lion_beta2`` as
            coordinates replace them.
        batch_lr_exponent: γ̂ = γ·κ^batch_lr_exponent (default 0).
    """

    betas: tuple[float, float] = (0.9, 0.99)
    batch_lr_exponent: float = 0.0
    family: ClassVar[str] = "lion"
    prefix: ClassVar[str] = "lion_"
    #: Only the hidden matrices: the coordinate check (docs/science.md §11.5) established Lion's
    #: rule there; the other groups are refused until a check establishes theirs.
    groups: ClassVar[tuple[str, ...]] = ("hidden",)
    settings: ClassVar[tuple[str, ...]] = ("beta1", "beta2")

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", check_betas(self.betas))
        checked = check_table({"batch_lr_exponent": _BATCH_LR_EXPONENT}, self, owner="Lion")
        object.__setattr__(self, "batch_lr_exponent", checked["batch_lr_exponent"])

    def lr_factor(self, rule: Rule, group: str, base: Scale, target: Scale) -> float:
        """The rule's AdamW lr factor for ``group`` (width × depth)."""
        return rule.factors(base, target)[group].lr

    def group_values(self, coords: Mapping[str, Any]) -> dict[str, float]:
        """``beta1``, ``beta2`` (coordinates ``lion_beta1``/``lion_beta2`` may replace them)."""
        return {
            "beta1": float(coords.get(self.prefix + "beta1", self.betas[0])),
            "beta2": float(coords.get(self.prefix + "beta2", self.betas[1])),
        }


#: An optimizer family other than AdamW (a group not named in ``optimizers=`` runs AdamW).
Optimizer = Union[Muon, Lion]
#: The families by name.
FAMILIES: Mapping[str, type[Muon] | type[Lion]] = {"muon": Muon, "lion": Lion}


def _depth_lr_factor(rule: Rule, group: str, base: Scale, target: Scale) -> float:
    """The rule's depth factor on ``group``'s lr (1 without a depth rule)."""
    if rule.depth_rule is None:
        return 1.0
    return rule.depth_rule.depth_factors(target.ratio(base, "depth"))[group].lr


def family_coordinate_names(optimizer: Optimizer) -> tuple[str, ...]:
    """Every coordinate name the family's prefix makes (``muon_base_lr``, ..., ``muon_momentum``)."""
    return tuple(optimizer.prefix + n for n in (*_BASE_POINT_COORDS, *optimizer.settings))


def _family_pair(names: Mapping[str, Any] | list[str], prefix: str) -> dict[str, str]:
    """Coordinate → its name in the family's base-point pair: the prefixed ones, plus each
    unprefixed one whose class the prefix does not give (shared)."""
    own = {n[len(prefix) :]: n for n in names if n.startswith(prefix)}
    own = {k: v for k, v in own.items() if k in _BASE_POINT_COORDS}
    classes = [LR_COORDS, WD_COORDS, PRODUCT_COORDS]
    given = [c for c in classes if any(k in c for k in own)]
    shared = {n: n for n in names if n in _BASE_POINT_COORDS and not any(n in c for c in given)}
    return {**own, **shared}


def family_base_point(
    coords: Mapping[str, Any], base: Scale, optimizer: Optimizer
) -> tuple[float, float]:
    """The family's group's (γ, λ) at ``base``: its prefixed pair, shared classes filled in.

    E.g. ``{"base_lr": 3e-3, "tau_epoch": 1, "muon_base_lr": 0.02}``: γ = 0.02 and the shared
    τ_epoch gives γλ = B/(τN) (Wang & Aitchison Eq. 11), λ = γλ/γ.

    Raises:
        TransferSearchError: the prefixed and shared names over- or under-determine (γ, λ).
    """
    pair = _family_pair(list(coords), optimizer.prefix)
    try:
        check_sufficient(pair)
    except TransferSearchError as exc:
        raise TransferSearchError(
            f"the {optimizer.family} group's coordinates {sorted(pair.values())} (its "
            f"'{optimizer.prefix}' names, and the unprefixed ones of each class it does not give) "
            f"must be one sufficient pair: {exc} Give e.g. {optimizer.prefix}base_lr and share "
            f"tau_epoch, or {optimizer.prefix}base_lr + {optimizer.prefix}tau_epoch."
        ) from exc
    return base_point({k: coords[v] for k, v in pair.items()}, base)


def family_group(
    optimizer: Optimizer,
    group: str,
    rule: Rule,
    base: Scale,
    target: Scale,
    point: tuple[float, float],
    kappa: float,
) -> dict[str, float]:
    """One family group's ``lr``, ``weight_decay``, ``independent_wd`` at ``target``.

    ``point`` is the family's (γ₀, λ₀) at ``base`` with the dataset rule's factor already on λ₀.
    γ = γ₀ × :meth:`lr_factor`; γλ = γ₀λ₀ × the rule's ηλ factor for the group (its AdamW lr ×
    weight-decay factors), so τ_iter moves as the rule's; then, with a batch rule at κ ≠ 1,
    γ̂ = γ·κ^batch_lr_exponent and λ̂ by decay matching (Busbridge et al. 2023, Eq. 11–13).
    """
    lr0, wd0 = point
    adamw = rule.factors(base, target)[group]
    lr = lr0 * optimizer.lr_factor(rule, group, base, target)
    wd = lr0 * wd0 * adamw.lr * adamw.weight_decay / lr
    if rule.batch_rule is not None and kappa != 1.0:
        new_lr = lr * kappa**optimizer.batch_lr_exponent
        wd = match_decay(lr, wd, new_lr, kappa)
        lr = new_lr
    return {"lr": lr, "weight_decay": wd, "independent_wd": lr * wd}


def family_coordinate(
    name: str,
    optimizer: Optimizer,
    group: str,
    values: Mapping[str, float],
    rule: Rule,
    base: Scale,
    target: Scale,
    dataset_factor: float,
    kappa: float,
) -> float:
    """Invert :func:`family_group` for one prefixed coordinate ``name`` of the family."""
    stem = name[len(optimizer.prefix) :]
    if stem in optimizer.settings:
        return float(values[stem])
    lr, product = float(values["lr"]), float(values["lr"]) * float(values["weight_decay"])
    if rule.batch_rule is not None and kappa != 1.0:
        lr /= kappa**optimizer.batch_lr_exponent
        product = rule.batch_rule.invert_eta_lambda(product, kappa)
    adamw = rule.factors(base, target)[group]
    lr0 = lr / optimizer.lr_factor(rule, group, base, target)
    product0 = product / (adamw.lr * adamw.weight_decay) / dataset_factor
    return coordinate_from_base_point(stem, lr0, product0 / lr0, base)


def optimizer_to_dict(optimizer: Optimizer) -> dict[str, Any]:
    """``{"family": "muon", "adjust_lr_fn": ..., ...}``: JSON-ready; :func:`optimizer_from_dict`."""
    data = {f.name: getattr(optimizer, f.name) for f in dataclasses.fields(optimizer)}
    if "betas" in data:
        data["betas"] = list(data["betas"])
    return {"family": optimizer.family, **data}


def optimizer_from_dict(data: Mapping[str, Any]) -> Optimizer:
    """Inverse of :func:`optimizer_to_dict`.

    Raises:
        TransferSearchError: an unknown family or keyword.
    """
    if not isinstance(data, Mapping) or data.get("family") not in FAMILIES:
        raise TransferSearchError(
            f"an optimizer entry must be a dict with 'family' one of {sorted(FAMILIES)}, but got "
            f"{data!r}."
        )
    cls = FAMILIES[data["family"]]
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known - {"family"})
    if unknown:
        raise TransferSearchError(
            f"the {data['family']} entry has unknown keywords {unknown}; known: {sorted(known)}."
        )
    values: dict[str, Any] = {
        k: (tuple(v) if k == "betas" else v) for k, v in data.items() if k != "family"
    }
    return cls(**values)

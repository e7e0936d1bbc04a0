"""Concrete AdamW hyperparameters at one scale: :class:`Hyperparameters`, what
:meth:`TransferSpace.concretize <transfersearch.space.TransferSpace.concretize>` returns.
Public through :mod:`transfersearch.space` and ``transfersearch``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from transfersearch import errors
from transfersearch._coordinates import check_value, tau_epoch_from_eta_lambda
from transfersearch._frozen import FrozenDict
from transfersearch.errors import Allowed, Interval, TransferSearchError, check_positive
from transfersearch.optimizers import (
    Lion,
    Muon,
    Optimizer,
    optimizer_from_dict,
    optimizer_to_dict,
)
from transfersearch.rules import ALL_GROUPS, BLOCK_VECTOR, GROUPS, AppliedBetaForm, check_betas
from transfersearch.scale import Scale, whole_number

__all__ = ["WEIGHT_DECAY", "Hyperparameters", "checked_optimizers"]

#: What a group's ``weight_decay`` or ``independent_wd`` may be.
WEIGHT_DECAY = Allowed(Interval(Real, 0), fix="Weight decay is 0 (none) or positive.")


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
        errors.check_value(f"groups.{group}.{name}", values[name], WEIGHT_DECAY)


def _plain_positive(value: object) -> bool:
    """A float in (0, inf): what ``check_positive`` accepts and returns unchanged."""
    return type(value) is float and 0.0 < value < math.inf


def _plain_count(value: object) -> bool:
    """None, an int or a float in (0, inf): a batch size or a number of steps
    ``whole_number(check_positive(...))`` accepts."""
    if value is None:
        return True
    if type(value) is int:
        return 0 < value < 2**1023
    return _plain_positive(value)


def _plain_fields(fields: Mapping[str, Any]) -> bool:
    """Whether every field but ``groups`` is in the plain form that ``__post_init__`` accepts
    and stores unchanged (up to ``whole_number`` on the counts): Scales, floats in range, a
    pair of betas in [0, 1), dicts, tuples, and no optimizer family."""
    base, ema = fields["base"], fields["ema_momentum"]
    betas, forms = fields["betas"], fields["beta_forms"]
    return (
        type(fields["scale"]) is Scale
        and (base is None or type(base) is Scale)
        and _plain_positive(fields["eps"])
        and _plain_positive(fields["residual_multiplier"])
        and (ema is None or (type(ema) is float and 0.0 <= ema < 1.0))
        and type(betas) is tuple
        and len(betas) == 2
        and all(type(b) is float and 0.0 <= b < 1.0 for b in betas)
        and type(forms) is tuple
        and len(forms) == 2
        and all(f in ("unchanged", "linear", "power") for f in forms)
        and _plain_count(fields["batch_size"])
        and _plain_count(fields["total_steps"])
        and type(fields["coordinates"]) is dict
        and type(fields["extra"]) is dict
        and type(fields["notes"]) is tuple
        and type(fields["width_lr_multipliers"]) is dict
        and not fields["optimizers"]
    )


def _plain_groups(
    groups: Mapping[str, Mapping[str, float]], eps: float
) -> Mapping[str, Mapping[str, float]] | None:
    """``groups`` frozen as ``__post_init__`` freezes them (a group without ``eps`` gets
    ``eps``) when they are a dict of dicts of plain floats that ``_check_group`` accepts; None
    for anything else (the constructor checks it then)."""
    if type(groups) is not dict or not all(g in groups for g in GROUPS):
        return None
    frozen = {}
    for group, values in groups.items():
        if type(values) is not dict:
            return None
        if group in ALL_GROUPS:
            if not _plain_positive(values.get("lr")):
                return None
            if "eps" in values and not _plain_positive(values["eps"]):
                return None
            for name in ("weight_decay", "independent_wd"):
                decay = values.get(name)
                if not (type(decay) is float and 0.0 <= decay < math.inf):
                    return None
        copied = dict(values)
        copied.setdefault("eps", eps)
        frozen[group] = FrozenDict(copied)
    return FrozenDict(frozen)


def checked_optimizers(optimizers: object) -> Mapping[str, Optimizer]:
    """``optimizers`` as a frozen group → :class:`~transfersearch.optimizers.Muon`/``Lion`` map
    (a dict from :func:`~transfersearch.optimizers.optimizer_to_dict` is read back).

    Raises:
        TransferSearchError: not a mapping, an unknown group, or a value that is no family.
    """
    if not isinstance(optimizers, Mapping):
        raise TransferSearchError(
            f"`optimizers` must map groups to Muon() or Lion(), but got {optimizers!r}."
        )
    checked: dict[str, Optimizer] = {}
    for group, value in optimizers.items():
        if group not in ALL_GROUPS:
            raise TransferSearchError(
                f"`optimizers` names the group {group!r}: the groups are {ALL_GROUPS}."
            )
        if isinstance(value, Mapping):
            value = optimizer_from_dict(value)
        if not isinstance(value, (Muon, Lion)):
            raise TransferSearchError(
                f"`optimizers[{group!r}]` must be transfersearch.optimizers.Muon() or Lion() (a "
                f"group not named runs AdamW), but got {value!r}."
            )
        checked[group] = value
    return FrozenDict(checked)


def _frozen_groups(groups: Mapping[str, Mapping[str, float]]) -> Mapping[str, Mapping[str, float]]:
    # FrozenDict, not a mappingproxy: read-only, and json.dumps(hp.groups) works (issue 49)
    return FrozenDict({g: FrozenDict(dict(groups[g])) for g in groups})


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
    #: The groups run by another family than AdamW (``{"hidden": Muon()}``); a group not named
    #: runs AdamW. Such a group's values carry the family's own keys (Muon: ``momentum``; Lion:
    #: ``beta1``, ``beta2``); its ``eps`` is the family's (Muon's 1e-7).
    optimizers: Mapping[str, Optimizer] = field(default_factory=dict)

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
        object.__setattr__(self, "coordinates", FrozenDict(dict(self.coordinates)))
        object.__setattr__(self, "extra", FrozenDict(dict(self.extra)))
        object.__setattr__(self, "betas", check_betas(self.betas))
        object.__setattr__(
            self,
            "residual_multiplier",
            check_positive("residual_multiplier", self.residual_multiplier),
        )
        if self.ema_momentum is not None:
            check_value("ema_momentum", self.ema_momentum)
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
        object.__setattr__(self, "optimizers", checked_optimizers(self.optimizers))
        object.__setattr__(
            self,
            "width_lr_multipliers",
            FrozenDict({g: float(v) for g, v in self.width_lr_multipliers.items()}),
        )

    @classmethod
    def _built(cls, **fields: Any) -> Hyperparameters:
        """What the constructor makes of ``fields`` (every field, by name), for values the
        library computed (:meth:`TransferSpace.concretize
        <transfersearch.space.TransferSpace.concretize>`).

        Every value the constructor checks is checked here too, but only for the plain form such
        code gives (floats in range, dicts, tuples, no other optimizer family): the fields are
        then stored exactly as ``__post_init__`` stores them. Anything else, valid or not, goes
        through the constructor, so an invalid value raises its error, word for word.
        """
        groups = _plain_groups(fields["groups"], fields["eps"])
        if groups is None or not _plain_fields(fields):
            return cls(**fields)
        batch_size, total_steps = fields["batch_size"], fields["total_steps"]
        multipliers = fields["width_lr_multipliers"]
        hp = object.__new__(cls)
        # the fields in declaration order, stored as __post_init__ stores them
        hp.__dict__.update(
            scale=fields["scale"],
            groups=groups,
            betas=fields["betas"],
            eps=fields["eps"],
            ema_momentum=fields["ema_momentum"],
            batch_size=None if batch_size is None else whole_number(float(batch_size)),
            total_steps=None if total_steps is None else whole_number(float(total_steps)),
            coordinates=FrozenDict(fields["coordinates"]),
            extra=FrozenDict(fields["extra"]),
            notes=fields["notes"],
            base=fields["base"],
            width_lr_multipliers=FrozenDict({g: float(v) for g, v in multipliers.items()}),
            beta_forms=fields["beta_forms"],
            residual_multiplier=fields["residual_multiplier"],
            optimizers=FrozenDict(),
        )
        return hp

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

    def optimizer(self, group: str) -> str:
        """The family that runs ``group``: ``"adamw"``, ``"muon"`` or ``"lion"``.

        Raises:
            TransferSearchError: ``group`` is not a group.
        """
        self.group(group)
        found = self.optimizers.get(group)
        if found is None and group == BLOCK_VECTOR and BLOCK_VECTOR not in self.groups:
            found = self.optimizers.get("vector")
        return "adamw" if found is None else found.family

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
        """A JSON-friendly dict; :meth:`from_dict` reads it back. ``optimizers`` (group → the
        family's settings, :func:`~transfersearch.optimizers.optimizer_to_dict`) is there only
        when a group runs another family than AdamW."""
        data = {
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
        if self.optimizers:
            data["optimizers"] = {g: optimizer_to_dict(o) for g, o in self.optimizers.items()}
        return data

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
                optimizers=data.get("optimizers", {}),
            )
        except TransferSearchError:
            raise
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise TransferSearchError(
                f"cannot read Hyperparameters from the dict with keys {sorted(map(str, data))}: "
                f"{exc!r}. Pass a dict made by Hyperparameters.to_dict()."
            ) from exc

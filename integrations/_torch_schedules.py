"""Learning-rate and weight-decay schedules for torch optimizers (private; see ``torch.py``).

The formulas live in :mod:`transfersearch.rules`; this module only evaluates them per param group
and step, in the shape ``torch.optim.lr_scheduler.LambdaLR`` wants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from transfersearch.errors import TransferSearchError, check_positive
from transfersearch.rules import (
    ALL_GROUPS,
    decay_away_warmup_factor,
    exp_warmup_factor,
    su_constant_wd_lr,
    su_proportional_lr_wd,
)
from transfersearch.space import Hyperparameters

__all__ = ["KINDS", "WARMUPS", "Multiplier", "WeightDecaySchedule", "schedule"]

#: Schedule shapes (the part after warmup).
KINDS = ("constant", "linear", "cosine", "wsd", "su_constant_wd", "su_proportional")
#: Warmup factors; several may be combined (their product is used).
WARMUPS = ("linear", "exp", "decay_away")
_PER_GROUP_KINDS = ("su_constant_wd", "su_proportional")
_WIDTH_WARMUPS = ("exp", "decay_away")
Convention = Literal["coupled", "independent"]


@dataclass
class Multiplier:
    """The learning-rate multiplier of one param group: ``shape(step) × warmup(step)``.

    A callable for ``LambdaLR`` (plain fields, so LambdaLR's state_dict saves and restores it).
    ``lr`` and ``weight_decay`` are the group's peak values (coupled convention), read by Su's
    schedules and the decay-away warmup; ``width_warmup`` says whether Kosson's width warmup
    factors apply to this group.
    """

    group: str | None
    total_steps: float
    kind: str
    warmups: tuple[str, ...]
    warmup_steps: float
    exp_warmup_steps: float
    width_mult: float
    lr: float
    weight_decay: float
    final_fraction: float
    decay_fraction: float
    width_warmup: bool

    # -- the shape after warmup ----------------------------------------------------------------
    def _progress(self, step: int) -> float:
        start = self.warmup_steps if "linear" in self.warmups else 0.0
        span = self.total_steps - start
        return min(1.0, max(0.0, (step - start) / span)) if span > 0 else 1.0

    def shape(self, step: int) -> float:
        """The schedule's shape: 1 at the peak.

        constant: 1. linear: 1 → f over [T_w, T]. cosine: f + (1 − f)(1 + cos πp)/2 on the same
        span. wsd (warmup-stable-decay): 1 until the last ``decay_fraction`` of T, then linear to f.
        su_constant_wd: η_s/η_max = 1/(λη_max s + 1); su_proportional: 1/√(2λ_max η_max s + 1)
        (Su, kexue.fm/archives/11459: every batch keeps equal weight in the final weights;
        ``rules.su_constant_wd_lr`` / ``rules.su_proportional_lr_wd``). f = ``final_fraction``.
        """
        f = self.final_fraction
        if self.kind == "constant":
            return 1.0
        if self.kind == "linear":
            return 1.0 - (1.0 - f) * self._progress(step)
        if self.kind == "cosine":
            return f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * self._progress(step)))
        if self.kind == "wsd":
            decay_steps = self.decay_fraction * self.total_steps
            start = self.total_steps - decay_steps
            if step <= start or decay_steps <= 0:
                return 1.0
            return 1.0 - (1.0 - f) * min(1.0, (step - start) / decay_steps)
        if self.kind == "su_constant_wd":
            return float(su_constant_wd_lr(step, self.lr, self.weight_decay)) / self.lr
        if self.weight_decay == 0.0:  # su_proportional without decay: nothing to equalise
            return 1.0
        lr_s, _ = su_proportional_lr_wd(step, self.lr, self.weight_decay)
        return float(lr_s) / self.lr

    def warmup(self, step: int) -> float:
        """The product of the warmup factors at ``step``.

        linear: min(1, (t + 1)/T_w) (the first step is not wasted at lr 0). exp: Kosson et al. §7
        Eq. 12 as adopted in docs/science.md §2, s^(−max(0, 1 − t/T_exp)) (``rules.exp_warmup_factor``).
        decay_away: Eq. 13, 1 − (1 − 1/s)(1 − ηλ)^t (``rules.decay_away_warmup_factor``). The two
        width factors apply only to groups with ``width_warmup`` (default: hidden and output, the
        groups whose lr µP would divide by s). They stand in for µP's 1/s, so the group's lr must
        be the base width's (``rules.Standard``): :func:`schedule` refuses a µP-scaled group.
        """
        factor = 1.0
        for name in self.warmups:
            if name == "linear":
                factor *= min(1.0, (step + 1) / self.warmup_steps)
            elif not self.width_warmup or self.width_mult == 1.0:
                continue
            elif name == "exp":
                factor *= float(exp_warmup_factor(step, self.width_mult, self.exp_warmup_steps))
            else:
                factor *= float(
                    decay_away_warmup_factor(step, self.width_mult, self.lr, self.weight_decay)
                )
        return factor

    def __call__(self, step: int) -> float:
        return self.shape(step) * self.warmup(step)

    def weight_decay_factor(self, step: int, convention: Convention = "coupled") -> float:
        """The multiplier of the group's ``weight_decay`` at ``step``.

        Coupled (torch.optim.AdamW multiplies λ by the scheduled lr itself): λ_s/λ_max =
        1/√(2λ_max η_max s + 1) for su_proportional, else 1. Independent (decay λ' not multiplied
        by lr): the lr multiplier times the coupled one, so that the per-step decay η_s λ_s matches.
        """
        coupled = 1.0
        if self.kind == "su_proportional" and self.weight_decay > 0.0:
            _, wd_s = su_proportional_lr_wd(step, self.lr, self.weight_decay)
            coupled = float(wd_s) / self.weight_decay
        return coupled if convention == "coupled" else coupled * self(step)


def _group_names(groups: Sequence[Mapping[str, Any]] | torch.optim.Optimizer) -> list[str]:
    items = groups.param_groups if isinstance(groups, torch.optim.Optimizer) else groups
    names: list[str] = []
    for index, group in enumerate(items):
        name = group.get("name") if isinstance(group, Mapping) else None
        if name not in ALL_GROUPS:
            raise TransferSearchError(
                f"param group {index} has name={name!r}; `groups` must be the list returned by "
                f"param_groups() or an optimizer built from it (names in {ALL_GROUPS})."
            )
        names.append(str(name))
    return names


def schedule(
    hp: Hyperparameters,
    total_steps: float,
    kind: str = "constant",
    *,
    warmup: str | Sequence[str] | None = None,
    warmup_steps: float = 0.0,
    exp_warmup_steps: float | None = None,
    width_mult: float | None = None,
    groups: Sequence[Mapping[str, Any]] | torch.optim.Optimizer | None = None,
    final_fraction: float = 0.0,
    decay_fraction: float = 0.2,
    warmup_groups: Sequence[str] = ("hidden", "output"),
) -> Multiplier | list[Multiplier]:
    """Learning-rate multipliers for ``torch.optim.lr_scheduler.LambdaLR``.

    ``LambdaLR(opt, schedule(hp, T, "cosine", warmup="linear", warmup_steps=100))``. The multiplier
    is ``shape(t) × warmup(t)`` (see :meth:`Multiplier.shape` and :meth:`Multiplier.warmup`). Su's
    kinds and Kosson's width warmups ("exp", "decay_away") differ per group, so they need
    ``groups`` (the list from :func:`param_groups`, or the optimizer) and return one multiplier per
    group in that order; for the weight decay of ``su_proportional`` add
    :class:`WeightDecaySchedule`.

    Kosson's width warmups replace µP's learning-rate scaling, they do not add to it. Kosson et al.
    (§7, App. F.3.5) multiply the lr by a factor that starts at 1/s and relaxes to 1 *instead of*
    µP's η_base/s (which acts as such a warmup already, their §6). On a group whose lr the rule has
    already divided by s (``rules.MuP``: hidden and output) the first lr would be η_base/s² — at
    s = 4, 0.0625·η_base — so that combination is refused: concretize ``hp`` with
    ``rules.Standard()`` (η and λ unchanged with width, so ηλ stays constant as under independent
    scaling) to use the warmups, or keep µP and drop "exp"/"decay_away". (Kosson et al. applied the
    factors to all parameters; the default ``warmup_groups`` are the width-dependent ones.)

    Args:
        hp: the hyperparameters the groups were built from (their lr and coupled weight decay).
        total_steps: T, the number of optimizer steps.
        kind: one of :data:`KINDS`.
        warmup: None, one of :data:`WARMUPS`, or several (multiplied), e.g. ("linear", "exp") —
            Kosson et al. applied their factors on top of a linear warmup.
        warmup_steps: T_w of the linear warmup (and of "exp" unless ``exp_warmup_steps``); must be
            shorter than ``total_steps``.
        exp_warmup_steps: T_exp of the "exp" warmup, shorter than ``total_steps``.
        width_mult: s = width / base width, for "exp" and "decay_away"; defaults to
            ``hp.width_mult`` (set by ``TransferSpace.concretize``).
        groups: param groups or optimizer; needed for per-group schedules.
        final_fraction: lr at the end of linear/cosine/wsd, as a fraction of the peak.
        decay_fraction: the share of T spent decaying in wsd.
        warmup_groups: the groups the width warmups apply to.

    Returns:
        One :class:`Multiplier` (same for every group) without ``groups``, else a list aligned
        with ``groups``.

    Raises:
        TransferSearchError: an unknown kind or warmup, a missing ``warmup_steps``,
            ``width_mult`` or ``groups``, a warmup as long as the run or longer, a width warmup
            on a group without weight decay or on a group whose lr µP already divides by s.
    """
    total = check_positive("total_steps", total_steps)
    if kind not in KINDS:
        raise TransferSearchError(f"`kind` must be one of {KINDS}, but got kind={kind!r}.")
    warmups = _check_warmups(warmup)
    exp_steps = _check_warmup_steps(warmups, warmup_steps, exp_warmup_steps, total)
    _check_fractions_and_groups(final_fraction, decay_fraction, warmup_groups)
    width_warmup = any(name in _WIDTH_WARMUPS for name in warmups)
    s = _width_mult(hp, width_mult, warmup, width_warmup)
    per_group = kind in _PER_GROUP_KINDS or (width_warmup and s != 1.0)

    def make(group: str | None) -> Multiplier:
        values = hp.group(group if group is not None else "hidden")
        applies = group in warmup_groups
        if width_warmup and applies and s != 1.0 and group is not None:
            _check_not_mup_scaled(hp, group, s, warmups)
        if "decay_away" in warmups and applies and s != 1.0 and values["weight_decay"] <= 0.0:
            raise TransferSearchError(
                f"warmup='decay_away' relaxes on the timescale 1/(lr*weight_decay), but group "
                f"{group!r} has weight_decay=0. Drop it from `warmup_groups` or use warmup='exp'."
            )
        return Multiplier(
            group=group,
            total_steps=total,
            kind=kind,
            warmups=warmups,
            warmup_steps=float(warmup_steps),
            exp_warmup_steps=float(exp_steps),
            width_mult=s,
            lr=float(values["lr"]),
            weight_decay=float(values["weight_decay"]),
            final_fraction=float(final_fraction),
            decay_fraction=float(decay_fraction),
            width_warmup=applies,
        )

    if groups is None:
        if per_group:
            raise TransferSearchError(
                f"schedule(kind={kind!r}, warmup={warmup!r}) differs per param group: pass "
                "groups=param_groups(...) (or the optimizer) to get one multiplier per group."
            )
        return make(None)
    return [make(name) for name in _group_names(groups)]


def _check_warmups(warmup: str | Sequence[str] | None) -> tuple[str, ...]:
    """The warmup names as a tuple, each one of :data:`WARMUPS`."""
    warmups = () if warmup is None else (warmup,) if isinstance(warmup, str) else tuple(warmup)
    for name in warmups:
        if name not in WARMUPS:
            raise TransferSearchError(
                f"`warmup` must be None or from {WARMUPS}, but got warmup={warmup!r}."
            )
    return warmups


def _check_warmup_steps(
    warmups: tuple[str, ...], warmup_steps: float, exp_warmup_steps: float | None, total: float
) -> float:
    """Check the warmups' lengths (positive, shorter than the run); return T_exp of "exp"."""
    if "linear" in warmups:
        check_positive("warmup_steps", warmup_steps, fix="Give warmup_steps=... for the warmup.")
        _check_shorter_than_run("warmup_steps", warmup_steps, total)
    exp_steps = warmup_steps if exp_warmup_steps is None else exp_warmup_steps
    if "exp" in warmups:
        exp_steps = check_positive(
            "exp_warmup_steps", exp_steps, fix="Give warmup_steps or exp_warmup_steps."
        )
        _check_shorter_than_run("exp_warmup_steps", exp_steps, total)
    return exp_steps


def _check_fractions_and_groups(
    final_fraction: float, decay_fraction: float, warmup_groups: Sequence[str]
) -> None:
    if not 0.0 <= final_fraction <= 1.0 or not 0.0 <= decay_fraction <= 1.0:
        raise TransferSearchError(
            f"`final_fraction` and `decay_fraction` must lie in [0, 1], but got "
            f"{final_fraction=}, {decay_fraction=}."
        )
    bad = [g for g in warmup_groups if g not in ALL_GROUPS]
    if bad:
        raise TransferSearchError(
            f"`warmup_groups` {bad} are not groups; use names in {ALL_GROUPS}."
        )


def _width_mult(
    hp: Hyperparameters,
    width_mult: float | None,
    warmup: str | Sequence[str] | None,
    width_warmup: bool,
) -> float:
    """s = width / base width (default ``hp.width_mult``); a width warmup needs it, else 1."""
    if width_mult is None:
        width_mult = hp.width_mult
    if width_warmup and width_mult is None:
        raise TransferSearchError(
            f"warmup={warmup!r} needs `width_mult` (s = width / base width), and these "
            "hyperparameters carry no base width: pass width_mult=hp.scale['width'] / "
            "space.base['width']."
        )
    return 1.0 if width_mult is None else check_positive("width_mult", width_mult)


def _check_shorter_than_run(name: str, steps: float, total: float) -> None:
    """A warmup must end inside the run: else the peak lr is never reached (or never left)."""
    if steps >= total:
        raise TransferSearchError(
            f"`{name}` must be shorter than the run, but got {name}={steps:g} >= "
            f"total_steps={total:g}: the lr would never reach its peak (and a cosine or linear "
            f"decay would have no steps left). Lower {name} (e.g. 5-10% of total_steps) or check "
            "total_steps."
        )


def _check_not_mup_scaled(
    hp: Hyperparameters, group: str, s: float, warmups: tuple[str, ...]
) -> None:
    """Refuse Kosson's width warmups on a group whose lr the rule already divided by width."""
    lr_mult = hp.width_lr_multipliers.get(group, 1.0)
    if lr_mult == 1.0:
        return
    width = [w for w in warmups if w in _WIDTH_WARMUPS]
    raise TransferSearchError(
        f"warmup={width!r} starts group {group!r} at 1/s = {1.0 / s:g} of its lr, but the rule "
        f"already multiplied that lr by {lr_mult:g} for width (µP: 1/s), so the first lr would be "
        f"{lr_mult / s:g}·lr_base. Kosson et al. (§7, App. F.3.5) use these factors instead of "
        "µP's lr scaling, not on top of it. Concretize hp with rules.Standard() (lr and weight "
        "decay unchanged with width: lr·weight_decay constant, as under independent scaling) to "
        "use the width warmup, or keep µP and drop 'exp'/'decay_away' (µP's 1/s is already a "
        "warmup, Kosson et al. §6)."
    )


class WeightDecaySchedule:
    """Updates each param group's ``weight_decay`` per step, like an lr scheduler does ``lr``.

    ``weight_decay = initial_weight_decay × multiplier.weight_decay_factor(step, convention)``,
    where ``initial_weight_decay`` is the group's value when the schedule is built (stored in the
    group, as LambdaLR stores ``initial_lr``). Call :meth:`step` after ``optimizer.step()``. With
    ``kind="su_proportional"`` this gives Su's λ_s = λ_max/√(2λ_max η_max s + 1).

    Args:
        optimizer: built from :func:`param_groups`.
        multipliers: what :func:`schedule` returned for the same optimizer.
        convention: the convention of the groups' ``weight_decay`` (as in :func:`param_groups`).

    Raises:
        TransferSearchError: multipliers that do not line up with the optimizer's groups.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        multipliers: Multiplier | Sequence[Multiplier],
        convention: Convention = "coupled",
    ) -> None:
        if convention not in ("coupled", "independent"):
            raise TransferSearchError(
                f"`convention` must be 'coupled' or 'independent', but got {convention!r}."
            )
        count = len(optimizer.param_groups)
        if isinstance(multipliers, Multiplier):
            multipliers = [multipliers] * count
        multipliers = list(multipliers)
        if len(multipliers) != count:
            raise TransferSearchError(
                f"got {len(multipliers)} multipliers for {count} param groups; pass "
                "schedule(..., groups=optimizer)."
            )
        for group, mult in zip(optimizer.param_groups, multipliers):
            if mult.group is not None and group.get("name") != mult.group:
                raise TransferSearchError(
                    f"multiplier for group {mult.group!r} meets param group "
                    f"{group.get('name')!r}; build the schedule with groups=optimizer."
                )
            group.setdefault("initial_weight_decay", group["weight_decay"])
        self.optimizer = optimizer
        self.multipliers = multipliers
        self.convention: Convention = convention
        self.last_step = 0
        self._apply()

    def _apply(self) -> None:
        for group, mult in zip(self.optimizer.param_groups, self.multipliers):
            factor = mult.weight_decay_factor(self.last_step, self.convention)
            group["weight_decay"] = group["initial_weight_decay"] * factor

    def step(self) -> None:
        """Advance one step and set every group's weight decay."""
        self.last_step += 1
        self._apply()

    def get_last_weight_decay(self) -> list[float]:
        """The weight decay of each group now."""
        return [float(group["weight_decay"]) for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """``{"version": 1, "last_step": n}`` (the multipliers are rebuilt from ``hp``)."""
        return {"version": 1, "last_step": self.last_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` and re-apply the weight decay of that step."""
        if state.get("version") != 1 or "last_step" not in state:
            raise TransferSearchError(
                f"WeightDecaySchedule state must come from state_dict() (version 1), got {state!r}."
            )
        self.last_step = int(state["last_step"])
        self._apply()

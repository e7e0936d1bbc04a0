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
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from transfersearch._coordinates import (
    COORDINATES,
    LR_COORDS,
    PRODUCT_COORDS,
    TYPO_SIMILARITY,
    WD_COORDS,
    base_point,
    check_distribution,
    check_sufficient,
    check_value,
    check_weight_decay,
    close_coordinates,
    coordinate_from_base_point,
    eta_lambda_from_tau_epoch,
    outside_note,
    tau_epoch_from_eta_lambda,
)
from transfersearch._distributions import Choice, Distribution, Float, Int, is_number
from transfersearch._hyperparameters import Hyperparameters, checked_optimizers
from transfersearch.errors import (
    POSITIVE,
    Allowed,
    InstanceOf,
    Names,
    TransferSearchError,
    TransferSearchWarning,
    check_positive,
    check_table,
)
from transfersearch.optimizers import (
    Muon,
    Optimizer,
    family_base_point,
    family_coordinate,
    family_coordinate_names,
    family_group,
    muon_width_lr_factor,
)
from transfersearch.rules import (
    BLOCK_VECTOR,
    AppliedBetaForm,
    BatchRule,
    BatchTransfer,
    GroupFactors,
    MuP,
    Rule,
    check_betas,
    scale_ema_momentum,
)
from transfersearch.scale import KNOWN_SCALE_NAMES, Scale

#: What other modules import from here; the public names are ``transfersearch.__all__``. The
#: distributions, the coordinate algebra and Hyperparameters live in the private modules above.
__all__ = [
    "Choice",
    "Distribution",
    "Float",
    "Hyperparameters",
    "Int",
    "TransferSpace",
    "base_point",
    "eta_lambda_from_tau_epoch",
    "tau_epoch_from_eta_lambda",
]


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


def _group_factors(rule: Rule, base: Scale, target: Scale) -> dict[str, GroupFactors]:
    """The rule's width and depth factors of each group at ``target``; "block_vector" only when
    the rule splits it from "vector"."""
    factors = rule.factors(base, target)
    if not rule.splits_block_vectors:
        del factors[BLOCK_VECTOR]
    return factors


def _moved_groups(
    rule: Rule,
    factors: Mapping[str, GroupFactors],
    target: Scale,
    base_point: tuple[float, float],
    betas: tuple[float, float],
    eps: float,
    kappa: float,
) -> tuple[dict[str, dict[str, float]], BatchTransfer]:
    """Each group's values at ``target`` from the base point (η₀, λ₀ with the dataset factor):
    the rule's width and depth ``factors`` (:func:`_group_factors`), then its batch rule at
    ``kappa``; and the space-wide (betas, eps) the batch rule gives (``hp.eps``: ε before any
    group's factor)."""
    lr0, wd0 = base_point
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


def _space_optimizers(optimizers: Mapping[str, Optimizer] | None) -> Mapping[str, Optimizer]:
    """The space's group → family map, each family on groups its rule is derived for.

    Raises:
        TransferSearchError: an unknown group, a value that is no family, Muon on a group other
            than "hidden", or one family on groups that would need two base points.
    """
    checked = checked_optimizers({} if optimizers is None else optimizers)
    for group, optimizer in checked.items():
        if group not in optimizer.groups:
            raise TransferSearchError(
                f"optimizers={{{group!r}: {optimizer!r}}}: {optimizer.family}'s rule is derived "
                f"for the groups {optimizer.groups} only (torch.optim.Muon takes 2-D hidden "
                "matrices; embeddings, the output head, biases and gains go to AdamW: "
                "docs/muon.md). Leave that group out (it runs AdamW)."
            )
    families: dict[str, Optimizer] = {}
    for optimizer in checked.values():
        if families.setdefault(optimizer.family, optimizer) != optimizer:
            raise TransferSearchError(
                f"the family {optimizer.family!r} is given twice with different settings "
                f"({families[optimizer.family]!r} and {optimizer!r}): its groups share one base "
                "point and one set of settings. Give the same object to each group."
            )
    return checked


def _warn_stray_prefixes(coords: Mapping[str, Any], optimizers: Mapping[str, Optimizer]) -> None:
    """Warn about ``muon_``/``lion_`` names in a space whose groups do not run that family: they
    pass through into ``hp.extra`` and set nothing."""
    prefixes = {o.prefix for o in optimizers.values()}
    stray = [
        n
        for n in coords
        if any(n.startswith(p) for p in ("muon_", "lion_"))
        and not any(n.startswith(p) for p in prefixes)
    ]
    if stray:
        warnings.warn(
            f"coordinates {stray} name an optimizer family that no group of this space runs, so "
            "they pass through unchanged into hp.extra. Declare the family, e.g. "
            "TransferSpace(..., optimizers={'hidden': transfersearch.optimizers.Muon()}).",
            TransferSearchWarning,
            stacklevel=3,
        )


def _family_batch_notes(
    optimizers: Mapping[str, Optimizer], kappa: float, has_batch_rule: bool
) -> list[str]:
    """The stated position on batch size for each family group at κ ≠ 1 (docs/science.md §11.4)."""
    if kappa == 1.0 or not has_batch_rule:
        return []
    return [
        f"{group} group ({optimizer.family}) at kappa={kappa:g}: no verified batch rule for "
        f"{optimizer.family}, so its lr is multiplied by kappa**batch_lr_exponent = "
        f"{kappa**optimizer.batch_lr_exponent:.4g} (your choice) and its momentum/betas are "
        "kept; its weight decay is decay-matched (tau_epoch kept). A ladder that varies the "
        "batch size lets the fit learn the drift"
        for group, optimizer in optimizers.items()
    ]


#: What the arguments of :class:`TransferSpace` other than ``base`` and ``coords`` may be
#: (``ema_momentum`` is checked by :func:`~transfersearch.rules.scale_ema_momentum`).
SPACE_ARGUMENTS: Mapping[str, Allowed] = {
    "rule": Allowed(InstanceOf(Rule, "a transfersearch.rules.Rule such as rules.MuP()")),
    "eps": Allowed(POSITIVE, fix="Adam's eps must be > 0, e.g. eps=1e-8."),
    "custom_scale_names": Allowed(Names(), fix="E.g. custom_scale_names=('heads',)."),
}


def _space_arguments(
    rule: Rule | None, eps: float, custom_scale_names: Iterable[str]
) -> dict[str, Any]:
    """The space's ``rule`` (default ``rules.MuP()``), ``eps`` and ``custom_scale_names`` (a
    single name or any iterable of names, as a tuple), checked against :data:`SPACE_ARGUMENTS`."""
    if isinstance(custom_scale_names, str):
        custom_scale_names = (custom_scale_names,)
    if isinstance(custom_scale_names, Iterable):
        custom_scale_names = tuple(custom_scale_names)
    given = {
        "rule": MuP() if rule is None else rule,
        "eps": eps,
        "custom_scale_names": custom_scale_names,
    }
    return check_table(SPACE_ARGUMENTS, given)


class _AtTarget(NamedTuple):
    """What :meth:`TransferSpace.concretize` computes from the target scale alone (the rule's
    factors and notes there), for every coordinates at that scale."""

    target: Scale
    dataset_factor: float
    dataset_notes: tuple[str, ...]
    depth_notes: tuple[str, ...]
    kappa: float
    lr_multipliers: tuple[tuple[str, float], ...]
    factors: Mapping[str, GroupFactors]
    family_batch_notes: tuple[str, ...]
    residual_multiplier: float


#: Per space, the state its targets were computed in (base, rule, custom scale names,
#: optimizers: compared by identity, a reassigned one starts afresh) and, per requested scale,
#: its :class:`_AtTarget`. Outside the space so that it is never pickled or copied with it.
_AT_TARGETS: weakref.WeakKeyDictionary[
    TransferSpace, tuple[tuple[object, ...], dict[Scale | None, _AtTarget]]
] = weakref.WeakKeyDictionary()
#: Targets kept per space (a space asked for more starts again: the rungs of a ladder fit).
_AT_TARGETS_KEPT = 64


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
        optimizers: groups run by another family than AdamW, e.g. ``{"hidden": Muon()}``
            (:mod:`transfersearch.optimizers`; docs/muon.md). The unprefixed coordinates are then
            the AdamW groups' base point; ``muon_base_lr``, ``muon_tau_epoch``, ... the Muon
            group's, each class the prefix does not give being shared with the unprefixed
            coordinates (``base_lr``, ``tau_epoch``, ``muon_base_lr``: one τ_epoch, two lrs).
            ``muon_momentum`` (``lion_beta1``, ``lion_beta2``) replaces the family's default.

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
        optimizers: Mapping[str, Optimizer] | None = None,
    ) -> None:
        self.base = base if isinstance(base, Scale) else Scale(base)
        self.optimizers: Mapping[str, Optimizer] = _space_optimizers(optimizers)
        #: Each family coordinate name (``muon_base_lr``) → its meaning (``base_lr``).
        self._family_names: dict[str, str] = {
            name: name[len(o.prefix) :]
            for o in self.optimizers.values()
            for name in family_coordinate_names(o)
        }
        checked = _space_arguments(rule, eps, custom_scale_names)
        self.rule: Rule = checked["rule"]
        self._check_coords(coords)
        _warn_stray_prefixes(coords, self.optimizers)
        typos = close_coordinates(
            [n for n in coords if n not in self._family_names], cutoff=TYPO_SIMILARITY
        )
        if typos:
            warnings.warn(
                f"coordinates {[n for n in coords if n not in COORDINATES]} are no built-in "
                f"coordinate and pass through unchanged into hp.extra{typos}. Fix the name if it "
                "was meant to set an optimizer coordinate.",
                TransferSearchWarning,
                stacklevel=2,
            )
        self.distributions, self.fixed = self._swept_and_fixed(coords)
        self._validate_values(self.fixed)
        self.betas = check_betas(betas)
        self.eps: float = checked["eps"]
        if ema_momentum is not None:
            scale_ema_momentum(ema_momentum, 1.0)
        self.ema_momentum = ema_momentum
        self.custom_scale_names: tuple[str, ...] = checked["custom_scale_names"]

    def _check_coords(self, coords: Mapping[str, Any]) -> None:
        """Refuse a ``coords`` that is not a non-empty mapping of named coordinates holding a
        sufficient lr/weight-decay pair, for the AdamW groups and for each family's.

        Raises:
            TransferSearchError: an empty or non-mapping ``coords``, a name that is not a
                non-empty string, or an insufficient or conflicting coordinate set.
        """
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
        for optimizer in self.optimizers.values():
            family_base_point(dict.fromkeys(coords, 1.0), self.base, optimizer)

    def _swept_and_fixed(
        self, coords: Mapping[str, Any]
    ) -> tuple[dict[str, Distribution], dict[str, Any]]:
        """``coords`` split into the swept distributions (each checked against the coordinate it
        means) and the fixed values, both in declaration order."""
        distributions: dict[str, Distribution] = {}
        fixed: dict[str, Any] = {}
        for name, value in coords.items():
            if isinstance(value, (Float, Int, Choice)):
                check_distribution(self._meaning(name), value)
                distributions[name] = value
            else:
                fixed[name] = value
        return distributions, fixed

    def __repr__(self) -> str:
        optimizers = f", optimizers={dict(self.optimizers)!r}" if self.optimizers else ""
        return (
            f"TransferSpace(base={self.base!r}, coords={ {**self.distributions, **self.fixed} }, "
            f"rule={self.rule!r}{optimizers})"
        )

    def _adamw_reference(self) -> str:
        """The group whose values give back the unprefixed (AdamW) coordinates: "hidden", or
        the first matrix group AdamW runs when another family runs the hidden group.

        Raises:
            TransferSearchError: no matrix group runs AdamW.
        """
        for group in ("hidden", "output", "input"):
            if group not in self.optimizers:
                return group
        raise TransferSearchError(
            "no matrix group (hidden, output, input) runs AdamW, so the unprefixed coordinates "
            "cannot be read back from hp; read the family coordinates from hp.groups instead."
        )

    def _meaning(self, name: str) -> str:
        """The built-in coordinate a name means: a family coordinate's stem (``muon_base_lr`` →
        ``base_lr``; ``muon_momentum`` → ``beta1``, an EMA weight in [0, 1)), else the name."""
        stem = self._family_names.get(name, name)
        return "beta1" if stem == "momentum" else stem

    @property
    def names(self) -> tuple[str, ...]:
        """The swept coordinate names, in declaration order."""
        return tuple(self.distributions)

    def optimum_prior(self) -> dict[str, float]:
        """Where the rule places the swept coordinates' optimum, for those it places: the fit
        centres its prior on each rung's optimum there (docs/science.md §7.3).

        Only Power Lines places one (:meth:`transfersearch.rules.PowerLinesTau.tau_epoch_optimum`:
        τ_opt at the base's tokens per parameter, when the base gives ``tokens`` and ``params``),
        read as a swept ``tau_epoch`` or ``eta_lambda`` (ηλ = B/(τ_epoch·N) at the base); {} for
        every other rule, coordinate or base.
        """
        dataset = self.rule.dataset_rule
        tau = None if dataset is None else dataset.tau_epoch_optimum(self.base)
        if tau is None:
            return {}
        out: dict[str, float] = {}
        if isinstance(self.distributions.get("tau_epoch"), Float):
            out["tau_epoch"] = tau
        if isinstance(self.distributions.get("eta_lambda"), Float) and all(
            n in self.base for n in ("batch_size", "dataset_size")
        ):
            out["eta_lambda"] = eta_lambda_from_tau_epoch(tau, self.base)
        return out

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
            check_value(self._meaning(name), value)
            dist = self.distributions.get(name)
            if dist is None or dist.contains(value):
                continue
            if isinstance(dist, Choice) or not is_number(value):
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
            outside.append(outside_note(name, number, dist))
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
            if not isinstance(dist, Int) or not is_number(value):
                continue
            number = float(value)  # type: ignore[arg-type]  # is_number checked it
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
        at = self._at_target(scale)
        if at is None:  # not a Scale, or a scale the rule refuses: computed here, raising its error
            at = self._compute_at_target(scale)
        target = at.target
        lr0, wd0 = base_point(merged, self.base)
        rule = self.rule
        notes: list[str] = list(outside)
        for note in outside:
            warnings.warn(note, TransferSearchWarning, stacklevel=2)
        dataset_factor = at.dataset_factor
        for note in at.dataset_notes:
            notes.append(note)
            warnings.warn(note, TransferSearchWarning, stacklevel=2)
        notes.extend(at.depth_notes)
        kappa = at.kappa
        betas, eps, ema = self._base_settings(merged)
        lr_multipliers = dict(at.lr_multipliers)
        groups, moved = _moved_groups(
            rule, at.factors, target, (lr0, wd0 * dataset_factor), betas, eps, kappa
        )
        if self.optimizers:
            family_groups, family_lr_multipliers = self._family_groups(
                merged, target, groups, dataset_factor, kappa
            )
            groups = {**groups, **family_groups}
            lr_multipliers = {**lr_multipliers, **family_lr_multipliers}
        notes.extend(at.family_batch_notes)
        new_betas, new_eps, beta_forms = moved.betas, moved.eps, moved.beta_forms
        notes.extend(_beta_notes(betas, beta_forms, kappa))
        if ema is not None and rule.batch_rule is not None:
            ema = scale_ema_momentum(float(ema), kappa)
        family_names = self._family_names
        extra = {k: v for k, v in merged.items() if k not in COORDINATES and k not in family_names}
        swept = self.distributions
        return Hyperparameters._built(
            scale=target,
            groups=groups,
            betas=new_betas,
            eps=new_eps,
            ema_momentum=None if ema is None else float(ema),
            batch_size=target.get("batch_size"),
            total_steps=target.total_steps,
            coordinates={k: v for k, v in merged.items() if k in swept},
            extra=extra,
            notes=tuple(notes),
            base=self.base,
            width_lr_multipliers=lr_multipliers,
            beta_forms=beta_forms,
            residual_multiplier=at.residual_multiplier,
            optimizers=self.optimizers,
        )

    def _at_target(self, scale: Scale | Mapping[str, float] | None) -> _AtTarget | None:
        """What ``concretize`` computes from the target alone, cached per space and scale; None
        when ``scale`` is neither a Scale nor None, or when computing it raises (``concretize``
        then computes it uncached and raises that error)."""
        if scale is not None and type(scale) is not Scale:
            return None
        state = (self.base, self.rule, self.custom_scale_names, self.optimizers)
        kept = _AT_TARGETS.get(self)
        if (
            kept is None
            or len(kept[1]) >= _AT_TARGETS_KEPT
            or any(a is not b for a, b in zip(kept[0], state))
        ):
            kept = _AT_TARGETS[self] = (state, {})
        at = kept[1].get(scale)
        if at is None:
            try:
                at = self._compute_at_target(scale)
            except Exception:  # concretize raises it, in its own order
                return None
            kept[1][scale] = at
        return at

    def _compute_at_target(self, scale: Scale | Mapping[str, float] | None) -> _AtTarget:
        """:class:`_AtTarget` at ``scale``: what :meth:`concretize` takes from the target alone
        (uncached; raises what the target or the rule refuses)."""
        target = self._target(scale)
        rule = self.rule
        dataset_factor = 1.0
        dataset_notes: tuple[str, ...] = ()
        if rule.dataset_rule is not None:
            dataset_factor = rule.dataset_rule.eta_lambda_factor(self.base, target)
            dataset_notes = tuple(rule.dataset_rule.notes(self.base, target))
        depth_notes = tuple(_depth_notes(rule, self.base, target))
        kappa = rule.kappa(self.base, target)
        width_mult = target.ratio(self.base, "width")
        lr_multipliers = tuple((g, m) for g, (m, _) in rule.group_multipliers(width_mult).items())
        factors = _group_factors(rule, self.base, target)
        family_batch_notes = tuple(
            _family_batch_notes(self.optimizers, kappa, rule.batch_rule is not None)
        )
        return _AtTarget(
            target=target,
            dataset_factor=dataset_factor,
            dataset_notes=dataset_notes,
            depth_notes=depth_notes,
            kappa=kappa,
            lr_multipliers=lr_multipliers,
            factors=factors,
            family_batch_notes=family_batch_notes,
            residual_multiplier=rule.residual_multiplier(self.base, target),
        )

    def _base_settings(
        self, merged: Mapping[str, Any]
    ) -> tuple[tuple[float, float], float, float | None]:
        """Adam's (betas, eps) and the EMA momentum at the base batch size: the coordinates'
        ``beta1``, ``beta2``, ``eps`` and ``ema_momentum`` where given, else the space's defaults."""
        betas = (
            float(merged.get("beta1", self.betas[0])),
            float(merged.get("beta2", self.betas[1])),
        )
        eps = float(merged.get("eps", self.eps))
        ema = merged.get("ema_momentum", self.ema_momentum)
        return betas, eps, ema

    def _family_groups(
        self,
        merged: Mapping[str, Any],
        target: Scale,
        groups: Mapping[str, Mapping[str, float]],
        dataset_factor: float,
        kappa: float,
    ) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
        """The values at ``target`` of each group another family runs (docs/science.md §11), from
        that family's base point, and the width lr factor of each Muon group.

        ``groups`` are the groups the rule gives (AdamW's values): a family group the rule does not
        give (``block_vector`` when it is not split) is left out, and a family without its own eps
        keeps the group's.
        """
        family_groups: dict[str, dict[str, Any]] = {}
        lr_multipliers: dict[str, float] = {}
        width_mult = target.ratio(self.base, "width")
        for group, optimizer in self.optimizers.items():
            if group not in groups:  # block_vector when the rule does not split it
                continue
            family_lr0, family_wd0 = family_base_point(merged, self.base, optimizer)
            point = (family_lr0, family_wd0 * dataset_factor)
            values = family_group(optimizer, group, self.rule, self.base, target, point, kappa)
            values["eps"] = getattr(optimizer, "eps", groups[group]["eps"])
            family_groups[group] = {**values, **optimizer.group_values(merged)}
            if isinstance(optimizer, Muon):
                lr_multipliers[group] = muon_width_lr_factor(optimizer.adjust_lr_fn, width_mult)
        return family_groups, lr_multipliers

    def coordinates(
        self, hp: Hyperparameters, scale: Scale | Mapping[str, float] | None = None
    ) -> dict[str, Any]:
        """Invert :meth:`concretize`: the swept coordinates that give ``hp`` at ``scale``.

        Undoes the batch rule (η = η̂/κ^a, ηλ = 1 − (1 − η̂λ̂)^(1/κ)), the dataset rule and the width
        multipliers of the hidden group, then expresses the base (η, λ) in this space's coordinates.
        Optimizer coordinates (beta1, beta2, eps, ema_momentum) and pass-through ones are read back
        from ``hp``.

        Raises:
            TransferSearchError: the hidden group has no positive lr, or a negative weight decay.
        """
        if not isinstance(hp, Hyperparameters):
            raise TransferSearchError(
                f"`hp` must be the Hyperparameters that TransferSpace.concretize returns, but got "
                f"{hp!r} ({type(hp).__name__}). For a dict from Hyperparameters.to_dict(), pass "
                "Hyperparameters.from_dict(data)."
            )
        target = self._target(hp.scale if scale is None else scale)
        reference = self._adamw_reference()
        values = hp.groups[reference]
        lr_hat = check_positive(f"hp.groups.{reference}.lr", values["lr"])
        wd_hat = check_weight_decay(f"hp.groups.{reference}.weight_decay", values["weight_decay"])
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
        dataset_factor = 1.0
        if rule.dataset_rule is not None:
            dataset_factor = rule.dataset_rule.eta_lambda_factor(self.base, target)
            product /= dataset_factor
        lr_mult, wd_mult, _ = rule.factors(self.base, target)[reference]
        lr0 = lr_w / lr_mult
        wd0 = product / lr_w / wd_mult
        out: dict[str, Any] = {}
        for name in self.distributions:
            if name in self._family_names:
                out[name] = self._family_coordinate(name, hp, target, dataset_factor, kappa)
            elif name in LR_COORDS + WD_COORDS + PRODUCT_COORDS:
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

    def _family_coordinate(
        self, name: str, hp: Hyperparameters, target: Scale, dataset_factor: float, kappa: float
    ) -> float:
        """A family coordinate (``muon_base_lr``) read back from the values of the group that
        family runs (the last such group when it runs several: they share one base point)."""
        families = {o.prefix: (g, o) for g, o in self.optimizers.items()}
        group, optimizer = next(v for p, v in families.items() if name.startswith(p))
        return family_coordinate(
            name,
            optimizer,
            group,
            hp.group(group),
            self.rule,
            self.base,
            target,
            dataset_factor,
            kappa,
        )

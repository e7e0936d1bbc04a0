"""Scaling rules: how AdamW hyperparameters move with width, dataset size and batch size.

A rule maps the *base point* — the hidden group's learning rate ``lr`` and weight decay at the base
scale — to per-parameter-group ``lr`` / ``weight_decay`` at any other scale. Rules are small frozen
objects that compose: a width rule (:class:`MuP`, :class:`Standard`, :class:`SqrtWidth`) holds a
dataset rule (:class:`ConstantTauEpoch`, :class:`PowerLinesTau`, or None) and a batch rule
(:class:`AdamBatch`, :class:`SGDBatch`, or None). They are applied in that order: width, then dataset
(at the base batch size), then batch size.

Weight decay convention: every ``weight_decay`` here is PyTorch's *coupled* λ
(``w ← (1 − ηλ)·w − η·u``, torch.optim.AdamW); the per-step decay of the independent
(Loshchilov–Hutter) convention is λ' = ηλ and is named ``independent_wd``.

Parameter groups: ``"input"`` (embeddings, first layer), ``"hidden"`` (matrices with both dimensions
growing with width), ``"output"`` (readout), ``"vector"`` (biases, norm gains).

This module also holds the schedules (pure functions of the step): Su's equal-weight schedules,
Kosson's warmup factors, and the EMA weight of each update.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from transfersearch.errors import TransferSearchError, check_bool, check_positive
from transfersearch.scale import Scale

__all__ = [
    "GROUPS",
    "AdamBatch",
    "BatchRule",
    "BatchTransfer",
    "ConstantTauEpoch",
    "DatasetRule",
    "MuP",
    "PowerLinesTau",
    "Rule",
    "SGDBatch",
    "SqrtWidth",
    "Standard",
    "check_betas",
    "decay_away_warmup_factor",
    "exp_warmup_factor",
    "scale_ema_momentum",
    "su_constant_wd_lr",
    "su_proportional_lr_wd",
    "update_weights",
]

#: Parameter-group names, in a fixed order.
GROUPS: tuple[str, ...] = ("input", "hidden", "output", "vector")


# ----------------------------------------------------------------------------------------------
# Dataset rules
# ----------------------------------------------------------------------------------------------
class DatasetRule:
    """How the product ηλ moves with dataset size (at fixed batch size).

    Subclasses implement :meth:`eta_lambda_factor`: the factor that multiplies ηλ (and, at fixed η,
    λ) when going from ``base`` to ``scale``.
    """

    #: The scale names this rule reads (a target giving one of them needs it in the base too).
    scale_names: ClassVar[tuple[str, ...]] = ("dataset_size",)

    def eta_lambda_factor(self, base: Scale, scale: Scale) -> float:
        raise NotImplementedError

    def check_target(self, base: Scale, given: Scale) -> None:
        """Raise if ``given`` (the names a target states) leaves an input of the rule stale.

        A target's missing names keep their base values; this hook refuses targets for which that
        default would silently be wrong. The default accepts every target.
        """


@dataclass(frozen=True)
class ConstantTauEpoch(DatasetRule):
    """Hold τ_epoch = B / (η λ N) constant as N changes (Wang & Aitchison 2025, Eq. 10–11).

    With B and η fixed, λ = B / (η N τ_epoch) (Eq. 11), so ηλ ∝ 1/N: factor = N_base / N.
    Applies when both scales give ``dataset_size``; otherwise the factor is 1.
    """

    def eta_lambda_factor(self, base: Scale, scale: Scale) -> float:
        return 1.0 / scale.ratio(base, "dataset_size")

    def check_target(self, base: Scale, given: Scale) -> None:
        """Refuse a target ``tokens`` that nothing would read: the base gives no ``tokens``.

        This rule reads N from ``dataset_size``; ``tokens`` only rescales a base ``steps`` when the
        base states its tokens. Without them a target's ``tokens=...`` would silently change nothing.

        Raises:
            TransferSearchError: naming the choice (tokens in the base, or dataset_size).
        """
        if "tokens" in given and "tokens" not in base:
            raise TransferSearchError(
                f"the target gives tokens={given['tokens']:g} but the base {base!r} has no `tokens`, "
                "and the dataset rule 'tau_epoch' (ConstantTauEpoch) reads the training-set size "
                "from `dataset_size`, so the tokens would be silently ignored. Give tokens=... in "
                "the base as well (then the steps follow the tokens seen), or state the target's "
                "size as dataset_size=... (same unit as batch_size), or use "
                "MuP(dataset='power_lines') for the one-epoch tokens-per-parameter prior."
            )


@dataclass(frozen=True)
class PowerLinesTau(DatasetRule):
    """One-epoch prior τ_opt = coefficient · TPP^exponent (Bergsma et al. 2025, "Power Lines").

    TPP is tokens per parameter. Wang & Aitchison (2025, §5.1) quote only the power law,
    τ_epoch^opt ≈ TPP^−0.527; the coefficient 1.084 is Bergsma et al.'s fit (docs/science.md §1).
    It cancels below: only ratios of τ_opt are used.

    The data amount D is ``tokens`` when the scales give it (training tokens seen, the one-epoch
    regime the law was fitted in), else ``dataset_size``; TPP = D / ``params``. The swept τ_epoch at
    the base is kept *relative* to the prior: τ(scale) = τ_base · τ_opt(TPP_scale) / τ_opt(TPP_base).
    With τ = B/(ηλD) (Wang & Aitchison Eq. 10, one epoch: N = D) at fixed B and η, ηλ ∝ 1/(D τ):

        factor = (D_base / D) · τ_opt(TPP_base) / τ_opt(TPP_scale).

    E.g. 4× tokens at fixed params: factor = ¼ · 4^0.527 ≈ 0.519.

    A target that changes ``width`` or ``depth`` must state its ``params`` (:meth:`check_target`):
    inheriting the base's parameter count would make TPP silently wrong.
    """

    coefficient: float = 1.084
    exponent: float = -0.527
    scale_names: ClassVar[tuple[str, ...]] = ("tokens", "dataset_size", "params")

    def __post_init__(self) -> None:
        check_positive("coefficient", self.coefficient, fix="Bergsma et al.'s fit is 1.084.")
        if not _is_finite_number(self.exponent):
            raise TransferSearchError(
                f"`exponent` must be a finite number, but got exponent={self.exponent!r}. "
                "Bergsma et al.'s fit is -0.527."
            )

    def tau_opt(self, tokens_per_param: float) -> float:
        """τ_opt = coefficient · TPP^exponent."""
        tpp = check_positive("tokens_per_param", tokens_per_param)
        return float(self.coefficient * tpp**self.exponent)

    @staticmethod
    def data_name(base: Scale, scale: Scale) -> str:
        """``"tokens"`` when both scales give it, else ``"dataset_size"`` (the D of TPP).

        Raises:
            TransferSearchError: only one of the two scales gives ``tokens``.
        """
        if ("tokens" in base) != ("tokens" in scale):
            has, lacks = ("base", "target") if "tokens" in base else ("target", "base")
            raise TransferSearchError(
                f"the Power Lines prior reads the data amount from `tokens`, which the {has} scale "
                f"gives but the {lacks} does not (base {base!r}, target {scale!r}). Give tokens=... "
                "in both scales, or in neither (then dataset_size is used)."
            )
        return "tokens" if "tokens" in scale else "dataset_size"

    @staticmethod
    def tokens_per_param(scale: Scale, data_name: str | None = None) -> float:
        """TPP = D / params, D = ``data_name`` (default ``tokens`` if present, else ``dataset_size``)."""
        name = data_name or ("tokens" if "tokens" in scale else "dataset_size")
        scale.require(name, "params", purpose="use the Power Lines τ prior (tokens per parameter)")
        return scale[name] / scale["params"]

    def eta_lambda_factor(self, base: Scale, scale: Scale) -> float:
        name = self.data_name(base, scale)
        tau_ratio = self.tau_opt(self.tokens_per_param(scale, name)) / self.tau_opt(
            self.tokens_per_param(base, name)
        )
        return 1.0 / (scale.ratio(base, name) * tau_ratio)

    def check_target(self, base: Scale, given: Scale) -> None:
        """Refuse a target that changes ``width`` or ``depth`` but not ``params``.

        Raises:
            TransferSearchError: naming the changed size and asking for ``params=...``.
        """
        if "params" in given:
            return
        changed = [n for n in ("width", "depth") if n in given and given.ratio(base, n) != 1.0]
        if changed:
            shown = ", ".join(f"{n}={given[n]:g}" for n in changed)
            base_params = f"{base['params']:g}" if "params" in base else "(none)"
            raise TransferSearchError(
                f"the target changes {shown} but gives no `params`, so the Power Lines prior would "
                f"use the base's params={base_params} and a wrong tokens-per-parameter. "
                "Add params=... (the model's parameter count at that size) to the target scale."
            )


# ----------------------------------------------------------------------------------------------
# Batch rules
# ----------------------------------------------------------------------------------------------
BetaForm = Literal["auto", "linear", "power"]
#: How a batch rule moved one beta: 1 − κ(1 − β) ("linear"), β^κ ("power"), or not at all.
AppliedBetaForm = Literal["unchanged", "linear", "power"]


def _is_finite_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _is_unit_interval(value: object) -> bool:
    return (
        isinstance(value, Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
        and 0.0 <= float(value) < 1.0
    )


def check_betas(betas: object) -> tuple[float, float]:
    """Adam's ``betas`` as a pair of floats after checking each lies in [0, 1).

    Raises:
        TransferSearchError: not a pair of numbers (e.g. ``betas=0.9``), or a beta outside [0, 1).
    """
    if (
        not isinstance(betas, Sequence)
        or isinstance(betas, str)
        or len(betas) != 2
        or not all(_is_unit_interval(b) for b in betas)
    ):
        raise TransferSearchError(
            f"`betas` must be a pair (beta1, beta2) with each in [0, 1), but got betas={betas!r}. "
            "Write betas=(0.9, 0.999); to sweep one beta, add a 'beta1' or 'beta2' coordinate."
        )
    return (float(betas[0]), float(betas[1]))


@dataclass(frozen=True)
class BatchTransfer:
    """The result of carrying one group's optimizer settings to batch size κ·B."""

    lr: float
    weight_decay: float
    betas: tuple[float, float]
    eps: float
    #: Per beta, "linear" (1 − κ(1 − β)), "power" (β^κ) or "unchanged".
    beta_forms: tuple[AppliedBetaForm, AppliedBetaForm]


#: Relative rounding of the computed 1 − κ(1 − β), per unit of κ: β's decimal value (0.9) is off by
#: up to half an ulp in binary, κ multiplies that, and the subtraction adds a few ulps more. A
#: linear β̂ within this of 0 is 0 in exact arithmetic (β = 0.9 at κ = 10 computes as 2.2e-16).
_LINEAR_BETA_ROUNDING = 16.0 * sys.float_info.epsilon


def _scale_beta(beta: float, kappa: float, form: BetaForm) -> tuple[float, AppliedBetaForm]:
    """β̂ = 1 − κ(1 − β) (Busbridge et al. App. C), or β^κ where that leaves (0, 1) or when asked.

    The linear form is used only inside the *open* interval (0, 1): at κ(1 − β) = 1 it gives β̂ = 0,
    Adam without momentum (β₁ = 0.9 at κ = 10), so there β^κ = 0.9^10 ≈ 0.3487 is used, as beyond.
    (Both keep the averaging horizon 1/(1 − β̂) near one step there: 1.0 vs 1.54 steps.)
    """
    linear = 1.0 - kappa * (1.0 - beta)
    inside = _LINEAR_BETA_ROUNDING * max(1.0, kappa) < linear < 1.0
    if form == "linear":
        if not inside:
            raise TransferSearchError(
                f"beta={beta} at batch ratio kappa={kappa:g} gives 1 - kappa*(1 - beta) = "
                f"{linear:.3g}, outside the open interval (0, 1). Use beta_form='power' "
                "(beta**kappa) or 'auto'."
            )
        return linear, "linear"
    if form == "power" or not inside:
        return beta**kappa, "power"
    return linear, "linear"


def _match_decay(lr: float, weight_decay: float, new_lr: float, kappa: float) -> float:
    """λ̂ = (1 − (1 − ηλ)^κ) / η̂: κ steps of decay at B equal one step at κB (Busbridge Eq. 11–13).

    The per-step decay ηλ is the independent convention's λ' (``w ← (1 − λ')w − ηu``), so
    η̂λ̂ = 1 − (1 − λ')^κ is the independent decay at batch size κB: the one transform for both
    conventions.
    """
    eta_lambda = lr * weight_decay
    if eta_lambda == 0.0:
        return 0.0
    if not 0.0 < eta_lambda < 1.0:
        raise TransferSearchError(
            f"lr*weight_decay = {eta_lambda:g} must lie in (0, 1) for decay matching across batch "
            "sizes (the per-step decay factor 1 - lr*weight_decay must be positive). "
            "Lower lr or weight_decay."
        )
    return -math.expm1(kappa * math.log1p(-eta_lambda)) / new_lr


class BatchRule:
    """How lr, weight decay, betas and ε move with the batch-size ratio κ = B / B_base."""

    #: How the learning rate scales: η̂ = κ^lr_exponent · η.
    lr_exponent: float = 0.0

    def transfer(
        self, lr: float, weight_decay: float, betas: tuple[float, float], eps: float, kappa: float
    ) -> BatchTransfer:
        raise NotImplementedError

    def invert(
        self,
        lr_hat: float,
        weight_decay_hat: float,
        betas: tuple[float, float],
        eps: float,
        kappa: float,
        beta_forms: tuple[str, str],
    ) -> tuple[float, float, tuple[float, float], float]:
        """Undo :meth:`transfer`: (lr, ηλ, betas, eps) at B from their values at κB."""
        lr = lr_hat / kappa**self.lr_exponent
        eta_lambda = self.invert_eta_lambda(lr_hat * weight_decay_hat, kappa)
        return lr, eta_lambda, betas, eps

    def invert_eta_lambda(self, eta_lambda_hat: float, kappa: float) -> float:
        """Inverse of decay matching: ηλ = 1 − (1 − η̂λ̂)^(1/κ)."""
        if eta_lambda_hat == 0.0:
            return 0.0
        if not 0.0 < eta_lambda_hat < 1.0:
            raise TransferSearchError(
                f"lr*weight_decay = {eta_lambda_hat:g} must lie in (0, 1) to invert decay matching."
            )
        return -math.expm1(math.log1p(-eta_lambda_hat) / kappa)


@dataclass(frozen=True)
class AdamBatch(BatchRule):
    """Adam's square-root rule (Malladi et al.; Busbridge et al. 2023, App. C), for B̂ = κB.

    η̂ = √κ·η, β̂₁ = 1 − κ(1 − β₁), β̂₂ = 1 − κ(1 − β₂), ε̂ = ε/√κ; weight decay by exact decay
    matching λ̂ = (1 − (1 − ηλ)^κ)/η̂ (Busbridge Eq. 11–13, with the κη/η̂ reading of
    docs/science.md §5).
    Where 1 − κ(1 − β) leaves the open interval (0, 1) (κ(1 − β) >= 1: β₁ = 0.9 from κ = 10 on)
    the first-order-equivalent β^κ is used (``beta_form="auto"``, recorded in
    :attr:`BatchTransfer.beta_forms` and in the notes of the hyperparameters); ``"linear"`` raises
    there instead, ``"power"`` always uses β^κ. E.g. β₁ = 0.9: κ = 9.988 → 0.0012 (linear), κ = 10
    → 0.9^10 ≈ 0.3487, κ = 10.004 → 0.3485 (power). Check: ηλ ∝ κ and B ∝ κ keep τ_epoch = B/(ηλN).
    """

    beta_form: BetaForm = "auto"
    lr_exponent: float = 0.5

    def __post_init__(self) -> None:
        if self.beta_form not in ("auto", "linear", "power"):
            raise TransferSearchError(
                f"`beta_form` must be 'auto', 'linear' or 'power', but got "
                f"beta_form={self.beta_form!r}. 'auto' (default) uses 1 - kappa*(1 - beta) inside "
                "(0, 1) and beta**kappa beyond."
            )
        if not _is_finite_number(self.lr_exponent):
            raise TransferSearchError(
                f"`lr_exponent` must be a finite number, but got lr_exponent={self.lr_exponent!r}: "
                "0.5 is Adam's square-root rule."
            )

    def transfer(
        self, lr: float, weight_decay: float, betas: tuple[float, float], eps: float, kappa: float
    ) -> BatchTransfer:
        betas = check_betas(betas)
        new_lr = lr * math.sqrt(kappa)
        beta1, form1 = _scale_beta(betas[0], kappa, self.beta_form)
        beta2, form2 = _scale_beta(betas[1], kappa, self.beta_form)
        return BatchTransfer(
            lr=new_lr,
            weight_decay=_match_decay(lr, weight_decay, new_lr, kappa),
            betas=(beta1, beta2),
            eps=eps / math.sqrt(kappa),
            beta_forms=(form1, form2),
        )

    def invert(
        self,
        lr_hat: float,
        weight_decay_hat: float,
        betas: tuple[float, float],
        eps: float,
        kappa: float,
        beta_forms: tuple[str, str],
    ) -> tuple[float, float, tuple[float, float], float]:
        lr, eta_lambda, _, _ = super().invert(
            lr_hat, weight_decay_hat, betas, eps, kappa, beta_forms
        )
        back = tuple(
            b ** (1.0 / kappa) if form == "power" else 1.0 - (1.0 - b) / kappa
            for b, form in zip(betas, beta_forms)
        )
        return lr, eta_lambda, (back[0], back[1]), eps * math.sqrt(kappa)


@dataclass(frozen=True)
class SGDBatch(BatchRule):
    """SGD's linear rule (Busbridge et al. 2023, App. C): η̂ = κη; betas and ε unchanged.

    Weight decay by the same exact decay matching as :class:`AdamBatch`, λ̂ = (1 − (1 − ηλ)^κ)/η̂
    (≈ λ, since η̂ = κη).
    """

    lr_exponent: float = 1.0

    def transfer(
        self, lr: float, weight_decay: float, betas: tuple[float, float], eps: float, kappa: float
    ) -> BatchTransfer:
        new_lr = lr * kappa
        return BatchTransfer(
            lr=new_lr,
            weight_decay=_match_decay(lr, weight_decay, new_lr, kappa),
            betas=check_betas(betas),
            eps=eps,
            beta_forms=("unchanged", "unchanged"),
        )


def scale_ema_momentum(momentum: float, kappa: float) -> float:
    """Model-EMA momentum at batch size κB: ρ̂ = ρ^κ (Busbridge et al. 2023, Def. 1.2).

    Always the power form (the EMA's own scaling rule, not Adam's linearised one), so ρ̂ stays in
    [0, 1) for every κ > 0 and moves smoothly with κ.
    """
    if not _is_unit_interval(momentum):
        raise TransferSearchError(
            f"`ema_momentum` must lie in [0, 1), but got ema_momentum={momentum!r}. "
            "It is the weight of the old average, e.g. 0.999."
        )
    return float(momentum ** check_positive("kappa", kappa))


# ----------------------------------------------------------------------------------------------
# Width rules (the composed rule)
# ----------------------------------------------------------------------------------------------
_DATASET_RULES: dict[str, DatasetRule] = {
    "tau_epoch": ConstantTauEpoch(),
    "power_lines": PowerLinesTau(),
}
_BATCH_RULES: dict[str, BatchRule] = {"adam": AdamBatch(), "sgd": SGDBatch()}


def _resolve_dataset(value: DatasetRule | str | None) -> DatasetRule | None:
    if value is None or isinstance(value, DatasetRule):
        return value
    if isinstance(value, str) and value in _DATASET_RULES:
        return _DATASET_RULES[value]
    raise TransferSearchError(
        f"`dataset` must be one of {sorted(_DATASET_RULES)}, None or a DatasetRule, but got {value!r}."
    )


def _resolve_batch(value: BatchRule | str | None) -> BatchRule | None:
    if value is None or isinstance(value, BatchRule):
        return value
    if isinstance(value, str) and value in _BATCH_RULES:
        return _BATCH_RULES[value]
    raise TransferSearchError(
        f"`batch` must be 'adam', 'sgd', None or a BatchRule, but got batch={value!r}."
    )


@dataclass(frozen=True)
class Rule:
    """A complete scaling rule: a width rule with a dataset rule and a batch rule.

    Subclasses define the width multipliers (:meth:`width_multipliers`). ``dataset`` is
    ``"tau_epoch"`` (default, :class:`ConstantTauEpoch`), ``"power_lines"``, a :class:`DatasetRule`
    or None (λ unchanged with N). ``batch`` is ``"adam"`` (default), ``"sgd"``, a :class:`BatchRule`
    or None (nothing changes with B). ``vector_weight_decay`` decays biases and gains (default
    False: λ₁ = 0 for vector-like parameters, Fan et al. 2025's layerwise rule; note that Kosson et
    al. App. F.3 decay every parameter except the gains, biases included — set True for that).
    """

    dataset: DatasetRule | str | None = "tau_epoch"
    batch: BatchRule | str | None = "adam"
    vector_weight_decay: bool = False
    _dataset: DatasetRule | None = field(init=False, repr=False, compare=False, default=None)
    _batch: BatchRule | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        check_bool(
            "vector_weight_decay",
            self.vector_weight_decay,
            fix="True decays biases and gains too; False (default) leaves them undecayed.",
        )
        object.__setattr__(self, "_dataset", _resolve_dataset(self.dataset))
        object.__setattr__(self, "_batch", _resolve_batch(self.batch))

    @property
    def dataset_rule(self) -> DatasetRule | None:
        return self._dataset

    @property
    def batch_rule(self) -> BatchRule | None:
        return self._batch

    @property
    def scale_names(self) -> tuple[str, ...]:
        """The scale names this rule reads: ``width``, its dataset rule's, ``batch_size``."""
        names = ["width"]
        if self._dataset is not None:
            names.extend(self._dataset.scale_names)
        if self._batch is not None:
            names.append("batch_size")
        return tuple(dict.fromkeys(names))

    def width_multipliers(self, width_mult: float) -> dict[str, tuple[float, float]]:
        """Per group, the (lr, weight_decay) multipliers at width multiplier s = d / d_base."""
        raise NotImplementedError

    def group_multipliers(self, width_mult: float) -> dict[str, tuple[float, float]]:
        """:meth:`width_multipliers` with the vector group's weight decay switched off unless asked."""
        check_positive("width_mult", width_mult)
        multipliers = self.width_multipliers(width_mult)
        if not self.vector_weight_decay:
            multipliers["vector"] = (multipliers["vector"][0], 0.0)
        return multipliers


@dataclass(frozen=True)
class MuP(Rule):
    """µP learning rates (Everett-style) with a configurable weight-decay width exponent.

    With s = d / d_base (Wang & Aitchison Eq. 12): hidden and output matrices get η = η_base / s
    (Wang & Aitchison Eq. 13 and 15; Kosson et al. App. F.2), input and vector-like parameters
    η = η_base (Θ(1)). Matrix weight decay λ = λ_base · s^wd_width_exponent: 1 keeps ηλ and τ_iter
    fixed (Wang & Aitchison Eq. 15–16, Kosson's independent scaling Eq. 8; default), ½ is Fan et
    al.'s λ ∝ √d, 0 is standard (Wang & Aitchison Eq. 13–14, Kosson Eq. 7, λ fixed). The input group
    keeps λ_base.

    µP's 1/s already acts as a learning-rate warmup (Kosson et al. §6); Kosson's explicit width
    warmups (§7, :func:`exp_warmup_factor`, :func:`decay_away_warmup_factor`) *replace* it, so use
    them with :class:`Standard`, not with this rule.
    """

    wd_width_exponent: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        exponent = self.wd_width_exponent
        if (
            isinstance(exponent, bool)
            or not isinstance(exponent, (int, float))
            or not math.isfinite(exponent)
        ):
            raise TransferSearchError(
                f"`wd_width_exponent` must be a finite number (0 standard, 0.5 Fan et al., 1 "
                f"constant tau), but got wd_width_exponent={exponent!r}."
            )

    def width_multipliers(self, width_mult: float) -> dict[str, tuple[float, float]]:
        """Raises TransferSearchError when s^wd_width_exponent over- or underflows a float."""
        try:
            wd_mult = float(width_mult) ** float(self.wd_width_exponent)
        except OverflowError:
            wd_mult = math.inf
        if not (math.isfinite(wd_mult) and wd_mult > 0.0):
            raise TransferSearchError(
                f"the matrix weight-decay multiplier s**wd_width_exponent = "
                f"{width_mult:g}**{self.wd_width_exponent:g} is not a finite positive float (it "
                f"over- or underflows) at width ratio s={width_mult:g}. Use an exponent in the "
                "usual range (0 standard, 0.5 Fan et al., 1 constant tau)."
            )
        matrix = (1.0 / width_mult, wd_mult)
        return {"input": (1.0, 1.0), "hidden": matrix, "output": matrix, "vector": (1.0, 1.0)}


@dataclass(frozen=True)
class Standard(Rule):
    """No width scaling: every group keeps η_base and λ_base at any width (standard parametrisation).

    ηλ is then constant across width, as under Kosson et al.'s independent scaling (Eq. 8), but
    without µP's early 1/s: this is the rule to combine with Kosson's width warmups (§7), which
    supply that factor explicitly, starting at 1/s and relaxing to 1.
    """

    def width_multipliers(self, width_mult: float) -> dict[str, tuple[float, float]]:
        return {group: (1.0, 1.0) for group in GROUPS}


@dataclass(frozen=True)
class SqrtWidth(Rule):
    """Kosson et al. §6: η ∝ s^−½ and λ ∝ s^½ for hidden and output matrices (ηλ fixed).

    Our reading of their §6 (ηλ is what transfers: docs/science.md §2); it keeps ηλ and makes
    ‖W‖ ∝ √(η/λ) ∝ s^−½ like variance-preserving init. Input and vector groups are Θ(1).
    """

    def width_multipliers(self, width_mult: float) -> dict[str, tuple[float, float]]:
        root = math.sqrt(width_mult)
        matrix = (1.0 / root, root)
        return {"input": (1.0, 1.0), "hidden": matrix, "output": matrix, "vector": (1.0, 1.0)}


# ----------------------------------------------------------------------------------------------
# Schedules: pure functions of the step
# ----------------------------------------------------------------------------------------------
FloatArray = NDArray[np.float64]


def _steps(step: float | Sequence[float] | FloatArray) -> FloatArray:
    arr = np.asarray(step, dtype=np.float64)
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise TransferSearchError(f"`step` must be finite and >= 0, but got {step!r}.")
    return arr


def su_constant_wd_lr(
    step: float | Sequence[float] | FloatArray, lr_max: float, weight_decay: float
) -> FloatArray:
    """Su's equal-weight schedule at constant λ: η_s = η_max / (λ η_max s + 1).

    Every batch then keeps the same weight in the final weights (Su, kexue.fm/archives/11459;
    docs/science.md §4). Weight decay in PyTorch's coupled convention.
    """
    lr_max = check_positive("lr_max", lr_max)
    wd = float(weight_decay)
    if wd < 0 or not math.isfinite(wd):
        raise TransferSearchError(
            f"`weight_decay` must be finite and >= 0, but got {weight_decay!r}."
        )
    return lr_max / (wd * lr_max * _steps(step) + 1.0)


def su_proportional_lr_wd(
    step: float | Sequence[float] | FloatArray, lr_max: float, weight_decay_max: float
) -> tuple[FloatArray, FloatArray]:
    """Su's equal-weight schedule with λ_s ∝ η_s (docs/science.md §4).

    η_s = η_max / √(2 λ_max η_max s + 1), λ_s = λ_max / √(2 λ_max η_max s + 1).

    Returns:
        (lr, weight_decay) arrays at ``step`` (coupled convention).
    """
    lr_max = check_positive("lr_max", lr_max)
    wd_max = check_positive("weight_decay_max", weight_decay_max)
    root = np.sqrt(2.0 * wd_max * lr_max * _steps(step) + 1.0)
    return lr_max / root, wd_max / root


def exp_warmup_factor(
    step: float | Sequence[float] | FloatArray, width_mult: float, warmup_steps: float
) -> FloatArray:
    """Kosson et al. §7 exp-increasing warmup factor f(t) = s^(−max(0, 1 − t/T_w)).

    Starts at 1/s and reaches 1 at ``warmup_steps`` (their Eq. 12 in the form docs/science.md §2
    adopts). Kosson et al. use it *instead of* µP's 1/s learning-rate scaling
    (§7, App. F.3.5), i.e. on the learning rate of the base width (:class:`Standard`).
    """
    s = check_positive("width_mult", width_mult)
    t_w = check_positive("warmup_steps", warmup_steps)
    return np.asarray(s ** (-np.maximum(0.0, 1.0 - _steps(step) / t_w)), dtype=np.float64)


def decay_away_warmup_factor(
    step: float | Sequence[float] | FloatArray, width_mult: float, lr: float, weight_decay: float
) -> FloatArray:
    """Kosson et al. §7 decay-away warmup factor f(t) = 1 − (1 − 1/s)·(1 − ηλ)^t.

    Starts at 1/s and relaxes to 1 on the EMA timescale 1/(ηλ) (their Eq. 13 in the form
    docs/science.md §2 adopts). Coupled weight decay. Like :func:`exp_warmup_factor`, a
    replacement for µP's 1/s learning-rate scaling, not an addition to it (Kosson et al. §7).
    """
    s = check_positive("width_mult", width_mult)
    eta_lambda = check_positive("lr", lr) * check_positive("weight_decay", weight_decay)
    if eta_lambda >= 1.0:
        raise TransferSearchError(f"lr*weight_decay must be < 1, but got {eta_lambda:g}.")
    return np.asarray(
        1.0 - (1.0 - 1.0 / s) * np.exp(_steps(step) * math.log1p(-eta_lambda)), dtype=np.float64
    )


def update_weights(
    lrs: Sequence[float] | FloatArray, weight_decays: Sequence[float] | FloatArray
) -> FloatArray:
    """The weight each step's update keeps in the final weights (Su; docs/science.md §4).

    With w_t = (1 − η_t λ_t) w_{t−1} − η_t u_t, update j's coefficient in w_T is exactly
    η_j · Π_{i=j+1..T} (1 − η_i λ_i) ≈ η_j · exp(κ_j − κ_T), κ_t = Σ_{i≤t} η_i λ_i.

    Args:
        lrs: η_t per step; weight_decays: λ_t per step (coupled convention), same length.

    Returns:
        The exact coefficient of each step's update, shape (T,).
    """
    eta = np.asarray(lrs, dtype=np.float64)
    lam = np.asarray(weight_decays, dtype=np.float64)
    if eta.shape != lam.shape or eta.ndim != 1:
        raise TransferSearchError(
            f"`lrs` and `weight_decays` must be 1-D of equal length, got {eta.shape} and {lam.shape}."
        )
    decay = 1.0 - eta * lam
    if np.any(decay <= 0) or not np.all(np.isfinite(decay)):
        raise TransferSearchError("every lr*weight_decay must lie in [0, 1).")
    # suffix products of the decay factors after each step
    log_decay = np.log(decay)
    after = np.concatenate([np.cumsum(log_decay[::-1])[::-1][1:], [0.0]])
    return np.asarray(eta * np.exp(after), dtype=np.float64)

"""Scaling rules: how AdamW hyperparameters move with width, depth, dataset size, batch size and steps.

A rule maps the *base point* — the hidden group's learning rate ``lr`` and weight decay at the base
scale — to per-parameter-group ``lr`` / ``weight_decay`` / ``eps`` at any other scale. Rules are
small frozen objects that compose: a width rule (:class:`MuP`, :class:`Standard`,
:class:`SqrtWidth`) holds a depth rule (:class:`CompleteP` or None), a dataset rule
(:class:`ConstantTauEpoch`, :class:`PowerLinesTau`, or None) and a batch rule (:class:`AdamBatch`,
:class:`SGDBatch`, or None; with ``horizon="completed"`` it runs at the ratio of steps). They are
applied in that order: width and depth, then dataset (at the base batch size), then batch size.

Weight decay convention: every ``weight_decay`` here is PyTorch's *coupled* λ
(``w ← (1 − ηλ)·w − η·u``, torch.optim.AdamW); the per-step decay of the independent
(Loshchilov–Hutter) convention is λ' = ηλ and is named ``independent_wd``.

Parameter groups: ``"input"`` (embeddings, first layer), ``"hidden"`` (matrices with both dimensions
growing with width), ``"output"`` (readout), ``"vector"`` (biases, norm gains outside the residual
blocks, e.g. the final norm) and ``"block_vector"`` (biases and norm gains inside the blocks, which
the depth rule moves). Design notes and sources: docs/science.md §5 and §10.

This module also holds the schedules (pure functions of the step): Su's equal-weight schedules,
Kosson's warmup factors, and the EMA weight of each update.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import ClassVar, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from transfersearch.errors import (
    Allowed,
    Interval,
    TransferSearchError,
    check_bool,
    check_positive,
    check_value,
)
from transfersearch.scale import Scale

__all__ = [
    "ALL_GROUPS",
    "BLOCK_VECTOR",
    "GROUPS",
    "AdamBatch",
    "BatchRule",
    "BatchTransfer",
    "CompleteP",
    "ConstantTauEpoch",
    "DatasetRule",
    "DepthRule",
    "GroupFactors",
    "MuP",
    "PowerLinesTau",
    "Rule",
    "SGDBatch",
    "SqrtWidth",
    "Standard",
    "check_betas",
    "decay_away_warmup_factor",
    "exp_warmup_factor",
    "match_decay",
    "residual_multiplier",
    "scale_ema_momentum",
    "su_constant_wd_lr",
    "su_proportional_lr_wd",
    "update_weights",
]

#: Parameter-group names, in a fixed order (the groups every rule has had since width transfer).
GROUPS: tuple[str, ...] = ("input", "hidden", "output", "vector")
#: The in-block vectors (norm gains, biases inside the residual blocks): CompleteP's "pre-LN (in
#: blocks)" and "hidden biases" rows (Dey et al. 2025, Table 1), apart from the final norm.
BLOCK_VECTOR = "block_vector"
#: Every group a rule gives values to. ``block_vector`` equals ``vector`` unless a depth rule or
#: ``eps_width`` moves it.
ALL_GROUPS: tuple[str, ...] = (*GROUPS, BLOCK_VECTOR)


class GroupFactors(NamedTuple):
    """The multipliers a rule puts on one group's base ``lr``, ``weight_decay`` and ``eps``."""

    lr: float
    weight_decay: float
    eps: float


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

    def notes(self, base: Scale, scale: Scale) -> tuple[str, ...]:
        """Lines for ``Hyperparameters.notes`` about the rule's regime at ``scale`` (default none)."""
        return ()

    def check_target(self, base: Scale, given: Scale) -> None:
        """Raise if ``given`` (the names a target states) leaves an input of the rule stale.

        A target's missing names keep their base values; this hook refuses targets for which that
        default would silently be wrong. The default accepts every target.
        """

    def tau_epoch_optimum(self, base: Scale) -> float | None:
        """Where the rule says the optimal τ_epoch lies at ``base``, in absolute terms, or None
        where it says only how τ_epoch moves (the default: a rule carries a swept coordinate, it
        does not place it). The fit centres its prior on each rung's optimum there
        (docs/science.md §7.3)."""
        return None


def _one_pass(scale: Scale) -> bool:
    """Whether ``scale`` says it is one pass over its data: ``epochs`` <= 1, or ``tokens`` seen
    <= ``dataset_size``."""
    if "epochs" in scale and scale["epochs"] <= 1.0:
        return True
    return (
        "tokens" in scale and "dataset_size" in scale and scale["tokens"] <= scale["dataset_size"]
    )


@dataclass(frozen=True)
class ConstantTauEpoch(DatasetRule):
    """Hold τ_epoch = B / (η λ N) constant as N changes (Wang & Aitchison 2025, Eq. 10–11).

    With B and η fixed, λ = B / (η N τ_epoch) (Eq. 11), so ηλ ∝ 1/N: factor = N_base / N.
    Applies when both scales give ``dataset_size``; otherwise the factor is 1.

    Regime: constant τ_epoch is Wang & Aitchison's *multi-epoch* finding. In one pass the optimal
    τ_epoch falls with tokens per parameter, τ_opt ∝ TPP^−0.527 (Bergsma et al. 2025, Power Lines,
    Eq. 3; :class:`PowerLinesTau`): on a one-pass character-LM ladder the target at 4× the tokens
    wanted τ_epoch 0.25–0.5 where this rule carried 1.5–2.2. A base or target that says it is one
    pass (``epochs`` <= 1, or ``tokens`` <= ``dataset_size``) gets a loud note (a
    :class:`~transfersearch.errors.TransferSearchWarning` and a line in ``notes``) naming
    ``dataset="power_lines"``; ``allow_one_pass=True`` keeps this rule there without the note.
    """

    allow_one_pass: bool = False

    def __post_init__(self) -> None:
        check_bool(
            "allow_one_pass",
            self.allow_one_pass,
            fix="False (default) notes a one-pass scale; True keeps constant tau_epoch silently.",
        )

    def eta_lambda_factor(self, base: Scale, scale: Scale) -> float:
        return 1.0 / scale.ratio(base, "dataset_size")

    def notes(self, base: Scale, scale: Scale) -> tuple[str, ...]:
        """A note when ``base`` or ``scale`` is one pass (see the class docstring)."""
        if self.allow_one_pass or not (_one_pass(base) or _one_pass(scale)):
            return ()
        return (
            "one-pass regime: the dataset rule 'tau_epoch' holds tau_epoch constant, Wang & "
            "Aitchison's multi-epoch finding; in one pass the optimal tau_epoch falls as "
            "TPP^-0.527 (Bergsma et al. 2025, Power Lines), so the rule may carry too long a "
            "tau_epoch to more tokens. Use MuP(dataset='power_lines') with tokens and params in "
            "the scales, or dataset=ConstantTauEpoch(allow_one_pass=True) to keep this rule.",
        )

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

    def tau_epoch_optimum(self, base: Scale) -> float | None:
        """τ_opt = coefficient · TPP^exponent at ``base`` (Bergsma et al. 2025, Eq. 3) when the base
        gives ``tokens`` and ``params``; None otherwise (a ``dataset_size`` in sequences would
        make TPP wrong by the sequence length: only the ratio is used then).

        In the swept coordinates this rule carries τ_epoch relative to τ_opt, so the law's
        optimum is this one value at every rung (docs/science.md §7.3). E.g. 65,536 tokens and
        16,384 params (TPP 4): 1.084 · 4^−0.527 ≈ 0.522.
        """
        if "tokens" not in base or "params" not in base:
            return None
        return self.tau_opt(self.tokens_per_param(base, "tokens"))

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
    """β̂ = β^κ (default, continuous in κ), or 1 − κ(1 − β) (Busbridge et al. App. C) when asked.

    β^κ is the exact EMA match that 1 − κ(1 − β) linearises (κ steps of an EMA with weight β are
    one step with weight β^κ; the model EMA's ρ^κ, Busbridge Def. 1.2): it stays in [0, 1) for
    every κ > 0 and moves smoothly. The linear form reaches 0 at κ(1 − β) = 1 (β₁ = 0.9 at κ = 10)
    and leaves [0, 1) beyond, so ``form="linear"`` refuses there. ``"auto"``, the former
    default, switched from the linear form to β^κ at that boundary (β₁ jumped from 0.0012 to 0.349);
    it now means ``"power"``.
    """
    if form != "linear":
        return beta**kappa, "power"
    linear = 1.0 - kappa * (1.0 - beta)
    if not _LINEAR_BETA_ROUNDING * max(1.0, kappa) < linear < 1.0:
        raise TransferSearchError(
            f"beta={beta} at ratio kappa={kappa:g} gives 1 - kappa*(1 - beta) = "
            f"{linear:.3g}, outside the open interval (0, 1). Use beta_form='power' "
            "(beta**kappa, the default)."
        )
    return linear, "linear"


def match_decay(lr: float, weight_decay: float, new_lr: float, kappa: float) -> float:
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

    η̂ = √κ·η, ε̂ = ε/√κ, β̂ = β^κ for both betas (the exact EMA match that Busbridge's
    1 − κ(1 − β) linearises; continuous in κ, the same form as the model EMA's ρ^κ); weight decay
    by exact decay matching λ̂ = (1 − (1 − ηλ)^κ)/η̂ (Busbridge Eq. 11–13, with the κη/η̂ reading
    of docs/science.md §5). ``beta_form="linear"`` uses 1 − κ(1 − β) and refuses where it leaves
    (0, 1) (κ(1 − β) >= 1: β₁ = 0.9 from κ = 10 on); ``"auto"`` (the former default, which jumped
    from the linear form to β^κ there) now means ``"power"``. By hand, β₁ = 0.9: κ = 4 → 0.6561
    (linear 0.6); κ = 10 → 0.3487 (linear 0); κ = 1/8 → 0.98692 (linear 0.9875). The form used
    is recorded in :attr:`BatchTransfer.beta_forms`. Check: ηλ ∝ κ and B ∝ κ keep
    τ_epoch = B/(ηλN).

    The same rule moves the hyperparameters with the number of steps (``Rule(horizon=
    "completed")``): κ is then S_base/S (Mlodozeniec et al. 2025, Table 1, "batch and duration").
    """

    beta_form: BetaForm = "power"
    lr_exponent: float = 0.5

    def __post_init__(self) -> None:
        if self.beta_form not in ("auto", "linear", "power"):
            raise TransferSearchError(
                f"`beta_form` must be 'power', 'linear' or 'auto', but got "
                f"beta_form={self.beta_form!r}. 'power' (default; 'auto' is its former name) uses "
                "beta**kappa, continuous in kappa; 'linear' uses 1 - kappa*(1 - beta) inside (0, 1)."
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
            weight_decay=match_decay(lr, weight_decay, new_lr, kappa),
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
            weight_decay=match_decay(lr, weight_decay, new_lr, kappa),
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
# Depth rules
# ----------------------------------------------------------------------------------------------
#: The two depth exponents of the literature: ½ depth-µP (Yang et al., Tensor Programs VI;
#: Bordelon et al.), 1 CompleteP (Dey et al. 2025). Values between are CompleteP's config range.
_ALPHA_RANGE = (0.5, 1.0)


def _check_alpha(alpha: object) -> float:
    """``alpha`` as a float in [½, 1], else an error naming the two literature values."""
    if not _is_finite_number(alpha) or not _ALPHA_RANGE[0] <= float(alpha) <= _ALPHA_RANGE[1]:  # type: ignore[arg-type]
        raise TransferSearchError(
            f"`alpha` (the depth exponent of the residual multiplier m_L**-alpha) must be a number "
            f"in [0.5, 1], but got alpha={alpha!r}. Use alpha=1 for CompleteP (Dey et al. 2025) "
            "or alpha=0.5 for depth-muP (Yang et al., Tensor Programs VI; Bordelon et al.)."
        )
    return float(alpha)  # type: ignore[arg-type]


def residual_multiplier(base_depth: float, depth: float, alpha: float = 1.0) -> float:
    """The factor m_L^(−α) the model must put on every residual branch, m_L = depth / base_depth.

    ``x ← x + m_L^(−α)·MHA(LN(x))`` and ``x ← x + m_L^(−α)·MLP(LN(x))`` (Dey et al. 2025,
    CompleteP, Table 1; nanoGPT-mup's ``Block.residual_scaling``). **The user's model must apply
    it**, on the attention and the MLP branch of every block; the library cannot check that. At
    the base depth it is 1, so the sweep's models need no change. E.g. base 4 blocks, 16 blocks:
    α = 1 → 0.25, α = ½ → 0.5.

    Raises:
        TransferSearchError: a depth that is not a positive number, or ``alpha`` outside [½, 1].
    """
    m_l = check_positive("depth", depth) / check_positive("base_depth", base_depth)
    return float(m_l ** -_check_alpha(alpha))


class DepthRule:
    """How per-group lr, weight decay and ε move with the depth multiplier m_L = L / L_base."""

    #: The scale names this rule reads.
    scale_names: ClassVar[tuple[str, ...]] = ("depth",)

    def depth_factors(self, depth_mult: float) -> dict[str, GroupFactors]:
        """Per group in :data:`ALL_GROUPS`, the (lr, weight_decay, eps) multipliers at m_L."""
        raise NotImplementedError

    def residual_multiplier(self, depth_mult: float) -> float:
        """The residual-branch multiplier the model must apply at m_L."""
        raise NotImplementedError


@dataclass(frozen=True)
class CompleteP(DepthRule):
    """CompleteP / depth-µP for pre-LN transformers (Dey et al. 2025, Table 1, column α ∈ {½, 1}).

    With m_L = L / L_base (L = number of residual blocks), multiplying the width rule's factors:

    ==============================================  ===============  ============  ===========
    group                                           lr               weight decay  eps
    ==============================================  ===============  ============  ===========
    hidden (every block matrix)                     × m_L^(α−1)      × m_L^e       × m_L^(−α)
    block_vector (in-block norm gains, biases)      × m_L^(α−1)      × m_L^e       × m_L^(−α)
    input, output, vector (final norm)              × 1              × 1           × 1
    ==============================================  ===============  ============  ===========

    The lr column is Table 1's (η_b·m_L^(α−1) for hidden weights, hidden biases and in-block LN;
    embedding, final LN and unembedding η_b) and nanoGPT-mup's ``depth_lr_scaling =
    depth_multiplier ** (depth_alpha_exp - 1)``. The eps column is Mlodozeniec et al. 2025
    (Complete(d)P, Table 1: ε × m_L^(−α) on hidden weights, biases and norms; no depth factor on
    the input embedding or the output); ``eps_depth=False`` leaves ε alone. Neither paper puts a
    depth factor on weight decay: e = ``wd_depth_exponent`` = 0 by default; e = ½ with α = ½ keeps
    the hidden ηλ fixed in depth (our extension, not the papers'). At α = 1 every lr is depth-free
    and only the residual multiplier 1/m_L and ε move. No init variance moves with depth; a model
    that keeps GPT-2's 1/√(2L) projection init is not what the papers transfer.

    The model must multiply every residual branch by :meth:`residual_multiplier` = m_L^(−α)
    (:func:`residual_multiplier`); the library cannot check that it does.

    Args:
        alpha: the depth exponent, in [½, 1]: 1 CompleteP (default), ½ depth-µP.
        eps_depth: move ε by m_L^(−α) in the blocks (default True, Complete(d)P).
        wd_depth_exponent: e above (default 0, the papers').
    """

    alpha: float = 1.0
    eps_depth: bool = True
    wd_depth_exponent: float = 0.0

    def __post_init__(self) -> None:
        _check_alpha(self.alpha)
        check_bool(
            "eps_depth",
            self.eps_depth,
            fix="True (default) divides the blocks' eps by m_L**alpha (Complete(d)P); False keeps it.",
        )
        if not _is_finite_number(self.wd_depth_exponent):
            raise TransferSearchError(
                "`wd_depth_exponent` must be a finite number (0, the papers' rule, or 0.5 to keep "
                f"eta*lambda at alpha=0.5), but got wd_depth_exponent={self.wd_depth_exponent!r}."
            )

    def depth_factors(self, depth_mult: float) -> dict[str, GroupFactors]:
        m_l = check_positive("depth_mult", depth_mult)
        block = GroupFactors(
            lr=m_l ** (self.alpha - 1.0),
            weight_decay=m_l ** float(self.wd_depth_exponent),
            eps=m_l**-self.alpha if self.eps_depth else 1.0,
        )
        one = GroupFactors(1.0, 1.0, 1.0)
        return {
            "input": one,
            "hidden": block,
            "output": one,
            "vector": one,
            BLOCK_VECTOR: block,
        }

    def residual_multiplier(self, depth_mult: float) -> float:
        return residual_multiplier(1.0, depth_mult, self.alpha)


_DEPTH_RULES: dict[str, DepthRule] = {
    "completep": CompleteP(alpha=1.0),
    "depth_mup": CompleteP(alpha=0.5),
}


def _resolve_depth(value: DepthRule | str | None) -> DepthRule | None:
    if value is None or isinstance(value, DepthRule):
        return value
    if isinstance(value, str) and value in _DEPTH_RULES:
        return _DEPTH_RULES[value]
    raise TransferSearchError(
        f"`depth` must be 'completep' (alpha=1, Dey et al. 2025), 'depth_mup' (alpha=0.5), None "
        f"or a DepthRule such as CompleteP(alpha=0.75), but got depth={value!r}."
    )


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


_HORIZONS = ("completed",)


@dataclass(frozen=True)
class Rule:
    """A complete scaling rule: a width rule with depth, dataset, batch and horizon rules.

    Subclasses define the width multipliers (:meth:`width_multipliers`). ``dataset`` is
    ``"tau_epoch"`` (default, :class:`ConstantTauEpoch`), ``"power_lines"``, a :class:`DatasetRule`
    or None (λ unchanged with N). ``batch`` is ``"adam"`` (default), ``"sgd"``, a :class:`BatchRule`
    or None (nothing changes with B). ``vector_weight_decay`` decays biases and gains (default
    False: λ₁ = 0 for vector-like parameters, Fan et al. 2025's layerwise rule; note that Kosson et
    al. App. F.3 decay every parameter except the gains, biases included — set True for that).

    ``depth`` is None (default: nothing moves with ``depth``; a target at another depth gets a
    note), ``"completep"`` (:class:`CompleteP`, α = 1), ``"depth_mup"`` (α = ½) or a
    :class:`DepthRule`. ``eps_width`` divides ε by s = d / d_base on the input, hidden and
    block-vector groups (Mlodozeniec et al. 2025, Complete(d)P Table 1; output and final norm × 1).
    It is off by default: it changes every existing width transfer's ε (a breaking change), the
    sources disagree on its scope (CompleteP's table: residual blocks; its code: one ε for every
    group; Complete(d)P: hidden and input), and ε matters only where a group's gradient RMS comes
    near it (docs/science.md §10).

    ``horizon="completed"`` moves every group with the number of steps S as the batch rule moves
    it with B (Mlodozeniec et al. 2025, Table 1, "batch and duration"): the batch rule runs at
    κ_S = S_base / S = m_B / m_D instead of κ = m_B, so lr × √κ_S, ε ÷ √κ_S, β → β^κ_S and λ
    decay-matched. It sets λ from the steps, so it refuses a dataset rule (which sets ηλ from N:
    stacking would count the data twice), and it needs Adam's batch rule.
    """

    dataset: DatasetRule | str | None = "tau_epoch"
    batch: BatchRule | str | None = "adam"
    vector_weight_decay: bool = False
    depth: DepthRule | str | None = None
    eps_width: bool = False
    horizon: str | None = None
    _dataset: DatasetRule | None = field(init=False, repr=False, compare=False, default=None)
    _batch: BatchRule | None = field(init=False, repr=False, compare=False, default=None)
    _depth: DepthRule | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        check_bool(
            "vector_weight_decay",
            self.vector_weight_decay,
            fix="True decays biases and gains too; False (default) leaves them undecayed.",
        )
        check_bool(
            "eps_width",
            self.eps_width,
            fix="True divides eps by the width ratio (Complete(d)P); False (default) keeps it.",
        )
        object.__setattr__(self, "_dataset", _resolve_dataset(self.dataset))
        object.__setattr__(self, "_batch", _resolve_batch(self.batch))
        object.__setattr__(self, "_depth", _resolve_depth(self.depth))
        self._check_horizon()

    def _check_horizon(self) -> None:
        """Refuse an unknown horizon, or one stacked on a dataset rule or a non-Adam batch rule."""
        if self.horizon is None:
            return
        if self.horizon not in _HORIZONS:
            raise TransferSearchError(
                f"`horizon` must be 'completed' (Complete(d)P's batch-and-duration rule) or None, "
                f"but got horizon={self.horizon!r}."
            )
        if self._dataset is not None:
            raise TransferSearchError(
                f"horizon='completed' sets weight decay from the number of steps, and the dataset "
                f"rule {self.dataset!r} sets eta*lambda from the dataset size: stacked, the data "
                "would be counted twice. Use one: dataset=None with horizon='completed' (e.g. "
                "MuP(dataset=None, horizon='completed')), or horizon=None."
            )
        if not isinstance(self._batch, AdamBatch):
            raise TransferSearchError(
                f"horizon='completed' is Adam's batch-and-duration rule and runs Adam's batch "
                f"rule at the ratio of steps, but the batch rule is {self.batch!r}. Use "
                "batch='adam' (default) with it."
            )

    @property
    def dataset_rule(self) -> DatasetRule | None:
        return self._dataset

    @property
    def batch_rule(self) -> BatchRule | None:
        return self._batch

    @property
    def depth_rule(self) -> DepthRule | None:
        return self._depth

    @property
    def scale_names(self) -> tuple[str, ...]:
        """The scale names this rule reads: ``width``, the depth, dataset and batch rules'."""
        names = ["width"]
        if self._depth is not None:
            names.extend(self._depth.scale_names)
        if self._dataset is not None:
            names.extend(self._dataset.scale_names)
        if self._batch is not None:
            names.append("batch_size")
        if self.horizon is not None:
            names.extend(("steps", "tokens", "dataset_size", "epochs"))
        return tuple(dict.fromkeys(names))

    @property
    def splits_block_vectors(self) -> bool:
        """Whether the in-block vectors get values of their own (a depth rule or ``eps_width``);
        otherwise "block_vector" is the "vector" group."""
        return self._depth is not None or self.eps_width

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

    def factors(self, base: Scale, scale: Scale) -> dict[str, GroupFactors]:
        """Per group in :data:`ALL_GROUPS`, the (lr, weight_decay, eps) multipliers from ``base``.

        Width (:meth:`group_multipliers` at s = width ratio; ε ÷ s on input, hidden and
        block_vector when ``eps_width``) times depth (the depth rule at m_L = depth ratio). The
        block_vector group starts from the vector group's width factors. At m_L = 1 and without
        ``eps_width`` every ε factor is 1 and block_vector equals vector: the width rule exactly.
        The dataset and batch rules act on top (:class:`~transfersearch.TransferSpace`).
        """
        width_mult = scale.ratio(base, "width")
        width = self.group_multipliers(width_mult)
        width[BLOCK_VECTOR] = width["vector"]
        eps_width = 1.0 / width_mult if self.eps_width else 1.0
        width_eps = {
            "input": eps_width,
            "hidden": eps_width,
            "output": 1.0,
            "vector": 1.0,
            BLOCK_VECTOR: eps_width,
        }
        one = GroupFactors(1.0, 1.0, 1.0)
        depth = (
            self._depth.depth_factors(scale.ratio(base, "depth"))
            if self._depth is not None
            else dict.fromkeys(ALL_GROUPS, one)
        )
        return {
            group: GroupFactors(
                lr=width[group][0] * depth[group].lr,
                weight_decay=width[group][1] * depth[group].weight_decay,
                eps=width_eps[group] * depth[group].eps,
            )
            for group in ALL_GROUPS
        }

    def residual_multiplier(self, base: Scale, scale: Scale) -> float:
        """m_L^(−α) of the depth rule at ``scale`` (1 without a depth rule): the factor the
        model must put on every residual branch (:func:`residual_multiplier`)."""
        if self._depth is None:
            return 1.0
        return self._depth.residual_multiplier(scale.ratio(base, "depth"))

    def kappa(self, base: Scale, scale: Scale) -> float:
        """The ratio the batch rule runs at: κ = B / B_base, or κ_S = S_base / S with a horizon.

        S is :attr:`Scale.total_steps` when both scales give it (``steps``, or epochs × N / B);
        else κ_S = m_B / m_D with D the ``tokens`` (when both give them) or ``dataset_size`` ×
        ``epochs`` (Mlodozeniec et al. 2025, Table 1: the batch-and-duration column is a function
        of m_B / m_D only). E.g. B 0.5M → 1M tokens, D 10B → 160B: κ_S = 2/16 = 1/8.
        """
        kappa = scale.ratio(base, "batch_size")
        if self.horizon is None:
            return kappa
        steps, base_steps = scale.total_steps, base.total_steps
        if steps is not None and base_steps is not None:
            return base_steps / steps
        if "tokens" in base and "tokens" in scale:
            return kappa / scale.ratio(base, "tokens")
        return kappa / (scale.ratio(base, "dataset_size") * scale.ratio(base, "epochs"))


#: What :class:`MuP`'s ``wd_width_exponent`` may be.
WD_WIDTH_EXPONENT = Allowed(
    Interval(Real), fix="E.g. 0 (standard), 0.5 (Fan et al.) or 1 (constant tau)."
)


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
        check_value("wd_width_exponent", self.wd_width_exponent, WD_WIDTH_EXPONENT)

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

"""The optimizers of a space whose groups run Muon or Lion beside AdamW (private; see
``integrations/torch.py`` and docs/muon.md).

:func:`make_optimizer` is the one call a training loop needs: it builds one torch optimizer per
family (``torch.optim.AdamW``, ``torch.optim.Muon``, :class:`Lion`) over the groups of
:func:`~._torch_groups.param_groups`, every group's values from ``hp``, and returns them as one
:class:`GroupedOptimizer` with ``step()`` and ``zero_grad()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from transfersearch.errors import TransferSearchError
from transfersearch.space import Hyperparameters

__all__ = ["MUON_TORCH", "GroupedOptimizer", "Lion", "make_optimizer", "muon_class"]

#: The first PyTorch release that ships ``torch.optim.Muon`` (pytorch/pytorch#160213).
MUON_TORCH = "2.9"


def muon_class() -> type[torch.optim.Optimizer]:
    """``torch.optim.Muon``.

    Raises:
        TransferSearchError: this torch has no ``torch.optim.Muon``, naming the version needed.
    """
    muon = getattr(torch.optim, "Muon", None)
    if muon is None:
        raise TransferSearchError(
            f"hp runs Muon on a group, but this PyTorch ({torch.__version__}) has no "
            f"torch.optim.Muon: it ships from PyTorch {MUON_TORCH} on. Upgrade, e.g. "
            f"pip install 'torch>={MUON_TORCH}', or leave Muon out of the space's optimizers."
        )
    return muon  # type: ignore[no-any-return]


class Lion(torch.optim.Optimizer):
    """Lion (Chen et al. 2023, arXiv 2302.06675, Algorithm 2), decoupled weight decay.

    Per step: c = β₁m + (1 − β₁)g; θ ← θ(1 − γλ) − γ·sign(c); m ← β₂m + (1 − β₂)g. The decay is
    multiplied by γ, as torch.optim.AdamW's (PyTorch's coupled convention: τ_iter = 1/(γλ)).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
    ) -> None:
        if not lr > 0.0:
            raise TransferSearchError(f"Lion's `lr` must be > 0, but got lr={lr!r}.")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise TransferSearchError(f"Lion's `betas` must lie in [0, 1), but got {betas!r}.")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One Lion step over every group; returns the closure's loss when given one."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["exp_avg"] = torch.zeros_like(param)
                avg = state["exp_avg"]
                param.mul_(1.0 - lr * wd)
                update = avg.mul(beta1).add_(param.grad, alpha=1.0 - beta1).sign_()
                param.add_(update, alpha=-lr)
                avg.mul_(beta2).add_(param.grad, alpha=1.0 - beta2)
        return loss


class GroupedOptimizer:
    """One torch optimizer per family, stepped together (``step()``, ``zero_grad()``).

    Attributes:
        optimizers: family name ("adamw", "muon", "lion") → its torch optimizer. Schedule each
            with its own scheduler, e.g. ``[LambdaLR(o, f) for o in opt.optimizers.values()]``.
    """

    def __init__(self, optimizers: Mapping[str, torch.optim.Optimizer]) -> None:
        self.optimizers: dict[str, torch.optim.Optimizer] = dict(optimizers)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}: {type(opt).__name__} ({len(opt.param_groups)} groups)"
            for name, opt in self.optimizers.items()
        )
        return f"GroupedOptimizer({shown})"

    def __iter__(self) -> Iterator[torch.optim.Optimizer]:
        return iter(self.optimizers.values())

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """Every optimizer's param groups, in family order (each dict has ``name`` and
        ``optimizer``)."""
        return [group for opt in self.optimizers.values() for group in opt.param_groups]

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Step every optimizer; a closure is evaluated once (by the first)."""
        loss = None
        for index, opt in enumerate(self.optimizers.values()):
            result = opt.step(closure if index == 0 else None)
            loss = result if index == 0 else loss
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """``zero_grad`` on every optimizer."""
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """``{family: optimizer.state_dict()}``."""
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`.

        Raises:
            TransferSearchError: the families differ from this object's.
        """
        if set(state) != set(self.optimizers):
            raise TransferSearchError(
                f"the state holds the optimizers {sorted(state)}, but this GroupedOptimizer has "
                f"{sorted(self.optimizers)}: build it from the same hp's space."
            )
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state[name])


def _build(family: str, groups: list[dict[str, Any]]) -> torch.optim.Optimizer:
    if family == "muon":
        muon: Any = muon_class()  # torch.optim.Muon(params, lr=..., ...): defaults from groups
        return muon(groups)  # type: ignore[no-any-return]
    if family == "lion":
        return Lion(groups)
    return torch.optim.AdamW(groups)


def make_optimizer(
    model: nn.Module,
    hp: Hyperparameters,
    base_model: nn.Module | None = None,
    overrides: Mapping[Any, str] | None = None,
    blocks: Any = None,
) -> GroupedOptimizer:
    """The optimizers ``hp`` asks for, over ``model``'s parameters: one call for the loop.

    Groups as :func:`param_groups` (``by_optimizer=True``) builds them, each with every value from
    ``hp`` (lr, weight decay in PyTorch's coupled convention, eps, and the family's momentum or
    betas): AdamW over the groups no family claims, ``torch.optim.Muon`` over the Muon group,
    :class:`Lion` over Lion's. An AdamW-only ``hp`` gives one AdamW.

    Raises:
        TransferSearchError: as :func:`param_groups`; a non-2-D parameter in the Muon group
            (naming the override that moves it to AdamW); a torch without ``torch.optim.Muon``.
    """
    from ._torch_groups import param_groups

    grouped = param_groups(
        model, hp, base_model=base_model, overrides=overrides, blocks=blocks, by_optimizer=True
    )
    return GroupedOptimizer({family: _build(family, groups) for family, groups in grouped.items()})

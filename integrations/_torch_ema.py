"""Model EMA with a batch-size–scaled momentum (private; see ``integrations/torch.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from transfersearch.errors import TransferSearchError
from transfersearch.rules import scale_ema_momentum

from ._torch_groups import clean_name, unwrap

__all__ = ["ModelEMA"]

_VERSION = 1


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers by clean name (wrappers removed, so compiled/DDP models match)."""
    root = unwrap(model)
    named: dict[str, torch.Tensor] = {clean_name(n): p for n, p in root.named_parameters()}
    named.update({clean_name(n): b for n, b in root.named_buffers()})
    return named


class ModelEMA:
    """An exponential moving average of a model's parameters and floating-point buffers.

    ``e ← ρ·e + (1 − ρ)·w`` after each :meth:`update`; integer buffers (e.g. BatchNorm's
    ``num_batches_tracked``) are copied. Pass ``momentum=hp.ema_momentum``: the core already carries
    it across batch sizes as ρ̂ = ρ^κ (Busbridge et al. 2023, Def. 1.2), so one update per optimizer
    step keeps the EMA's horizon fixed in samples. The average lives outside the model (a dict of
    tensors), by clean name: wrappers (torch.compile, DDP) do not change it, nothing is patched onto
    the model.

    Args:
        model: the model to average (its current values start the average).
        momentum: ρ in [0, 1), the weight of the old average.
        device: where to keep the average (default: beside each tensor).

    Raises:
        TransferSearchError: a momentum outside [0, 1) or None (``hp.ema_momentum`` is None unless
            the space sets ``ema_momentum``), or a model with uninitialised lazy tensors.
    """

    def __init__(
        self, model: nn.Module, momentum: float | None, device: torch.device | str | None = None
    ) -> None:
        if momentum is None:
            raise TransferSearchError(
                "ModelEMA needs a momentum, but got momentum=None (hp.ema_momentum is None when "
                "the space sets no EMA momentum: there is no neutral default, since the EMA's "
                "horizon is a choice). Set it in the space, TransferSpace(..., "
                "ema_momentum=0.999), so hp.ema_momentum carries it across batch sizes as ρ^κ; "
                "or pass a number, or drop the EMA."
            )
        self.momentum = scale_ema_momentum(float(momentum), 1.0)  # validates [0, 1); κ = 1
        lazy = sorted(name for name, tensor in _state(model).items() if is_lazy(tensor))
        if lazy:
            raise TransferSearchError(
                f"`model` has uninitialised lazy tensors {lazy[:5]} (nn.LazyLinear and the other "
                "Lazy* modules get their shapes at the first forward pass), so there is nothing "
                "to average yet. Run one forward pass first, e.g. model(example_batch), then "
                "build the ModelEMA."
            )
        self.device = None if device is None else torch.device(device)
        self.num_updates = 0
        self.shadow: dict[str, torch.Tensor] = {
            name: tensor.detach().to(self.device or tensor.device, copy=True)
            for name, tensor in _state(model).items()
        }

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """One EMA step toward ``model``'s current values (call after ``optimizer.step()``)."""
        current = _state(model)
        missing = sorted(set(self.shadow) - set(current))
        if missing:
            raise TransferSearchError(
                f"the model lacks tensors {missing[:5]} that this EMA tracks; update with the "
                "model the EMA was built from."
            )
        for name, average in self.shadow.items():
            value = current[name].detach().to(average.device)
            if average.is_floating_point():
                average.lerp_(value.to(average.dtype), 1.0 - self.momentum)
            else:
                average.copy_(value)
        self.num_updates += 1

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Write the averaged values into ``model`` (e.g. a copy used for evaluation)."""
        current = _state(model)
        for name, average in self.shadow.items():
            if name not in current:
                raise TransferSearchError(
                    f"the model has no tensor {name!r}; copy_to needs the same architecture."
                )
            current[name].copy_(average.to(current[name].device))

    def state_dict(self) -> dict[str, Any]:
        """``{"version", "momentum", "num_updates", "shadow"}`` (tensors cloned to be safe)."""
        return {
            "version": _VERSION,
            "momentum": self.momentum,
            "num_updates": self.num_updates,
            "shadow": {name: t.detach().clone() for name, t in self.shadow.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the tracked names must match."""
        if not isinstance(state, Mapping) or state.get("version") != _VERSION:
            raise TransferSearchError(
                f"ModelEMA state must come from ModelEMA.state_dict() (version {_VERSION})."
            )
        shadow = state["shadow"]
        if set(shadow) != set(self.shadow):
            raise TransferSearchError(
                f"ModelEMA state tracks {sorted(set(shadow) ^ set(self.shadow))[:5]} differently "
                "from this EMA; load it into an EMA of the same architecture."
            )
        self.momentum = scale_ema_momentum(float(state["momentum"]), 1.0)
        self.num_updates = int(state["num_updates"])
        for name, tensor in shadow.items():
            self.shadow[name].copy_(tensor.to(self.shadow[name].device))

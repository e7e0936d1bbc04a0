"""transfersearch inside a LightningModule: µP param groups, the schedule, and a model EMA.

Run: ``python examples/lightning_module.py`` (CPU, a few seconds). The coordinates (base lr,
τ_epoch) are defined at width 32 and concretized for width 128 and batch size 128:
``configure_optimizers`` builds ``torch.optim.AdamW`` over :func:`param_groups` (per-group lr and
coupled weight decay) with a ``LambdaLR`` from :func:`schedule` stepped every batch, and
:class:`EMACallback` keeps a :class:`ModelEMA` (momentum ρ^κ for the batch ratio κ) updated after
every optimizer step and swaps it in for validation.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import transfersearch as ts
from transfersearch.integrations.torch import ModelEMA, param_groups, schedule

BASE = ts.Scale(width=32, dataset_size=2048, batch_size=64)
SPACE = ts.TransferSpace(base=BASE, coords={"base_lr": 3e-3, "tau_epoch": 1.0}, ema_momentum=0.99)
EPOCHS = 3


def make_model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, width), nn.ReLU(), nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU(),
        nn.Linear(width, 4),
    )  # fmt: skip


class ProxyModule(L.LightningModule):
    """A regression MLP whose optimizer comes from transfersearch's hyperparameters."""

    def __init__(self, hp: ts.Hyperparameters, steps_per_epoch: int) -> None:
        super().__init__()
        self.hp = hp
        self.model = make_model(int(hp.scale["width"]))
        self.total_steps = steps_per_epoch * EPOCHS

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.model(inputs)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        inputs, targets = batch
        loss = nn.functional.mse_loss(self(inputs), targets)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        inputs, targets = batch
        self.log("val_loss", nn.functional.mse_loss(self(inputs), targets))

    def configure_optimizers(self) -> Any:
        with torch.device("meta"):  # the base width's shapes tell each parameter's group
            reference = make_model(int(BASE["width"]))
        groups = param_groups(self.model, self.hp, base_model=reference)
        optimizer = torch.optim.AdamW(groups, betas=self.hp.betas, eps=self.hp.eps)
        factor = schedule(self.hp, self.total_steps, "cosine", warmup="linear", warmup_steps=5)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


class EMACallback(L.Callback):
    """Keep a :class:`ModelEMA` of the module; validate with the averaged weights."""

    def __init__(self, momentum: float | None) -> None:
        self.momentum = momentum
        self.ema: ModelEMA | None = None
        self._saved: dict[str, torch.Tensor] | None = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.ema = ModelEMA(pl_module, momentum=self.momentum)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any
    ) -> None:
        assert self.ema is not None
        self.ema.update(pl_module)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.ema is not None and self.ema.num_updates:
            self._saved = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}
            self.ema.copy_to(pl_module)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._saved is not None:
            pl_module.load_state_dict(self._saved)
            self._saved = None


def main() -> None:
    torch.manual_seed(0)
    target = ts.Scale(width=128, batch_size=128)
    hp = SPACE.concretize({}, scale=target)
    inputs = torch.randn(int(BASE["dataset_size"]), 16)
    targets = torch.tanh(inputs[:, :4] * inputs[:, 4:8])
    train = DataLoader(TensorDataset(inputs, targets), batch_size=int(hp.batch_size), shuffle=True)
    val = DataLoader(TensorDataset(inputs[:256], targets[:256]), batch_size=256)
    module = ProxyModule(hp, steps_per_epoch=len(train))
    callback = EMACallback(hp.ema_momentum)
    trainer = L.Trainer(
        max_epochs=EPOCHS, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback],
    )  # fmt: skip
    trainer.fit(module, train, val)
    optimizer = trainer.optimizers[0]
    for group in optimizer.param_groups:
        lr, wd = group["initial_lr"], group["weight_decay"]  # lr before the schedule's factor
        print(f"{group['name']:<7} lr={lr:.3g} weight_decay={wd:.3g}")
    assert callback.ema is not None
    print(f"ema momentum={callback.ema.momentum:.5f} updates={callback.ema.num_updates}")
    print(f"val_loss={trainer.callback_metrics['val_loss'].item():.4f}")


if __name__ == "__main__":
    main()

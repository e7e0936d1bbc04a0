"""The corpus's families: each a proxy ladder and a target, a model, data, optimizer and space.

A family sweeps the same grid of invariant coordinates (µP base lr × τ_epoch, both log-spaced,
defined at the first rung) on every rung and on the target, with two training seeds per point.
The target costs ≥ 4× the largest rung (params × samples seen). ``space()`` is the
``TransferSpace`` that turns coordinates into per-group lr / weight decay at any rung: the rule
the family is carried by ("the rules alone" baseline uses it too).

Units: ``dataset_size`` and ``batch_size`` count samples (a window of ``context`` characters, or
one teacher example); ``epochs`` passes over them (one-pass families: 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tasks import count_params

import transfersearch as ts
from transfersearch.optimizers import Muon

SEEDS = (0, 1)
#: Training samples the text tasks draw from (the largest dataset_size any family uses).
MAX_SAMPLES = 65_536


@dataclass(frozen=True)
class Size:
    width: int
    depth: int
    dataset_size: int
    batch_size: int
    epochs: float


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    model: str
    context: int
    optimizer: str
    regime: str  # "multi-epoch" or "one-pass"
    moves: str
    rungs: tuple[Size, ...]
    target: Size
    lr_grid: tuple[float, ...]
    tau_grid: tuple[float, ...]
    rule: ts.rules.Rule = field(default_factory=ts.rules.MuP)
    #: Optimizer families per group beside AdamW (``TransferSpace(optimizers=...)``).
    optimizers: dict[str, Any] | None = None

    def params(self, size: Size) -> int:
        return count_params(self.model, size.width, size.depth, self.context)

    def scale(self, size: Size) -> ts.Scale:
        """The scale the sweep records for a rung (params always; epochs and tokens for one
        pass)."""
        values: dict[str, float] = {
            "width": size.width,
            "depth": size.depth,
            "dataset_size": size.dataset_size,
            "batch_size": size.batch_size,
            "params": self.params(size),
        }
        if self.regime == "one-pass":
            values["epochs"] = size.epochs
            # Training tokens seen (each sample: ``context`` next-character predictions): the D of
            # Power Lines' tokens per parameter, which places τ_epoch's optimum.
            values["tokens"] = size.dataset_size * self.context * size.epochs
        return ts.Scale(**values)

    def space(self) -> ts.TransferSpace:
        lo, hi = min(self.lr_grid), max(self.lr_grid)
        tlo, thi = min(self.tau_grid), max(self.tau_grid)
        return ts.TransferSpace(
            base=self.scale(self.rungs[0]),
            coords={
                "base_lr": ts.Float(lo / 4, hi * 4, log=True),
                "tau_epoch": ts.Float(tlo / 4, thi * 4, log=True),
            },
            rule=self.rule,
            optimizers=self.optimizers,
        )

    def compute(self, size: Size) -> float:
        """params × samples seen (the cost that orders rungs; the target is ≥ 4× the top rung)."""
        return float(self.params(size)) * size.dataset_size * size.epochs

    def grid(self) -> list[tuple[float, float]]:
        return [(lr, tau) for lr in self.lr_grid for tau in self.tau_grid]


def _geom(first: float, ratio: float, n: int) -> tuple[float, ...]:
    return tuple(float(f"{first * ratio**k:.4g}") for k in range(n))


ADAM_LR = _geom(0.01, 2.0, 4)  # 0.01 … 0.08
SGD_LR = _geom(0.05, 2.0, 4)  # 0.05 … 0.4
TAU = tuple(float(f"{t:.3g}") for t in np.geomspace(0.316, 10.0, 4))  # 0.316 … 10

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            name="mlp_width",
            description="character MLP on stdlib text, 4 epochs; width 16→32→64, target 128 at 1.25× data",
            model="mlp",
            context=8,
            optimizer="adamw",
            regime="multi-epoch",
            moves="width",
            rungs=tuple(Size(w, 1, 4096, 64, 4.0) for w in (16, 32, 64)),
            target=Size(128, 1, 5120, 64, 4.0),
            lr_grid=ADAM_LR,
            tau_grid=TAU,
        ),
        Family(
            name="mlp_data",
            description="character MLP (width 32) on stdlib text, 4 epochs; N 1k→2k→4k samples, "
            "target 16k",
            model="mlp",
            context=8,
            optimizer="adamw",
            regime="multi-epoch",
            moves="dataset_size",
            rungs=tuple(Size(32, 1, n, 64, 4.0) for n in (1024, 2048, 4096)),
            target=Size(32, 1, 16384, 64, 4.0),
            lr_grid=(0.005, *ADAM_LR),
            tau_grid=TAU,
        ),
        Family(
            name="teacher_batch",
            description="MLP (width 64) on a random-teacher task (20% label noise), 4 epochs; batch "
            "16→32→64, target batch 128 at 4× data",
            model="teacher",
            context=0,
            optimizer="adamw",
            regime="multi-epoch",
            moves="batch_size",
            rungs=tuple(Size(64, 2, 4096, b, 4.0) for b in (16, 32, 64)),
            target=Size(64, 2, 16384, 128, 4.0),
            lr_grid=(0.005, *ADAM_LR),
            tau_grid=TAU,
        ),
        Family(
            name="cnn_batch_sgd",
            description="causal character CNN (3 blocks), SGD + momentum 0.9, 3 epochs; batch "
            "8→16→32, target batch 64 at 4× data",
            model="cnn",
            context=32,
            optimizer="sgd",
            regime="multi-epoch",
            moves="batch_size",
            rungs=tuple(Size(32, 3, 1024, b, 3.0) for b in (8, 16, 32)),
            target=Size(32, 3, 4096, 64, 3.0),
            lr_grid=(*SGD_LR, 0.8),
            tau_grid=(*TAU, 31.6),
            rule=ts.rules.Standard(batch="sgd"),
        ),
        Family(
            name="gpt_width_onepass",
            description="character transformer (2 blocks), one pass; width 32→48→64 with data ∝ "
            "params, target width 96 at 2× the top rung's data",
            model="gpt",
            context=32,
            optimizer="adamw",
            regime="one-pass",
            moves="width, dataset_size",
            rungs=(
                Size(32, 2, 1024, 16, 1.0),
                Size(48, 2, 1536, 16, 1.0),
                Size(64, 2, 2048, 16, 1.0),
            ),
            target=Size(96, 2, 4096, 16, 1.0),
            lr_grid=(0.005, *ADAM_LR),
            tau_grid=(0.1, *TAU),
            rule=ts.rules.MuP(dataset="power_lines"),
        ),
        Family(
            name="gpt_depth_onepass",
            description="character transformer, width 32, one pass, CompleteP; depth 1→2→4, target "
            "depth 8 at 2.5× data",
            model="gpt",
            context=32,
            optimizer="adamw",
            regime="one-pass",
            moves="depth",
            rungs=tuple(Size(32, d, 2048, 32, 1.0) for d in (1, 2, 4)),
            target=Size(32, 8, 5120, 32, 1.0),
            lr_grid=ADAM_LR,
            tau_grid=(0.1, *TAU, 31.6),
            rule=ts.rules.MuP(dataset="power_lines", depth="completep"),
        ),
        Family(
            name="gpt_width_muon",
            description="character transformer (2 blocks), one pass, Muon (match_rms_adamw) on "
            "the hidden matrices and AdamW on the rest sharing base lr and tau_epoch; width "
            "16→24→32 with data ∝ params, target width 48 at 2× the top rung's data",
            model="gpt",
            context=32,
            optimizer="muon",
            regime="one-pass",
            moves="width, dataset_size",
            rungs=(
                Size(16, 2, 1024, 16, 1.0),
                Size(24, 2, 1536, 16, 1.0),
                Size(32, 2, 2048, 16, 1.0),
            ),
            target=Size(48, 2, 4096, 16, 1.0),
            lr_grid=(*ADAM_LR, 0.16),
            tau_grid=(0.1, *TAU),
            rule=ts.rules.MuP(dataset="power_lines"),
            optimizers={"hidden": Muon(adjust_lr_fn="match_rms_adamw")},
        ),
    )
}

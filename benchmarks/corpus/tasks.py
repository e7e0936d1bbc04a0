"""The corpus's training tasks: data, models and one training loop (CPU, one thread).

Data (nothing is downloaded):

- ``text``: Python's own standard library (the ``.py`` files at the top of the stdlib folder,
  sorted); every tenth file is validation, the rest training. Characters outside
  ``string.printable`` share one token. A *sample* is a window of ``context`` characters and, for
  sequence models, the character after each of them (``context`` next-character predictions).
- ``teacher``: Gaussian inputs (dimension 32) labelled by a fixed random two-layer teacher network
  with 20% of labels replaced at random; a fixed validation set of fresh samples. Multi-epoch over a
  small training set, so weight decay matters.

Models (µP parameter groups come from ``transfersearch.integrations.torch.param_groups`` by
comparing shapes with the same model at half the width):

- ``CharMLP``: embed ``context`` characters, mix them, one residual MLP, read out (the demo's
  model shape).
- ``CharCNN``: causal residual Conv1d blocks (kernel 3, dilations 1, 2, 4, …) over the window.
- ``CharGPT``: a pre-norm transformer (causal attention, head size 16, GELU MLP 4×); every residual
  branch is multiplied by ``residual_multiplier`` (CompleteP).
- ``TeacherMLP``: two hidden layers on the teacher task.

Every model's readout starts at zero (µP; Everett et al.). The schedule is 5% linear warmup then
cosine decay to 10% of the peak (the demo's). The optimizer is AdamW (per-group betas/eps from
``hp``), SGD with momentum 0.9 (per-group lr and coupled weight decay from ``hp``), or Muon on the
hidden matrices with AdamW on the rest (``make_optimizer``: every value from ``hp``).
"""

from __future__ import annotations

import math
import string
import sysconfig
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from transfersearch import Hyperparameters
from transfersearch.integrations.torch import make_optimizer, param_groups, schedule

ALPHABET = string.printable
VOCAB = len(ALPHABET) + 1
#: Validation samples (fixed across runs of a task).
VAL_SAMPLES = 2048
#: Training characters read at most.
MAX_CHARS = 3_000_000
TEACHER_DIM = 32
TEACHER_CLASSES = 10
TEACHER_LABEL_NOISE = 0.2
TEACHER_TRAIN_MAX = 262_144


@dataclass(frozen=True)
class Data:
    """Training inputs/targets in a fixed order (a larger N holds every smaller N) and validation."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor

    def first(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if n > self.train_x.shape[0]:
            raise ValueError(f"the task holds {self.train_x.shape[0]} training samples, asked {n}")
        return self.train_x[:n], self.train_y[:n]


def _encode(text: str) -> np.ndarray:
    table = np.full(256, len(ALPHABET), dtype=np.int64)
    for i, ch in enumerate(ALPHABET):
        table[ord(ch)] = i
    return table[np.frombuffer(text.encode("latin-1", errors="replace"), dtype=np.uint8)]


@lru_cache(maxsize=1)
def _stdlib_text() -> tuple[np.ndarray, np.ndarray]:
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    train, val = [], []
    size = 0
    for index, path in enumerate(files):
        text = path.read_text(encoding="utf-8", errors="replace")
        if index % 10 == 9:
            val.append(text)
        elif size < MAX_CHARS:
            train.append(text)
            size += len(text)
    return _encode("\n".join(train)[:MAX_CHARS]), _encode("\n".join(val))


@lru_cache(maxsize=4)
def text_data(context: int, sequence: bool, max_samples: int) -> Data:
    """Windows of ``context`` characters in one fixed random order (seed 0).

    ``sequence``: targets are the next character at every position (``(n, context)``); else the
    one character after the window (``(n,)``).
    """
    train, val = _stdlib_text()
    rng = np.random.default_rng(0)
    starts = rng.permutation(len(train) - context - 1)[:max_samples]
    val_starts = rng.choice(len(val) - context - 1, size=VAL_SAMPLES, replace=False)

    def cut(text: np.ndarray, s: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = torch.from_numpy(text[s[:, None] + np.arange(context + 1)[None, :]])
        x = chunk[:, :context].contiguous()
        y = chunk[:, 1:].contiguous() if sequence else chunk[:, context].contiguous()
        return x, y

    tx, ty = cut(train, starts)
    vx, vy = cut(val, val_starts)
    return Data(tx, ty, vx, vy)


@lru_cache(maxsize=1)
def teacher_data() -> Data:
    """The teacher task: x ~ N(0, I_32), y = argmax of a random two-layer teacher, 20% relabelled."""
    gen = torch.Generator().manual_seed(1234)
    w1 = torch.randn(TEACHER_DIM, 64, generator=gen) / math.sqrt(TEACHER_DIM)
    w2 = torch.randn(64, TEACHER_CLASSES, generator=gen) / math.sqrt(64)
    n = TEACHER_TRAIN_MAX + VAL_SAMPLES
    x = torch.randn(n, TEACHER_DIM, generator=gen)
    y = (torch.tanh(x @ w1) @ w2).argmax(1)
    flip = torch.rand(n, generator=gen) < TEACHER_LABEL_NOISE
    y = torch.where(flip, torch.randint(0, TEACHER_CLASSES, (n,), generator=gen), y)
    return Data(x[VAL_SAMPLES:], y[VAL_SAMPLES:], x[:VAL_SAMPLES], y[:VAL_SAMPLES])


class CharMLP(nn.Module):
    def __init__(self, width: int, depth: int = 1, context: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.mix = nn.Linear(context * width, width)
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Linear(width, width)
        self.out_norm = nn.LayerNorm(width)
        self.readout = nn.Linear(width, VOCAB)
        nn.init.zeros_(self.readout.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.mix(self.embed(x).flatten(1)))
        h = h + nn.functional.gelu(self.mlp(self.norm(h)))
        out: torch.Tensor = self.readout(self.out_norm(h))
        return out


class _ConvBlock(nn.Module):
    def __init__(self, width: int, dilation: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.conv = nn.Conv1d(width, width, 3, dilation=dilation)
        self.pad = 2 * dilation

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # h: (n, L, w)
        z = self.norm(h).transpose(1, 2)
        z = self.conv(nn.functional.pad(z, (self.pad, 0)))
        return h + nn.functional.gelu(z.transpose(1, 2))


class CharCNN(nn.Module):
    def __init__(self, width: int, depth: int = 3, context: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.blocks = nn.ModuleList(_ConvBlock(width, 2**i) for i in range(depth))
        self.out_norm = nn.LayerNorm(width)
        self.readout = nn.Linear(width, VOCAB)
        nn.init.zeros_(self.readout.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        out: torch.Tensor = self.readout(self.out_norm(h))
        return out


class _Block(nn.Module):
    def __init__(self, width: int, multiplier: float) -> None:
        super().__init__()
        self.heads = max(1, width // 16)
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        self.multiplier = multiplier

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        n, length, width = h.shape
        q, k, v = self.qkv(self.norm1(h)).split(width, dim=2)
        shape = (n, length, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.multiplier * self.proj(a.transpose(1, 2).reshape(n, length, width))
        return h + self.multiplier * self.down(nn.functional.gelu(self.up(self.norm2(h))))


class CharGPT(nn.Module):
    def __init__(
        self, width: int, depth: int = 2, context: int = 32, residual_multiplier: float = 1.0
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(torch.randn(context, width) * 0.02)
        self.blocks = nn.ModuleList(_Block(width, residual_multiplier) for _ in range(depth))
        self.out_norm = nn.LayerNorm(width)
        self.readout = nn.Linear(width, VOCAB)
        nn.init.zeros_(self.readout.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.position[: x.shape[1]]
        for block in self.blocks:
            h = block(h)
        out: torch.Tensor = self.readout(self.out_norm(h))
        return out


class TeacherMLP(nn.Module):
    def __init__(self, width: int, depth: int = 2, context: int = 0) -> None:
        super().__init__()
        self.first = nn.Linear(TEACHER_DIM, width)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(depth - 1))
        self.readout = nn.Linear(width, TEACHER_CLASSES)
        nn.init.zeros_(self.readout.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.first(x))
        for layer in self.hidden:
            h = h + nn.functional.gelu(layer(h))
        out: torch.Tensor = self.readout(h)
        return out


MODELS: dict[str, type[nn.Module]] = {
    "mlp": CharMLP,
    "cnn": CharCNN,
    "gpt": CharGPT,
    "teacher": TeacherMLP,
}


#: Raw parameters whose role shapes cannot tell (the positional table grows on its fan-out).
OVERRIDES: dict[str, dict[str, str]] = {"gpt": {"position": "input"}}


def build(model: str, width: int, depth: int, context: int, multiplier: float = 1.0) -> nn.Module:
    cls = MODELS[model]
    if model == "gpt":
        return CharGPT(width, depth, context, multiplier)
    return cls(width, depth, context)  # type: ignore[call-arg]


def count_params(model: str, width: int, depth: int, context: int) -> int:
    """Trainable parameters of ``model`` at this size (what ``params`` in a scale means here)."""
    torch.manual_seed(0)
    return sum(p.numel() for p in build(model, width, depth, context).parameters())


def data_for(model: str, context: int, max_samples: int) -> Data:
    if model == "teacher":
        return teacher_data()
    return text_data(context, model in ("cnn", "gpt"), max_samples)


@dataclass(frozen=True)
class Run:
    loss: float  # final validation loss (nats); NaN if training diverged
    steps: int
    seconds: float


def train(
    *,
    model: str,
    width: int,
    depth: int,
    context: int,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    hp: Hyperparameters,
    optimizer: str,
    seed: int,
    max_samples: int,
) -> Run:
    """Train once; the seed sets initialisation and data order (common across configurations)."""
    started = time.perf_counter()
    torch.set_num_threads(1)
    data = data_for(model, context, max_samples)
    torch.manual_seed(seed)
    multiplier = float(hp.residual_multiplier or 1.0)
    net = build(model, width, depth, context, multiplier)
    reference = build(model, max(8, width // 2), depth, context, multiplier)
    if optimizer == "muon":  # Muon on the hidden matrices, AdamW on the rest, every value from hp
        grouped = make_optimizer(net, hp, base_model=reference, overrides=OVERRIDES.get(model))
        return _loop(net, list(grouped), grouped, data, dataset_size, batch_size, epochs, hp,
                     seed, started)  # fmt: skip
    groups: list[dict[str, Any]] = list(
        param_groups(net, hp, base_model=reference, overrides=OVERRIDES.get(model))
    )
    opt: torch.optim.Optimizer
    if optimizer == "adamw":
        opt = torch.optim.AdamW(groups, betas=hp.betas, eps=hp.eps)
    elif optimizer == "sgd":
        for g in groups:
            g.pop("betas", None)
            g.pop("eps", None)
        opt = torch.optim.SGD(groups, momentum=0.9)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    return _loop(net, [opt], opt, data, dataset_size, batch_size, epochs, hp, seed, started)


def _loop(
    net: nn.Module,
    optimizers: list[torch.optim.Optimizer],
    opt: Any,
    data: Data,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    hp: Hyperparameters,
    seed: int,
    started: float,
) -> Run:
    xs, ys = data.first(dataset_size)
    steps_per_epoch = max(1, dataset_size // batch_size)
    total = max(1, round(epochs * steps_per_epoch))
    warmup = max(1, int(total * 0.05))
    factor = schedule(hp, total, "cosine", warmup="linear", warmup_steps=warmup, final_fraction=0.1)
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, factor) for o in optimizers]
    gen = torch.Generator().manual_seed(seed)
    lossf = nn.functional.cross_entropy
    step = 0
    while step < total:
        perm = torch.randperm(dataset_size, generator=gen)
        for i in range(steps_per_epoch):
            if step >= total:
                break
            idx = perm[i * batch_size : (i + 1) * batch_size]
            out = net(xs[idx])
            loss = lossf(out.reshape(-1, out.shape[-1]), ys[idx].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            for sched in scheds:
                sched.step()
            step += 1
            if step % 25 == 0 and not math.isfinite(float(loss.detach())):
                return Run(math.nan, step, time.perf_counter() - started)
    net.eval()
    with torch.no_grad():
        out = net(data.val_x)
        val = float(lossf(out.reshape(-1, out.shape[-1]), data.val_y.reshape(-1)))
    return Run(val if math.isfinite(val) else math.nan, total, time.perf_counter() - started)

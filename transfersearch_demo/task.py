"""The demo's training task: a character-level MLP language model on Python's own standard library.

The data ships with every Python: the ``.py`` files at the top of ``sysconfig.get_paths()["stdlib"]``,
read in sorted order. Every tenth file (by sorted position) is held out for validation, so train and
validation never share a file. A *sample* is a window of ``context`` characters and the character
that follows it; ``dataset_size`` counts samples and ``batch_size`` counts samples too, so
τ_epoch = B/(ηλN) is measured in epochs over these windows.

Training sets are nested: the first N windows of one fixed permutation of all training windows, so a
larger dataset contains every smaller one. The model is small on purpose (2 CPU cores), and training
runs several epochs over a small dataset, so it overfits and weight decay matters (the multi-epoch
regime of Wang & Aitchison 2025, where the optimal τ_epoch is roughly constant).

The model, by µP parameter group (``transfersearch.rules.GROUPS``):

- ``input``: the character embedding (vocab × width).
- ``hidden``: the context mixer (context·width → width) and the residual MLP (width → width).
- ``output``: the readout (width → vocab), initialised at zero (µP; Everett et al.).
- ``vector``: biases and LayerNorm gains.
"""

from __future__ import annotations

import math
import os
import string
import sysconfig
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from transfersearch.errors import TransferSearchError
from transfersearch.integrations.torch import param_groups, schedule
from transfersearch.scale import Scale
from transfersearch.space import Hyperparameters

__all__ = [
    "CharMLP",
    "Corpus",
    "TrainResult",
    "demo_param_groups",
    "load_corpus",
    "lr_schedule",
    "make_model",
    "resolve_device",
    "train",
]

#: Characters with their own token; anything else maps to one "unknown" token.
ALPHABET = string.printable
VOCAB_SIZE = len(ALPHABET) + 1
#: Characters of context the model sees.
CONTEXT = 8
#: Validation windows (fixed across every run).
VAL_SIZE = 4096
#: Characters of stdlib text read at most (enough windows for the --full ladder).
MAX_CHARS = 1_500_000


@dataclass(frozen=True)
class Corpus:
    """Encoded stdlib text: training windows in a fixed order, and a fixed validation set.

    Attributes:
        train_text: the training characters as token ids (int64).
        train_order: start offsets of training windows, in the fixed shuffled order.
        val_x: validation contexts, shape (VAL_SIZE, CONTEXT).
        val_y: validation next characters, shape (VAL_SIZE,).
        files: how many source files were read.
    """

    train_text: torch.Tensor
    train_order: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    files: int

    @property
    def max_dataset_size(self) -> int:
        """The largest ``dataset_size`` this corpus can serve."""
        return int(self.train_order.numel())

    def windows(self, dataset_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``dataset_size`` training windows: contexts (N, CONTEXT) and targets (N,)."""
        if not 1 <= dataset_size <= self.max_dataset_size:
            raise TransferSearchError(
                f"`dataset_size` must lie in [1, {self.max_dataset_size}] for the demo corpus, but "
                f"got dataset_size={dataset_size}. Use a smaller ladder."
            )
        starts = self.train_order[:dataset_size]
        offsets = torch.arange(CONTEXT + 1)
        idx = starts[:, None] + offsets[None, :]
        chunk = self.train_text[idx]
        return chunk[:, :CONTEXT].contiguous(), chunk[:, CONTEXT].contiguous()


def _encode(text: str) -> np.ndarray:
    table = np.full(256, len(ALPHABET), dtype=np.int64)
    for i, ch in enumerate(ALPHABET):
        table[ord(ch)] = i
    raw = np.frombuffer(text.encode("latin-1", errors="replace"), dtype=np.uint8)
    return table[raw]


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py"))
    if len(files) < 20:
        raise TransferSearchError(
            f"the demo reads Python's standard library, but {root} holds only {len(files)} .py "
            "files. Run the demo with a full CPython installation."
        )
    return files


@lru_cache(maxsize=2)
def load_corpus(max_chars: int = MAX_CHARS, seed: int = 0) -> Corpus:
    """Read and encode the stdlib source (cached per process).

    Every tenth file in sorted order goes to validation; the rest is training text, read until
    ``max_chars`` characters. Training windows are shuffled once with ``seed``.
    """
    train_parts: list[str] = []
    val_parts: list[str] = []
    train_chars = 0
    files = 0
    for index, path in enumerate(_stdlib_files()):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        files += 1
        if index % 10 == 9:
            val_parts.append(text)
        elif train_chars < max_chars:
            train_parts.append(text)
            train_chars += len(text)
    train = _encode("\n".join(train_parts)[:max_chars])
    val = _encode("\n".join(val_parts))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train) - CONTEXT)
    val_starts = rng.choice(len(val) - CONTEXT, size=VAL_SIZE, replace=False)
    val_idx = val_starts[:, None] + np.arange(CONTEXT + 1)[None, :]
    val_chunk = torch.from_numpy(val[val_idx])
    return Corpus(
        train_text=torch.from_numpy(train),
        train_order=torch.from_numpy(order),
        val_x=val_chunk[:, :CONTEXT].contiguous(),
        val_y=val_chunk[:, CONTEXT].contiguous(),
        files=files,
    )


class CharMLP(nn.Module):
    """Next-character model: embed ``CONTEXT`` characters, mix them, one residual MLP, read out.

    ``width`` is the fan-in of the hidden matrices' second dimension (d in the papers); the mixer's
    fan-in is ``CONTEXT × width``, which grows with width too, so it is a hidden matrix.
    """

    def __init__(self, width: int, vocab: int = VOCAB_SIZE, context: int = CONTEXT) -> None:
        super().__init__()
        self.width = width
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(context * width, width)
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Linear(width, width)
        self.out_norm = nn.LayerNorm(width)
        self.readout = nn.Linear(width, vocab)
        nn.init.zeros_(self.readout.weight)

    def forward(self, contexts: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.mix(self.embed(contexts).flatten(1)))
        h = h + nn.functional.gelu(self.mlp(self.norm(h)))
        logits: torch.Tensor = self.readout(self.out_norm(h))
        return logits


def make_model(width: int) -> CharMLP:
    """The demo model at ``width``."""
    return CharMLP(int(width))


def resolve_device(device: str) -> torch.device:
    """``"auto"`` picks CUDA when available, else CPU; ``"cuda"`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise TransferSearchError(
            "device='cuda' was asked for but torch sees no CUDA GPU. Use --device cpu or auto."
        )
    if device not in ("cpu", "cuda"):
        raise TransferSearchError(f"`device` must be 'cpu', 'cuda' or 'auto', but got {device!r}.")
    return torch.device(device)


def demo_param_groups(model: CharMLP, hp: Hyperparameters) -> list[dict[str, Any]]:
    """Per-group AdamW settings from :func:`transfersearch.integrations.torch.param_groups`.

    Parameters are classified by comparing shapes with the same model at half the width (a shape
    reference only: ``hp`` already carries the width scaling).
    """
    reference = make_model(max(1, model.width // 2) if model.width > 1 else 2)
    return list(param_groups(model, hp, base_model=reference))


#: Widths below this always train on one CPU thread: their matrices are too small for a second
#: thread to pay for its synchronisation.
MULTI_THREAD_MIN_WIDTH = 256


def cpu_threads(width: int) -> int:
    """CPU threads for a run at ``width``: 2 only for wide models on an otherwise idle machine.

    Measured on the 2-core development machine: at width 256, 128 steps took 11.6 s on one thread
    and 145 s on two while other processes kept the load average near 10 (OpenMP threads wait on
    each other when a core is taken away); at width 64, 256 steps took 0.65 s on one thread and
    3.8 s on two. Two threads gain about 1.3x only when both cores are free.
    """
    cores = os.cpu_count() or 1
    if width < MULTI_THREAD_MIN_WIDTH or cores < 2:
        return 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        return 1
    return 2 if busy < cores - 1 else 1


@dataclass(frozen=True)
class TrainResult:
    """One finished training run: final validation loss (nats/char; NaN if it diverged)."""

    val_loss: float
    train_loss: float
    steps: int
    seconds: float


#: The learning rate decays (cosine) to this fraction of its peak by the last step.
FINAL_LR_FRACTION = 0.1
#: Linear warmup over this fraction of the steps (at least one step).
WARMUP_FRACTION = 0.05


def lr_schedule(hp: Hyperparameters, total_steps: int) -> Any:
    """Linear warmup over the first 5% of steps, then cosine decay to 10% of the peak, from
    :func:`transfersearch.integrations.torch.schedule` (τ is computed from the peak lr)."""
    warmup_steps = max(1, int(total_steps * WARMUP_FRACTION))
    if warmup_steps >= total_steps:  # too short a run to warm up: (t + 1)/T_w is 1 at once
        return schedule(hp, total_steps, "cosine", final_fraction=FINAL_LR_FRACTION)
    return schedule(
        hp,
        total_steps,
        "cosine",
        warmup="linear",
        warmup_steps=warmup_steps,
        final_fraction=FINAL_LR_FRACTION,
    )


def train(
    scale: Scale,
    hp: Hyperparameters,
    *,
    epochs: float,
    device: str | torch.device = "cpu",
    seed: int = 0,
    corpus: Corpus | None = None,
    progress: Iterable[Any] | None = None,
) -> TrainResult:
    """Train the demo model at ``scale`` with ``hp`` and return its final validation loss.

    Args:
        scale: needs ``width``, ``dataset_size`` and ``batch_size`` (samples).
        hp: concrete hyperparameters (per-group lr and coupled weight decay, betas, eps).
        epochs: passes over the training windows; steps = epochs × N / B.
        device: torch device.
        seed: initialisation and data-order seed (the same seed gives common random numbers
            across hyperparameters, which sharpens comparisons at one scale).
        corpus: the encoded data (default: :func:`load_corpus`).

    Returns:
        The final validation loss; NaN when training diverged (a diverged run is information).
    """
    scale.require("width", "dataset_size", "batch_size", purpose="train the demo model")
    started = time.perf_counter()
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    if dev.type == "cpu":
        torch.set_num_threads(cpu_threads(int(scale["width"])))
    data = load_corpus() if corpus is None else corpus
    xs, ys = data.windows(int(scale["dataset_size"]))
    xs, ys = xs.to(dev), ys.to(dev)
    val_x, val_y = data.val_x.to(dev), data.val_y.to(dev)
    n, batch = xs.shape[0], int(scale["batch_size"])
    steps_per_epoch = max(1, n // batch)
    total_steps = max(1, round(epochs * steps_per_epoch))
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = make_model(int(scale["width"])).to(dev)
    groups = demo_param_groups(model, hp)
    optimizer = torch.optim.AdamW(
        groups, betas=hp.betas, eps=hp.eps, foreach=dev.type == "cuda" or None
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(hp, total_steps))
    loss_fn = nn.functional.cross_entropy
    step = 0
    train_loss = math.nan
    model.train()
    while step < total_steps:
        perm = torch.randperm(n, generator=generator).to(dev)
        for i in range(steps_per_epoch):
            if step >= total_steps:
                break
            idx = perm[i * batch : (i + 1) * batch]
            loss = loss_fn(model(xs[idx]), ys[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            scheduler.step()
            step += 1
            if step % 50 == 0 or step == total_steps:
                train_loss = float(loss.detach())
                if not math.isfinite(train_loss):
                    return TrainResult(math.nan, train_loss, step, time.perf_counter() - started)
    model.eval()
    with torch.no_grad():
        val_loss = float(loss_fn(model(val_x), val_y))
    return TrainResult(
        val_loss if math.isfinite(val_loss) else math.nan,
        train_loss,
        total_steps,
        time.perf_counter() - started,
    )

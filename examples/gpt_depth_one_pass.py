"""A GPT trained one pass, its depth growing: sweep shallow proxies, carry the optimum to a deeper run.

The common case for a language model: every run sees each token once (one pass, no epochs), and
the big run is deeper than the proxies. The pieces, all public API:

- ``ts.rules.MuP(depth="completep", dataset="power_lines")``: CompleteP carries the learning
  rates, ε and the residual multiplier across depth (Dey et al. 2025); the Power Lines prior
  carries weight decay across tokens per parameter in one pass (Bergsma et al. 2025).
- Every scale, rung and target alike, gives ``params`` (the model's parameter count), since Power
  Lines reads tokens per parameter, and ``tokens``.
- The model multiplies every residual branch by ``hp.residual_multiplier`` (1 on the base depth,
  base depth / depth above it): the library cannot do that for you.
- ``param_groups`` puts the blocks' norm gains in their own group (``block_vector``).

Units: ``batch_size``, ``dataset_size`` and ``tokens`` are all counted in **tokens** here
(``batch_size`` = sequences per step × context length; one pass, so ``dataset_size`` = ``tokens``).

The data are the bytes of Python's own standard library (no download); the proxies are tiny, so
the whole run takes a few minutes on two CPU cores (``--quick``: under a minute, a smoke test).

Usage::

    python examples/gpt_depth_one_pass.py [--quick] [--trials-per-rung 8]
"""

from __future__ import annotations

import argparse
import math
import sysconfig
import time
import warnings
from pathlib import Path

import optuna
import torch
import torch.nn.functional as F
from torch import nn

import transfersearch as ts
from transfersearch.integrations.optuna import TransferSampler
from transfersearch.integrations.torch import param_groups, schedule

WIDTH = 64
HEADS = 4
CONTEXT = 32
VOCAB = 256  # bytes
BASE_DEPTH = 2


# ------------------------------------------------------------------------------------------------
# The model: a pre-LN GPT with CompleteP's residual multiplier and µP's readout and attention.
# ------------------------------------------------------------------------------------------------


class Block(nn.Module):
    """Pre-LN transformer block; each residual branch is multiplied by ``residual``."""

    def __init__(self, width: int, residual: float) -> None:
        super().__init__()
        self.residual, self.d_head = residual, width // HEADS
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.fc = nn.Linear(width, 4 * width, bias=False)
        self.fc_out = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, ctx, width = x.shape
        q, k, v = (
            t.view(batch, ctx, HEADS, self.d_head).transpose(1, 2)
            for t in self.qkv(self.ln_1(x)).chunk(3, dim=-1)
        )
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / self.d_head)
        x = x + self.residual * self.proj(att.transpose(1, 2).reshape(batch, ctx, width))
        return x + self.residual * self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    """Byte-level GPT without positional embeddings (causal attention tells positions apart)."""

    def __init__(self, depth: int, residual: float = 1.0, width: int = WIDTH) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)  # "input"
        self.blocks = nn.ModuleList(Block(width, residual) for _ in range(depth))  # "hidden"
        self.ln_f = nn.LayerNorm(width)  # "vector" (the blocks' norms: "block_vector")
        self.readout = nn.Linear(width, VOCAB, bias=False)  # "output"
        nn.init.zeros_(self.readout.weight)  # µP: zero readout

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.readout(self.ln_f(x))


def n_params(depth: int) -> int:
    """The model's parameter count at ``depth`` (what the Power Lines prior divides tokens by)."""
    return sum(p.numel() for p in GPT(depth).parameters())


# ------------------------------------------------------------------------------------------------
# Data and one training run.
# ------------------------------------------------------------------------------------------------


def load_bytes(limit: int = 3_000_000) -> tuple[torch.Tensor, torch.Tensor]:
    """The standard library's ``.py`` sources as bytes: 90 % to train on, the rest held out."""
    data = bytearray()
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        data += path.read_bytes()
        if len(data) >= limit:
            break
    tokens = torch.tensor(list(data[:limit]), dtype=torch.long)
    split = int(0.9 * len(tokens))
    return tokens[:split], tokens[split:]


def train(
    scale: ts.Scale, hp: ts.Hyperparameters, data: tuple[torch.Tensor, torch.Tensor]
) -> float:
    """Train one pass over ``scale["tokens"]`` tokens with ``hp``; the held-out loss (nats/byte).

    Returns NaN when the run diverges (what tells the fit where the stable region ends).
    """
    train_tokens, held_out = data
    depth, sequences = int(scale["depth"]), int(scale["batch_size"]) // CONTEXT
    steps = int(scale["tokens"]) // int(scale["batch_size"])
    torch.manual_seed(0)  # the same initialisation and batches for every trial of a rung
    model = GPT(depth, residual=hp.residual_multiplier)
    groups = param_groups(model, hp, base_model=GPT(depth))  # base width = width: the base rung
    opt = torch.optim.AdamW(groups, betas=hp.betas, eps=hp.eps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, schedule(hp, steps, "cosine", warmup="linear", warmup_steps=steps // 10)
    )
    windows = train_tokens[: steps * sequences * (CONTEXT + 1)].view(steps, sequences, CONTEXT + 1)
    for batch in windows:  # one pass: each token is seen once
        loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
        if not math.isfinite(loss.item()):
            return math.nan
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        held = held_out[: 64 * (CONTEXT + 1)].view(64, CONTEXT + 1)
        value = F.cross_entropy(model(held[:, :-1]).flatten(0, 1), held[:, 1:].flatten()).item()
    return value if math.isfinite(value) else math.nan


# ------------------------------------------------------------------------------------------------
# The sweep, the decision, and the deep run.
# ------------------------------------------------------------------------------------------------


def scale_at(depth: int, tokens: int, batch_size: int) -> ts.Scale:
    """A run's scale, in tokens throughout; ``params`` on every scale (Power Lines needs it)."""
    return ts.Scale(
        depth=depth,
        tokens=tokens,
        dataset_size=tokens,  # one pass: the data seen is the dataset
        batch_size=batch_size,
        params=n_params(depth),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: under a minute")
    parser.add_argument("--trials-per-rung", type=int, default=None, help="default 8 (quick: 6)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.perf_counter()

    batch_size = CONTEXT * (4 if args.quick else 8)  # tokens per step
    steps = 20 if args.quick else 100  # the base's steps; the ladder doubles the tokens
    trials = args.trials_per_rung or (6 if args.quick else 8)
    base_tokens = steps * batch_size
    base = scale_at(BASE_DEPTH, base_tokens, batch_size)
    space = ts.TransferSpace(
        base=base,
        coords={
            "base_lr": ts.Float(2e-3, 6e-2, log=True),  # the blocks' AdamW lr at the base
            "tau_epoch": ts.Float(0.1, 5.0, log=True),  # AdamW's EMA timescale, in epochs
        },
        rule=ts.rules.MuP(depth="completep", dataset="power_lines"),
    )
    # The ladder: rungs (proxy scales) of depth 2 and 4, each at 1x and 2x the base tokens.
    ladder = [scale_at(d, t * base_tokens, batch_size) for d in (2, 4) for t in (1, 2)]
    # The deep run: 4x (quick: 2x) the deepest proxy, 4x the base tokens.
    target = scale_at(8 if args.quick else 16, 4 * base_tokens, batch_size)
    data = load_bytes()

    sampler = TransferSampler(
        space,
        ladder,
        base_sampler=optuna.samplers.TPESampler(seed=0),
        trials_per_rung=trials,
        seed=0,
    )
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda trial: train(*sampler.suggest(trial), data), n_trials=trials * 4)
    print(f"{len(study.trials)} proxy trials on {len(ladder)} rungs (depth 2 and 4, one pass)")

    # The law over depth and tokens (params moves with depth: leave it to the Power Lines rule).
    res = ts.extrapolate(study, target=target, scale_variables=["depth", "tokens"])
    print(res.summary())
    low, high = res.interval(0.9)["base_lr"]
    print(
        f"\nbase_lr {res.params['base_lr']:.3g}: the law puts the deep run's best base_lr between "
        f"{low:.3g} and {high:.3g} with 90% probability."
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ts.TransferSearchWarning)
        hp = res.hyperparameters()  # the space the sampler stored on the study
    for warning in caught:  # a coordinate past the swept range: valid, but say so
        print(f"note: {warning.message}")

    print(f"\nthe deep run: {target!r}")
    print(f"residual_multiplier={hp.residual_multiplier:g} (multiply every residual branch by it)")
    for group, values in hp.groups.items():
        print(f"{group:13} lr={values['lr']:.3g} weight_decay={values['weight_decay']:.3g}")
    loss = train(target, hp, data)
    print(f"target loss={loss:.4f} nats/byte (uniform over bytes: {math.log(VOCAB):.4f})")
    print(f"took {time.perf_counter() - started:.0f} s")
    print(
        "Next: swap GPT for your model (keep hp.residual_multiplier on every residual branch), "
        "train for your scale, and see docs/getting-started.md."
    )


if __name__ == "__main__":
    main()

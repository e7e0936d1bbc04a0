"""Depth transfer on real training: a pre-LN transformer LM on Python's own source, depths 2 → 8.

Width fixed; at each depth, a learning-rate sweep under three parametrisations, each through the
documented path (``TransferSpace.concretize`` → ``param_groups`` → ``torch.optim.AdamW``):

- ``standard``: residual branches × 1, every lr the base lr at every depth (no depth rule);
- ``depth_mup``: ``rules.MuP(depth="depth_mup")``, α = ½: residual × m_L^−½, block lrs × m_L^−½,
  block ε × m_L^−½ (Yang et al., Tensor Programs VI; Dey et al. 2025, Table 1);
- ``completep``: ``rules.MuP(depth="completep")``, α = 1: residual × 1/m_L, lrs depth-free,
  block ε ÷ m_L (Dey et al. 2025, Table 1; Mlodozeniec et al. 2025 for ε).

m_L = depth / base depth (2). The swept value is the base lr (the hidden group's lr at the base
depth); the rule carries it to each depth. Reported per parametrisation: the optimum base lr per
depth (the grid argmin, refined by a parabola through its neighbours in log lr), its drift
d log lr* / d log depth, and the loss at the deepest depth of the base depth's optimum carried by
the rule, minus that depth's best loss on the grid ("carry regret"). One seed, common random
numbers (the same initialisation seed and batch order for every lr).

Data: the ``.py`` files of the running Python's standard library, byte-level, first 90 % of the
characters for training and the rest held out. Everything runs on CPU (one thread per process).

Writes ``benchmarks/results/depth_transfer.md``, ``.json`` and ``.png`` (or under ``--out``).
``--depth-check`` instead runs ``depth_check`` (activations and updates per depth after 3 steps) on
the same model and data: ``depth_transfer.depth_check.md`` and a ``.png`` per parametrisation.

Usage::

    python benchmarks/depth_transfer.py [--depths 2,4,8] [--lrs 0.002,...,0.032] [--steps 300]
        [--width 64] [--workers 2]
    python benchmarks/depth_transfer.py --depth-check --depths 2,4,8,16
"""

from __future__ import annotations

import argparse
import json
import math
import sysconfig
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch import nn

import transfersearch as ts
from transfersearch import rules
from transfersearch.integrations.torch import param_groups, schedule

RESULTS = Path(__file__).resolve().parent / "results"
BASE_DEPTH = 2
HEADS = 4
SEQ = 32
BATCH = 32
EVAL_BATCHES = 8
WEIGHT_DECAY = 0.1
#: Adam's betas: β₂ = 0.95, the usual choice for short transformer-LM runs. (Pilots: with 0.999,
#: batch 16 and 120 steps, several runs stayed on the unigram plateau, loss ≈ 3.2, at random lrs;
#: with 0.95, batch 16 and 200 steps the loss still jumped ±0.15 between neighbouring lrs; batch 32
#: and 300-400 steps give one valley per depth.)
BETAS = (0.9, 0.95)
#: Characters of stdlib source read (enough for the few hundred steps here, without epochs).
CHARS = 3_000_000
PARAMETRISATIONS: dict[str, rules.Rule | None] = {
    "standard": None,
    "depth_mup": rules.MuP(dataset=None, batch=None, depth="depth_mup"),
    "completep": rules.MuP(dataset=None, batch=None, depth="completep"),
}


# ----------------------------------------------------------------------------------------------
# Data and model
# ----------------------------------------------------------------------------------------------
def stdlib_text(chars: int = CHARS) -> bytes:
    """The standard library's ``.py`` sources, sorted by path, concatenated up to ``chars``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = bytearray()
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        out += path.read_bytes()
        if len(out) >= chars:
            break
    return bytes(out[:chars])


def tokens(text: bytes) -> tuple[torch.Tensor, int]:
    """Byte-level tokens remapped onto the bytes that occur, and the vocabulary size."""
    used = sorted(set(text))
    index = torch.full((256,), -1, dtype=torch.long)
    index[torch.tensor(used)] = torch.arange(len(used))
    ids: torch.Tensor = index[torch.frombuffer(bytearray(text), dtype=torch.uint8).long()]
    return ids, len(used)


class Block(nn.Module):
    """Pre-LN block: x + r·attn(LN(x)), then x + r·MLP(LN(x)), r the residual multiplier."""

    def __init__(self, width: int, residual: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, HEADS, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )
        self.residual = residual

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.residual * self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        out: torch.Tensor = x + self.residual * self.mlp(self.ln_2(x))
        return out


class TinyLM(nn.Module):
    """Token and position embeddings, ``depth`` pre-LN blocks in ``h``, final LN, readout."""

    def __init__(self, vocab: int, width: int, depth: int, residual: float = 1.0) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(SEQ, width)
        self.h = nn.ModuleList(Block(width, residual) for _ in range(depth))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        for module in self.modules():  # one init for every depth (neither paper scales it)
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
        nn.init.zeros_(self.head.weight)
        mask = torch.triu(torch.full((SEQ, SEQ), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x, self.mask)
        logits: torch.Tensor = self.head(self.ln_f(x))
        return logits


# ----------------------------------------------------------------------------------------------
# One run
# ----------------------------------------------------------------------------------------------
def hyperparameters(name: str, width: int, depth: int, lr: float) -> ts.Hyperparameters:
    """The concrete hyperparameters of parametrisation ``name`` at ``depth`` for base lr ``lr``."""
    rule = PARAMETRISATIONS[name] or rules.MuP(dataset=None, batch=None)
    space = ts.TransferSpace(
        ts.Scale(width=width, depth=BASE_DEPTH),
        {"lr": ts.Float(1e-5, 1.0, log=True), "weight_decay": WEIGHT_DECAY},
        rule=rule,
        betas=BETAS,
    )
    target = ts.Scale(width=width, depth=depth if PARAMETRISATIONS[name] else BASE_DEPTH)
    return space.concretize({"lr": lr}, target)


def run(job: tuple[str, int, float, int, int, int]) -> dict[str, Any]:
    """Train one (parametrisation, depth, base lr) for ``steps``; the held-out loss."""
    name, depth, lr, width, steps, seed = job
    torch.set_num_threads(1)
    data, vocab = DATA
    split = int(0.9 * len(data))
    train, held = data[:split], data[split:]
    hp = hyperparameters(name, width, depth, lr)
    torch.manual_seed(seed)
    model = TinyLM(vocab, width, depth, residual=hp.residual_multiplier)
    with torch.device("meta"):
        reference = TinyLM(vocab, width // 2, depth)
    groups = param_groups(model, hp, base_model=reference)
    optimizer = torch.optim.AdamW(groups, betas=hp.betas, eps=hp.eps)
    factor = schedule(hp, steps, "cosine", warmup="linear", warmup_steps=steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    order = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    loss = torch.tensor(math.nan)
    for _ in range(steps):
        at = torch.randint(0, len(train) - SEQ - 1, (BATCH,), generator=order)
        x = torch.stack([train[i : i + SEQ] for i in at])
        y = torch.stack([train[i + 1 : i + SEQ + 1] for i in at])
        loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        if not torch.isfinite(loss):
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        scheduler.step()
    held_loss = math.nan
    if torch.isfinite(loss):
        with torch.no_grad():
            starts = torch.arange(EVAL_BATCHES * BATCH) * (
                (len(held) - SEQ - 1) // (EVAL_BATCHES * BATCH)
            )
            x = torch.stack([held[i : i + SEQ] for i in starts])
            y = torch.stack([held[i + 1 : i + SEQ + 1] for i in starts])
            held_loss = float(
                nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            )
    return {
        "parametrisation": name,
        "depth": depth,
        "lr": lr,
        "loss": held_loss,
        "residual_multiplier": hp.residual_multiplier,
        "hidden_lr": hp.group("hidden")["lr"],
        "seconds": time.perf_counter() - start,
    }


DATA: tuple[torch.Tensor, int] = (torch.empty(0, dtype=torch.long), 0)


def _init_worker() -> None:
    global DATA
    DATA = tokens(stdlib_text())


# ----------------------------------------------------------------------------------------------
# Analysis
# ----------------------------------------------------------------------------------------------
def optimum(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(lr*, loss*) from (lr, loss) points: the argmin, refined by a parabola in log lr through it
    and its two neighbours when it is inside the grid (clamped to them)."""
    finite = sorted((lr, loss) for lr, loss in points if math.isfinite(loss))
    best = min(range(len(finite)), key=lambda i: finite[i][1])
    lr, loss = finite[best]
    if 0 < best < len(finite) - 1:
        (x0, y0), (x1, y1), (x2, y2) = (
            (math.log(finite[i][0]), finite[i][1]) for i in (best - 1, best, best + 1)
        )
        den = (x0 - x1) * (x0 - x2) * (x1 - x2)
        a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
        b = (x2**2 * (y0 - y1) + x1**2 * (y2 - y0) + x0**2 * (y1 - y2)) / den
        if a > 0:
            lr = math.exp(min(max(-b / (2 * a), x0), x2))
    return lr, loss


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def summarise(rows: list[dict[str, Any]], depths: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Per parametrisation: lr* and best loss per depth, the drift, and the carry regret."""
    out: dict[str, dict[str, Any]] = {}
    for name in PARAMETRISATIONS:
        mine = [r for r in rows if r["parametrisation"] == name]
        per_depth = {
            d: optimum([(r["lr"], r["loss"]) for r in mine if r["depth"] == d]) for d in depths
        }
        deepest = max(depths)
        base_lr = min(
            (r for r in mine if r["depth"] == min(depths) and math.isfinite(r["loss"])),
            key=lambda r: r["loss"],
        )["lr"]
        carried = next(r["loss"] for r in mine if r["depth"] == deepest and r["lr"] == base_lr)
        out[name] = {
            "lr_star": {d: per_depth[d][0] for d in depths},
            "best_loss": {d: per_depth[d][1] for d in depths},
            "drift": slope(depths, [per_depth[d][0] for d in depths]),
            "base_grid_lr": base_lr,
            "carried_loss": carried,
            "carry_regret": carried - per_depth[deepest][1],
        }
    return out


def table(summary: dict[str, dict[str, Any]], depths: Sequence[int]) -> str:
    head = "| parametrisation | " + " | ".join(f"lr* at {d}" for d in depths)
    head += " | drift d ln lr*/d ln L | best loss at " + str(max(depths))
    head += f" | loss of the depth-{min(depths)} optimum carried to {max(depths)} | carry regret |"
    lines = [head, "|" + "---|" * (len(depths) + 5)]
    for name, s in summary.items():
        cells = " | ".join(f"{s['lr_star'][d]:.3g}" for d in depths)
        lines.append(
            f"| {name} | {cells} | {s['drift']:+.2f} | {s['best_loss'][max(depths)]:.4f} | "
            f"{s['carried_loss']:.4f} (base lr {s['base_grid_lr']:.3g}) | {s['carry_regret']:+.4f} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], depths: Sequence[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PARAMETRISATIONS), figsize=(12, 3.8), sharey=True)
    for axis, name in zip(axes, PARAMETRISATIONS):
        for depth in depths:
            points = sorted(
                (r["lr"], r["loss"])
                for r in rows
                if r["parametrisation"] == name and r["depth"] == depth
            )
            axis.plot(
                [p[0] for p in points], [p[1] for p in points], marker="o", label=f"L={depth}"
            )
        axis.set_xscale("log")
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.set_xlabel("base lr (hidden group's lr at depth 2)")
        axis.set_title(name)
    axes[0].set_ylabel("held-out loss (nats/byte)")
    axes[0].legend(fontsize=8)
    figure.suptitle("Depth transfer: pre-LN transformer on the stdlib's .py sources")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def depth_check_report(depths: Sequence[int], width: int, lr: float, out: Path) -> None:
    """``depth_check`` on this model and data: 3 AdamW steps on one batch at base lr ``lr`` per
    parametrisation; writes ``depth_transfer.depth_check.md`` and ``.png``."""
    import warnings

    from transfersearch.experimental import ExperimentalWarning
    from transfersearch.integrations.torch import depth_check

    torch.set_num_threads(1)
    data, vocab = tokens(stdlib_text())
    generator = torch.Generator().manual_seed(0)
    at = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=generator)
    batch = (
        torch.stack([data[i : i + SEQ] for i in at]),
        torch.stack([data[i + 1 : i + SEQ + 1] for i in at]),
    )
    text = [
        "# Depth check on the depth-transfer benchmark's model",
        "",
        f"Command: `python benchmarks/depth_transfer.py --depth-check --depths "
        f"{','.join(map(str, depths))} --width {width}` (base lr {lr:g}, 3 AdamW steps on one "
        f"batch of {BATCH}×{SEQ} bytes, seed 0; `transfersearch.integrations.torch.depth_check`).",
        "",
    ]
    for name in PARAMETRISATIONS:

        def make_model(depth: int, name: str = name) -> nn.Module:
            hp = hyperparameters(name, width, depth, lr)
            return TinyLM(vocab, width, depth, residual=hp.residual_multiplier)

        def make_optimizer(model: nn.Module, depth: int, name: str = name) -> torch.optim.Optimizer:
            hp = hyperparameters(name, width, depth, lr)
            with torch.device("meta"):
                reference = TinyLM(vocab, width // 2, depth)
            groups = param_groups(model, hp, base_model=reference)
            return torch.optim.AdamW(groups, betas=hp.betas, eps=hp.eps)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            check = depth_check(
                make_model, depths, batch, steps=3, make_optimizer=make_optimizer, plot=True
            )
        check.figure.suptitle(f"{name}: scales per depth after 3 steps (slope 0 = Θ(1))")
        check.figure.savefig(out / f"depth_transfer.depth_check.{name}.png", dpi=90)
        text += [f"## {name}", "", "```", str(check), "```", ""]
        text.append(f"![{name}](depth_transfer.depth_check.{name}.png)")
        text.append("")
    (out / "depth_transfer.depth_check.md").write_text("\n".join(text))
    print("\n".join(text))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="2,4,8")
    parser.add_argument("--lrs", default="0.002,0.004,0.008,0.016,0.032")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--replot", action="store_true", help="redraw the .png from the committed .json only"
    )
    parser.add_argument(
        "--depth-check",
        action="store_true",
        help="run depth_check (3 steps per depth and parametrisation) instead of the lr sweep",
    )
    args = parser.parse_args(argv)
    depths = [int(d) for d in args.depths.split(",")]
    if args.depth_check:
        depth_check_report(depths, args.width, 0.008, args.out)
        return
    if args.replot:
        rows = json.loads((args.out / "depth_transfer.json").read_text())["rows"]
        plot(rows, sorted({r["depth"] for r in rows}), args.out / "depth_transfer.png")
        return
    lrs = [float(v) for v in args.lrs.split(",")]
    # At the base depth every rule gives the same hyperparameters (tests/test_depth_rules.py), so
    # the base depth is trained once and shared.
    jobs = [
        (name, depth, lr, args.width, args.steps, args.seed)
        for depth in sorted(depths, reverse=True)
        for name in PARAMETRISATIONS
        for lr in lrs
        if depth != BASE_DEPTH or name == "standard"
    ]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers, initializer=_init_worker) as pool:
        rows = list(pool.map(run, jobs))
    rows += [
        {**row, "parametrisation": name}
        for row in rows
        if row["depth"] == BASE_DEPTH
        for name in PARAMETRISATIONS
        if name != "standard"
    ]
    elapsed = time.perf_counter() - start
    summary = summarise(rows, depths)
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, depths, args.out / "depth_transfer.png")
    (args.out / "depth_transfer.json").write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    command = (
        f"python benchmarks/depth_transfer.py --depths {args.depths} --lrs {args.lrs} "
        f"--width {args.width} --steps {args.steps} --seed {args.seed} --workers {args.workers}"
    )
    text = [
        "# Depth transfer on a pre-LN transformer LM (CPU)",
        "",
        f"Command: `{command}` ({elapsed / 60:.1f} min on {args.workers} CPU worker(s), "
        f"torch {torch.__version__}).",
        "",
        f"Width {args.width}, {HEADS} heads, sequence {SEQ}, batch {BATCH}, {args.steps} AdamW "
        f"steps (betas {BETAS}, linear warmup 10 %, cosine), weight decay {WEIGHT_DECAY} "
        "(coupled), base depth "
        f"{BASE_DEPTH}, one seed with common random numbers; held-out loss on the last 10 % of "
        "the standard library's .py sources (bytes). lr* is the optimum *base* lr per depth (grid "
        "argmin refined by a parabola in log lr); the rule then sets each group's lr at that depth. "
        f"At the base depth {BASE_DEPTH} the three parametrisations coincide and are trained once.",
        "",
        table(summary, depths),
        "",
        "Loss per (parametrisation, depth, base lr):",
        "",
        "| parametrisation | depth | " + " | ".join(f"{lr:g}" for lr in lrs) + " |",
        "|---|---|" + "---|" * len(lrs),
    ]
    for name in PARAMETRISATIONS:
        for depth in depths:
            cells = [
                next(
                    r["loss"]
                    for r in rows
                    if (r["parametrisation"], r["depth"], r["lr"]) == (name, depth, lr)
                )
                for lr in lrs
            ]
            text.append(f"| {name} | {depth} | " + " | ".join(f"{c:.4f}" for c in cells) + " |")
    text += ["", "![loss vs base lr per depth](depth_transfer.png)", ""]
    (args.out / "depth_transfer.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()

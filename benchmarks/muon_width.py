"""Muon for the hidden matrices, AdamW for the rest: does the Muon width rule transfer on real training?

A small pre-LN character transformer (Python's own stdlib source, no downloads) at widths 16 and
64 (s = 4), 1 block, head size 8. Muon (torch.optim.Muon, ``adjust_lr_fn="original"``) runs the
hidden matrices (attention qkv and projection, MLP up and down), AdamW the embedding, the readout
and the vectors. The sweep: Muon's base lr × τ_epoch (shared by both optimizers), 2 seeds, AdamW's
base lr fixed, under two arms at the wide width:

- ``rule``: transfersearch's Muon rule (docs/science.md §11): under "original" γ is width-free;
  γλ keeps the rule's τ.
- ``no-rule``: µP's AdamW rule put on Muon's lr (γ ÷ s, λ × s: what a Muon user gets who treats its
  lr as AdamW's hidden lr): the same τ, only γ differs.

At the base width the arms are the same runs. Then the whole path: a ``TransferSampler`` ladder
(widths 16 and 32) with Muon, ``extrapolate()`` to width 64, ``make_optimizer``, one target run.

Results are appended to ``--results`` (JSON lines) as they finish: a rerun skips what is done.
One thread (``torch.set_num_threads(1)``); the CPU time is summed and written with the table.

    python benchmarks/muon_width.py            # writes benchmarks/results/muon_width.{md,png,json}
"""

from __future__ import annotations

import argparse
import json
import math
import string
import sys
import sysconfig
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import transfersearch as ts
from transfersearch.integrations.torch import make_optimizer
from transfersearch.optimizers import Muon

RESULTS = Path(__file__).parent / "results"
ALPHABET = {c: i for i, c in enumerate(string.printable)}
VOCAB = len(string.printable) + 1
CONTEXT = 32
BATCH = 16
#: Training sequences: a small fixed set read for several epochs, so weight decay matters.
DATASET = 1000
STEPS = 150
HEAD = 8
DEPTH = 1
BASE_WIDTH, WIDE = 16, 64
ADAM_LR = 1e-2
MUON_LRS = tuple(0.00125 * 2**k for k in range(7))  # 0.00125 ... 0.08
#: One more lr for the no-rule arm, whose optimum sits s = 4 times higher in base-lr units.
NO_RULE_EXTRA = (0.16,)
TAUS = (1.0, 4.0)
SEEDS = (0, 1)
LADDER_WIDTHS = (16, 32)
TRIALS_PER_RUNG = 8


def load_text() -> tuple[torch.Tensor, torch.Tensor]:
    """Training and validation characters: stdlib ``.py`` files in sorted order, every tenth
    held out (as the demo's task does)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    train: list[str] = []
    val: list[str] = []
    for index, path in enumerate(sorted(root.glob("*.py"))):
        text = path.read_text(encoding="utf-8", errors="replace")
        (val if index % 10 == 9 else train).append(text)

    def encode(parts: list[str], limit: int) -> torch.Tensor:
        text = "\n".join(parts)[:limit]
        return torch.tensor([ALPHABET.get(c, VOCAB - 1) for c in text], dtype=torch.long)

    return encode(train, DATASET * CONTEXT + 1), encode(val, 200_000)


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)
        self.heads = width // HEAD

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        shape = (batch, length, self.heads, HEAD)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, length, width))
        out: torch.Tensor = x + self.down(F.gelu(self.up(self.norm2(x))))
        return out


class CharTransformer(nn.Module):
    """Embedding ("input"), blocks (hidden matrices: Muon; gains: "vector"), final norm, readout
    ("output", zero-initialised as µP's readout)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.pos = nn.Embedding(CONTEXT, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(DEPTH))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB, bias=False)
        nn.init.zeros_(self.head.weight)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.head(self.norm(x))
        return out


def make_model(width: int) -> CharTransformer:
    return CharTransformer(width)


def base_scale() -> ts.Scale:
    return ts.Scale(width=BASE_WIDTH, dataset_size=DATASET, batch_size=BATCH)


def space(no_rule: bool = False, swept: bool = False) -> ts.TransferSpace:
    """Muon on hidden, AdamW's base lr fixed, τ_epoch shared. ``no_rule``: µP's AdamW factors on
    Muon's lr are applied by hand in :func:`hyperparameters` (this space is the rule's)."""
    coords: dict[str, Any] = {"base_lr": ADAM_LR}
    if swept:
        coords["muon_base_lr"] = ts.Float(MUON_LRS[0], MUON_LRS[-1], log=True)
        coords["tau_epoch"] = ts.Float(0.25, 4.0, log=True)
    else:
        coords["muon_base_lr"] = ts.Float(1e-4, 10.0, log=True)
        coords["tau_epoch"] = ts.Float(0.01, 100.0, log=True)
    return ts.TransferSpace(base_scale(), coords, ts.rules.MuP(), optimizers={"hidden": Muon()})


def hyperparameters(width: int, muon_lr: float, tau: float, arm: str) -> ts.Hyperparameters:
    """The rule's hp at ``width``; ``no-rule`` moves the Muon group's (γ, λ) as µP's AdamW
    hidden group (γ ÷ s, λ × s), keeping γλ."""
    hp = space().concretize({"muon_base_lr": muon_lr, "tau_epoch": tau}, {"width": width})
    if arm == "rule" or width == BASE_WIDTH:
        return hp
    s = width / BASE_WIDTH
    groups = {g: dict(v) for g, v in hp.groups.items()}
    groups["hidden"]["lr"] = muon_lr / s
    groups["hidden"]["weight_decay"] = hp.groups["hidden"]["independent_wd"] * s / muon_lr
    data = hp.to_dict()
    data["groups"] = groups
    return ts.Hyperparameters.from_dict(data)


def train(
    width: int, hp: ts.Hyperparameters, seed: int, data: tuple[torch.Tensor, torch.Tensor]
) -> tuple[float, float]:
    """Final validation loss (NaN when diverged) and the CPU seconds it took."""
    start = time.process_time()
    train_text, val_text = data
    torch.manual_seed(seed)
    model = make_model(width)
    with torch.device("meta"):
        base = make_model(BASE_WIDTH if width != BASE_WIDTH else 2 * BASE_WIDTH)
    opt = make_optimizer(model, hp, base_model=base)
    gen = torch.Generator().manual_seed(seed)
    starts = torch.arange(DATASET) * CONTEXT
    loss_value = math.nan
    for _step in range(STEPS):
        pick = starts[torch.randint(DATASET, (BATCH,), generator=gen)]
        idx = pick[:, None] + torch.arange(CONTEXT + 1)[None, :]
        chunk = train_text[idx]
        logits = model(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), chunk[:, 1:].reshape(-1))
        if not torch.isfinite(loss):
            return math.nan, time.process_time() - start
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
    with torch.no_grad():
        n = (len(val_text) - 1) // CONTEXT
        val = val_text[: n * CONTEXT + 1]
        losses = []
        for i in range(0, min(n, 256), 64):
            idx = (torch.arange(i, min(i + 64, n)) * CONTEXT)[:, None] + torch.arange(CONTEXT + 1)
            chunk = val[idx]
            logits = model(chunk[:, :-1])
            losses.append(F.cross_entropy(logits.reshape(-1, VOCAB), chunk[:, 1:].reshape(-1)))
        loss_value = float(torch.stack(losses).mean())
    return (loss_value if math.isfinite(loss_value) else math.nan), time.process_time() - start


def load_done(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["key"]: row for row in rows}


def append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def sweep(path: Path, data: tuple[torch.Tensor, torch.Tensor]) -> None:
    done = load_done(path)
    jobs = [("rule", BASE_WIDTH)] + [(arm, WIDE) for arm in ("rule", "no-rule")]
    for arm, width in jobs:
        for seed in SEEDS:
            for tau in TAUS:
                for lr in MUON_LRS + (NO_RULE_EXTRA if arm == "no-rule" else ()):
                    key = f"sweep/{arm}/{width}/{lr:g}/{tau:g}/{seed}"
                    if key in done:
                        continue
                    hp = hyperparameters(width, lr, tau, arm)
                    loss, cpu = train(width, hp, seed, data)
                    row = {
                        "key": key,
                        "phase": "sweep",
                        "arm": arm,
                        "width": width,
                        "muon_base_lr": lr,
                        "tau_epoch": tau,
                        "seed": seed,
                        "loss": loss,
                        "muon_lr": hp.groups["hidden"]["lr"],
                        "cpu_s": cpu,
                    }
                    append(path, row)
                    print(json.dumps(row), flush=True)


def ladder(path: Path, data: tuple[torch.Tensor, torch.Tensor], storage: str) -> None:
    """The whole path: TransferSampler ladder → extrapolate → make_optimizer → one target run."""
    import optuna

    from transfersearch.integrations.optuna import TransferSampler

    done = load_done(path)
    if "path/target" in done:
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rungs = [ts.Scale(width=w, dataset_size=DATASET, batch_size=BATCH) for w in LADDER_WIDTHS]
    sampler = TransferSampler(
        space(swept=True),
        rungs,
        base_sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=4),
        trials_per_rung=TRIALS_PER_RUNG,
    )
    study = optuna.create_study(
        storage=storage, study_name="muon_width", sampler=sampler, load_if_exists=True
    )
    cpu_total = 0.0

    def objective(trial: optuna.Trial) -> float:
        nonlocal cpu_total
        scale, hp = sampler.suggest(trial)
        loss, cpu = train(int(scale["width"]), hp, 0, data)
        cpu_total += cpu
        trial.set_user_attr("cpu_s", cpu)
        return loss

    finished = [t for t in study.trials if t.state.is_finished()]
    remaining = TRIALS_PER_RUNG * len(rungs) - len(finished)
    if remaining > 0:
        study.optimize(objective, n_trials=remaining)
    cpu_ladder = sum(float(t.user_attrs.get("cpu_s", 0.0)) for t in study.trials)
    target = ts.Scale(width=WIDE, dataset_size=DATASET, batch_size=BATCH)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ts.extrapolate(study, target=target)
    hp = res.hyperparameters()
    loss, cpu = train(WIDE, hp, 0, data)
    row = {
        "key": "path/target",
        "phase": "path",
        "params": {k: float(v) for k, v in res.params.items()},
        "groups": {g: {k: float(x) for k, x in v.items()} for g, v in hp.groups.items()},
        "optimizers": {g: hp.optimizer(g) for g in hp.groups},
        "loss": loss,
        "cpu_s": cpu + cpu_ladder,
        "ladder_trials": len(study.trials),
    }
    append(path, row)
    print(json.dumps(row), flush=True)


def summarise(path: Path) -> dict[str, Any]:
    """Per arm and width: the seed-mean loss grid, its best (lr, τ), the drift of the optimum's
    Muon base lr from the base width, and the loss of the base width's optimum carried over."""
    rows = [r for r in load_done(path).values() if r["phase"] == "sweep"]
    grids: dict[tuple[str, int], dict[tuple[float, float], list[float]]] = {}
    for r in rows:
        grids.setdefault((r["arm"], r["width"]), {}).setdefault(
            (r["muon_base_lr"], r["tau_epoch"]), []
        ).append(r["loss"])
    means = {
        key: {point: float(np.mean(v)) for point, v in grid.items()} for key, grid in grids.items()
    }

    def best(grid: dict[tuple[float, float], float]) -> tuple[tuple[float, float], float]:
        finite = {p: v for p, v in grid.items() if math.isfinite(v)}
        point = min(finite, key=finite.__getitem__)
        return point, finite[point]

    base_point, base_loss = best(means[("rule", BASE_WIDTH)])
    arms: dict[str, dict[str, Any]] = {}
    for arm in ("rule", "no-rule"):
        if (arm, WIDE) not in means:
            continue
        grid = means[(arm, WIDE)]
        point, loss = best(grid)
        carried = grid.get(base_point, math.nan)
        arms[arm] = {
            "best_point": point,
            "best_loss": loss,
            "drift_decades": math.log10(point[0] / base_point[0]),
            "carried_loss": carried,
        }
    overall = min(float(a["best_loss"]) for a in arms.values()) if arms else math.nan
    for a in arms.values():
        a["carried_regret"] = a["carried_loss"] - overall
    cpu = sum(r["cpu_s"] for r in load_done(path).values())
    path_row = load_done(path).get("path/target")
    return {
        "base": {"best_point": base_point, "best_loss": base_loss},
        "arms": arms,
        "wide_best": overall,
        "means": {
            f"{a}/{w}": {f"{p[0]:g}/{p[1]:g}": v for p, v in g.items()}
            for (a, w), g in means.items()
        },
        "path": path_row,
        "cpu_minutes": cpu / 60.0,
    }


def write(summary: dict[str, Any], out: Path, command: str) -> None:
    (out.with_suffix(".json")).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    lines = [
        "# Muon for the hidden matrices, AdamW for the rest: the width rule on real training",
        "",
        f"Command: `{command}` (1 thread; total CPU time {summary['cpu_minutes']:.1f} min).",
        "",
        f"Character transformer on the stdlib source, {DEPTH} blocks, head size {HEAD}, context "
        f"{CONTEXT}, {DATASET} training sequences, batch {BATCH}, {STEPS} steps "
        f"({STEPS * BATCH / DATASET:.1f} epochs); Muon ('original') on the hidden matrices, AdamW "
        f"(base lr {ADAM_LR:g}, µP) on the rest; τ_epoch shared. Loss: validation cross-entropy "
        f"(nats/char), mean of {len(SEEDS)} seeds. Grid: Muon base lr {MUON_LRS[0]:g}–"
        f"{MUON_LRS[-1]:g} (×2; the no-rule arm also {NO_RULE_EXTRA}), τ_epoch {TAUS}.",
        "",
        f"Base width {BASE_WIDTH}: best Muon base lr {summary['base']['best_point'][0]:g}, "
        f"τ_epoch {summary['base']['best_point'][1]:g}, loss {summary['base']['best_loss']:.4f}.",
        "",
        f"| arm (width {WIDE}) | best Muon base lr | best τ_epoch | drift from width {BASE_WIDTH} "
        f"(decades) | best loss | loss of width {BASE_WIDTH}'s optimum carried | its regret vs "
        f"width {WIDE}'s best |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, a in summary["arms"].items():
        lines.append(
            f"| {arm} | {a['best_point'][0]:g} | {a['best_point'][1]:g} | "
            f"{a['drift_decades']:+.2f} | {a['best_loss']:.4f} | {a['carried_loss']:.4f} | "
            f"{a['carried_regret']:+.4f} |"
        )
    path_row = summary.get("path")
    if path_row:
        hidden = path_row["groups"]["hidden"]
        lines += [
            "",
            f"Whole path: TransferSampler ladder widths {LADDER_WIDTHS} × {TRIALS_PER_RUNG} "
            f"trials ({path_row['ladder_trials']} trials), extrapolate() to width {WIDE}: "
            + ", ".join(f"{k} {v:.4g}" for k, v in path_row["params"].items())
            + f"; hp: hidden ({path_row['optimizers']['hidden']}) lr {hidden['lr']:.4g}, "
            f"weight_decay {hidden['weight_decay']:.4g}; make_optimizer; one target run: loss "
            f"{path_row['loss']:.4f} (width {WIDE}'s best in the rule sweep "
            f"{summary['arms'].get('rule', {}).get('best_loss', math.nan):.4f}).",
        ]
    lines += [
        "",
        "`no-rule` puts µP's AdamW hidden factors on Muon's lr (γ ÷ s, λ × s, γλ kept), as a "
        "space without `optimizers=` would. The rule (docs/science.md §11) keeps γ width-free "
        "under 'original'. Plot: `muon_width.png`.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    plot(summary, out.with_suffix(".png"))


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TAUS), figsize=(5 * len(TAUS), 4), sharey=True)
    styles = {f"rule/{BASE_WIDTH}": ("k", "o", f"width {BASE_WIDTH}")}
    styles[f"rule/{WIDE}"] = ("C0", "s", f"width {WIDE}, rule")
    styles[f"no-rule/{WIDE}"] = ("C3", "^", f"width {WIDE}, no rule (µP's 1/s)")
    for ax, tau in zip(np.atleast_1d(axes), TAUS):
        for key, (color, marker, label) in styles.items():
            grid = summary["means"].get(key, {})
            pts = sorted(
                (float(p.split("/")[0]), v)
                for p, v in grid.items()
                if float(p.split("/")[1]) == tau
            )
            if pts:
                ax.plot(*zip(*pts), color=color, marker=marker, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("Muon base lr (at the base width)")
        ax.set_title(f"τ_epoch = {tau:g}")
    np.atleast_1d(axes)[0].set_ylabel("validation loss (nats/char)")
    np.atleast_1d(axes)[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS / "muon_width.jsonl")
    parser.add_argument("--out", type=Path, default=RESULTS / "muon_width.md")
    parser.add_argument("--storage", default="sqlite:///" + str(RESULTS / "muon_width.db"))
    parser.add_argument("--skip-path", action="store_true", help="only the lr × τ sweep")
    parser.add_argument(
        "--report-only", action="store_true", help="write the table from the results so far"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    data = load_text()
    if not args.report_only:
        sweep(args.results, data)
    if not args.skip_path and not args.report_only:
        ladder(args.results, data, args.storage)
    write(summarise(args.results), args.out, "python " + " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

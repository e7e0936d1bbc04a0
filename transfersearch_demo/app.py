"""``transfersearch demo``: a real proxy ladder transferred to a 4× wider target with 8× more data.

Sweeps ``base_lr`` and ``tau_epoch`` with Optuna and ``TransferSampler`` over a ladder of small
character-level models (:mod:`transfersearch_demo.task`), extrapolates the optimum to the target,
and measures there the regret of transfersearch, of copying the best proxy, and of µP with weight
decay held fixed. Why the target's width and data ratios differ, and what each method does:
``docs/design.md`` ("The demo"). Outputs in ``DIR``: ``study.db``, ``target_runs.json``,
``summary.json`` (strict JSON), ``report.png`` (the sweep and the laws) and ``target_runs.png``
(the target's runs); the numbers are measured, never edited.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import optuna
import torch
from tqdm.auto import tqdm

from transfersearch import Extrapolation, extrapolate
from transfersearch.errors import TransferSearchError, check_int
from transfersearch.observations import Observation
from transfersearch.readers import as_observations
from transfersearch.report import format_table, new_figure, plot_report
from transfersearch.rules import MuP, Standard
from transfersearch.scale import Scale
from transfersearch.space import Float, Hyperparameters, TransferSpace
from transfersearch_demo import task

__all__ = [
    "METHODS",
    "MODES",
    "PARAMS",
    "DemoConfig",
    "TargetRuns",
    "best_proxy",
    "build_space",
    "json_safe",
    "method_hyperparameters",
    "run",
    "sweep",
]

PARAMS = ("base_lr", "tau_epoch")
METHODS = ("transfersearch", "copy_best_proxy", "mup_fixed_wd")
#: What each method's row means, printed under the table (docs/demo.md's words, so that the
#: output reads without it).
METHOD_NOTES = {
    "transfersearch": "the hyperparameters extrapolate() predicts at the target",
    "copy_best_proxy": "the best proxy trial's lr and weight decay, used unchanged at the target",
    "mup_fixed_wd": "the best proxy's base_lr carried by µP's width rule, its weight decay held "
    "fixed",
}
#: A log parameter's 90% interval wider than this many decades gets a line saying what it means.
WIDE_INTERVAL_DECADES = 1.0


@dataclass(frozen=True)
class DemoConfig:
    """One demo size: the proxy ladder, the target, the budget and the target grid.

    Attributes:
        name: the mode ("quick", "default", "full"); also the Optuna study's name suffix.
        widths, dataset_sizes: the ladder is their product (every width at every size). The
            dataset sizes span at least 4×, so the dataset exponent of a law is identifiable.
        batch_size: samples per step (the same on every rung and at the target).
        epochs: passes over the data; several, so the run overfits and weight decay matters.
        target_width, target_dataset_size: the scale transferred to: at least 4× the largest
            proxy's width and dataset size, with *different* width and data ratios (see the module
            docstring: equal ratios make µP-with-fixed-decay coincide with constant τ_epoch).
        trials: proxy trials in total (split over the rungs by :func:`rung_budgets`).
        grid_lr, grid_tau: the target grid, in base_lr × tau_epoch.
        lr_range, tau_range: the swept ranges (log-uniform).
    """

    name: str
    widths: tuple[int, ...]
    dataset_sizes: tuple[int, ...]
    batch_size: int
    epochs: float
    target_width: int
    target_dataset_size: int
    trials: int
    grid_lr: tuple[float, ...]
    grid_tau: tuple[float, ...]
    lr_range: tuple[float, float] = (1e-3, 3e-1)
    tau_range: tuple[float, float] = (0.03, 10.0)

    @property
    def ladder(self) -> list[Scale]:
        """Every width at every dataset size."""
        return [
            Scale(width=w, dataset_size=n, batch_size=self.batch_size)
            for w in self.widths
            for n in self.dataset_sizes
        ]

    @property
    def target(self) -> Scale:
        """The scale the sweep is transferred to."""
        return Scale(
            width=self.target_width,
            dataset_size=self.target_dataset_size,
            batch_size=self.batch_size,
        )


MODES: dict[str, DemoConfig] = {
    "quick": DemoConfig(
        name="quick",
        widths=(8, 16),
        dataset_sizes=(256, 1024),
        batch_size=64,
        epochs=2,
        target_width=64,
        target_dataset_size=8192,
        trials=20,
        grid_lr=(0.01, 0.05),
        grid_tau=(0.3, 2.0),
    ),
    # Widths 32 and 64 only, 40 trials per rung on average: width 16's runs vary across training
    # seeds by as much as a factor-2 step in base_lr or tau_epoch changes them, or more (docs/demo.md,
    # "Why this ladder"; benchmarks/results/demo_ladder_noise.md). Three dataset sizes give walk-forward
    # three folds and the data drift a midpoint.
    "default": DemoConfig(
        name="default",
        widths=(32, 64),
        dataset_sizes=(1024, 2048, 4096),
        batch_size=64,
        epochs=4,
        target_width=256,
        target_dataset_size=32768,
        trials=240,
        grid_lr=(0.0025, 0.0075, 0.0225),
        grid_tau=(0.3, 1.0, 3.0),
    ),
    "full": DemoConfig(
        name="full",
        widths=(32, 64, 128),
        dataset_sizes=(2048, 4096, 8192),
        batch_size=64,
        epochs=4,
        target_width=512,
        target_dataset_size=65536,
        trials=270,
        grid_lr=(0.002, 0.005, 0.012, 0.03, 0.08),
        grid_tau=(0.3, 1.0, 3.0),
    ),
}


def build_space(config: DemoConfig) -> TransferSpace:
    """The swept space: base_lr and tau_epoch at the smallest rung, scaled by ``MuP()``."""
    base = min(config.ladder, key=lambda s: (s["width"], s["dataset_size"]))
    return TransferSpace(
        base,
        {
            "base_lr": Float(*config.lr_range, log=True),
            "tau_epoch": Float(*config.tau_range, log=True),
        },
        MuP(),
    )


def rung_budgets(rungs: int, trials: int) -> list[int]:
    """Trials per rung, cheapest first: the two cheapest rungs get twice the share of the others.

    The cheap rungs explore (no law exists yet); later rungs start from the law's prediction and
    need fewer trials. Every rung gets at least two; the budgets sum to ``max(trials, 2·rungs)``.
    """
    weights = [2.0 if i < 2 else 1.0 for i in range(rungs)]
    budgets = [max(2, int(trials * w / sum(weights))) for w in weights]
    i = 0
    while sum(budgets) < trials:
        budgets[i % rungs] += 1
        i += 1
    return budgets


# ----------------------------------------------------------------------------------------------
# Progress: a bar on a terminal, a few plain lines in a log
# ----------------------------------------------------------------------------------------------
#: Progress lines a sweep prints when its output is not a terminal (one per tenth of the trials):
#: a bar redrawn with carriage returns becomes hundreds of lines in a log file or a CI page.
LOG_LINES = 10

#: The next step, printed last: the common case this demo does not cover.
NEXT_STEP = (
    "next: a GPT trained one pass with its depth growing (CompleteP, Power Lines), the common "
    "case for a language model: python examples/gpt_depth_one_pass.py (a few minutes on CPU; "
    "docs/getting-started.md explains it)"
)


def interactive() -> bool:
    """Whether progress goes to a terminal (tqdm and Optuna's bar write to stderr)."""
    return sys.stderr.isatty()


class SweepLog:
    """An Optuna callback that prints a progress line every tenth of the sweep (and at its end),
    the log-friendly stand-in for Optuna's progress bar."""

    def __init__(self, total: int, already: int) -> None:
        self.total, self.already, self.seen = total, already, 0
        self.every = max(1, math.ceil(total / LOG_LINES))
        self.started = time.perf_counter()

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.seen += 1
        if self.seen % self.every and self.seen != self.total:
            return
        done = self.already + self.seen
        print(
            f"proxy sweep: {self.seen}/{self.total} trials ({done} in the study), "
            f"{time.perf_counter() - self.started:.0f} s",
            flush=True,
        )


# ----------------------------------------------------------------------------------------------
# The proxy sweep
# ----------------------------------------------------------------------------------------------
def sweep(
    config: DemoConfig,
    space: TransferSpace,
    storage: str,
    device: torch.device,
    trials: int,
    seed: int,
    *,
    study_name: str | None = None,
    progress: bool = True,
) -> optuna.Study:
    """Run (or resume) the proxy sweep until the study holds ``trials`` finished trials.

    The study uses :class:`~transfersearch.integrations.optuna.TransferSampler` over the config's
    ladder with per-rung budgets from :func:`rung_budgets` and a seeded TPE base sampler; each
    objective call trains the demo model at the trial's rung.
    """
    from transfersearch.integrations.optuna import TransferSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    budgets = rung_budgets(len(config.ladder), trials)
    sampler = TransferSampler(
        space,
        config.ladder,
        base_sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=4),
        trials_per_rung=budgets,
        min_trials=min(6, min(budgets)),
        focus=0.5,
        seed=seed,
    )
    study = optuna.create_study(
        storage=storage,
        study_name=study_name or f"demo-{config.name}",
        sampler=sampler,
        direction="minimize",
        load_if_exists=True,
    )
    corpus = task.load_corpus()

    def objective(trial: optuna.Trial) -> float:
        scale, hp = sampler.suggest(trial)
        result = task.train(scale, hp, epochs=config.epochs, device=device, corpus=corpus)
        trial.set_user_attr("seconds", result.seconds)
        return float(result.val_loss)

    done = sum(1 for t in study.trials if t.state.is_finished())
    remaining = max(0, trials - done)
    if remaining:
        print(
            f"proxy sweep: {remaining} trials over {len(config.ladder)} rungs "
            f"({done} already in {storage})"
        )
        bar = progress and interactive()
        study.optimize(
            objective,
            n_trials=remaining,
            show_progress_bar=bar,
            callbacks=[] if bar or not progress else [SweepLog(remaining, done)],
            catch=(RuntimeError,),
        )
    else:
        print(f"proxy sweep: {done} trials already in {storage}; resuming from them")
    return study


# ----------------------------------------------------------------------------------------------
# The three methods at the target
# ----------------------------------------------------------------------------------------------
def best_proxy(observations: list[Observation]) -> Observation:
    """The best trial at the largest (most expensive) rung."""
    usable = [o for o in observations if o.usable]
    if not usable:
        raise TransferSearchError("the proxy sweep finished no trial; nothing to transfer.")
    largest = max({o.scale for o in usable}, key=lambda s: s["width"] ** 2 * s["dataset_size"])
    return min((o for o in usable if o.scale == largest), key=lambda o: o.value)


def method_hyperparameters(
    config: DemoConfig,
    space: TransferSpace,
    predicted: Mapping[str, float],
    best: Observation,
) -> dict[str, Hyperparameters]:
    """The target hyperparameters of each method (see the module docstring).

    Args:
        config: the demo size (its ``target`` is where the hyperparameters are concretised).
        space: the swept space (:func:`build_space`).
        predicted: the extrapolated coordinates at the target (``Extrapolation.params``).
        best: the best trial of the largest proxy rung (:func:`best_proxy`).

    Returns:
        Concrete hyperparameters at the target, by method name (``METHODS``).
    """
    target = config.target
    proxy_hp = space.concretize(dict(best.params), best.scale)
    copy_space = TransferSpace(
        best.scale,
        {"lr": proxy_hp.lr, "weight_decay": proxy_hp.weight_decay},
        Standard(dataset=None, batch=None, vector_weight_decay=True),
    )
    fixed_space = TransferSpace(
        space.base,
        {"lr": best.params["base_lr"], "weight_decay": proxy_hp.weight_decay},
        MuP(wd_width_exponent=0.0, dataset=None, batch=None),
    )
    return {
        "transfersearch": space.concretize(dict(predicted), target),
        "copy_best_proxy": copy_space.concretize({}, target),
        "mup_fixed_wd": fixed_space.concretize({}, target),
    }


class TargetRuns:
    """Training runs at the target, cached in a JSON file so that a re-run reuses them.

    A run is keyed by the mode, the device and the concrete per-group (lr, weight_decay), so two
    methods that land on the same hyperparameters share one run.
    """

    def __init__(self, path: Path, config: DemoConfig, device: torch.device) -> None:
        self.path = path
        self.config = config
        self.device = device
        self.cache: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}

    def key(self, hp: Hyperparameters) -> str:
        groups = {
            g: (round(v["lr"], 12), round(v["weight_decay"], 12)) for g, v in hp.groups.items()
        }
        return json.dumps(
            [self.config.name, self.device.type, hp.scale.to_dict(), groups], sort_keys=True
        )

    def loss(self, label: str, hp: Hyperparameters) -> float:
        """The final validation loss at the target with ``hp`` (trained once, then cached)."""
        key = self.key(hp)
        if key not in self.cache:
            outcome = task.train(
                self.config.target, hp, epochs=self.config.epochs, device=self.device
            )
            self.cache[key] = {
                "label": label,
                "val_loss": outcome.val_loss,
                "seconds": outcome.seconds,
            }
            self.path.write_text(json.dumps(self.cache, indent=1))
        return float(self.cache[key]["val_loss"])

    @property
    def train_seconds(self) -> float:
        """Seconds spent training the cached runs."""
        return float(sum(entry["seconds"] for entry in self.cache.values()))


def _coords_at_target(space: TransferSpace, hp: Hyperparameters) -> dict[str, float]:
    """A method's hidden-group (lr, weight decay) expressed as base_lr and tau_epoch."""
    return {k: float(v) for k, v in space.coordinates(hp).items()}


# ----------------------------------------------------------------------------------------------
# The whole demo
# ----------------------------------------------------------------------------------------------
def run(
    out: Path | str = "transfersearch-demo",
    *,
    full: bool = False,
    quick: bool = False,
    device: str = "auto",
    trials: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the demo and return the summary written to ``out/summary.json``.

    Args:
        out: the output folder (created; re-running resumes the study and the target runs).
        full: the bigger ladder and target.
        quick: a tiny ladder for tests (seconds).
        device: "cpu", "cuda" or "auto".
        trials: proxy trials in total (default: the mode's).
        seed: seed of the sweep's samplers.

    Raises:
        TransferSearchError: conflicting modes, a bad trial count or an unusable device.
    """
    config = _config(full=full, quick=quick, trials=trials)
    started = time.perf_counter()
    dev = task.resolve_device(device)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    space = build_space(config)
    target = config.target
    print(
        f"transfersearch demo ({config.name}) on {dev.type}: ladder widths {config.widths} x "
        f"dataset sizes {config.dataset_sizes}, target {target!r}"
    )

    study = sweep(config, space, f"sqlite:///{folder / 'study.db'}", dev, config.trials, seed)
    sweep_seconds = time.perf_counter() - started
    observations = as_observations(study)
    result = extrapolate(observations, target=target, params=list(PARAMS), seed=seed)
    best = best_proxy(observations)
    hps = method_hyperparameters(config, space, result.params, best)
    target_runs = TargetRuns(folder / "target_runs.json", config, dev)
    losses = _target_losses(target_runs, config, space, hps)

    marks = {m: _coords_at_target(space, hps[m]) for m in METHODS[1:]}
    plot_report(
        observations,
        result,
        folder / "report.png",
        title=f"transfersearch demo ({config.name}, study {study.study_name!r}): char-MLP on "
        "the stdlib",
        marks=marks,
    )
    interval = result.interval(0.9)
    summary = _summary(config, dev, len(observations), result, interval, best, space, hps, losses)
    summary["seconds"] = {"sweep": sweep_seconds, "total": time.perf_counter() - started}
    (folder / "summary.json").write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False))
    plot_target_runs(summary, config, interval, folder / "target_runs.png")
    _print_summary(summary, result, interval)
    print(
        f"wrote {folder / 'summary.json'}, {folder / 'report.png'} (the sweep and the laws) and "
        f"{folder / 'target_runs.png'} (the target runs) in {summary['seconds']['total']:.0f} s"
    )
    print(NEXT_STEP)
    return summary


def plot_target_runs(
    summary: Mapping[str, Any],
    config: DemoConfig,
    interval: Mapping[str, tuple[float, float]],
    path: Path,
) -> Path:
    """The runs at the target in (base_lr, τ_epoch): the grid and the three methods, each with
    its loss, and the extrapolation's 90% interval as a box.

    Returns:
        ``path``, written.
    """
    figure = new_figure(figsize=(7.0, 5.6))
    draw_target_runs(figure.subplots(), summary, config, interval)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


#: Drawing order of the target-runs picture: the interval box, then the markers, then every loss
#: label on top, on a pale box, so that no marker (the method's star is the largest) hides a label.
MARKER_ZORDER, LABEL_ZORDER = 3, 4


def draw_target_runs(
    ax: Any,
    summary: Mapping[str, Any],
    config: DemoConfig,
    interval: Mapping[str, tuple[float, float]],
) -> Any:
    """Draw :func:`plot_target_runs`'s picture on the matplotlib axes ``ax`` and return it.

    Every run is labelled with its loss, beside its marker and above every marker; the best run's
    label is bold and says "best".
    """
    best = summary["best_at_target"]
    grid = [
        (f"grid base_lr={lr:g} tau_epoch={tau:g}", lr, tau) for lr in config.grid_lr
        for tau in config.grid_tau
    ]  # fmt: skip
    ax.scatter([g[1] for g in grid], [g[2] for g in grid], s=30, color="grey", label="grid run",
               zorder=MARKER_ZORDER)  # fmt: skip
    labelled = [(label, lr, tau, summary["target_grid"][label], "grey") for label, lr, tau in grid]
    for i, (method, marker) in enumerate(zip(METHODS, ("*", "s", "D"), strict=True)):
        values = summary["methods"][method]
        coords = values["coordinates"]
        colour = f"C{i}"
        ax.scatter(coords["base_lr"], coords["tau_epoch"], marker=marker, s=90, color=colour,
                   label=f"{method}: {_loss_text(values['val_loss'])}", zorder=MARKER_ZORDER,
                   alpha=0.85)  # fmt: skip
        labelled.append(
            (method, coords["base_lr"], coords["tau_epoch"], values["val_loss"], colour)
        )
    for label, lr, tau, loss, colour in labelled:
        is_best = label == best["label"]
        methods_label = label in METHODS
        ax.annotate(
            f"best {_loss_text(loss)}" if is_best else _loss_text(loss),
            (lr, tau),
            textcoords="offset points",
            # grid labels below right of their dot, methods' above right of their (larger) marker
            xytext=(8, 8) if methods_label else (8, -14),
            fontsize=8 if is_best else 7,
            fontweight="bold" if is_best else "normal",
            color="black" if is_best else colour,
            zorder=LABEL_ZORDER,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    (lr_low, lr_high), (tau_low, tau_high) = interval["base_lr"], interval["tau_epoch"]
    ax.add_patch(
        importlib.import_module("matplotlib.patches").Rectangle(
            (lr_low, tau_low), lr_high - lr_low, tau_high - tau_low, fill=False,
            ls="--", color="tab:blue", label="transfersearch's 90% interval", zorder=2,
        )
    )  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("base_lr (the ladder's coordinates)")
    ax.set_ylabel("tau_epoch")
    ax.set_title(
        f"the {len(grid) + len(METHODS)} target runs at {_scale_text(summary['target'])}\n"
        f"validation loss, nats/char (best {_loss_text(best['val_loss'])}: {best['label']})",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="best")
    return ax


def _loss_text(loss: float | None) -> str:
    """A target run's loss as the picture writes it (a diverged run: ``diverged``)."""
    return "diverged" if loss is None or not math.isfinite(loss) else f"{loss:.3f}"


def _scale_text(scale: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in scale.items())


def _config(*, full: bool, quick: bool, trials: int | None) -> DemoConfig:
    """The mode's config (``MODES``), with ``trials`` proxy trials when given.

    Raises:
        TransferSearchError: both modes, or fewer than two trials per rung.
    """
    if full and quick:
        raise TransferSearchError("--full and --quick exclude each other; pick one.")
    config = MODES["full" if full else "quick" if quick else "default"]
    if trials is None:
        return config
    rungs = len(config.ladder)
    check_int(
        "--trials", trials, minimum=2 * rungs, fix=f"Two per rung of the {rungs}-rung ladder."
    )
    return DemoConfig(**{**asdict(config), "trials": trials})


def _target_losses(
    target_runs: TargetRuns,
    config: DemoConfig,
    space: TransferSpace,
    hps: Mapping[str, Hyperparameters],
) -> dict[str, float]:
    """The validation loss at the target of each method, then of each point of the config's
    base_lr × tau_epoch grid (labelled ``grid base_lr=... tau_epoch=...``)."""
    runs: list[tuple[str, Hyperparameters]] = list(hps.items())
    for lr in config.grid_lr:
        for tau in config.grid_tau:
            runs.append(
                (
                    f"grid base_lr={lr:g} tau_epoch={tau:g}",
                    space.concretize({"base_lr": lr, "tau_epoch": tau}, config.target),
                )
            )
    losses: dict[str, float] = {}
    if interactive():
        bar = tqdm(runs, desc="target runs", unit="run")
        for label, hp in bar:
            bar.set_postfix_str(label)
            losses[label] = target_runs.loss(label, hp)
        bar.close()
        return losses
    for i, (label, hp) in enumerate(runs, start=1):  # a log: one line a run
        losses[label] = target_runs.loss(label, hp)
        print(f"target run {i}/{len(runs)}: {label}: {_loss_text(losses[label])}", flush=True)
    return losses


def _summary(
    config: DemoConfig,
    dev: torch.device,
    proxy_trials: int,
    result: Extrapolation,
    interval: Mapping[str, tuple[float, float]],
    best: Observation,
    space: TransferSpace,
    hps: Mapping[str, Hyperparameters],
    losses: Mapping[str, float],
) -> dict[str, Any]:
    """What ``summary.json`` holds but the timings: the run's setup, the extrapolation, the best
    proxy, each method's loss and regret (against the best finite loss found at the target)."""
    finite = [v for v in losses.values() if math.isfinite(v)]
    best_loss = min(finite) if finite else math.nan
    best_label = min(
        (k for k in losses if math.isfinite(losses[k])), key=losses.__getitem__, default="none"
    )
    regret = {m: losses[m] - best_loss if math.isfinite(losses[m]) else math.inf for m in METHODS}
    return {
        "mode": config.name,
        "device": dev.type,
        "target": config.target.to_dict(),
        "ladder": [s.to_dict() for s in config.ladder],
        "epochs": config.epochs,
        "proxy_trials": proxy_trials,
        "extrapolated": {
            **hps["transfersearch"].to_dict(),
            "predicted": dict(result.params),
            "interval_90": {k: list(v) for k, v in interval.items()},
            "exponents": {k: dict(law.exponents) for k, law in result.laws.items()},
            "model": result.model,
        },
        "best_proxy": {
            "scale": best.scale.to_dict(),
            "params": dict(best.params),
            "value": best.value,
        },
        "methods": {
            m: {
                "val_loss": losses[m],
                "regret": regret[m],
                "lr": hps[m].lr,
                "weight_decay": hps[m].weight_decay,
                "coordinates": _coords_at_target(space, hps[m]),
            }
            for m in METHODS
        },
        "target_grid": {k: v for k, v in losses.items() if k not in METHODS},
        "best_at_target": {"label": best_label, "val_loss": best_loss},
        "regret": regret,
    }


def json_safe(value: Any) -> Any:
    """Strict JSON: a diverged run's NaN or infinite loss/regret is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _print_summary(
    summary: Mapping[str, Any], result: Extrapolation, interval: Mapping[str, tuple[float, float]]
) -> None:
    """The demo's tables and verdict on stdout: the extrapolated laws, the three methods at the
    target, the best loss found there and which method came closest to it."""
    print()
    print(_law_table(result, interval))
    for line in _wide_interval_notes(result, interval):
        print(line)
    print()
    print(result.summary())
    print()
    print(_method_table(summary["methods"]))
    for method in METHODS:
        print(f"  {method}: {METHOD_NOTES[method]}")
    best = summary["best_at_target"]
    print(
        f"best loss at the target: {best['val_loss']:.4f} ({best['label']}); "
        f"{len(summary['target_grid'])} grid runs + 3 methods. regret = a method's validation "
        "loss minus that best loss (0: as good as the best run found; lower is better)"
    )
    regret = summary["regret"]
    winner = min(METHODS, key=lambda m: regret[m])
    if winner == "transfersearch":
        print("lowest regret of the three methods: transfersearch")
    else:
        print(
            f"lowest regret of the three methods: {winner} (transfersearch's regret "
            f"{regret['transfersearch']:.4g} vs {regret[winner]:.4g}); this run's numbers are "
            "reported as measured"
        )


def _wide_interval_notes(
    result: Extrapolation, interval: Mapping[str, tuple[float, float]]
) -> list[str]:
    """A line for each log parameter whose 90% interval spans more than
    :data:`WIDE_INTERVAL_DECADES`: how wide, and what it means for the decision."""
    notes = []
    for name, (low, high) in interval.items():
        if name not in result.log_params or not low > 0:
            continue
        decades = math.log10(high / low) if math.isfinite(high) else math.inf
        if decades > WIDE_INTERVAL_DECADES:
            notes.append(
                f"note: {name}'s 90% interval spans {decades:.1f} decades ({low:.3g} to "
                f"{high:.3g}): the ladder places the target's optimum loosely, and the decision "
                f"is the fit's best single guess inside it; the target runs below show what that "
                "costs here. More trials on the largest rungs, or a larger rung, narrow it."
            )
    return notes


def _law_table(result: Extrapolation, interval: Mapping[str, tuple[float, float]]) -> str:
    """Each parameter's prediction at the target, its 90% interval and its law's exponents (the
    path's slope at the rungs' centre: it may bend, docs/science.md §7.6)."""
    return format_table(
        ["param", "predicted at target", "90% low", "90% high", "law at the rungs' centre"],
        [
            [
                name,
                value,
                interval[name][0],
                interval[name][1],
                ", ".join(
                    f"{k}^{v:+.2f}" for k, v in sorted(result.varied_exponents(name).items())
                ),
            ]
            for name, value in result.params.items()
        ],
    )


def _method_table(methods: Mapping[str, Mapping[str, Any]]) -> str:
    """Each method's loss and regret at the target, its hidden group's (lr, weight decay) and
    those expressed as base_lr and tau_epoch."""
    return format_table(
        [
            "method",
            "val loss (nats/char)",
            "regret",
            "hidden lr",
            "hidden wd",
            "base_lr",
            "tau_epoch",
        ],
        [
            [
                m,
                methods[m]["val_loss"],
                methods[m]["regret"],
                methods[m]["lr"],
                methods[m]["weight_decay"],
                methods[m]["coordinates"]["base_lr"],
                methods[m]["coordinates"]["tau_epoch"],
            ]
            for m in METHODS
        ],
    )

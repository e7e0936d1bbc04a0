"""Marin Lion and Mars sweeps: fit the 1, 2, 4× Chinchilla tables of a model size, predict the 8× table.

Data: ``marin_{lion,mars}_sweeps.csv`` (Wen et al. 2025, "Fantastic
Pretraining Optimizers and Where to Find Them"): per optimizer, model size N (130M, 300M, 520M) and
data multiple (1, 2, 4, 8× Chinchilla, D = 20·N·multiple tokens) one table: a best row and rows that
each change one hyperparameter from it.

Protocol (the README's): for each optimizer and size, fit the 1, 2, 4× tables and predict the 8×
table's (lr, weight_decay, batch_size). Observations: scale {N, D}, params (lr, weight_decay,
batch_size), value the final loss; only the best row and the rows varying one of the three predicted
parameters go in (a row varying beta1 or warmup changes no predicted coordinate and would read as a
replicate; ``ours (every row)`` is given them, as a user passing the whole table would); a diverged row (loss NaN or > 6) goes in as value NaN. Score each parameter one at a time
on the 8× table: among the best row and the rows varying it, take the row whose value is nearest the
prediction (log distance for lr and batch_size, linear for weight_decay; a tie takes the worse row),
its loss minus the least finite loss among those rows; sum the three. A diverged nearest row is a
diverged pick, scored as the worst finite loss among those rows (minus the least).

Methods:

- ``ours``: ``transfersearch.extrapolate(observations, target={N, D of the 8× table},
  params=[lr, weight_decay, batch_size], log_params=["lr", "batch_size"], seed=0)`` — weight decay
  linear, because its grid holds 0; the default, without ``log_params``, is run too
  (``ours (defaults)``: a parameter with a value <= 0 goes on a linear axis there, said in a note,
  and any refusal is counted);
- ``ours (every row)``: ``ours`` given every row of the training tables, each trial recording all
  its hyperparameters (the fit reads the rows varying beta1, beta2, warmup or grad_clip as repeats
  of the best configuration and says so: the ``unfitted`` note);
- the baselines of ``benchmarks/baselines.py`` with the same log/linear choice: the null (copy the
  row labelled best of the largest training table, 4×; beside it ``copy_top_rung``, the least-loss
  kept row of that table, which can differ), per-table argmin + log-linear least squares,
  Step Law's band (every row within 0.25% of its table's best) + log-linear least squares.

Usage: ``python benchmarks/marin_sweeps.py --data-dir ../shared/data``; writes
``benchmarks/results/marin_sweeps.md``.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from baselines import NULL, baselines
from fit_call import accepted, dropped_note, readout
from provenance import header

import transfersearch as ts

RESULTS = Path(__file__).resolve().parent / "results" / "marin_sweeps.md"
OPTIMIZERS = ("lion", "mars")
PREDICTED = ("lr", "weight_decay", "batch_size")
#: Every hyperparameter the tables record (each non-best row changes one of them).
HYPERPARAMETERS = (*PREDICTED, "beta1", "beta2", "warmup", "grad_clip", "min_lr")
#: Scored by log distance to the grid; weight_decay (a grid with 0) by linear distance.
LOG_PARAMS = ("lr", "batch_size")
#: A final loss above this is a diverged run (the README: "losses above ~6 are diverged too"; the
#: converged runs end at 2.9-3.7 nats, the diverged ones at 7-10).
DIVERGED_LOSS = 6.0
TRAIN_MULTIPLES = (1, 2, 4)
TARGET_MULTIPLE = 8
OURS = "ours"
DEFAULTS = "ours (defaults)"
EVERY_ROW = "ours (every row)"
#: ``baselines.copy_top_rung``: the least-loss kept row of the 4× table, which is not always the
#: row the study labelled best (Mars 300M 4×: lr 0.004 reached 3.095, the best row 3.097).
LEAST = "copy top rung's least-loss row"


class ParamScore(NamedTuple):
    """One parameter's score on the target table."""

    regret: float
    picked: float
    diverged: bool


class Score(NamedTuple):
    """A prediction's score: the sum over the parameters, and each one's."""

    total: float
    params: dict[str, ParamScore]

    @property
    def diverged(self) -> list[str]:
        return [name for name, s in self.params.items() if s.diverged]


@dataclass
class Cell:
    """One (optimizer, size, method): its prediction and score, or why it has none."""

    prediction: dict[str, float] | None = None
    score: Score | None = None
    failure: str = ""  # "refused: ..." (TransferSearchError) or "raised: ..." (anything else)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def final_loss(cell: object) -> float:
    """A table's loss cell as a number, NaN for a diverged run (published as NaN, ``>10`` or > 6)."""
    text = str(cell).strip()
    if text.startswith(">"):
        return math.nan
    loss = float(text)
    return math.nan if not math.isfinite(loss) or loss > DIVERGED_LOSS else loss


def load(data_dir: Path, optimizer: str, every_row: bool = False) -> pd.DataFrame:
    """One optimizer's rows that vary a predicted parameter (or are the best; ``every_row``:
    all of them), loss NaN if diverged."""
    frame = pd.read_csv(data_dir / f"marin_{optimizer}_sweeps.csv", dtype={"loss": str})
    frame = (frame if every_row else predicted_rows(frame)).copy()
    frame["loss"] = [final_loss(v) for v in frame["loss"]]
    return frame


def predicted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The best row and the rows that vary a predicted parameter."""
    return frame[frame["varied"].isin(("best", *PREDICTED))]


def observations(
    frame: pd.DataFrame, recorded: tuple[str, ...] = PREDICTED
) -> list[ts.Observation]:
    """One trial a row, recording the hyperparameters ``recorded``."""
    return [
        ts.Observation(
            {"N": float(row.N), "D": float(row.D)},
            {name: float(getattr(row, name)) for name in recorded},
            float(row.loss),
        )
        for row in frame.itertuples()
    ]


def distance(name: str, grid_value: float, predicted: float) -> float:
    if name in LOG_PARAMS:
        return abs(math.log(grid_value) - math.log(predicted))
    return abs(grid_value - predicted)


def score(table: pd.DataFrame, prediction: dict[str, float]) -> Score:
    """The README's one-at-a-time score of ``prediction`` on one table (see the module docstring)."""
    scores: dict[str, ParamScore] = {}
    for name in PREDICTED:
        rows = table[table["varied"].isin(("best", name))]
        losses = rows["loss"].to_numpy(dtype=float)
        finite = losses[~pd.isna(losses)]
        least, worst = float(finite.min()), float(finite.max())
        distances = [distance(name, float(v), prediction[name]) for v in rows[name]]
        nearest = min(distances)
        tied = [i for i, d in enumerate(distances) if math.isclose(d, nearest, abs_tol=1e-12)]
        # a tie takes the worse row (a diverged one is the worst)
        chosen = max(tied, key=lambda i: math.inf if math.isnan(losses[i]) else losses[i])
        diverged = bool(math.isnan(losses[chosen]))
        loss = worst if diverged else float(losses[chosen])
        scores[name] = ParamScore(loss - least, float(rows[name].iloc[chosen]), diverged)
    return Score(sum(s.regret for s in scores.values()), scores)


def fit_ours(train: list[ts.Observation], target: dict[str, float], defaults: bool) -> Cell:
    wanted: dict[str, Any] = {"seed": 0}
    if not defaults:
        wanted["log_params"] = list(LOG_PARAMS)
    keywords, _ = accepted(wanted)
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ts.extrapolate(train, target=ts.Scale(target), params=list(PREDICTED), **keywords)
    except ts.TransferSearchError as exc:
        return Cell(failure=f"refused: {exc}", seconds=time.perf_counter() - started)
    except Exception as exc:  # a bug, not a refusal: counted apart, the run goes on
        return Cell(failure=f"raised {type(exc).__name__}: {exc}")
    cell = Cell(prediction=dict(res.params), seconds=time.perf_counter() - started)
    cell.extra["model"] = readout(res, "model")
    return cell


def run(data_dir: Path) -> dict[tuple[str, str, str], Cell]:
    cells: dict[tuple[str, str, str], Cell] = {}
    for optimizer in OPTIMIZERS:
        whole = load(data_dir, optimizer, every_row=True)
        for size in sorted(whole["model"].unique(), key=lambda m: float(m.rstrip("m"))):
            rows = whole[(whole["model"] == size) & whole["chinchilla"].isin(TRAIN_MULTIPLES)]
            own = predicted_rows(whole[whole["model"] == size])
            train = observations(own[own["chinchilla"].isin(TRAIN_MULTIPLES)])
            table = own[own["chinchilla"] == TARGET_MULTIPLE]
            target = {"N": float(table["N"].iloc[0]), "D": float(table["D"].iloc[0])}
            for defaults, method in ((False, OURS), (True, DEFAULTS)):
                cells[(optimizer, size, method)] = fit_ours(train, target, defaults)
            every = observations(rows, HYPERPARAMETERS)
            cells[(optimizer, size, EVERY_ROW)] = fit_ours(every, target, False)
            try:
                predicted = baselines(train, target, list(PREDICTED), log_params=LOG_PARAMS)
            except ValueError as exc:
                predicted = {}
                failure = f"raised: {exc}"
            if predicted:
                top = own[own["chinchilla"] == max(TRAIN_MULTIPLES)]
                best = top[top["varied"] == "best"].iloc[0]
                predicted = {
                    NULL: {name: float(best[name]) for name in PREDICTED},
                    LEAST: predicted.pop(NULL),
                    **predicted,
                }
            for method, prediction in predicted.items():
                cells[(optimizer, size, method)] = Cell(prediction=prediction)
            if not predicted:
                cells[(optimizer, size, "baselines")] = Cell(failure=failure)
            for (opt, sz, _), cell in cells.items():
                if (opt, sz) == (optimizer, size) and cell.prediction is not None:
                    if all(math.isfinite(v) for v in cell.prediction.values()):
                        cell.score = score(table, cell.prediction)
                    else:
                        cell.failure = f"raised: a non-finite prediction {cell.prediction}"
            print(f"{optimizer} {size}: done", flush=True)
    return cells


def methods(cells: dict[tuple[str, str, str], Cell]) -> list[str]:
    seen: list[str] = []
    for _, _, method in cells:
        if method not in seen:
            seen.append(method)
    return seen


def summed(cells: dict[tuple[str, str, str], Cell], method: str) -> str:
    """The sum over optimizers of the mean score, or "–" where a table went unscored."""
    total = 0.0
    for optimizer in OPTIMIZERS:
        scores = [c.score for (o, _, m), c in cells.items() if (o, m) == (optimizer, method)]
        if not scores or any(s is None for s in scores):
            return "–"
        total += sum(s.total for s in scores if s is not None) / len(scores)
    return f"{total:.4f}"


def render(
    cells: dict[tuple[str, str, str], Cell],
    elapsed: float,
    data_dir: Path,
    argv: list[str] | None = None,
) -> str:
    names = methods(cells)
    lines = header("Marin Lion and Mars sweeps: fit 1, 2, 4× Chinchilla, predict 8×", argv)
    lines += [
        f"Data: `{data_dir}/marin_{{lion,mars}}_sweeps.csv` (rows varying lr, weight_decay or "
        f"batch_size, plus the best row; loss NaN or > {DIVERGED_LOSS:g} = diverged, given to the "
        "fits as NaN). Score per table: for each of (lr, weight_decay, batch_size), the loss of the "
        "8× row nearest the prediction among the best row and the rows varying it (log distance "
        "for lr and batch_size, linear for weight_decay) minus the least finite loss among those "
        "rows, summed; a diverged pick scores the worst finite loss among them. One loss rounding "
        "unit is 0.001. Phase II's 2, 4, 8× tables (300M, 520M) vary only lr and batch_size: "
        "weight_decay scores 0 there whatever the prediction, and only the 1× table informs it.",
        "",
        f"`{OURS}`: `extrapolate(obs, target={{N, D}}, params=[lr, weight_decay, batch_size], "
        'log_params=["lr", "batch_size"], seed=0)` (weight decay linear: its grid holds 0). '
        f"`{DEFAULTS}`: the same without `log_params` (what a user gets first). "
        f"`{EVERY_ROW}`: `{OURS}` given every row of the training tables, also those that vary "
        "beta1, beta2, warmup or grad_clip (each trial recording all its hyperparameters), as a "
        "user passing the whole table would: the fit reads rows that differ only in a parameter "
        "`params` leaves out as repeats of one configuration (a divergence they caused as that "
        "configuration's) and says so (the `unfitted` note). Baselines "
        "(`benchmarks/baselines.py`) with the same log/linear choice; the null copies the row labelled "
        f"best of the largest training table (4×); `{LEAST}` copies its least-loss row among the "
        "kept ones (`baselines.copy_top_rung`), not always the same.",
        "",
        "## Summary per optimizer (mean over the three sizes)",
        "",
        "| optimizer | method | mean score | diverged picks | fits refused / raised |",
        "|---|---|---|---|---|",
    ]
    for optimizer in OPTIMIZERS:
        for method in names:
            group = [c for (o, _, m), c in cells.items() if o == optimizer and m == method]
            scored = [c.score for c in group if c.score is not None]
            refused = sum(c.failure.startswith("refused") for c in group)
            raised = sum(c.failure.startswith("raised") for c in group)
            mean = sum(s.total for s in scored) / len(scored) if scored else math.nan
            lines.append(
                f"| {optimizer} | {method} | "
                + (f"{mean:.4f} ({len(scored)} of {len(group)} scored)" if scored else "–")
                + f" | {sum(len(s.diverged) for s in scored)} | {refused} / {raised} |"
            )
    lines += [
        "",
        "Both optimizers, the two means summed (issue 25's goal: ours below the null's): "
        + "; ".join(f"{m} {summed(cells, m)}" for m in names)
        + ".",
        "",
        "## Per table",
        "",
        "Score (lr + weight_decay + batch_size parts); the prediction (lr, weight_decay, "
        "batch_size) → the grid values picked; `div` marks a diverged pick.",
        "",
        "| optimizer | size | method | score | parts | prediction | picked |",
        "|---|---|---|---|---|---|---|",
    ]
    for (optimizer, size, method), cell in cells.items():
        if cell.score is None:
            lines.append(f"| {optimizer} | {size} | {method} | – | {cell.failure[:160]} | | |")
            continue
        parts = " + ".join(
            f"{s.regret:.3f}" + (" div" if s.diverged else "") for s in cell.score.params.values()
        )
        assert cell.prediction is not None
        prediction = ", ".join(f"{cell.prediction[n]:.3g}" for n in PREDICTED)
        picked = ", ".join(f"{cell.score.params[n].picked:g}" for n in PREDICTED)
        if "model" in cell.extra:
            method += f" [{cell.extra['model']}]"
        lines.append(
            f"| {optimizer} | {size} | {method} | {cell.score.total:.4f} | {parts} | "
            f"({prediction}) | ({picked}) |"
        )
    refusals = [
        f"- {o} {s}, {m}: {c.failure[:300]}"
        for (o, s, m), c in cells.items()
        if c.failure and m == DEFAULTS
    ]
    if refusals:
        lines += ["", "Default options' refusals:", "", *refusals]
    note = dropped_note({"seed": 0, "log_params": list(LOG_PARAMS)})
    lines += ["", *([note, ""] if note else []), f"Whole run {elapsed:.1f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="the folder of the CSVs")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the markdown table to write")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    cells = run(args.data_dir)
    shown = None if argv is None else [__file__, *argv]
    text = render(cells, time.perf_counter() - started, args.data_dir, shown)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

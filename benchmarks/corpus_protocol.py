"""The corpus protocol: every method on every family, scored on the target's own seed-averaged grid.

    python benchmarks/corpus_protocol.py                     # training families + shared tables
    python benchmarks/corpus_protocol.py --no-tables         # the training families only
    python benchmarks/corpus_protocol.py --no-sparse         # without the 8-runs-a-rung draws

Writes ``benchmarks/results/corpus.md`` and ``benchmarks/results/corpus.json`` (one record per
family × method: ``family``, ``kind``, ``method``, ``regret``, ``noise``, ``covered90``,
``diverged``, ``refused``). The families and how each was trained: ``benchmarks/corpus/README.md``.

Methods, each given the proxy rungs' trials only (every seed a trial) and asked for the target's
coordinates (µP base lr, τ_epoch):

- ``ours``: ``transfersearch.extrapolate`` with its defaults (the ladder's order as ``cost``);
- ``null``: the top rung's best trial's raw hidden-group lr and weight decay, used as they are
  at the target (what copying the proxy's optimizer settings does), read back into coordinates;
- ``rules``: the same trial's coordinates carried by the family's ``TransferSpace`` (the scaling
  rules alone, no fit);
- ``band``: Step Law's band regression (every trial within 0.25% of its rung's best, log-linear
  in the scale variables; ``benchmarks/baselines.py``);
- ``argmin``: per-rung argmin, then log-linear.

Scoring (docs: ``benchmarks/corpus/README.md``): the target grid's loss, averaged over its seeds
per configuration and interpolated (monotone cubic) in log coordinates (:class:`Surface`); a
prediction's regret is that surface at the prediction (clamped to the grid's box) minus the
best configuration's seed mean. ``noise`` is the standard error
of one configuration's seed-mean loss at the target (pooled over its better half); a pick whose
nearest target configuration diverged in any seed is a diverged pick (regret: the worst
configuration's). ``covered90``: the fraction of coordinates whose 90% interval (ours only) holds
the target's best configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.interpolate import RegularGridInterpolator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "corpus"))

from baselines import argmin_loglinear, band_loglinear  # noqa: E402
from families import FAMILIES, Family, Size  # noqa: E402
from provenance import header  # noqa: E402
from tasks import TEACHER_CLASSES, VOCAB  # noqa: E402

import transfersearch as ts  # noqa: E402

DATA = HERE / "corpus" / "data"
RESULTS = HERE / "results"
COORDS = ("base_lr", "tau_epoch")
METHODS = ("ours", "null", "rules", "band", "argmin")
#: Variants of ours scored beside the defaults: ``model="constant"`` (no drift in the swept
#: coordinates: the rules' promise, fitted to every rung at once), and the choice between the two
#: made leave one family out (each family gets the variant with the lower mean regret on the
#: other training families: a choice from data across sweeps, scored out of sample).
VARIANTS = ("ours constant", "ours unplaced", "ours LOFO")
LEVEL = 0.9
#: The sparse protocol: this many random runs kept per rung (one seed each: a noisy 8-trial
#: sweep, issue 48's "normal case") ...
SPARSE_TRIALS = 8
#: ... in this many independent draws per family.
SPARSE_DRAWS = 10


#: CPU seconds per training family (the runs' ``seconds`` summed, every row in the CSV).
COST: dict[str, float] = {}


@dataclass(frozen=True)
class Record:
    family: str
    kind: str
    method: str
    regret: float | None
    noise: float | None
    covered90: float | None
    diverged: bool
    refused: bool
    pick: dict[str, float] | None = None
    covered90_own: float | None = None


class Surface:
    """The target's loss over (log base_lr, log τ_epoch): the seed mean of each grid point,
    interpolated between grid points by a monotone cubic (PCHIP) along each axis.

    Averaging the seeds is the smoothing; the interpolant passes through every measured mean and
    never overshoots them. A fitted local quadratic (tried first) put the least value of
    ``mlp_width``'s target at a corner where no run was, 0.02 nats below its best run (whose two
    seeds agree within 0.002): that valley is a narrow diagonal a quadratic cannot follow.
    Linear interpolation, tried next, charges a pick between grid points as if the valley were a
    plane there (twice PCHIP's regret for a pick inside that diagonal valley), which favours
    methods that copy grid points. A configuration is diverged where a seed's loss is NaN or above
    ``chance`` (the untrained model's loss, ln of the number of classes: every readout starts at
    zero, so a run that ends above it has blown up — SGD reaches 6e16 without a NaN); it enters
    the interpolant at the worst of the others.
    """

    def __init__(self, target: pd.DataFrame, chance: float = math.inf) -> None:
        target = target.assign(loss=target["loss"].where(target["loss"] <= chance))
        table = target.pivot_table(index="base_lr", columns="tau_epoch", values="loss",
                                   aggfunc="mean", dropna=False)  # fmt: skip
        failed = target.assign(nan=target["loss"].isna()).pivot_table(
            index="base_lr", columns="tau_epoch", values="nan", aggfunc="any"
        )
        self.axes = (np.log(table.index.to_numpy(float)), np.log(table.columns.to_numpy(float)))
        self.bad = failed.to_numpy(bool) | ~np.isfinite(table.to_numpy(float))
        means = table.to_numpy(float)
        finite = means[~self.bad]
        self.least = float(finite.min())
        self.worst = float(finite.max()) - self.least
        filled = np.where(self.bad, finite.max(), means)
        self._interp = RegularGridInterpolator(self.axes, filled, method="pchip")
        best = np.unravel_index(np.where(self.bad, np.inf, means).argmin(), means.shape)
        self.optimum = {
            "base_lr": float(table.index[best[0]]),
            "tau_epoch": float(table.columns[best[1]]),
        }
        pairs = target.pivot_table(index=list(COORDS), columns="seed", values="loss")
        pairs = pairs[pairs.notna().all(axis=1)]
        better = pairs.mean(axis=1) <= pairs.mean(axis=1).median()
        var = pairs[better].var(axis=1, ddof=1).mean()
        self.noise = float(math.sqrt(var / pairs.shape[1]))
        # the target's own optimum: the one model on its runs alone (every seed; a run past
        # chance diverged), the yardstick of the shared tables' coverage (steplaw_holdouts.py)
        # beside the grid's best cell, which moves in whole grid steps with the seeds' noise
        runs = [
            ts.Observation(ts.Scale(target=1.0), {c: float(row[c]) for c in COORDS},
                           float(row["loss"]) if pd.notna(row["loss"]) else math.nan)
            for _, row in target.iterrows()
        ]  # fmt: skip
        own = ts.estimate_optimum(runs, list(COORDS), warn=False)
        self.own = {c: float(own.params[c]) for c in COORDS}

    @staticmethod
    def covered(res: Any, point: Mapping[str, float]) -> float:
        """The fraction of coordinates whose :data:`LEVEL` interval of ``res`` holds ``point``."""
        bounds = res.interval(LEVEL)
        return float(np.mean([bounds[c][0] <= point[c] <= bounds[c][1] for c in COORDS]))

    def score(self, pick: Mapping[str, float]) -> tuple[float, bool]:
        """(regret, diverged) of a pick, clamped to the grid's box."""
        logs = [
            float(np.clip(math.log(pick[c]), axis[0], axis[-1]))
            for c, axis in zip(COORDS, self.axes, strict=True)
        ]
        near = tuple(
            int(np.abs(axis - v).argmin()) for axis, v in zip(self.axes, logs, strict=True)
        )
        if self.bad[near]:
            return self.worst, True
        return max(0.0, float(self._interp(np.array([logs]))[0]) - self.least), False


def chance_loss(family: Family) -> float:
    """The untrained model's loss (zero readout: uniform over the classes), ln(classes)."""
    return math.log(TEACHER_CLASSES if family.model == "teacher" else VOCAB)


def _ladder_cost(family: Family) -> Any:
    order = {family.scale(s): float(i + 1) for i, s in enumerate(family.rungs)}
    order[family.scale(family.target)] = float(len(family.rungs) + 1)
    return lambda scale: order.get(ts.Scale(scale), float(len(family.rungs) + 1))


def observations(family: Family, proxies: pd.DataFrame) -> list[ts.Observation]:
    sizes = {str(i): s for i, s in enumerate(family.rungs)}
    out = []
    for _, row in proxies.iterrows():
        value = float(row["loss"]) if pd.notna(row["loss"]) else math.nan
        scale = family.scale(sizes[str(row["rung"])])
        out.append(ts.Observation(scale, {c: float(row[c]) for c in COORDS}, value))
    return out


def _null_coordinates(family: Family, best: pd.Series, target: Size) -> dict[str, float]:
    """The coordinates at the target of a run that copies ``best``'s raw lr and weight decay: its
    hyperparameters at the top rung, read back into coordinates at the target (the space inverts
    its rule from the groups' raw values)."""
    space = family.space()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        raw = space.concretize({c: float(best[c]) for c in COORDS}, family.scale(family.rungs[-1]))
        back = space.coordinates(raw, family.scale(target))
    return {c: float(back[c]) for c in COORDS}


def predictions(
    family: Family, proxies: pd.DataFrame, seed: int = 0, quiet: bool = False
) -> tuple[dict[str, dict[str, float] | None], Any]:
    """Every method's pick from the proxies' trials; ``ours`` is given the family's space as an
    Optuna study stores it (its rule may place an optimum: Power Lines' τ_opt,
    docs/science.md §7.3), ``ours unplaced`` the same trials without it."""
    obs = observations(family, proxies)
    target = family.scale(family.target)
    top = proxies[proxies["rung"] == str(len(family.rungs) - 1)].dropna(subset=["loss"])
    best = top.loc[top["loss"].idxmin()]
    picks: dict[str, dict[str, float] | None] = {
        "null": _null_coordinates(family, best, family.target),
        "rules": {c: float(best[c]) for c in COORDS},
        "band": band_loglinear(obs, target, list(COORDS), list(COORDS)),
        "argmin": argmin_loglinear(obs, target, list(COORDS), list(COORDS)),
    }
    res = None
    space = family.space()
    for name, model, stored in (
        ("ours constant", "constant", space),
        ("ours unplaced", "auto", None),
        ("ours", "auto", space),
    ):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = ts.extrapolate(
                    ts.Sweep(tuple(obs), space=stored),
                    target=target,
                    params=list(COORDS),
                    cost=_ladder_cost(family),
                    model=model,
                    seed=seed,
                )
            picks[name] = dict(res.params)
        except ts.TransferSearchError as err:
            if not quiet:
                print(f"  {name} refused: {err}", flush=True)
            picks[name], res = None, None
    return picks, res


def on_grid(family: Family, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the family's grid at its declared sizes (a CSV may hold runs of an earlier,
    wider grid or another target: real runs, kept in the file, not scored)."""
    grid = np.log(np.array(family.grid()))
    logs = np.log(frame[list(COORDS)].to_numpy(float))
    near = (np.abs(logs[:, None, :] - grid[None, :, :]).max(axis=2) < 1e-3).any(axis=1)
    sizes = {str(i): s for i, s in enumerate(family.rungs)} | {"target": family.target}
    fields = ("width", "depth", "dataset_size", "batch_size")
    sized = [
        all(float(row[f]) == float(getattr(sizes[row["rung"]], f)) for f in fields)
        for _, row in frame.iterrows()
    ]
    return frame[near & np.array(sized, dtype=bool)]


def score_family(family: Family, data: Path = DATA) -> list[Record]:
    raw = pd.read_csv(data / f"{family.name}.csv", dtype={"rung": str})
    COST[family.name] = float(raw["seconds"].sum())
    frame = on_grid(family, raw)
    proxies, target = frame[frame["role"] == "proxy"], frame[frame["role"] == "target"]
    chance = chance_loss(family)
    surface = Surface(target, chance)
    picks, res = predictions(family, proxies)
    records = []
    for method in (*METHODS, "ours constant", "ours unplaced"):
        pick = picks[method]
        if pick is None:
            records.append(Record(family.name, "training", method, None, surface.noise, None,
                                  False, True))  # fmt: skip
            continue
        regret, diverged = surface.score(pick)
        covered = own = None
        if method == "ours" and res is not None:
            covered = surface.covered(res, surface.optimum)
            own = surface.covered(res, surface.own)
        records.append(Record(family.name, "training", method, regret, surface.noise, covered,
                              diverged, False, {c: float(pick[c]) for c in COORDS}, own))  # fmt: skip
    shown = ", ".join(f"{r.method} {r.regret:.4f}" for r in records if r.regret is not None)
    print(f"{family.name}: noise {surface.noise:.4f}; {shown}", flush=True)
    records.append(Record(family.name, "training", "target optimum", 0.0, surface.noise, None,
                          False, False, dict(surface.optimum)))  # fmt: skip
    for rung, rows in proxies.groupby("rung"):
        optimum = Surface(rows, chance).optimum
        records.append(Record(family.name, "training", f"rung {rung} optimum", None, None, None,
                              False, False, dict(optimum)))  # fmt: skip
    return records


def leave_one_family_out(records: list[Record], kind: str = "training") -> list[Record]:
    """``ours LOFO``: each family scored with the variant (defaults, constant, unplaced) whose
    mean regret over the *other* families of the same kind is lowest."""
    names = list(dict.fromkeys(r.family for r in records if r.kind == kind))
    by = {(r.family, r.method): r for r in records if r.kind == kind}
    out = []
    for name in names:
        others = [n for n in names if n != name]

        def mean(method: str, others: list[str] = others) -> float:
            values = [by[(n, method)].regret for n in others]
            return float(np.mean([v if v is not None else math.inf for v in values]))

        chosen = min(("ours", "ours constant", "ours unplaced"), key=mean)
        picked = by[(name, chosen)]
        out.append(dataclasses.replace(picked, method="ours LOFO", covered90=None))
        print(f"{name} ({kind}): LOFO chose {chosen!r} ({picked.regret})", flush=True)
    return out


def sparse_rungs(proxies: pd.DataFrame, draw: int, per_rung: int = SPARSE_TRIALS) -> pd.DataFrame:
    """Draw ``draw`` of the sparse protocol: ``per_rung`` random runs of each rung."""
    rng = np.random.default_rng(draw)
    return pd.concat(
        rows.iloc[rng.choice(len(rows), size=min(per_rung, len(rows)), replace=False)]
        for _, rows in proxies.groupby("rung")
    )


def score_sparse(
    family: Family, data: Path = DATA, draws: int = SPARSE_DRAWS, per_rung: int = SPARSE_TRIALS
) -> list[Record]:
    """The family as a noisy, sparse sweep: each draw keeps ``per_rung`` random runs of each
    rung (configurations and seeds drawn together: one noisy trial per kept run, as a real
    8-trial sweep has), every method predicts from them, scored on the same target surface.
    One record per method: the mean regret over the draws (``covered90``: ours' mean coverage;
    ``diverged``/``refused``: in any draw)."""
    raw = pd.read_csv(data / f"{family.name}.csv", dtype={"rung": str})
    frame = on_grid(family, raw)
    proxies, target = frame[frame["role"] == "proxy"], frame[frame["role"] == "target"]
    surface = Surface(target, chance_loss(family))
    methods = (*METHODS, "ours constant", "ours unplaced")
    regrets: dict[str, list[float]] = {m: [] for m in methods}
    flags: dict[str, list[bool]] = {m: [False, False] for m in methods}
    covered: list[float] = []
    covered_own: list[float] = []
    for draw in range(draws):
        kept = sparse_rungs(proxies, draw, per_rung)
        picks, res = predictions(family, kept, seed=draw, quiet=True)
        for m in methods:
            pick = picks.get(m)
            if pick is None:
                flags[m][1] = True
                regrets[m].append(surface.worst)
                continue
            regret, diverged = surface.score(pick)
            regrets[m].append(regret)
            flags[m][0] = flags[m][0] or diverged
        if res is not None:
            covered.append(surface.covered(res, surface.optimum))
            covered_own.append(surface.covered(res, surface.own))
    cover = float(np.mean(covered)) if covered else None
    cover_own = float(np.mean(covered_own)) if covered_own else None
    records = [
        Record(
            family.name,
            "sparse",
            m,
            float(np.mean(regrets[m])),
            surface.noise,
            cover if m == "ours" else None,
            flags[m][0],
            flags[m][1],
            covered90_own=cover_own if m == "ours" else None,
        )
        for m in methods
    ]
    shown = ", ".join(f"{r.method} {r.regret:.4f}" for r in records)
    print(f"{family.name} sparse ({per_rung}/rung, {draws} draws): {shown}", flush=True)
    return records


#: The shared tables' folder, beside the repository.
TABLES_DIR = HERE.parent.parent / "shared" / "data"

#: The shared tables' hold-outs that join the corpus (each extrapolates in model size, the
#: direction the held-out checks found hardest): (family, loader module, protocol, options).
TABLES = (
    ("steplaw_dense 215M+268M->537M", "steplaw", "dense 215M+268M -> 537M", None),
    ("steplaw_moe largest Na", "steplaw", "MoE largest Na", None),
    ("marin_lion 130M+300M->520M", "marin", "130M+300M -> 520M", "lion"),
    ("marin_mars 130M+300M->520M", "marin", "130M+300M -> 520M", "mars"),
)


def score_tables(data_dir: Path, methods: tuple[str, ...] = METHODS) -> list[Record]:
    """The four shared tables, by their hold-out protocols (``steplaw_holdouts.py``,
    ``marin_holdouts.py``): regret in each table's own units (Step Law: relative loss excess;
    Marin: the summed score), the mean over the protocol's targets; no space, so no ``rules``.
    Records only ``methods`` (the protocols run every method's baseline, which is cheap)."""
    import marin_holdouts as mh
    import steplaw_holdouts as sh
    from marin_sweeps import load

    names = {"ours": ("transfersearch", "ours"), "null": (sh.NEAREST, mh.NEAREST)}
    names |= {"band": (sh.BAND, mh.BAND), "argmin": (sh.ARGMIN, mh.ARGMIN)}
    records = []
    for family, source, protocol, optimizer in TABLES:
        if source == "steplaw":
            filename, variables, split = sh.PROTOCOLS[protocol]
            frame = pd.read_csv(data_dir / filename)
            rows = sh.run_protocol(frame[np.isfinite(frame[sh.LOSS])], variables, split)
            column = 0
        else:
            rows = mh.run_protocol({optimizer: load(data_dir, optimizer, every_row=True)}, protocol)
            column = 1
        for method in methods:
            if method not in names:
                records.append(Record(family, "table", method, None, None, None, False, False))
                continue
            values = [r[names[method][column]] for r in rows]
            finite = [v for v in values if math.isfinite(v)]
            covered = None
            if method == "ours" and source == "steplaw":
                covered = float(np.mean([(r["lr own"] + r["bs own"]) / 2 for r in rows]))
            records.append(Record(family, "table", method,
                                  float(np.mean(finite)) if finite else None, None, covered,
                                  False, len(finite) < len(values)))  # fmt: skip
        shown = records[-len(methods) :]
        print(f"{family}: " + ", ".join(f"{r.method} {_fmt(r.regret)}" for r in shown))
    return records


def _fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _dense(records: list[Record], name: str) -> dict[str, Record]:
    """The family's (or table's) records of the full data, by method (not the sparse draws)."""
    return {r.method: r for r in records if r.family == name and r.kind != "sparse"}


def _regret_table(records: list[Record], kind: str) -> list[str]:
    """The regret table of one kind of record (``training`` or ``sparse``)."""
    lines = [
        "| family | noise | "
        + " | ".join(m for m in (*METHODS, *VARIANTS))
        + " | ours cov (best cell / own) | ours ≤ min(null, band) + noise |",
        "|---|---|" + "---|" * (len(METHODS) + len(VARIANTS)) + "---|---|",
    ]
    families = list(dict.fromkeys(r.family for r in records if r.kind == kind))
    for name in families:
        rows = {r.method: r for r in records if r.family == name and r.kind == kind}
        cells = []
        for m in (*METHODS, *VARIANTS):  # one cell per method
            r = rows[m]
            cell = "refused" if r.refused else _fmt(r.regret) + (" (div)" if r.diverged else "")
            cells.append(cell)
        ours, null, band = rows["ours"], rows["null"], rows["band"]
        ok = ours.regret is not None and ours.regret <= min(
            null.regret or 0.0, band.regret or 0.0
        ) + (ours.noise or 0.0)
        lines.append(f"| {name} | {_fmt(ours.noise)} | " + " | ".join(cells)
                     + f" | {_fmt(ours.covered90, 2)} / {_fmt(ours.covered90_own, 2)}"
                     + f" | {'yes' if ok else 'no'} |")  # fmt: skip
    means = []
    for m in (*METHODS, *VARIANTS):
        vals = [r.regret for r in records if r.method == m and r.kind == kind]
        means.append(_fmt(float(np.mean([v for v in vals if v is not None])) if vals else None))
    ours = [r for r in records if r.method == "ours" and r.kind == kind]
    cover = [_fmt(float(np.nanmean([getattr(r, k) or math.nan for r in ours])), 2)
             for k in ("covered90", "covered90_own")]  # fmt: skip
    lines.append("| **mean** | | " + " | ".join(means) + f" | {cover[0]} / {cover[1]} | |")
    return lines


def render(records: list[Record], argv: list[str] | None, seconds: float) -> str:
    lines = header("Corpus: hyperparameter transfer on real ladders", argv)
    lines += [
        "",
        "Regret in the family's loss units (nats) on the target's seed-averaged grid (interpolated "
        "by a monotone cubic in log coordinates); `noise` is the",
        "standard error of one target configuration's seed mean. `cov` is the fraction of ours' "
        "90% intervals",
        "holding the target's best configuration (`best cell`, which moves in whole grid steps "
        "with the seeds' noise) and the target's own optimum (`own`: the one model on the "
        "target's runs alone, `estimate_optimum`, the yardstick of the shared tables' coverage). "
        "`div` a diverged pick, `ref` a refusal. Protocol and",
        "families: `benchmarks/corpus/README.md`.",
        "",
    ]
    lines += _regret_table(records, "training")
    families = list(dict.fromkeys(r.family for r in records if r.kind == "training"))
    cost = {name: COST.get(name, math.nan) for name in families}
    lines += ["", "Training cost (the runs' seconds on one thread, every row of the CSV): "
              + ", ".join(f"{n} {c / 3600:.2f} h" for n, c in cost.items())
              + f"; the corpus {sum(cost.values()) / 3600:.2f} CPU-hours."]  # fmt: skip
    rungs = ("rung 0 optimum", "rung 1 optimum", "rung 2 optimum", "target optimum")
    lines += [
        "",
        "Where the optimum lies in the swept coordinates (base_lr, tau_epoch), each rung's "
        "and the target's best configuration (seed means): the rules promise it stays put.",
        "",
    ]
    lines += ["| family | " + " | ".join(rungs) + " |", "|---|" + "---|" * len(rungs)]
    for name in families:
        rows = _dense(records, name)
        cells = [f"{rows[m].pick['base_lr']:.3g}, {rows[m].pick['tau_epoch']:.3g}"
                 for m in rungs if rows.get(m) and rows[m].pick]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    wins = sum(
        1
        for name in families
        if (_dense(records, name)["rules"].regret or 0.0)
        < (_dense(records, name)["null"].regret or 0.0)
    )
    lines += ["", f"The rules alone beat the null (copying the raw lr and weight decay) on {wins} "
              f"of {len(families)} training families."]  # fmt: skip
    lines += ["", "Picks (base_lr, tau_epoch) and the target's best configuration:", ""]
    shown = (*METHODS, "ours constant", "target optimum")
    lines += ["| family | " + " | ".join(shown) + " |"]
    lines += ["|---|" + "---|" * len(shown)]
    for name in families:
        rows = _dense(records, name)
        cells = []
        for m in shown:
            p = rows[m].pick
            cells.append("–" if p is None else f"{p['base_lr']:.3g}, {p['tau_epoch']:.3g}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if any(r.kind == "sparse" for r in records):
        lines += [
            "",
            f"**Sparse, noisy ladders** (issue 48's normal case): each rung cut to "
            f"{SPARSE_TRIALS} random runs (one seed each), {SPARSE_DRAWS} independent draws per "
            "family; mean regret over the draws on the same target surface (`div`/`ref`: in any "
            "draw; `cov`: ours' mean coverage).",
            "",
        ]
        lines += _regret_table(records, "sparse")
    tables = list(dict.fromkeys(r.family for r in records if r.kind == "table"))
    if tables:
        lines += [
            "",
            "The shared tables (`../shared/data`), by their hold-out protocols: regret in each "
            "table's own units",
            "(Step Law: relative loss excess of the smooth loss; Marin: the summed score of "
            "`marin_sweeps.py`), mean over",
            "the protocol's targets; no noise floor (Step Law's loss is already smoothed), no "
            "space (no `rules`).",
            "",
            "| table | ours | null | band | argmin | ours cov (lr, bs own optimum) |",
            "|---|---|---|---|---|---|",
        ]
        for name in tables:
            rows = _dense(records, name)
            cells = [_fmt(rows[m].regret, 5) for m in ("ours", "null", "band", "argmin")]
            lines.append(
                f"| {name} | " + " | ".join(cells) + f" | {_fmt(rows['ours'].covered90, 2)} |"
            )
    lines += ["", f"Wall time {seconds:.0f} s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="only these families")
    parser.add_argument("--out", type=Path, default=RESULTS / "corpus", help="output stem")
    parser.add_argument("--data", type=Path, default=DATA, help="the families' CSV folder")
    parser.add_argument(
        "--tables",
        type=Path,
        default=TABLES_DIR,
        help="the shared tables' folder (default ../shared/data beside the repository)",
    )
    parser.add_argument("--no-tables", action="store_true", help="leave the shared tables out")
    parser.add_argument(
        "--no-sparse", action="store_true", help="leave the sparse (8 runs per rung) draws out"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    names = args.family or [n for n in FAMILIES if (args.data / f"{n}.csv").exists()]
    records: list[Record] = []
    for name in names:
        records += score_family(FAMILIES[name], args.data)
    records += leave_one_family_out(records)
    if not args.no_sparse:
        for name in names:
            records += score_sparse(FAMILIES[name], args.data)
        records += leave_one_family_out(records, "sparse")
    if not args.no_tables:
        records += score_tables(args.tables)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(render(records, argv, time.perf_counter() - started))
    kept = [
        {k: v for k, v in asdict(r).items() if k != "pick"} for r in records if r.method in METHODS
    ]
    args.out.with_suffix(".json").write_text(json.dumps(kept, indent=1) + "\n")
    print(f"wrote {args.out.with_suffix('.md')} and .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Which of the engine's terms earn their place on the corpus: each switched off in turn.

    python benchmarks/corpus_ablation.py            # every ablation, dense + sparse draws + tables
    python benchmarks/corpus_ablation.py --no-tables

For each ablation the engine's ``ours`` (defaults, the family's space stored) is re-run on every
training family of the corpus — once on the full rungs, and on the 10 sparse draws of 8 runs a
rung (``corpus_protocol.score_sparse``'s draws) — and on the four shared tables' hold-outs that
join the corpus (``corpus_protocol.TABLES``), each scored as in ``corpus_protocol.py``.
Writes ``benchmarks/results/corpus_ablation.md`` and ``.json``.

The criterion (fixed before the first run with the tables, 2026-12-08). Regrets are in different
units (nats, Step Law's relative excess, Marin's summed score), so each family's regret is divided
by its *scale*: the family's noise floor plus the better of the null and Step Law's band there
(``corpus.json``; the tables have no noise floor) — the yardstick of issue 48's goal, so 1.0 is
"as good as the goal allows". A training family's value is the mean of its dense and sparse
normalised regrets; a table's is its normalised regret. Leave one family out over the eleven: the
on/off choice for each family is the one with the lower mean over the other ten (`kept on`: for
how many). A term *earns its place* when switching it off raises the mean normalised regret over
the eleven and the LOFO choice keeps it on for most (≥ 6 of 11). The walk-forward calibration does
not move the pick, only the interval: it is judged by coverage instead — it earns its place when
the corpus's 90% coverage (training dense and sparse, Step Law's tables) is nearer 0.9 with it.

Switches (module constants or functions replaced for the run only; docs/science.md §7):

- ``no skew``: the valley's cubic skew held at 0 (``SKEW_PRIOR`` → 1e-9);
- (``no bend``, the path's second-order term, ran here until it was removed: docs/science.md §7.6);
- ``no box prior``: each rung's optimum a priori anywhere (``BOX_PRIOR_SD`` → 1e6);
- ``no misfit``: the noise model without its relative misfit ρ (every trial weighs alike);
- ``no scatter``: the rungs held on the law (the scatter hyperprior at its least value);
- ``no off-diagonal prior``: the curvature's cross terms flat;
- ``no walk-forward``: the predictive spread uncalibrated (no folds);
- ``no boundary drift``: the divergence boundary tied to the optimum (no ``γ``, §8);
- ``constant``: no drift (``model="constant"``);
- ``unplaced``: no Power Lines placement (the space not given).

CPU: about 20 s per ablation on one core for the training families (77 fits) and ~40 s for the
tables; ~10 min in all.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "corpus"))

import corpus_protocol as cp  # noqa: E402
from families import FAMILIES, Family  # noqa: E402
from provenance import header, kept_readings  # noqa: E402

import transfersearch as ts  # noqa: E402
from transfersearch.fitting import divergence, onemodel, valley  # noqa: E402


@contextmanager
def _set(module: Any, **values: Any) -> Iterator[None]:
    old = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


def _no_folds(*args: Any, **kwargs: Any) -> list[Any]:
    return []


def _tied_boundary(offsets: Any, diverged: Any, coords: Any, span: Any = None) -> Any:
    return divergence.fit_divergence(offsets, diverged, coords)


@contextmanager
def _extrapolate_with(**extra: Any) -> Iterator[None]:
    """Every ``extrapolate`` the benchmarks' modules call gets ``extra`` (the tables' protocols
    call it from their own modules)."""
    original = ts.extrapolate

    def patched(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, **extra})

    holders = [m for m in list(sys.modules.values())
               if getattr(m, "extrapolate", None) is original]  # fmt: skip
    for module in holders:
        module.extrapolate = patched  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in holders:
            module.extrapolate = original  # type: ignore[attr-defined]


#: Each ablation: (context manager, extrapolate keywords, whether the space is given).
ABLATIONS: dict[str, tuple[Callable[[], Any], dict[str, Any], bool]] = {
    "defaults": (lambda: _set(valley), {}, True),
    "no skew": (lambda: _set(valley, SKEW_PRIOR=1e-9), {}, True),
    "no box prior": (lambda: _set(valley, BOX_PRIOR_SD=1e6), {}, True),
    "no misfit": (lambda: _set(valley, MISFIT_MAX=2e-9, MISFIT_START=1e-9), {}, True),
    "no scatter": (lambda: _set(valley, SCATTER_MAX=0.0100001), {}, True),
    "no off-diagonal prior": (lambda: _set(valley, OFFDIAGONAL_PRIOR_CORRELATION=1e6), {}, True),
    "no walk-forward": (lambda: _set(onemodel, _folds=_no_folds), {}, True),
    "no boundary drift": (lambda: _set(onemodel, fit_divergence=_tied_boundary), {}, True),
    "constant": (lambda: _extrapolate_with(model="constant"), {}, True),
    "unplaced": (lambda: _set(valley), {}, False),
}


#: Fits an engine could not finish, by ablation, family and error (scored as refusals).
CRASHES: dict[tuple[str, str, str], int] = {}
#: The ablation being scored (for :data:`CRASHES`).
RUNNING = ["defaults"]


def _pick(
    family: Family, proxies: pd.DataFrame, seed: int, keywords: dict[str, Any], space: bool
) -> tuple[dict[str, float] | None, Any]:
    obs = cp.observations(family, proxies)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ts.extrapolate(
                ts.Sweep(tuple(obs), space=family.space() if space else None),
                target=family.scale(family.target),
                params=list(cp.COORDS),
                cost=cp._ladder_cost(family),
                seed=seed,
                **keywords,
            )
    except ts.TransferSearchError:
        return None, None
    except (ArithmeticError, ValueError, np.linalg.LinAlgError) as err:
        # an ablated engine may fail where the product does not (no box prior: a rung's optimum
        # in a flat direction runs past the float range): scored as a refusal, counted
        key = (RUNNING[0], family.name, f"{type(err).__name__}: {str(err)[:60]}")
        CRASHES[key] = CRASHES.get(key, 0) + 1
        return None, None
    return dict(res.params), res


def _covered(res: Any, surface: cp.Surface) -> float:
    bounds = res.interval(cp.LEVEL)
    return float(np.mean([bounds[c][0] <= surface.optimum[c] <= bounds[c][1] for c in cp.COORDS]))


def score(name: str, data: Path) -> dict[str, dict[str, float]]:
    """Per family: dense regret and coverage, sparse mean regret and coverage."""
    manager, keywords, space = ABLATIONS[name]
    RUNNING[0] = name
    out: dict[str, dict[str, float]] = {}
    with manager():
        for fam_name, family in FAMILIES.items():
            raw = pd.read_csv(data / f"{fam_name}.csv", dtype={"rung": str})
            frame = cp.on_grid(family, raw)
            proxies, target = frame[frame["role"] == "proxy"], frame[frame["role"] == "target"]
            surface = cp.Surface(target, cp.chance_loss(family))
            pick, res = _pick(family, proxies, 0, keywords, space)
            dense = surface.worst if pick is None else surface.score(pick)[0]
            cover = math.nan if res is None else _covered(res, surface)
            regrets, covers = [], []
            for draw in range(cp.SPARSE_DRAWS):
                kept = cp.sparse_rungs(proxies, draw)
                pick, res = _pick(family, kept, draw, keywords, space)
                regrets.append(surface.worst if pick is None else surface.score(pick)[0])
                if res is not None:
                    covers.append(_covered(res, surface))
            out[fam_name] = {
                "dense": dense,
                "dense_cov": cover,
                "sparse": float(np.mean(regrets)),
                "sparse_cov": float(np.mean(covers)) if covers else math.nan,
            }
            print(f"{name}: {fam_name} dense {dense:.4f} sparse {out[fam_name]['sparse']:.4f}",
                  flush=True)  # fmt: skip
    return out


def score_tables(name: str, data_dir: Path) -> dict[str, dict[str, float]]:
    """Ours on the four shared tables' hold-outs (``corpus_protocol.score_tables``), under the
    ablation ``name``; the ``unplaced`` switch is moot there (no space)."""
    manager, _, _ = ABLATIONS[name]
    RUNNING[0] = name
    out: dict[str, dict[str, float]] = {}
    with manager():
        for record in cp.score_tables(data_dir, methods=("ours",)):
            out[record.family] = {
                "table": math.nan if record.regret is None else record.regret,
                "table_cov": math.nan if record.covered90 is None else record.covered90,
            }
    return out


def scales(path: Path) -> dict[tuple[str, str], float]:
    """Each (family, kind)'s yardstick: its noise floor plus the better of the null and the
    band there (``corpus.json``; a table has no noise floor)."""
    scale: dict[tuple[str, str], float] = {}
    records = json.loads(path.read_text())
    for key in {(r["family"], r["kind"]) for r in records}:
        rows = {r["method"]: r for r in records if (r["family"], r["kind"]) == key}
        noise = rows["null"]["noise"] or 0.0
        scale[key] = noise + min(rows["null"]["regret"], rows["band"]["regret"])
    return scale


def normalised(
    table: dict[str, dict[str, float]], scale: dict[tuple[str, str], float]
) -> dict[str, float]:
    """Each family's regret in units of its scale: a training family's dense and sparse
    averaged, a table's own."""
    out = {}
    for family, cells in table.items():
        if "table" in cells:
            out[family] = cells["table"] / scale[(family, "table")]
        else:
            out[family] = 0.5 * (
                cells["dense"] / scale[(family, "training")]
                + cells["sparse"] / scale[(family, "sparse")]
            )
    return out


def lofo(on: dict[str, float], off: dict[str, float]) -> tuple[float, int]:
    """The mean over families of the (normalised) value of the variant chosen on the other
    families, and on how many families that choice kept the term on."""
    chosen, kept = [], 0
    for name in on:
        others = [n for n in on if n != name]
        keep = np.mean([on[n] for n in others]) <= np.mean([off[n] for n in others])
        kept += int(keep)
        chosen.append(on[name] if keep else off[name])
    return float(np.mean(chosen)), kept


def coverage(table: dict[str, dict[str, float]]) -> float:
    """The corpus's 90% coverage: training dense and sparse, and the tables that measure it."""
    values = []
    for cells in table.values():
        values += [cells.get(k, math.nan) for k in ("dense_cov", "sparse_cov", "table_cov")]
    return float(np.nanmean(values))


def render(
    results: dict[str, dict[str, dict[str, float]]],
    scale: dict[tuple[str, str], float],
    argv: list[str] | None,
    seconds: float,
) -> str:
    base = results["defaults"]
    training = [f for f in base if "dense" in base[f]]
    tables = [f for f in base if "table" in base[f]]
    lines = header("Corpus ablation: which terms earn their place", argv)
    lines += [
        "",
        "Each row switches one term off (`benchmarks/corpus_ablation.py` says how and states the "
        "criterion) and re-runs ours on the seven training families and the shared tables' "
        "hold-outs.",
        "",
        "Training families: dense = the full rungs / sparse = mean over 10 draws of 8 runs a rung; "
        "regret in nats on the target surface of `corpus.md`.",
        "",
        "| ablation | " + " | ".join(training) + " | dense mean | sparse mean | dense cov | "
        "sparse cov |",
        "|---|" + "---|" * (len(training) + 4),
    ]

    def mean(table: dict[str, dict[str, float]], key: str) -> float:
        return float(np.nanmean([table[f][key] for f in training]))

    for name, table in results.items():
        cells = [f"{table[f]['dense']:.4f} / {table[f]['sparse']:.4f}" for f in training]
        lines.append(
            f"| {name} | " + " | ".join(cells)
            + f" | {mean(table, 'dense'):.4f} | {mean(table, 'sparse'):.4f}"
            + f" | {mean(table, 'dense_cov'):.2f} | {mean(table, 'sparse_cov'):.2f} |"
        )  # fmt: skip
    if tables:
        lines += [
            "",
            "Shared tables (size hold-outs, `corpus.md`): regret in each table's own units; "
            "`cov` = Step Law's 90% coverage of the held-out grid's own optimum (lr, bs).",
            "",
            "| ablation | " + " | ".join(tables) + " | Step Law cov |",
            "|---|" + "---|" * (len(tables) + 1),
        ]
        for name, table in results.items():
            cells = [f"{table[f]['table']:.5f}" for f in tables]
            cov = np.nanmean([table[f]["table_cov"] for f in tables])
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {cov:.2f} |")
    families = training + tables
    lines += [
        "",
        f"The verdict over {len(families)} families, regret in units of each family's scale "
        "(noise floor + min(null, band), `corpus.json`; a training family's dense and sparse "
        "averaged). `LOFO` = the mean when on/off is chosen per family on the others (`kept on`: "
        "for how many); `helps on` = the families with a lower value with the term on; `cov` = "
        "the corpus's 90% coverage.",
        "",
        "| ablation | normalised mean | LOFO | kept on | helps on | cov | earns its place |",
        "|---|---|---|---|---|---|---|",
    ]
    on = normalised(base, scale)
    for name, table in results.items():
        off = normalised(table, scale)
        value = float(np.mean([off[f] for f in families]))
        cov = coverage(table)
        if name == "defaults":
            cells = ["–"] * 4
        else:
            chosen, kept = lofo(on, off)
            helps = sum(on[f] < off[f] for f in families)
            if name == "no walk-forward":  # judged by its job, the interval (docstring)
                earns = abs(coverage(base) - 0.9) < abs(cov - 0.9)
            else:
                earns = value > np.mean([on[f] for f in families]) and 2 * kept > len(families)
            cells = [f"{chosen:.2f}", f"{kept}/{len(families)}",
                     f"{helps}/{len(families)}", "yes" if earns else "no"]  # fmt: skip
        lines.append(f"| {name} | {value:.2f} | " + " | ".join(cells[:3])
                     + f" | {cov:.2f} | {cells[3]} |")  # fmt: skip
    lines += ["", "Cells: a fit that failed is scored as the target's worst configuration, as a "
              "refusal."]  # fmt: skip
    if CRASHES:
        lines += ["", "Fits that failed: "
                  + "; ".join(f"{a}, {f}: {n}× {e}" for (a, f, e), n in CRASHES.items())]  # fmt: skip
    lines += ["", f"Wall time {seconds:.0f} s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="only these ablations (and defaults)")
    parser.add_argument("--out", type=Path, default=cp.RESULTS / "corpus_ablation")
    parser.add_argument("--data", type=Path, default=cp.DATA)
    parser.add_argument("--tables", type=Path, default=cp.TABLES_DIR,
                        help="the shared tables' folder (default ../shared/data)")  # fmt: skip
    parser.add_argument("--no-tables", action="store_true", help="leave the shared tables out")
    parser.add_argument(
        "--render-only", action="store_true", help="re-render the .md from the committed .json"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    names = ["defaults", *(args.only or [n for n in ABLATIONS if n != "defaults"])]
    if args.render_only:
        results = json.loads(args.out.with_suffix(".json").read_text())
    else:
        results = {}
        for name in names:
            results[name] = score(name, args.data)
            if not args.no_tables:
                results[name] |= score_tables(name, args.tables)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    md = args.out.with_suffix(".md")
    readings = kept_readings(md)
    md.write_text(
        render(results, scales(cp.RESULTS / "corpus.json"), argv, time.perf_counter() - started)
        + readings
    )
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out.with_suffix('.md')} and .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

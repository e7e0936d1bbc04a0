"""Which of the engine's terms earn their place on the corpus: each switched off in turn.

    python benchmarks/corpus_ablation.py            # every ablation, dense + sparse draws

For each ablation the engine's ``ours`` (defaults, the family's space stored) is re-run on every
training family of the corpus — once on the full rungs, and on the 10 sparse draws of 8 runs a
rung (``corpus_protocol.score_sparse``'s draws) — and scored on the same target surfaces as
``corpus_protocol.py``. A term *earns its place* when switching it off raises the mean regret
leave one family out: for each family, "on" or "off" is chosen by the mean regret on the other
six (dense and sparse together), and the chosen variant's regret on the held-out family is
averaged. Writes ``benchmarks/results/corpus_ablation.md`` and ``.json``.

Switches (module constants or functions replaced for the run only; docs/science.md §7):

- ``no skew``: the valley's cubic skew held at 0 (``SKEW_PRIOR`` → 1e-9);
- (``no bend``, the path's second-order term, ran here until it was removed: docs/science.md §7.6);
- ``no box prior``: each rung's optimum a priori anywhere (``BOX_PRIOR_SD`` → 1e6);
- ``no misfit``: the noise model without its relative misfit ρ (every trial weighs alike);
- ``no scatter``: the rungs held on the law (the scatter hyperprior at its least value);
- ``no off-diagonal prior``: the curvature's cross terms flat;
- ``no walk-forward``: the predictive spread uncalibrated (no folds);
- ``constant``: no drift (``model="constant"``);
- ``unplaced``: no Power Lines placement (the space not given).

CPU: about 20 s per ablation on one core (77 fits), ~3 min in all.
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
from provenance import header  # noqa: E402

import transfersearch as ts  # noqa: E402
from transfersearch.fitting import onemodel, valley  # noqa: E402


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


#: Each ablation: (context manager, extrapolate keywords, whether the space is given).
ABLATIONS: dict[str, tuple[Callable[[], Any], dict[str, Any], bool]] = {
    "defaults": (lambda: _set(valley), {}, True),
    "no skew": (lambda: _set(valley, SKEW_PRIOR=1e-9), {}, True),
    "no box prior": (lambda: _set(valley, BOX_PRIOR_SD=1e6), {}, True),
    "no misfit": (lambda: _set(valley, MISFIT_MAX=2e-9, MISFIT_START=1e-9), {}, True),
    "no scatter": (lambda: _set(valley, SCATTER_MAX=0.0100001), {}, True),
    "no off-diagonal prior": (lambda: _set(valley, OFFDIAGONAL_PRIOR_CORRELATION=1e6), {}, True),
    "no walk-forward": (lambda: _set(onemodel, _folds=_no_folds), {}, True),
    "constant": (lambda: _set(valley), {"model": "constant"}, True),
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


def lofo(on: dict[str, dict[str, float]], off: dict[str, dict[str, float]]) -> tuple[float, int]:
    """The mean over families of the regret (dense and sparse averaged) of the variant chosen on
    the other families, and on how many families that choice kept the term on."""

    def both(table: dict[str, dict[str, float]], name: str) -> float:
        return 0.5 * (table[name]["dense"] + table[name]["sparse"])

    chosen, kept = [], 0
    for name in on:
        others = [n for n in on if n != name]
        keep = np.mean([both(on, n) for n in others]) <= np.mean([both(off, n) for n in others])
        kept += int(keep)
        chosen.append(both(on if keep else off, name))
    return float(np.mean(chosen)), kept


def render(
    results: dict[str, dict[str, dict[str, float]]], argv: list[str] | None, seconds: float
) -> str:
    families = list(results["defaults"])
    lines = header("Corpus ablation: which terms earn their place", argv)
    lines += [
        "",
        "Each row switches one term off (`benchmarks/corpus_ablation.py` says how) and re-runs "
        "ours on the seven training families:",
        "dense = the full rungs, sparse = mean over 10 draws of 8 runs a rung; regret in nats on "
        "the target surface of `corpus.md`.",
        "`LOFO` = the mean regret (dense and sparse averaged) when on/off is chosen per family "
        "on the other six (`kept on`: for how many); `helps on` = the families whose regret "
        "(dense + sparse) is lower with the term on; `earns` = switching it off",
        "raises the mean regret (dense and sparse averaged) and the LOFO choice keeps it on for "
        "most families.",
        "",
        "| ablation | " + " | ".join(families) + " | dense mean | sparse mean | dense cov | "
        "sparse cov | LOFO | kept on | helps on | earns its place |",
        "|---|" + "---|" * (len(families) + 8),
    ]
    base = results["defaults"]

    def mean(table: dict[str, dict[str, float]], key: str) -> float:
        return float(np.nanmean([table[f][key] for f in families]))

    base_both = 0.5 * (mean(base, "dense") + mean(base, "sparse"))
    for name, table in results.items():
        cells = [f"{table[f]['dense']:.4f} / {table[f]['sparse']:.4f}" for f in families]
        both = 0.5 * (mean(table, "dense") + mean(table, "sparse"))
        if name == "defaults":
            verdict, chosen, kept, helps = "–", "–", "–", "–"
        else:
            better = sum(
                base[f]["dense"] + base[f]["sparse"] < table[f]["dense"] + table[f]["sparse"]
                for f in families
            )
            helps = f"{better}/{len(families)}"
            chosen_value, kept_on = lofo(base, table)
            chosen, kept = f"{chosen_value:.4f}", f"{kept_on}/{len(families)}"
            verdict = "yes" if both > base_both and 2 * kept_on > len(families) else "no"
        lines.append(
            f"| {name} | " + " | ".join(cells)
            + f" | {mean(table, 'dense'):.4f} | {mean(table, 'sparse'):.4f}"
            + f" | {mean(table, 'dense_cov'):.2f} | {mean(table, 'sparse_cov'):.2f} | {chosen} | {kept}"
            + f" | {helps} | {verdict} |"
        )  # fmt: skip
    lines += ["", "Cells: dense / sparse regret (a fit that failed is scored as the target's worst "
              "configuration, as a refusal)."]  # fmt: skip
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
    parser.add_argument(
        "--render-only", action="store_true", help="re-render the .md from the committed .json"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    names = ["defaults", *(args.only or [n for n in ABLATIONS if n != "defaults"])]
    if args.render_only:
        results = json.loads(args.out.with_suffix(".json").read_text())
    else:
        results = {name: score(name, args.data) for name in names}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(render(results, argv, time.perf_counter() - started))
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out.with_suffix('.md')} and .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

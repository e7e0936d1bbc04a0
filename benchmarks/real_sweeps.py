"""Regenerate issue 25's benchmark tables in one go: Marin, Step Law dense and MoE, the scenario suite.

Each benchmark runs as its own process (its table under ``benchmarks/results/``, its progress on
the terminal), ours beside the null and the baselines of ``benchmarks/baselines.py``:

- ``marin_sweeps.py --data-dir DIR`` -> ``results/marin_sweeps.md`` (seconds);
- ``steplaw_dense.py --data-dir DIR`` -> ``results/steplaw_dense.md`` (about 35 s today);
- ``steplaw_moe.py --data-dir DIR`` -> ``results/steplaw_moe.md`` (about 10 s);
- ``scenarios.py`` -> ``results/scenarios.md`` (about 60 s; needs no data).

Usage::

    python benchmarks/real_sweeps.py --data-dir ../shared/data            # the engine importable here
    python benchmarks/real_sweeps.py --data-dir ../shared/data --engine HEAD  # a clean export of HEAD

``--engine REV`` runs every benchmark on ``git archive REV transfersearch`` (put first on
``PYTHONPATH``), so that others' uncommitted edits of the engine do not leak into the tables; the
tables then name that commit. ``--only marin_sweeps,scenarios`` runs a subset.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: name -> whether it reads --data-dir; run in this order (the quick real sweeps first).
BENCHMARKS = {
    "marin_sweeps": True,
    "steplaw_moe": True,
    "steplaw_dense": True,
    "scenarios": False,
}


def export_engine(revision: str, folder: Path) -> str:
    """Write ``git archive <revision> transfersearch`` under ``folder``; return the short commit."""
    short = subprocess.run(
        ["git", "rev-parse", "--short", revision],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", short, "transfersearch"], capture_output=True, check=True, cwd=ROOT
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (folder / "EXPORTED_COMMIT").write_text(short + "\n")  # read by provenance.commit()
    return short


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="the folder of the CSVs")
    parser.add_argument(
        "--engine",
        metavar="REV",
        help="run on a clean export of this commit's transfersearch/ (default: the importable one)",
    )
    parser.add_argument(
        "--only", default=",".join(BENCHMARKS), help="comma-separated benchmarks (default: all)"
    )
    args = parser.parse_args(argv)
    chosen = [name for name in args.only.split(",") if name]
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; choose from {list(BENCHMARKS)}")
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="transfersearch-engine-") as folder:
        if args.engine:
            commit = export_engine(args.engine, Path(folder))
            env["PYTHONPATH"] = os.pathsep.join(
                [folder, *filter(None, [env.get("PYTHONPATH", "")])]
            )
            print(f"engine: a clean export of {commit} in {folder}", flush=True)
        failures = []
        started = time.perf_counter()
        for name in chosen:
            command = [sys.executable, str((HERE / f"{name}.py").relative_to(ROOT))]
            if BENCHMARKS[name]:
                command += ["--data-dir", os.path.relpath(args.data_dir.resolve(), ROOT)]
            print(f"== {name}: {' '.join(command[1:])}", flush=True)
            begun = time.perf_counter()
            code = subprocess.run(command, env=env, cwd=ROOT, check=False).returncode
            seconds = time.perf_counter() - begun
            print(f"== {name}: exit {code} after {seconds:.0f} s", flush=True)
            if code:
                failures.append(name)
    print(
        f"done in {time.perf_counter() - started:.0f} s; tables in {HERE / 'results'}"
        + (f"; FAILED: {failures}" if failures else ""),
        flush=True,
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""The lines at the top of every committed benchmark table: the command, the date, the engine's commit."""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The engine's commit: the checked-out one, with ``+dirty`` when the engine's files differ.

    An engine imported from elsewhere (``PYTHONPATH`` set to a clean export, ``git archive HEAD
    transfersearch``, with the commit written to ``EXPORTED_COMMIT`` beside it) is reported as that.
    """
    import transfersearch

    package = Path(transfersearch.__file__).resolve().parent
    if package.parent != ROOT:
        marker = package.parent / "EXPORTED_COMMIT"
        if marker.exists():
            return f"{marker.read_text().strip()} (a clean export of it, {package.parent})"
        return f"imported from {package} (not this checkout)"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "transfersearch"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + ("+dirty (uncommitted changes under transfersearch/)" if dirty else "")


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran this script, relative to the repository root."""
    args = sys.argv if argv is None else argv
    script = Path(args[0]).resolve()
    try:
        shown = str(script.relative_to(ROOT))
    except ValueError:
        shown = args[0]
    return " ".join(["python", shown, *(shlex.quote(a) for a in args[1:])])


def header(title: str, argv: list[str] | None = None) -> list[str]:
    """A table's first lines: its title, the command, the date, the commit and the machine's load."""
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [
        f"# {title}",
        "",
        f"Command: `{command_line(argv)}`  ",
        f"Date: {today}; engine: commit {commit()}; "
        f"{os.cpu_count()} CPUs, 1-minute load {os.getloadavg()[0]:.1f} at the start.",
        "",
    ]


#: Where a results file's hand-written readings begin: kept when the table is regenerated.
READING = "Reading (by hand"


def kept_readings(path: Path) -> str:
    """The hand-written readings at the end of an existing results file (from the first
    paragraph starting with :data:`READING`), to append after a regenerated table; "" if none."""
    if not path.exists():
        return ""
    text = path.read_text()
    at = text.find("\n" + READING)
    return "" if at < 0 else "\n" + text[at + 1 :].rstrip("\n") + "\n"


def holdout_arguments(doc: str, default_out: Path, argv: list[str] | None) -> argparse.Namespace:
    """The hold-out scripts' command line: ``--data-dir`` (the folder of the CSVs) and ``--out``
    (the markdown table, ``default_out`` unless given); ``doc``'s first line describes it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="the folder of the CSVs")
    parser.add_argument("--out", default=str(default_out), help="markdown table to write")
    return parser.parse_args(argv)


def write_holdouts(
    out: str,
    title: str,
    shown: list[str] | None,
    doc: str,
    results: dict[str, list[dict[str, float]]],
    columns: tuple[list[str], str, str],
    cell: str,
    unit: str,
    seconds: float,
) -> None:
    """Write and print a hold-out benchmark's report: the header, the script's description
    (``doc`` between its first paragraph and ``Usage:``), then per protocol (and over every
    target) each method's mean and on how many targets ours is at or below the null.

    ``columns`` is (the methods, ours, the null); ``cell`` formats a mean (``"{:.4f}"``)."""
    methods, ours, null = columns
    rows = list(results.items())
    rows.append(("**every target**", [r for found in results.values() for r in found]))
    lines = [*header(title, shown), doc.split("\n\n", 1)[1].split("Usage:")[0].strip(), ""]
    lines += [
        f"| protocol | {unit} | " + " | ".join(methods) + " | ours ≤ null |",
        "|---|---:|" + "---:|" * (len(methods) + 1),
    ]
    for name, found in rows:
        means = " | ".join(cell.format(sum(r[m] for r in found) / len(found)) for m in methods)
        wins = sum(r[ours] <= r[null] for r in found)
        lines.append(f"| {name} | {len(found)} | {means} | {wins}/{len(found)} |")
    lines += ["", f"Whole run {seconds:.0f} s.", ""]
    readings = kept_readings(Path(out))  # the hand-written readings survive a re-run
    Path(out).write_text("\n".join(lines).rstrip("\n") + "\n" + readings)
    print("\n".join(lines))

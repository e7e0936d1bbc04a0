"""The ``demo`` subcommand, registered with the CLI through the ``transfersearch.commands``
entry point; the application (and its frameworks) is imported only when the command runs."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from transfersearch.errors import TransferSearchError

__all__ = ["add_command"]


def add_command(subparsers: Any) -> None:
    """Add ``demo`` to the CLI's subparsers (``argparse``'s ``add_subparsers()`` object)."""
    demo = subparsers.add_parser(
        "demo",
        help="train a real proxy ladder and transfer it to a 4x wider target (~4 min CPU)",
        description="Sweep base lr and tau_epoch with Optuna on a ladder of small character-level "
        "models trained on Python's standard library, fit how the optimum moves with width and "
        "data, extrapolate to a target 4x wider with 8x more data, and measure the regret there "
        "of transfersearch, copying the best proxy, and muP with weight decay held fixed.",
    )
    demo.add_argument(
        "--out",
        default="transfersearch-demo",
        metavar="DIR",
        help="output folder: study.db, summary.json, report.png "
        "(default: ./transfersearch-demo; re-running resumes the study)",
    )
    demo.add_argument("--full", action="store_true", help="a bigger ladder and target (longer)")
    demo.add_argument(
        "--quick",
        action="store_true",
        help="a tiny ladder for tests (seconds; the numbers mean little)",
    )
    demo.add_argument(
        "--device",
        choices=("cpu", "cuda", "auto"),
        default="auto",
        help="where to train (default: auto = cuda if available)",
    )
    demo.add_argument(
        "--trials",
        type=int,
        default=None,
        metavar="N",
        help="proxy trials in total (default depends on the mode)",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the sweep (default: 0)")
    demo.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Run the demo with the parsed arguments; 0 on success, 1 when it could not finish."""
    if args.seed < 0:
        raise TransferSearchError(
            f"`--seed` must be a non-negative integer, but got --seed {args.seed}. Write e.g. "
            "--seed 0."
        )
    try:
        app = importlib.import_module("transfersearch_demo.app")
    except ImportError as exc:
        raise TransferSearchError(
            f"the demo needs torch, optuna, matplotlib and tqdm: pip install "
            f"'transfersearch[demo]' ({exc})."
        ) from None
    result = app.run(
        out=Path(args.out),
        full=args.full,
        quick=args.quick,
        device=args.device,
        trials=args.trials,
        seed=args.seed,
    )
    return 0 if result is not None else 1

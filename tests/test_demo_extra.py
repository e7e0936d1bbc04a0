"""The ``[demo]`` extra holds what the README's next steps after the demo use (issue 27 item 6):
``report --html`` (plotly), ``study.trials_dataframe()`` (pandas), ``report`` (matplotlib)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_demo_extra_covers_the_next_steps() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    demo = _names(extras["demo"])
    assert _names(extras["plot"]) <= demo  # report.png and report --html
    assert {"optuna", "torch", "pandas"} <= demo  # the sweep, the demo, trials_dataframe()

"""The README's core snippet runs as written, and its first lines are the two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_search_space_snippet_runs_and_inverts() -> None:
    text = README.read_text()
    section = text[text.index("## The search space") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    space, hp = namespace["space"], namespace["hp"]
    back = space.coordinates(hp, hp.scale)  # type: ignore[attr-defined]
    assert back == pytest.approx({"base_lr": 3e-3, "tau_epoch": 1.0})


def test_readme_starts_with_the_demo_and_the_ci_test_command() -> None:
    lines = README.read_text().splitlines()
    block = lines[lines.index("```bash") + 1 : lines.index("```bash") + 3]
    assert "transfersearch demo" in block[0]
    test_command = block[1].split("&& ", 2)[2].split("#")[0].strip()
    ci = (README.parent / ".ci" / "run").read_text()
    assert test_command in ci

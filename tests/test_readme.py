"""The README's first lines are the two commands, it fits on a screen, and the search space's
snippet (moved from the README to docs/space.md) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SPACE_PAGE = README.parent / "docs" / "space.md"
#: A newcomer's screen (issue 49 item 12): what it does, the two commands, one example, where next.
README_MAX_LINES = 80


def test_search_space_snippet_runs_and_inverts() -> None:
    text = SPACE_PAGE.read_text()
    section = text[text.index("# The search space") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "docs/space.md", "exec"), namespace)
    space, hp = namespace["space"], namespace["hp"]
    back = space.coordinates(hp, hp.scale)  # type: ignore[attr-defined]
    assert back == pytest.approx({"base_lr": 3e-3, "tau_epoch": 1.0})


def _first_commands() -> list[str]:
    """The README's first code block: its two commands, one line each (comments cut off)."""
    lines = README.read_text().splitlines()
    start = lines.index("```bash")
    block = lines[start + 1 : lines.index("```", start + 1)]
    return [line.split("#")[0].strip() for line in block]


def test_readme_starts_with_the_demo_and_the_test_command() -> None:
    main_job, tests = _first_commands()
    assert main_job.startswith("pip install ") and main_job.endswith("&& transfersearch demo")
    assert tests.startswith("pip install ") and tests.endswith("python -m pytest -q")
    # hydra-optuna-sweeper pins optuna<3: without --no-deps pip would downgrade Optuna, and
    # without it at all integrations/hydra.py fails mypy (issue 19, item 1).
    assert "pip install --no-deps hydra-optuna-sweeper==" in tests


#: The further CI step that runs the end-to-end tests the README's command skips.
SLOW_STEP = "python -m pytest -q -m slow"


def test_the_test_command_skips_the_slow_tests_and_ci_runs_them_after() -> None:
    """pyproject's pytest options deselect ``slow`` (the README's command stays under ~8 minutes);
    ``-m slow`` given later on the command line selects only them (pytest keeps the last -m)."""
    pyproject = (README.parent / "pyproject.toml").read_text()
    assert 'addopts = ["-m", "not slow"]' in pyproject
    section = README.read_text().split("## Slow end-to-end tests", 1)[1]
    assert SLOW_STEP in section and "further step" in " ".join(section.split())


def test_ci_runs_the_readme_test_command_verbatim_in_a_fresh_venv() -> None:
    """A green CI means the README works: .ci/run creates a fresh virtual environment, runs the
    README's test command exactly as written, and installs no Python package besides it (it may add
    only system services, such as the PostgreSQL server)."""
    _, tests = _first_commands()
    ci = [
        line.strip()
        for line in (README.parent / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert tests in ci, "the README's test command is not a line of .ci/run"
    # The README's command skips the end-to-end tests (pyproject's addopts: -m "not slow"); CI
    # runs them as the further step the README shows, its last command (its status).
    assert ci[ci.index(tests) + 1 :] == [SLOW_STEP], (
        f"after the README's test command .ci/run must run only {SLOW_STEP!r}"
    )
    assert any(re.fullmatch(r"python3 -m venv \S+", line) for line in ci[: ci.index(tests)])
    assert any(line.startswith("source ") and "/bin/activate" in line for line in ci)
    installs = [line for line in ci if re.search(r"\bpip\b|\buv\b|\bconda\b", line)]
    assert installs == [tests], (
        f"Python packages installed outside the README's command: {installs}"
    )


def test_readme_fits_on_a_screen_and_says_where_to_go_next() -> None:
    """The README is short; the rest lives in docs/ pages it links to, each of which exists (the
    Muon page is linked as written by the Muon work) and defines the words the README uses."""
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, len(text.splitlines())
    links = re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]+)?\)", text)
    missing = [link for link in links if not (README.parent / link).is_file()]
    assert missing in ([], ["docs/muon.md"]), missing
    assert "Muon for hidden matrices beside AdamW: [docs/muon.md](docs/muon.md)" in text
    for word in ("**ladder**", "**rung**", "90% interval", "outside the range you swept"):
        assert word in text, word
    assert "python -m pytest -q -m slow" in text.split("## Slow end-to-end tests", 1)[1]

"""The docs site: `mkdocs build --strict` (mkdocs-material + mkdocstrings) builds every page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("material")

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mkdocs_build_strict_renders_the_pages_and_the_api(tmp_path: Path) -> None:
    site = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for page in ("getting-started", "concepts", "science", "integrations/hydra", "design"):
        assert (site / page / "index.html").is_file(), page
    api = (site / "api" / "index.html").read_text()
    for name in (
        "TransferSpace",
        "TransferSampler",
        "stored_space",
        "plot_walk_forward",
        "publish",
    ):
        assert name in api, name
    science = (site / "science" / "index.html").read_text()
    assert "Wang" in science and "Busbridge" in science
    start = re.sub(r"<[^>]+>", "", (site / "getting-started" / "index.html").read_text())
    assert "transfersearch demo" in start and "python -m pytest -q" in start

"""The wheel ships the core, the integrations subpackage and py.typed."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_integrations_as_a_subpackage(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
    )
    wheel = next(tmp_path.glob("transfersearch-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "transfersearch/__init__.py" in names
    assert "transfersearch/py.typed" in names
    assert "transfersearch/integrations/__init__.py" in names
    assert not any(n.startswith("integrations/") for n in names)
    # installed (not editable) into a throwaway target, the subpackage imports from there
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import transfersearch.integrations as i;"
        "print(i.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert str(target) in out.stdout

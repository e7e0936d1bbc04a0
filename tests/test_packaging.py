"""The wheel ships the core, the integrations subpackage and py.typed; the versions the project
supports are declared as ranges, the installed ones lie in them, and the oldest are pinned for CI."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
OLDEST = ROOT / ".ci" / "constraints-oldest.txt"


def _requirements() -> list[Requirement]:
    """Every requirement pyproject.toml declares for the package and its extras, but ``dev``'s
    (the tools, whose newest release the README's command takes)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {k: v for k, v in project["optional-dependencies"].items() if k != "dev"}
    lines = [*project["dependencies"], *(line for group in extras.values() for line in group)]
    return [Requirement(line) for line in lines]


def declared_range(name: str) -> SpecifierSet:
    """The versions of ``name`` pyproject.toml supports (one range, however many extras name it)."""
    ranges = {str(r.specifier) for r in _requirements() if canonicalize_name(r.name) == name}
    assert len(ranges) == 1, f"{name} is declared with different ranges: {ranges}"
    return SpecifierSet(ranges.pop())


def lower_bound(spec: SpecifierSet) -> Version:
    (low,) = [Version(s.version) for s in spec if s.operator == ">="]
    return low


def test_every_dependency_is_a_range_with_a_lower_and_an_upper_bound() -> None:
    """A release outside the range is never installed, so it cannot break the tests; the lower
    bound is what .ci/run-oldest tests (issue 49, item 1)."""
    for requirement in _requirements():
        operators = sorted(s.operator for s in requirement.specifier)
        assert operators == ["<", ">="], f"{requirement}: declare `>=oldest,<next-major`"
        declared_range(canonicalize_name(requirement.name))  # one range per package


def test_the_installed_versions_lie_in_the_declared_ranges() -> None:
    """What pip resolved for this environment is what the project says it supports: the README's
    command installs the newest versions the ranges allow, and the tests run on them."""
    outside = []
    for requirement in _requirements():
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an extra this environment lacks
        if not requirement.specifier.contains(installed, prereleases=True):
            outside.append(f"{requirement.name} {installed} (declared {requirement.specifier})")
    assert not outside, f"installed outside the declared ranges: {outside}"


def test_the_oldest_pins_are_the_declared_lower_bounds() -> None:
    """.ci/constraints-oldest.txt pins the core's and Optuna's lower bounds, each exactly the
    range's, and .ci/run-oldest installs against it and runs the tests."""
    pins = {}
    for line in OLDEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = Version(version)
    assert {"numpy", "scipy", "optuna"} <= set(pins)
    for name, version in pins.items():
        assert lower_bound(declared_range(name)) == version, f"{name}: pin {version}"
    script = (ROOT / ".ci" / "run-oldest").read_text()
    assert re.search(r"pip install -c \.ci/constraints-oldest\.txt -e '\.\[[\w,]+\]'", script)
    assert "python -m pytest" in script


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

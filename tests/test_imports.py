"""The core stays free of optuna, ray and torch."""

from __future__ import annotations

import subprocess
import sys


def test_import_transfersearch_does_not_import_frameworks() -> None:
    code = (
        "import sys, transfersearch, transfersearch.rules, transfersearch.space;"
        "import transfersearch.ladder;"
        "bad = [m for m in ('optuna', 'ray', 'torch') if m in sys.modules];"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, f"core imported {result.stdout.strip()} {result.stderr}"


def test_integrations_subpackage_is_shipped() -> None:
    import transfersearch.integrations as integrations

    assert integrations.__name__ == "transfersearch.integrations"


def test_the_public_names_stay_functions_after_every_module_is_imported() -> None:
    """A submodule named like a public function (the old ``transfersearch.extrapolate``) would
    replace ``ts.extrapolate`` with the module once anything imported it."""
    code = (
        "import pkgutil, importlib, transfersearch as ts;"
        "[importlib.import_module(m.name) for m in pkgutil.walk_packages(ts.__path__, 'transfersearch.')"
        " if not m.name.startswith('transfersearch.integrations')];"
        "bad = [n for n in ts.__all__ if type(getattr(ts, n)).__name__ == 'module' and n != 'rules'];"
        "print(','.join(bad)); raise SystemExit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, f"modules shadow public names: {result.stdout} {result.stderr}"


def test_the_space_names_keep_their_import_path_after_the_split() -> None:
    """space.py was split into _distributions, _coordinates and _hyperparameters (issue 28): the
    names users and adapters import from ``transfersearch.space`` are still there, the same
    objects as ``ts.Float`` etc., and the private modules say in ``__all__`` what they share."""
    import transfersearch as ts
    from transfersearch import _coordinates, _distributions, _hyperparameters, space

    for name in space.__all__:
        assert hasattr(space, name), name
    for name in ("Float", "Int", "Choice", "Hyperparameters", "TransferSpace"):
        assert getattr(ts, name) is getattr(space, name)
    assert (
        space.Float is _distributions.Float
        and space.Hyperparameters is _hyperparameters.Hyperparameters
    )
    assert space.base_point is _coordinates.base_point
    for private in (_coordinates, _distributions, _hyperparameters):
        assert all(not name.startswith("_") and hasattr(private, name) for name in private.__all__)

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

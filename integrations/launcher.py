"""Worker processes for one Optuna study, and the storages they share.

.. code-block:: python

    from transfersearch.integrations.launcher import launch_workers, make_storage

    # train_proxy.py defines objective(trial) and a module-level `sampler = TransferSampler(...)`
    launch_workers("sqlite:///proxy.db", "proxy", "train_proxy.py:objective", 120, gpus="auto")
    study = optuna.load_study(study_name="proxy", storage=make_storage("sqlite:///proxy.db"))

or, from a shell, ``python -m transfersearch.integrations.launcher workers --study-name proxy
--objective train_proxy:objective --total-trials 120`` (``python -m
transfersearch.integrations.optuna workers ...`` is the same command). ``pip install
'transfersearch[launcher]'``. How trials are claimed, when a dead worker's trial is retried, and
where the launcher's throughput goes: ``docs/integrations/launcher.md``.
"""

from __future__ import annotations

try:
    import optuna  # noqa: F401  (the launcher's storages are Optuna's)
except ImportError as exc:  # pragma: no cover - exercised only without optuna
    raise ImportError(
        "transfersearch.integrations.launcher needs Optuna: pip install "
        f"'transfersearch[launcher]' ({exc})."
    ) from exc

from transfersearch.integrations._launcher_storage import make_storage
from transfersearch.integrations._launcher_workers import (
    STORAGE_ENV,
    WorkerResult,
    WorkerSlot,
    detect_gpus,
    launch_workers,
    lease_units,
    main,
    plan_slots,
    resolve_packing,
    run_worker,
)

__all__ = [
    "STORAGE_ENV",
    "WorkerResult",
    "WorkerSlot",
    "detect_gpus",
    "launch_workers",
    "lease_units",
    "main",
    "make_storage",
    "plan_slots",
    "resolve_packing",
    "run_worker",
]

if __name__ == "__main__":
    import sys

    # Through the canonical module, so that the objective's module and the CLI share one class.
    from transfersearch.integrations.launcher import main as canonical_main

    sys.exit(canonical_main())

"""Worker processes for one Optuna study: one per GPU slot, small rungs packed, CPU fallback.

``launch_workers`` (and ``python -m transfersearch.integrations.launcher workers``) starts one
process per *slot*. A GPU gets as many slots as the most packable rung allows (``trials_per_gpu``;
default :func:`transfersearch.resources.trials_per_gpu`: the most expensive rung alone, a rung costing at most
1/k of it k per GPU, at most ``max_per_gpu``). Every process sees exactly one GPU through
``CUDA_VISIBLE_DEVICES``. Before its objective runs, a trial takes ``capacity / k_rung`` units of
its GPU from a file-lock semaphore shared by the processes on that GPU, so k small-rung trials
share a GPU while a top-rung trial waits until it has the GPU to itself. Without GPUs the
launcher starts ``cpu_workers`` plain processes.

All workers share the study through its storage: each counts finished, running and queued
trials there and stops when the study holds ``n_trials`` (complete, pruned, or failed by the
objective), after waiting for running trials whose worker might have died so their retries are run.
``n_trials`` is the study's total, not a number to add (``--total-trials``; ``--add-trials`` adds):
a new trial is created only under a study-wide lock while the count is short of it, so the pool
stops at exactly ``n_trials``, and a queued trial is claimed by one conditional update, so no two
workers run it (see :class:`~transfersearch.integrations._launcher_shim.ClaimingRDBStorage`). Many workers
are where the sampler's law gating matters: a worker about to start a law-using rung while the
trials that would open its law still run elsewhere gets a cheaper rung instead (user attribute
``detoured_from``; see :mod:`transfersearch.integrations.optuna`). ``n_trials`` counts those
detours, so give it a few trials more than the budgets' sum. Machines join the same study by
running the launcher against the same PostgreSQL URL, e.g. on every node::

    export TRANSFERSEARCH_STORAGE=postgresql://tuner:secret@db-host:5432/proxy
    python -m transfersearch.integrations.launcher workers --study-name proxy \\
        --objective train_proxy:objective --total-trials 400 --gpus auto

The storage URL (with its password) travels to the workers in the environment variable
``TRANSFERSEARCH_STORAGE``, never on a command line that ``ps`` shows; ``--storage`` is read from
it when left out.

Dead workers: every trial names the worker process that runs it (host, pid) from the moment it
is created or claimed. A trial whose worker on this host is gone is failed and retried (by
exactly one worker) at the next trial any worker starts; a live worker's trial is never failed,
however late its heartbeat on a loaded machine; any other trial (another host's worker's, or a
live process's that is no worker, e.g. a notebook's ``study.ask()`` never told) is failed once its
heartbeat, or its start when it sent none, is older than the grace period; a trial that names no
owner (Optuna's plain storage) is left alone, and the progress line says which and why. A worker that loses a race on the storage (another worker failed its trial meanwhile) logs it
and goes on with the next trial. Ctrl-C (SIGINT to the process group, or to the launcher, which
passes it on) interrupts the running objectives: each trial is recorded as interrupted and
re-enqueued (:class:`TransferSampler` ``after_trial``), so the next start runs it first.

The objective module (``module:function`` or ``path/to/file.py:function``) must be importable
without side effects; the launcher and every worker import it. Its module-level ``sampler``
(a :class:`TransferSampler`) and optional ``pruner`` are used for the study, and the objective
calls ``sampler.suggest(trial)``. Each worker reseeds the sampler so workers do not repeat one
another's draws: from a seed derived from the sampler's ``seed``, the trials the study held at
launch and the worker's index where the sampler has a seed, else from fresh entropy.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fcntl
import importlib
import importlib.util
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from transfersearch.errors import (
    Allowed,
    Interval,
    Options,
    TransferSearchError,
    check_int,
    check_table,
)
from transfersearch.experimental import ExperimentalWarning, experimental
from transfersearch.redact import redact_url
from transfersearch.resources import trials_per_gpu as packing_by_cost

if TYPE_CHECKING:
    import optuna

__all__ = [
    "STORAGE_ENV",
    "WorkerResult",
    "WorkerSlot",
    "detect_gpus",
    "launch_workers",
    "lease_units",
    "main",
    "plan_slots",
    "resolve_packing",
]

logger = logging.getLogger("transfersearch.integrations.launcher.workers")

#: The environment variable that carries the storage URL (and its password) to the workers.
STORAGE_ENV = "TRANSFERSEARCH_STORAGE"
#: Prefix of the launcher's GPU lock directories (``<prefix><launcher pid>-<random>``).
LOCK_DIR_PREFIX = "transfersearch-gpu-locks-"
#: Storage errors in a row after which a worker gives up: one is a race lost to another worker
#: (retried at once); this many in a row means the storage itself is failing.
MAX_STORAGE_ERRORS_IN_A_ROW = 5


@dataclass(frozen=True)
class WorkerSlot:
    """One worker process: its index, the GPU it sees (None: CPU) and its slot on that GPU."""

    index: int
    gpu: str | None
    slot: int

    @property
    def cuda_visible_devices(self) -> str:
        """The value of ``CUDA_VISIBLE_DEVICES`` for this worker ("" hides every GPU)."""
        return "" if self.gpu is None else self.gpu


@dataclass(frozen=True)
class WorkerResult:
    """How one worker process ended."""

    slot: WorkerSlot
    returncode: int
    log: Path | None


# ----------------------------------------------------------------------------------------------
# GPUs and slots
# ----------------------------------------------------------------------------------------------
def detect_gpus() -> list[str]:
    """The GPU ids this machine offers: ``CUDA_VISIBLE_DEVICES`` if set, else ``nvidia-smi -L``,
    else the ``/dev/nvidia<N>`` device files, else ``torch.cuda`` if torch is already imported
    (importing it only to count GPUs would cost seconds per launch), else none."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            if out.returncode == 0:
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("GPU ")]
                return [str(i) for i in range(len(lines))]
    devices = [p.name for p in Path("/dev").glob("nvidia*") if p.name[6:].isdigit()]
    if devices:
        return [str(i) for i in range(len(devices))]
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            return [str(i) for i in range(torch.cuda.device_count())]
    return []


def _resolve_gpus(gpus: str | int | Sequence[int | str] | None) -> list[str]:
    if gpus is None or gpus == "auto":
        return detect_gpus()
    if isinstance(gpus, bool):
        raise TransferSearchError(f"`gpus` must be None, 'auto', an int or a list, got {gpus!r}.")
    if isinstance(gpus, int):
        if gpus < 0:
            raise TransferSearchError(f"`gpus` must be >= 0, but got gpus={gpus}.")
        return [str(i) for i in range(gpus)]
    if isinstance(gpus, str) and not gpus.strip():
        return []
    ids = [g.strip() for g in gpus.split(",")] if isinstance(gpus, str) else [str(g) for g in gpus]
    bad = [g for g in ids if not (g.isdigit() or g.startswith(("GPU-", "MIG-")))]
    if bad or (isinstance(gpus, str) and not all(ids)):
        raise TransferSearchError(
            f"`gpus` must be 'auto', a count, or GPU ids as CUDA_VISIBLE_DEVICES takes them "
            f"(indices >= 0 or GPU-/MIG- UUIDs), but got gpus={gpus!r}. For CPU workers give "
            "gpus=0 (--gpus 0)."
        )
    return ids


def resolve_packing(
    trials_per_gpu: int | Mapping[int, int] | None,
    n_rungs: int,
    default: Sequence[int] | None,
) -> tuple[int, ...]:
    """Trials per GPU for each rung (cost order): ``trials_per_gpu`` as given (an int for every
    rung, or a dict rung -> int, others 1), else ``default`` (the cost rule), else one each.

    Raises:
        TransferSearchError: a rung the ladder lacks, a count below 1, or another type.
    """
    if trials_per_gpu is None:
        return tuple(default) if default is not None else (1,) * max(n_rungs, 1)
    if isinstance(trials_per_gpu, int) and not isinstance(trials_per_gpu, bool):
        packing = (trials_per_gpu,) * max(n_rungs, 1)
    elif isinstance(trials_per_gpu, Mapping):
        unknown = [r for r in trials_per_gpu if not 0 <= int(r) < max(n_rungs, 1)]
        if unknown:
            raise TransferSearchError(
                f"`trials_per_gpu` names rungs {unknown}, but the ladder has {n_rungs} rungs "
                f"(0..{n_rungs - 1}, cheapest first)."
            )
        packing = tuple(int(trials_per_gpu.get(r, 1)) for r in range(max(n_rungs, 1)))
    else:
        raise TransferSearchError(
            f"`trials_per_gpu` must be None, an int or a dict rung -> int, got {trials_per_gpu!r}."
        )
    if any(k < 1 for k in packing):
        raise TransferSearchError(f"`trials_per_gpu` must be >= 1, but got {packing}.")
    return packing


def lease_units(packing: Sequence[int]) -> tuple[int, dict[int, int]]:
    """Semaphore capacity per GPU and the units a trial of each rung takes (capacity / k)."""
    capacity = math.lcm(*packing)
    return capacity, {rung: capacity // k for rung, k in enumerate(packing)}


def plan_slots(gpus: Sequence[str], packing: Sequence[int], cpu_workers: int) -> list[WorkerSlot]:
    """One slot per packable trial on every GPU (``max(packing)`` each), or ``cpu_workers`` CPU
    slots when there is no GPU."""
    if gpus:
        per_gpu = max(packing)
        return [
            WorkerSlot(index=g * per_gpu + s, gpu=gpu, slot=s)
            for g, gpu in enumerate(gpus)
            for s in range(per_gpu)
        ]
    if cpu_workers < 1:
        raise TransferSearchError(f"`cpu_workers` must be >= 1, but got {cpu_workers}.")
    return [WorkerSlot(index=i, gpu=None, slot=i) for i in range(cpu_workers)]


class _GpuLease:
    """A counting semaphore of ``capacity`` units per GPU, shared by processes through file locks.

    A trial takes the GPU-wide mutex, then its units: free slot files first, then blocking on
    held ones in order. Holders release without the mutex, so nothing waits in a cycle, and a
    trial that needs the whole GPU stops smaller ones from slipping in while it waits.
    """

    def __init__(self, lock_dir: Path, gpu: str, capacity: int) -> None:
        safe = "".join(c if c.isalnum() else "_" for c in gpu)
        self._mutex = lock_dir / f"gpu-{safe}.mutex"
        self._slots = [lock_dir / f"gpu-{safe}.slot{i}" for i in range(capacity)]

    @contextlib.contextmanager
    def hold(self, units: int) -> Iterator[None]:
        held: dict[int, int] = {}
        mutex = os.open(self._mutex, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            for blocking in (False, True):
                for i, path in enumerate(self._slots):
                    if len(held) == units:
                        break
                    if i in held:
                        continue
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
                    try:
                        fcntl.flock(
                            fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB
                        )
                    except BlockingIOError:
                        os.close(fd)
                        continue
                    held[i] = fd
        finally:
            fcntl.flock(mutex, fcntl.LOCK_UN)
            os.close(mutex)
        try:
            yield
        finally:
            for fd in held.values():
                os.close(fd)


# ----------------------------------------------------------------------------------------------
# Loading the user's objective
# ----------------------------------------------------------------------------------------------
def _load_module(objective: str) -> tuple[ModuleType, str]:
    module_part, sep, function = objective.rpartition(":")
    if not sep or not module_part or not function:
        raise TransferSearchError(
            f"`objective` must be 'module:function' or 'path/to/file.py:function', but got "
            f"{objective!r}."
        )
    try:
        return _import(module_part, objective), function
    except TransferSearchError:
        raise
    except ModuleNotFoundError as exc:
        missing = exc.name or module_part
        if missing == module_part or module_part.startswith(f"{missing}."):
            raise TransferSearchError(
                f"objective module {module_part!r} (from objective={objective!r}) cannot be "
                f"imported: no module {missing!r} on the path ({os.getcwd()!r} and PYTHONPATH). "
                "Run from its folder, or give 'path/to/file.py:function'."
            ) from None
        raise TransferSearchError(
            f"cannot import the objective module {module_part!r}: it imports {missing!r}, which "
            f"is not installed (pip install it). {_VERBOSE_HINT}"
        ) from exc
    except (Exception, SystemExit) as exc:
        # Its own traceback, not ours, is what the user needs: one line here, all with --verbose.
        where = _user_frame(exc)
        first = (str(exc).splitlines() or [""])[0]
        raise TransferSearchError(
            f"cannot import the objective module {module_part!r}: {type(exc).__name__}: {first}"
            f"{where}. {_VERBOSE_HINT}"
        ) from exc


#: Said after an import error's one line: where its traceback is.
_VERBOSE_HINT = "Rerun with --verbose for the traceback."


def _user_frame(exc: BaseException) -> str:
    """`` (at file:line)`` of the innermost traceback frame outside Python's import machinery."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (at {exc.filename}:{exc.lineno})"
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if "importlib" not in f.filename
        and not f.filename.startswith("<frozen")
        and not f.filename.endswith("_launcher_workers.py")
    ]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _import(module_part: str, objective: str) -> ModuleType:
    if module_part.endswith(".py"):
        path = Path(module_part).resolve()
        if not path.is_file():
            raise TransferSearchError(
                f"objective file {str(path)!r} (from objective={objective!r}) does not exist."
            )
        name = f"_transfersearch_objective_{path.stem}"
        if name in sys.modules:
            return sys.modules[name]
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TransferSearchError(f"objective file {str(path)!r} is not a Python module.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module_part)


def _load(objective: str, sampler_attr: str) -> tuple[Callable[..., Any], Any, Any]:
    """The objective function, the module's sampler (or None) and pruner (or None)."""
    module, function = _load_module(objective)
    func = getattr(module, function, None)
    if not callable(func):
        names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        close = difflib.get_close_matches(function, names, n=1)
        hint = f" Did you mean {objective[: -len(function)]}{close[0]}?" if close else ""
        raise TransferSearchError(
            f"{module.__name__!r} has no callable {function!r} (from objective={objective!r})."
            f"{hint}"
        )
    return func, getattr(module, sampler_attr, None), getattr(module, "pruner", None)


# ----------------------------------------------------------------------------------------------
# One worker
# ----------------------------------------------------------------------------------------------
class _Progress:
    """A study's trials counted the way the workers' budget counts them."""

    def __init__(self, study: optuna.Study) -> None:
        from optuna.trial import TrialState

        from transfersearch.integrations._optuna_trials import died, rung_of, told_fail
        from transfersearch.integrations._trial_claims import OWNER_ATTR

        trials = study.get_trials(deepcopy=False)
        retried = {n for t in trials for n in t.system_attrs.get("retry_history", ())}
        self.done = self.running = self.waiting = self.failed = self.interrupted = 0
        #: RUNNING trials that name their worker: the storage fails them if it dies.
        self.owned = 0
        self.per_rung: dict[int, int] = {}
        for trial in trials:
            counted = False
            if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
                counted = True
            elif trial.state == TrialState.FAIL:
                if told_fail(trial) or not (died(trial) or trial.number in retried):
                    counted = True
                    self.failed += 1
            elif trial.state == TrialState.RUNNING:
                self.running += 1
                self.owned += OWNER_ATTR in trial.system_attrs
            elif trial.state == TrialState.WAITING:
                self.waiting += 1
            if counted:
                self.done += 1
                rung = rung_of(trial)
                if rung is not None:
                    self.per_rung[rung] = self.per_rung.get(rung, 0) + 1

    @property
    def claimed(self) -> int:
        """Trials done, running or queued: what the total is measured against."""
        return self.done + self.running + self.waiting


def run_worker(
    storage: str,
    study_name: str,
    objective: str,
    n_trials: int,
    *,
    gpu: str | None = None,
    units: Mapping[int, int] | None = None,
    capacity: int = 1,
    lock_dir: str | None = None,
    sampler_attr: str = "sampler",
    heartbeat_interval: int | None = 10,
    grace_period: int | None = None,
    max_retry: int | None = 3,
    seed: int | None = None,
) -> int:
    """Run trials of one study in this process until the study holds ``n_trials``.

    A new trial is created only while the study holds fewer than ``n_trials`` trials done,
    running or queued, counted under a study-wide lock (:class:`ClaimingRDBStorage`), so a pool of
    workers stops at exactly ``n_trials``; queued trials (enqueued, retries) always run.

    Returns:
        The number of trials this worker ran.

    Raises:
        TransferSearchError: the study does not exist in ``storage``.
    """
    from transfersearch.integrations._launcher_storage import make_storage

    func, sampler, pruner = _load(objective, sampler_attr)
    _reseed(sampler, seed)
    study = _load_study(
        study_name,
        make_storage(
            storage,
            heartbeat_interval=heartbeat_interval,
            grace_period=grace_period,
            max_retry=max_retry,
        ),
        storage,
        sampler=sampler,
        pruner=pruner,
    )
    gated = _gate_new_trials(study, n_trials)
    lease = _GpuLease(Path(lock_dir), gpu, capacity) if gpu is not None and lock_dir else None
    leased = _leased_objective(study, func, lease, units, capacity)
    poll = min(1.0, float(heartbeat_interval or 1))
    return _trial_loop(study, leased, n_trials, gated=gated, poll=poll)


def _reseed(sampler: Any, seed: int | None) -> None:
    """Give this worker's sampler its own random streams: from ``seed`` (the launcher derives
    one per worker) where the sampler takes one, else from fresh entropy."""
    from transfersearch.integrations.optuna import TransferSampler

    if sampler is None:
        return
    if isinstance(sampler, TransferSampler):
        sampler.reseed_rng(seed)
    else:
        sampler.reseed_rng()


def _gate_new_trials(study: optuna.Study, n_trials: int) -> bool:
    """Let the study's storage create a fresh trial only while the study is short of
    ``n_trials`` (:func:`_wanted`, counted under the study-wide lock).

    Far from the total the lock is shared: a worker counts every trial of the study (an upper
    bound of what counts) and the workers registered on it (``_trial_claims.WORKER_KEY``; each creates at
    most one trial at a time), and creates without waiting for the others when the two sum to
    less than the total. Near it the lock is exclusive and the count exact, so the pool still
    stops at exactly ``n_trials``, without serialising every trial's creation.

    Returns:
        Whether the storage is gated: False for one without the claiming RDB backend (a
        journal file), whose worker counts before each trial instead.
    """
    from transfersearch.integrations._launcher_shim import (
        ClaimingRDBStorage,
        count_states,
        study_lock,
    )
    from transfersearch.integrations._optuna_shim import rdb_backend, storage_of, study_id

    backend = rdb_backend(storage_of(study))
    if not isinstance(backend, ClaimingRDBStorage):
        return False
    claiming: ClaimingRDBStorage = backend
    key = study_id(study)
    _register(claiming, key)

    @contextlib.contextmanager
    def gate() -> Iterator[bool]:
        with study_lock(claiming, key, shared=True) as shared:
            if (
                shared
                and sum(count_states(claiming, key).values()) + _workers(claiming, key) < n_trials
            ):
                yield True
                return
        with study_lock(claiming, key):
            yield _wanted(claiming, study, n_trials)

    claiming.trial_gate = gate
    claiming.beats_from_creation = True  # a worker's trial beats from its creation on
    return True


def _register(storage: Any, key: int) -> None:
    """Register this worker on study ``key`` (one write when it starts)."""
    from transfersearch.integrations._trial_claims import WORKER_KEY, owner_record

    owner = owner_record()
    storage.set_study_system_attr(key, f"{WORKER_KEY}{owner['host']}:{owner['pid']}", owner)


def _workers(storage: Any, key: int) -> int:
    """Workers registered on study ``key`` that may still create trials: all but those of this
    host whose process is gone (another host's are counted: their state is unknown)."""
    from transfersearch.integrations._trial_claims import WORKER_KEY, owner_alive

    attrs = storage.get_study_system_attrs(key)
    return sum(
        owner_alive(value) is not False
        for name, value in attrs.items()
        if name.startswith(WORKER_KEY)
    )


def _leased_objective(
    study: optuna.Study,
    func: Callable[..., Any],
    lease: _GpuLease | None,
    units: Mapping[int, int] | None,
    capacity: int,
) -> Callable[[optuna.Trial], Any]:
    """The user's objective, run after recording where it runs (host, pid, visible GPUs) and
    while holding its rung's units of the GPU (``units[rung]``, else ``capacity``: all of it)."""
    from transfersearch.integrations._optuna_shim import set_trial_attrs, system_attrs
    from transfersearch.integrations._optuna_trials import RUNG_ATTR

    where = {
        "worker.host": socket.gethostname(),
        "worker.pid": os.getpid(),
        "worker.cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }

    def leased(trial: optuna.Trial) -> Any:
        try:  # Ctrl-C may land while the attributes are written, before the objective runs
            set_trial_attrs(study, trial, user=where)  # one commit for the three
            if lease is None:
                return func(trial)
            rung = system_attrs(trial).get(RUNG_ATTR)
            need = capacity if units is None or rung is None else units.get(int(rung), capacity)
            with lease.hold(need):
                return func(trial)
        except KeyboardInterrupt:
            # Ctrl-C reaches the whole process group, and the launcher passes it on: a second
            # SIGINT must not cut short Optuna's recording of this trial as interrupted.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            # Optuna logs an interrupted trial as failed, with a traceback: not news to the user
            # who pressed Ctrl-C (the trial is recorded as interrupted and re-enqueued).
            logging.getLogger("optuna.study._optimize").addFilter(lambda r: r.levelno < 30)
            raise

    return leased


def _trial_loop(
    study: optuna.Study,
    objective: Callable[[optuna.Trial], Any],
    n_trials: int,
    *,
    gated: bool,
    poll: float,
) -> int:
    """Run trials (:func:`_next_trial`) until the study needs none from this worker. Dead
    workers' trials are failed by Optuna's ``fail_stale_trials`` before each trial and while
    waiting (the storage's rule: :class:`~transfersearch.integrations._launcher_shim.ClaimingRDBStorage`).

    Returns:
        The number of trials this worker ran.
    """
    ran = errors = 0
    while True:
        try:
            step = _next_trial(study, objective, n_trials, gated=gated, poll=poll)
            if step == "done":
                return ran
            if step == "queued":
                continue  # queued meanwhile (a retry): run it
            if step == "ran":
                ran += 1
            errors = 0
        except Exception as exc:
            # Optuna's optimize raises when the storage refuses this worker's update: another
            # worker failed its trial as stale meanwhile ("Cannot tell a FAIL trial"), or won a
            # race to fail a stale trial. The trial is retried elsewhere; this worker goes on.
            errors += 1
            if errors >= MAX_STORAGE_ERRORS_IN_A_ROW:
                raise
            logger.warning(
                "worker pid %d: a trial ended in a storage error (%s: %s); going on with the "
                "next one",
                os.getpid(),
                type(exc).__name__,
                exc,
            )


#: What one step of a worker did: ran a trial; found one queued meanwhile (run it next);
#: waited for running trials that may be a dead worker's; or found the study needs no more.
_Step = Literal["ran", "queued", "waited", "done"]


def _next_trial(
    study: optuna.Study,
    objective: Callable[[optuna.Trial], Any],
    n_trials: int,
    *,
    gated: bool,
    poll: float,
) -> _Step:
    """One step of a worker: a queued trial first; else a new one if the study is short of
    ``n_trials``; else wait ``poll`` seconds if a running trial may still need a retry."""
    import optuna

    from transfersearch.integrations._launcher_shim import BudgetSpent
    from transfersearch.integrations._optuna_shim import heartbeat_enabled

    # With a gate, the storage counts under the study lock (the only count a trial costs) and
    # refuses with BudgetSpent. A journal storage has no gate: count first (a race may
    # overshoot by a trial).
    if gated or _short(study, n_trials):
        try:
            study.optimize(objective, n_trials=1, catch=(Exception,), gc_after_trial=False)
            return "ran"
        except BudgetSpent:
            pass
    progress = _Progress(study)
    if progress.waiting:
        return "queued"
    if not (progress.owned and heartbeat_enabled(study)):
        return "done"  # nothing running that this storage could fail and retry
    # A running trial's worker may die: wait for its retry. Each wait is bounded: a live worker
    # finishes its trial, a dead one's trial is failed here (its pid) or after the grace period.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    time.sleep(poll)
    return "waited"


def _short(study: optuna.Study, n_trials: int) -> bool:
    """Whether a worker without a gate should run a trial: one is queued, or the study holds
    fewer than ``n_trials`` done, running or queued."""
    progress = _Progress(study)
    return bool(progress.waiting or progress.claimed < n_trials)


def _wanted(backend: Any, study: optuna.Study, n_trials: int) -> bool:
    """Whether the study is short of ``n_trials`` trials done, running or queued. One count per
    state decides unless failed trials straddle the total (a FAIL counts when the objective
    failed it, not when its worker died or it was interrupted): then the trials are read."""
    from optuna.trial import TrialState

    from transfersearch.integrations._launcher_shim import count_states
    from transfersearch.integrations._optuna_shim import study_id

    counts = count_states(backend, study_id(study))
    failed = counts.get(TrialState.FAIL, 0)
    others = sum(counts.values()) - failed
    if others >= n_trials:
        return False
    if others + failed < n_trials:
        return True
    return _Progress(study).claimed < n_trials


def _load_study(
    study_name: str, storage: optuna.storages.BaseStorage, url: str, **kwargs: Any
) -> optuna.Study:
    """``optuna.load_study``; a missing study is an error naming it (and the URL, password
    hidden)."""
    import optuna

    try:
        return optuna.load_study(study_name=study_name, storage=storage, **kwargs)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        close = difflib.get_close_matches(study_name, names, n=1)
        also = f" Did you mean {close[0]!r}?" if close else ""
        raise TransferSearchError(
            f"study {study_name!r} is not in storage {redact_url(url)!r} (it holds "
            f"{len(names)} studies).{also} The 'workers' command creates it; a lone 'worker' "
            "needs an existing study."
        ) from None


# ----------------------------------------------------------------------------------------------
# The launcher
# ----------------------------------------------------------------------------------------------
@experimental("0.1.0")
def launch_workers(
    storage: str,
    study_name: str,
    objective: str,
    n_trials: int,
    *,
    gpus: str | int | Sequence[int | str] | None = None,
    trials_per_gpu: int | Mapping[int, int] | None = None,
    max_per_gpu: int = 4,
    cpu_workers: int | None = None,
    sampler_attr: str = "sampler",
    direction: Literal["minimize", "maximize"] = "minimize",
    heartbeat_interval: int | None = 10,
    grace_period: int | None = None,
    max_retry: int | None = 3,
    env: Mapping[str, str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    progress_interval: float | None = None,
    rungs: str | int | Sequence[int] | None = None,
) -> list[WorkerResult]:
    """Run worker processes on one study until it holds ``n_trials`` finished trials in all.

    Args:
        storage: the storage URL every worker opens (see :func:`make_storage`): SQLite for one
            machine, PostgreSQL for several (run the launcher on each), ``journal:///file.log``.
            Workers get it in the environment (``TRANSFERSEARCH_STORAGE``), not on their
            command line, so a password in it does not show in ``ps``.
        study_name: the study; created (with ``direction``) if it does not exist.
        objective: ``"module:function"`` or ``"path/to/file.py:function"``; the module's
            ``sampler`` (``sampler_attr``) and ``pruner`` attributes configure the study.
        n_trials: the study's total, not a number to add: finished trials the study should hold
            (complete, pruned or failed by the objective; a dead worker's or an interrupted
            trial is retried, not counted). A study that holds them already runs nothing; several
            launchers on one study share the total. Exact on SQLite, PostgreSQL and MySQL
            (trials are created under a study-wide lock); a journal file may end a trial or two
            over.
        gpus: None or "auto" (detect: ``CUDA_VISIBLE_DEVICES``, ``nvidia-smi -L``, torch), an
            int (GPUs 0..n-1), or a list / comma-separated string of ids. No GPU: CPU workers.
        trials_per_gpu: trials of a rung that share one GPU: a dict rung -> k (missing rungs 1),
            an int for all rungs, or None for :func:`transfersearch.resources.trials_per_gpu` of the
            sampler's rung costs.
        max_per_gpu: the cap of the default packing rule.
        cpu_workers: processes without GPUs (default ``min(4, os.cpu_count())``).
        sampler_attr: the module attribute holding the sampler.
        direction: the study's direction if it must be created.
        heartbeat_interval, grace_period, max_retry: dead-worker handling (:func:`make_storage`).
        env: extra environment variables for the workers.
        log_dir: write each worker's output to ``worker-<i>.log`` there (default: inherit).
        timeout: seconds to wait for the workers before terminating them (None: no limit).
        progress_interval: print a progress line (trials done / total, per rung, failures, ETA)
            to stderr every this many seconds, and once at the end (None: print nothing).
        rungs: where the trials this launch adds go (those the study lacks of ``n_trials``):
            ``"largest"`` (the costliest rung), ``"cheapest"``, a rung index, or a list or
            comma-separated string of indices (cost order, 0 the cheapest), spread over them in
            turn; each is enqueued with its rung and gets its coordinates there (from the law
            where it proposes, else the base sampler). None: the planner assigns every trial
            (the rung furthest below its budget, cheapest first). Needs a :class:`TransferSampler`.

    Returns:
        One :class:`WorkerResult` per worker process; none when the study already holds
        ``n_trials`` (a second launcher that is not needed starts no worker).

    Raises:
        TransferSearchError: a bad argument, or the log directory cannot be written.
        KeyboardInterrupt: Ctrl-C; the workers' running trials are recorded as interrupted
            (user attribute ``transfersearch:interrupted``) and re-enqueued for the next start.
    """
    _check_launch(direction, n_trials, cpu_workers, max_per_gpu, timeout, progress_interval)
    gpu_ids = _resolve_gpus(gpus)
    _, sampler, _ = _load(objective, sampler_attr)
    targets = None if rungs is None else resolve_rungs(rungs, sampler)
    packing = _packing(sampler, trials_per_gpu, max_per_gpu)
    capacity, units = lease_units(packing)
    slots = plan_slots(
        gpu_ids, packing, min(4, os.cpu_count() or 1) if cpu_workers is None else cpu_workers
    )
    logs = _log_folder(log_dir)
    study = _study_short_of(storage, study_name, direction, heartbeat_interval, n_trials)
    if study is None:
        return []
    if targets is not None:
        _enqueue_on_rungs(study, n_trials, targets)
    grace_s = None if heartbeat_interval is None else grace_period or 2 * heartbeat_interval
    reporter = _Reporter(study, n_trials, sampler, progress_interval, grace_s)
    lock_dir = _new_lock_dir() if gpu_ids else None
    launch = _WorkerLaunch(
        study_name=study_name, objective=objective, n_trials=n_trials,
        sampler_attr=sampler_attr, heartbeat_interval=heartbeat_interval,
        grace_period=grace_period, max_retry=max_retry, capacity=capacity, units=units,
        lock_dir=lock_dir, seed=_launch_seed(sampler, study), env=_worker_env(storage, env),
    )  # fmt: skip
    workers: list[_Worker] = []
    try:
        for slot in slots:
            workers.append(launch.start(slot, logs))
        return _wait_for(workers, reporter, timeout)
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.terminate()
                worker.process.wait()
        if lock_dir is not None:
            shutil.rmtree(lock_dir, ignore_errors=True)


def _study_short_of(
    storage: str,
    study_name: str,
    direction: Literal["minimize", "maximize"],
    heartbeat_interval: int | None,
    n_trials: int,
) -> optuna.Study | None:
    """The study (created with ``direction`` if new), or None when it holds ``n_trials``
    finished trials already and queues none: then no worker is needed."""
    import optuna

    from transfersearch.integrations._launcher_storage import make_storage

    study = optuna.create_study(
        storage=make_storage(storage, heartbeat_interval=heartbeat_interval),
        study_name=study_name,
        direction=direction,
        load_if_exists=True,
    )
    start = _Progress(study)
    if not start.waiting and start.done >= n_trials:
        logger.info(
            "study %r already holds %d finished trials of the %d asked for; no worker started",
            study_name,
            start.done,
            n_trials,
        )
        return None
    return study


def _launch_seed(sampler: Any, study: optuna.Study) -> int | None:
    """The seed this launch's workers derive theirs from (:func:`worker_seed`): the sampler's
    ``seed`` and the trials the study holds now, so neither two workers nor two launches on one
    study replay one stream; None (fresh entropy per worker) for a sampler without a seed."""
    from transfersearch.integrations.optuna import TransferSampler

    if not isinstance(sampler, TransferSampler) or sampler.planner.seed is None:
        return None
    return worker_seed(sampler.planner.seed, len(study.get_trials(deepcopy=False)))


def worker_seed(seed: int, index: int) -> int:
    """A seed for worker ``index`` (or launch ``index``) derived from ``seed``: the first word
    of ``numpy.random.SeedSequence([seed, index])``, as :func:`~transfersearch.integrations.
    _per_rung.rung_seed` derives a rung's."""
    import numpy as np

    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


#: The words ``rungs=`` takes besides indices: the costliest rung and the cheapest.
RUNG_WORDS = {"largest": -1, "costliest": -1, "top": -1, "cheapest": 0, "smallest": 0}


def resolve_rungs(rungs: str | int | Sequence[int], sampler: Any) -> list[int]:
    """The rung indices ``rungs`` names for the module's :class:`TransferSampler` (see
    :func:`launch_workers`).

    Raises:
        TransferSearchError: the sampler is not a TransferSampler, a word or index the ladder
            has not, or another type; the message lists the rungs.
    """
    from transfersearch.integrations.optuna import TransferSampler

    if not isinstance(sampler, TransferSampler):
        raise TransferSearchError(
            f"rungs={rungs!r} needs the objective module's `sampler` to be a TransferSampler "
            f"(it is {type(sampler).__name__}); leave --rungs out for another sampler."
        )
    ladder = sampler.ladder
    listing = "; ".join(
        f"{i}: " + ", ".join(f"{name}={value:g}" for name, value in scale.items())
        for i, scale in enumerate(ladder)
    )
    fix = (
        f"Give 'largest', 'cheapest' or rung indices 0..{len(ladder) - 1} (cost order: {listing})."
    )
    items: list[Any]
    if isinstance(rungs, str):
        items = [item.strip() for item in rungs.split(",")]
    elif isinstance(rungs, int) and not isinstance(rungs, bool):
        items = [rungs]
    elif isinstance(rungs, Sequence) and rungs:
        items = list(rungs)
    else:
        raise TransferSearchError(f"`rungs` must name rungs, but got rungs={rungs!r}. {fix}")
    chosen = []
    for item in items:
        if isinstance(item, str) and item.lower() in RUNG_WORDS:
            chosen.append(RUNG_WORDS[item.lower()] % len(ladder))
            continue
        text = str(item)
        if isinstance(item, bool) or not text.isdigit() or int(text) >= len(ladder):
            close = difflib.get_close_matches(text.lower(), list(RUNG_WORDS), n=1)
            also = f" Did you mean {close[0]!r}?" if close else ""
            raise TransferSearchError(
                f"`rungs` names {item!r}, which is not a rung of the sampler's ladder.{also} {fix}"
            )
        chosen.append(int(text))
    return chosen


def _enqueue_on_rungs(study: optuna.Study, n_trials: int, targets: Sequence[int]) -> None:
    """Enqueue the trials the study lacks of ``n_trials`` (done, running or queued), each with
    its rung from ``targets`` in turn and no coordinates: the sampler plans them at that rung."""
    missing = n_trials - _Progress(study).claimed
    for i in range(max(0, missing)):
        study.enqueue_trial({}, user_attrs={"rung": targets[i % len(targets)]})
    logger.info(
        "enqueued %d trials on rungs %s for study %r", max(0, missing), targets, study.study_name
    )


def _check_launch(
    direction: str,
    n_trials: int,
    cpu_workers: int | None,
    max_per_gpu: int,
    timeout: float | None,
    progress_interval: float | None,
) -> None:
    """The launcher's scalar arguments, checked against :data:`LAUNCH_ARGUMENTS`."""
    given = {
        "direction": direction,
        "n_trials": n_trials,
        "cpu_workers": cpu_workers,
        "max_per_gpu": max_per_gpu,
        "timeout": timeout,
        "progress_interval": progress_interval,
    }
    check_table(LAUNCH_ARGUMENTS, given)


#: A number of seconds (unbounded: ``math.inf`` waits forever).
_SECONDS = Interval(Real, 0, None, closed="neither", finite=False)
#: What the launcher's scalar arguments may be.
LAUNCH_ARGUMENTS: Mapping[str, Allowed] = {
    "direction": Allowed(Options("minimize", "maximize")),
    "n_trials": Allowed(Interval(Integral, 1), fix="The study's total, e.g. n_trials=400."),
    "cpu_workers": Allowed(None, Interval(Integral, 1), fix="None: min(4, CPU cores)."),
    "max_per_gpu": Allowed(Interval(Integral, 1), fix="E.g. max_per_gpu=4."),
    "timeout": Allowed(None, _SECONDS, fix="A number of seconds, or None for no limit."),
    "progress_interval": Allowed(None, _SECONDS, fix="A number of seconds, or None for none."),
}


def _packing(
    sampler: Any, trials_per_gpu: int | Mapping[int, int] | None, max_per_gpu: int
) -> tuple[int, ...]:
    """Trials per GPU for each rung of the module's sampler (:func:`resolve_packing`; the cost
    rule of a :class:`TransferSampler`'s rungs by default; one rung for another sampler)."""
    from transfersearch.integrations.optuna import TransferSampler

    default_packing = None
    n_rungs = 1
    if isinstance(sampler, TransferSampler):
        n_rungs = len(sampler.ladder)
        default_packing = packing_by_cost(sampler.planner.costs, max_per_gpu)
    return resolve_packing(trials_per_gpu, n_rungs, default_packing)


def _worker_env(storage: str, env: Mapping[str, str] | None) -> dict[str, str]:
    """The workers' environment: the launcher's, ``env``, the storage URL (not on a command
    line ``ps`` shows) and the launcher's folder first on ``PYTHONPATH`` (the objective's)."""
    base_env = {**os.environ, **(env or {}), STORAGE_ENV: storage}
    paths = [os.getcwd(), *filter(None, base_env.get("PYTHONPATH", "").split(os.pathsep))]
    base_env["PYTHONPATH"] = os.pathsep.join(paths)
    return base_env


@dataclass(frozen=True)
class _Worker:
    """A started worker process, its slot and its log file (None: output inherited)."""

    slot: WorkerSlot
    process: subprocess.Popen[bytes]
    log: Path | None


@dataclass(frozen=True)
class _WorkerLaunch:
    """What the workers of one launch share: the ``worker`` command's options and the
    environment; :meth:`start` adds a slot's GPU (``--gpu``, ``CUDA_VISIBLE_DEVICES``)."""

    study_name: str
    objective: str
    n_trials: int
    sampler_attr: str
    heartbeat_interval: int | None
    grace_period: int | None
    max_retry: int | None
    capacity: int
    units: dict[int, int]
    lock_dir: str | None
    seed: int | None
    env: Mapping[str, str]

    def command(self, slot: WorkerSlot) -> list[str]:
        """The command line of the worker on ``slot`` (no storage URL: that is in the env)."""
        heartbeat = self.heartbeat_interval
        command = [
            sys.executable, "-m", "transfersearch.integrations.launcher", "worker",
            "--study-name", self.study_name, "--objective", self.objective,
            "--total-trials", str(self.n_trials), "--sampler-attr", self.sampler_attr,
            "--max-retry", "none" if self.max_retry is None else str(self.max_retry),
            "--heartbeat-interval", "none" if heartbeat is None else str(heartbeat),
        ]  # fmt: skip
        if self.grace_period is not None:
            command += ["--grace-period", str(self.grace_period)]
        if self.seed is not None:
            command += ["--seed", str(worker_seed(self.seed, slot.index))]
        if slot.gpu is not None and self.lock_dir is not None:
            command += [
                "--gpu", slot.gpu, "--capacity", str(self.capacity), "--lock-dir", self.lock_dir,
                "--units", json.dumps(self.units),
            ]  # fmt: skip
        return command

    def start(self, slot: WorkerSlot, logs: Path | None) -> _Worker:
        """Start the worker on ``slot``, its output to ``worker-<index>.log`` in ``logs``."""
        worker_env = {**self.env, "CUDA_VISIBLE_DEVICES": slot.cuda_visible_devices}
        log = None if logs is None else logs / f"worker-{slot.index}.log"
        out = None if log is None else open(log, "wb")
        try:
            process = subprocess.Popen(
                self.command(slot),
                env=worker_env,
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
            )
        finally:
            if out is not None:
                out.close()
        return _Worker(slot, process, log)


def _wait_for(
    workers: Sequence[_Worker], reporter: _Reporter, timeout: float | None
) -> list[WorkerResult]:
    """Wait for the workers (at most ``timeout`` seconds, then terminate them), printing
    progress lines; on Ctrl-C stop them (:func:`_stop_interrupted`) and raise it again."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while any(w.process.poll() is None for w in workers):
            if deadline is not None and time.monotonic() >= deadline:
                break
            reporter.maybe_report()
            time.sleep(PROCESS_POLL_S)
    except KeyboardInterrupt:
        _stop_interrupted([w.process for w in workers])
        reporter.report(final=True)
        raise
    results = []
    for worker in workers:
        if worker.process.poll() is None:  # past the timeout
            worker.process.terminate()
        results.append(WorkerResult(worker.slot, worker.process.wait(), worker.log))
    reporter.report(final=True)
    return results


#: How often the launcher looks at its workers (seconds): short, so it returns soon after they do.
PROCESS_POLL_S = 0.1
#: Seconds the launcher gives interrupted workers to record their trials before SIGTERM.
INTERRUPT_GRACE_S = 30.0


def _stop_interrupted(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """After Ctrl-C: give each worker one SIGINT (Ctrl-C in a terminal reaches them already; a
    SIGINT to the launcher alone does not) and time to record its trial as interrupted; SIGTERM
    what is left after :data:`INTERRUPT_GRACE_S`."""
    time.sleep(0.5)  # a terminal's SIGINT reached the workers too: let them act on it first
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            logger.warning("worker pid %d did not stop after Ctrl-C; terminating it", process.pid)
            process.terminate()
            process.wait()


def _log_folder(log_dir: str | os.PathLike[str] | None) -> Path | None:
    """The log folder, created and checked writable (an error naming it otherwise)."""
    if log_dir is None:
        return None
    folder = Path(log_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise TransferSearchError(
            f"cannot write worker logs to --log-dir {str(folder)!r}: {exc.strerror or exc}. "
            "Give a writable folder."
        ) from None
    return folder


class _Reporter:
    """The launcher's progress line on stderr: trials done / total, per rung (done / budget),
    failures, running, rate and ETA; the top rung's best value (values of different rungs are
    not comparable, so no best across rungs)."""

    def __init__(
        self,
        study: optuna.Study,
        total: int,
        sampler: Any,
        interval: float | None,
        grace_s: float | None = None,
    ):
        from transfersearch.integrations.optuna import TransferSampler

        self._study = study
        self._total = total
        #: The workers' grace period (None: heartbeats off, no trial is failed for silence).
        self._grace_s = grace_s
        self._interval = interval
        self._budgets: tuple[int, ...] = ()
        if isinstance(sampler, TransferSampler):
            self._budgets = tuple(sampler.planner.budgets)
        self._start = time.monotonic()
        self._done_at_start = _Progress(study).done
        self._next = self._start

    def say(self, text: str) -> None:
        if self._interval is not None:
            print(f"[workers] {text}", file=sys.stderr, flush=True)

    def maybe_report(self) -> None:
        if self._interval is not None and time.monotonic() >= self._next:
            self._next = time.monotonic() + self._interval
            self.report()

    def report(self, *, final: bool = False) -> None:
        if self._interval is None:
            return
        try:
            self.say(self.line(final=final))
        except Exception as exc:  # a progress line never stops the workers
            logger.info("no progress line this time (%s: %s)", type(exc).__name__, exc)

    def line(self, *, final: bool = False) -> str:
        progress = _Progress(self._study)
        parts = [f"{self._study.study_name}: {progress.done}/{self._total} trials done"]
        if self._budgets:
            rungs = ", ".join(
                f"rung {r}: {progress.per_rung.get(r, 0)}/{b}" for r, b in enumerate(self._budgets)
            )
            parts[0] += f" ({rungs})"
        foreign = _not_workers_trials(self._study, self._grace_s)
        parts.append(
            f"{progress.running} running" + (f" ({'; '.join(foreign)})" if foreign else "")
        )
        parts.append(f"{progress.failed} failed")
        elapsed = time.monotonic() - self._start
        new = progress.done - self._done_at_start
        if new > 0 and elapsed > 0:
            rate = new / elapsed
            parts.append(f"{rate * 60:.1f} trials/min")
            left = max(0, self._total - progress.done)
            if left and not final:
                parts.append(f"ETA {_duration(left / rate)}")
        best = self._top_rung_best()
        if best is not None:
            parts.append(best)
        return ", ".join(parts) + (" (finished)" if final and progress.done >= self._total else "")

    def _top_rung_best(self) -> str | None:
        from optuna.study import StudyDirection
        from optuna.trial import TrialState

        from transfersearch.integrations._optuna_trials import rung_of

        if not self._budgets:
            return None
        top = len(self._budgets) - 1
        values = [
            t.values[0]
            for t in self._study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if rung_of(t) == top and t.values
        ]
        if not values:
            return None
        maximize = self._study.direction == StudyDirection.MAXIMIZE
        return f"top rung best {max(values) if maximize else min(values):.6g}"


def _not_workers_trials(study: optuna.Study, grace_s: float | None) -> list[str]:
    """Why the pool waits on, or leaves alone, each RUNNING trial no worker of the study owns
    (a notebook's ``study.ask()`` never told, another program's trial): one phrase each."""
    from optuna.trial import TrialState

    from transfersearch.integrations._optuna_shim import storage_of, study_id
    from transfersearch.integrations._trial_claims import OWNER_ATTR, is_registered_worker

    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if not running:
        return []
    registered = storage_of(study).get_study_system_attrs(study_id(study))
    phrases = []
    for trial in running:
        owner = trial.system_attrs.get(OWNER_ATTR)
        if is_registered_worker(owner, registered):
            continue
        if owner is None:
            phrases.append(
                f"trial {trial.number}: not created through make_storage (no owner, no "
                "heartbeat), so never failed here: left alone, and the fit does not count it"
            )
        elif grace_s is None:
            phrases.append(
                f"trial {trial.number}: pid {owner.get('pid')}'s on {owner.get('host')}, no "
                "worker's; heartbeats are off, so it is left alone"
            )
        else:
            phrases.append(
                f"trial {trial.number}: pid {owner.get('pid')}'s on {owner.get('host')}, no "
                f"worker's (e.g. a study.ask() never told): waiting until it has sent no "
                f"heartbeat for {grace_s:g} s (the grace period), then it is failed"
            )
    return phrases


def _duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``3 h 05 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _new_lock_dir() -> str:
    """A fresh GPU lock directory named after this launcher's pid, after removing those whose
    launcher is gone (a launcher killed with SIGKILL cannot clean up after itself)."""
    for old in Path(tempfile.gettempdir()).glob(f"{LOCK_DIR_PREFIX}*"):
        owner = old.name[len(LOCK_DIR_PREFIX) :].split("-", 1)[0]
        with contextlib.suppress(OSError):
            if owner.isdigit() and old.stat().st_uid == os.getuid() and not _pid_alive(int(owner)):
                logger.info("removing %s: its launcher (pid %s) is gone", old, owner)
                shutil.rmtree(old, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{LOCK_DIR_PREFIX}{os.getpid()}-")


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------
def _optional_int(text: str) -> int | None:
    return None if text.lower() == "none" else int(text)


def _trials_per_gpu(text: str) -> int | dict[int, int]:
    """ "2" (all rungs) or "0=4,1=2,2=1"."""
    if "=" not in text:
        return int(text)
    pairs = (item.split("=", 1) for item in text.split(",") if item.strip())
    return {int(rung): int(k) for rung, k in pairs}


#: The default of ``--progress-interval``: a line every half minute is news for runs of minutes
#: to days without flooding a log.
PROGRESS_INTERVAL_S = 30.0

_TOTAL_HELP = (
    "the study's total: finished trials it should hold, counting those it holds already "
    "(re-running with the same number finishes an interrupted run; several launchers on one "
    "study share it). Not additive like study.optimize(n_trials=): use --add-trials for that"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transfersearch.integrations.launcher",
        description="Run Optuna workers of a TransferSampler study (one per GPU slot). The "
        "objective module must define the objective function and a module-level `sampler` (a "
        "TransferSampler; optionally `pruner`).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    workers = commands.add_parser("workers", help="launch one worker per GPU slot (or CPU workers)")
    _add_common_arguments(workers, launcher=True)
    _add_launcher_arguments(workers)
    worker = commands.add_parser(
        "worker", help="run one worker in this process (what 'workers' starts)"
    )
    _add_common_arguments(worker, launcher=False)
    worker.add_argument("--gpu", default=None)
    worker.add_argument("--capacity", type=int, default=1)
    worker.add_argument("--lock-dir", default=None)
    worker.add_argument("--units", default=None, help="JSON rung -> units")
    worker.add_argument(
        "--seed", type=int, default=None, help="this worker's seed (the launcher derives one)"
    )
    return parser


def _add_common_arguments(sub: argparse.ArgumentParser, *, launcher: bool) -> None:
    """The options ``workers`` and ``worker`` share (``--add-trials`` only for the launcher)."""
    sub.add_argument(
        "--storage",
        default=None,
        help=f"sqlite:///x.db, postgresql://..., ... (default: ${STORAGE_ENV}; put a URL "
        "with a password there, not on the command line)",
    )
    sub.add_argument("--study-name", required=True)
    sub.add_argument(
        "--objective",
        required=True,
        help="module:function or file.py:function; the module defines `sampler` too",
    )
    total = sub.add_mutually_exclusive_group(required=True)
    total.add_argument("--total-trials", type=int, help=_TOTAL_HELP)
    total.add_argument(
        "--n-trials", type=int, dest="total_trials", help="the same as --total-trials"
    )
    if launcher:
        total.add_argument(
            "--add-trials",
            type=int,
            help="run this many trials more than the study holds when the launcher starts",
        )
    sub.add_argument("--sampler-attr", default="sampler")
    sub.add_argument("--heartbeat-interval", type=_optional_int, default=10)
    sub.add_argument("--grace-period", type=int, default=None)
    sub.add_argument("--max-retry", type=_optional_int, default=3)
    sub.add_argument(
        "--verbose",
        action="store_true",
        help="print the full traceback of an error (e.g. the objective module's)",
    )


def _add_launcher_arguments(sub: argparse.ArgumentParser) -> None:
    """The options of ``workers`` alone: GPUs, packing, CPU workers, logs and progress."""
    sub.add_argument("--gpus", default="auto", help="auto, a count, or ids '0,1'")
    sub.add_argument(
        "--trials-per-gpu",
        type=_trials_per_gpu,
        default=None,
        help="k for all rungs, or '0=4,1=2,2=1' (default: cost rule)",
    )
    sub.add_argument("--max-per-gpu", type=int, default=4)
    sub.add_argument("--cpu-workers", type=int, default=None)
    sub.add_argument("--direction", default="minimize")
    sub.add_argument("--log-dir", default=None)
    sub.add_argument(
        "--progress-interval",
        type=float,
        default=PROGRESS_INTERVAL_S,
        help="seconds between progress lines on stderr (0: none)",
    )
    sub.add_argument(
        "--rungs",
        default=None,
        help="send the trials this launch adds (--add-trials N, or what --total-trials lacks) "
        "to these rungs: 'largest', 'cheapest', or indices '2,3' (cost order, 0 the cheapest); "
        "default: the planner's choice (cheapest rungs first)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m transfersearch.integrations.launcher``: bad input is one
    ``error:`` line on stderr and exit status 2 (with ``--verbose`` also the traceback of its
    cause); Ctrl-C exits 130 after the running trials are recorded as interrupted."""
    args = _parser().parse_args(argv)
    try:
        with warnings.catch_warnings():  # the command is the documented way in: no warnings
            warnings.simplefilter("ignore", ExperimentalWarning)
            with contextlib.suppress(ImportError):
                import optuna

                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return _run(args)
    except TransferSearchError as exc:
        if args.verbose and exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__, file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        who = "launcher" if args.command == "workers" else f"worker pid {os.getpid()}"
        print(
            f"{who}: interrupted; running trials are recorded as interrupted (not failed) and "
            "re-enqueued: run the same command again to finish the study.",
            file=sys.stderr,
        )
        return 130


def _run(args: argparse.Namespace) -> int:
    if args.storage is None:
        args.storage = os.environ.get(STORAGE_ENV)
        if not args.storage:
            raise TransferSearchError(
                f"no storage: give --storage URL or set the environment variable {STORAGE_ENV} "
                "(e.g. export TRANSFERSEARCH_STORAGE=sqlite:///proxy.db)."
            )
    common = {
        "heartbeat_interval": args.heartbeat_interval,
        "grace_period": args.grace_period,
        "max_retry": args.max_retry,
        "sampler_attr": args.sampler_attr,
    }
    if args.command == "worker":
        run_worker(
            args.storage, args.study_name, args.objective, args.total_trials,
            gpu=args.gpu, units=_units(args.units), capacity=args.capacity,
            lock_dir=args.lock_dir, seed=args.seed, **common,
        )  # fmt: skip
        return 0
    gpus: str | int = args.gpus
    if isinstance(gpus, str) and gpus.isdigit():
        gpus = int(gpus)
    total = args.total_trials
    if total is None:
        check_int("--add-trials", args.add_trials, minimum=1, fix="E.g. --add-trials 100.")
        total = _held(args.storage, args.study_name) + args.add_trials
    interval = args.progress_interval if args.progress_interval > 0 else None
    results = launch_workers(
        args.storage, args.study_name, args.objective, total,
        gpus=gpus, trials_per_gpu=args.trials_per_gpu, max_per_gpu=args.max_per_gpu,
        cpu_workers=args.cpu_workers, direction=args.direction, log_dir=args.log_dir,
        progress_interval=interval, rungs=args.rungs, **common,
    )  # fmt: skip
    if not results:
        print(
            f"study {args.study_name!r} already holds {_held(args.storage, args.study_name)} "
            f"finished trials of the {total} asked for (--total-trials is the study's total); "
            "no worker is needed. Raise the total, or use --add-trials N to run N more.",
            file=sys.stderr,
        )
    for result in results:
        device = result.slot.gpu if result.slot.gpu is not None else "cpu"
        print(f"worker {result.slot.index} ({device}): exit {result.returncode}")
    return max((abs(r.returncode) for r in results), default=0)


def _units(text: str | None) -> dict[int, int] | None:
    """``--units`` (JSON rung -> units), or an error naming it."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        return {int(k): int(v) for k, v in data.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise TransferSearchError(
            f'--units must be a JSON object rung -> units, e.g. \'{{"0": 1, "1": 2}}\', but '
            f"got {text!r} ({exc})."
        ) from None


def _held(storage: str, study_name: str) -> int:
    """Finished trials the study holds now (0 for a study not yet created)."""
    import optuna

    from transfersearch.integrations._launcher_storage import make_storage

    try:
        study = optuna.load_study(study_name=study_name, storage=make_storage(storage))
    except KeyError:
        return 0
    return _Progress(study).done

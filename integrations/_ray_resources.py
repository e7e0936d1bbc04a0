"""Per-rung resource requests for Ray Tune: pack small proxies onto shared GPUs.

The rule is the core's :func:`transfersearch.resources.gpu_shares` (the Optuna launcher's
:func:`~transfersearch.resources.trials_per_gpu` applies it too): a rung whose cost is ``c`` and the largest
rung's ``c_max`` asks for ``max_gpu · c / c_max`` GPUs, never less than ``min_gpu``; shares below
one GPU are rounded *up* to a unit fraction 1/k (so k trials fill one GPU exactly), shares of one
or more to whole GPUs. A share is the GPU compute a trial's cost deserves: every rung then runs for
a similar wall time, and a proxy too small to saturate a GPU shares it. Ray only accounts for the
fraction; it does not cap a trial's GPU memory, so a packed trainable should stay within its share
(e.g. ``torch.cuda.set_per_process_memory_fraction(share)`` with
``share = ray.get_runtime_context().get_assigned_resources().get("GPU", 1.0)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

from transfersearch.errors import (
    Allowed,
    Interval,
    TransferSearchError,
    check_positive,
    check_value,
)
from transfersearch.resources import gpu_shares
from transfersearch.scale import Scale

__all__ = ["GPU_SHARE", "RungResources"]

#: What a rung's GPU share may be (0: CPU only).
GPU_SHARE = Allowed(
    Interval(Real, 0),
    fix="0 runs on CPU only; a positive GPU share is e.g. 0.25 or 1 (gpu=None packs up to 4 "
    "small proxies per GPU).",
)


class RungResources:
    """A picklable function of a trial config giving its rung's resource request (for Tune).

    Built by :meth:`TransferSearch.resources`; call it with a trial config (one made by the
    searcher: it carries ``"scale"``) to get a ``PlacementGroupFactory``. With no GPU in the Ray
    cluster (``ray.cluster_resources().get("GPU", 0) == 0``) every rung runs on CPUs only.

    Attributes:
        ladder: the rungs in cost order.
        gpu: GPUs per trial for each rung (in cost order) when the cluster has GPUs.
        cpu: CPUs per trial for each rung.
    """

    def __init__(
        self,
        ladder: Sequence[Scale],
        costs: Sequence[float],
        *,
        gpu: float | None = None,
        cpu: float = 1.0,
        max_gpu: float = 1.0,
        gpu_per_rung: Mapping[Any, float] | None = None,
        cpu_per_rung: Mapping[Any, float] | None = None,
    ) -> None:
        self.ladder = tuple(ladder)
        min_gpu = 0.25 if gpu is None else check_value("gpu", gpu, GPU_SHARE)
        check_positive("max_gpu", max_gpu)
        check_positive("cpu", cpu, fix="Give the CPUs each trial needs, e.g. cpu=1.")
        if min_gpu == 0:
            shares = [0.0] * len(self.ladder)
        else:
            shares = list(gpu_shares(costs, min_gpu=float(min_gpu), max_gpu=float(max_gpu)))
        for key, value in (gpu_per_rung or {}).items():
            share = check_value(f"gpu_per_rung[{key!r}]", value, GPU_SHARE)
            shares[self._index(key, "gpu_per_rung")] = share
        cpus = [float(cpu)] * len(self.ladder)
        for key, value in (cpu_per_rung or {}).items():
            cpus[self._index(key, "cpu_per_rung")] = check_positive(f"cpu_per_rung[{key!r}]", value)
        self.gpu: tuple[float, ...] = tuple(shares)
        self.cpu: tuple[float, ...] = tuple(cpus)
        self._cluster_gpus: float | None = None

    def __repr__(self) -> str:
        rows = ", ".join(
            f"{s!r}: gpu={g:g} cpu={c:g}" for s, g, c in zip(self.ladder, self.gpu, self.cpu)
        )
        return f"RungResources({rows})"

    def __getstate__(self) -> dict[str, Any]:
        return {"ladder": self.ladder, "gpu": self.gpu, "cpu": self.cpu}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.ladder = tuple(state["ladder"])
        self.gpu = tuple(state["gpu"])
        self.cpu = tuple(state["cpu"])
        self._cluster_gpus = None

    def _index(self, key: Any, field: str) -> int:
        if isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(self.ladder):
                return key
            raise TransferSearchError(
                f"`{field}` names rung {key}, but the ladder has rungs 0..{len(self.ladder) - 1} "
                "(in cost order)."
            )
        scale = key if isinstance(key, Scale) else Scale(key) if isinstance(key, Mapping) else None
        if scale is None or scale not in self.ladder:
            raise TransferSearchError(
                f"`{field}` key {key!r} is neither a rung index nor a scale of the ladder "
                f"{list(self.ladder)}. Use an index in cost order or one of the ladder's scales."
            )
        return self.ladder.index(scale)

    def rung_of(self, config: Mapping[str, Any]) -> int:
        """The rung of a trial config made by the searcher (from its ``"scale"``)."""
        raw = config.get("scale") if isinstance(config, Mapping) else None
        if not isinstance(raw, Mapping):
            raise TransferSearchError(
                f"the trial config has no 'scale' mapping (keys: {sorted(config)}); per-rung "
                "resources need configs made by TransferSearch. Pass search_alg=TransferSearch(...)."
            )
        return self._index(Scale(raw), "config['scale']")

    def cluster_gpus(self) -> float:
        """GPUs in the connected Ray cluster (0 when none); read once per process, once Ray is
        initialised (a request made before ``ray.init()`` counts 0 GPUs and is not remembered, so
        the trials Tune starts later still get theirs)."""
        if self._cluster_gpus is None:
            import ray

            if not ray.is_initialized():
                return 0.0
            available = ray.cluster_resources()  # type: ignore[no-untyped-call,unused-ignore]
            self._cluster_gpus = float(available.get("GPU", 0))
        return self._cluster_gpus

    def request(
        self, config: Mapping[str, Any], cluster_gpus: float | None = None
    ) -> dict[str, float]:
        """The resource dict for ``config``'s rung: ``{"CPU": c}`` or ``{"CPU": c, "GPU": g}``.

        Args:
            config: a trial config made by the searcher.
            cluster_gpus: GPUs in the cluster; default: read from the connected Ray cluster.

        Raises:
            TransferSearchError: the config has no ladder scale, or the rung asks for more GPUs
                than the cluster has.
        """
        rung = self.rung_of(config)
        gpus = self.cluster_gpus() if cluster_gpus is None else float(cluster_gpus)
        share = self.gpu[rung] if gpus > 0 else 0.0
        if share > gpus > 0:
            raise TransferSearchError(
                f"rung {rung} ({self.ladder[rung]!r}) asks for gpu={share:g} but the cluster has "
                f"{gpus:g} GPUs. Lower `max_gpu` or set gpu_per_rung={{{rung}: {gpus:g}}}."
            )
        request = {"CPU": self.cpu[rung]}
        if share > 0:
            request["GPU"] = share
        return request

    def __call__(self, config: Mapping[str, Any]) -> Any:
        """A ``PlacementGroupFactory`` with :meth:`request` as its one bundle."""
        from ray.tune import PlacementGroupFactory

        return PlacementGroupFactory([self.request(config)])

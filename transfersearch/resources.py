"""GPU packing: how much of a GPU a trial of each rung gets, from the rungs' relative costs.

One rule for both adapters: the Ray searcher's per-rung resource requests
(``TransferSearch.resources``) and the Optuna launcher's slots per GPU (``launch_workers``).

    >>> gpu_shares([1.0, 4.0, 16.0], min_gpu=0.25)
    (0.25, 0.25, 1.0)
    >>> trials_per_gpu([1.0, 4.0, 16.0], max_per_gpu=8)
    (8, 4, 1)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real

from transfersearch.errors import Allowed, Interval, TransferSearchError, check_int, check_table

__all__ = ["SHARE_BOUNDS", "gpu_shares", "snap_gpu_share", "trials_per_gpu"]

_SHARE = Allowed(
    Interval(Real, 0, None, closed="neither", finite=False),
    fix="It is a positive GPU share, e.g. 0.25 (four trials per GPU) or 1.",
)
#: What :func:`gpu_shares`' bounds may be.
SHARE_BOUNDS: Mapping[str, Allowed] = {"min_gpu": _SHARE, "max_gpu": _SHARE}

#: Slack when snapping a share: 1/3 computed in floating point must still count as "three per GPU".
_SNAP_SLACK = 1e-9


def snap_gpu_share(share: float) -> float:
    """Round a GPU share up to a unit fraction 1/k below one GPU (k trials fill it exactly) and to
    a whole number of GPUs at or above one; 0 stays 0 (CPU only)."""
    if share <= 0:
        return 0.0
    if share >= 1.0:
        return float(math.ceil(share - _SNAP_SLACK))
    return 1.0 / math.floor(1.0 / share + _SNAP_SLACK)


def gpu_shares(
    costs: Sequence[float], *, min_gpu: float, max_gpu: float = 1.0
) -> tuple[float, ...]:
    """GPUs per trial for rungs of the given costs.

    A rung of cost ``c`` gets ``max_gpu · c / c_max`` GPUs (``c_max``: the most expensive rung),
    never less than ``min_gpu``, snapped by :func:`snap_gpu_share`: below one GPU up to 1/k (k
    trials share a GPU), from one GPU up to a whole number. A share is the GPU compute a trial's
    cost deserves, so every rung runs for a similar wall time and a proxy too small to saturate a
    GPU shares it; with ``min_gpu = 1/k_max`` at most ``k_max`` trials share one GPU.

    Args:
        costs: the rungs' relative costs (any order; positive and finite).
        min_gpu: the smallest share a trial gets (e.g. 0.25: at most four trials per GPU).
        max_gpu: GPUs per trial of the most expensive rung.

    Returns:
        One share per cost, in the order given.

    Raises:
        TransferSearchError: no costs, a cost that is not positive and finite, or a share bound
            that is not positive.
    """
    values = [float(c) for c in costs]
    if not values or any(not math.isfinite(c) or c <= 0 for c in values):
        raise TransferSearchError(f"`costs` must be positive finite numbers, but got {values}.")
    check_table(SHARE_BOUNDS, {"min_gpu": min_gpu, "max_gpu": max_gpu})
    top = max(values)
    return tuple(snap_gpu_share(max(min_gpu, max_gpu * cost / top)) for cost in values)


def trials_per_gpu(costs: Sequence[float], max_per_gpu: int = 4) -> tuple[int, ...]:
    """How many trials of each rung may share one GPU: :func:`gpu_shares` with ``min_gpu =
    1 / max_per_gpu`` and ``max_gpu = 1``.

    The most expensive rung runs alone; a rung costing at most 1/k of it packs k per GPU,
    ``k = clamp(floor(cost_top / cost_rung), 1, max_per_gpu)``. Memory and FLOPs both grow with
    the cost model, so a packed GPU is no busier than one top-rung trial.

    Raises:
        TransferSearchError: ``max_per_gpu`` is not an int >= 1, or a cost is not positive.
    """
    check_int("max_per_gpu", max_per_gpu, minimum=1, fix="E.g. max_per_gpu=4.")
    shares = gpu_shares(costs, min_gpu=1.0 / max_per_gpu)
    return tuple(round(1.0 / share) for share in shares)

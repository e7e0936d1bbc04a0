"""The relative compute of a run at a scale: the ladder's rung order, the report's compute axis."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from transfersearch.errors import TransferSearchError
from transfersearch.scale import Scale

__all__ = ["by_cost", "default_cost"]


def default_cost(scale: Scale) -> float:
    """Relative compute of a run at ``scale``: width² × dataset_size × epochs (absent names count 1).

    Width² approximates parameters (and FLOPs per sample) of a transformer or MLP of fixed depth;
    dataset_size × epochs is the number of samples processed.
    """
    width = scale.get("width", 1.0)
    return width * width * scale.get("dataset_size", 1.0) * scale.get("epochs", 1.0)


def by_cost(scales: Iterable[Scale], cost: Callable[[Scale], float] | None = None) -> list[Scale]:
    """``scales`` cheapest first: the one rung order of the planner, walk-forward validation,
    ``validate()`` (which holds out the last), the report and the visualisation.

    Args:
        scales: the scales to order.
        cost: relative cost of a scale (default :func:`default_cost`).

    Returns:
        The scales sorted by cost; ties keep a fixed order (by ``repr``), so every caller agrees.

    Raises:
        TransferSearchError: ``cost`` gives a value that is not positive and finite.
    """
    measure = cost or default_cost
    keyed = []
    for scale in scales:
        value = float(measure(scale))
        if not math.isfinite(value) or value <= 0.0:
            raise TransferSearchError(
                f"`cost` must give positive finite costs, but gave {value!r} for {scale!r}."
            )
        keyed.append((value, repr(scale), scale))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [item[2] for item in keyed]

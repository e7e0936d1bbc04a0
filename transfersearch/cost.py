"""The relative compute of a run at a scale: the ladder's rung order, the report's compute axis."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from transfersearch.errors import TransferSearchError
from transfersearch.scale import Scale

__all__ = ["by_cost", "cost_function", "default_cost"]


#: Scale names :func:`default_cost` reads as a model's size or the data it processes.
_KNOWN = ("width", "params", "dataset_size", "tokens", "epochs")
#: Scale names that change how the data is cut, not how much compute a run takes.
_NOT_COST = ("batch_size",)


def default_cost(scale: Scale) -> float:
    """Relative compute of a run at ``scale``: model size × data processed.

    Model size is ``params`` when the scale gives it, else width² (the parameters, and FLOPs per
    sample, of a transformer or MLP of fixed depth); data is ``tokens`` when given, else
    dataset_size × epochs (absent names count 1). A scale that names none of these (a sweep's own
    names, e.g. Step Law's ``N`` and ``D``) costs the product of its values other than
    ``batch_size``: every size a ladder grows is taken to cost compute in proportion, so the
    rungs still have an order (pass ``cost=`` where that is wrong).
    """
    if not any(name in scale for name in _KNOWN):
        return math.prod(value for name, value in scale.items() if name not in _NOT_COST)
    width = scale.get("width", 1.0)
    size = scale.get("params", width * width)
    data = scale.get("tokens", scale.get("dataset_size", 1.0) * scale.get("epochs", 1.0))
    return float(size * data)


def cost_function(cost: Callable[[Scale], float] | None) -> Callable[[Scale], float]:
    """The cost a ladder is ordered by: ``cost`` where the user gave one, else
    :func:`default_cost` (the one place that default is taken)."""
    return default_cost if cost is None else cost


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
    measure = cost_function(cost)
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

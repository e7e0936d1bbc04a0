"""The relative compute of a run at a scale: the ladder's rung order, the report's compute axis."""

from __future__ import annotations

from transfersearch.scale import Scale

__all__ = ["default_cost"]


def default_cost(scale: Scale) -> float:
    """Relative compute of a run at ``scale``: width² × dataset_size × epochs (absent names count 1).

    Width² approximates parameters (and FLOPs per sample) of a transformer or MLP of fixed depth;
    dataset_size × epochs is the number of samples processed.
    """
    width = scale.get("width", 1.0)
    return width * width * scale.get("dataset_size", 1.0) * scale.get("epochs", 1.0)

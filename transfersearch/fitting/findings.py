"""What a finished fit shows the reader: :class:`Diagnostic` records for ``summary()``.

Rungs whose optimum lay past the edge of their trials or is known only as a bound, parameters no
trial varied, collinear scale variables, and what is known of divergence (docs/science.md §7.1,
§8). None asks the user to act (``act=False``): the boundary logs them and
``summary()``, the command line and the dashboard show them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.optimum import ScaleOptimum

if TYPE_CHECKING:
    from transfersearch.fitting.result import Extrapolation

__all__ = ["INDENTED_KINDS", "findings", "optimum_findings"]

#: Kinds about one rung's or one parameter's optimum: ``summary()`` indents them under the
#: decision's lines.
INDENTED_KINDS = frozenset({"unvaried", "edge"})


def findings(result: Extrapolation) -> tuple[Diagnostic, ...]:
    """The records ``summary()`` shows after the decision, in its order: collinear scale
    variables, the rungs' edges and bounds, what is known of divergence."""
    notes: list[Diagnostic] = []
    collinear = result.collinearity
    if collinear is not None:
        notes.append(
            Diagnostic(
                "collinearity",
                f"collinear: {list(collinear.variables)} move together along the ladder "
                f"(|corr| {collinear.correlation:.3f}); their separate exponents come "
                f"from the prior. A rung at {collinear.suggested_scale!r} would separate "
                "them.",
                act=False,
            )
        )
    notes.extend(optimum_findings(result.optima))
    notes.extend(_boundary_findings(result))
    return tuple(notes)


def optimum_findings(optima: Sequence[ScaleOptimum]) -> list[Diagnostic]:
    """Parameters no trial varied; rungs whose optimum is only bounded (a censored observation in
    the laws) or lay past the edge of their trials (read off the valley's extrapolated shape);
    docs/science.md §7.1."""
    notes: list[Diagnostic] = []
    if optima:
        for name in optima[0].names:
            if all(math.isinf(o.stderr[name]) for o in optima):
                values = {o.params[name] for o in optima}
                if len(values) == 1:
                    message = (
                        f"{name} was never varied (every trial used {values.pop():.4g}): "
                        "dropped from the fit; the prediction keeps that value. Sweep it to fit it."
                    )
                    notes.append(Diagnostic("unvaried", message, act=False, param=name))
    for optimum in optima:
        notes.extend(_edge_findings(optimum))
    return notes


def _edge_findings(optimum: ScaleOptimum) -> list[Diagnostic]:
    notes: list[Diagnostic] = []
    for name, distance in optimum.past_edge.items():
        units = "log units" if name in optimum.log_params else "units"
        side = "above" if distance > 0 else "below"
        message = (
            f"at {optimum.scale!r} the {name} optimum ({optimum.params[name]:.4g}) lies "
            f"{abs(distance):.2g} {units} {side} the trials' edge, more than its own standard "
            f"error: read off the valley's shape. Sweep further {'up' if distance > 0 else 'down'} "
            "there to bracket it."
        )
        notes.append(Diagnostic("edge", message, act=False, param=name, scale=optimum.scale))
    return notes


def _boundary_findings(result: Extrapolation) -> list[Diagnostic]:
    """When no trial diverged: how far the costliest rung's trials stayed stable
    (docs/science.md §8)."""
    model = result.target_loss
    if (model is not None and model.divergence is not None) or not result.stable_up_to:
        return []
    tops = ", ".join(f"{k} {v:.3g}" for k, v in result.stable_up_to.items())
    message = (
        f"no trial diverged: P(diverge) is not modelled; at the costliest rung trials stayed "
        f"stable up to {tops}."
    )
    return [Diagnostic("boundary", message, act=False)]

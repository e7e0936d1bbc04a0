"""What a finished fit shows the reader: :class:`Diagnostic` records for ``summary()``.

Rungs whose optimum lay past the edge of their trials or is known only as a bound, parameters no
trial varied, unstable predictions, collinear scale variables, and the stability boundaries
(docs/science.md §7.1, §8). None asks the user to act (``act=False``): the boundary logs them and
``summary()``, the command line and the dashboard show them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from transfersearch.fitting.coords import to_natural
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.optimum import ScaleOptimum

if TYPE_CHECKING:
    from transfersearch.fitting.result import Extrapolation

__all__ = ["INDENTED_KINDS", "findings", "optimum_findings"]

#: Kinds about one rung's or one parameter's optimum: ``summary()`` indents them under the
#: decision's lines.
INDENTED_KINDS = frozenset({"unvaried", "bound", "edge"})


def findings(result: Extrapolation) -> tuple[Diagnostic, ...]:
    """The records ``summary()`` shows after the decision, in its order: unstable parameters,
    collinear scale variables, the rungs' edges and bounds, the stability boundaries."""
    notes: list[Diagnostic] = []
    if result.unstable:
        notes.append(
            Diagnostic(
                "instability",
                f"unstable: {list(result.unstable)} swing by more than their interval when the "
                "trials are resampled; add trials to the largest rungs.",
                act=False,
            )
        )
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
        notes.extend(_bound_findings(optimum))
        notes.extend(_edge_findings(optimum))
    return notes


def _bound_findings(optimum: ScaleOptimum) -> list[Diagnostic]:
    notes: list[Diagnostic] = []
    for name, (low, high) in optimum.bounds.items():
        log = name in optimum.log_params
        ends = [to_natural(v, log) if math.isfinite(v) else v for v in (low, high)]
        if math.isfinite(low) and math.isfinite(high):
            where = f"between {ends[0]:.4g} and {ends[1]:.4g}"
        elif math.isfinite(low):
            where = f"above {ends[0]:.4g}"
        else:
            where = f"below {ends[1]:.4g}"
        message = (
            f"at {optimum.scale!r} the {name} optimum is only bounded, {where}: the laws "
            "use it as a censored observation."
        )
        notes.append(Diagnostic("bound", message, act=False, param=name, scale=optimum.scale))
    return notes


def _edge_findings(optimum: ScaleOptimum) -> list[Diagnostic]:
    notes: list[Diagnostic] = []
    for name, distance in optimum.past_edge.items():
        if name in optimum.bounds:
            continue
        units = "log units" if name in optimum.log_params else "units"
        side = "above" if distance > 0 else "below"
        head = (
            f"at {optimum.scale!r} the {name} optimum ({optimum.params[name]:.4g}) lies "
            f"{abs(distance):.2g} {units} {side} the trials' edge: extrapolated by the "
            "valley's shape, its stderr grows with the distance."
        )
        if name in optimum.diverged_past:
            # never advise sweeping past a divergence: it bounds the optimum instead
            natural = to_natural(optimum.diverged_past[name], name in optimum.log_params)
            message = (
                f"{head} A trial at {name}={natural:.4g} diverged: the optimum is bounded by "
                f"that divergence ({'below' if distance > 0 else 'above'} it)."
            )
        else:
            message = (
                f"{head} Sweep further {'up' if distance > 0 else 'down'} there to bracket it."
            )
        notes.append(Diagnostic("edge", message, act=False, param=name, scale=optimum.scale))
    return notes


def _boundary_findings(result: Extrapolation) -> list[Diagnostic]:
    """The stability boundaries at the target and P(diverge) (docs/science.md §8)."""
    if not result.boundary:
        if not result.stable_up_to:
            return []
        tops = ", ".join(f"{k} {v:.3g}" for k, v in result.stable_up_to.items())
        message = (
            f"no stability boundary: no trial diverged on one side of a parameter; at the "
            f"costliest rung trials stayed stable up to {tops} (a lower bound on any "
            "boundary there). P(diverge) is not modelled."
        )
        return [Diagnostic("boundary", message, act=False)]
    notes = []
    for name, fit in result.boundary.items():
        low, high = fit.interval(0.9)
        where = "above" if fit.side == "upper" else "below"
        text = (
            f"{name} boundary at the target {fit.value:.3g} (90%: {low:.3g}–{high:.3g}; runs "
            f"diverge {where} it)"
        )
        back = result.boundary_shift.get(name, 0.0)
        if back != 0.0:
            here = fit.fitted(result.params[name])
            text += (
                f"; the valley's decision {fit.natural(here - back):.3g} lay past its "
                f"limit: moved back to {result.params[name]:.3g}, P(diverge) "
                f"{fit.p_diverge(here):.0%}"
            )
        notes.append(Diagnostic("boundary", text + ".", act=False, param=name))
    message = (
        f"P(diverge) at the decision {result.p_diverge:.1%}, at the law's point "
        f"{result.p_diverge_law:.1%}."
    )
    notes.append(Diagnostic("boundary", message, act=False))
    return notes

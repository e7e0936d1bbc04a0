"""A fit's result as a few lines of text: what :meth:`Extrapolation.summary` returns.

The renderer reads the facts through :class:`Summarised`, the shape of what it shows, so it imports
no result type and ``fitting/result.py`` can call it without an import cycle (docs/design.md, "The
boundary").
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from transfersearch.fitting.diagnostics import Diagnostic
    from transfersearch.scale import Scale

__all__ = ["INDENTED_KINDS", "RungWorth", "Summarised", "summary_text"]

#: Kinds about one rung's or one parameter's optimum: the text indents them under the decision's
#: lines.
INDENTED_KINDS = frozenset({"unvaried", "edge"})
#: The level of the interval the text shows.
LEVEL = 0.9


class RungWorth(Protocol):
    """What the text reads of one rung's :meth:`trials_value` entry (docs/science.md §9.1)."""

    @property
    def scale(self) -> Scale: ...
    @property
    def n_trials(self) -> int: ...
    @property
    def extra(self) -> int: ...
    @property
    def share(self) -> float: ...
    @property
    def removed(self) -> float: ...


class Summarised(Protocol):
    """What the text reads of a result (an :class:`~transfersearch.fitting.result.Extrapolation`
    has it all)."""

    @property
    def target(self) -> Scale: ...
    @property
    def extrapolation_decades(self) -> float: ...
    @property
    def ladder_span_decades(self) -> float: ...
    @property
    def model(self) -> str: ...
    @property
    def selection_reason(self) -> str: ...
    @property
    def target_from_ladder(self) -> Mapping[str, float]: ...
    @property
    def duplicates_collapsed(self) -> int: ...
    @property
    def walk_forward(self) -> Sized: ...
    @property
    def model_scores(self) -> Mapping[str, float]: ...
    @property
    def optima(self) -> Sized: ...
    @property
    def params(self) -> Mapping[str, float]: ...
    @property
    def law_params(self) -> Mapping[str, float]: ...
    @property
    def decision_shift(self) -> Mapping[str, float]: ...
    @property
    def log_params(self) -> Container[str]: ...
    @property
    def stderr(self) -> Mapping[str, float]: ...
    @property
    def p_diverge(self) -> float: ...
    @property
    def p_diverge_law(self) -> float: ...
    @property
    def divergence_cost(self) -> float: ...
    @property
    def expected_loss(self) -> float: ...
    @property
    def n_crashed(self) -> int: ...
    @property
    def diagnostics(self) -> Sequence[Diagnostic]: ...
    def interval(self, level: float) -> Mapping[str, tuple[float, float]]: ...
    def trials_value(self) -> Sequence[RungWorth]: ...


def summary_text(result: Summarised) -> str:
    """A few lines: the decision, the model and why, each parameter's decision, law point and
    90% interval, the divergence risk and cost, crashed trials, then the diagnostics that ask
    nothing of the user, in order (the ``act=True`` ones are the warnings the boundary raised)."""
    lines = [_headline(result), *_ladder(result), *_decision(result), *_worth(result)]
    lines.extend(_buy(result))
    lines.extend(_divergence(result))
    lines.extend(_crashes(result))
    lines.extend(_reclassified(result.diagnostics))
    lines.extend(_notes(result.diagnostics))
    return "\n".join(lines)


def _headline(result: Summarised) -> str:
    return (
        f"target {result.target!r}: {result.extrapolation_decades:.2g} decades from the nearest "
        f"rung (the ladder spans {result.ladder_span_decades:.2g}); model {result.model!r} "
        f"({result.selection_reason})."
    )


def _ladder(result: Summarised) -> list[str]:
    """What the target kept from the ladder, copies counted once, and the walk-forward scores."""
    lines = []
    if result.target_from_ladder:
        kept = ", ".join(f"{k}={v:g}" for k, v in result.target_from_ladder.items())
        lines.append(
            f"kept from the ladder: {kept} (not in the target given, and never varied over "
            "the ladder); give another value in the target to move it."
        )
    if result.duplicates_collapsed:
        lines.append(
            f"{result.duplicates_collapsed} exact duplicate observation(s) (same scale, "
            "parameters and value) counted once: a copy is not a replicate."
        )
    if len(result.walk_forward):
        scores = ", ".join(f"{k} {v:.3g}" for k, v in result.model_scores.items())
        lines.append(f"walk-forward regret over {len(result.walk_forward)} fold(s): {scores}.")
    else:
        lines.append(
            f"not validated: too few rungs to validate ({len(result.optima)}; walk-forward "
            "predicts a rung from two or more cheaper ones that vary the way it moves). Add a "
            "rung to validate the model."
        )
    return lines


def _decision(result: Summarised) -> list[str]:
    """Each parameter's decision, law point and interval, and how far the decision moved."""
    interval = result.interval(LEVEL)
    # a target that is a fitted rung is read off that rung's own posterior (docs/science.md
    # §7.5): the decision and interval are its trials' answer, the law's line passes elsewhere
    why = (
        "the law's line: this rung's own trials place its optimum there, and the interval is "
        "that posterior's"
        if result.extrapolation_decades == 0.0
        else "the law's point: less expected loss, divergence risk included"
    )
    lines = []
    for name in result.params:
        shift = result.decision_shift[name]
        low, high = interval[name]
        moved = abs(shift) > 1e-3 * max(1.0, abs(result.stderr.get(name, 0.0)))
        unit = "log units" if name in result.log_params else "units"
        lines.append(
            f"  {name}: decision {result.params[name]:.4g}, law {result.law_params[name]:.4g}, "
            f"{LEVEL:.0%} interval [{low:.4g}, {high:.4g}]"
            + (f" (moved {shift:+.3g} {unit} from {why})" if moved else "")
        )
    return lines


def _worth(result: Summarised) -> list[str]:
    """The decision's expected loss over the posterior (docs/science.md §9): the most that more
    trials could save at the target."""
    if not math.isfinite(result.expected_loss):
        return []
    return [
        f"expected loss at the decision: {result.expected_loss:.3g} above the target's own "
        "optimum, over the posterior: the most that more trials could save there."
    ]


#: Below this share of the target's variance, the rungs' trials are not what limits it: the text
#: says a rung nearer the target would buy more (docs/science.md §9.1).
RUNGS_SHARE_SMALL = 0.5


def _buy(result: Summarised) -> list[str]:
    """Which rung more trials would buy most, and whether a rung nearer the target would buy
    more (docs/science.md §9.1); nothing where nothing finite can be said."""
    values = [v for v in result.trials_value() if math.isfinite(v.removed)]
    if not values:
        return []
    best = max(values, key=lambda v: v.removed)
    held = sum(v.share for v in values if math.isfinite(v.share))
    if best.removed >= 0.005:
        text = (
            f"more trials: {best.extra} more at {best.scale!r} (now {best.n_trials}) would cut "
            f"the target's uncertainty most (≈ {best.removed:.0%} of the expected loss it "
            "causes, the parameters weighed by the valley's curvature)"
        )
    else:
        text = (
            f"more trials: {best.extra} more at any rung would cut the expected loss the "
            "target's uncertainty causes by under 1%"
        )
    if held < RUNGS_SHARE_SMALL and result.extrapolation_decades > 0:
        text += (
            f"; these rungs' trials account for ≈ {held:.0%} of it, and no trial on them "
            "removes the rest (the law's prior and drift past the ladder): a rung nearer the "
            "target would buy more"
        )
    return [text + "."]


def _divergence(result: Summarised) -> list[str]:
    if result.p_diverge_law > 0 or result.p_diverge > 0:
        return [
            f"P(diverge): {result.p_diverge:.1%} at the decision, {result.p_diverge_law:.1%} at "
            f"the law's point; a diverged run is charged {result.divergence_cost:.4g} "
            "(divergence_cost: the sweep's worst excess unless you set it)."
        ]
    return []


def _crashes(result: Summarised) -> list[str]:
    """How many trials crashed: a table's FAIL / failed / crashed rows, a study's raised trials."""
    if not result.n_crashed:
        return []
    return [
        f"crashed: {result.n_crashed} trial(s) raised (state FAIL, failed or crashed, or the "
        "crashed column) and are counted, left out of the fit: a crash is never read as a "
        "divergence."
    ]


#: The kind of the record that reads finite values far past their rung's rest as runs that blew
#: up (the 10x-gap rule); the summary shows it although it is a warning too, as people paste
#: the summary, not the warnings, into their notes.
RECLASSIFIED_KIND = "far"


def _reclassified(diagnostics: Sequence[Diagnostic]) -> list[str]:
    """The trials the gap rule read as diverged, and the option that sets or stops it."""
    return [
        f"reclassified as diverged: {note.message} (docs/concepts.md: when to set diverged_beyond)"
        for note in diagnostics
        if note.kind == RECLASSIFIED_KIND and note.act
    ]


def _notes(diagnostics: Sequence[Diagnostic]) -> list[str]:
    """The records that ask nothing of the user, in order; those about one rung's or one
    parameter's optimum indented."""
    return [
        ("  " if note.kind in INDENTED_KINDS else "") + note.message
        for note in diagnostics
        if not note.act
    ]

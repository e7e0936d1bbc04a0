"""What the ladder and a fit show the reader: :class:`Diagnostic` records, from the fit's pieces.

Scale variables the ladder moves together, rungs whose optimum lay past the edge of their trials,
parameters no trial varied, and what is known of divergence (docs/science.md §7.1, §8). Each
function takes the small values it reads (the ladder, the rungs' optima, how far stable trials
reached), never the finished result, so the engine has the records before it builds the
:class:`~transfersearch.fitting.result.Extrapolation`. None asks the user to act (``act=False``):
the boundary logs them and ``summary()``, the command line and the dashboard show them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from transfersearch.fitting.coords import to_natural
from transfersearch.fitting.diagnostics import Diagnostic
from transfersearch.fitting.optimum import ScaleOptimum
from transfersearch.fitting.rungs import Ladder
from transfersearch.fitting.valley import MAX_ROUNDS, span_basis
from transfersearch.scale import Scale

__all__ = [
    "COLLINEAR_CORRELATION",
    "Collinearity",
    "collinearity",
    "diagonal_runs",
    "findings",
    "held_findings",
    "interaction_findings",
    "lies_on_a_cross",
    "momentum_findings",
    "optimum_findings",
    "scatter_findings",
    "wide_findings",
]

#: Scale variables whose logs correlate above this over the rungs are reported as collinear: the
#: ladder then pins only their joint direction (a 2-variable design with |corr| 0.95 has a
#: variance inflation factor of 10 on each exponent).
COLLINEAR_CORRELATION = 0.95
#: Scale variables that describe one thing a rung is set by, so a rung takes them together: the
#: model (``params`` follows from its width and depth) and the data seen (``tokens`` from the
#: samples, their length and the epochs). A suggested rung takes each group's values from one
#: existing rung — a corner that mixed a small width with a large ``params`` could not be built —
#: and two variables of one group cannot be separated by any rung.
SIZE_GROUPS: tuple[tuple[str, ...], ...] = (
    ("width", "depth", "params"),
    ("dataset_size", "tokens", "steps", "epochs"),
)


@dataclass(frozen=True)
class Collinearity:
    """Scale variables that move together along the ladder.

    Attributes:
        variables: the variables involved.
        correlation: the largest absolute correlation of their logs over the rungs.
        suggested_scale: the extra rung (a corner of the ladder's box, each group of
            :data:`SIZE_GROUPS` taken from one rung) that would separate them best: the one that
            most raises the smallest singular value of the centred log-scales; None when both
            lie in one group (``params`` with ``width``: it follows from the model's shape, and
            no rung sets them apart).
    """

    variables: tuple[str, ...]
    correlation: float
    suggested_scale: Scale | None

    @property
    def message(self) -> str:
        """What ``summary()`` says of them."""
        head = (
            f"collinear: {list(self.variables)} move together along the ladder "
            f"(|corr| {self.correlation:.3f}); their separate exponents come from the prior."
        )
        if self.suggested_scale is not None:
            return f"{head} A rung at {self.suggested_scale!r} would separate them."
        return (
            f"{head} They describe the same part of a run ({' and '.join(self.variables)} follow "
            "one another by construction), so no rung separates them; to fit one law in them "
            "pass scale_variables= without one of them."
        )


def collinearity(ladder: Ladder) -> Collinearity | None:
    """The most correlated pair of scale variables over the rungs, if above the threshold."""
    logs = ladder.log_scales
    moving = [k for k in range(logs.shape[1]) if np.ptp(logs[:, k]) > 1e-9]
    if len(moving) < 2:  # two rungs that move two variables are as collinear as it gets
        return None
    corr = np.atleast_2d(np.asarray(np.corrcoef(logs[:, moving].T), dtype=np.float64))
    np.fill_diagonal(corr, 0.0)
    a, b = np.unravel_index(int(np.argmax(np.abs(corr))), corr.shape)
    if abs(corr[a, b]) < COLLINEAR_CORRELATION:
        return None
    names = (ladder.variables[moving[a]], ladder.variables[moving[b]])
    groups = _groups(ladder.variables, moving)
    together = any(names[0] in g and names[1] in g for g in _named(ladder.variables, groups))
    suggested = None if together else _separating_rung(ladder, moving, groups)
    return Collinearity(names, float(abs(corr[a, b])), suggested)


def _groups(variables: Sequence[str], moving: Sequence[int]) -> list[list[int]]:
    """The moving variables' columns grouped by :data:`SIZE_GROUPS` (any other variable alone)."""
    out: list[list[int]] = []
    for group in SIZE_GROUPS:
        members = [k for k in moving if variables[k] in group]
        if members:
            out.append(members)
    grouped = {k for g in out for k in g}
    out.extend([k] for k in moving if k not in grouped)
    return out


def _named(variables: Sequence[str], groups: Sequence[Sequence[int]]) -> list[set[str]]:
    return [{variables[k] for k in g} for g in groups]


def _separating_rung(
    ladder: Ladder, moving: Sequence[int], groups: Sequence[Sequence[int]]
) -> Scale:
    """The corner of the ladder's box whose addition most raises the smallest singular value:
    each group's values from the rung holding its smallest or its largest (by the group's
    first moving variable)."""
    logs = ladder.log_scales
    ends = [(int(np.argmin(logs[:, g[0]])), int(np.argmax(logs[:, g[0]]))) for g in groups]
    best: tuple[float, tuple[int, ...]] = (-math.inf, tuple(len(logs) - 1 for _ in ends))
    for corner in product(*ends):  # per group, the rung holding its smallest / largest value
        point = logs[-1].copy()
        for group, rung in zip(groups, corner, strict=True):
            point[group] = logs[rung, group]
        grown = np.vstack([logs, point])[:, list(moving)]
        centred = grown - grown.mean(axis=0)
        smallest = float(np.linalg.svd(centred, compute_uv=False).min())
        if smallest > best[0]:
            best = (smallest, corner)
    base = dict(ladder.scales[-1])
    for group, rung in zip(groups, best[1], strict=True):
        base.update({ladder.variables[k]: ladder.scales[rung][ladder.variables[k]] for k in group})
    return Scale(base)


def findings(
    collinear: Collinearity | None,
    optima: Sequence[ScaleOptimum],
    stable_up_to: Mapping[str, float],
    *,
    divergence_modelled: bool,
) -> tuple[Diagnostic, ...]:
    """The records ``summary()`` shows after the decision, in its order: collinear scale
    variables, the rungs' edges and bounds, what is known of divergence.

    Args:
        collinear: what :func:`collinearity` found, or None.
        optima: the rungs' optima, cheapest first.
        stable_up_to: the largest value of each parameter a stable trial reached at the
            costliest rung (natural units).
        divergence_modelled: whether a trial diverged, so that the fit has a divergence law.
    """
    notes: list[Diagnostic] = []
    if collinear is not None:
        notes.append(Diagnostic("collinearity", collinear.message, act=False))
    notes.extend(optimum_findings(optima))
    if not divergence_modelled:
        notes.extend(_boundary_findings(stable_up_to))
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


def _boundary_findings(stable_up_to: Mapping[str, float]) -> list[Diagnostic]:
    """When no trial diverged: how far the costliest rung's trials stayed stable
    (docs/science.md §8)."""
    if not stable_up_to:
        return []
    tops = ", ".join(f"{k} {v:.3g}" for k, v in stable_up_to.items())
    message = (
        f"no trial diverged: P(diverge) is not modelled; at the costliest rung trials stayed "
        f"stable up to {tops}."
    )
    return [Diagnostic("boundary", message, act=False)]


def wide_findings(
    names: Sequence[str],
    log_params: Sequence[str],
    draws: np.ndarray,
    trial_range: np.ndarray,
) -> list[Diagnostic]:
    """Parameters whose central 90% of the target's predictive draws spans more than the
    trials' whole range (fitted units: log units for a log parameter): the trials locate the
    target's optimum no better than the sweep's own box does, so the decision there is the
    priors — and round-off in the rows' order can move it across that width. Shown in
    ``summary()``, not warned: Marin's one-at-a-time tables (3–5 rows a rung) have it on 10 of
    12 fits and still beat copying the top rung's best there.

    Args:
        names, log_params: the fitted parameters and which of them are on a log axis.
        draws: (S, d) the predictive draws of the target's optimum, fitted units.
        trial_range: (d,) each parameter's range over the finite trials, fitted units.
    """
    low, high = np.quantile(draws, [0.05, 0.95], axis=0)
    wide = [
        (name, float(h - lo), float(r))
        for name, lo, h, r in zip(names, low, high, trial_range, strict=True)
        if r > 0.0 and h - lo > r
    ]
    if not wide:
        return []
    parts = ", ".join(
        f"{name} {width:.2g} vs {span:.2g} {'log units' if name in log_params else 'units'}"
        for name, width, span in wide
    )
    message = (
        f"the 90% interval at the target is wider than the trials' whole range ({parts}): the "
        "trials locate its optimum no better than the sweep's box, so the decision leans on "
        "the priors (on one-at-a-time tables of a few rows per rung, as usual). More trials "
        "near each rung's optimum narrow it."
    )
    return [Diagnostic("wide", message, act=False)]


def scatter_findings(variables: Sequence[str], log_scales: np.ndarray) -> list[Diagnostic]:
    """A ladder with as many rungs as the law has coefficients per parameter (an intercept and
    one exponent per direction of log scale the rungs vary): any such set of optima lies on a
    law exactly, so the rungs' scatter about it is not identified, its posterior is its
    hyperprior's, and the optima are read as part law, part scatter: the drift is shrunk toward
    none (docs/science.md §7.3; ``optuna_transfer.py``'s three rungs over two variables lose 30%
    of the true lr drift). A rung at any new scale identifies it.

    Args:
        variables: the scale variables the laws use.
        log_scales: (S, K) their logs per rung.
    """
    rungs = len(log_scales)
    directions = len(span_basis(np.asarray(log_scales, dtype=float)))
    if rungs < 2 or rungs > directions + 1:
        return []
    varied = [v for k, v in enumerate(variables) if np.ptp(log_scales[:, k]) > 0]
    message = (
        f"{rungs} rungs vary {directions} direction(s) of scale ({', '.join(varied)}), as many "
        f"as the law has coefficients per parameter (an intercept and {directions} "
        f"exponent(s)): any {rungs} optima lie exactly on such a law, so the rungs' scatter "
        "about it is not identified and the drift is shrunk toward none "
        "(docs/science.md §7.3). A rung at a new scale identifies it."
    )
    return [Diagnostic("scatter", message, act=False)]


def lies_on_a_cross(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every point ``(a_i, b_i)`` lies on one of two lines ``a = a₀`` or ``b = b₀``: a
    one-at-a-time sweep of the two through one run, in which a valley's tilt between them (its
    off-diagonal curvature) has no trial to show it. Two points always do; three on a diagonal
    do not."""
    points = np.unique(np.asarray(a, dtype=float) + 1j * np.asarray(b, dtype=float))  # distinct
    rows_b, per_b = np.unique(points.imag, return_counts=True)
    several = rows_b[per_b > 1]  # values of b that hold more than one a
    if len(several) > 1:
        return False
    if len(several) == 1:  # that line is b = b₀; every other point is on a = a₀
        return len(np.unique(points.real[points.imag != several[0]])) <= 1
    # each b holds one a: all share it, or one point alone differs (it is the b = b₀ line)
    _, per_a = np.unique(points.real, return_counts=True)
    return len(per_a) <= 1 or (len(per_a) == 2 and int(per_a.min()) == 1)


def interaction_findings(
    names: Sequence[str],
    rungs: Sequence[tuple[np.ndarray, np.ndarray]],
    scales: Sequence[Scale],
    logs: Sequence[str],
) -> list[Diagnostic]:
    """Pairs of fitted parameters that no rung varies together: each rung's finite trials lie on
    a cross in the pair (:func:`lies_on_a_cross`), as in a one-at-a-time table. The valley's
    curvature is shared by every rung, so one rung that moves the pair together measures its
    tilt for all; where none does, the tilt is its prior's (docs/science.md §7.3: centred on
    none), and each rung's optimum is read as if the lines through its best run crossed at it.
    Shown in ``summary()``, not warned (Marin's tables have it on every fit), with the runs that
    would measure the first pair's tilt at the costliest rung that varies both
    (:func:`diagonal_runs`).

    Args:
        names: the fitted parameters.
        rungs: each rung's finite trials, cheapest first: (coordinates (n, len(names)) in fitted
            units, values (n,) in the minimisation sign).
        scales: the rungs' scales, in the same order.
        logs: the parameters fitted in log space.
    """
    pairs = [
        (j, k)
        for j in range(len(names))
        for k in range(j + 1, len(names))
        if all(lies_on_a_cross(t[:, j], t[:, k]) for t, _ in rungs)
        and any(len(t) and np.ptp(t[:, j]) > 0 for t, _ in rungs)
        and any(len(t) and np.ptp(t[:, k]) > 0 for t, _ in rungs)
    ]
    if not pairs:
        return []
    listed = ", ".join(f"{names[j]} × {names[k]}" for j, k in pairs)
    j, k = pairs[0]
    found = [(sc, diagonal_runs(*rung, j, k)) for sc, rung in zip(scales, rungs, strict=True)]
    example = next(
        (
            f" — for {names[j]} × {names[k]} at {sc!r}: "
            + "; ".join(
                f"{names[j]}={to_natural(a, names[j] in logs):.4g}, "
                f"{names[k]}={to_natural(b, names[k] in logs):.4g}"
                for a, b in runs
            )
            for sc, runs in reversed(found)
            if runs
        ),
        "",
    )
    message = (
        f"no rung varies {listed} together (one-at-a-time sweeps through a run): how the "
        "valley tilts between them is never measured and comes from the prior (no tilt on "
        "average), so each rung's optimum is read as if the lines through its best run crossed "
        "at it. A few runs that move a pair together measure it, e.g. the diagonal neighbours "
        f"of the best run at the costliest rung that varies both{example} (docs/science.md §7.3)."
    )
    return [Diagnostic("interaction", message, act=False)]


def diagonal_runs(
    coords: np.ndarray, values: np.ndarray, j: int, k: int
) -> list[tuple[float, float]]:
    """The runs one step from a rung's best trial in both coordinates ``j`` and ``k``: the
    neighbouring values the rung ran on each side of the best's (fitted units), every
    combination of the two, up to four; none for a rung without finite trials."""
    if len(values) == 0:
        return []
    best = coords[int(np.argmin(values))]
    steps = []
    for c in (j, k):
        ran = np.unique(coords[:, c])
        at = int(np.searchsorted(ran, best[c]))
        steps.append([float(ran[i]) for i in (at - 1, at + 1) if 0 <= i < len(ran)])
    return [(a, b) for a in steps[0] for b in steps[1]]


def held_findings(names: Sequence[str], held: Sequence[bool]) -> list[Diagnostic]:
    """Parameters whose law point at the target the fit held at the edge of what the trials
    support (docs/science.md §7.5: two trial ranges past them, where the box prior's mass is
    below 1e-4): the law, unheld, goes farther, so the answer there is the hold's, not the data's.
    Warned: it comes of exponents the trials contradict (``fixed_exponents``, a
    ``prior_exponents`` far from them) or of a target far past the ladder."""
    return _held(
        names,
        held,
        "the law puts the target's optimum of {} more than two trial ranges past every "
        "trial, where the fit's prior gives it a mass below 1e-4: the law's point, the interval "
        "and the decision there are held at that edge, not fitted. Check fixed_exponents or "
        "prior_exponents against the rungs' optima (summary()), or move the target nearer.",
    )


def momentum_findings(names: Sequence[str], held: Sequence[bool]) -> list[Diagnostic]:
    """Momentum coefficients (``beta1``, ``beta2``, ``momentum``: every trial in (0, 1)) whose
    law point or decision at the target came out at or past 1, which such a coefficient cannot
    take (torch's AdamW refuses it): held at the largest value any trial ran."""
    return _held(
        names,
        held,
        "the fit put {} at or past 1 at the target, which a momentum coefficient cannot "
        "take: held at the largest value any trial ran. The law of such a coefficient is better "
        "swept as its timescale (1 / (1 - beta), e.g. a space's batch-size rule for the betas), "
        "which has no edge.",
    )


def positive_findings(names: Sequence[str], held: Sequence[bool]) -> list[Diagnostic]:
    """Learning rates, weight decays and timescales fitted linearly (every trial > 0) whose
    law point or decision at the target came out at or below 0, which they cannot take (issue
    49 item 11): held at the smallest value any trial ran, with the fix."""
    return _held(
        names,
        held,
        "the linear fit put {} at or below 0 at the target, which a learning rate, weight decay "
        "or timescale cannot take: held at the smallest value any trial ran (draws at or below 0 "
        "likewise, so the interval's lower end is that value). A rate's or timescale's law is a "
        "power law, positive at every scale: declare it log (`Float(low, high, log=True)` in the "
        "space, or `log_params=[...]`).",
    )


def _held(names: Sequence[str], held: Sequence[bool], message: str) -> list[Diagnostic]:
    """One ``held`` warning naming the parameters ``held`` marks (``{}`` in ``message``)."""
    marked = [name for name, h in zip(names, held, strict=True) if h]
    return [Diagnostic("held", message.format(marked), act=True)] if marked else []


def unsettled_findings(settled: bool) -> list[Diagnostic]:
    """A fit whose alternation of noise and valley (docs/science.md §7.2) ran out of rounds
    before it settled: it cycles between nearby fits, and the answer is the cycle's state of
    greatest marginal likelihood, which tiny changes in the losses can move."""
    if settled:
        return []
    message = (
        f"the noise fit and the valley did not settle in {MAX_ROUNDS} rounds (they cycle between "
        "nearby fits, as on tables of a few rows per rung; the answer is the cycle's most likely "
        "state): the pick can move between neighbouring values with tiny changes in the losses; "
        "read a pick near a grid midpoint as a tie, or add trials near each rung's optimum."
    )
    return [Diagnostic("unsettled", message, act=False)]

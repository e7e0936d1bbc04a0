"""A synthetic proxy ladder whose optimum moves with scale by a known law.

For tests, benchmarks and a dry run of a setup without training: the loss above the optimum is

    regret = 0.5·(log base_lr − log base_lr*)² + 0.3·(log tau_epoch − log tau_epoch*)²

with ``log base_lr* = log 3e-3 − 0.6·log(width/64) + 0.25·log(N/2e4)`` and
``log tau_epoch* = 0.4·log(width/64) − 0.3·log(N/2e4)``: both drift with width and dataset size, so
a transfer method has something to learn, and the truth is known at every scale.

The scenario families (:data:`FAMILIES`, :func:`make_scenario`) are the developers' own suite
(``benchmarks/scenarios.py``): a true loss surface with an asymmetric lr wall and a divergence
boundary (:class:`Surface`), a ladder and its trials, and a target, one family per failure class.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from transfersearch.cost import default_cost
from transfersearch.errors import TransferSearchError
from transfersearch.fitting.findings import diagonal_runs
from transfersearch.observations import Observation
from transfersearch.scale import Scale
from transfersearch.space import Float, TransferSpace

__all__ = [
    "BASE",
    "DIVERGED_REGRET",
    "FAMILIES",
    "LADDER",
    "TOP",
    "Scenario",
    "Surface",
    "log_optimum",
    "make_scenario",
    "make_space",
    "regret",
]

#: Where the coordinates are defined.
BASE = Scale(width=64, dataset_size=2e4, batch_size=64)
#: Four rungs in cost order: (64, 2e4) < (128, 2e4) = (64, 8e4) < (256, 8e4); width and data vary.
LADDER: tuple[Scale, ...] = tuple(
    Scale(width=w, dataset_size=n, batch_size=64)
    for w, n in ((64, 2e4), (128, 2e4), (64, 8e4), (256, 8e4))
)
#: The largest rung.
TOP = LADDER[-1]


def make_space() -> TransferSpace:
    """The swept space: log-uniform base_lr in [1e-5, 1] and tau_epoch in [1e-2, 1e2]."""
    return TransferSpace(
        BASE,
        {"base_lr": Float(1e-5, 1.0, log=True), "tau_epoch": Float(1e-2, 1e2, log=True)},
    )


def log_optimum(scale: Scale) -> tuple[float, float]:
    """(log base_lr*, log tau_epoch*) at ``scale`` — the known law."""
    s = math.log(scale["width"] / 64)
    d = math.log(scale["dataset_size"] / 2e4)
    return math.log(3e-3) - 0.6 * s + 0.25 * d, 0.4 * s - 0.3 * d


def regret(scale: Scale, params: Mapping[str, float]) -> float:
    """Loss above the optimum: 0.5·(Δ log base_lr)² + 0.3·(Δ log tau_epoch)²."""
    lr_star, tau_star = log_optimum(scale)
    return (
        0.5 * (math.log(params["base_lr"]) - lr_star) ** 2
        + 0.3 * (math.log(params["tau_epoch"]) - tau_star) ** 2
    )


# ----------------------------------------------------------------------------------------------
# Scenario families: the developers' own suite (benchmarks/scenarios.py), one per failure class
# ----------------------------------------------------------------------------------------------
#: Loss per squared log-unit of the lr valley near its floor (the ½·h·d² term's h).
LR_CURVATURE = 0.1
#: The same for tau: a flatter direction, as in the measured demo and Step Law valleys.
TAU_CURVATURE = 0.05
#: Asymmetry of the lr wall: ``(exp(a·d) − 1 − a·d)/a²`` is ½d² at the floor, steeper above (a > 0).
LR_WALL = 1.5
#: The tau wall is steeper on the short-τ side (too much decay).
TAU_WALL = -0.5
#: Noise of one trial's loss (loss units) where a family does not say otherwise: a factor 1.5 off
#: the lr optimum costs ~0.008, so a rung of 12–20 trials locates its optimum, not exactly.
NOISE_SD = 0.005
#: lr above ``optimum · exp(gap)`` diverges; the gap where a family has no cliff to speak of.
FAR_GAP = math.log(8.0)
#: The loss recorded for a diverged target run when regret is scored: worse than any finite miss
#: the swept boxes allow (a 10× lr miss costs ½·0.1·ln(10)² ≈ 0.27 below the optimum).
DIVERGED_REGRET = 1.0


def _wall(delta: float, asymmetry: float) -> float:
    """``(exp(a·d) − 1 − a·d)/a²``: ½d² at the floor, the steeper side where ``a·d > 0``."""
    if asymmetry == 0.0:
        return 0.5 * delta * delta
    a_d = asymmetry * delta
    return (math.expm1(a_d) - a_d) / (asymmetry * asymmetry)


def _log_ratio(scale: Scale, base: Scale, name: str) -> float:
    return math.log(scale[name] / base[name])


@dataclass(frozen=True)
class Surface:
    """A true loss surface L(x, s) over (lr, tau) with a known optimum and divergence boundary.

    In log coordinates ``d = log x − log x*(s)``:
    ``L = depth(s) + h_lr·wall(d_lr − k·d_tau, 1.5) + h_tau·wall(d_tau, −0.5)`` (``k`` the tilt,
    0 in most families), minimal at ``d = 0``, and NaN
    where ``log lr > log lr*(s) + gap(s)``. The optimum follows
    ``log x*(s) = log x*(base) + Σ_v e_v·log(s_v / base_v)``; the gap follows
    ``gap(s) = gap0 · (Π_v s_v / base_v)^(−gap_shrink)`` (a cliff that closes in as scale grows when
    ``gap_shrink > 0``). Noise sd at a trial: ``noise_sd · (top_cost / cost(s))^noise_scale_exponent
    · (1 + noise_edge_slope·(|d_lr| + |d_tau|))`` (heteroscedastic when either is non-zero).

    Attributes:
        base: the scale the optimum ``lr0``/``tau0`` and the gap ``gap0`` refer to.
        lr0, tau0: the optimum at ``base``.
        lr_exponents, tau_exponents: the optimum's exponent per scale variable.
        gap0, gap_shrink: the divergence boundary's distance above the lr optimum (log units).
        noise_sd, noise_scale_exponent, noise_edge_slope: the noise model above.
        top_cost: the cost (:func:`~transfersearch.cost.default_cost`) where the scale factor is 1.
        tilt: how the lr optimum moves with tau off the optimum: the lr wall is taken at
            ``d_lr − tilt·d_tau`` (a valley whose axes are not the swept coordinates' — its
            off-diagonal curvature, which a one-at-a-time table never measures); 0: none.
    """

    base: Scale
    lr0: float
    tau0: float
    lr_exponents: Mapping[str, float]
    tau_exponents: Mapping[str, float]
    gap0: float = FAR_GAP
    gap_shrink: float = 0.0
    noise_sd: float = NOISE_SD
    noise_scale_exponent: float = 0.0
    noise_edge_slope: float = 0.0
    top_cost: float = 1.0
    tilt: float = 0.0

    def optimum(self, scale: Scale) -> dict[str, float]:
        """The true optimum {lr, tau} at ``scale`` (natural units)."""
        log_lr = math.log(self.lr0) + sum(
            e * _log_ratio(scale, self.base, v) for v, e in self.lr_exponents.items()
        )
        log_tau = math.log(self.tau0) + sum(
            e * _log_ratio(scale, self.base, v) for v, e in self.tau_exponents.items()
        )
        return {"lr": math.exp(log_lr), "tau": math.exp(log_tau)}

    def gap(self, scale: Scale) -> float:
        """Log distance from the lr optimum up to the divergence boundary at ``scale``."""
        size = sum(_log_ratio(scale, self.base, v) for v in self.base)
        return self.gap0 * math.exp(-self.gap_shrink * size)

    def boundary(self, scale: Scale) -> float:
        """The largest lr that does not diverge at ``scale`` (``tau`` plays no part)."""
        return self.optimum(scale)["lr"] * math.exp(self.gap(scale))

    def _deltas(self, scale: Scale, params: Mapping[str, float]) -> tuple[float, float]:
        best = self.optimum(scale)
        return (
            math.log(params["lr"]) - math.log(best["lr"]),
            math.log(params["tau"]) - math.log(best["tau"]),
        )

    def regret(self, scale: Scale, params: Mapping[str, float]) -> float:
        """True loss above the optimum at ``scale``; NaN when ``params`` diverge there."""
        if params["lr"] > self.boundary(scale):
            return math.nan
        d_lr, d_tau = self._deltas(scale, params)
        return LR_CURVATURE * _wall(d_lr - self.tilt * d_tau, LR_WALL) + TAU_CURVATURE * _wall(
            d_tau, TAU_WALL
        )

    def loss(self, scale: Scale, params: Mapping[str, float]) -> float:
        """The noiseless loss (a depth falling with scale plus the regret); NaN past the boundary."""
        size = sum(_log_ratio(scale, self.base, v) for v in self.base)
        return 2.0 + math.exp(-0.3 * size) + self.regret(scale, params)

    def noise(self, scale: Scale, params: Mapping[str, float]) -> float:
        """The noise sd of one trial at ``scale`` with ``params``."""
        d_lr, d_tau = self._deltas(scale, params)
        small = math.pow(self.top_cost / default_cost(scale), self.noise_scale_exponent)
        return self.noise_sd * small * (1.0 + self.noise_edge_slope * (abs(d_lr) + abs(d_tau)))

    def observe(
        self, scale: Scale, params: Mapping[str, float], rng: np.random.Generator
    ) -> Observation:
        """One trial: the loss plus Gaussian noise, or NaN (diverged) past the boundary."""
        value = self.loss(scale, params)
        if math.isfinite(value):
            value += float(rng.normal(0.0, self.noise(scale, params)))
        return Observation(scale, dict(params), value)


@dataclass(frozen=True)
class Scenario:
    """One seed of one family: the truth, the proxy trials and the target.

    Attributes:
        family: the family's name (:data:`FAMILIES`).
        seed: the seed that drew the truth's free constants, the trials and the noise.
        surface: the true loss surface.
        observations: the proxy trials, cheapest rung first.
        target: the scale to extrapolate to.
    """

    family: str
    seed: int
    surface: Surface
    observations: tuple[Observation, ...]
    target: Scale


#: The ladder most families use: width and data both vary (log correlation 0.8), cheapest first.
TWO_VARIABLE_LADDER: tuple[Scale, ...] = tuple(
    Scale(width=w, dataset_size=n) for w, n in ((64, 1e6), (128, 4e6), (256, 2e6), (512, 8e6))
)
#: Trials per rung, cheapest first: fewer at the top, where runs cost most.
TRIALS_PER_RUNG = (20, 16, 12, 8)


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _boxed_trials(
    surface: Surface,
    ladder: Sequence[Scale],
    trials: Sequence[int],
    rng: np.random.Generator,
    *,
    lr_box: tuple[float, float] | None = None,
    lr_span: float = 6.0,
    tau_span: float = 5.0,
) -> list[Observation]:
    """Log-uniform trials per rung in a box around the user's guess of that rung's optimum.

    The guess is the truth times a random factor (sd 0.25 in log units): a sampler or a user
    that recentres each rung, not perfectly. ``lr_box`` fixes the lr range at every rung instead.
    """
    out: list[Observation] = []
    for scale, count in zip(ladder, trials, strict=True):
        best = surface.optimum(scale)
        guess_lr = best["lr"] * math.exp(rng.normal(0.0, 0.25))
        guess_tau = best["tau"] * math.exp(rng.normal(0.0, 0.25))
        low, high = lr_box or (guess_lr / lr_span, guess_lr * lr_span)
        for _ in range(count):
            params = {
                "lr": _log_uniform(rng, low, high),
                "tau": _log_uniform(rng, guess_tau / tau_span, guess_tau * tau_span),
            }
            out.append(surface.observe(scale, params, rng))
    return out


def _drift(rng: np.random.Generator, centre: float, spread: float = 0.1) -> float:
    return float(centre + rng.uniform(-spread, spread))


def _surface(
    rng: np.random.Generator,
    ladder: Sequence[Scale],
    lr_exponents: Mapping[str, float],
    tau_exponents: Mapping[str, float],
    **options: float,
) -> Surface:
    return Surface(
        base=ladder[0],
        lr0=_log_uniform(rng, 1e-3, 1e-2),
        tau0=_log_uniform(rng, 0.3, 3.0),
        lr_exponents=dict(lr_exponents),
        tau_exponents=dict(tau_exponents),
        top_cost=default_cost(ladder[-1]),
        **options,
    )


def _box_drift(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = [Scale(width=w) for w in (64, 128, 256, 512)]
    surface = _surface(rng, ladder, {"width": -0.5}, {"width": 0.0})
    lr0 = surface.lr0
    box = (lr0 / 2.5, lr0 * 6.0)  # swept at every width; the 512 optimum (lr0/2.8) lies below it
    return (
        surface,
        _boxed_trials(surface, ladder, (16, 14, 12, 10), rng, lr_box=box),
        Scale(width=4096),
    )


def _cliff(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = TWO_VARIABLE_LADDER
    surface = _surface(
        rng,
        ladder,
        {"width": _drift(rng, -0.1), "dataset_size": _drift(rng, 0.0, 0.05)},
        {"width": _drift(rng, 0.0, 0.05), "dataset_size": _drift(rng, 0.0, 0.05)},
        gap0=math.log(4.0),
        gap_shrink=0.15,
    )
    target = Scale(width=4096, dataset_size=6.4e7)
    return surface, _boxed_trials(surface, ladder, TRIALS_PER_RUNG, rng), target


def _factor_two_grid(center: float, low: int, high: int) -> list[float]:
    return [center * 2.0**k for k in range(low, high + 1)]


def _sparse_top(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    """Dense factor-2 grids on the two cheap rungs; one-at-a-time sweeps around the best on the top."""
    ladder = TWO_VARIABLE_LADDER
    surface = _surface(
        rng,
        ladder,
        {"width": _drift(rng, -0.1, 0.05), "dataset_size": 0.0},
        {"width": 0.0, "dataset_size": _drift(rng, 0.0, 0.05)},
        gap0=math.log(1.8),
        gap_shrink=0.05,
    )
    lr_anchor = surface.lr0 * math.exp(rng.uniform(-0.35, 0.35))  # the grid's origin
    tau_anchor = surface.tau0 * math.exp(rng.uniform(-0.35, 0.35))
    out: list[Observation] = []
    for index, scale in enumerate(ladder):
        grid_lr = _factor_two_grid(lr_anchor, -5, 3)
        grid_tau = _factor_two_grid(tau_anchor, -3, 3)
        if index < 2:
            lrs = [lr for lr in grid_lr if surface.optimum(scale)["lr"] / 9 < lr]
            lrs = [lr for lr in lrs if lr < surface.optimum(scale)["lr"] * 5]
            taus = [t for t in grid_tau if abs(math.log(t / surface.optimum(scale)["tau"])) < 1.2]
            out += [surface.observe(scale, {"lr": lr, "tau": t}, rng) for lr in lrs for t in taus]
            continue
        # the best config a sweep of this rung would find: the finite grid point of least loss
        finite = [(lr, t) for lr in grid_lr for t in grid_tau if lr <= surface.boundary(scale)]
        best_lr, best_tau = min(
            finite, key=lambda p: surface.regret(scale, {"lr": p[0], "tau": p[1]})
        )
        sweep = [(best_lr * f, best_tau) for f in (0.5, 1.0, 2.0)]
        sweep += [(best_lr, best_tau * f) for f in (0.5, 2.0)]
        out += [surface.observe(scale, {"lr": lr, "tau": t}, rng) for lr, t in sweep]
    return surface, out, Scale(width=2048, dataset_size=3.2e7)


def _one_rung(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = TWO_VARIABLE_LADDER
    surface = _surface(
        rng,
        ladder,
        {"width": _drift(rng, -0.3), "dataset_size": _drift(rng, 0.1)},
        {"width": _drift(rng, 0.1), "dataset_size": _drift(rng, -0.2)},
    )
    out = _boxed_trials(surface, ladder[:1], (24,), rng)
    for scale in ladder[1:]:
        best = surface.optimum(scale)
        for _ in range(int(rng.integers(1, 3))):
            params = {k: v * math.exp(rng.normal(0.0, 0.4)) for k, v in best.items()}
            out.append(surface.observe(scale, params, rng))
    return surface, out, Scale(width=4096, dataset_size=6.4e7)


def _collinear(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = [Scale(width=w, dataset_size=w * 15625.0) for w in (64, 128, 256, 512)]
    surface = _surface(
        rng,
        ladder,
        {"width": _drift(rng, -0.3), "dataset_size": _drift(rng, 0.15)},
        {"width": _drift(rng, 0.2), "dataset_size": _drift(rng, -0.25)},
    )
    target = Scale(width=2048, dataset_size=1.28e8)  # 4x wider, 16x more data: off the line
    return surface, _boxed_trials(surface, ladder, TRIALS_PER_RUNG, rng), target


def _noisy(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = TWO_VARIABLE_LADDER
    surface = _surface(
        rng,
        ladder,
        {"width": _drift(rng, -0.15), "dataset_size": _drift(rng, 0.05)},
        {"width": _drift(rng, 0.05), "dataset_size": _drift(rng, -0.1)},
        noise_scale_exponent=0.25,
        noise_edge_slope=1.0,
    )
    target = Scale(width=4096, dataset_size=6.4e7)
    return surface, _boxed_trials(surface, ladder, TRIALS_PER_RUNG, rng), target


def _no_drift(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = TWO_VARIABLE_LADDER
    surface = _surface(rng, ladder, {"width": 0.0, "dataset_size": 0.0}, {"width": 0.0})
    target = Scale(width=4096, dataset_size=6.4e7)
    return surface, _boxed_trials(surface, ladder, TRIALS_PER_RUNG, rng), target


def _unvaried(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = [Scale(width=w, dataset_size=1e6) for w in (64, 128, 256, 512)]
    surface = _surface(
        rng,
        ladder,
        {"width": _drift(rng, 0.0, 0.05), "dataset_size": _drift(rng, 0.0, 0.3)},
        {"width": _drift(rng, 0.0, 0.05), "dataset_size": _drift(rng, 0.0, 0.3)},
    )
    target = Scale(width=4096, dataset_size=1.6e7)  # 8x wider, 16x the data the ladder never varied
    return surface, _boxed_trials(surface, ladder, TRIALS_PER_RUNG, rng), target


def _tilted(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    ladder = TWO_VARIABLE_LADDER
    surface = _surface(
        rng,
        ladder,
        {"width": _drift(rng, -0.1), "dataset_size": _drift(rng, 0.05)},
        {"width": _drift(rng, 0.05), "dataset_size": _drift(rng, -0.05)},
        tilt=float(rng.uniform(0.3, 0.7)),
    )
    out = []
    for scale in ladder:  # a one-at-a-time table through a known-good run, ~40% off the optimum
        guess = {k: v * math.exp(rng.normal(0.0, 0.35)) for k, v in surface.optimum(scale).items()}
        runs = [{"lr": guess["lr"] * 2.0**i, "tau": guess["tau"]} for i in range(-3, 3)]
        runs += [{"lr": guess["lr"], "tau": guess["tau"] * 2.0**j} for j in (-3, -2, -1, 1, 2, 3)]
        out += [surface.observe(scale, params, rng) for params in runs]
    return surface, out, Scale(width=4096, dataset_size=6.4e7)


def _tilted_diagonals(rng: np.random.Generator) -> tuple[Surface, list[Observation], Scale]:
    """``tilted``'s scenario (drawn from its stream: the same truth, crosses and noise) with the
    runs ``summary()``'s ``interaction`` note asks for added on every rung: the values the rung
    ran next to its best finite trial's, in both lr and tau (:func:`~transfersearch.fitting.
    findings.diagonal_runs`; four where the best is inside both sweeps), their noise drawn after
    everything ``tilted`` draws."""
    surface, out, target = _tilted(rng)
    extra = []
    for scale in dict.fromkeys(o.scale for o in out):
        rung = [o for o in out if o.scale == scale and math.isfinite(o.value)]
        coords = np.log([[o.params["lr"], o.params["tau"]] for o in rung])
        values = np.array([o.value for o in rung])
        for lr, tau in diagonal_runs(coords, values, 0, 1):
            extra.append(surface.observe(scale, {"lr": math.exp(lr), "tau": math.exp(tau)}, rng))
    return surface, out + extra, target


_Generator = Callable[[np.random.Generator], tuple[Surface, list[Observation], Scale]]

#: The families, by name: what each stresses, and its generator.
FAMILIES: dict[str, tuple[str, _Generator]] = {
    "box_drift": (
        "the same lr range swept at every width while the optimum moves as width^-0.5 and "
        "leaves the box at the top rung; target 8x wider",
        _box_drift,
    ),
    "cliff": (
        "a divergence boundary 4x above the lr optimum at the smallest rung that closes in as "
        "scale grows (2.1x at the top rung, 1.5x at the target, 8x wider with 8x the data); the "
        "lr optimum drifts as width^-0.1 (±0.1); trials past the boundary are NaN",
        _cliff,
    ),
    "sparse_top": (
        "factor-2 grids on the two cheap rungs; on the two top rungs one-at-a-time factor-2 "
        "sweeps around the best finite grid point, where the next lr up usually diverged (a "
        "boundary 1.8x above the optimum at the smallest rung, 1.6x at the top, 1.5x at the "
        "target); target 4x wider with 4x the data",
        _sparse_top,
    ),
    "one_rung": (
        "24 trials on the smallest rung, 1-2 trials on each larger rung, the optimum drifting "
        "with width and data; target 8x/8x",
        _one_rung,
    ),
    "collinear": (
        "data grows with width along the ladder (log correlation 1); target 4x wider with 16x "
        "the data, off the ladder's line",
        _collinear,
    ),
    "noisy": (
        "noise growing at small scale (∝ cost^-0.25) and toward the edges of the box "
        "(×(1 + |Δlog lr| + |Δlog tau|)); a mild drift",
        _noisy,
    ),
    "no_drift": (
        "the optimum constant in the swept coordinates (invariant coordinates working as "
        "promised); target 8x/8x",
        _no_drift,
    ),
    "unvaried": (
        "the ladder varies width only, at one dataset size, and the optimum barely moves with "
        "width (exponents in ±0.05: invariant coordinates working along it); the target is 8x "
        "wider with 16x the data, and the optimum moves with data by exponents drawn in ±0.3 "
        "that no rung shows",
        _unvaried,
    ),
    "tilted": (
        "every rung a one-at-a-time table (lr at 6 factor-2 values, tau at 7) through a "
        "known-good run ~40% off the optimum, on a valley whose lr optimum moves with tau "
        "(tilt 0.3-0.7: the lr wall at d_lr − k·d_tau), which no cross measures; a mild drift; "
        "target 8x/8x",
        _tilted,
    ),
    "tilted_diagonals": (
        "`tilted`'s scenarios, seed for seed (the same truth, crosses and noise), with the runs "
        "the `interaction` note asks for added on every rung (next to its best trial in both lr "
        "and tau, four where the best is inside both sweeps): they measure the tilt",
        _tilted_diagonals,
    ),
}
#: Each family's stream of random numbers, fixed when it was added (a new family goes last, so
#: the seeds of the others keep drawing the same scenarios).
SEED_ORDER: tuple[str, ...] = (
    "box_drift",
    "cliff",
    "collinear",
    "no_drift",
    "noisy",
    "one_rung",
    "sparse_top",
    "unvaried",
    "tilted",
)
#: Families drawn from another's stream, seed for seed: a variant of its sweep on the same truths.
SHARED_STREAM: dict[str, str] = {"tilted_diagonals": "tilted"}


def make_scenario(family: str, seed: int) -> Scenario:
    """Draw one seed of a family: its truth's free constants, its trials (with noise), its target.

    Deterministic: the same ``(family, seed)`` gives the same scenario.

    Raises:
        TransferSearchError: ``family`` is not one of :data:`FAMILIES`.
    """
    if family not in FAMILIES:
        raise TransferSearchError(
            f"`family` must be one of {sorted(FAMILIES)}, but got family={family!r}."
        )
    offset = SEED_ORDER.index(SHARED_STREAM.get(family, family))
    rng = np.random.default_rng([seed, offset])
    surface, observations, target = FAMILIES[family][1](rng)
    return Scenario(family, seed, surface, tuple(observations), target)

"""One model of every trial: a valley whose centre moves with scale (docs/science.md §7).

Every finite trial ``i`` (fitted coordinates ``x_i``, minimisation-sign loss ``y_i``, rung ``r``)
is one observation of

    y_i = c_r + ½ (x_i − μ_r)ᵀ H (x_i − μ_r) + Σ_j κ_j c(x_ij − μ_rj) + e_i,
    e_i ~ N(0, σ² + ρ² E_i²),   μ_r = μ(ℓ_r) + η_r,   μ(ℓ) = a + B (ℓ − ℓ̄),   η_r ~ N(0, τ²),

with ``ℓ`` the log scale variables, ``E_i`` the trial's excess over its rung's fitted bottom and
``κ_j c(t)`` the skew (``c(t) = t³/6`` continued by its tangent where the valley could stop being
convex, :func:`cubic`; docs/science.md §7.1), taken about the centres of the round before so that
it too is linear in ``θ``.
Expanding the square, the rung's constant absorbs ``½μ_rᵀHμ_r`` and the model is *linear* in
``θ = (c_r, H, g_r = Hμ_r, g = Ha, G = HB)``: ``y_i = c'_r + ½ x_iᵀ H x_i − x_iᵀ g_r`` (§7.1), the
law entering as the Gaussian prior ``g_r ~ N(g + G(ℓ_r − ℓ̄), τ²HH)``. Given the weights it is a
weighted least-squares problem with a Gaussian prior, solved in closed form.

* The valley is local by its likelihood, not by a tuned band: the quadratic is a second-order
  expansion whose error grows with the distance from the optimum, so a trial's misfit has the
  standard deviation ``√(σ² + ρ²E²)`` — near-optimal trials weigh ``1/σ²``, far ones ``1/(ρE)²``
  (their *relative* error counts). ``E`` is measured (not the model's prediction, which a
  misplaced centre would bias). ``σ`` and ``ρ`` are fitted by restricted maximum likelihood,
  each trial's log-variance counted by its residual degrees of freedom ``1 − h_i`` (§7.2).
* The drift ``B`` has the prior ``N(B₀, s²)`` per exponent, centred on theory's drift (0 in
  invariant coordinates, the published exponents in raw ones when the caller gives them); the
  scale ``s`` and the rungs' scatter ``τ`` are integrated over log-uniform hyperpriors by
  quadrature, each grid point weighted by its marginal likelihood (closed form for the linear
  model). ``s → 0`` is the no-drift model, nested (§7.3).
* Posterior draws of ``θ`` give draws of the optimum at any scale, ``H⁻¹(g + Gℓ̃)`` plus the
  scatter.

Pure numpy; every array is in *standardised* coordinates ``u = (x − x₀)/x_s`` (:class:`Frame`)
so one prior scale fits every parameter; :class:`Frame` converts back.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from scipy.linalg.lapack import dtrtri

from transfersearch.fitting.coords import FloatArray, covariance_factor, gaussian_draws

logger = logging.getLogger(__name__)

__all__ = [
    "DRIFT_SCALE_MAX",
    "DRIFT_SCALE_MIN",
    "DriftPrior",
    "Frame",
    "Shape",
    "Valley",
    "ValleyInput",
    "cubic_slope",
    "fit_valley",
    "own_optimum",
    "robust_sd",
    "span_basis",
]

#: The log-uniform hyperprior on the drift prior's scale ``s`` (natural fitted units per unit of
#: ln scale) starts here: a drift of 0.01 moves an optimum by under 5% across a 100× ladder,
#: below what any sweep resolves, so smaller scales are all "no drift".
DRIFT_SCALE_MIN = 0.01
#: ... and ends here: larger than every published optimum-vs-scale exponent (|e| ≤ 0.71 in
#: docs/science.md §6), so the hyperprior covers every drift seen in practice.
DRIFT_SCALE_MAX = 1.0
#: A direction of the rungs' log scales whose singular value is below this share of the largest
#: is not one the ladder varies (round-off: a collinear ladder's second value is ~1e-16).
SPAN_TOL = 1e-6
#: Quadrature points of the hyperprior (log-spaced; the marginal likelihood varies smoothly in
#: log s, so a handful resolves it).
DRIFT_GRID_POINTS = 9
#: A curvature below this many noise standard deviations per squared standardised unit changes
#: the loss by less than the noise across the trials' span (±2 standardised units): the data
#: cannot tell it from flat, and the curvature is held there (the direction is then "flat").
FLAT_CURVATURE = 0.5
#: The diagonal curvatures' prior ``N(h₀, h₀²)``, ``h₀`` = this × the values' spread × (2/w)²
#: (standardised units, :func:`_typical_curvature`): ``½h₀w² = `` the spread, the loss rising by
#: its own spread at the edge of a rung's trials, ``w`` from its centre — what a sweep that
#: brackets its optimum shows.
CURVATURE_PRIOR = 0.5
#: Prior on an off-diagonal curvature: ``H_jk ~ N(0, (c·√(H_jj H_kk))²)``: axes a priori
#: independent, with ±2 sd inside the positive-definite range |corr| < 1.
OFFDIAGONAL_PRIOR_CORRELATION = 0.5
#: A "flat" prior on an unbounded linear parameter (intercepts, depths, slopes): its precision,
#: in units of the largest |value| about the values' median (:func:`_flat_precision`: a loss
#: reported ×1000, or offset by 10⁹, gets the same fit). Tiny against any data's; the same for every drift scale, so it cancels from the
#: marginal likelihood's comparison.
FLAT_PRECISION = 1e-8
#: The box prior: a rung's optimum ~ N(middle of its trials, (this × their range)²) per
#: coordinate — the sweep's own design says where its author expected the optimum, and ±2 sd
#: reach half a range past each edge (an optimum farther out is a priori 2.5% likely).
BOX_PRIOR_SD = 0.5
#: A rung's trials bracket its optimum along a coordinate only with this many distinct values:
#: three are the fewest that can show a minimum between them (down, then up); with one or two
#: the box prior takes the whole sweep's range (:func:`_boxes`).
BRACKET_VALUES = 3
#: A rung whose trials span less than this fraction of the whole sweep's range in a coordinate
#: does not vary it (single precision's resolution, as :data:`NOISE_FLOOR`): a box prior on such
#: a range (round-off, e.g. 1e-16) would have a precision of 1e32 and make the rung's posterior
#: singular (a LinAlgError out of ``extrapolate``).
SAME_VALUE = 1e-6
#: How far (in box-prior sds of the whole sweep's range) a drawn optimum may lie from the
#: posterior-mean one: a draw past it comes from a near-flat curvature draw (``H⁻¹g`` of a
#: nearly singular ``H`` runs off without bound) that the data do not place, and the box prior
#: gives such a distance a mass below 1e-4 (4 sd); it is held there.
PRIOR_REACH = 4.0
#: How many times a draw whose curvature is not positive-definite is drawn again
#: (:meth:`Valley.draws`): at an acceptance rate of one half, 2⁻⁸ of the draws stay floored.
REDRAWS = 8
#: The log-uniform hyperprior on τ, the rungs' scatter about the law (standardised units: a
#: fraction of the trials' spread): from 1% of it (no scatter) ...
SCATTER_MIN = 0.01
#: ... to the whole spread (the rungs tell the law nothing).
SCATTER_MAX = 1.0
#: Quadrature points of the scatter's hyperprior.
SCATTER_GRID_POINTS = 5
#: The prior sd that holds a fixed exponent (natural units): exact to six decimals.
FIXED_SD = 1e-6
#: A curvature below this fraction of the largest scales no prior (numerical conditioning).
CONDITION_FLOOR = 1e-6
#: The noise is at least this fraction of the values' spread: noise-free trials get a floor
#: instead of weights of 1/0 — about single precision's resolution of a loss that varies over its
#: spread (relative, so the metric's units and offset do not matter). The relative misfit
#: starts at least at :data:`MISFIT_START`.
NOISE_FLOOR = 1e-6
MISFIT_START = 1e-3
#: ρ is a trial's misfit per unit of its excess over the bottom: at 1 the quadratic explains
#: nothing of a far trial's value (its misfit as large as its whole excess), so larger values
#: are outside the model; the noise fit keeps ρ ≤ 1, and ≥ this (indistinguishable from 0).
MISFIT_MAX = 1.0
MISFIT_MIN = 1e-9
#: The noise fit's Newton iterations (:func:`_box_newton`): at most this many steps; it stops
#: when a step moves ``ln σ`` and ``ln ρ`` by less than the tolerance (a relative change of
#: 10⁻⁸, far below σ's own standard error ``1/√(2n)``); a Hessian eigenvalue below the floor ×
#: the largest is raised to it (a nearly flat direction takes a bounded step, not 1/0).
NEWTON_STEPS = 100
NEWTON_TOL = 1e-8
NEWTON_FLOOR = 1e-8
#: A step is taken when it lowers the value by at least this share of what the slope promises
#: (Armijo's sufficient decrease; the customary 10⁻⁴ of Nocedal & Wright, *Numerical
#: Optimization*, 2nd ed., §3.1), else halved, at most this many times (2⁻⁶⁰ of a step is below
#: a double's resolution of it).
ARMIJO = 1e-4
NEWTON_HALVINGS = 60
#: ``|ln σ| ≤`` this where no bound is given: ``σ² = e^{2 ln σ}`` stays a finite, normal double.
NOISE_LOG_REACH = 300.0
#: The skew's prior: ``κ_j ~ N(0, (c·H_jj)²)`` per coordinate (standardised units). Past its turn
#: (:func:`turns`; ``t = −H_jj/κ_j`` in one dimension) the valley is continued by a tangent
#: (:func:`cubic`), a cruder shape; a priori (two sd) that point lies no nearer than the sweep's
#: edge, two standardised units from the optimum: ``2c ≤ 1/2``. A skew the data insist on (a
#: valley clearly steeper on one side, as lr's is near divergence) overrides it.
SKEW_PRIOR = 0.25
#: At most this many rounds of (solve, re-fit σ and ρ, re-weight, re-centre the priors on the
#: new curvature and the skew on the new centres); they stop once σ, ρ, the curvature and the
#: rungs' centres move by less than σ's own relative standard error, ``1/√(2n)`` for ``n`` trials
#: (a further move is within what the data say). Counted on the benchmarks' fits (folds
#: included), the median fit settles in 9–16 rounds and nine in ten within 35; 30 stopped one
#: Step Law dense walk-forward fold (476 trials) still approaching its fixed point (σ 5% a round)
#: and Marin Lion 300M's main fit (it settles in 56); every fit not settled by 100 cycled
#: (``settled`` False, said in ``summary()``).
MAX_ROUNDS = 100
#: While the weights are re-fitted, only the hyperprior's grid points that hold at least this
#: posterior weight are solved (the rest move θ's posterior mean by less than this fraction);
#: the final solve covers the whole grid again.
ACTIVE_WEIGHT = 1e-3
#: A held exponent is held to this relative precision (the curvature the prior is built on
#: against the posterior's: ``B = H⁻¹G`` then moves by about as much).
HELD_TOLERANCE = 1e-4


@dataclass(frozen=True)
class ValleyInput:
    """The trials as the valley takes them (fitted coordinates, minimisation sign).

    Attributes:
        coords: (n, d) every finite trial's coordinates.
        values: (n,) their losses.
        rung: (n,) each trial's rung index.
        log_scales: (R, m) ln of each rung's scale variables.
        prior_drift: (d, m) the drift prior's mean ``B₀`` (natural fitted units per ln scale).
        fixed_drift: (d, m) True where the exponent is held exactly at ``B₀``.
        anchor: (d,) where the space's rule places each coordinate's optimum at every rung
            (fitted units; NaN: nowhere), the box prior's centre there (:func:`_boxes`); None
            for none.
    """

    coords: FloatArray
    values: FloatArray
    rung: np.ndarray
    log_scales: FloatArray
    prior_drift: FloatArray
    fixed_drift: np.ndarray
    anchor: FloatArray | None = None


@dataclass(frozen=True)
class Frame:
    """Standardised coordinates: ``u = (x − origin)/spread``; ``ℓ̃ = ℓ − scale_centre``."""

    origin: FloatArray
    spread: FloatArray
    scale_centre: FloatArray

    def to_u(self, x: FloatArray) -> FloatArray:
        return (x - self.origin) / self.spread

    def to_x(self, u: FloatArray) -> FloatArray:
        return self.origin + u * self.spread

    def hessian_x(self, hess_u: FloatArray) -> FloatArray:
        """A curvature in standardised units, in fitted units."""
        inv = 1.0 / self.spread
        return hess_u * inv[:, None] * inv[None, :]


@dataclass(frozen=True)
class Shape:
    """What a fit settled on besides ``θ``, in fitted units, for a fit that holds it
    (docs/science.md §7.5): the noise σ and relative misfit ρ, each rung's bottom (a trial's
    excess is measured from it: with σ and ρ, the weights), each rung's centre (the skew is
    taken about it) and where the skew turns to its tangent, and the curvature ``H`` the
    priors start from."""

    sigma: float
    rho: float
    hess: FloatArray
    centres: FloatArray
    bottoms: FloatArray
    turn: FloatArray


def _frame(data: ValleyInput) -> Frame:
    """The origin is the last rung's best trial (the mean of those that tie for it, so the
    rows' order never moves the fit); the spread each coordinate's sd over every trial."""
    top = np.where(data.rung == data.rung.max(), data.values, np.inf)
    origin = data.coords[top == top.min()].mean(axis=0)
    spread = data.coords.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    return Frame(origin, spread, data.log_scales.mean(axis=0))


def _pairs(d: int) -> list[tuple[int, int]]:
    return [(j, k) for j in range(d) for k in range(j, d)]


@dataclass(frozen=True)
class _Layout:
    """Where each block of ``θ`` sits: rung constants, curvature entries, each rung's gradient
    ``g_r = Hμ_r`` (rung-major), the law's ``g`` and ``G`` (row-major d×m), the skews."""

    n_rungs: int
    d: int
    m: int

    @property
    def n_curv(self) -> int:
        return self.d * (self.d + 1) // 2

    @property
    def curv(self) -> slice:
        return slice(self.n_rungs, self.n_rungs + self.n_curv)

    def rung_grad(self, rung: int) -> slice:
        start = self.n_rungs + self.n_curv + rung * self.d
        return slice(start, start + self.d)

    @property
    def grad(self) -> slice:
        start = self.n_rungs + self.n_curv + self.n_rungs * self.d
        return slice(start, start + self.d)

    @property
    def drift(self) -> slice:
        start = self.grad.stop
        return slice(start, start + self.d * self.m)

    @property
    def skew(self) -> slice:
        """The skews ``κ_j`` (one per coordinate, shared by every rung)."""
        return slice(self.drift.stop, self.drift.stop + self.d)

    @property
    def size(self) -> int:
        return int(self.skew.stop)


def cubic(gap: FloatArray, turn: FloatArray) -> FloatArray:
    """The skew's shape ``t³/6`` per coordinate, continued by its tangent past ``turn`` (where
    the valley could stop being convex, :func:`turns`): the valley keeps rising on its gentle
    side instead of turning down (docs/science.md §7.1). Broadcasts.

    With ``c`` the gap held at the turn (``c = t`` before it), both pieces are
    ``c³/6 + c²/2·(t − c) = c²(t/2 − c/3)``: one expression, no temporaries per piece."""
    held = _held_at_turn(gap, turn)
    out = held * (-1.0 / 3.0)  # in place from here: the decision calls this on (P, S, d) gaps
    out += 0.5 * gap
    out *= held
    out *= held
    return np.asarray(out)


def cubic_slope(gap: FloatArray, turn: FloatArray) -> FloatArray:
    """The derivative of :func:`cubic`: ``c²/2`` with ``c`` the gap held at the turn (the
    cubic's ``t²/2``, then its tangent's constant slope). Broadcasts."""
    held = _held_at_turn(gap, turn)
    return np.asarray(0.5 * held * held)


def _held_at_turn(gap: FloatArray, turn: FloatArray) -> FloatArray:
    """The gap, held at ``turn`` past it (±inf: no turn; a turn of 0 counts as none). The
    bounds are built on ``turn``'s own (small) shape, so the gap's (large) array sees two
    passes."""
    low = np.where(turn < 0, turn, -np.inf)
    high = np.where(turn > 0, turn, np.inf)
    held = np.asarray(np.maximum(gap, low))  # an array even for scalars: ``out=`` needs one
    return np.asarray(np.minimum(held, high, out=held))


def turns(hess: FloatArray, skew: FloatArray) -> FloatArray:
    """``−r·H_jj/κ_j`` with ``r`` the least eigenvalue of ``H``'s correlation matrix (±inf where
    κ_j = 0), batched. ``H = D½ R D½`` with ``D = diag(H)``: while every ``κ_j t_j ≥ −r H_jj``,
    ``H + diag(κ_j t_j) = D½ (R + diag(κ_j t_j / H_jj)) D½`` is positive semi-definite, so the
    valley is convex everywhere (in one dimension ``r = 1``: the turn is where
    ``½H t² + κ t³/6`` stops being convex)."""
    diag = np.diagonal(hess, axis1=-2, axis2=-1)
    root = np.sqrt(diag)
    corr = hess / (root[..., :, None] * root[..., None, :])
    least = np.linalg.eigvalsh(corr)[..., :1]
    with np.errstate(divide="ignore"):
        return np.asarray(
            np.where(skew != 0, -least * diag / np.where(skew != 0, skew, 1.0), np.inf)
        )


@dataclass(frozen=True)
class _Design:
    """The linear model's rows ``Φ`` (n, p) kept by rung, each rung's rows only in the columns
    they touch (its constant, the curvatures, its own gradient, the skews: ``1 + d(d+1)/2 + 2d``
    of the ``p``), so the products the alternation takes every round cost ``n·k²``, not
    ``n·p²``."""

    blocks: tuple[FloatArray, ...]  # per rung (n_r, k): its rows' nonzero part
    rows: tuple[slice | np.ndarray, ...]  # per rung: where its rows sit among the n
    columns: tuple[np.ndarray, ...]  # per rung (k,): the columns of Φ the block fills
    n: int
    size: int
    features: FloatArray  # (n, k) every row's nonzero part in trial order (the blocks' source)
    squares: tuple[tuple[np.ndarray, ...], ...]  # per rung: np.ix_(columns, columns)

    def reskewed(
        self, u: FloatArray, rung: np.ndarray, centres: FloatArray, turn: FloatArray
    ) -> _Design:
        """The same rows with the skews' cubic taken about ``centres`` (the last ``d`` columns):
        the rest depends on the trials alone, so a round of the alternation copies it instead of
        building it again."""
        features = self.features.copy()
        features[:, -u.shape[1] :] = cubic(u - centres[rung], turn)
        blocks = tuple(features[r] for r in self.rows)
        return _Design(blocks, self.rows, self.columns, self.n, self.size, features, self.squares)

    def times(self, theta: FloatArray) -> FloatArray:
        """``Φθ`` (n,)."""
        out = np.empty(self.n)
        for block, rows, cols in zip(self.blocks, self.rows, self.columns):
            out[rows] = block @ theta[cols]
        return out

    def dense(self) -> FloatArray:
        """``Φ`` (n, p) in full."""
        phi = np.zeros((self.n, self.size))
        for block, rows, cols in zip(self.blocks, self.rows, self.columns):
            phi[np.arange(self.n)[rows][:, None], cols[None, :]] = block
        return phi


def _rung_rows(rung: np.ndarray, n_rungs: int) -> tuple[slice | np.ndarray, ...]:
    """Each rung's rows: a slice where they are contiguous (a view, not a copy)."""
    out: list[slice | np.ndarray] = []
    for r in range(n_rungs):
        idx = np.flatnonzero(rung == r)
        contiguous = len(idx) > 0 and idx[-1] - idx[0] + 1 == len(idx)
        out.append(slice(int(idx[0]), int(idx[-1]) + 1) if contiguous else idx)
    return tuple(out)


def _design(
    u: FloatArray,
    rung: np.ndarray,
    lay: _Layout,
    centres: FloatArray | None = None,
    turn: FloatArray | None = None,
) -> _Design:
    """Rows of the linear model: ``[e_r, ½u_j² | u_j u_k, −u at rung r's gradient, the skews'
    cubic about the rung's centre]``; the law's ``g`` and ``G`` enter through the prior only.
    Without ``centres`` (the first round) the skew columns are 0."""
    d, n_curv = lay.d, lay.n_curv
    features = np.empty((len(u), 1 + n_curv + 2 * d))
    features[:, 0] = 1.0
    for col, (j, k) in enumerate(_pairs(d)):
        features[:, 1 + col] = 0.5 * u[:, j] ** 2 if j == k else u[:, j] * u[:, k]
    features[:, 1 + n_curv : 1 + n_curv + d] = -u
    if centres is not None and turn is not None:
        features[:, 1 + n_curv + d :] = cubic(u - centres[rung], turn)
    else:
        features[:, 1 + n_curv + d :] = 0.0
    rows = _rung_rows(rung, lay.n_rungs)
    shared = np.arange(lay.curv.start, lay.curv.stop)
    skews = np.arange(lay.skew.start, lay.skew.stop)
    columns = tuple(
        np.concatenate(
            [[r], shared, np.arange(lay.rung_grad(r).start, lay.rung_grad(r).stop), skews]
        )
        for r in range(lay.n_rungs)
    )
    squares = tuple(np.ix_(c, c) for c in columns)
    blocks = tuple(features[r] for r in rows)
    return _Design(blocks, rows, columns, len(u), lay.size, features, squares)


def curvature(theta: FloatArray, lay: _Layout) -> FloatArray:
    """``H`` from ``θ`` (..., d, d)."""
    entries = theta[..., lay.curv]
    hess = np.zeros((*theta.shape[:-1], lay.d, lay.d))
    for col, (j, k) in enumerate(_pairs(lay.d)):
        hess[..., j, k] = entries[..., col]
        hess[..., k, j] = entries[..., col]
    return hess


def _positive(hess: FloatArray, floor: float) -> FloatArray:
    """``H`` with its eigenvalues raised to ``floor`` (a flat or saddle direction held flat)."""
    values, vectors = np.linalg.eigh(hess)
    values = np.maximum(values, floor)
    return np.asarray((vectors * values[..., None, :]) @ np.swapaxes(vectors, -1, -2))


def law_gradient(theta: FloatArray, lay: _Layout, scale: FloatArray) -> FloatArray:
    """``g + G ℓ̃`` for each ``θ`` (..., d)."""
    drift = theta[..., lay.drift].reshape(*theta.shape[:-1], lay.d, lay.m)
    return np.asarray(theta[..., lay.grad] + drift @ scale)


def solve_centre(hess: FloatArray, gradient: FloatArray) -> FloatArray:
    """The valley's minimum ``H⁻¹g``, batched."""
    return np.asarray(np.linalg.solve(hess, gradient[..., None])[..., 0])


@dataclass(frozen=True)
class _Component:
    """The posterior at one (drift scale, scatter) grid point: mean, covariance, evidence."""

    drift_scale: float
    scatter: float
    mean: FloatArray
    cov: FloatArray
    log_evidence: float

    @cached_property
    def factor(self) -> FloatArray | None:
        """``cov``'s Cholesky factor, kept for the fit's several rounds of draws."""
        return covariance_factor(self.cov)


@dataclass(frozen=True)
class DriftPrior:
    """The drift prior the posterior was solved under (standardised units), for the draws off
    the ladder's span (:meth:`Valley.law_draws`).

    Attributes:
        hess: (d, d) the curvature the prior ``G = HB_u`` is built on.
        mean: (d, m) ``B₀_u``, the prior mean of the exponents.
        held: (d, m) True where an exponent is held at ``B₀`` (sd :data:`FIXED_SD`).
        integrated: whether the scale ``s`` was integrated over its hyperprior (False: the
            no-drift model, every exponent held).
        across: (m, m) the projector on the directions of log scale the rungs do not vary
            (:func:`span_basis`), or None where they vary every one.
    """

    hess: FloatArray
    mean: FloatArray
    held: np.ndarray
    integrated: bool
    across: FloatArray | None


def span_basis(rung_logs: FloatArray) -> FloatArray:
    """(k, m) orthonormal rows spanning the rungs' log scales about their mean (k = 0: one
    scale): the directions the ladder varies, which walk-forward folds and the rungs' drift
    inform (docs/science.md §7.3, §7.5)."""
    spread = rung_logs - rung_logs.mean(axis=0)
    if not spread.any():
        return np.zeros((0, rung_logs.shape[1]))
    _, sing, basis = np.linalg.svd(spread, full_matrices=False)
    return np.asarray(basis[sing > SPAN_TOL * sing[0]])


def _across(rung_logs: FloatArray) -> FloatArray | None:
    """The projector on the directions of log scale the rungs leave out (None: none)."""
    basis = span_basis(rung_logs)
    if len(basis) == rung_logs.shape[1]:
        return None
    return np.asarray(np.eye(rung_logs.shape[1]) - basis.T @ basis)


@dataclass(frozen=True, eq=False)
class Valley:
    """The posterior of the one model (standardised units; :attr:`frame` converts).

    Attributes:
        frame: the standardisation.
        components: one Gaussian posterior per (drift scale, scatter) point of the quadrature.
        weights: their posterior weights (sum 1).
        theta: the posterior mean (the weighted mean of the components').
        noise_sd: σ, the trials' noise near the bottom (loss units).
        relative_misfit: ρ, the quadratic's misfit per unit of a trial's excess.
        settled: whether the alternation of §7.2 reached its fixed point within
            :data:`MAX_ROUNDS` (False: it cycled, and was solved at its most likely state).
        floor: the flat-curvature floor in standardised units (:data:`FLAT_CURVATURE` σ).
        reach: (d,) how far a drawn optimum may lie from the posterior-mean one (standardised;
            :data:`PRIOR_REACH`).
        span: (2, d) the trials' least and greatest standardised coordinates, widened by
            ``reach``: a posterior-mean optimum is held inside (:meth:`_centre`).
        n_rungs, d, m: sizes.
        prior: the drift prior (:class:`DriftPrior`).
        level: the values' median, subtracted before the fit (:func:`_problem`): ``θ``'s
            rung depths are relative to it; :meth:`value_u` adds it back.
    """

    frame: Frame
    components: tuple[_Component, ...]
    weights: FloatArray
    theta: FloatArray
    noise_sd: float
    relative_misfit: float
    settled: bool
    floor: float
    reach: FloatArray
    span: FloatArray
    n_rungs: int
    d: int
    m: int
    prior: DriftPrior
    level: float = 0.0

    @property
    def layout(self) -> _Layout:
        return _Layout(self.n_rungs, self.d, self.m)

    @cached_property
    def hessian_u(self) -> FloatArray:
        """The posterior mean quadratic curvature, held positive-definite (standardised); read
        by every read-out of the posterior mean, so computed once (read-only)."""
        hess = _positive(curvature(self.theta, self.layout), self.floor)
        hess.flags.writeable = False
        return hess

    @property
    def skew_u(self) -> FloatArray:
        """The posterior mean skews ``κ`` (standardised units)."""
        return np.asarray(self.theta[self.layout.skew])

    def curvatures_u(self, thetas: FloatArray) -> FloatArray:
        """Each draw's curvature, held positive-definite (standardised units)."""
        return _positive(curvature(thetas, self.layout), self.floor)

    def _centre(self, thetas: FloatArray, gradient: FloatArray) -> FloatArray:
        """``H⁻¹g``, held within :attr:`span`: past it lies only a valley whose curvature is flat
        (or nearly singular) in some direction, where ``H⁻¹g`` runs off without bound and the box
        prior gives the distance a mass below 1e-4 (:data:`PRIOR_REACH`)."""
        hess = self.hessian_u if thetas is self.theta else self.curvatures_u(thetas)
        return np.asarray(np.clip(solve_centre(hess, gradient), *self.span))

    def law_centre_u(self, log_scale: FloatArray) -> FloatArray:
        """The law's posterior-mean optimum at a scale (standardised units)."""
        grad = law_gradient(self.theta, self.layout, log_scale - self.frame.scale_centre)
        return self._centre(self.theta, grad)

    def law_centre_held(self, log_scale: FloatArray) -> FloatArray:
        """Which coordinates of the law's optimum at a scale :meth:`law_centre_u` holds at the
        edge of :attr:`span` (the law, unheld, puts them farther: a mass below 1e-4 there)."""
        grad = law_gradient(self.theta, self.layout, log_scale - self.frame.scale_centre)
        free = solve_centre(self.hessian_u, grad)
        return np.asarray((free < self.span[0]) | (free > self.span[1]))

    def rung_centre_u(self, rung: int) -> FloatArray:
        """A rung's own posterior-mean optimum (the law plus its scatter), standardised."""
        return self._centre(self.theta, self.theta[self.layout.rung_grad(rung)])

    def draws(self, n: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
        """``n`` posterior draws of ``θ`` and each one's scatter τ (components in proportion).

        A valley has a positive-definite curvature: a draw whose curvature is not (an
        off-diagonal the data never measured, drawn past ``|corr| = 1``) is outside the model's
        support and is drawn again (the Gaussian posterior truncated to valleys), up to
        :data:`REDRAWS` times; one still left is floored by :meth:`curvatures_u`."""
        thetas, taus, _ = self._draws(n, rng)
        return thetas, taus

    def _draws(self, n: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:meth:`draws`, and each draw's drift scale ``s`` (its component's)."""
        counts = rng.multinomial(n, self.weights)
        thetas, taus, scales = [], [], []
        for comp, k in zip(self.components, counts, strict=True):
            if k:
                thetas.append(self._valley_draws(comp, k, rng))
                taus.append(np.full(k, comp.scatter))
                scales.append(np.full(k, comp.drift_scale))
        return np.vstack(thetas), np.concatenate(taus), np.concatenate(scales)

    def law_draws(self, n: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
        """:meth:`draws` with the drift across the rungs' span (directions of log scale the
        ladder does not vary) spread as its prior says, ``s`` from the hyperprior: no rung
        informs those exponents, and the drift along the span says little of them (the
        exponents of one law differ in size and sign across scale variables, docs/science.md
        §6 and §7.3). Each draw's exponents' deviation from the prior mean in those directions
        is rescaled from its component's ``s`` to one drawn from the hyperprior; held exponents
        keep theirs. The same draws as :meth:`draws` (and no more random numbers) where the
        rungs vary every scale variable or the drift is not integrated."""
        thetas, taus, scales = self._draws(n, rng)
        prior, lay = self.prior, self.layout
        if prior.across is None or not prior.integrated:
            return thetas, taus
        exponents = np.linalg.solve(prior.hess, thetas[:, lay.drift].reshape(-1, lay.d, lay.m))
        log_range = (math.log(DRIFT_SCALE_MIN), math.log(DRIFT_SCALE_MAX))
        drawn = np.exp(rng.uniform(*log_range, n))
        stretch = np.where(prior.held, 0.0, (drawn / scales - 1.0)[:, None, None])
        moved = stretch * ((exponents - prior.mean) @ prior.across)
        out = thetas.copy()
        out[:, lay.drift] += np.einsum("ij,sjk->sik", prior.hess, moved).reshape(n, -1)
        return out, taus

    def _valley_draws(self, comp: _Component, k: int, rng: np.random.Generator) -> FloatArray:
        out = gaussian_draws(comp.mean, comp.cov, k, rng, comp.factor)
        for _ in range(REDRAWS):
            bad = np.linalg.eigvalsh(curvature(out, self.layout))[:, 0] <= self.floor
            if not bad.any():
                break
            out[bad] = gaussian_draws(comp.mean, comp.cov, int(bad.sum()), rng, comp.factor)
        return np.asarray(out)

    def predictive_u(
        self,
        log_scale: FloatArray,
        n: int,
        rng: np.random.Generator,
        inner: FloatArray | None = None,
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Draws of a new rung's optimum at ``log_scale`` (the law's plus the rungs' scatter),
        the same posterior draws' optimum at ``inner`` (``log_scale`` when None; e.g. the
        target's projection on the ladder's span, docs/science.md §7.5), of the valley's
        curvature and of its skews, standardised: ((n, d), (n, d), (n, d, d), (n, d))."""
        thetas, taus = self.law_draws(n, rng)
        hess = _positive(curvature(thetas, self.layout), self.floor)
        noise = taus[:, None] * rng.standard_normal((n, self.d))
        scatter = np.einsum("sij,sj->si", hess, noise)  # g_t ~ N(g + Gℓ̃, τ²HH)

        def at(scale: FloatArray) -> FloatArray:
            grad = law_gradient(thetas, self.layout, scale - self.frame.scale_centre) + scatter
            return self._held(solve_centre(hess, grad), self.law_centre_u(scale))

        optima = at(log_scale)
        inner_optima = optima if inner is None else at(inner)
        return optima, inner_optima, hess, np.asarray(thetas[:, self.layout.skew])

    def rung_predictive_u(
        self, rung: int, n: int, rng: np.random.Generator
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:meth:`predictive_u` at a scale the fit already holds: draws of that rung's own
        optimum (its trials and the law both inform it; no new scatter), with each draw's
        curvature and skews, standardised."""
        thetas, _ = self.draws(n, rng)
        hess = _positive(curvature(thetas, self.layout), self.floor)
        optima = self._held(
            solve_centre(hess, thetas[:, self.layout.rung_grad(rung)]), self.rung_centre_u(rung)
        )
        return optima, hess, np.asarray(thetas[:, self.layout.skew])

    def _held(self, draws: FloatArray, centre: FloatArray) -> FloatArray:
        """Draws held within :attr:`reach` of ``centre``."""
        return np.asarray(np.clip(draws, centre - self.reach, centre + self.reach))

    def rung_draws_u(self, rung: int, n: int, rng: np.random.Generator) -> FloatArray:
        """Draws of one rung's own optimum (standardised)."""
        thetas, _ = self.draws(n, rng)
        draws = self._centre(thetas, thetas[:, self.layout.rung_grad(rung)])
        return self._held(draws, self.rung_centre_u(rung))

    def value_u(self, u: FloatArray, rung: int) -> FloatArray:
        """The posterior-mean valley's loss at points ``u`` (..., d) of a rung."""
        lay = self.layout
        hess = curvature(self.theta, lay)
        quad = 0.5 * np.einsum("...i,ij,...j->...", u, hess, u)
        gap = u - self.rung_centre_u(rung)
        skew = cubic(gap, turns(self.hessian_u, self.skew_u)) @ self.skew_u
        depth = self.level + self.theta[rung]
        return np.asarray(depth + quad - u @ self.theta[lay.rung_grad(rung)] + skew)

    def rung_depth(self, rung: int) -> float:
        """The valley's bottom at a rung (loss units)."""
        return float(self.value_u(self.rung_centre_u(rung), rung))

    @property
    def drift_weight(self) -> float:
        """Posterior weight of drift scales above the no-drift end of the grid."""
        low = min(c.drift_scale for c in self.components)
        return float(sum(w for c, w in zip(self.components, self.weights) if c.drift_scale > low))

    def shape(self) -> Shape:
        """This fit's :class:`Shape` (fitted units), for :func:`fit_valley` to hold."""
        hess = self.hessian_u
        rungs = range(self.n_rungs)
        return Shape(
            sigma=self.noise_sd,
            rho=self.relative_misfit,
            hess=self.frame.hessian_x(hess),
            centres=np.array([self.frame.to_x(self.rung_centre_u(r)) for r in rungs]),
            bottoms=np.array([self.rung_depth(r) for r in rungs]),
            turn=turns(hess, self.skew_u) * self.frame.spread,
        )


class _Prior:
    """A Gaussian prior over ``θ`` built as a sum of quadratic factors
    ``½(Aθ − b)ᵀQ(Aθ − b)``, renormalised (its precision and mean)."""

    def __init__(self, size: int) -> None:
        self.precision = np.zeros((size, size))
        self.linear = np.zeros(size)

    def add(self, index: np.ndarray, matrix: FloatArray, q: FloatArray, b: FloatArray) -> None:
        """The factor on ``A θ[index]`` with ``A`` = ``matrix``."""
        block = matrix.T @ q @ matrix
        self.precision[np.ix_(index, index)] += block
        self.linear[index] += matrix.T @ q @ b

    @property
    def mean(self) -> FloatArray:
        try:
            return np.asarray(np.linalg.solve(self.precision, self.linear))
        except np.linalg.LinAlgError:  # round-off on a near-singular direction
            return np.asarray(np.linalg.lstsq(self.precision, self.linear, rcond=None)[0])


@dataclass(frozen=True)
class _PriorParts:
    """The prior's precision and linear term in three parts: what no hyperparameter scales, the
    drift part at ``s = 1`` (it scales as ``1/s²``) and the scatter part at ``τ = 1``
    (``1/τ²``)."""

    fixed: _Prior
    drift: _Prior
    scatter: _Prior

    def at(self, drift_scale: float, scatter: float) -> _Prior:
        out = _Prior(len(self.fixed.linear))
        out.precision = (
            self.fixed.precision
            + self.drift.precision / drift_scale**2
            + self.scatter.precision / scatter**2
        )
        out.linear = self.fixed.linear + self.drift.linear / drift_scale**2
        return out


def _prior(
    lay: _Layout,
    hess: FloatArray,
    frame: Frame,
    data: ValleyInput,
    boxes: tuple[FloatArray, FloatArray],
    typical_curvature: FloatArray,
) -> _PriorParts:
    """The prior of ``θ`` given the current curvature, in parts a drift scale ``s`` and a
    scatter ``τ`` multiply (:class:`_PriorParts`).

    * ``B_u = diag(1/x_s) B ~ N(B₀_u, s²)`` per entry (a fixed exponent: sd :data:`FIXED_SD`),
      so ``G = H B_u ~ N(H B₀_u, H S² H)`` per column;
    * each rung's ``g_r = Hμ_r ~ N(g + G ℓ̃_r, τ² H H)``: the rungs' optima scatter about the
      law by τ (standardised units);
    * each rung's optimum lies about where its trials are: ``μ_r ~ N(box centre, box sd²)``,
      the sweep's own design as the prior on where its optimum lies (:data:`BOX_PRIOR_SD`);
    * diagonal curvatures ``N(h₀, h₀²)`` with ``h₀`` the curvature that raises the loss by the
      values' spread at the edge of a rung's trials (:func:`_typical_curvature`): weak
      beside any rung that resolves its valley, decisive where too few trials do;
    * off-diagonal curvatures ``N(0, (c√(H_jj H_kk))²)``; skews ``N(0, (c'H_jj)²)``
      (:data:`SKEW_PRIOR`); everything else flat.

    ``H`` is held at the current estimate: the prior is conditional on it.
    """
    d, m = lay.d, lay.m
    fixed, drift, scatter = (_Prior(lay.size) for _ in range(3))
    flat = np.concatenate(
        [np.arange(lay.n_rungs + lay.n_curv), np.arange(lay.grad.start, lay.grad.stop)]
    )
    fixed.precision[flat, flat] += _flat_precision(data.values)
    for col, (j, k) in enumerate(_pairs(d)):
        if j == k:
            entry = lay.n_rungs + col
            fixed.precision[entry, entry] += 1.0 / typical_curvature[j] ** 2
            fixed.linear[entry] += 1.0 / typical_curvature[j]
    curv = np.diag(hess)
    diag = np.sqrt(np.maximum(curv, CONDITION_FLOOR * float(curv.max())))
    for col, (j, k) in enumerate(_pairs(d)):
        if j != k:
            sd = OFFDIAGONAL_PRIOR_CORRELATION * diag[j] * diag[k]
            fixed.precision[lay.n_rungs + col, lay.n_rungs + col] += 1.0 / sd**2
    skew_sd = SKEW_PRIOR * np.maximum(curv, CONDITION_FLOOR * float(curv.max()))
    skews = np.arange(lay.skew.start, lay.skew.stop)
    fixed.precision[skews, skews] += 1.0 / skew_sd**2
    inv_h = np.asarray(np.linalg.inv(hess), dtype=float)
    prior_b = data.prior_drift / frame.spread[:, None]
    eye = np.eye(d)
    for k in range(m):
        rows = lay.drift.start + np.arange(d) * m + k
        held = data.fixed_drift[:, k]
        scale2 = frame.spread**2
        free_prec = inv_h @ np.diag(np.where(held, 0.0, scale2)) @ inv_h
        held_prec = inv_h @ np.diag(np.where(held, scale2 / FIXED_SD**2, 0.0)) @ inv_h
        mean = hess @ prior_b[:, k]
        drift.add(rows, eye, free_prec, mean)
        fixed.add(rows, eye, held_prec, mean)
    _rung_factors(lay, inv_h, hess, data.log_scales - frame.scale_centre, boxes, fixed, scatter)
    return _PriorParts(fixed, drift, scatter)


def _rung_factors(
    lay: _Layout,
    inv_h: FloatArray,
    hess: FloatArray,
    scales: FloatArray,
    boxes: tuple[FloatArray, FloatArray],
    fixed: _Prior,
    scatter: _Prior,
) -> None:
    """:func:`_prior`'s factors of each rung, every rung at once: the scatter ``g_r − g − Gℓ̃_r
    ~ N(0, τ²HH)`` on ``[g_r, g, G]`` (``A_r = [I, −I, −I ⊗ ℓ̃_rᵀ]``, precision ``A_rᵀ(HH)⁻¹A_r``)
    and the box ``g_r ~ N(H·centre_r, H diag(sd_r²) H)``."""
    d, n = lay.d, lay.n_rungs
    eye = np.eye(d)
    own = lay.n_rungs + lay.n_curv + np.arange(n)[:, None] * d + np.arange(d)[None, :]  # (R, d)
    shared = np.arange(lay.grad.start, lay.drift.stop)  # the law's g, then G row-major
    index = np.hstack([own, np.broadcast_to(shared, (n, len(shared)))])  # (R, K)
    law = np.zeros((n, d, index.shape[1]))
    law[:, :, :d] = eye
    law[:, :, d : 2 * d] = -eye
    law[:, :, 2 * d :] = -np.einsum("ij,rk->rijk", eye, scales).reshape(n, d, -1)  # G ℓ̃_r
    blocks = np.swapaxes(law, 1, 2) @ (inv_h @ inv_h) @ law
    np.add.at(scatter.precision, (index[:, :, None], index[:, None, :]), blocks)
    centres, sds = boxes
    q_box = (inv_h[None, :, :] / sds[:, None, :] ** 2) @ inv_h  # inv_h diag(1/sd_r²) inv_h
    np.add.at(fixed.precision, (own[:, :, None], own[:, None, :]), q_box)
    np.add.at(fixed.linear, own, np.einsum("rij,rj->ri", q_box, centres @ hess))


def _anchor_u(data: ValleyInput, frame: Frame) -> FloatArray:
    """The rule's placement of each coordinate's optimum in standardised units (NaN: none)."""
    if data.anchor is None:
        return np.full(data.coords.shape[1], np.nan)
    return frame.to_u(np.asarray(data.anchor, dtype=float))


def _boxes(
    u: FloatArray, rung: np.ndarray, n_rungs: int, anchor: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Each rung's box centre and the box prior's sd per coordinate (standardised units): the
    middle of the rung's trials and :data:`BOX_PRIOR_SD` of their range. A coordinate the rung
    runs at fewer than :data:`BRACKET_VALUES` distinct values (values closer than
    :data:`SAME_VALUE` of the whole sweep's range are one: round-off, as in a value computed two
    ways) cannot bracket an optimum, and its range says nothing of where the author expected it:
    it takes the range of every rung's trials (docs/science.md §7.3). Where the space's rule
    places the optimum (``anchor``, finite; Power Lines' τ_opt), the centre is that place, held
    within the trials' range; the sd stays the design's."""
    whole = np.ptp(u, axis=0)
    whole = np.where(whole > 0, whole, 1.0)
    placed = np.full(u.shape[1], np.nan) if anchor is None else np.asarray(anchor, dtype=float)
    boxes = [_box(u[rung == r], whole, placed) for r in range(n_rungs)]
    return np.array([c for c, _ in boxes]), np.array([sd for _, sd in boxes])


def _box(own: FloatArray, whole: FloatArray, anchor: FloatArray) -> tuple[FloatArray, FloatArray]:
    """One rung's box centre and box prior sd (:func:`_boxes`), ``whole`` the sweep's range,
    ``anchor`` the rule's placement (NaN: none)."""
    low, high = own.min(axis=0), own.max(axis=0)
    brackets = np.array(
        [_distinct(own[:, j], SAME_VALUE * whole[j]) >= BRACKET_VALUES for j in range(own.shape[1])]
    )
    width = np.where(brackets, high - low, whole)
    middle = 0.5 * (low + high)
    centre = np.where(np.isfinite(anchor), np.clip(np.nan_to_num(anchor), low, high), middle)
    return centre, BOX_PRIOR_SD * width


def _distinct(values: FloatArray, tol: float) -> int:
    """How many values differ by more than ``tol``."""
    ordered = np.sort(values)
    return 1 + int((np.diff(ordered) > tol).sum()) if len(ordered) else 0


def _typical_curvature(u: FloatArray, y: FloatArray, rung: np.ndarray, n_rungs: int) -> FloatArray:
    """The diagonal curvatures' prior centre ``h₀`` per coordinate (standardised units,
    :data:`CURVATURE_PRIOR`): ``½h₀w² = `` the values' spread, with ``w`` the half range of a
    rung's trials along the coordinate (the median over the rungs that vary it): the loss rises
    by its spread at the edge of a rung's trials, what a sweep that brackets its optimum shows.
    Where every rung spans the whole sweep, ``w ≈ 2`` (±2 standardised units) and
    ``h₀ = ½ × spread``; where each rung's trials sit about its own drifting optimum, in a
    corner of the whole range, ``w`` is smaller and the typical valley steeper (measured on
    ``test_onemodel``'s drifting bowls: with ``w = 2`` the fit settled at curvature 0.34 of the
    true 0.8)."""
    spread = float(np.std(y)) or 1.0
    halves = [0.5 * np.ptp(u[rung == r], axis=0) for r in range(n_rungs) if (rung == r).sum() >= 2]
    columns = np.array(halves).T if halves else np.zeros((u.shape[1], 0))
    half = np.array([np.median(c[c > 0]) if (c > 0).any() else 2.0 for c in columns])
    return np.asarray(CURVATURE_PRIOR * spread * (2.0 / half) ** 2)


@dataclass(frozen=True)
class _DataTerms:
    """``ΦᵀWΦ``, ``ΦᵀWy`` and the constant parts of the log-likelihood for fixed weights."""

    precision: FloatArray
    linear: FloatArray
    y_w_y: float
    log_w: float
    n: int


def _data_terms(phi: _Design, y: FloatArray, w: FloatArray) -> _DataTerms:
    precision, linear, wy = np.zeros((phi.size, phi.size)), np.zeros(phi.size), w * y
    for block, rows, cols, square in zip(phi.blocks, phi.rows, phi.columns, phi.squares):
        precision[square] += block.T @ (block * w[rows, None])
        linear[cols] += block.T @ wy[rows]
    return _DataTerms(
        precision=precision,
        linear=linear,
        y_w_y=float(y @ wy),
        log_w=float(np.log(w).sum()),
        n=len(y),
    )


def _flat_precision(values: FloatArray) -> float:
    """:data:`FLAT_PRECISION` in the values' units: the flat entries of ``θ`` (rung depths,
    curvatures, gradients) are in the metric's units, so their prior sd is 10⁴ times the
    largest |value| (1 where every value is 0) — flat at any scale of the metric. ``values``
    are centred on their median (:func:`_problem`), so it is flat at any offset too."""
    finite = values[np.isfinite(values)]
    level = float(np.abs(finite).max()) if len(finite) else 0.0
    return FLAT_PRECISION / (level if level > 0.0 else 1.0) ** 2


def _factor(precision: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A posterior precision, symmetrised, and its Cholesky factor; where round-off on a
    near-singular direction fails the factorisation, with a relative jitter of
    :data:`CONDITION_FLOOR` on the diagonal (what the factor is then of)."""
    post = 0.5 * (precision + precision.T)
    try:
        return post, np.asarray(np.linalg.cholesky(post), dtype=float)
    except np.linalg.LinAlgError:
        post = post + np.eye(len(post)) * CONDITION_FLOOR * float(np.abs(np.diag(post)).max())
        return post, np.asarray(np.linalg.cholesky(post), dtype=float)


def _solve(data: _DataTerms, prior: _Prior) -> tuple[FloatArray, FloatArray, float]:
    """The Gaussian posterior of ``θ`` (mean, covariance) and the log marginal likelihood
    (weights fixed).

    ``log p(y) = ½[log|W| + log|P₀| − log|P₁| − (yᵀWy + m₀ᵀP₀m₀ − θ̂ᵀP₁θ̂)] − (n/2) log 2π``
    with ``P₁ = ΦᵀWΦ + P₀`` and ``P₁θ̂ = ΦᵀWy + P₀m₀``: the Gaussian integral over ``θ``."""
    post, chol = _factor(data.precision + prior.precision)
    rhs = data.linear + prior.linear
    # through the Cholesky factor the evidence uses: where the precision spans 20 decades (noise
    # at its floor on a few trials), LU called a matrix singular that Cholesky had factored
    theta = _cholesky_solve(chol, rhs[:, None])[:, 0]
    logdet_prior = _logdet_prior(prior.precision)
    mean = prior.mean
    quad = data.y_w_y + float(mean @ prior.linear) - float(theta @ rhs)
    log_ev = 0.5 * (data.log_w + logdet_prior - 2.0 * float(np.log(np.diag(chol)).sum()) - quad)
    log_ev -= 0.5 * data.n * math.log(2.0 * math.pi)
    cov = _cholesky_solve(chol, np.eye(len(post)))
    cov = 0.5 * (cov + cov.T)
    return np.asarray(theta), cov, float(log_ev)


def _cholesky_solve(chol: FloatArray, rhs: FloatArray) -> FloatArray:
    """``P⁻¹ rhs`` from ``P = LLᵀ``'s lower factor ``L``: ``L⁻ᵀ(L⁻¹ rhs)``, batched over leading
    axes (``rhs`` (..., p, k)). Each solve sees ``L``'s condition number, the square root of
    ``P``'s, where one solve with ``P`` saw ``P``'s."""
    half = np.linalg.solve(chol, rhs)
    return np.asarray(np.linalg.solve(np.swapaxes(chol, -1, -2), half))


def _solve_grid(
    data: _DataTerms, parts: _PriorParts, grid: list[tuple[float, float]]
) -> list[tuple[FloatArray, FloatArray, float]]:
    """:func:`_solve` at every grid point, as one stacked call per linear-algebra step, without
    a Python loop's overhead; where any point's factorisation fails, point by point with
    :func:`_solve`'s fallbacks.

    Through the same Cholesky factors (to round-off, the same numbers), with one triangular
    inverse per point: ``L⁻¹`` gives the covariance ``L⁻ᵀL⁻¹`` and ``θ̂ = L⁻ᵀ(L⁻¹ rhs)`` by
    products, and ``θ̂ᵀrhs = |L⁻¹ rhs|²``; the prior's quadratic ``m₀ᵀP₀m₀ = |L₀⁻¹ P₀m₀|²``
    through the prior's factor, which its log-determinant needs anyway."""
    scales = np.array(grid, dtype=float).reshape(-1, 2)
    drift2, scatter2 = scales[:, 0] ** 2, scales[:, 1] ** 2
    prior_p = (
        parts.fixed.precision
        + parts.drift.precision / drift2[:, None, None]
        + parts.scatter.precision / scatter2[:, None, None]
    )
    prior_l = parts.fixed.linear + parts.drift.linear / drift2[:, None]
    try:
        post = data.precision + prior_p
        post = 0.5 * (post + np.swapaxes(post, -1, -2))
        chol = np.linalg.cholesky(post)
        inv_l = _triangular_inverse(chol)
        sym = 0.5 * (prior_p + np.swapaxes(prior_p, -1, -2))
        chol_prior = np.linalg.cholesky(sym)
        white_prior = (_triangular_inverse(chol_prior) @ prior_l[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return [_solve(data, parts.at(s, t)) for s, t in grid]
    logdet_prior = 2.0 * np.log(np.diagonal(chol_prior, axis1=-2, axis2=-1))
    inv_lt = np.swapaxes(inv_l, -1, -2)
    white = (inv_l @ (data.linear + prior_l)[..., None])[..., 0]
    theta = (inv_lt @ white[..., None])[..., 0]
    cov = inv_lt @ inv_l
    quad = (
        data.y_w_y
        + np.einsum("kp,kp->k", white_prior, white_prior)
        - np.einsum("kp,kp->k", white, white)
    )
    log_post = 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)
    log_ev = 0.5 * (data.log_w + logdet_prior.sum(axis=-1) - log_post - quad)
    log_ev -= 0.5 * data.n * math.log(2.0 * math.pi)
    return [(theta[k], cov[k], float(log_ev[k])) for k in range(len(scales))]


def _triangular_inverse(lower: FloatArray) -> FloatArray:
    """``L⁻¹`` of each lower-triangular ``L`` in a stack ``(k, p, p)``, by LAPACK's triangular
    inverse (``trtri``) one factor at a time: at the sizes a valley has (``p`` ≈ 20–40, ``k`` up
    to the grid's 90 points) a third of the time numpy's stacked general solve against the
    identity takes, which factors each triangle again. Raises ``LinAlgError`` for a factor with
    a zero on its diagonal (a singular matrix), as that solve would."""
    out = np.empty_like(lower)
    for k, factor in enumerate(lower):
        inverse, info = dtrtri(factor, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"triangular factor {k} is singular (trtri info {info})")
        out[k] = inverse
    return out


def _logdet_prior(precision: FloatArray) -> float:
    """``log|P₀|``: positive-definite by construction; where round-off does not know it (a
    Cholesky factor fails), the eigenvalues are floored at the smallest precision the prior
    gives."""
    sym = 0.5 * (precision + precision.T)
    try:
        return 2.0 * float(np.log(np.diag(np.linalg.cholesky(sym))).sum())
    except np.linalg.LinAlgError:
        eig = np.linalg.eigvalsh(sym)
        return float(np.log(np.maximum(eig, FLAT_PRECISION)).sum())


def _fit_noise(
    resid: FloatArray,
    excess: FloatArray,
    start: tuple[float, float],
    leverage: FloatArray,
    sigma_range: tuple[float, float] = (0.0, math.inf),
) -> tuple[float, float]:
    """(σ, ρ) of ``e_i ~ N(0, σ² + ρ²E_i²)`` by restricted maximum likelihood (docs/science.md
    §7.2): minimise ``Σ_i (1 − h_i) log v_i + r_i²/v_i`` with ``h_i`` the trial's leverage (the
    fit's share of its own value, ``Σ h_i`` the parameters the data fix). This is REML's
    criterion to first order in the weights (its ``log|ΦᵀV⁻¹Φ + P₀|`` term has the derivative
    ``−h_i`` in ``log v_i``): a trial the fit passes through (``h_i → 1``, ``r_i → 0``) tells
    nothing of its noise, where plain maximum likelihood would drive its variance, and σ, to 0.
    With ``ρ = 0`` it is ``σ² = Σr²/(n − p)``, the degrees-of-freedom correction.

    The search stays in the model's family: σ within ``sigma_range`` (the values' rounding to
    their spread) and ``ρ ≤`` :data:`MISFIT_MAX`. Where the trials barely outnumber the
    parameters the criterion is nearly flat and would run to either end without them. It is
    minimised in ``(ln σ, ln ρ)`` by Newton's method inside those bounds
    (:func:`_box_newton`, with the criterion's derivatives by hand, :func:`_noise_criterion`)."""
    terms = (1.0 - np.clip(leverage, 0.0, 1.0), resid**2, excess**2)
    low, high = (math.log(v) if v > 0 else -NOISE_LOG_REACH for v in sigma_range)
    lower = np.array([low, math.log(MISFIT_MIN)])
    upper = np.array([min(high, NOISE_LOG_REACH), math.log(MISFIT_MAX)])
    x0 = np.clip(np.log(np.array(start)), lower, upper)
    sigma, rho = np.exp(_box_newton(lambda x: _noise_criterion(x, *terms), x0, lower, upper))
    return float(sigma), float(rho)


def _noise_criterion(
    x: FloatArray, keep: FloatArray, r2: FloatArray, e2: FloatArray
) -> tuple[float, FloatArray, FloatArray]:
    """:func:`_fit_noise`'s criterion (halved) at ``x = (ln σ, ln ρ)``, its gradient and Hessian.

    With ``v = σ² + ρ²E²``, the shares ``a_i = σ²/v_i`` and ``b_i = ρ²E_i²/v_i`` and ``t_i =
    r_i²/v_i`` (each free of the metric's units, so no square of a loss overflows), the
    criterion's slope in ``v_i`` times ``v_i`` is ``½(1 − h_i − t_i)`` and its curvature times
    ``v_i²`` is ``½(2t_i − (1 − h_i))``; with ``∂v/∂ln σ = 2σ²`` and ``∂v/∂ln ρ = 2ρ²E²``:
    ``∂/∂ln σ = Σa(1 − h − t)``, ``∂/∂ln ρ = Σb(1 − h − t)``, ``∂²/∂ln σ² = 2Σa²(2t − (1 − h))
    + 2Σa(1 − h − t)``, ``∂²/∂ln ρ² = 2Σb²(2t − (1 − h)) + 2Σb(1 − h − t)``, ``∂²/∂ln σ∂ln ρ =
    2Σab(2t − (1 − h))``."""
    s2, p2 = math.exp(2.0 * x[0]), math.exp(2.0 * x[1])
    misfit = p2 * e2
    var = s2 + misfit
    a, b, t = s2 / var, misfit / var, r2 / var
    slope, bend = keep - t, 2.0 * t - keep
    value = 0.5 * float(keep @ np.log(var) + t.sum())
    g0, g1 = float(a @ slope), float(b @ slope)
    cross = 2.0 * float((a * b) @ bend)
    hess = np.array(
        [
            [2.0 * float((a * a) @ bend) + 2.0 * g0, cross],
            [cross, 2.0 * float((b * b) @ bend) + 2.0 * g1],
        ]
    )
    return value, np.array([g0, g1]), hess


def _box_newton(
    fun: Callable[[FloatArray], tuple[float, FloatArray, FloatArray]],
    x0: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
) -> FloatArray:
    """A local minimum of a smooth function of a few variables inside a box, by projected
    Newton steps: a variable at a bound whose gradient points out of the box is held there;
    the others take the Newton step with the Hessian's eigenvalues made positive (``|λ|``, at
    least :data:`NEWTON_FLOOR` × the largest: a saddle's step goes downhill), at most one unit
    per variable, halved until the value decreases enough (:data:`ARMIJO`). Stops when a step moves every
    variable by less than :data:`NEWTON_TOL` or the value no longer decreases.

    The bookkeeping is in plain Python floats (:func:`_newton_step`): the noise fit has two
    variables, where numpy's per-call overhead cost about as much as the criterion itself."""
    x = np.clip(x0, lower, upper)
    lo, hi = lower.tolist(), upper.tolist()
    value, grad, hess = fun(x)
    xs = x.tolist()
    for _ in range(NEWTON_STEPS):
        gs = grad.tolist()
        free = [
            not ((v <= a and g > 0) or (v >= b and g < 0))
            for v, g, a, b in zip(xs, gs, lo, hi, strict=True)
        ]
        if not any(free):
            break
        step = _newton_step(hess, gs, free)
        largest = max(abs(v) for v in step)
        if largest > 1.0:
            step = [v / largest for v in step]
        for _ in range(NEWTON_HALVINGS):
            trial = [min(max(v + s, a), b) for v, s, a, b in zip(xs, step, lo, hi, strict=True)]
            point = np.array(trial)
            new = fun(point)
            if new[0] <= value + ARMIJO * float(grad @ (point - np.array(xs))):
                break
            step = [0.5 * v for v in step]
        else:
            break
        moved = max(abs(t - v) for t, v in zip(trial, xs, strict=True))
        xs, (value, grad, hess) = trial, new
        if moved < NEWTON_TOL:
            break
    return np.array(xs)


def _newton_step(hess: FloatArray, grad: list[float], free: list[bool]) -> list[float]:
    """:func:`_box_newton`'s step over the free variables: ``−V diag(1/|λ|) Vᵀ g`` with each
    ``|λ|`` at least :data:`NEWTON_FLOOR` × the largest. One free variable in plain floats
    (``eigh`` of a 1 × 1 is the entry itself and a unit vector: the same bits); more by
    ``eigh``, as numpy computes it."""
    idx = [j for j, f in enumerate(free) if f]
    step = [0.0] * len(grad)
    tiny = float(np.finfo(float).tiny)
    if len(idx) == 1:
        j = idx[0]
        size = abs(float(hess[j, j]))
        step[j] = -(grad[j] / max(size, NEWTON_FLOOR * max(size, tiny)))
        return step
    eig, vec = np.linalg.eigh(hess if len(idx) == len(grad) else hess[np.ix_(idx, idx)])
    eig = np.maximum(np.abs(eig), NEWTON_FLOOR * max(float(np.abs(eig).max()), tiny))
    g = np.array([grad[j] for j in idx])
    for j, v in zip(idx, (-vec @ ((vec.T @ g) / eig)).tolist(), strict=True):
        step[j] = v
    return step


#: Values count as reported to ``k`` decimals when rounding them there moves each by at most
#: this many units in its last place (the round-off of ``round(v·10ᵏ)/10ᵏ`` itself).
ROUNDING_ULPS = 4.0


def _rounding_sd(values: FloatArray) -> float:
    """The sd of the rounding in values reported to ``k`` decimals, ``10⁻ᵏ/√12`` (the
    fewest ``k`` ≤ 9 that holds them all), 0 for values at full precision (docs/science.md
    §7.2): a loss published to 3 decimals carries uniform noise of ±0.0005, and the noise fit
    never goes below it."""
    # to the values' own float round-off (a few units in the last place of each value): a
    # tolerance relative to each value instead read values offset by 1e9 as "3 decimals"
    # (1e-12 of 1e9), a floor that an offset alone raised (docs/science.md §7.2)
    ulps = ROUNDING_ULPS * np.spacing(np.abs(values))
    for k in range(10):
        rounded = np.round(values * 10.0**k) / 10.0**k
        if np.all(np.abs(rounded - values) <= ulps):
            return float(10.0**-k / math.sqrt(12.0))
    return 0.0


def _leverage(phi: _Design, w: FloatArray, cov: FloatArray) -> FloatArray:
    """Each trial's leverage ``w_i φ_iᵀ Σ φ_i`` under the posterior covariance ``Σ``."""
    out = np.empty(phi.n)
    for block, rows, square in zip(phi.blocks, phi.rows, phi.squares):
        out[rows] = ((block @ cov[square]) * block).sum(axis=1)
    return np.asarray(w * out)


def _settled(
    before: tuple[float, float, FloatArray, FloatArray],
    after: tuple[float, float, FloatArray, FloatArray],
    n: int,
) -> bool:
    """Whether σ, ρ, the curvature and the rungs' centres (standardised units, about which the
    skew is taken) moved by less than σ's relative standard error."""
    moved = [
        abs(after[0] - before[0]) / before[0],
        abs(after[1] - before[1]) / max(before[1], MISFIT_START),
        float(np.abs(after[2] - before[2]).max() / np.abs(before[2]).max()),
        float(np.abs(after[3] - before[3]).max()),
    ]
    return max(moved) < 1.0 / math.sqrt(2.0 * n)


def _grid(drift: bool, n_rungs: int = 2) -> list[tuple[float, float]]:
    """The hyperpriors' quadrature points: (drift scale, scatter). One rung has no scatter about
    a law to weigh (its optimum about a flat-prior law is the same at every τ): one point, the
    grid's middle."""
    drift_grid = (
        np.geomspace(DRIFT_SCALE_MIN, DRIFT_SCALE_MAX, DRIFT_GRID_POINTS) if drift else [FIXED_SD]
    )
    scatter_grid = np.geomspace(SCATTER_MIN, SCATTER_MAX, SCATTER_GRID_POINTS)
    if n_rungs < 2:
        scatter_grid = scatter_grid[SCATTER_GRID_POINTS // 2 : SCATTER_GRID_POINTS // 2 + 1]
    return [(float(s), float(t)) for s in drift_grid for t in scatter_grid]


def _excess_over_bottoms(
    y: FloatArray, rung: np.ndarray, theta: FloatArray, hess: FloatArray, lay: _Layout
) -> FloatArray:
    """Each trial's excess over its rung's fitted bottom (not its best trial, whose own noise
    would make it the one trial weighed as exact), ≥ 0."""
    grads = np.array([theta[lay.rung_grad(r)] for r in range(lay.n_rungs)])
    bottoms = theta[: lay.n_rungs] - 0.5 * np.einsum("ri,ri->r", grads, solve_centre(hess, grads))
    return np.asarray(np.maximum(y - bottoms[rung], 0.0))


def _posterior(
    terms: _DataTerms, parts: _PriorParts, grid: list[tuple[float, float]]
) -> tuple[list[_Component], FloatArray, FloatArray]:
    """The posterior at each grid point, the points' weights (their evidence) and the posterior
    mean ``θ``."""
    solved = _solve_grid(terms, parts, grid)
    components = [
        _Component(s, t, mean, cov, log_ev)
        for (s, t), (mean, cov, log_ev) in zip(grid, solved, strict=True)
    ]
    logs = np.array([c.log_evidence for c in components])
    weights = np.exp(logs - logs.max())
    weights /= weights.sum()
    theta = np.einsum("s,sp->p", weights, np.array([c.mean for c in components]))
    return components, weights, theta


def own_optimum(
    data: ValleyInput, rung: int, rng: np.random.Generator, draws: int
) -> tuple[FloatArray, FloatArray]:
    """One rung's optimum from a fit that sees its trials alone (docs/science.md §7.5): the
    one model on that rung — its own curvature, skews, noise and misfit, no law, no other
    rung — so a walk-forward prediction from the cheaper rungs is checked against what the
    rung's own trials say, and a bias the shared shape gives every rung's reading shows.

    Returns its posterior-mean optimum and variance per coordinate (:func:`robust_sd` of
    ``draws`` posterior draws, squared), fitted units; NaN along a coordinate the rung runs at
    fewer than :data:`BRACKET_VALUES` distinct values (its trials alone cannot place an
    optimum there: that coordinate is not checked), and everywhere if none is bracketed or the
    fit fails (logged).

    Args:
        data: the trials of every rung.
        rung: the rung's index in ``data``.
        rng: the draws' random numbers.
        draws: how many posterior draws give the variance.
    """
    mine = data.rung == rung
    d = data.coords.shape[1]
    coords, whole = data.coords[mine], np.ptp(data.coords, axis=0)
    brackets = np.array(
        [_distinct(coords[:, j], SAME_VALUE * whole[j]) >= BRACKET_VALUES for j in range(d)]
    )
    mean, var = np.full(d, math.nan), np.full(d, math.nan)
    if not brackets.any():
        return mean, var
    k = int(brackets.sum())
    alone = ValleyInput(
        coords=coords[:, brackets],
        values=data.values[mine],
        rung=np.zeros(int(mine.sum()), dtype=int),
        log_scales=np.zeros((1, 0)),
        prior_drift=np.zeros((k, 0)),
        fixed_drift=np.zeros((k, 0), dtype=bool),
    )
    try:
        valley = fit_valley(alone, drift=False)
    except np.linalg.LinAlgError:
        logger.info("rung %d alone could not be fitted: its walk-forward fold is not checked", rung)
        return mean, var
    mean[brackets] = valley.frame.to_x(valley.rung_centre_u(0))
    var[brackets] = robust_sd(valley.frame.to_x(valley.rung_draws_u(0, draws, rng))) ** 2
    return mean, var


def robust_sd(draws: FloatArray) -> FloatArray:
    """Half the central 68.27% range of each column: the sd for a normal posterior, and not
    ruled by the few draws whose near-flat curvature puts their optimum far away."""
    low, high = np.quantile(draws, [0.158655, 0.841345], axis=0)
    return np.asarray(0.5 * (high - low))


@dataclass(frozen=True)
class _Problem:
    """What every start of the alternation shares: the trials in standardised units and the
    priors' fixed parts."""

    data: ValleyInput
    frame: Frame
    u: FloatArray
    lay: _Layout
    boxes: tuple[FloatArray, FloatArray]
    typical: FloatArray
    grid: list[tuple[float, float]]
    level: float = 0.0
    rounding: float = 0.0

    @property
    def spread(self) -> float:
        return float(np.std(self.data.values)) or 1.0


@dataclass(frozen=True)
class _Fixed:
    """One fixed point of the alternation: the noise, the curvature the priors are built on,
    the design (skew about the centres) and the posterior over the whole grid."""

    sigma: float
    rho: float
    hess: FloatArray
    components: list[_Component]
    weights: FloatArray
    theta: FloatArray
    settled: bool = True


def _alternate(prob: _Problem, start: tuple[float, float]) -> _Fixed:
    """Rounds of (solve, re-fit σ and ρ, re-weight, re-centre) from ``start`` = (σ, ρ) until
    they settle (:func:`_settled`), then the final solve over the whole grid; ``settled`` False
    when :data:`MAX_ROUNDS` ran out first, the final solve then at the round whose state (σ, ρ,
    weights, curvature) had the greatest marginal likelihood."""
    data, lay, y = prob.data, prob.lay, prob.data.values
    phi = _design(prob.u, data.rung, lay)
    best = np.array([y[data.rung == r].min() for r in range(lay.n_rungs)])
    excess = y - best[data.rung]  # the first round's: over each rung's best trial
    resolution = max(NOISE_FLOOR * prob.spread, prob.rounding)
    sigma, rho = start
    hess = np.eye(lay.d) * prob.spread
    w = _weights(sigma, rho, excess)
    centres = np.zeros((lay.n_rungs, lay.d))
    first, active, settled = True, prob.grid, False
    visited: list[tuple[float, _DataTerms, float, float, FloatArray]] = []
    for _ in range(MAX_ROUNDS):
        previous = (sigma, rho, hess, centres)
        parts = _prior(lay, hess, prob.frame, data, prob.boxes, prob.typical)
        terms = _data_terms(phi, y, w)
        components, weights, theta = _posterior(terms, parts, active)
        visited.append((_log_evidence(components), terms, sigma, rho, hess))
        active = [g for g, wt in zip(active, weights) if wt >= ACTIVE_WEIGHT]
        begin = (max(sigma, resolution), max(rho, MISFIT_START))
        cov = np.einsum("s,sij->ij", weights, np.array([c.cov for c in components]))
        fitted = _fit_noise(
            y - phi.times(theta), excess, begin, _leverage(phi, w, cov), (resolution, prob.spread)
        )
        # the noise and the weights feed each other (the residuals move with the weights):
        # a half step in log σ, log ρ damps the alternation, which a full step lets cycle
        sigma, rho = (math.sqrt(a * b) for a, b in zip(begin, fitted))
        sigma = max(sigma, resolution)  # noise-free trials: a floor, not 1/0
        hess = _positive(curvature(theta, lay), FLAT_CURVATURE * sigma)
        excess = _excess_over_bottoms(y, data.rung, theta, hess, lay)
        w = _weights(sigma, rho, excess)
        grads = np.array([theta[lay.rung_grad(r)] for r in range(lay.n_rungs)])
        # the skew is taken about the centres of the round before; off the fixed point its
        # slope there pushes the next centres the other way, so a full step can cycle with
        # period two: a half step (after the first round, which has no centres yet)
        fitted_centres = solve_centre(hess, grads)
        centres = fitted_centres if first else 0.5 * (centres + fitted_centres)
        first = False
        phi = phi.reskewed(prob.u, data.rung, centres, turns(hess, theta[lay.skew]))
        if settled := _settled(previous, (sigma, rho, hess, centres), len(y)):
            break
    if settled:
        return _held_fixed(prob, _data_terms(phi, y, w), sigma, rho, hess)
    # a cycle has no fixed point to stop at: the state of the rounds' greatest marginal
    # likelihood (docs/science.md §7.2), not wherever the last round fell
    _, terms, sigma, rho, hess = max(visited, key=lambda v: v[0])
    return replace(_held_fixed(prob, terms, sigma, rho, hess), settled=False)


def _hold(prob: _Problem, shape: Shape) -> _Fixed:
    """The posterior with the weights and the skew's centres held at ``shape`` (its first rungs:
    this fit's), in this fit's standardised units; the priors start from its curvature and
    are re-built on the posterior's own (:func:`_held_fixed`)."""
    data, lay, frame = prob.data, prob.lay, prob.frame
    rungs = slice(0, lay.n_rungs)
    hess = shape.hess * np.outer(frame.spread, frame.spread)
    excess = np.maximum(data.values - (shape.bottoms[rungs][data.rung] - prob.level), 0.0)
    w = _weights(shape.sigma, shape.rho, excess)
    centres = frame.to_u(shape.centres[rungs])
    phi = _design(prob.u, data.rung, lay, centres, shape.turn / frame.spread)
    return _held_fixed(prob, _data_terms(phi, data.values, w), shape.sigma, shape.rho, hess)


def _weights(sigma: float, rho: float, excess: FloatArray) -> FloatArray:
    """Each trial's weight ``1/(σ² + ρ²E_i²)``: the noise model of docs/science.md §7.2."""
    return np.asarray(1.0 / (sigma**2 + rho**2 * excess**2))


def _log_evidence(components: list[_Component]) -> float:
    """The log marginal likelihood summed over the grid's points (their hyperprior uniform, up
    to its constant; the points the rounds drop carry under :data:`ACTIVE_WEIGHT` of it)."""
    logs = np.array([c.log_evidence for c in components])
    top = float(logs.max())
    return top + math.log(float(np.exp(logs - top).sum()))


def _held_fixed(
    prob: _Problem, terms: _DataTerms, sigma: float, rho: float, hess: FloatArray
) -> _Fixed:
    """The final solve over the whole grid at the settled weights.

    The priors hold an exponent in ``G = HB`` at the curvature of the round before: re-solve
    until the curvature they are built on is the posterior's own (to :data:`HELD_TOLERANCE`),
    so a held exponent is held in the law the result reports, ``B = H⁻¹G``."""
    for _ in range(MAX_ROUNDS):
        parts = _prior(prob.lay, hess, prob.frame, prob.data, prob.boxes, prob.typical)
        components, weights, theta = _posterior(terms, parts, prob.grid)
        before, hess = hess, _positive(curvature(theta, prob.lay), FLAT_CURVATURE * sigma)
        if float(np.abs(hess - before).max() / np.abs(before).max()) < HELD_TOLERANCE:
            break
    return _Fixed(sigma, rho, hess, components, weights, theta)


def _problem(data: ValleyInput, drift: bool = True) -> _Problem:
    """The trials in standardised units, the priors' fixed parts and the hyperpriors' grid.

    The values are centred on their median (:attr:`Valley.level`; docs/science.md §7.2): the
    rungs' depths absorb any offset, and a metric offset by 10⁹ keeps the solve's precision
    and the flat priors' reach. Their rounding (:func:`_rounding_sd`) is read before centring,
    from the values as reported."""
    level = float(np.median(data.values)) if len(data.values) else 0.0
    rounding = _rounding_sd(data.values)
    data = replace(data, values=data.values - level)
    frame = _frame(data)
    u = frame.to_u(data.coords)
    lay = _Layout(data.log_scales.shape[0], u.shape[1], data.log_scales.shape[1])
    return _Problem(
        data=data,
        frame=frame,
        u=u,
        lay=lay,
        boxes=_boxes(u, data.rung, lay.n_rungs, _anchor_u(data, frame)),
        typical=_typical_curvature(u, data.values, data.rung, lay.n_rungs),
        grid=_grid(drift, lay.n_rungs),
        level=level,
        rounding=rounding,
    )


def fit_valley(data: ValleyInput, *, drift: bool = True, shape: Shape | None = None) -> Valley:
    """The posterior of the one model given the finite trials (module docstring).

    Args:
        data: the trials; needs at least one finite trial per rung it names.
        drift: integrate the drift prior's scale; False holds the drift at its prior mean
            (the no-drift model).
        shape: what another fit of these rungs and more settled on (its
            :meth:`Valley.shape`, whose first rungs are these; a walk-forward fold,
            docs/science.md §7.5): the weights and the skew's centres are held at it, and only
            ``θ``'s posterior (curvature and skews included) is solved on these trials, without
            the alternation of §7.2; None: the alternation fits them.

    Returns:
        The :class:`Valley`: Gaussian posteriors over the (drift scale, scatter) grid and their
        weights.
    """
    prob = _problem(data, drift)
    u, lay, frame = prob.u, prob.lay, prob.frame
    # the alternation starts from equal weights: the noise as large as the values' spread
    kept = _alternate(prob, (prob.spread, 0.0)) if shape is None else _hold(prob, shape)
    reach = PRIOR_REACH * BOX_PRIOR_SD * np.where(np.ptp(u, axis=0) > 0, np.ptp(u, axis=0), 1.0)
    return Valley(
        frame=frame,
        components=tuple(kept.components),
        weights=kept.weights,
        theta=kept.theta,
        noise_sd=kept.sigma,
        relative_misfit=kept.rho,
        settled=kept.settled,
        floor=FLAT_CURVATURE * kept.sigma,
        reach=reach,
        span=np.array([u.min(axis=0) - reach, u.max(axis=0) + reach]),
        n_rungs=lay.n_rungs,
        d=lay.d,
        m=lay.m,
        prior=DriftPrior(
            hess=kept.hess,
            mean=data.prior_drift / frame.spread[:, None],
            held=np.asarray(data.fixed_drift, dtype=bool),
            integrated=drift,
            across=_across(data.log_scales),
        ),
        level=prob.level,
    )

"""The divergence boundary may drift relative to the optimum along the ladder (docs/science.md §8).

SGD's stability limit sits at a fixed raw learning rate while the optimum moves (the corpus's
CNN): a boundary tied to the optimum misplaces the wall. ``fit_divergence`` given each trial's
rung on the ladder's span fits ``γ``, weighs the drifting boundary against the tied one by their
evidence, and reads it at the target — held at the nearest rung's value past the ladder.
"""

from __future__ import annotations

import numpy as np
import pytest

from transfersearch.fitting.divergence import fit_divergence


def _fixed_wall_ladder(
    moving: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Three rungs at span coordinates −1, 0, 1; the optimum at ``μ = −(z + 1)/2`` (log lr);
    every run past raw log lr 1.0 diverges, at every rung. Offsets from the optimum: the wall
    lies 1.0, 1.5, 2.0 past it on the rungs. ``moving``: the wall 1.5 past every optimum."""
    rows = []
    for z in (-1.0, 0.0, 1.0):
        mu = -0.5 * (z + 1.0)
        for x in np.arange(-2.0, 2.01, 0.25):
            rows.append((x - mu, x > (mu + 1.5 if moving else 1.0), x, z))
    a = np.array(rows, dtype=float)
    return a[:, :1], a[:, 1].astype(bool), a[:, 2:3], a[:, 3:4]


def _wall(coef: np.ndarray) -> float:
    """Where a boundary's log-odds ``(β₀, β)`` cross zero (offset from the optimum)."""
    return float(-coef[0] / coef[1])


def test_a_wall_fixed_in_raw_lr_is_read_where_it_lies_at_the_ladder_s_edge() -> None:
    offsets, diverged, raw, z = _fixed_wall_ladder()
    tied = fit_divergence(offsets, diverged, raw)
    model = fit_divergence(offsets, diverged, raw, (z, np.array([2.0])))
    assert model is not None and model.drift is not None and tied is not None
    # tied to the optimum, the wall is the rungs' average offset (1.0-2.0): 1.62
    assert _wall(tied.mean) == pytest.approx(1.62, abs=0.1)
    assert model.mean == pytest.approx(tied.mean, rel=1e-12)  # the tied part is the tied fit
    # the drifting one, read past the ladder at the top rung (z = 1), puts it near the top
    # rung's 2.0; the rungs favour it over the tied boundary
    assert abs(_wall(model.drift[0]) - 2.0) < 0.2
    assert model.drift_weight > 0.8


def test_a_wall_that_moves_with_the_optimum_keeps_the_tied_boundary_likelier() -> None:
    """The same ladder with the wall 1.5 past every rung's optimum: γ is not needed, and the
    evidence (its prior's Occam factor) leaves the tied boundary the likelier."""
    offsets, diverged, raw, z = _fixed_wall_ladder(moving=True)
    model = fit_divergence(offsets, diverged, raw, (z, np.array([2.0])))
    assert model is not None and model.drift is not None
    assert model.drift_weight < 0.5
    assert _wall(model.mean) == pytest.approx(1.5, abs=0.15)


def test_the_drift_is_nested_a_single_rung_gives_the_tied_boundary() -> None:
    """Every trial at one rung (no span): no drifting model, the tied one exactly."""
    offsets, diverged, raw, z = _fixed_wall_ladder()
    one = z[:, 0] == 0.0
    tied = fit_divergence(offsets[one], diverged[one], raw[one])
    model = fit_divergence(
        offsets[one], diverged[one], raw[one], (np.zeros((int(one.sum()), 1)), np.zeros(1))
    )
    assert tied is not None and model is not None
    assert model.drift is None and model.drift_weight == 0.0
    assert model.mean == pytest.approx(tied.mean, rel=1e-12)
    assert model.boundary_weight == pytest.approx(tied.boundary_weight, rel=1e-12)

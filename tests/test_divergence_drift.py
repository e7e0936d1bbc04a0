"""The divergence boundary may drift relative to the optimum along the ladder (docs/science.md §8).

SGD's stability limit sits at a fixed raw learning rate while the optimum moves (the corpus's
CNN): a boundary tied to the optimum misplaces the wall at the target. ``fit_divergence`` given
each trial's rung on the ladder's span learns ``γ`` and reads the boundary at the target.
"""

from __future__ import annotations

import numpy as np
import pytest

from transfersearch.fitting.divergence import fit_divergence


def _fixed_wall_ladder() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Three rungs at span coordinates −1, 0, 1; the optimum at ``μ = −(z + 1)/2`` (log lr);
    every run past raw log lr 1.0 diverges, at every rung. Offsets from the optimum: the wall
    lies 1.0, 1.5, 2.0 past it on the rungs and 2.5 past it at the target (z = 2)."""
    rows = []
    for z in (-1.0, 0.0, 1.0):
        mu = -0.5 * (z + 1.0)
        for x in np.arange(-2.0, 2.01, 0.25):
            rows.append((x - mu, x > 1.0, x, z))
    a = np.array(rows, dtype=float)
    return a[:, :1], a[:, 1].astype(bool), a[:, 2:3], a[:, 3:4]


def _wall(model) -> float:  # type: ignore[no-untyped-def]
    """Where the boundary model's log-odds cross zero (offset from the optimum)."""
    return float(-model.mean[0] / model.mean[1])


def test_a_wall_fixed_in_raw_lr_is_read_where_it_lies_at_the_target() -> None:
    offsets, diverged, raw, z = _fixed_wall_ladder()
    tied = fit_divergence(offsets, diverged, raw)
    drifting = fit_divergence(offsets, diverged, raw, (z, np.array([2.0])))
    # tied to the optimum, the wall is the rungs' average offset (1.0-2.0): 1.62 at the target
    assert _wall(tied) == pytest.approx(1.62, abs=0.1)
    # free to drift (its prior shrinks γ toward 0, one spacing across the ladder per sd), the
    # wall at the target moves toward its true 2.5 past the optimum
    assert abs(_wall(drifting) - 2.5) < 0.3
    assert abs(_wall(drifting) - 2.5) < 0.5 * abs(_wall(tied) - 2.5)


def test_the_drift_is_nested_a_single_rung_gives_the_tied_boundary() -> None:
    """Every trial at one rung (z = 0, the target there too): γ meets no data and is read at
    z = 0, so the model is the tied one exactly (hand check of the fold β₀ + γᵀz_t)."""
    offsets, diverged, raw, z = _fixed_wall_ladder()
    one = z[:, 0] == 0.0
    tied = fit_divergence(offsets[one], diverged[one], raw[one])
    drifting = fit_divergence(
        offsets[one], diverged[one], raw[one], (np.zeros((int(one.sum()), 1)), np.zeros(1))
    )
    assert drifting.mean == pytest.approx(tied.mean, rel=1e-9)
    assert drifting.cov == pytest.approx(tied.cov, rel=1e-7)
    assert drifting.boundary_weight == pytest.approx(tied.boundary_weight, rel=1e-9)

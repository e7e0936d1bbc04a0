"""Which rung more trials would buy most at the target (docs/science.md §9.1): the leverage of
each rung's optimum on the line's prediction, checked by hand, and named by ``summary()``."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence

import numpy as np
import pytest

import transfersearch as ts
from transfersearch.errors import TransferSearchError
from transfersearch.fitting.result import leverage_shares, variance_removed
from transfersearch.synthetic import Surface

# ------------------------------------------------------------------------------- by hand

#: Three rungs at ln scale 0, 1, 2 and the target at 3; the top rung's optimum twice as uncertain.
LOGS = np.array([[0.0], [1.0], [2.0]])
VARIANCES = np.array([1.0, 1.0, 2.0])
TARGET = np.array([3.0])


def test_leverage_and_shares_match_the_hand_computation() -> None:
    """Centred, x = [1, ℓ − 1]: w = (1, 1, ½), XᵀWX = [[2.5, −0.5], [−0.5, 1.5]] (det 3.5),
    x_t = [1, 2], (XᵀWX)⁻¹x_t = [2.5, 5.5]/3.5, so h = (−6/7, 5/7, 8/7) (they sum to 1: the line
    reproduces a constant), the shares h²·var = (36, 25, 128)/49 and the target's variance
    x_tᵀ(XᵀWX)⁻¹x_t = 13.5/3.5 = 27/7 = their sum."""
    leverage, share = leverage_shares(LOGS, VARIANCES, TARGET)
    np.testing.assert_allclose(leverage, [-6 / 7, 5 / 7, 8 / 7], rtol=1e-12)
    np.testing.assert_allclose(share, [36 / 49, 25 / 49, 128 / 49], rtol=1e-12)
    assert share.sum() == pytest.approx(27 / 7, rel=1e-12)
    # as fractions of the target's variance: 4/21, 25/189, 128/189
    np.testing.assert_allclose(share / share.sum(), [4 / 21, 25 / 189, 128 / 189], rtol=1e-12)


def test_doubling_a_rung_removes_what_the_refitted_line_says() -> None:
    """Halving the top rung's variance (2 → 1) gives the unweighted line: x_tᵀ(XᵀX)⁻¹x_t =
    1/3 + 4/2 = 7/3, so 27/7 − 7/3 = 32/21 goes (32/81 ≈ 0.395 of it). Halving the bottom's
    (1 → ½): XᵀWX = [[3.5, −1.5], [−1.5, 2.5]] (det 6.5), variance 22.5/6.5 = 45/13, so
    27/7 − 45/13 = 36/91 goes (4/39 ≈ 0.103). The middle rung's: XᵀWX = [[3.5, −0.5],
    [−0.5, 1.5]] (det 5), variance (1.5 + 2 + 14)/5 = 3.5, so 27/7 − 7/2 = 5/14 goes."""
    removed = variance_removed(LOGS, VARIANCES, TARGET, np.array([0.5, 0.5, 0.5]))
    np.testing.assert_allclose(removed, [36 / 91, 5 / 14, 32 / 21], rtol=1e-12)
    np.testing.assert_allclose(removed / (27 / 7), [4 / 39, 5 / 54, 32 / 81], rtol=1e-12)
    # a rung left as it is (shrink 1) removes nothing
    assert variance_removed(LOGS, VARIANCES, TARGET, np.array([1.0, 1.0, 1.0])).tolist() == [
        0,
        0,
        0,
    ]


def test_two_rungs_interpolate_whatever_their_weights() -> None:
    """Two rungs at ℓ = 0, 1 and the target at 2: the line through both predicts 2·y₂ − y₁, so
    h = (−1, 2) for any variances, shares (1, 4)·var."""
    leverage, share = leverage_shares(np.array([0.0, 1.0]), np.array([1.0, 3.0]), np.array([2.0]))
    np.testing.assert_allclose(leverage, [-1.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(share, [1.0, 12.0], rtol=1e-12)


def test_collinear_scale_variables_give_the_one_variable_answer() -> None:
    """Width and data moving together: the pseudo-inverse finds the same line as one variable
    does for a target on it, and a finite answer (the identified part) for one off it."""
    two = np.hstack([LOGS, LOGS + 5.0])
    leverage, share = leverage_shares(two, VARIANCES, np.array([3.0, 8.0]))
    np.testing.assert_allclose(leverage, [-6 / 7, 5 / 7, 8 / 7], rtol=1e-8)
    np.testing.assert_allclose(share.sum(), 27 / 7, rtol=1e-8)
    _, off = leverage_shares(two, VARIANCES, np.array([3.0, 5.0]))
    assert np.isfinite(off).all() and (off >= 0).all()


def test_a_rung_that_says_nothing_has_no_share() -> None:
    """An infinite variance (the parameter not swept there) or a NaN weighs nothing: the line
    through the other two is the two-rung one."""
    for bad in (math.inf, math.nan):
        leverage, share = leverage_shares(LOGS, np.array([1.0, bad, 1.0]), TARGET)
        np.testing.assert_allclose(leverage, [-0.5, 0.0, 1.5], atol=1e-12)
        np.testing.assert_allclose(share, [0.25, 0.0, 2.25], atol=1e-12)
        removed = variance_removed(LOGS, np.array([1.0, bad, 1.0]), TARGET, np.full(3, 0.5))
        np.testing.assert_allclose(removed, [0.125, 0.0, 1.125], atol=1e-12)


# ------------------------------------------------------------------------- through extrapolate

WIDTHS = (64, 128, 256, 512)


def ladder(counts: Sequence[int], seed: int) -> list[ts.Observation]:
    """Trials around the true optimum (lr ∝ width^−½) at each width, ``counts`` of them."""
    rng = np.random.default_rng(seed)
    surface = Surface(
        base=ts.Scale(width=64),
        lr0=3e-3,
        tau0=1.0,
        lr_exponents={"width": -0.5},
        tau_exponents={"width": 0.0},
        noise_sd=0.02,
    )
    out = []
    for width, count in zip(WIDTHS, counts, strict=True):
        scale = ts.Scale(width=width)
        best = surface.optimum(scale)
        for _ in range(count):
            params = {name: best[name] * math.exp(rng.uniform(-1.5, 1.5)) for name in best}
            out.append(surface.observe(scale, params, rng))
    return out


def fit(observations: list[ts.Observation], target: ts.Scale) -> ts.Extrapolation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ts.extrapolate(observations, target=target)


def buy_line(result: ts.Extrapolation) -> str:
    lines = [line for line in result.summary().splitlines() if line.startswith("more trials")]
    assert len(lines) == 1, result.summary()
    return lines[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_summary_names_the_thin_rung(seed: int) -> None:
    """Four rungs of 30 trials: the top one, with most leverage on the target 8× beyond it, is
    what 30 more trials buy most. With only 4 at the cheapest, 30 more there shrink its
    optimum's variance most and the summary names it instead."""
    target = ts.Scale(width=4096)
    even = fit(ladder((30, 30, 30, 30), seed), target)
    assert buy_line(even).startswith(f"more trials: 30 more at {ts.Scale(width=512)!r} (now 30)")
    thin = fit(ladder((4, 30, 30, 30), seed), target)
    assert buy_line(thin).startswith(f"more trials: 30 more at {ts.Scale(width=64)!r} (now 4)")
    values = thin.trials_value()
    assert [v.scale["width"] for v in values] == list(WIDTHS)
    assert max(values, key=lambda v: v.removed).scale == ts.Scale(width=64)
    # the rungs' errors are a part of the target's spread; the rest the summary says is beyond them
    held = sum(v.share for v in values)
    assert 0.0 < held < 1.0
    for value in values:  # the refitted line leans on a rung more: it may remove past its share
        assert value.extra == 30 and 0.0 <= value.removed <= held
        assert set(value.by_param) == {"lr", "tau"}
    assert values[0].removed > values[0].share  # the thin rung, weighed more once it has trials
    assert ("a rung nearer the target would buy more" in buy_line(thin)) == (held < 0.5)


def test_extra_trials_are_the_caller_s_and_checked() -> None:
    result = fit(ladder((30, 30, 30, 30), 0), ts.Scale(width=4096))
    few, many = result.trials_value(extra=2), result.trials_value(extra=300)
    assert all(v.extra == 2 for v in few)
    assert all(a.removed < b.removed for a, b in zip(few, many, strict=True))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(TransferSearchError, match="extra"):
            result.trials_value(extra=bad)  # type: ignore[arg-type]


def test_a_target_at_a_rung_reads_that_rung_alone() -> None:
    """Predicting a fitted rung reads its own posterior: only its trials enter."""
    result = fit(ladder((30, 30, 30, 30), 0), ts.Scale(width=256))
    values = {v.scale["width"]: v for v in result.trials_value()}
    assert all(values[w].share == 0.0 and values[w].removed == 0.0 for w in (64, 128, 512))
    assert values[256].removed > 0.0
    line = buy_line(result)
    assert repr(ts.Scale(width=256)) in line and "nearer the target" not in line


def test_one_rung_holds_the_intercept_alone() -> None:
    """One rung (which extrapolate refuses, but the function must not): its leverage is 1 and
    its share its variance, wherever the target lies; a rung of no variance says nothing."""
    leverage, share = leverage_shares(np.array([[2.0]]), np.array([0.3]), np.array([5.0]))
    np.testing.assert_allclose([leverage[0], share[0]], [1.0, 0.3], rtol=1e-12)
    removed = variance_removed(np.array([[2.0]]), np.array([0.3]), np.array([5.0]), np.array([0.5]))
    np.testing.assert_allclose(removed, [0.15], rtol=1e-12)
    leverage, share = leverage_shares(np.array([[2.0]]), np.array([math.inf]), np.array([5.0]))
    assert leverage.tolist() == [0.0] and share.tolist() == [0.0]


def test_an_unswept_parameter_and_no_spread_do_not_raise() -> None:
    """A rung where ``tau`` has no optimum (``inf`` variance: not swept there) takes no share of
    it; a target with no finite spread gives nothing to say, and the summary says nothing."""
    result = fit(ladder((20, 20, 20, 20), 3), ts.Scale(width=4096))
    rung = result.optima[1]
    covariance = np.array(rung.covariance, dtype=np.float64)
    covariance[rung.names.index("tau"), :] = covariance[:, rung.names.index("tau")] = 0.0
    covariance[rung.names.index("tau"), rung.names.index("tau")] = math.inf
    unswept = dataclasses.replace(
        result,
        optima=(
            result.optima[0],
            rung.with_point(np.array([rung.coords[n] for n in rung.names]), covariance),
            *result.optima[2:],
        ),
    )
    values = unswept.trials_value()
    assert values[1].by_param["tau"] == (0.0, 0.0) and values[1].by_param["lr"][0] > 0.0
    assert all(math.isfinite(v.removed) for v in values)
    assert "\nmore trials:" in unswept.summary()
    spreadless = dataclasses.replace(result, stderr={"lr": math.nan, "tau": math.inf})
    assert spreadless.trials_value() == ()
    assert "\nmore trials:" not in spreadless.summary()


def test_the_parameters_are_weighed_by_their_part_of_the_expected_loss() -> None:
    """``share`` and ``removed`` weigh each parameter's fraction (``by_param``) by the expected
    loss its spread causes, ``½ H_jj stderr_j²`` (docs/science.md §9.1): with the valley's
    curvature set to diag(100, 1) by hand and the spreads (0.2, 0.4), the weights are
    ½·100·0.04 = 2 and ½·1·0.16 = 0.08, so lr's fraction counts 25 times tau's; with no curvature
    known the two count alike."""
    result = fit(ladder((30, 30, 30, 30), 0), ts.Scale(width=4096))
    names = result.optima[0].names
    curvature = np.diag([100.0 if n == "lr" else 1.0 for n in names])
    stderr = {"lr": 0.2, "tau": 0.4}
    steep = dataclasses.replace(
        result,
        stderr=stderr,
        optima=tuple(dataclasses.replace(o, hessian=curvature) for o in result.optima),
    )
    for value in steep.trials_value():
        (lr_share, lr_removed), (tau_share, tau_removed) = (
            value.by_param["lr"],
            value.by_param["tau"],
        )
        assert value.share == pytest.approx((2.0 * lr_share + 0.08 * tau_share) / 2.08)
        assert value.removed == pytest.approx((2.0 * lr_removed + 0.08 * tau_removed) / 2.08)
    unknown = dataclasses.replace(
        steep, optima=tuple(dataclasses.replace(o, hessian=None) for o in result.optima)
    )
    for value in unknown.trials_value():
        assert value.share == pytest.approx(np.mean([s for s, _ in value.by_param.values()]))

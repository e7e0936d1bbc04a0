"""transfersearch.report: the text table and the picture of a transfer."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import transfersearch as ts
from transfersearch import extrapolate
from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation
from transfersearch.report import TITLE_WIDTH, format_table, plot_report


def test_format_table_aligns_columns_and_formats_floats() -> None:
    table = format_table(["method", "loss"], [["ours", 2.123456], ["copy", math.nan]])
    lines = table.splitlines()
    assert lines[0].split() == ["method", "loss"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split() == ["ours", "2.123"]
    assert lines[3].split() == ["copy", "nan"]
    assert lines[2].index("2.123") == lines[0].index("loss")


def test_format_table_rejects_ragged_rows() -> None:
    with pytest.raises(TransferSearchError, match="row 0 has 1 cells but there are 2 headers"):
        format_table(["a", "b"], [["only one"]])


def ladder_observations() -> list[Observation]:
    """Optimal lr ∝ width^−1 on three widths; a few diverged trials at high lr."""
    rng = np.random.default_rng(0)
    obs = []
    for width in (32, 64, 128):
        best = 0.02 * 32 / width
        for _ in range(25):
            lr = float(np.exp(rng.uniform(np.log(1e-4), np.log(0.3))))
            wd = float(np.exp(rng.uniform(np.log(1e-3), np.log(1.0))))
            if lr > 8 * best:
                value = math.nan
            else:
                value = 1.0 + 0.2 * np.log(lr / best) ** 2 + 0.05 * np.log(wd / 0.1) ** 2
            obs.append(Observation({"width": width}, {"lr": lr, "weight_decay": wd}, value))
    return obs


def test_plot_report_writes_a_png_with_both_rows(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr", "weight_decay"], seed=0)
    out = plot_report(
        obs,
        result,
        tmp_path / "sub" / "report.png",
        title="synthetic",
        marks={"copy": {"lr": 0.02, "weight_decay": 0.1}},
    )
    assert out == tmp_path / "sub" / "report.png"
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    image = pytest.importorskip("matplotlib.image").imread(str(out))
    height, width = image.shape[:2]
    assert width > height > 500  # two columns (one per parameter) and two rows


def test_plot_report_needs_observations(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr", "weight_decay"], seed=0)
    with pytest.raises(TransferSearchError, match="needs the proxy observations"):
        plot_report([], result, tmp_path / "r.png")


def test_plot_report_returns_the_path_it_really_wrote(tmp_path: Path) -> None:
    """A bare name gets .png, a folder gets report.png inside: the returned path is the file."""
    pytest.importorskip("matplotlib")
    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    bare = plot_report(obs, result, tmp_path / "picture")
    assert bare == tmp_path / "picture.png" and bare.read_bytes()[:4] == b"\x89PNG"
    folder = tmp_path / "pics"
    folder.mkdir()
    inside = plot_report(obs, result, folder)
    assert inside == folder / "report.png" and inside.is_file()
    vector = plot_report(obs, result, tmp_path / "report.svg")
    assert vector.read_text().lstrip().startswith("<?xml")


def test_plot_report_refuses_an_unknown_extension_before_drawing(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    with pytest.raises(TransferSearchError, match=r"extension '\.xyz'.*\.png") as info:
        plot_report(obs, result, tmp_path / "x.xyz")
    assert "x.xyz" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_importing_report_does_not_import_matplotlib() -> None:
    code = "import sys, transfersearch.report; print('matplotlib' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


def svg_texts(path: Path) -> list[str]:
    """The text lines of an SVG drawn with svg.fonttype='none' (text kept as text)."""
    return [html_unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text())]


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


def draw_svg(obs: list[Observation], result: ts.Extrapolation, path: Path) -> list[str]:
    matplotlib = pytest.importorskip("matplotlib")
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        plot_report(obs, result, path)
    return svg_texts(path)


def readme_ladder_observations() -> list[Observation]:
    """The README's ladder shape: batch_size 64 on every rung, width and dataset_size varied."""
    rng = np.random.default_rng(1)
    obs = []
    for width in (64, 128, 256):
        for n in (2e4, 8e4):
            best = 3e-3 * (64 / width) ** 0.6 * (n / 2e4) ** 0.25
            for _ in range(16):
                lr = float(np.exp(rng.uniform(np.log(1e-4), np.log(1e-1))))
                value = 2.0 + 0.3 * np.log(lr / best) ** 2 + float(rng.normal(0, 0.01))
                scale = {"width": width, "dataset_size": n, "batch_size": 64}
                obs.append(Observation(scale, {"base_lr": lr}, value))
    return obs


def test_trials_above_the_metric_axis_are_marked_and_counted(tmp_path: Path) -> None:
    # was: clipped trials drawn as ordinary points at the top edge, nothing said
    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    finite = sorted(o.value for o in obs if o.usable)
    top = finite[0] + 2.5 * (finite[len(finite) // 2] - finite[0])  # the axis' end, by hand
    above = [o.value for o in obs if o.usable and o.value > top]
    diverged = sum(o.diverged for o in obs)
    assert above and diverged  # the data exercise both marks
    texts = draw_svg(obs, result, tmp_path / "report.svg")
    note = f"▲ {len(above)} above {top:.4g} (worst {max(above):.4g}); × {diverged} diverged: on"
    assert note in " ".join(texts)  # the title's lines


def test_titles_fit_and_leave_out_a_scale_variable_never_varied(tmp_path: Path) -> None:
    obs = readme_ladder_observations()
    target = ts.Scale(width=512, dataset_size=1.6e5, batch_size=64)
    result = extrapolate(obs, target=target, params=["base_lr"], seed=0)
    assert result.laws["base_lr"].exponents.get("batch_size", 0.0) == 0.0
    texts = draw_svg(obs, result, tmp_path / "report.svg")
    law_titles = [t for t in texts if t.startswith("optimal base_lr ∝")]
    assert len(law_titles) == 1 and "batch_size" not in law_titles[0]
    assert "dataset_size^" in law_titles[0] and "width^" in law_titles[0]
    assert "every rung: batch_size=64" in texts  # said once, not in each rung's label
    assert "dataset_size=20000, width=64" in texts
    titles = [t for t in texts if "per rung" in t or t.startswith(("optimal", "▲", "×"))]
    assert titles and all(len(t) <= TITLE_WIDTH for t in titles)  # wrapped, never cut


def test_the_band_and_the_interval_are_named_for_what_they_are(tmp_path: Path) -> None:
    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    texts = draw_svg(obs, result, tmp_path / "report.svg")
    assert "law's own 90% band" in texts
    assert "target: decision, 90% prediction interval" in texts


def test_a_law_known_to_no_useful_width_draws_without_overflow(tmp_path: Path) -> None:
    """A law whose band spans hundreds of decades (a tiny, noisy ladder) still draws: the band is
    cut at e^±MAX_LOG_BAR on a log axis instead of overflowing exp() (the quick demo did)."""
    pytest.importorskip("matplotlib")
    import dataclasses

    from transfersearch._figure_info import MAX_LOG_BAR, band_ends

    assert band_ends(math.log(0.01), 800.0, 1.645, True) == pytest.approx(
        (0.01, 0.01 * math.exp(-MAX_LOG_BAR), 0.01 * math.exp(MAX_LOG_BAR))
    )
    assert band_ends(0.5, 0.1, 2.0, False) == pytest.approx((0.5, 0.3, 0.7))
    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr", "weight_decay"])
    vague = {
        name: dataclasses.replace(law, covariance=law.covariance * 1e8 + 1e6)
        for name, law in result.laws.items()
    }
    samples = result.samples.copy()  # draws of log lr past the float range: (0, inf)
    samples[: len(samples) // 2, 0], samples[len(samples) // 2 :, 0] = -1e4, 1e4
    stderr = {name: 1e3 for name in result.stderr}
    result = dataclasses.replace(result, laws=vague, stderr=stderr, samples=samples)
    assert result.laws["lr"].predict_coord(ts.Scale(width=1024))[1] > 500  # exp() would overflow
    assert result.interval(0.9)["lr"] == (0.0, math.inf)
    out = plot_report(obs, result, tmp_path / "vague.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pytest.importorskip("plotly")
    from transfersearch.visualization import plot_optimum_vs_scale

    plot_optimum_vs_scale(result)


def test_the_law_panel_info_is_the_fit_s_own_numbers() -> None:
    """Each number of the optimum-vs-compute panel, by hand from the Extrapolation."""
    from statistics import NormalDist

    from transfersearch._figure_info import MAX_LOG_BAR, PATH_POINTS, law_panel_info

    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    info = law_panel_info(result, "lr", level=0.8)
    z = NormalDist().inv_cdf(0.9)
    assert info.log_space and info.percent == "80%"
    assert [r.scale["width"] for r in info.rungs] == [32, 64, 128]  # cheapest first
    assert [r.compute for r in info.rungs] == pytest.approx([1.0, 4.0, 16.0])  # width² / 32²
    assert info.target_compute == pytest.approx(1024.0)
    for rung, optimum in zip(info.rungs, sorted(result.optima, key=lambda o: o.scale["width"])):
        point, err = optimum.params["lr"], optimum.stderr["lr"]
        assert rung.value == point
        assert z * err <= MAX_LOG_BAR and rung.bar == pytest.approx(
            (point * math.exp(-z * err), point * math.exp(z * err))
        )
        assert rung.law_value == pytest.approx(result.laws["lr"].predict(optimum.scale))
    assert info.path is not None and len(info.path.compute) == PATH_POINTS
    assert info.path.compute[0] == pytest.approx(1.0)
    assert info.path.compute[-1] == pytest.approx(info.target_compute)
    coord, stderr = result.laws["lr"].predict_coord(ts.Scale(width=1024))
    assert info.path.centre[-1] == pytest.approx(math.exp(coord))
    # the drawn law is the model's path: it ends at the law's own point at the target
    assert info.path.centre[-1] == pytest.approx(result.law_params["lr"], rel=1e-9)
    assert info.path.upper[-1] == pytest.approx(math.exp(coord + z * stderr))
    assert info.decision == result.params["lr"] and info.interval == result.interval(0.8)["lr"]
    # the bar is the interval cut at e^±MAX_LOG_BAR about the decision (the cut by hand below)
    low, high = info.interval
    reach = math.exp(MAX_LOG_BAR)
    assert info.drawn_interval == (
        max(low, info.decision / reach),
        min(high, info.decision * reach),
    )
    exponent = result.laws["lr"].exponents["width"]
    assert info.law_terms == f"width^{exponent:+.2f}"


def test_the_target_s_bar_is_cut_at_e_to_the_max_log_bar_about_the_decision() -> None:
    """A log-space interval wider than e^±5 about the decision is drawn cut there (an end at 0 or
    inf too); a narrower one, or a linear parameter's, is drawn as it is."""
    from transfersearch._figure_info import MAX_LOG_BAR, _drawn_interval

    reach = math.exp(MAX_LOG_BAR)
    assert _drawn_interval(2.0, (1e-5, 1e5), True) == (2.0 / reach, 2.0 * reach)
    assert _drawn_interval(2.0, (0.0, math.inf), True) == (2.0 / reach, 2.0 * reach)
    assert _drawn_interval(2.0, (1.0, 1e5), True) == (1.0, 2.0 * reach)
    assert _drawn_interval(2.0, (1.0, 4.0), True) == (1.0, 4.0)
    assert _drawn_interval(2.0, (-1e5, 1e5), False) == (-1e5, 1e5)


def test_the_png_and_the_plotly_figures_draw_the_same_numbers() -> None:
    """The matplotlib picture and the plotly figures render one info layer: the rungs' optima and
    bars, the law and its band, the target and its bar, the trials are the same numbers in both."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("plotly")
    from transfersearch import visualization as tsv
    from transfersearch.report import draw_report

    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    figure = draw_report(obs, result, level=0.8)
    top, bottom = figure.axes
    plotly = tsv.plot_optimum_vs_scale(result, level=0.8)
    rungs = [t for t in plotly.data if t.marker.symbol == "circle"]
    drawn = [line for line in bottom.lines if line.get_marker() == "o"]
    assert len(rungs) == len(drawn) == 3
    for trace, line in zip(rungs, drawn):
        assert (trace.x[0], trace.y[0]) == tuple(line.get_xydata()[0])
    bars = [c.get_segments()[0] for c in bottom.collections if hasattr(c, "get_segments")]
    plotly_bars = [
        [[t.x[0], t.y[0] - t.error_y.arrayminus[0]], [t.x[0], t.y[0] + t.error_y.array[0]]]
        for t in [*rungs, *[t for t in plotly.data if (t.name or "").startswith("target")]]
    ]
    assert np.allclose(np.array(bars), np.array(plotly_bars), rtol=1e-12)
    (law,) = [line for line in bottom.lines if line.get_label() == "fitted law"]
    (plotly_law,) = [t for t in plotly.data if (t.name or "").startswith("law (")]
    assert np.array_equal(law.get_xydata(), np.column_stack([plotly_law.x, plotly_law.y]))
    (band,) = [c for c in bottom.collections if c.get_label().endswith("band")]
    (upper,) = [t for t in plotly.data if t.hoverinfo == "skip"]
    assert set(upper.y) <= set(band.get_paths()[0].vertices[:, 1])
    landscapes = tsv.plot_rung_landscapes(obs, result)
    png_points = {tuple(p) for c in top.collections for p in c.get_offsets() if p[1] < 2.5}
    plotly_points = {(x, y) for t in landscapes.data for x, y in zip(t.x, t.y)}
    assert png_points and png_points <= plotly_points  # the PNG's unclipped trials


def test_crashed_trials_are_drawn_apart_from_diverged_ones_and_counted(tmp_path: Path) -> None:
    # was (issue 27 item 7): four trials that raised were drawn and counted as diverged
    obs = ladder_observations()
    crashes = [
        Observation({"width": 64}, {"lr": lr, "weight_decay": 0.1}, math.nan, state="failed")
        for lr in (1e-3, 2e-3, 4e-3, 8e-3)
    ]
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    diverged = sum(o.diverged for o in obs)
    texts = " ".join(draw_svg(obs + crashes, result, tmp_path / "report.svg"))
    assert f"× {diverged} diverged" in texts  # the crashes are not among them
    assert "□ 4 crashed (raised, not diverged): on the bottom edge" in texts


def test_the_title_names_the_target_and_the_decision_and_rungs_have_distinct_colours(
    tmp_path: Path,
) -> None:
    # issue 27 item 8: no title naming target and decision; two of six rung colours looked alike
    obs = readme_ladder_observations()
    target = ts.Scale(width=512, dataset_size=1.6e5, batch_size=64)
    result = extrapolate(obs, target=target, params=["base_lr"], seed=0)
    texts = draw_svg(obs, result, tmp_path / "report.svg")
    decision = f"decision base_lr={result.params['base_lr']:.3g}"
    assert f"target batch_size=64, dataset_size=1.6e+05, width=512: {decision}" in texts
    from transfersearch.report import _rung_colors

    colors = list(_rung_colors(sorted({o.scale for o in obs}, key=str)).values())
    closest = min(
        sum(abs(a - b) for a, b in zip(c1[:3], c2[:3], strict=True))
        for i, c1 in enumerate(colors)
        for c2 in colors[i + 1 :]
    )
    assert len(colors) == 6 and closest > 0.3  # RGB distance: no two rungs alike


def test_a_decision_moved_from_the_law_is_drawn_with_the_law_point_and_the_stable_edge(
    tmp_path: Path,
) -> None:
    # issue 27 item 8: the boundary that moved the decision was not drawn
    import dataclasses

    from transfersearch._figure_info import law_panel_info

    obs = ladder_observations()
    result = extrapolate(obs, target=ts.Scale(width=1024), params=["lr"], seed=0)
    law = result.law_params["lr"]
    assert law_panel_info(dataclasses.replace(result, params={"lr": law}), "lr").law_point is None
    moved = dataclasses.replace(result, params={"lr": law / 2}, stable_up_to={"lr": law * 0.6})
    info = law_panel_info(moved, "lr")
    assert info.law_point == law and info.stable_up_to == law * 0.6
    texts = draw_svg(obs, moved, tmp_path / "moved.svg")
    assert "the law's own point (the decision moved from it)" in texts
    assert "stable up to (costliest rung's trials)" in texts
    plain = draw_svg(obs, dataclasses.replace(result, params={"lr": law}), tmp_path / "p.svg")
    assert "the law's own point (the decision moved from it)" not in plain


def test_tick_labels_of_a_log_axis_spanning_about_a_decade_do_not_overlap() -> None:
    """Marin's lr runs 5e-4 to 8e-3: on such an axis matplotlib labels the minor ticks
    (2×10⁻³, 3×10⁻³, 4×10⁻³, 6×10⁻³) and, at the default size, neighbours printed over each
    other. Every visible label of every axis keeps clear of the others."""
    pytest.importorskip("matplotlib")
    from transfersearch.report import draw_report

    obs = [
        Observation(
            {"width": width}, {"lr": lr}, 3.0 + 0.05 * math.log(lr / (1e-3 * 64 / width)) ** 2
        )
        for width in (64, 128, 256)
        for lr in (5e-4, 1e-3, 2e-3, 4e-3, 8e-3)
    ]
    result = extrapolate(obs, target=ts.Scale(width=512), params=["lr"], seed=0)
    _assert_tick_labels_clear(draw_report(obs, result))


def test_tick_labels_of_a_compute_axis_spanning_decades_do_not_overlap() -> None:
    """A ladder of widths 64–2048 and a target at 8192 span four decades of compute: the 2s
    and 5s between the powers of ten printed over them (and over each other); past
    ``MINOR_LABEL_DECADES`` only the powers of ten are labelled."""
    pytest.importorskip("matplotlib")
    from transfersearch.report import draw_report

    obs = [
        Observation(
            {"width": width}, {"lr": lr}, 3.0 + 0.05 * math.log(lr / (1e-3 * 64 / width)) ** 2
        )
        for width in (64, 128, 256, 512, 1024, 2048)
        for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
    ]
    result = extrapolate(obs, target=ts.Scale(width=8192), params=["lr"], seed=0)
    figure = draw_report(obs, result)
    compute = figure.axes[-1]
    low, high = compute.get_xlim()
    assert math.log10(high / low) > 4.0
    _assert_tick_labels_clear(figure)


def _assert_tick_labels_clear(figure: Any) -> None:
    """Every visible x tick label of every axis of ``figure`` keeps clear of the others."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in figure.axes:
        ticks = [*ax.xaxis.get_major_ticks(), *ax.xaxis.get_minor_ticks()]
        boxes = [
            t.label1.get_window_extent(renderer)
            for t in ticks
            if t.label1.get_visible() and t.label1.get_text()
            and ax.get_xlim()[0] <= t.get_loc() <= ax.get_xlim()[1]
        ]  # fmt: skip
        assert len(boxes) >= 2
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not a.overlaps(b), (ax.get_title(), a, b)

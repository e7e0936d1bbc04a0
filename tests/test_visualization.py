"""transfersearch.visualization: plotly figures that show the fit's own numbers.

Each figure is checked against the Extrapolation it draws: the rungs' trials, the law and its band
through the target, the decision and its interval, and the walk-forward predictions.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("plotly")
pytest.importorskip("optuna")

from _sweep import TARGET, run_sweep

import transfersearch as ts
from transfersearch import visualization as tsv
from transfersearch.readers import as_observations


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, ts.Extrapolation]:
    import optuna

    storage = run_sweep(tmp_path_factory.mktemp("viz"))
    study = optuna.load_study(study_name="proxy", storage=storage)
    return study, ts.extrapolate(study, target=TARGET, seed=0)


def test_landscapes_show_every_trial_of_every_rung(fitted: tuple[object, ts.Extrapolation]) -> None:
    study, res = fitted
    figure = tsv.plot_rung_landscapes(study, res)
    obs = as_observations(study)
    drawn = [trace for trace in figure.data if trace.mode == "markers"]
    assert sum(len(trace.x) for trace in drawn) == 2 * sum(o.usable for o in obs)  # two panels
    assert len({trace.name for trace in drawn}) == 4  # one colour per rung
    assert figure.layout.xaxis.type == "log" and figure.layout.xaxis.title.text == "base_lr"
    assert len(figure.layout.shapes) == 2 * len(res.optima)  # each rung's optimum, both panels


def test_optimum_vs_scale_draws_the_law_through_the_target(
    fitted: tuple[object, ts.Extrapolation],
) -> None:
    _, res = fitted
    figure = tsv.plot_optimum_vs_scale(res, level=0.8)
    panel = [t for t in figure.data if t.xaxis == "x"]  # the first coordinate's panel
    (target,) = [t for t in panel if (t.name or "").startswith("target")]
    interval = res.interval(0.8)["base_lr"]
    assert target.y[0] == pytest.approx(res.params["base_lr"])
    assert target.y[0] + target.error_y.array[0] == pytest.approx(interval[1])
    assert target.y[0] - target.error_y.arrayminus[0] == pytest.approx(interval[0])
    (law,) = [t for t in panel if (t.name or "").startswith("law (")]
    assert law.y[-1] == pytest.approx(res.laws["base_lr"].predict(TARGET))  # the path ends there
    assert law.x[-1] == pytest.approx(target.x[0])
    (upper,) = [t for t in panel if t.hoverinfo == "skip"]
    (lower,) = [t for t in panel if (t.name or "").endswith("band")]
    assert all(lo < mid < hi for lo, mid, hi in zip(lower.y, law.y, upper.y))
    assert figure.layout.yaxis.type == "log"
    # two different 80% quantities, each named for what it is, and the note says how they differ
    assert lower.name == "law's own 80% band"
    assert target.name == "target: decision, 80% prediction interval"
    (note,) = figure.layout.annotations[-1:]
    assert "prediction interval of<br>" in note.text or "prediction interval" in note.text
    assert "calibrated on the walk-forward folds" in note.text.replace("<br>", " ")
    # the ladder's batch_size is 64 on every rung: said once, not in every rung's name
    names = [t.name for t in figure.data if t.name and t.name.startswith("dataset_size=")]
    assert names and not any("batch_size" in n for n in names)
    assert "(every rung: batch_size=64)" in figure.layout.title.text


def test_walk_forward_plots_each_fold_prediction_against_the_rung_optimum(
    fitted: tuple[object, ts.Extrapolation],
) -> None:
    _, res = fitted
    assert res.walk_forward, "the 4-rung ladder has at least one fold"
    figure = tsv.plot_walk_forward(res)
    (kept,) = [t for t in figure.data if t.name == f"{res.model} (kept)" and t.xaxis == "x"]
    fold = res.walk_forward[0]
    assert fold.surface is not None
    index = list(fold.surface.names).index("base_lr")
    assert kept.y[0] == pytest.approx(math.exp(fold.points[res.model][index]))
    assert kept.x[0] == pytest.approx(fold.surface.params["base_lr"])
    models = {t.name.removesuffix(" (kept)") for t in figure.data if t.mode == "markers"}
    assert models == set(fold.points)


def test_walk_forward_without_folds_says_why() -> None:
    obs = [
        ts.Observation(scale={"width": w}, params={"lr": lr}, value=math.log(lr / 0.01) ** 2)
        for w in (64, 128)
        for lr in (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
    ]
    res = ts.extrapolate(obs, target={"width": 512})
    with pytest.raises(ts.TransferSearchError, match="no walk-forward fold"):
        tsv.plot_walk_forward(res)


def test_the_html_report_holds_the_figures(
    fitted: tuple[object, ts.Extrapolation], tmp_path: Path
) -> None:
    study, res = fitted
    out = tsv.write_html_report(study, res, tmp_path / "transfer")
    assert out.name == "transfer.html"
    text = out.read_text()
    assert text.count('class="plotly-graph-div"') == 3 and "Walk-forward validation" in text
    # issue 27 item 8: the decision and the per-group lr / weight decay, as the CLI prints them
    hp = res.hyperparameters()
    assert (
        "decision at the target: " + ", ".join(f"{k}={v:.4g}" for k, v in res.params.items())
        in text
    )
    for group in ("input", "hidden", "output", "vector"):
        row = f"<td>{group}</td><td>{hp.groups[group]['lr']:.4g}</td>"
        assert row + f"<td>{hp.groups[group]['weight_decay']:.4g}</td>" in text


def test_the_html_report_can_leave_plotlyjs_out(
    fitted: tuple[object, ts.Extrapolation], tmp_path: Path
) -> None:
    study, res = fitted
    inline = tsv.write_html_report(study, res, tmp_path / "inline.html")
    cdn = tsv.write_html_report(study, res, tmp_path / "cdn.html", plotlyjs="cdn")
    folder = tmp_path / "shared"
    local = tsv.write_html_report(study, res, folder / "a.html", plotlyjs="directory")
    tsv.write_html_report(study, res, folder / "b.html", plotlyjs="directory")
    assert inline.stat().st_size > 3_000_000  # plotly.js embedded: about 4.8 MB
    for small in (cdn, local):
        assert small.stat().st_size < 300_000
        assert small.read_text().count('class="plotly-graph-div"') == 3
    assert 'src="https://cdn.plot.ly/plotly-' in cdn.read_text()
    assert 'src="plotly.min.js"' in local.read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["a.html", "b.html", "plotly.min.js"]
    assert (folder / "plotly.min.js").stat().st_size > 3_000_000
    with pytest.raises(ts.TransferSearchError, match=r"`plotlyjs` must be one of .*'cdn'"):
        tsv.write_html_report(study, res, tmp_path / "x.html", plotlyjs="CDN")


def test_the_core_does_not_import_plotly() -> None:
    code = "import sys, transfersearch.visualization; sys.exit('plotly' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_landscapes_draw_crashes_apart_and_count_them() -> None:
    from transfersearch.visualization import plot_rung_landscapes

    scale = {"width": 64}
    obs = [ts.Observation(scale, {"lr": lr}, 1.0 + (lr - 3e-3) ** 2) for lr in (1e-3, 3e-3, 9e-3)]
    obs += [ts.Observation(scale, {"lr": 0.5}, math.nan)]  # diverged
    obs += [ts.Observation(scale, {"lr": lr}, math.nan, state="failed") for lr in (2e-3, 4e-3)]
    figure = plot_rung_landscapes(obs, params=["lr"])
    assert "× 1 diverged" in figure.layout.title.text
    assert "□ 2 crashed" in figure.layout.title.text
    crashed = [t for t in figure.data if "crashed" in (t.name or "")]
    assert len(crashed) == 1 and list(crashed[0].x) == [2e-3, 4e-3]
    assert crashed[0].marker.symbol == "square-open"


def test_a_moved_decision_shows_the_law_point_and_the_stable_edge(
    fitted: tuple[object, ts.Extrapolation],
) -> None:
    import dataclasses

    _, res = fitted
    name = next(iter(res.params))
    law = res.law_params[name]
    moved = dataclasses.replace(
        res, params={**res.params, name: law / 2}, stable_up_to={name: law * 0.6}
    )
    figure = tsv.plot_optimum_vs_scale(moved)
    names = [t.name for t in figure.data]
    assert "the law's own point (the decision moved from it)" in names
    stable = [t for t in figure.data if t.name == "stable up to (costliest rung's trials)"]
    assert stable and set(stable[0].y) == {law * 0.6}
    unmoved = dataclasses.replace(res, params=dict(res.law_params))
    assert not any(
        "law's own point" in (t.name or "") for t in tsv.plot_optimum_vs_scale(unmoved).data
    )

"""What `transfersearch demo` prints and draws (issue 49 item 14): a few progress lines, not a bar,
when its output goes to a log; the next step last; a target-runs picture whose best run's label
no marker hides.

Training is replaced by an instant stand-in here (the real run is `test_demo.py`'s slow test):
what is checked is the printing and the drawing.
"""

from __future__ import annotations

import math
import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("optuna")
pytest.importorskip("tqdm")
figure_module = pytest.importorskip("matplotlib.figure")
agg = pytest.importorskip("matplotlib.backends.backend_agg")

from transfersearch_demo import app as demo  # noqa: E402
from transfersearch_demo import task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = demo.MODES["quick"]


def _instant_train(scale: Any, hp: Any, **_: Any) -> types.SimpleNamespace:
    """A stand-in for a training run: a valley in log base_lr and log tau_epoch, instant."""
    coords = hp.coordinates
    loss = 2.0 + math.log(coords["base_lr"] / 0.02) ** 2 + 0.1 * math.log(coords["tau_epoch"]) ** 2
    return types.SimpleNamespace(val_loss=loss, seconds=0.0)


def test_a_sweep_logged_to_a_file_prints_a_tenth_line_each_not_a_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Under capsys, stderr is not a terminal, as in `transfersearch demo > log 2>&1` or in CI.
    monkeypatch.setattr(task, "train", _instant_train)
    monkeypatch.setattr(task, "load_corpus", lambda: None)
    assert not demo.interactive()
    space = demo.build_space(CONFIG)
    demo.sweep(CONFIG, space, f"sqlite:///{tmp_path / 'study.db'}", torch.device("cpu"), 45, 0)
    captured = capsys.readouterr()
    assert "\r" not in captured.err and "\r" not in captured.out  # no bar redrawn in place
    progress = [line for line in captured.out.splitlines() if line.startswith("proxy sweep: ")]
    # the header, then one line per tenth of the 45 trials (every 5) and none past the last
    assert progress[0].startswith(f"proxy sweep: 45 trials over {len(CONFIG.ladder)} rungs (0 ")
    assert len(progress) == 1 + 9
    for n, line in zip(range(5, 50, 5), progress[1:], strict=True):
        assert line.startswith(f"proxy sweep: {n}/45 trials ({n} in the study), "), line
    assert len(captured.out.splitlines()) + len(captured.err.splitlines()) <= demo.LOG_LINES + 1


def test_target_runs_logged_to_a_file_print_one_line_a_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    space = demo.build_space(CONFIG)
    hp = space.concretize({"base_lr": 0.02, "tau_epoch": 1.0}, CONFIG.target)
    runs = types.SimpleNamespace(
        loss=lambda label, hp: 2.0 if label != "mup_fixed_wd" else math.nan
    )
    losses = demo._target_losses(runs, CONFIG, space, {m: hp for m in demo.METHODS})  # type: ignore[arg-type]
    captured = capsys.readouterr()
    total = len(demo.METHODS) + len(CONFIG.grid_lr) * len(CONFIG.grid_tau)
    assert len(losses) == total and "\r" not in captured.err
    lines = captured.out.splitlines()
    assert len(lines) == total and not captured.err.strip()
    assert lines[0] == "target run 1/7: transfersearch: 2.000"
    assert lines[2] == "target run 3/7: mup_fixed_wd: diverged"


def test_the_next_step_names_the_gpt_example_which_exists() -> None:
    assert "python examples/gpt_depth_one_pass.py" in demo.NEXT_STEP
    assert (ROOT / "examples" / "gpt_depth_one_pass.py").is_file()
    assert "examples/gpt_depth_one_pass.py" in (ROOT / "docs" / "getting-started.md").read_text()


def _summary(best_label: str) -> dict[str, Any]:
    """A demo summary whose transfersearch run sits on a grid point, the picture's worst case."""
    grid = {
        f"grid base_lr={lr:g} tau_epoch={tau:g}": 2.1 + lr for lr in CONFIG.grid_lr
        for tau in CONFIG.grid_tau
    }  # fmt: skip
    on_grid = {"base_lr": CONFIG.grid_lr[0], "tau_epoch": CONFIG.grid_tau[0]}
    methods = {
        "transfersearch": {"val_loss": 2.05, "coordinates": on_grid},
        "copy_best_proxy": {"val_loss": 2.5, "coordinates": {"base_lr": 0.2, "tau_epoch": 0.1}},
        "mup_fixed_wd": {"val_loss": 2.2, "coordinates": {"base_lr": 0.03, "tau_epoch": 3.0}},
    }
    losses = {**grid, **{m: v["val_loss"] for m, v in methods.items()}}
    return {
        "methods": methods,
        "target_grid": grid,
        "best_at_target": {"label": best_label, "val_loss": losses[best_label]},
        "target": CONFIG.target.to_dict(),
    }


@pytest.mark.parametrize(
    "best_label",
    ["transfersearch", f"grid base_lr={CONFIG.grid_lr[0]:g} tau_epoch={CONFIG.grid_tau[0]:g}"],
)
def test_no_marker_hides_the_best_runs_label(best_label: str) -> None:
    """The best run's label is drawn, bold, on a pale box above every marker, and clear of the
    marker at its own point (the star, when transfersearch's run sits on a grid point)."""
    figure = figure_module.Figure(figsize=(7.0, 5.6), dpi=110)
    summary = _summary(best_label)
    ax = demo.draw_target_runs(figure.subplots(), summary, CONFIG, {"base_lr": (0.005, 0.1),
                               "tau_epoch": (0.2, 3.0)})  # fmt: skip
    texts = [t for t in ax.texts if t.get_text().startswith("best ")]
    assert len(texts) == 1, [t.get_text() for t in ax.texts]
    label = texts[0]
    assert label.get_text() == f"best {summary['best_at_target']['val_loss']:.3f}"
    assert label.get_fontweight() == "bold" and label.get_bbox_patch() is not None
    assert label.get_zorder() > max(c.get_zorder() for c in ax.collections)
    # every run carries its loss: 4 grid points and 3 methods
    assert len(ax.texts) == len(summary["target_grid"]) + len(demo.METHODS)
    renderer = agg.FigureCanvasAgg(figure).get_renderer()
    box = label.get_window_extent(renderer)
    centre = ax.transData.transform(
        (CONFIG.grid_lr[0], CONFIG.grid_tau[0])
    )  # the star and the grid dot both sit here
    radius = math.sqrt(90) / 2 * figure.dpi / 72  # the star's s=90 (points²) as pixels
    clear_x = box.x1 < centre[0] - radius or box.x0 > centre[0] + radius
    clear_y = box.y1 < centre[1] - radius or box.y0 > centre[1] + radius
    assert clear_x or clear_y, (box, centre, radius)

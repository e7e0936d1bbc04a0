"""Every quick example runs as written (in a subprocess, as a user would run it).

The two examples owned here also check what they print: the Optuna example must recover its
stand-in's optimum at the target, and the Step Law example must score a small held-out regret.
Examples written elsewhere (torch param groups, Ray Tune on GPUs) are run as written and skipped
only while they do not exist yet.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str, timeout: float = 300) -> str:
    path = EXAMPLES / name
    if not path.is_file():
        pytest.skip(f"examples/{name} does not exist yet")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = subprocess.run(
        [sys.executable, str(path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=path.parent,
        env=env,
    )
    assert run.returncode == 0, (
        f"examples/{name} failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
    )
    return run.stdout


@pytest.mark.slow  # an example run end to end (9-29 s idle): CI's further step
def test_optuna_width_data_transfer_recovers_the_target_optimum() -> None:
    pytest.importorskip("optuna")
    out = run_example("optuna_width_data_transfer.py")
    rows = {}
    for line in out.splitlines():
        match = re.match(
            r"^(base_lr|tau_epoch)\s+([\d.e+-]+)\s+\[([\d.e+-]+), ([\d.e+-]+)\]\s+"
            r"([\d.e+-]+)$",
            line.strip(),
        )
        if match:
            rows[match.group(1)] = [float(match.group(i)) for i in range(2, 6)]
    assert set(rows) == {"base_lr", "tau_epoch"}, out
    for name, (predicted, low, high, truth) in rows.items():
        assert low <= predicted <= high
        assert 0.5 < predicted / truth < 2.0, f"{name}: predicted {predicted}, truth {truth}"
    assert "hidden  lr=" in out


def test_steplaw_csv_extrapolate_scores_a_small_regret(tmp_path: Path) -> None:
    csv_path = tmp_path / "grid.csv"
    out = run_example("steplaw_csv_extrapolate.py", "--out", str(csv_path))
    assert csv_path.is_file()
    header = csv_path.read_text().splitlines()[0]
    for column in ("lr", "bs", "smooth loss", "Na", "D", "moe_name"):
        assert column in header.split(",")
    match = re.search(r"mean regret at the held-out scales: ([\d.]+)%", out)
    assert match, out
    assert float(match.group(1)) < 0.5


@pytest.mark.slow  # an example run end to end (9-29 s idle): CI's further step
def test_gpt_depth_one_pass_example_carries_a_shallow_sweep_to_a_deeper_model() -> None:
    """The one-pass GPT with depth growing (issue 49 item 13), --quick: CompleteP's residual
    multiplier at the depth-8 target (base depth 2), the blocks' norms in their own group, a 90%
    interval read in plain words, and a deep run that learned (below the uniform guess)."""
    pytest.importorskip("torch")
    pytest.importorskip("optuna")
    out = run_example("gpt_depth_one_pass.py", "--quick", timeout=300)
    assert "24 proxy trials on 4 rungs" in out
    assert "residual_multiplier=0.25 " in out  # (8 / 2)^-1: every residual branch
    groups = dict(re.findall(r"^(\w+)\s+lr=([\d.e+-]+) weight_decay=", out, re.M))
    assert set(groups) == {"input", "hidden", "output", "vector", "block_vector"}
    match = re.search(r"best base_lr between ([\d.e+-]+) and ([\d.e+-]+) with 90% probability", out)
    assert match and float(match.group(1)) < float(match.group(2)), out
    loss = re.search(r"^target loss=([\d.]+) nats/byte", out, re.M)
    assert loss and float(loss.group(1)) < math.log(256) - 1.0, out
    assert "Next: swap GPT for your model" in out


def test_torch_param_groups_example_runs() -> None:
    pytest.importorskip("torch")
    run_example("torch_param_groups.py")


@pytest.mark.slow  # an example run end to end (9-29 s idle): CI's further step
def test_ray_tune_gpu_example_runs() -> None:
    pytest.importorskip("ray")
    run_example("ray_tune_gpu.py", timeout=600)


@pytest.mark.slow
def test_hydra_sweep_example_climbs_the_ladder_and_gives_the_big_run(tmp_path: Path) -> None:
    """hydra-optuna-sweeper with TransferSampler as its sampler: 24 trials over the 4 rungs, and
    the study alone gives the target's hyperparameters (the sampler stored its space)."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    import optuna

    storage = f"sqlite:///{tmp_path / 'proxy.db'}"
    out = run_example(
        "hydra_sweep/train.py", "--multirun", f"hydra.sweeper.storage={storage}",
        f"hydra.sweep.dir={tmp_path / 'multirun'}",
    )  # fmt: skip
    assert out.count("hidden lr=") == 24
    study = optuna.load_study(study_name="proxy", storage=storage)
    rungs = sorted(t.user_attrs["rung"] for t in study.trials)
    assert rungs == sorted(list(range(4)) * 6)
    assert all("hp.lr" in t.user_attrs for t in study.trials)  # recorded by suggest()
    cli = subprocess.run(
        [sys.executable, "-m", "transfersearch.cli", "extrapolate", "--storage", storage,
         "--study", "proxy", "--target", "width=1024,dataset_size=3.2e5,batch_size=64", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    hp = json.loads(cli.stdout)["hyperparameters"]
    assert hp["groups"]["hidden"]["lr"] > 0 and hp["scale"]["width"] == 1024


@pytest.mark.slow  # an example run end to end (9-29 s idle): CI's further step
def test_lightning_example_uses_the_groups_schedule_and_ema() -> None:
    """configure_optimizers gets µP groups (width 32 → 128: hidden lr ÷ 4, weight decay × 4), the
    callback's EMA momentum is ρ^κ (batch 64 → 128: 0.99² = 0.9801) and updates every step."""
    pytest.importorskip("lightning")
    out = run_example("lightning_module.py")
    groups = {m.group(1): (float(m.group(2)), float(m.group(3)))
              for m in re.finditer(r"^(\w+)\s+lr=([\d.e+-]+) weight_decay=([\d.e+-]+)$", out, re.M)}  # fmt: skip
    assert set(groups) == {"input", "hidden", "output", "vector"}
    assert groups["hidden"][0] == pytest.approx(groups["input"][0] / 4, rel=0.01)
    assert groups["hidden"][1] == pytest.approx(groups["input"][1] * 4, rel=0.01)
    assert groups["vector"][1] == 0.0
    assert "ema momentum=0.98010 updates=48" in out  # 3 epochs × 2048/128 batches

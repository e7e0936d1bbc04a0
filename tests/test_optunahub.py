"""The OptunaHub package in hub/package/samplers/transfersearch, loaded by the real optunahub."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

optunahub = pytest.importorskip("optunahub")
optuna = pytest.importorskip("optuna")

from packaging.version import Version  # noqa: E402
from test_packaging import declared_range, lower_bound  # noqa: E402

from transfersearch import synthetic  # noqa: E402
from transfersearch.integrations.optuna import TransferSampler  # noqa: E402
from transfersearch.stored_space import stored_space  # noqa: E402

REGISTRY = Path(__file__).resolve().parent.parent / "hub" / "package"
PACKAGE = REGISTRY / "samplers" / "transfersearch"


def test_the_package_has_the_hubs_layout_and_front_matter() -> None:
    assert {"__init__.py", "README.md", "LICENSE"} <= {p.name for p in PACKAGE.iterdir()}
    front = re.match(r"^---\n(.*?)\n---\n", (PACKAGE / "README.md").read_text(), re.S)
    assert front, "README.md must open with the hub's front matter"
    fields = dict(line.split(": ", 1) for line in front.group(1).splitlines())
    assert set(fields) == {"author", "title", "description", "tags", "optuna_versions", "license"}
    assert "sampler" in fields["tags"]  # the hub requires it for package/samplers/
    # The versions the package was tested with (the hub's field): each inside the range
    # pyproject.toml declares, its lower bound among them. A new Optuna release does not break
    # this test; pip installs one only once the range admits it (issue 49, item 1).
    supported = declared_range("optuna")
    listed = [v.strip() for v in fields["optuna_versions"].strip("[]").split(",")]
    assert listed and all(v in supported for v in listed), (listed, str(supported))
    assert lower_bound(supported) in {Version(v) for v in listed}
    assert fields["license"] == "MIT License" and "MIT License" in (PACKAGE / "LICENSE").read_text()


def test_load_local_module_gives_the_sampler_that_transfers() -> None:
    module = optunahub.load_local_module("samplers/transfersearch", registry_root=str(REGISTRY))
    assert module.TransferSampler is TransferSampler
    sampler = module.TransferSampler(
        synthetic.make_space(),
        synthetic.LADDER,
        base_sampler=optuna.samplers.RandomSampler(seed=0),  # reproducible on every rung
        trials_per_rung=10,
        seed=0,
    )
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        scale, hp = sampler.suggest(trial)
        return 2.0 + synthetic.regret(scale, hp.coordinates)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=40)
    rungs = sorted(t.user_attrs["rung"] for t in study.trials)
    assert rungs == sorted(list(range(4)) * 10)  # the ladder was climbed, ten trials a rung
    assert any(t.user_attrs["transfer"].startswith("law") for t in study.trials)
    assert stored_space(study) is not None
    target = module.Scale(width=1024, dataset_size=3.2e5, batch_size=64)
    res = module.extrapolate(study, target=target)
    truth = math.exp(synthetic.log_optimum(target)[0])
    assert 0.5 < res.params["base_lr"] / truth < 2.0


def test_the_packages_example_runs() -> None:
    run = subprocess.run(
        [sys.executable, str(PACKAGE / "example.py")], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "hidden lr / weight decay at the target" in run.stdout

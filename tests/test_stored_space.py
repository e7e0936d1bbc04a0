"""The space stored with the trials: JSON round trips, and the big run's numbers from a study alone.

``TransferSampler`` writes its space to the study (user attribute ``transfersearch:space``), so
``transfersearch extrapolate --storage ... --study ...`` and ``ts.stored_space(study)`` give the
target's per-group lr / weight_decay, betas, eps, EMA and steps without the user's code.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from _sweep import TARGET, run_sweep

import transfersearch as ts
from transfersearch import rules
from transfersearch.cli import main
from transfersearch.readers import as_observations
from transfersearch.stored_space import (
    SPACE_ATTR,
    space_from_json,
    space_to_json,
    storable_space,
    stored_space,
)

SCALE = ts.Scale(width=512, dataset_size=4e5, batch_size=512, steps=1e4, tokens=8e8, params=5e7)
SPACES = {
    "mup-adam": ts.TransferSpace(
        ts.Scale(width=64, dataset_size=2e4, batch_size=64, steps=1e3, tokens=1e8, params=1e6),
        {"base_lr": ts.Float(1e-4, 1e-1, log=True), "tau_epoch": ts.Float(0.05, 20.0, log=True)},
        rules.MuP(wd_width_exponent=0.5, vector_weight_decay=True),
        betas=(0.9, 0.95),
        eps=1e-6,
        ema_momentum=0.999,
    ),
    "power-lines-sgd": ts.TransferSpace(
        ts.Scale(width=64, dataset_size=2e4, batch_size=64, tokens=1e8, params=1e6),
        {"lr": ts.Float(1e-3, 1.0, log=True), "eta_lambda": 1e-4, "beta1": ts.Choice([0.8, 0.9])},
        rules.Standard(dataset=rules.PowerLinesTau(exponent=-0.5), batch=rules.SGDBatch()),
        custom_scale_names=("heads",),
    ),
    "sqrt-width-int": ts.TransferSpace(
        {"width": 32, "batch_size": 32, "dataset_size": 1e4},
        {"base_lr": 3e-3, "tau_iter": ts.Int(100, 10_000, log=True)},
        rules.SqrtWidth(dataset=None, batch=rules.AdamBatch(beta_form="power")),
    ),
}


@pytest.mark.parametrize("name", sorted(SPACES))
def test_a_space_survives_json_and_concretizes_identically(name: str) -> None:
    space = SPACES[name]
    text = json.dumps(space_to_json(space))  # plain JSON, as a study stores it
    back = space_from_json(text)
    assert back.rule == space.rule
    assert back.distributions == space.distributions and back.fixed == space.fixed
    rng = np.random.default_rng(0)
    coords = {**space.fixed, **{n: d.sample(rng) for n, d in space.distributions.items()}}
    scale = {k: v for k, v in SCALE.items() if k in space.base or k in ("width", "batch_size")}
    assert back.concretize(coords, scale).to_dict() == space.concretize(coords, scale).to_dict()


def test_a_custom_rule_is_not_stored_and_unknown_versions_are_refused() -> None:
    @dataclass(frozen=True)
    class Mine(rules.Standard):
        pass

    space = ts.TransferSpace(SCALE, {"lr": 1e-3, "weight_decay": 0.1}, Mine())
    with pytest.raises(ts.TransferSearchError, match="custom rule"):
        space_to_json(space)
    assert storable_space(space) is None
    data = space_to_json(SPACES["mup-adam"])
    with pytest.raises(ts.TransferSearchError, match="version=2"):
        space_from_json({**data, "version": 2})
    with pytest.raises(ts.TransferSearchError, match="unknown rule 'os.system'"):
        space_from_json({**data, "rule": {"type": "os.system"}})


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("optuna")
    return run_sweep(tmp_path_factory.mktemp("stored"))


def test_the_sampler_stores_its_space_on_the_study(storage: str) -> None:
    import optuna

    from transfersearch import synthetic

    study = optuna.load_study(study_name="proxy", storage=storage)
    assert study.user_attrs[SPACE_ATTR]["version"] == 1
    assert ts.stored_space is stored_space  # the public name the README uses
    space = stored_space(study)
    assert space is not None and space.rule == synthetic.make_space().rule
    assert space.distributions == synthetic.make_space().distributions
    res = ts.extrapolate(study, target=TARGET)
    hp = res.hyperparameters(space)
    assert hp.to_dict() == res.hyperparameters(synthetic.make_space()).to_dict()
    # the study's own space comes with the result: no argument needed
    assert res.space is not None and res.hyperparameters().to_dict() == hp.to_dict()
    # a source without a stored space says what to pass
    plain = ts.extrapolate(as_observations(study), target=TARGET)
    assert plain.space is None
    with pytest.raises(ts.TransferSearchError, match=r"res.hyperparameters\(space\)"):
        plain.hyperparameters()


def test_cli_extrapolate_prints_the_big_runs_hyperparameters(
    storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import optuna

    target = ",".join(f"{k}={v:g}" for k, v in TARGET.items())
    common = ["extrapolate", "--storage", storage, "--study", "proxy", "--target", target]
    assert main([*common, "--json", "--seed", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    study = optuna.load_study(study_name="proxy", storage=storage)
    res = ts.extrapolate(study, target=TARGET, seed=0)
    expected = res.hyperparameters(stored_space(study))  # type: ignore[arg-type]
    hp = data["hyperparameters"]
    assert hp["groups"]["hidden"]["lr"] == pytest.approx(expected.groups["hidden"]["lr"])
    assert hp["groups"]["hidden"]["weight_decay"] == pytest.approx(expected.weight_decay)
    assert set(hp["groups"]) == {"input", "hidden", "output", "vector"}
    assert hp["betas"] == [0.9, 0.999] and hp["eps"] == 1e-8 and hp["scale"]["width"] == 1024
    # µP: the hidden lr at width 1024 is the base lr / 16
    assert math.isclose(hp["groups"]["hidden"]["lr"], data["params"]["base_lr"] / 16)
    assert main([*common]) == 0
    out = capsys.readouterr().out
    assert "hyperparameters at the target" in out and "hidden" in out and "betas=" in out


def test_cli_json_from_a_csv_has_no_hyperparameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["scale.width,params.lr,params.tau_epoch,value"]
    for width in (64, 128, 256):
        for i in range(12):
            lr, tau = 10 ** (-4 + 3 * i / 11), 10 ** (-1 + (i * 7 % 12) / 6)
            loss = (math.log(lr) - math.log(0.01 * (width / 64) ** -0.5)) ** 2 + math.log(tau) ** 2
            rows.append(f"{width},{lr},{tau},{loss}")
    path = tmp_path / "sweep.csv"
    path.write_text("\n".join(rows))
    args = ["extrapolate", "--csv", str(path), "--target", "width=1024", "--json"]
    assert main([*args]) == 0
    assert json.loads(capsys.readouterr().out)["hyperparameters"] is None


def _malformed(change: dict[str, object], drop: str | None = None) -> dict[str, object]:
    data = {**space_to_json(SPACES["mup-adam"]), **change}
    if drop is not None:
        del data[drop]
    return data


MALFORMED = [
    # (the stored dict, the fragment naming what is wrong)
    (_malformed({"rule": {"type": "MuP", "wd_exponent": 1.0}}), "unknown keywords ['wd_exponent']"),
    (_malformed({}, drop="base"), "lacks the field 'base'"),
    (_malformed({"base": [64, 128]}), "[64, 128]"),
    (_malformed({"coords": {"base_lr": 5}}), "must be an object with a 'type', but got 5"),
    (_malformed({"coords": ["base_lr"]}), "['base_lr']"),
    (_malformed({"coords": {"base_lr": {"type": "float", "low": 1e-4}}}), "'high'"),
    (
        _malformed({"coords": {"base_lr": {"type": "float", "low": "a", "high": 1, "log": 1}}}),
        "'a'",
    ),
    (_malformed({"betas": 0.9}), "'betas' must be a pair, but got 0.9"),
    (_malformed({"rule": {"type": "MuP", "batch": {"type": "AdamBatch", "x": 1}}}), "['x']"),
]


@pytest.mark.parametrize(("data", "fragment"), MALFORMED)
def test_a_malformed_stored_space_is_one_error_naming_the_fault(
    data: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ts.TransferSearchError, match="the stored space") as info:
        space_from_json(json.dumps(data))
    assert fragment in str(info.value)


def test_the_cli_on_a_study_with_a_malformed_space_prints_one_error_line(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI probe of issue 21: TypeError / KeyError / AttributeError tracebacks before."""
    import optuna

    copy = tmp_path / "copy.db"
    copy.write_bytes(Path(storage.removeprefix("sqlite:///")).read_bytes())
    url = f"sqlite:///{copy}"
    study = optuna.load_study(study_name="proxy", storage=url)
    target = "width=1024,dataset_size=3.2e5"
    for data, fragment in MALFORMED[:4]:
        study.set_user_attr(SPACE_ATTR, data)
        status = main(["extrapolate", "--storage", url, "--study", "proxy", "--target", target])
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 2 and len(err) == 1 and err[0].startswith("error: the stored space")
        assert fragment in err[0]


def test_a_space_with_the_complete_p_depth_rule_is_stored_and_read_back() -> None:
    """A TransferSampler stores its space: a CompleteP depth rule must round-trip (issue 26)."""
    from transfersearch import rules
    from transfersearch.stored_space import space_from_json, space_to_json

    space = ts.TransferSpace(
        ts.Scale(width=64, depth=4, dataset_size=1e5, batch_size=32),
        {"base_lr": ts.Float(1e-4, 1e-1, log=True), "tau_epoch": ts.Float(0.1, 10.0, log=True)},
        rule=rules.MuP(depth=rules.CompleteP(alpha=0.5)),
    )
    back = space_from_json(space_to_json(space))
    target = ts.Scale(width=256, depth=16, dataset_size=4e5, batch_size=32)
    point = {"base_lr": 3e-3, "tau_epoch": 1.0}
    assert back.concretize(point, target).to_dict() == space.concretize(point, target).to_dict()

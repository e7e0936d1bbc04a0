"""Scale: validation, immutability, derived quantities."""

from __future__ import annotations

import math
import pickle

import pytest

import transfersearch as ts
from transfersearch import synthetic
from transfersearch.cli import _hp_table


def test_scale_is_an_immutable_mapping_with_derived_quantities() -> None:
    scale = ts.Scale(width=256, dataset_size=50_000, batch_size=128, epochs=4)
    assert scale["width"] == 256.0
    assert dict(scale) == {
        "batch_size": 128.0,
        "dataset_size": 50_000.0,
        "epochs": 4.0,
        "width": 256.0,
    }
    assert scale.iters_per_epoch == pytest.approx(50_000 / 128)
    assert scale.total_steps == pytest.approx(4 * 50_000 / 128)
    assert ts.Scale(steps=1000).total_steps == 1000
    assert ts.Scale(width=1).total_steps is None
    with pytest.raises(TypeError):
        scale["width"] = 3  # type: ignore[index]


def test_scale_equality_hash_replace_and_pickle() -> None:
    a = ts.Scale(width=64, dataset_size=1e5)
    b = ts.Scale({"dataset_size": 100_000, "width": 64})
    assert a == b and hash(a) == hash(b)
    assert a.replace(width=128)["width"] == 128 and a["width"] == 64
    assert pickle.loads(pickle.dumps(a)) == a
    assert a.ratio(ts.Scale(width=16), "width") == 4.0
    assert a.ratio(ts.Scale(depth=2), "width") == 1.0
    assert ts.Scale(width=1000).distance_decades(ts.Scale(width=10)) == pytest.approx(2.0)


def test_users_may_add_their_own_names() -> None:
    assert ts.Scale(width=64, heads=4)["heads"] == 4


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "64", None, True])
def test_scale_refuses_non_positive_or_non_numeric_values(bad: object) -> None:
    with pytest.raises(ts.TransferSearchError, match="scale.width"):
        ts.Scale(width=bad)


def test_missing_name_error_lists_what_is_there() -> None:
    with pytest.raises(KeyError, match="width"):
        ts.Scale(depth=4)["width"]
    with pytest.raises(ts.TransferSearchError, match="batch_size=..."):
        ts.Scale(width=4).require("batch_size", purpose="test")


def test_whole_sizes_come_back_as_ints_the_model_and_loader_take() -> None:
    Scale = ts.Scale
    # issue 27 item 2: Scale(width=32)["width"] was 32.0; nn.Linear / DataLoader refuse a float
    scale = Scale(width=32.0, dataset_size=1.6e5, batch_size=64, epochs=2)
    assert type(scale["width"]) is int and scale["width"] == 32
    assert type(scale["dataset_size"]) is int and type(scale["batch_size"]) is int
    assert type(scale.total_steps) is int and scale.total_steps == 5000
    assert Scale(epochs=0.5)["epochs"] == 0.5  # not a whole number: a float, unchanged
    assert Scale(width=32) == Scale(width=32.0) and hash(Scale(width=32)) == hash(Scale(width=32.0))
    assert repr(Scale(width=32, dataset_size=1.6e5)) == "Scale(dataset_size=160000, width=32)"
    assert list(range(scale["batch_size"])) == list(range(64))  # usable where an int is needed


def test_readme_concretize_gives_int_batch_size_and_steps() -> None:
    Scale = ts.Scale
    space = synthetic.make_space()
    target = Scale(width=1024, dataset_size=204_800, batch_size=512, epochs=4)
    hp = space.concretize({"base_lr": 1e-3, "tau_epoch": 1.0}, scale=target)
    assert type(hp.batch_size) is int and hp.batch_size == 512
    assert type(hp.total_steps) is int and hp.total_steps == 1600
    assert "batch_size=512 total_steps=1600" in _hp_table(hp)  # the CLI prints ints

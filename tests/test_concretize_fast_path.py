"""``TransferSpace.concretize``'s fast path (2026-12-08, issue 48's sampler cost) is the same answer.

``concretize`` keeps what depends on the target alone per space and scale, and builds its
``Hyperparameters`` through ``Hyperparameters._built``, which stores plain values without checking
them twice. These tests hold both to the public path: the constructor given the same fields, a
target given as a plain mapping (never cached), and a space whose rule or base is reassigned.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest

import transfersearch as ts
from transfersearch import rules
from transfersearch._hyperparameters import Hyperparameters
from transfersearch.optimizers import Muon

BASE = ts.Scale(width=64, depth=2, batch_size=32, dataset_size=4096, tokens=131072, params=1e5)
TARGET = ts.Scale(
    width=256, depth=8, batch_size=128, dataset_size=65536, tokens=2097152, params=3e6
)
COORDS = {"base_lr": 3e-3, "tau_epoch": 0.8}


def _space(rule: rules.Rule, base: ts.Scale = BASE, **options: object) -> ts.TransferSpace:
    return ts.TransferSpace(
        base=base,
        coords={
            "base_lr": ts.Float(1e-4, 1e-1, log=True),
            "tau_epoch": ts.Float(0.05, 20.0, log=True),
        },
        rule=rule,
        **options,  # type: ignore[arg-type]
    )


SPACES = {
    "mup": lambda: _space(rules.MuP()),
    "standard sgd": lambda: _space(rules.Standard(batch="sgd")),
    "power lines completep": lambda: _space(rules.MuP(dataset="power_lines", depth="completep")),
    "horizon": lambda: _space(rules.MuP(dataset=None, horizon="completed")),
    "ema": lambda: _space(rules.MuP(), ema_momentum=0.999),
    "muon": lambda: _space(rules.MuP(), optimizers={"hidden": Muon()}),
}


def _fields(hp: Hyperparameters) -> dict[str, object]:
    return {f.name: getattr(hp, f.name) for f in dataclasses.fields(hp)}


@pytest.mark.parametrize("name", sorted(SPACES))
def test_the_fast_path_equals_the_constructor_and_a_mapping_target(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every field of ``concretize``'s answer equals what the public constructor makes of the
    same fields (a field added to Hyperparameters and forgotten by ``_built`` fails here), and
    the same target given as a plain dict (which the cache never keeps) gives the same answer.
    The fast path is the one taken (the constructor's checks not run) except with another
    optimizer family, which goes through the constructor."""
    space = SPACES[name]()
    checked = []
    post_init = Hyperparameters.__post_init__

    def counted(self: Hyperparameters) -> None:
        checked.append(1)
        post_init(self)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ts.TransferSearchWarning)
        monkeypatch.setattr(Hyperparameters, "__post_init__", counted)
        for scale in (None, BASE, TARGET):
            space.concretize(COORDS, scale)
        assert len(checked) == (3 if name == "muon" else 0)
        monkeypatch.undo()
        for scale in (None, BASE, TARGET):
            fast = space.concretize(COORDS, scale)
            again = space.concretize(COORDS, scale)  # from the cache
            public = Hyperparameters(**_fields(fast))
            assert _fields(fast) == _fields(public)
            assert fast == public == again
            if scale is not None:
                assert space.concretize(COORDS, dict(scale)) == fast


def test_a_reassigned_rule_or_base_is_not_answered_from_the_cache() -> None:
    """The cache belongs to the space's rule and base as they are now: reassigning either gives
    what a new space with them gives."""
    space = _space(rules.MuP())
    before = space.concretize(COORDS, TARGET)
    space.rule = rules.Standard()
    assert space.concretize(COORDS, TARGET) == _space(rules.Standard()).concretize(COORDS, TARGET)
    assert space.concretize(COORDS, TARGET) != before
    space.rule = rules.MuP()
    wider = ts.Scale(**{**dict(BASE), "width": 128})
    space.base = wider
    moved = space.concretize(COORDS, TARGET)
    assert moved == _space(rules.MuP(), base=wider).concretize(COORDS, TARGET)
    assert moved != before


def test_bad_input_raises_the_same_error_on_both_paths() -> None:
    """A bad coordinate raises the public message whether the target is cached or a mapping."""
    space = _space(rules.MuP())
    space.concretize(COORDS, TARGET)  # the target now cached
    for scale in (TARGET, dict(TARGET)):
        with pytest.raises(ts.TransferSearchError, match="base_lr"):
            space.concretize({"base_lr": -1.0, "tau_epoch": 0.8}, scale)

"""The sampler's attribute writes on Optuna's in-memory storage (one copy of the trial for all keys,
2026-12-08) store what Optuna's own per-key writers store, and refuse what they refuse."""

from __future__ import annotations

import optuna
import pytest
from optuna.storages import InMemoryStorage

from transfersearch.integrations import _optuna_shim as shim

USER = {"rung": 2, "scale.width": 128.0, "hp": {"hidden": {"lr": 1e-3, "weight_decay": 0.1}}}
SYSTEM = {"transfersearch:rung": 2}


def _study(storage: optuna.storages.BaseStorage) -> tuple[optuna.Study, optuna.Trial]:
    study = optuna.create_study(storage=storage)
    return study, study.ask()


class _PublicOnly(InMemoryStorage):
    """The same storage, which the shim writes key by key through Optuna's public writers."""


def test_one_copy_stores_what_the_per_key_writers_store() -> None:
    fast_study, fast = _study(InMemoryStorage())
    slow_study, slow = _study(_PublicOnly())
    shim.set_trial_attrs(fast_study, fast, user=USER, system=SYSTEM)
    shim.set_trial_attrs(slow_study, slow, user=USER, system=SYSTEM)
    shim.set_user_attrs(fast, {"planned": True})
    shim.set_user_attrs(slow, {"planned": True})
    one, two = fast_study.trials[0], slow_study.trials[0]
    assert one.user_attrs == two.user_attrs == {**USER, "planned": True}
    assert one.system_attrs == two.system_attrs
    assert fast.user_attrs == slow.user_attrs  # the live trial's own copy too


def test_a_finished_trial_is_refused_as_optuna_refuses_it() -> None:
    study, trial = _study(InMemoryStorage())
    study.tell(trial, 1.0)
    with pytest.raises(RuntimeError) as fast:
        shim.set_trial_attrs(study, trial, user=USER)
    public_study, public = _study(InMemoryStorage())
    public_study.tell(public, 1.0)
    with pytest.raises(RuntimeError) as slow:
        public_study._storage.set_trial_user_attr(public._trial_id, "rung", 2)
    assert type(fast.value) is type(slow.value)
    assert str(fast.value).replace(str(trial._trial_id), "#") == str(slow.value).replace(
        str(public._trial_id), "#"
    )

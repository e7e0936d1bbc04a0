"""Hydra: the trial behind a job launched by ``hydra-optuna-sweeper`` with ``TransferSampler``.

The sweeper creates each trial with ``study.ask()`` (so ``TransferSampler`` assigns its rung),
calls :func:`suggest_coordinates` (its ``custom_search_space`` hook) to draw the coordinates, and
launches the job with them as overrides
(``base_lr=0.0031...``): the job sees the coordinates but not the rung. :func:`proxy_trial` opens
the study named by ``hydra.sweeper.storage`` / ``study_name``, finds the RUNNING trial whose
parameters are the job's coordinates (exactly: Hydra's overrides print floats with ``repr``), and
returns its scale and concrete hyperparameters.

Importing this module registers the sampler config ``hydra/sweeper/sampler: transfersearch``
(:class:`TransferSamplerConfig`, ``_target_`` :func:`transfer_sampler`): select it in the
defaults list and give ``space``, ``ladder`` and ``planner`` options under
``hydra.sweeper.sampler`` (``examples/hydra_sweep/conf/config.yaml``). A plain
``sampler._target_`` with extra keys is refused by the sweeper's schema, hence the config class.

hydra-optuna-sweeper 1.3 pins ``optuna<3``; it runs on Optuna 5 (its deprecated
distribution classes are still there), so install it with ``pip install --no-deps
hydra-optuna-sweeper`` next to ``transfersearch[hydra]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

try:
    import optuna
    from hydra.core.config_store import ConfigStore
    from hydra.core.hydra_config import HydraConfig
    from hydra_plugins.hydra_optuna_sweeper.config import SamplerConfig
    from omegaconf import MISSING
    from optuna.trial import TrialState
except ImportError as exc:  # pragma: no cover - exercised only without hydra
    raise ImportError(
        "transfersearch.integrations.hydra needs Hydra and Optuna: pip install "
        f"'transfersearch[hydra]' and pip install --no-deps hydra-optuna-sweeper ({exc})."
    ) from exc

from transfersearch.errors import TransferSearchError
from transfersearch.integrations._optuna_space import study_space
from transfersearch.scale import Scale
from transfersearch.space import Hyperparameters

__all__ = ["TransferSamplerConfig", "proxy_trial", "suggest_coordinates", "transfer_sampler"]


def suggest_coordinates(cfg: Any, trial: optuna.Trial) -> None:
    """The sweeper's ``custom_search_space``: ``TransferSampler.suggest(trial)``.

    The coordinates are suggested with the sampler's own distributions (the sweeper's ``params``
    would make the deprecated ``LogUniformDistribution``, which Optuna refuses to mix with them),
    and the trial's concrete hyperparameters are recorded as user attributes.

    Raises:
        TransferSearchError: the study's sampler is not a ``TransferSampler``.
    """
    from transfersearch.integrations.optuna import TransferSampler

    sampler = trial.study.sampler
    if not isinstance(sampler, TransferSampler):
        raise TransferSearchError(
            f"hydra.sweeper.custom_search_space={__name__}.suggest_coordinates needs the "
            f"transfersearch sampler, but the study's sampler is {type(sampler).__name__}: add "
            "'override hydra/sweeper/sampler: transfersearch' to the defaults list."
        )
    sampler.suggest(trial)


def transfer_sampler(
    space: Any, ladder: Any, base_sampler: Any = None, planner: Mapping[str, Any] | None = None
) -> Any:
    """``TransferSampler(space, ladder, base_sampler, **planner)``: the sweeper's ``_target_``."""
    from transfersearch.integrations.optuna import TransferSampler

    return TransferSampler(space, ladder, base_sampler, **dict(planner or {}))


@dataclass
class TransferSamplerConfig(SamplerConfig):
    """``hydra/sweeper/sampler: transfersearch``: nested ``_target_`` nodes build the space."""

    _target_: str = "transfersearch.integrations.hydra.transfer_sampler"
    _convert_: str = "all"
    space: Any = MISSING
    ladder: Any = MISSING
    base_sampler: Any = None
    planner: dict[str, Any] = field(default_factory=dict)


ConfigStore.instance().store(
    group="hydra/sweeper/sampler",
    name="transfersearch",
    node=TransferSamplerConfig,
    provider="transfersearch",
)


def _same(value: Any, wanted: Any) -> bool:
    if isinstance(value, float) and isinstance(wanted, (int, float)):
        return math.isclose(value, float(wanted), rel_tol=1e-12, abs_tol=0.0)
    return bool(value == wanted)


def proxy_trial(
    cfg: Mapping[str, Any], *, storage: str | None = None, study_name: str | None = None
) -> tuple[Scale, Hyperparameters]:
    """The rung's scale and the concrete hyperparameters of the job's trial.

    Args:
        cfg: the job's config; the coordinates are its top-level keys (the sweeper's ``params``).
        storage, study_name: default ``hydra.sweeper.storage`` and ``hydra.sweeper.study_name``.

    Returns:
        ``(scale, hp)`` as :meth:`TransferSampler.suggest` returned them to
        :func:`suggest_coordinates` (which recorded ``hp`` on the trial).

    Raises:
        TransferSearchError: no storage (an in-memory study cannot be reached from the job), the
            study holds no stored space, or no RUNNING trial has these coordinates.
    """
    if storage is None or study_name is None:
        sweeper = HydraConfig.get().sweeper
        storage = storage or sweeper.get("storage")
        study_name = study_name or sweeper.get("study_name")
    if not storage or not study_name:
        raise TransferSearchError(
            "proxy_trial needs hydra.sweeper.storage and hydra.sweeper.study_name (e.g. "
            f"sqlite:///proxy.db and proxy), but got storage={storage!r}, "
            f"study_name={study_name!r}: the job reads its trial from the study."
        )
    study = optuna.load_study(study_name=study_name, storage=storage)
    space = study_space(study)  # the user attribute only: the trials need not be read
    if space is None:
        raise TransferSearchError(
            f"study {study_name!r} holds no TransferSpace: set hydra.sweeper.sampler._target_ "
            "to transfersearch.integrations.optuna.TransferSampler."
        )
    missing = [n for n in space.distributions if n not in cfg]
    if missing:
        raise TransferSearchError(
            f"the job's config lacks the coordinates {missing}: name them in hydra.sweeper.params "
            "as top-level keys."
        )
    coords = {n: cfg[n] for n in space.distributions}
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    matches = [t for t in running if all(_same(t.params.get(n), v) for n, v in coords.items())]
    if not matches:
        raise TransferSearchError(
            f"no RUNNING trial of study {study_name!r} has the coordinates {coords}; run the job "
            "through the sweeper (python train.py --multirun)."
        )
    trial = matches[-1]
    scale = Scale({k[6:]: v for k, v in trial.user_attrs.items() if k.startswith("scale.")})
    return scale, space.concretize(coords, scale)

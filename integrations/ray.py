"""Ray Tune adapter: a Searcher over a proxy ladder, per-rung GPU packing, result readers.

::

    from ray import tune
    from transfersearch.integrations.ray import TransferSearch

    search = TransferSearch(space, ladder, metric="loss", mode="min")

    def train_fn(config):
        scale, hp = search.hyperparameters(config)   # works in the trial process: reads config only
        ...
        tune.report({"loss": loss})

    tuner = tune.Tuner(
        tune.with_resources(train_fn, resources=search.resources(gpu=0.25)),
        tune_config=tune.TuneConfig(search_alg=search, num_samples=200, max_concurrent_trials=8),
    )
    results = tuner.fit()
    res = ts.extrapolate(results, target=ts.Scale(width=4096, dataset_size=1e7, batch_size=256))

Each trial config carries ``"rung"``, ``"scale"``, the swept coordinates and ``"transfersearch"``
(metric, mode, source and the space as one JSON string), so Tune's console shows a few lines per
trial; :func:`hyperparameters` recomputes the concrete values from the stored space and the rung's
scale. A space whose rule cannot be stored (a custom rule class) puts ``"hparams"``
(:meth:`Hyperparameters.to_dict`) in the config instead, as configs did before. Law gating under Tune (``suggest`` returns None while a rung's law is pending) is described in
``docs/design.md``; Ray's privates are used in ``_ray_shim.py`` only.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np

try:
    from ray.tune.search import Searcher
except ImportError as exc:  # pragma: no cover - exercised only without ray
    raise ImportError(
        "transfersearch.integrations.ray needs Ray Tune: pip install 'transfersearch[ray]' "
        f"({exc})."
    ) from exc

from transfersearch.errors import Allowed, Interval, TransferSearchError, check_value
from transfersearch.ladder import PlannerOptions, Proposal, TransferPlanner
from transfersearch.observations import Observation
from transfersearch.readers import register_reader
from transfersearch.scale import Scale
from transfersearch.space import Choice, Float, Hyperparameters, Int, TransferSpace
from transfersearch.stored_space import space_from_json, storable_space
from transfersearch.sweep import Direction, Sweep

from . import _ray_shim as shim
from ._per_rung import PerRung
from ._ray_resources import RungResources
from ._ray_results import (
    SearcherTally,
    StoredTrial,
    TrialOutcome,
    TrialRecord,
    observations_from_outcomes,
    read_experiment,
    stored_space_json,
)

__all__ = [
    "STATE_VERSION",
    "RungResources",
    "TransferSearch",
    "TrialOutcome",
    "hyperparameters",
    "observations_from_outcomes",
    "observations_from_result_grid",
    "sweep_from_result_grid",
]

#: What ``max_concurrent`` may be (0: no limit).
MAX_CONCURRENT = Allowed(Interval(Integral, 0), fix="0 sets no limit, e.g. max_concurrent=4.")

logger = logging.getLogger(__name__)

#: Version of the JSON state written by :meth:`TransferSearch.save`.
STATE_VERSION = 1
_STATE_FORMAT = "transfersearch.integrations.ray.TransferSearch"
_META = "transfersearch"


# ----------------------------------------------------------------------------------------------
# Inside the trial
# ----------------------------------------------------------------------------------------------
def hyperparameters(config: Mapping[str, Any]) -> tuple[Scale, Hyperparameters]:
    """The rung's scale and the concrete hyperparameters of a trial, from its config alone.

    Usable inside the trainable (a separate process) without the searcher: the values are
    recomputed, ``space.concretize(coordinates, scale)``, from the space stored in the config's
    ``"transfersearch"`` entry — the searcher's own computation, so the numbers are identical. A
    config holding ``"hparams"`` (older versions, or a space with a custom rule) is read from it.

    Args:
        config: the trial config made by :class:`TransferSearch`.

    Returns:
        ``(scale, hp)``: the rung's :class:`Scale` and :class:`Hyperparameters` (per param group,
        PyTorch's coupled weight-decay convention; see :class:`Hyperparameters`).

    Raises:
        TransferSearchError: the config was not made by TransferSearch (no ``"scale"``, or neither
            a stored space nor ``"hparams"``), or lacks a swept coordinate.
    """
    scale, space = _scale_and_space(config)
    if space is None:
        return scale, Hyperparameters.from_dict(config["hparams"])
    return scale, space.concretize(_coordinates(config, space), scale)


def _scale_and_space(config: Mapping[str, Any]) -> tuple[Scale, TransferSpace | None]:
    """The rung's scale and the stored space of a config (None: it carries ``"hparams"``)."""
    meta = config.get(_META) if isinstance(config, Mapping) else None
    stored = meta.get("space") if isinstance(meta, Mapping) else None
    if (
        not isinstance(config, Mapping)
        or not isinstance(config.get("scale"), Mapping)
        or (stored is None and not isinstance(config.get("hparams"), Mapping))
    ):
        keys = sorted(config) if isinstance(config, Mapping) else type(config).__name__
        raise TransferSearchError(
            f"the trial config lacks 'scale' and the stored space ('{_META}') or 'hparams' (it "
            f"has {keys}). Run the trainable with search_alg=TransferSearch(...) so each config "
            "carries them."
        )
    return Scale(config["scale"]), None if stored is None else _space_of(stored)


@functools.lru_cache(maxsize=8)
def _space_of(stored: str) -> TransferSpace:
    """The space a config stores (parsed once per distinct string: a reader sees one per trial)."""
    return space_from_json(stored)


def _coordinates(config: Mapping[str, Any], space: TransferSpace) -> dict[str, Any]:
    """The swept coordinates of a config made with ``space``."""
    missing = [name for name in space.distributions if name not in config]
    if missing:
        raise TransferSearchError(
            f"the trial config lacks the swept coordinates {missing} (it has {sorted(config)}); "
            "a TransferSearch config holds every coordinate of its space at the top level."
        )
    return {name: config[name] for name in space.distributions}


# ----------------------------------------------------------------------------------------------
# The searcher
# ----------------------------------------------------------------------------------------------
def _tune_domain(dist: Float | Int | Choice) -> Any:
    """The Ray Tune domain sampling ``dist`` (for a base searcher's search space)."""
    from ray import tune

    if isinstance(dist, Float):
        return (
            tune.loguniform(dist.low, dist.high) if dist.log else tune.uniform(dist.low, dist.high)
        )
    if isinstance(dist, Int):
        if dist.log:
            return tune.lograndint(dist.low, dist.high + 1)
        if dist.step > 1 and dist.low % dist.step == 0:
            return tune.qrandint(dist.low, dist.high, dist.step)
        return tune.randint(dist.low, dist.high + 1)
    return tune.choice(list(dist.choices))


class TransferSearch(Searcher):
    """A Ray Tune Searcher that sweeps a :class:`TransferSpace` over a ladder of proxy scales.

    Each suggestion picks a rung with :meth:`TransferPlanner.assign_rung` (cheapest rung with budget
    left first) and its coordinates with :meth:`TransferPlanner.propose` (the fitted law's
    prediction once two rungs have enough finished trials), else from the base searcher (one copy
    per rung, so it sees only its rung's history) or, by default, by random sampling from the
    space's distributions. Errored trials are crashes (``state="failed"``: counted in
    ``summary()`` and left out of the fit, not divergences), a NaN or infinite metric is diverged, and trials stopped early by a scheduler (ASHA) as pruned.

    Concurrency is handled here: under ``ConcurrencyLimiter`` or ``max_concurrent_trials`` the
    limit is passed in by :meth:`set_max_concurrency` and :meth:`suggest` returns None while that
    many trials are live, and also while the next rung's law is pending (law gating, see the
    module docstring; ``gate_on_law=False`` turns it off).

    Args:
        space: the coordinates to sweep.
        ladder: the proxy scales (or a ready :class:`TransferPlanner` via ``planner=``).
        metric: the reported metric to optimise.
        mode: ``"min"`` or ``"max"``.
        base_searcher: an optional Ray Searcher (e.g. ``OptunaSearch()`` *without* a space: it is
            given the space's coordinates) used for the points the law does not propose.
        planner: a TransferPlanner to use instead of building one from ``ladder`` and
            ``planner_options``.
        max_t: the full length of a trial in ``time_attr`` units; trials that stop before it are
            pruned. Default: the longest any trial of the same rung ran.
        time_attr: the result field that measures progress.
        max_concurrent: a limit on live trials (0: none; Tune's limit overrides it).
        seed: seed of the default random sampling and of the base searcher's per-rung copies
            (each from ``SeedSequence([seed, rung])``).
        **planner_options: the planner's options, checked by
            :meth:`~transfersearch.ladder.PlannerOptions.from_kwargs` as the Optuna sampler checks
            them (``trials_per_rung``, ``focus``, ``gate_on_law``, ``diverged_beyond``, …); with ``planner`` given they
            are checked and not used.
            Not ``direction``: the planner's direction follows ``mode`` (``"max"``: maximize), also
            for a given ``planner`` (replaced by a copy for that direction when it differs); it is
            fixed once the mode is known.

    Raises:
        TransferSearchError: bad metric/mode, a ladder the planner rejects, an unknown or bad
            planner option (or a ``direction`` option), a base searcher that is not a Ray Searcher.
    """

    def __init__(
        self,
        space: TransferSpace,
        ladder: Sequence[Scale | Mapping[str, float]] | None = None,
        *,
        metric: str | None = None,
        mode: str | None = None,
        base_searcher: Searcher | None = None,
        planner: TransferPlanner | None = None,
        max_t: float | None = None,
        time_attr: str = "training_iteration",
        max_concurrent: int = 0,
        seed: int | None = 0,
        **planner_options: Any,
    ) -> None:
        if mode not in (None, "min", "max"):
            raise TransferSearchError(f"`mode` must be 'min' or 'max', but got mode={mode!r}.")
        if metric is not None and not isinstance(metric, str):
            raise TransferSearchError(f"`metric` must be a result key (str), but got {metric!r}.")
        if base_searcher is not None and not isinstance(base_searcher, Searcher):
            raise TransferSearchError(
                f"`base_searcher` must be a ray.tune.search.Searcher such as OptunaSearch(), but "
                f"got {type(base_searcher).__name__}."
            )
        if "direction" in planner_options:
            raise TransferSearchError(
                f"TransferSearch takes the direction from `mode`, but got "
                f"direction={planner_options['direction']!r}. Drop it and pass mode='max' (or "
                "TuneConfig(mode='max')) for a maximised metric."
            )
        options = PlannerOptions.from_kwargs(**planner_options)  # names a misspelt option
        if planner is None:
            if ladder is None:
                raise TransferSearchError("give `ladder` (the proxy scales) or `planner`.")
            planner = TransferPlanner(space, ladder, options=options)
        elif planner.space is not space:
            raise TransferSearchError(
                "`planner.space` must be the `space` given to TransferSearch."
            )
        self._check_concurrency(max_concurrent)
        super().__init__(metric=metric, mode=mode)
        self.space = space
        self.time_attr = time_attr
        self.max_concurrent = int(max_concurrent)
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        # One base searcher per rung (each sees only its rung's history), seeded from
        # SeedSequence([seed, rung]) so that no rung replays another's draws.
        self._rungs: PerRung[Searcher] = PerRung(
            planner,
            base_searcher,
            seed=seed,
            seed_copy=shim.seed_searcher,
            prepare=self._prepare_base,
        )
        self._rungs.bind(_direction(mode))
        self._config: dict[str, Any] = {}
        self._tally = SearcherTally(planner.ladder, max_t)
        stored = storable_space(space)
        # The space travels in each config as one compact JSON string: one console line (Tune
        # flattens dicts into a line per key), from which hyperparameters() recomputes the values.
        self._space_json = None if stored is None else json.dumps(stored, separators=(",", ":"))
        if stored is None:
            logger.info("configs carry 'hparams': the space's rule cannot be stored as JSON")

    # Properties and Tune plumbing -------------------------------------------------------------
    @staticmethod
    def hyperparameters(config: Mapping[str, Any]) -> tuple[Scale, Hyperparameters]:
        """See :func:`transfersearch.integrations.ray.hyperparameters`."""
        return hyperparameters(config)

    @property
    def planner(self) -> TransferPlanner:
        """The rung policy and law, planning for the direction ``mode`` names."""
        planner: TransferPlanner = self._rungs.planner
        return planner

    @property
    def ladder(self) -> tuple[Scale, ...]:
        """The rungs, in cost order (the index is the config's ``"rung"``)."""
        return self.planner.ladder

    @property
    def max_t(self) -> float | None:
        """The full length of a trial in ``time_attr`` units (None: per rung, the longest any
        of its trials ran); trials that stop before it are pruned."""
        max_t: float | None = self._tally.max_t
        return max_t

    @max_t.setter
    def max_t(self, value: float | None) -> None:
        self._tally.max_t = value

    @staticmethod
    def _check_concurrency(value: Any) -> None:
        check_value("max_concurrent", value, MAX_CONCURRENT)

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take metric and mode from ``TuneConfig`` when not given; keep the rest of param_space.

        ``param_space`` entries are merged into every trial config by Tune (constants only: the
        searched coordinates come from the TransferSpace).
        """
        if metric is not None and self._metric is not None and metric != self._metric:
            return False
        if mode is not None and self._mode is not None and mode != self._mode:
            return False
        if mode not in (None, "min", "max"):
            raise TransferSearchError(f"`mode` must be 'min' or 'max', but got mode={mode!r}.")
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        self._rungs.bind(_direction(self._mode))
        self._config = dict(config or {})
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Adopt the ConcurrencyLimiter's limit and enforce it in :meth:`suggest` (returns True)."""
        self._check_concurrency(max_concurrent)
        self.max_concurrent = int(max_concurrent)
        return True

    @property
    def live_trials(self) -> list[str]:
        """Ids of trials suggested (or restarted) and not yet ended."""
        return [t for t, r in self._tally.records.items() if r.status == "live"]

    # Suggesting -------------------------------------------------------------------------------
    def _prepare_base(self, base: Searcher, rung: int) -> None:
        """Give a rung's new base searcher the space's coordinates, the metric and the limit."""
        space = {n: _tune_domain(d) for n, d in self.space.distributions.items()}
        accepted = base.set_search_properties(self._metric, self._mode, space)
        if not accepted and getattr(base, "metric", None) is None:
            raise TransferSearchError(
                f"the base searcher {type(base).__name__} refused the search space (it already "
                "has one) and has no metric. Build it without a space, e.g. OptunaSearch(); "
                "TransferSearch gives it the space's coordinates."
            )
        if self.max_concurrent:
            base.set_max_concurrency(self.max_concurrent)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The next trial's config, or None while the concurrency limit is reached or the next
        rung's law is pending (Tune asks again later)."""
        if self._metric is None or self._mode is None:
            raise TransferSearchError(
                "TransferSearch has no metric/mode. Pass metric='loss', mode='min' to "
                "TransferSearch(...) (Tune forwards TuneConfig's metric and mode to the searcher "
                "only when the Tuner has a non-empty param_space)."
            )
        live = sum(self._tally.counts().running)
        if self.max_concurrent and live >= self.max_concurrent:
            logger.debug(
                "suggest(%s) -> None: %d trials live, the limit is %d",
                trial_id,
                live,
                self.max_concurrent,
            )
            return None
        proposal, _ = self._rungs.plan(self._tally, wait=True)
        if proposal is None:
            logger.debug("suggest(%s) -> None: the next rung waits for its law", trial_id)
            return None
        coords, by_base = self._coordinates(trial_id, proposal)
        if coords is None:
            return None
        rung = proposal.rung
        self._tally.records[trial_id] = TrialRecord(
            rung=rung, params=coords, source=proposal.source, by_base=by_base
        )
        scale = self.ladder[rung]
        meta = {"metric": self._metric, "mode": self._mode, "source": proposal.source}
        config: dict[str, Any] = {"rung": rung, "scale": scale.to_dict(), **coords, _META: meta}
        if self._space_json is None:
            config["hparams"] = self.space.concretize(coords, scale).to_dict()
        else:
            meta["space"] = self._space_json
        return config

    def _coordinates(self, trial_id: str, proposal: Proposal) -> tuple[dict[str, Any] | None, bool]:
        """The trial's coordinates: the law's proposal, else the rung's base searcher's, else
        drawn from the space (each snapped to its distribution); and whether the base searcher
        chose them. None while the base searcher has no point to give."""
        coords: dict[str, Any] = dict(proposal.params)
        by_base = False
        base = None if coords else self._rungs.base(proposal.rung)
        if base is not None:
            suggested = base.suggest(trial_id)
            if not isinstance(suggested, dict):  # None (wait) or Searcher.FINISHED
                logger.debug(
                    "suggest(%s) -> None: rung %d's base searcher returned %r",
                    trial_id,
                    proposal.rung,
                    suggested,
                )
                return None, False
            coords = {n: suggested[n] for n in self.space.distributions if n in suggested}
            by_base = True
        for name, dist in self.space.distributions.items():
            coords[name] = dist.snap(coords[name]) if name in coords else dist.sample(self._rng)
        return {n: coords[n] for n in self.space.distributions}, by_base

    # Results ----------------------------------------------------------------------------------
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """Track progress (and mark a restarted trial live again); forward to its base searcher."""
        record = self._tally.records.get(trial_id)
        if record is None:
            return
        record.status = "live"
        self._absorb(record, result, errored=False)
        base = self._rungs.copies.get(record.rung)
        if record.by_base and base is not None:
            base.on_trial_result(trial_id, result)

    def _absorb(self, record: TrialRecord, result: Mapping[str, Any] | None, errored: bool) -> None:
        record.errored = errored
        if result:
            metric = self._metric
            if metric is not None and result.get(metric) is not None:
                record.value = float(result[metric])
            progress = result.get(self.time_attr)
            if isinstance(progress, (int, float)) and not isinstance(progress, bool):
                record.progress = float(progress)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Record the ended trial (errored → failed, NaN → diverged, stopped early → pruned)."""
        record = self._tally.records.get(trial_id)
        if record is None:
            return
        record.status = "ended"
        self._absorb(record, result, errored=error)
        self._tally.ended()
        base = self._rungs.copies.get(record.rung)
        if base is None:
            return
        if record.by_base:
            base.on_trial_complete(trial_id, result=result, error=error)
        elif record.value is not None and not error:
            try:
                base.add_evaluated_point(dict(record.params), record.value)
            except NotImplementedError:
                pass

    def observations(self, *, ended_only: bool = True) -> list[Observation]:
        """The trials so far as observations, each with the raw metric (for ``mode="max"`` fit
        them with ``direction="maximize"``).

        Live trials are left out unless ``ended_only=False`` (then as pruned, by their latest
        value, if they reported one).
        """
        observations: list[Observation] = self._tally.observations(ended_only=ended_only)
        return observations

    # Resources --------------------------------------------------------------------------------
    def resources(
        self,
        gpu: float | None = None,
        cpu: float = 1.0,
        gpu_per_rung: Mapping[Any, float] | None = None,
        *,
        max_gpu: float = 1.0,
        cpu_per_rung: Mapping[Any, float] | None = None,
    ) -> RungResources:
        """Per-rung resource requests, for ``tune.with_resources(train_fn, resources=...)``.

        A rung gets ``max_gpu · cost / cost_of_largest_rung`` GPUs, at least ``gpu``, rounded up to
        1/k below one GPU (k trials share a GPU) and to whole GPUs above; with no GPU in the
        cluster every rung runs on CPUs only. Ray sets ``CUDA_VISIBLE_DEVICES`` in each trial.

        Args:
            gpu: the smallest share a trial gets (0.25: up to four small proxies per GPU; 1: one
                trial per GPU, no packing; 0: CPU only). None: 0.25.
            cpu: CPUs per trial.
            gpu_per_rung: overrides, rung index (cost order) or scale -> GPUs per trial.
            max_gpu: GPUs per trial of the largest rung.
            cpu_per_rung: overrides, rung index or scale -> CPUs per trial.

        Returns:
            A picklable callable ``config -> PlacementGroupFactory`` (see :class:`RungResources`).
        """
        return RungResources(
            self.ladder,
            self.planner.costs,
            gpu=gpu,
            cpu=cpu,
            max_gpu=max_gpu,
            gpu_per_rung=gpu_per_rung,
            cpu_per_rung=cpu_per_rung,
        )

    # State ------------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Explicit, versioned, JSON-friendly state (see :meth:`save`)."""
        return {
            "format": _STATE_FORMAT,
            "version": STATE_VERSION,
            "metric": self._metric,
            "mode": self._mode,
            "max_concurrent": self.max_concurrent,
            "ladder": [s.to_dict() for s in self.ladder],
            "trials": {t: dataclasses.asdict(r) for t, r in self._tally.records.items()},
            "rng": self._rng.bit_generator.state,
            "planner": self.planner.state_dict(),
            "base_searchers": {str(r): _save_base(b) for r, b in self._rungs.copies.items()},
            "space": storable_space(self.space),  # read by ts.stored_space(experiment_dir)
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`get_state`'s output.

        Raises:
            TransferSearchError: another format or version, or a state saved for another ladder.
        """
        if not isinstance(state, Mapping):
            raise TransferSearchError(
                f"a TransferSearch state is a mapping from get_state(), but got "
                f"{type(state).__name__}."
            )
        if state.get("format") != _STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise TransferSearchError(
                f"cannot restore TransferSearch from state format={state.get('format')!r} "
                f"version={state.get('version')!r}; this version reads format={_STATE_FORMAT!r} "
                f"version={STATE_VERSION}."
            )
        ladder = [Scale(s) for s in state["ladder"]]
        if tuple(ladder) != self.ladder:
            raise TransferSearchError(
                f"the saved state is for the ladder {ladder}, but this searcher's is "
                f"{list(self.ladder)}. Restore with the same space and ladder."
            )
        self._metric = state["metric"]
        self._mode = state["mode"]
        self._rungs.bind(_direction(self._mode))
        self.max_concurrent = int(state["max_concurrent"])
        self._tally.records = {str(t): TrialRecord(**r) for t, r in state["trials"].items()}
        self._tally.ended()
        self._rng.bit_generator.state = state["rng"]
        self.planner.load_state_dict(state["planner"])
        self._rungs.forget_copies()
        for rung, saved in state.get("base_searchers", {}).items():
            base = self._rungs.base(int(rung))
            if base is not None and saved is not None:
                _restore_base(base, saved)

    def save(self, checkpoint_path: str) -> None:
        """Write :meth:`get_state` as JSON to ``checkpoint_path`` (atomic: write, then rename).

        A base searcher's own ``save`` output is embedded (base64) rather than put in a sibling
        file: Tune saves to a temporary name and renames only that one file.
        """
        directory = os.path.dirname(os.path.abspath(checkpoint_path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ts-state-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            json.dump(self.get_state(), handle)
        os.replace(tmp, checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        """Load a state written by :meth:`save`.

        Trust: the state is JSON, and without a ``base_searcher`` nothing in it is unpickled (an
        embedded base-searcher blob is ignored). With one, each rung's embedded blob is handed to
        ``base_searcher.restore``, and Ray's searchers (OptunaSearch, HyperOptSearch, ...) unpickle
        it, which runs whatever code it holds: restore such states only from checkpoints you wrote.
        Tune itself calls this method from ``Tuner.restore``, which unpickles the experiment state
        anyway.

        Raises:
            TransferSearchError: the file is missing or unreadable (naming the path), is not a
                TransferSearch state, or is for another ladder.
        """
        try:
            with open(checkpoint_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except OSError as exc:
            raise TransferSearchError(
                f"cannot read the TransferSearch state {os.fspath(checkpoint_path)!r}: "
                f"{exc.strerror or exc}. Pass the file save() wrote (Tune writes it as "
                "searcher-state-*.pkl in the experiment folder)."
            ) from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TransferSearchError(
                f"{checkpoint_path!r} is not a TransferSearch state (JSON written by save()): "
                f"{exc}."
            ) from exc
        if not isinstance(state, Mapping):
            raise TransferSearchError(
                f"{checkpoint_path!r} is not a TransferSearch state: it holds a JSON "
                f"{type(state).__name__}, not the object save() writes."
            )
        self.set_state(state)


def _direction(mode: str | None) -> Direction | None:
    """The direction Tune's ``mode`` names (None: not known yet)."""
    if mode is None:
        return None
    return "maximize" if mode == "max" else "minimize"


def _save_base(base: Searcher) -> dict[str, str] | None:
    """The base searcher's own save() output, base64-encoded (None if it cannot save)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "base-searcher.pkl")
        try:
            base.save(path)
        except NotImplementedError:
            return None
        with open(path, "rb") as handle:
            data = handle.read()
    return {"class": type(base).__qualname__, "data": base64.b64encode(data).decode("ascii")}


def _restore_base(base: Searcher, saved: Mapping[str, str]) -> None:
    if saved.get("class") != type(base).__qualname__:
        raise TransferSearchError(
            f"the saved base searcher is a {saved.get('class')}, but this TransferSearch has a "
            f"{type(base).__qualname__}. Restore with the same base_searcher."
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "base-searcher.pkl")
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(saved["data"]))
        base.restore(path)


# ----------------------------------------------------------------------------------------------
# Reading results
# ----------------------------------------------------------------------------------------------
def _trials(source: Any) -> list[StoredTrial]:
    """The Tune trials (config, last result, errored) of a grid, an analysis or a directory.

    A directory is read from JSON alone (:func:`read_experiment`): never unpickled. A ``Result``
    of a trial that raised before reporting has no config, so a grid's trials are read from the
    ``ExperimentAnalysis`` behind it, which keeps every trial's config.
    """
    from ray.tune import ExperimentAnalysis, ResultGrid

    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isdir(path):
            raise TransferSearchError(
                f"{path!r} is not an experiment directory. Pass the Tune experiment folder "
                "(storage_path/name) or a ResultGrid."
            )
        return read_experiment(path)
    if isinstance(source, ResultGrid):
        analysis = shim.experiment_analysis(source)
        if analysis is None:
            return read_experiment(source.experiment_path)
        source = analysis
    if isinstance(source, ExperimentAnalysis):
        return [
            StoredTrial(
                trial_id=trial.trial_id,
                path=trial.path,
                config=trial.config or {},
                last_result=trial.last_result or {},
                errored=trial.status == "ERROR",
            )
            for trial in source.trials
        ]
    raise TransferSearchError(
        f"expected a ResultGrid, an ExperimentAnalysis or an experiment path, but got "
        f"{type(source).__name__}."
    )


def observations_from_result_grid(
    source: Any,
    *,
    metric: str | None = None,
    max_t: float | None = None,
    time_attr: str = "training_iteration",
) -> list[Observation]:
    """Read a Tune experiment made with :class:`TransferSearch` into observations.

    Args:
        source: a ``ResultGrid`` (``tuner.fit()`` or ``Tuner.restore(path, fn).get_results()``),
            an ``ExperimentAnalysis``, or the experiment directory as a path. A path is read from
            the trials' JSON files and never unpickled, so any directory is safe to read; Ray's
            own ``Tuner.restore`` and ``ExperimentAnalysis(path)`` unpickle the experiment state
            (arbitrary code): use them only on experiments you trust.
        metric: the metric; default: the one the searcher recorded in each config.
        max_t, time_attr: the full trial length, for telling pruned trials from complete ones
            (default: per rung, the longest any of its trials ran).

    Returns:
        One Observation per trial with the raw metric (pass ``direction="maximize"`` to the fit
        for a maximised metric); errored trials are failed, NaN/inf values diverged, trials stopped
        before the full length pruned.

    Raises:
        TransferSearchError: a path that is not a Tune experiment directory, a trial's config
            that was not made by TransferSearch, or no metric known.

    Configs of both forms are read: the current one (coordinates at the top level, the space in
    ``"transfersearch"``) and the one with ``"hparams"`` (older versions, custom rules).
    """
    outcomes, _modes = _outcomes(source, metric=metric, time_attr=time_attr)
    return observations_from_outcomes(outcomes, max_t=max_t)


def sweep_from_result_grid(
    source: Any,
    *,
    metric: str | None = None,
    max_t: float | None = None,
    time_attr: str = "training_iteration",
) -> Sweep:
    """A Tune experiment made with :class:`TransferSearch` as a :class:`~transfersearch.Sweep`.

    The observations are :func:`observations_from_result_grid`'s (same arguments); the space is
    the one in the newest searcher state Tune saved in the experiment directory (read as JSON,
    never unpickled; None where there is none); the direction is the searcher's ``mode``
    recorded in the configs (``"max"``: ``"maximize"``; None where the configs disagree or
    record none).

    Raises:
        TransferSearchError: as :func:`observations_from_result_grid`, or a stored space that
            cannot be read.
    """
    outcomes, modes = _outcomes(source, metric=metric, time_attr=time_attr)
    observations = observations_from_outcomes(outcomes, max_t=max_t)
    direction: Direction | None = None
    if len(modes) == 1:
        direction = "maximize" if modes == {"max"} else "minimize"
    path = getattr(source, "experiment_path", source)
    raw = None
    if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
        raw = stored_space_json(os.fspath(path))
    space = None if raw is None else space_from_json(raw)
    return Sweep(tuple(observations), space=space, direction=direction)


def _outcomes(
    source: Any, *, metric: str | None, time_attr: str
) -> tuple[list[TrialOutcome], set[str]]:
    """The trials of ``source`` as outcomes, and the modes their configs record."""
    outcomes: list[TrialOutcome] = []
    modes: set[str] = set()
    for trial in _trials(source):
        config = trial.config
        try:
            scale, space = _scale_and_space(config)
        except TransferSearchError:
            raise TransferSearchError(
                f"trial {trial.trial_id} at {trial.path!r} has no 'scale' and stored space or "
                "'hparams' in its config: it was not suggested by TransferSearch. Read only "
                "experiments run with search_alg=TransferSearch(...)."
            ) from None
        meta = config.get(_META) or {}
        if meta.get("mode") in ("min", "max"):
            modes.add(meta["mode"])
        if space is None:  # configs before the space was stored, or a custom rule
            params = dict(config["hparams"].get("coordinates", {}))
        else:
            params = _coordinates(config, space)
        name = metric or meta.get("metric")
        if not name:
            raise TransferSearchError(
                "no metric known for the experiment; pass metric='<your metric>'."
            )
        metrics = trial.last_result
        raw = metrics.get(name)
        progress = metrics.get(time_attr)
        outcomes.append(
            TrialOutcome(
                scale=scale,
                params=params,
                value=None if raw is None else float(raw),
                errored=trial.errored,
                progress=None if progress is None else float(progress),
            )
        )
    return outcomes, modes


register_reader("ray", sweep_from_result_grid)  # a ResultGrid or ExperimentAnalysis
register_reader("directory", sweep_from_result_grid)  # a Tune experiment directory

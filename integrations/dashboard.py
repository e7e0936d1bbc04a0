"""optuna-dashboard: put the transfer's evidence and its numbers on the study.

.. code-block:: python

    from transfersearch.integrations.dashboard import publish

    study.optimize(objective, n_trials=120)
    res = ts.extrapolate(study, target=ts.Scale(width=4096, dataset_size=1e7, batch_size=256))
    publish(study, res, storage="sqlite:///proxy.db")   # artifacts in ./proxy-artifacts

    # optuna-dashboard sqlite:///proxy.db --artifact-dir proxy-artifacts

What :func:`publish` writes (``transfersearch report --storage ... --study ...`` calls it too):

* artifacts (``optuna.artifacts``): ``report.png`` (:func:`transfersearch.report.plot_report`) and
  ``laws.json`` (:func:`transfersearch.summary.extrapolation_to_dict`: target, decision,
  interval, laws, per-rung optima and the big run's hyperparameters when the space is stored);
  each call adds a new pair, and the user attribute below names the latest;
* the study user attribute :data:`TARGET_ATTR`: the target, the decision, its interval, the model
  and the artifact ids (the dashboard lists user attributes on the study page);
* the study note (Markdown): the same in a table, with the hidden group's lr and weight decay,
  and what the fit found (``Extrapolation.diagnostics``, those to act on first);
* the plotly figures of :mod:`transfersearch.visualization` as dashboard graphs (replaced on
  each call), when plotly is installed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import optuna
    from optuna.artifacts import FileSystemArtifactStore, upload_artifact
except ImportError as exc:  # pragma: no cover - exercised only without optuna
    raise ImportError(
        "transfersearch.integrations.dashboard needs Optuna: pip install "
        f"'transfersearch[dashboard]' ({exc})."
    ) from exc

from transfersearch.errors import TransferSearchError
from transfersearch.observations import Observation
from transfersearch.readers import as_observations
from transfersearch.report import format_table
from transfersearch.stored_space import stored_space
from transfersearch.summary import extrapolation_to_dict

if TYPE_CHECKING:
    from transfersearch.fitting.result import Extrapolation

__all__ = ["TARGET_ATTR", "Published", "default_artifact_dir", "publish"]

logger = logging.getLogger("transfersearch.integrations.dashboard")

#: Study user attribute holding the target prediction (JSON object).
TARGET_ATTR = "transfersearch:target"
#: Graph ids of the plotly figures on the dashboard (a new call replaces them).
_GRAPHS = ("transfersearch-landscapes", "transfersearch-law", "transfersearch-walk-forward")


@dataclass(frozen=True)
class Published:
    """What :func:`publish` wrote.

    Attributes:
        artifact_dir: the file-system artifact store's folder (None for a store you passed).
        report_id: the artifact id of ``report.png``.
        laws_id: the artifact id of ``laws.json``.
        graphs: the dashboard graph ids of the plotly figures (empty without plotly).
    """

    artifact_dir: Path | None
    report_id: str
    laws_id: str
    graphs: tuple[str, ...]

    def describe(self, storage: str = "<storage>") -> str:
        """One line for a terminal, with the dashboard command when the store is a folder."""
        where = f" in {self.artifact_dir}" if self.artifact_dir else ""
        line = f"published report.png ({self.report_id}) and laws.json ({self.laws_id}){where}"
        if self.artifact_dir is not None:
            line += f"; view with: optuna-dashboard {storage} --artifact-dir {self.artifact_dir}"
        return line


def default_artifact_dir(storage: str) -> Path:
    """``<db>-artifacts`` beside the SQLite file of ``storage`` (``sqlite:///runs/proxy.db`` →
    ``runs/proxy-artifacts``).

    Raises:
        TransferSearchError: ``storage`` is not a SQLite file URL (pass ``artifact_dir=``).
    """
    prefix = "sqlite:///"
    if not isinstance(storage, str) or not storage.startswith(prefix) or storage == prefix:
        raise TransferSearchError(
            f"no default artifact folder for storage {storage!r}: only a SQLite file has a place "
            "beside it. Pass artifact_dir='...' (or --artifact-dir DIR), or artifact_store= for "
            "a cloud store."
        )
    database = Path(storage[len(prefix) :].split("?", 1)[0])
    return database.with_name(f"{database.stem}-artifacts")


def _note(result: Extrapolation, level: float, data: dict[str, Any]) -> str:
    interval = result.interval(level)
    percent = f"{round(level * 100)}%"
    rows = [[n, v, interval[n][0], interval[n][1]] for n, v in result.params.items()]
    lines = [
        "## transfersearch: the big run",
        f"Target `{result.target!r}`, model **{result.model}** ({result.selection_reason}).",
        "",
        "```",
        format_table(["param", "decision", f"{percent} low", f"{percent} high"], rows),
    ]
    hp = data["hyperparameters"]
    if hp is not None:
        groups = [[g, v["lr"], v["weight_decay"]] for g, v in hp["groups"].items()]
        lines += ["", format_table(["group", "lr", "weight_decay"], groups)]
        lines.append(f"betas={hp['betas']} eps={hp['eps']:g} ema_momentum={hp['ema_momentum']}")
    lines += ["```", *_diagnostic_lines(result)]
    lines += ["", "Artifacts: `report.png` (the picture), `laws.json` (every number)."]
    return "\n".join(lines)


def _diagnostic_lines(result: Extrapolation) -> list[str]:
    """The fit's diagnostics as a Markdown list, those the user must act on first and marked."""
    records = sorted(result.diagnostics, key=lambda d: not d.act)
    if not records:
        return []
    items = [f"- {'**act:** ' if d.act else ''}{d.message}" for d in records]
    return ["", "### What the fit found", *items]


def _save_figures(
    study: optuna.Study, observations: Sequence[Observation], result: Extrapolation, level: float
) -> tuple[str, ...]:
    """Save the plotly figures as dashboard graphs; () without plotly or optuna-dashboard."""
    try:
        from optuna_dashboard import save_plotly_graph_object

        from transfersearch import visualization
    except ImportError as exc:
        logger.info("dashboard graphs skipped: %s", exc)
        return ()
    try:
        figures = [
            visualization.plot_rung_landscapes(list(observations), result),
            visualization.plot_optimum_vs_scale(result, level=level),
        ]
    except ImportError as exc:  # plotly missing
        logger.info("dashboard graphs skipped: %s", exc)
        return ()
    try:
        figures.append(visualization.plot_walk_forward(result))
    except TransferSearchError as exc:
        logger.info("walk-forward graph skipped: %s", exc)
    for graph_id, figure in zip(_GRAPHS, figures):
        save_plotly_graph_object(study, figure, graph_object_id=graph_id)
    return _GRAPHS[: len(figures)]


def publish(
    study: optuna.Study,
    result: Extrapolation,
    *,
    storage: str | None = None,
    artifact_dir: str | os.PathLike[str] | None = None,
    artifact_store: Any = None,
    observations: Sequence[Observation] | None = None,
    level: float = 0.9,
    png: str | os.PathLike[str] | None = None,
) -> Published:
    """Upload the report and the laws to ``study`` and record the target prediction on it.

    Args:
        study: the proxy study ``result`` was fitted to.
        result: :func:`transfersearch.extrapolate`'s result.
        storage: the study's storage URL, to place the artifacts beside a SQLite file
            (:func:`default_artifact_dir`); not needed with ``artifact_dir`` or ``artifact_store``.
        artifact_dir: the folder of a ``FileSystemArtifactStore`` (created if missing).
        artifact_store: any Optuna artifact store (e.g. ``Boto3ArtifactStore``); wins over the rest.
        observations: the trials (default: read from ``study``).
        level: the interval's coverage.
        png: an existing report picture to upload (default: drawn now with matplotlib).

    Returns:
        :class:`Published`: the folder and the artifact ids.

    Raises:
        TransferSearchError: no place for the artifacts, or no trials.
        ImportError: matplotlib is missing and ``png`` is not given.
    """
    artifact_store, folder = _artifact_store(storage, artifact_dir, artifact_store)
    obs = list(observations) if observations is not None else as_observations(study)
    space = result.space if result.space is not None else stored_space(study)
    hp = None if space is None else result.hyperparameters(space)
    data = extrapolation_to_dict(result, level, hp)
    report_id, laws_id = _upload(study, artifact_store, obs, result, level, png, data)
    study.set_user_attr(
        TARGET_ATTR,
        {
            "target": data["target"],
            "params": data["params"],
            "interval": data["interval"],
            "level": level,
            "model": result.model,
            "hidden_lr": None if hp is None else hp.lr,
            "hidden_weight_decay": None if hp is None else hp.weight_decay,
            "artifacts": {"report.png": report_id, "laws.json": laws_id},
        },
    )
    for name, value in data["params"].items():  # one sortable number per coordinate as well
        if math.isfinite(value):
            study.set_user_attr(f"transfersearch:target.{name}", value)
    try:
        from optuna_dashboard import save_note

        save_note(study, _note(result, level, data))
    except ImportError as exc:
        logger.info("study note skipped (pip install optuna-dashboard): %s", exc)
    graphs = _save_figures(study, obs, result, level)
    logger.info("published the transfer to study %r: %s, %s", study.study_name, report_id, laws_id)
    return Published(folder, report_id, laws_id, graphs)


def _artifact_store(
    storage: str | None,
    artifact_dir: str | os.PathLike[str] | None,
    artifact_store: Any,
) -> tuple[Any, Path | None]:
    """The store to upload to and its folder (None for a store passed in): ``artifact_store``,
    else a ``FileSystemArtifactStore`` in ``artifact_dir`` or beside the SQLite file."""
    if artifact_store is not None:
        return artifact_store, None
    if artifact_dir is not None:
        folder = Path(artifact_dir)
    elif storage is not None:
        folder = default_artifact_dir(storage)
    else:
        raise TransferSearchError(
            "publish() needs a place for the artifacts: pass storage='sqlite:///proxy.db' "
            "(artifacts beside the file), artifact_dir='...' or artifact_store=..."
        )
    folder.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(folder)), folder


def _upload(
    study: optuna.Study,
    artifact_store: Any,
    observations: Sequence[Observation],
    result: Extrapolation,
    level: float,
    png: str | os.PathLike[str] | None,
    data: dict[str, Any],
) -> tuple[str, str]:
    """Upload ``report.png`` (``png``, or drawn now) and ``laws.json``; their artifact ids."""
    with tempfile.TemporaryDirectory(prefix="transfersearch-") as tmp:
        picture = Path(tmp) / "report.png"
        if png is None:
            from transfersearch.report import plot_report

            plot_report(observations, result, picture, level=level)
        else:
            picture.write_bytes(Path(png).read_bytes())
        laws = Path(tmp) / "laws.json"
        laws.write_text(json.dumps(data, indent=2, allow_nan=True), encoding="utf-8")
        report_id = upload_artifact(
            artifact_store=artifact_store, file_path=str(picture), study_or_trial=study,
            mimetype="image/png",
        )  # fmt: skip
        laws_id = upload_artifact(
            artifact_store=artifact_store, file_path=str(laws), study_or_trial=study,
            mimetype="application/json",
        )  # fmt: skip
    return report_id, laws_id

"""optuna-dashboard: `transfersearch report --storage ... --study ... --publish` puts the report on
the study, and the real optuna-dashboard server serves it back over HTTP (localhost only)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("optuna_dashboard")
pytest.importorskip("plotly")

from _sweep import TARGET, run_sweep

import transfersearch as ts
from transfersearch.cli import main

#: How long the server may take to answer its first request (it imports optuna and bottle).
SERVER_START_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[bytes, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read(), response.headers.get("Content-Type", "")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A swept study whose report was published by the CLI, as a user would run it."""
    directory = tmp_path_factory.mktemp("dashboard")
    storage = run_sweep(directory)
    target = ",".join(f"{k}={v:g}" for k, v in TARGET.items())
    args = ["report", "--storage", storage, "--study", "proxy", "--target", target]
    args += ["--out", str(directory / "report.png"), "--html", str(directory / "report.html")]
    assert main([*args, "--publish"]) == 0  # report alone only reads
    return {"storage": storage, "directory": directory, "artifacts": directory / "proxy-artifacts"}


@pytest.fixture(scope="module")
def server(published: dict[str, object]) -> Iterator[str]:
    """The real optuna-dashboard on 127.0.0.1, against the SQLite study and its artifact folder."""
    executable = shutil.which("optuna-dashboard") or os.path.join(
        os.path.dirname(sys.executable), "optuna-dashboard"
    )
    port = _free_port()
    process = subprocess.Popen(
        [
            *(executable, str(published["storage"]), "--host", "127.0.0.1", "--port", str(port)),
            *("--artifact-dir", str(published["artifacts"]), "--server", "wsgiref", "--quiet"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:
            try:
                _get(f"{url}/api/meta")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    err = process.stderr.read().decode() if process.stderr else ""
                    pytest.fail(f"optuna-dashboard did not start: {err[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _study(url: str) -> tuple[int, dict]:
    studies = json.loads(_get(f"{url}/api/studies")[0])["study_summaries"]
    (summary,) = [s for s in studies if s["study_name"] == "proxy"]
    study_id = summary["study_id"]
    return study_id, json.loads(_get(f"{url}/api/studies/{study_id}")[0])


@pytest.mark.slow
def test_the_dashboard_serves_the_target_prediction_and_the_artifacts(
    published: dict[str, object], server: str
) -> None:
    import optuna

    study_id, detail = _study(server)
    attrs = {a["key"]: a["value"] for a in detail["user_attrs"]}
    target = json.loads(attrs["transfersearch:target"])
    study = optuna.load_study(study_name="proxy", storage=str(published["storage"]))
    res = ts.extrapolate(study, target=TARGET, seed=0)
    for name, value in res.params.items():  # the CLI's fit, the same seed: the same decision
        assert target["params"][name] == pytest.approx(value, rel=1e-9)
        low, high = target["interval"][name]
        assert low <= value <= high
    assert target["model"] == res.model and target["target"]["width"] == 1024
    assert target["hidden_lr"] == pytest.approx(target["params"]["base_lr"] / 16)  # µP, 16× wider
    assert "transfersearch: the big run" in detail["note"]["body"]
    assert "hidden" in detail["note"]["body"]
    assert res.diagnostics  # the sweep's fit has something to say (its stability boundary)
    for record in res.diagnostics:  # the note shows what the fit found, as summary() does
        assert record.message in detail["note"]["body"]
    ids = target["artifacts"]
    served = {a["artifact_id"]: a for a in detail["artifacts"]}
    assert set(ids.values()) <= set(served)
    assert served[ids["report.png"]]["mimetype"] == "image/png"
    png, kind = _get(f"{server}/artifacts/{study_id}/{ids['report.png']}")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and kind == "image/png"
    laws = json.loads(_get(f"{server}/artifacts/{study_id}/{ids['laws.json']}")[0])
    assert laws["params"] == pytest.approx(target["params"])
    assert set(laws["laws"]) == {"base_lr", "tau_epoch"}
    assert laws["hyperparameters"]["groups"]["hidden"]["lr"] == pytest.approx(target["hidden_lr"])
    graphs = {g["id"] for g in detail["plotly_graph_objects"]}
    assert {"transfersearch-landscapes", "transfersearch-law"} <= graphs


def test_report_writes_the_html_and_the_artifact_folder_beside_the_database(
    published: dict[str, object],
) -> None:
    directory = Path(str(published["directory"]))
    html = (directory / "report.html").read_text()
    assert "Walk-forward validation" in html and "Optimum vs scale" in html
    assert len(list(Path(str(published["artifacts"])).iterdir())) == 2


def test_no_default_artifact_folder_without_a_sqlite_file() -> None:
    from transfersearch.integrations.dashboard import default_artifact_dir

    assert default_artifact_dir("sqlite:///runs/proxy.db") == Path("runs/proxy-artifacts")
    with pytest.raises(ts.TransferSearchError, match="artifact_dir"):
        default_artifact_dir("postgresql://user@host/db")

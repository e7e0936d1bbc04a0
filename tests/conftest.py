"""Shared fixtures: a throw-away PostgreSQL server for storage tests.

``postgres_url`` starts a private cluster once per session (``initdb`` + ``pg_ctl`` from
``/usr/lib/postgresql/*/bin`` or PATH; CI installs them with ``.ci/postgres.sh``) on a free port
with trust authentication on 127.0.0.1, creates a database and yields its URL in the README's
plain form (``postgresql://postgres@127.0.0.1:<port>/transfersearch``, which SQLAlchemy 2.1 opens
with psycopg 3). PostgreSQL refuses to run as
root, so as root the cluster runs as the ``postgres`` user (created by the Debian package). Tests
that use it are skipped, with the reason, only where no server binaries or no psycopg exist.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _postgres_bin() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for directory in candidates:
        if os.path.exists(os.path.join(directory, "initdb")):
            return Path(directory)
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_user(command: list[str], user: str | None) -> list[str]:
    if user is None:
        return command
    runuser = shutil.which("runuser")
    if runuser is not None:
        return [runuser, "-u", user, "--", *command]
    return ["su", user, "-s", "/bin/sh", "-c", " ".join(command)]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A SQLAlchemy URL of a fresh database on a private PostgreSQL server (session-wide)."""
    pytest.importorskip(
        "psycopg", reason="psycopg 3 is not installed (pip install 'psycopg[binary]')"
    )
    bindir = _postgres_bin()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin "
            "or on PATH; install them with `sh .ci/postgres.sh` (apt-get install postgresql)."
        )
    user: str | None = None
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and no 'postgres' user exists to run the server as")
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="transfersearch-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if user is not None:
        shutil.chown(root, user)
        shutil.chown(sockets, user)
    root.chmod(0o755)
    port = _free_port()
    log = root / "server.log"
    if user is not None:
        log.touch()
        shutil.chown(log, user)

    def run(*command: str) -> None:
        result = subprocess.run(_as_user(list(command), user), capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} failed ({result.returncode}): {result.stdout}{result.stderr}"
            )

    run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start")
    try:
        run(
            str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
            "transfersearch",
        )  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/transfersearch"
    finally:
        subprocess.run(
            _as_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], user),
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)

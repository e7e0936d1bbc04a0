"""Every code block of the README and the docs runs as written (issue 19, item 8).

How blocks are found, run or marked not-run, the preludes that define the names a user brings
(``train``, ``model``, ...) and the one declared scale-down (Ray Tune's trial count) are in
``tests/_snippets.py``. A failure names the file and line of the block, so the fix goes to the text
or to the code it exercises. ``pytest -rs`` lists the blocks marked not-run, with their reasons.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _snippets import (
    DOC_FILES,
    PRELUDES,
    ROOT,
    RUN_IN_ROOT,
    SCALED_DOWN,
    Block,
    blocks,
    our_commands,
    shell_lines,
)

#: Languages of blocks: python and bash are run; yaml and unlabelled blocks (trees, tables) are data.
RUN_LANGUAGES = frozenset({"python", "bash"})
DATA_LANGUAGES = frozenset({"yaml", ""})

ALL_BLOCKS = [block for path in DOC_FILES for block in blocks(path)]


def _runs(block: Block) -> bool:
    """A block with something to run: python, or shell with a transfersearch command."""
    if block.not_run is not None:
        return False
    return block.language == "python" or (block.language == "bash" and bool(our_commands(block)))


RUN_FILES = sorted({b.path for b in ALL_BLOCKS if _runs(b)})
NOT_RUN = [b for b in ALL_BLOCKS if b.not_run is not None]


def _check_lightning(namespace: dict[str, Any]) -> None:
    """The Lightning excerpt defines only a method: call it on a module holding a model and hp."""
    module = namespace["ProxyModule"]()
    module.model = namespace["model"]
    module.hp = namespace["hp"]
    module.total_steps = namespace["total_steps"]
    configured = module.configure_optimizers()
    groups = {g["name"] for g in configured["optimizer"].param_groups}
    assert groups == {"input", "hidden", "output", "vector"}, groups
    assert configured["lr_scheduler"]["interval"] == "step"


#: What a file's blocks leave that a reader would go on to use, used here.
CHECKS = {"docs/integrations/lightning.md": _check_lightning}


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A scratch folder in memory where there is one (/dev/shm): the snippets' SQLite studies commit
    ~18 times a trial, and an fsync to disk on a loaded machine costs ~15 ms (the README's 120-trial
    sweep took 66 s on disk and 28 s in memory, measured at load 9 on 2 cores)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="doc-snippets-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_run(block: Block) -> str:
    """The block's text with its file's declared scale-downs (each checked to occur once)."""
    code = block.code
    for original, replacement, _why in SCALED_DOWN.get(block.path, ()):
        code = code.replace(original, replacement)
    return code


def _exec(block: Block, code: str, namespace: dict[str, Any], what: str) -> None:
    try:
        exec(compile(code, f"{block.path}:{block.line} ({what})", "exec"), namespace)
    except Exception as exc:
        raise AssertionError(
            f"{what} of {block.where} ({block.section!r}) failed: {type(exc).__name__}: {exc}"
        ) from exc


def _run_shell(block: Block, command: str, cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, (
        f"{block.where} ({block.section}): `{command}` exited {run.returncode}\n"
        f"{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    )


def _run_file(path: str, cwd: Path, namespace: dict[str, Any]) -> int:
    """Run the file's preludes and blocks in order; return how many blocks and commands ran."""
    file_blocks = blocks(path)
    _exec(file_blocks[0], PRELUDES.get((path, ""), ""), namespace, "the file's prelude")
    sections_done: set[str] = set()
    ran = 0
    for block in file_blocks:
        if block.section not in sections_done:
            sections_done.add(block.section)
            if block.section and (path, block.section) in PRELUDES:
                prelude = PRELUDES[(path, block.section)]
                _exec(block, prelude, namespace, f"the prelude of {block.section!r}")
        if not _runs(block):
            continue
        if block.language == "python":
            _exec(block, _as_run(block), namespace, "the block")
            ran += 1
        else:
            for command in our_commands(block):
                _run_shell(block, command, cwd)
                ran += 1
    return ran


#: Files whose run is long even with an instant ``train``: Ray Tune's per-trial overhead over the
#: scaled-down 40 trials (measured at load ~15 on 2 cores: ray.md 200 s, and the README's Ray
#: section 231 s before it moved to ray.md; the other pages take 1-100 s each under the same load).
SLOW_FILES = frozenset(
    {
        "docs/integrations/ray.md",
        # 19-52 s each on an idle 2-core machine (2026-12-07): end-to-end runs of whole pages,
        # kept out of the README's command (about 8 minutes) and run by CI's further step.
        "docs/muon.md",
        "docs/getting-started.md",
        "docs/integrations/dashboard.md",
        "docs/cli.md",
        "docs/integrations/optuna.md",
    }
)


@pytest.mark.parametrize(
    "path", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_FILES else p for p in RUN_FILES]
)
def test_blocks_run_as_written(path: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's blocks, in order, in one namespace and folder, after the file's preludes."""
    text = (ROOT / path).read_text()
    for original, _replacement, why in SCALED_DOWN.get(path, ()):
        assert text.count(original) == 1, f"{path}: the scale-down of {original!r} is stale ({why})"
    cwd = ROOT if path in RUN_IN_ROOT else workdir
    monkeypatch.chdir(cwd)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        assert _run_file(path, cwd, namespace) > 0
        check = CHECKS.get(path)
        if check is not None:
            check(namespace)
    finally:
        if "ray" in sys.modules:  # a file that started Ray stops it
            import ray

            ray.shutdown()


@pytest.mark.parametrize("block", NOT_RUN, ids=[b.where for b in NOT_RUN])
def test_not_run(block: Block) -> None:
    """The blocks marked ``<!-- not-run: reason -->``: listed (pytest -rs) with their reason."""
    pytest.skip(f"{block.where} ({block.section}): {block.not_run}")


OTHER_SHELL_LINES = [
    (b, line)
    for b in ALL_BLOCKS
    if b.language == "bash" and b.not_run is None
    for line in shell_lines(b)
    if line not in our_commands(b)
]


@pytest.mark.parametrize(
    ("block", "line"),
    OTHER_SHELL_LINES,
    ids=[f"{b.where}:{line[:30]}" for b, line in OTHER_SHELL_LINES],
)
def test_other_shell_lines_are_listed(block: Block, line: str) -> None:
    """Shell lines that are not transfersearch commands (installs, ``cd``, a dashboard server) are
    not run here: listed (pytest -rs) so that none is skipped unseen."""
    why = next((w for start, w in _WHY_NOT.items() if line.startswith(start)), "")
    pytest.skip(f"{block.where} ({block.section}): not a transfersearch command{why}: {line}")


_WHY_NOT = {
    "pip install": " (installs; .ci/run runs the README's test command, tests/test_readme.py checks)",
    "optuna-dashboard": " (starts a web server)",
    "cd examples/hydra_sweep": " (tests/test_examples.py runs the Hydra sweep)",
    "python -m pytest": " (the test suite itself)",
}


def test_every_block_is_run_or_data() -> None:
    """A block in another language (```py, ```sh, ```console) would silently never run."""
    odd = [b.where for b in ALL_BLOCKS if b.language not in RUN_LANGUAGES | DATA_LANGUAGES]
    assert not odd, f"blocks in a language this test neither runs nor skips: {odd}"


def test_preludes_and_scale_downs_name_existing_places() -> None:
    """A prelude keyed by a renamed section, or a scale-down of a renamed file, would silently stop."""
    sections = {(b.path, b.section) for b in ALL_BLOCKS}
    stale = [
        key
        for key in PRELUDES
        if key not in sections and not (key[1] == "" and key[0] in RUN_FILES)
    ]
    assert not stale, f"preludes for sections that no longer hold a block: {stale}"
    assert set(SCALED_DOWN) <= set(RUN_FILES)


def test_the_extraction_finds_commands_markers_and_sections() -> None:
    """The command-line page's block (moved from the README) yields its transfersearch commands and
    no other lines; the workers' block (indented in a list item of the Optuna page) is found with
    its not-run marker; the README's own blocks are its two commands, its example and the slow
    tests' command, none of them a transfersearch command to run here."""
    cli = [c for b in blocks("docs/cli.md") if b.language == "bash" for c in our_commands(b)]
    assert any(c.startswith("transfersearch extrapolate --storage sqlite:///proxy.db") for c in cli)
    assert not any(c.startswith(("pip ", "optuna-dashboard ", "export ")) for c in cli)
    optuna_page = blocks("docs/integrations/optuna.md")
    workers = [b for b in optuna_page if "TRANSFERSEARCH_STORAGE" in b.code]
    assert len(workers) == 1 and workers[0].not_run and workers[0].code.startswith("export ")
    assert any(b.section == "The search space" and b.language == "python"
               for b in blocks("docs/space.md"))  # fmt: skip
    readme = blocks("README.md")
    assert [b.language for b in readme] == ["bash", "python", "bash"]
    assert not [c for b in readme for c in our_commands(b)]

"""The code blocks of README.md and docs/, as a reader sees them (used by test_doc_snippets.py).

A ```python block runs as written; of a ```bash block, the lines that are transfersearch commands
(``transfersearch ...``, ``python -m transfersearch...``) run as written, in the same folder. The
blocks of one file run in order in one namespace and one temporary folder, as a reader who types
them one after the other would. A block the reader is not meant to run here (shell for another
machine, an excerpt of a file that runs elsewhere) is marked in the Markdown by a comment on the
line before its fence: ``<!-- not-run: the reason -->``; the test lists those as skipped.

Snippets use names a user brings (``train``, ``model``, ``make_model``, ``study``, ...). The
preludes below define them, before the file's first block or before a section's first block; a
prelude never redefines a name a snippet defines, so the snippet's own text is what runs.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The Markdown files whose blocks are run: the README and every page of the docs site.
DOC_FILES: tuple[str, ...] = (
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")),
)

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w-]*)\s*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.+?)\s*-->\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*$")
#: A shell line that is one of ours: the console script or a module run with ``python -m``.
_OUR_COMMAND = re.compile(r"^(transfersearch\s|python -m transfersearch[.\s])")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language and text, and why it is not run (if so)."""

    path: str
    line: int  # 1-based line of the opening fence
    section: str  # the nearest heading above it ("" before the first)
    language: str
    code: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def blocks(path: str) -> list[Block]:
    """Every fenced block of ``path`` (relative to the repository root), in order."""
    lines = (ROOT / path).read_text().splitlines()
    found: list[Block] = []
    section, i = "", 0
    while i < len(lines):
        heading = _HEADING.match(lines[i])
        if heading:
            section = heading.group("title")
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _NOT_RUN.match(previous)
        found.append(
            Block(
                path=path,
                line=i + 1,
                section=section,
                language=fence.group("language"),
                code=textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n",
                not_run=marker.group("reason") if marker else None,
            )
        )
        i = end + 1
    return found


def shell_lines(block: Block) -> list[str]:
    """A shell block's commands, continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", "", block.code)
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [c for c in commands if c and not c.startswith("#")]


def our_commands(block: Block) -> list[str]:
    """The lines of a shell block that are transfersearch commands (the ones the test runs)."""
    return [c for c in shell_lines(block) if _OUR_COMMAND.match(c)]


# ----------------------------------------------------------------------------------------------
# Preludes: the names a user brings, keyed by (file, section); section "" runs before the file's
# first block. Each is plain Python executed in the snippets' namespace (so that Ray can pickle
# ``train`` by value into its workers).
# ----------------------------------------------------------------------------------------------

#: ``train(scale, hp)``: a stand-in for a training run, instant. It returns the final loss of
#: transfersearch.synthetic's valley, whose optimum in (base_lr, tau_epoch) drifts with width and
#: data by a known law (optimum base_lr 3e-3 and tau_epoch 1 at width 64, 2e4 samples).
TRAIN = '''
import optuna
import transfersearch as ts
from transfersearch import synthetic

optuna.logging.set_verbosity(optuna.logging.WARNING)


def train(scale, hp):
    """Stand-in for training at `scale` with `hp`: the synthetic valley's loss (instant)."""
    return 2.0 + synthetic.regret(scale, hp.coordinates)
'''

#: The search space page's space and the Optuna page's ladder, for the pages that use them
#: without defining them.
SPACE_AND_LADDER = """
space = ts.TransferSpace(
    base=ts.Scale(width=256, dataset_size=50_000, batch_size=128),
    coords={"base_lr": ts.Float(1e-4, 1e-1, log=True), "tau_epoch": ts.Float(0.05, 20.0, log=True)},
    ema_momentum=0.999,
)
ladder = [ts.Scale(width=w, dataset_size=n, batch_size=64) for w in (64, 128, 256) for n in (2e4, 8e4)]
"""

#: A study in ./proxy.db swept with that space and ladder (small: 8 trials a rung).
STUDY = """
from transfersearch.integrations.optuna import TransferSampler

sampler = TransferSampler(space, ladder, base_sampler=optuna.samplers.TPESampler(seed=0),
                          trials_per_rung=8)
study = optuna.create_study(storage="sqlite:///proxy.db", study_name="proxy", sampler=sampler)
study.optimize(lambda trial: train(*sampler.suggest(trial)), n_trials=48)
"""

#: ``make_model(width)``: a tiny µP-shaped network (embedding = input, one hidden matrix, readout =
#: output); ``model`` is one at the hyperparameters' width; ``total_steps`` a short run.
TORCH = '''
import torch
from torch import nn


def make_model(width, vocab=32):
    """A tiny network of the given width: embedding, one hidden layer, readout."""
    return nn.Sequential(nn.Embedding(vocab, width), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, vocab))


model = make_model(width=int(hp.scale["width"]))
total_steps = 1000
'''

#: Ray on the two CPU cores of a test machine, quiet.
RAY = """
import os

os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
import ray
from ray import tune

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
"""

#: The rest of a sweep as observations: 16 trials on each of six rungs of the synthetic valley.
OBSERVATIONS = """
import numpy as np

_rng = np.random.default_rng(0)
rest_of_sweep = []
for _w in (64, 128, 256):
    for _n in (2e4, 1e5):
        _scale = ts.Scale(width=_w, dataset_size=_n)
        for _lr, _tau in np.exp(_rng.uniform(np.log([3e-4, 0.1]), np.log([3e-2, 10.0]), (16, 2))):
            _params = {"base_lr": float(_lr), "tau_epoch": float(_tau)}
            rest_of_sweep.append(ts.Observation(scale=dict(_scale), params=_params,
                                                value=2.0 + synthetic.regret(_scale, _params)))
"""

#: docs/muon.md's loop: a model with hidden 2-D matrices at the page's width, a two-batch loader
#: and a schedule factor (the page's first block gives ``hp`` at width 1024).
MUON_LOOP = """
import torch


class _Out:
    def __init__(self, loss: torch.Tensor) -> None:
        self.loss = loss


class _Net(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(4, width)
        self.mid = torch.nn.Linear(width, width)
        self.out = torch.nn.Linear(width, 1)

    def forward(self, batch: torch.Tensor) -> _Out:
        return _Out(self.out(torch.relu(self.mid(torch.relu(self.inp(batch))))).square().mean())


def make_model(width: int) -> _Net:
    return _Net(width)


model = make_model(width=int(hp.scale["width"]))
loader = [torch.randn(8, 4) for _ in range(2)]


def fn(step: int) -> float:
    return 1.0
"""

PRELUDES: dict[tuple[str, str], str] = {
    ("docs/muon.md", "The training loop"): MUON_LOOP,
    ("README.md", ""): TRAIN,
    ("docs/getting-started.md", ""): TRAIN,
    ("docs/cli.md", ""): TRAIN + SPACE_AND_LADDER + STUDY,
    ("docs/fitting.md", ""): TRAIN + SPACE_AND_LADDER + OBSERVATIONS,
    ("docs/integrations/optuna.md", ""): TRAIN
    + SPACE_AND_LADDER
    + "from transfersearch.integrations.optuna import TransferSampler\n",
    ("docs/integrations/dashboard.md", ""): TRAIN + SPACE_AND_LADDER + STUDY,
    ("docs/integrations/optunahub.md", ""): TRAIN + SPACE_AND_LADDER,
    ("docs/integrations/ray.md", ""): TRAIN + SPACE_AND_LADDER + RAY,
    ("docs/integrations/torch.md", ""): TRAIN
    + SPACE_AND_LADDER
    + 'hp = space.concretize({"base_lr": 3e-3, "tau_epoch": 1.0}, scale=ladder[-1])\n'
    + TORCH,
    ("docs/integrations/lightning.md", ""): TRAIN
    + SPACE_AND_LADDER
    + 'hp = space.concretize({"base_lr": 3e-3, "tau_epoch": 1.0}, scale=ladder[-1])\n'
    + TORCH
    + """
import lightning as L
from transfersearch.integrations.torch import param_groups, schedule

BASE_WIDTH = 64
""",
}

#: The only edits made to a block's text: a count meant for a cluster, scaled down here, with why.
#: Each original must occur once in its file (the test checks), so an edit never goes stale unseen.
RAY_SAMPLES = (
    "num_samples=200",
    "num_samples=40",
    "Ray Tune starts a placement group and an actor per trial, 1-11 s each on 2 shared cores even "
    "with the instant train (40 trials: 443 s at load 20), so 200 would take minutes to an hour; "
    "40 fill the two cheapest rungs (16 each) and start the third",
)
SCALED_DOWN: dict[str, tuple[tuple[str, str, str], ...]] = {
    "docs/integrations/ray.md": (RAY_SAMPLES,),
}

#: Files whose blocks use paths relative to the repository root (run there, writing nothing).
RUN_IN_ROOT: frozenset[str] = frozenset({"docs/integrations/optunahub.md"})

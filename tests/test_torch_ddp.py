"""param_groups under DistributedDataParallel and FSDP: two CPU processes on gloo."""

from __future__ import annotations

import os
import socket
import tempfile
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():  # pragma: no cover - torch built without distributed
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

import transfersearch as ts  # noqa: E402

WORLD = 2
EXPECTED_GROUPS = {
    "input": ["inp.weight"],
    "hidden": ["hid.weight"],
    "output": ["out.weight"],
    "vector": ["inp.bias", "hid.bias", "norm.weight", "norm.bias", "out.bias"],
}


class MLP(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.inp = nn.Linear(6, width)
        self.hid = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(torch.relu(self.hid(torch.relu(self.inp(x))))))


def _hp() -> ts.Hyperparameters:
    space = ts.TransferSpace(
        base=ts.Scale(width=16, dataset_size=50_000, batch_size=128),
        coords={"base_lr": 3e-3, "tau_epoch": 1.0},
        rule=ts.rules.MuP(),
    )
    return space.concretize({}, scale=ts.Scale(width=64))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _train(model: nn.Module, base: nn.Module, rank: int) -> dict[str, Any]:
    from transfersearch.integrations.torch import param_groups

    groups = param_groups(model, _hp(), base_model=base)
    opt = torch.optim.AdamW(groups)
    torch.manual_seed(1 + rank)  # different data per rank
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(8, 6)).pow(2).mean().backward()
        opt.step()
    return {
        "groups": {g["name"]: g["param_names"] for g in groups},
        "lr": {g["name"]: g["lr"] for g in groups},
        "weight_decay": {g["name"]: g["weight_decay"] for g in groups},
    }


def _worker(rank: int, port: int, out_dir: str) -> None:
    """DDP, then FSDP(use_orig_params=True), in one process group (spawning costs ~10 s)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        with torch.device("meta"):
            base = MLP(16)
        torch.manual_seed(0)
        ddp = nn.parallel.DistributedDataParallel(MLP(64))
        result: dict[str, Any] = {"ddp": _train(ddp, base, rank)}
        result["ddp"]["state"] = {k: v.detach().clone() for k, v in ddp.module.state_dict().items()}
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            torch.manual_seed(0)
            fsdp = FSDP(MLP(64), use_orig_params=True, device_id=torch.device("cpu"))
            result["fsdp"] = _train(fsdp, base, rank)
        except Exception as exc:  # FSDP's CPU/gloo support varies across torch versions
            if type(exc).__module__.startswith("transfersearch"):
                raise  # our own failure (classification) is never skipped
            result["fsdp_error"] = repr(exc)
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def results() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(_free_port(), out_dir), nprocs=WORLD, join=True)
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(WORLD)]


def _check_groups(per_rank: list[dict[str, Any]]) -> None:
    hp = _hp()
    for result in per_rank:
        assert result["groups"] == EXPECTED_GROUPS  # no "module." / FSDP prefixes
        for name in EXPECTED_GROUPS:
            assert result["lr"][name] == hp.groups[name]["lr"]
            assert result["weight_decay"][name] == hp.groups[name]["weight_decay"]


def test_ddp_two_processes_on_gloo(results: list[dict[str, Any]]) -> None:
    _check_groups([r["ddp"] for r in results])
    # DDP averages gradients, so both ranks hold identical weights after training.
    for key, value in results[0]["ddp"]["state"].items():
        assert torch.equal(value, results[1]["ddp"]["state"][key]), key


def test_fsdp_use_orig_params_reads_unsharded_shapes(results: list[dict[str, Any]]) -> None:
    # Outside forward, FSDP's original parameters are flat 1-D shards: without reading the
    # unsharded shapes every matrix would land in "vector".
    if "fsdp_error" in results[0]:
        pytest.skip(f"FSDP does not run on CPU/gloo in this torch: {results[0]['fsdp_error']}")
    _check_groups([r["fsdp"] for r in results])

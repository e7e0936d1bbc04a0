"""Sweep a proxy ladder with Ray Tune, packing small proxies onto shared GPUs, then extrapolate.

Runs as written on a CPU-only machine in under a minute (every rung then runs on one CPU); on a
machine with GPUs the small rungs share a GPU (``gpu=0.25``: up to four per GPU) and the largest
rung gets a whole one. Ray sets ``CUDA_VISIBLE_DEVICES`` in each trial, so ``cuda`` below is the
trial's own GPU (or share of one).

    python examples/ray_tune_gpu.py
"""

from __future__ import annotations

import math
import os
import tempfile

import ray
import torch
from ray import tune

import transfersearch as ts
from transfersearch.integrations.ray import TransferSearch, hyperparameters

BASE = ts.Scale(width=64, dataset_size=1024, batch_size=64, epochs=2)
LADDER = [BASE.replace(width=w) for w in (32, 64, 128)]
TARGET = BASE.replace(width=512)


def train_fn(config: dict) -> None:
    """A small MLP regression: AdamW with the per-group hyperparameters of the trial's rung."""
    scale, hp = hyperparameters(config)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    width, n = int(scale["width"]), int(scale["dataset_size"])
    inputs = torch.randn(n, 16, device=device)
    targets = torch.sin(inputs @ torch.randn(16, 1, device=device))
    layers = [torch.nn.Linear(16, width), torch.nn.Linear(width, width), torch.nn.Linear(width, 1)]
    model = torch.nn.Sequential(layers[0], torch.nn.GELU(), layers[1], torch.nn.GELU(), layers[2])
    model.to(device)
    groups = {
        "input": [layers[0].weight],
        "hidden": [layers[1].weight],
        "output": [layers[2].weight],
        "vector": [layer.bias for layer in layers],
    }
    optimizer = torch.optim.AdamW(
        [
            {
                "params": params,
                "lr": hp.groups[name]["lr"],
                "weight_decay": hp.groups[name]["weight_decay"],
            }  # PyTorch's coupled λ (decay = lr·λ)
            for name, params in groups.items()
        ],
        betas=hp.betas,
        eps=hp.eps,
    )
    batch = int(scale["batch_size"])
    for _epoch in range(int(scale["epochs"])):
        order = torch.randperm(n, device=device)
        for start in range(0, n, batch):
            index = order[start : start + batch]
            loss = torch.nn.functional.mse_loss(model(inputs[index]), targets[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            full = torch.nn.functional.mse_loss(model(inputs), targets).item()
        tune.report(
            {
                "loss": full if math.isfinite(full) else float("nan"),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            }
        )


def main() -> None:
    """Run the sweep and print the extrapolated optimum at TARGET."""
    ray.init(include_dashboard=False, log_to_driver=False)
    space = ts.TransferSpace(
        BASE,
        {"base_lr": ts.Float(1e-4, 3e-1, log=True), "tau_epoch": ts.Float(0.05, 20.0, log=True)},
    )
    search = TransferSearch(space, LADDER, metric="loss", mode="min", trials_per_rung=(8, 8, 4))
    resources = search.resources(gpu=0.25)  # CPU only when the cluster has no GPU
    print("per-rung requests:", [resources.request({"scale": s.to_dict()}) for s in LADDER])
    with tempfile.TemporaryDirectory() as storage:
        tuner = tune.Tuner(
            tune.with_resources(train_fn, resources=resources),
            tune_config=tune.TuneConfig(
                search_alg=search,
                num_samples=20,
                # few live trials, so the law (two finished rungs)
                # is ready when the largest rung starts
                max_concurrent_trials=2,
                reuse_actors=True,
            ),  # torch imported once per worker
            run_config=tune.RunConfig(storage_path=storage, name="ladder", verbose=0),
        )
        results = tuner.fit()
        for result in results:
            source = result.config["transfersearch"]["source"]  # "base" or "law-*"
            print(
                f"rung {result.config['rung']} {source:17s} "
                f"base_lr={result.config['base_lr']:.2e}  "
                f"loss={result.metrics.get('loss', float('nan')):.4f}  "
                f"CUDA_VISIBLE_DEVICES={result.metrics.get('cuda_visible_devices')!r}"
            )
        prediction = ts.extrapolate(results, target=TARGET, params=["base_lr", "tau_epoch"], seed=0)
    for name, value in prediction.params.items():
        print(
            f"{name} at {TARGET}: {value:.3g} (stderr {prediction.stderr[name]:.2f} in log units)"
        )
    ray.shutdown()


if __name__ == "__main__":
    main()

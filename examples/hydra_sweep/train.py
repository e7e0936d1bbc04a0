"""A Hydra task swept by hydra-optuna-sweeper with transfersearch's TransferSampler.

    python train.py --multirun        # 24 proxy trials into ./proxy.db (study "proxy")
    transfersearch extrapolate --storage sqlite:///proxy.db --study proxy \
        --target width=1024,dataset_size=3.2e5,batch_size=64 --json

The sweeper asks the study for a trial (the sampler assigns its rung) and passes the coordinates as
overrides; :func:`proxy_trial` finds that trial in the study and returns its rung's scale and the
concrete hyperparameters. The "training" here is transfersearch's synthetic ladder, whose optimum
moves with width and data by a known law; replace it with your proxy run.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from transfersearch import synthetic
from transfersearch.integrations.hydra import proxy_trial


@hydra.main(config_path="conf", config_name="config", version_base=None)
def train(cfg: DictConfig) -> float:
    scale, hp = proxy_trial(cfg)  # the rung's Scale and per-group lr / weight_decay, betas, ...
    loss = 2.0 + synthetic.regret(scale, hp.coordinates)  # your proxy training run goes here
    print(
        f"width={scale['width']:g} dataset_size={scale['dataset_size']:g} "
        f"hidden lr={hp.lr:.3g} weight_decay={hp.weight_decay:.3g} loss={loss:.4f}"
    )
    return loss


if __name__ == "__main__":
    train()

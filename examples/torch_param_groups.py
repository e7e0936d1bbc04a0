"""Per-group AdamW hyperparameters for a torch model at two widths, from one swept point.

Run: ``python examples/torch_param_groups.py`` (CPU, a few seconds). The coordinates (base lr and
τ_epoch) are defined at width 32; at width 128 µP divides the hidden and output learning rates by
s = 4 and multiplies their (coupled, torch.optim.AdamW) weight decay by 4, so τ_epoch = B/(ηλN)
stays 1 epoch in every group.

The schedule is a plain linear warmup and cosine decay: µP's 1/s already acts as a width warmup
(Kosson et al. §6). Kosson's explicit width warmups (``warmup="exp"`` or ``"decay_away"``) replace
µP's 1/s rather than add to it, so ``schedule`` refuses them on µP-scaled groups; to use them,
concretize with ``ts.rules.Standard()`` instead of ``MuP``.
"""

from __future__ import annotations

import torch
from torch import nn

import transfersearch as ts
from transfersearch.integrations.torch import ModelEMA, diagnostics, param_groups, schedule

BASE_WIDTH, DATASET_SIZE, BATCH_SIZE, STEPS = 32, 4096, 64, 30


def make_model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, width),  # input: only fan-out grows
        nn.ReLU(),
        nn.Linear(width, width),  # hidden: fan-in and fan-out grow
        nn.LayerNorm(width),  # vector
        nn.ReLU(),
        nn.Linear(width, 4),  # output: only fan-in grows
    )


def main() -> None:
    space = ts.TransferSpace(
        base=ts.Scale(width=BASE_WIDTH, dataset_size=DATASET_SIZE, batch_size=BATCH_SIZE),
        coords={"base_lr": 3e-3, "tau_epoch": 1.0},
        rule=ts.rules.MuP(wd_width_exponent=1.0),
        ema_momentum=0.99,
    )
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(DATASET_SIZE, 16, generator=generator)
    targets = torch.tanh(inputs[:, :4] * inputs[:, 4:8])
    with torch.device("meta"):  # the base-width model as shape reference: allocates nothing
        reference = make_model(BASE_WIDTH)  # on the base rung: same shapes, multipliers all 1

    for width in (BASE_WIDTH, 128):
        torch.manual_seed(0)
        hp = space.concretize({}, scale=ts.Scale(width=width))
        model = make_model(width)
        groups = param_groups(model, hp, base_model=reference)
        opt = torch.optim.AdamW(groups, betas=hp.betas, eps=hp.eps)
        print(f"\nwidth {width}: tau_epoch = {hp.tau_epoch:.3g}")
        for group in groups:
            eta_lambda = group["lr"] * group["weight_decay"]  # coupled: λ is multiplied by η
            tau_text = f"{BATCH_SIZE / (eta_lambda * DATASET_SIZE):.3g}" if eta_lambda else "inf"
            print(
                f"  {group['name']:<7} lr={group['lr']:.3g}  weight_decay={group['weight_decay']:.3g}"
                f"  tau_epoch={tau_text:<5} {group['param_names']}"
            )
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt,
            schedule(hp, STEPS, "cosine", warmup="linear", warmup_steps=5),
        )
        ema = ModelEMA(model, momentum=hp.ema_momentum)
        for step in range(STEPS):
            batch = torch.randint(0, DATASET_SIZE, (BATCH_SIZE,), generator=generator)
            loss = nn.functional.mse_loss(model(inputs[batch]), targets[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            ema.update(model)
            if step in (0, STEPS - 1):
                print(f"  step {step:>2}: loss {loss.item():.4f}")
        print(diagnostics(model, hp, base_model=reference))


if __name__ == "__main__":
    main()

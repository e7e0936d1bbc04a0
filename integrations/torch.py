"""PyTorch adapter: param groups by base shapes, schedules, model EMA, width and depth diagnostics.

.. code-block:: python

    from transfersearch.integrations.torch import param_groups, schedule, ModelEMA, diagnostics

    with torch.device("meta"):                        # shapes only, no memory
        base = make_model(width=64)
    groups = param_groups(model, hp, base_model=base)  # input / hidden / output / vector (+ block_vector)
    opt = torch.optim.AdamW(groups, betas=hp.betas, eps=hp.eps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, schedule(hp, total_steps, "cosine", warmup="linear", warmup_steps=100)
    )
    ema = ModelEMA(model, momentum=hp.ema_momentum)
    print(diagnostics(model, hp, base_model=base))

    # A space with optimizers={"hidden": Muon()}: Muon on the hidden matrices, AdamW on the rest
    opt = make_optimizer(model, hp, base_model=base)   # one object: step(), zero_grad()
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, fn) for o in opt.optimizers.values()]

Weight decay: ``param_groups`` puts PyTorch's *coupled* λ (``w ← (1 − ηλ)w − ηu``,
torch.optim.AdamW: the decay is multiplied by the learning rate) in ``weight_decay`` unless
``convention="independent"`` (λ' = ηλ, for optimizers that decay by λ' alone; a ``LambdaLR`` then
schedules only the lr, so add ``WeightDecaySchedule(opt, mults, convention="independent")`` for λ'
to follow the schedule). Kosson's width warmups (``warmup="exp"``/``"decay_away"``) replace µP's
1/s and need hyperparameters from ``rules.Standard()``.

Thin by design: the scaling rules, coordinates and schedule formulas are the core's
(:mod:`transfersearch.rules`, :class:`transfersearch.TransferSpace`); this module classifies
parameters, builds torch.optim inputs and measures weights. It patches nothing onto tensors.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError(
        "transfersearch.integrations.torch needs PyTorch: pip install 'transfersearch[torch]'"
    ) from exc

from ._torch_diagnostics import (
    CoordCheck,
    DepthCheck,
    Diagnostics,
    MatrixDiagnostics,
    coord_check,
    depth_check,
    diagnostics,
)
from ._torch_ema import ModelEMA
from ._torch_groups import ParameterRole, classify, param_groups, unwrap
from ._torch_optimizers import MUON_TORCH, GroupedOptimizer, Lion, make_optimizer
from ._torch_schedules import KINDS, WARMUPS, Multiplier, WeightDecaySchedule, schedule

__all__ = [
    "KINDS",
    "MUON_TORCH",
    "WARMUPS",
    "CoordCheck",
    "DepthCheck",
    "Diagnostics",
    "GroupedOptimizer",
    "Lion",
    "MatrixDiagnostics",
    "ModelEMA",
    "Multiplier",
    "ParameterRole",
    "WeightDecaySchedule",
    "classify",
    "coord_check",
    "depth_check",
    "diagnostics",
    "make_optimizer",
    "param_groups",
    "schedule",
    "unwrap",
]

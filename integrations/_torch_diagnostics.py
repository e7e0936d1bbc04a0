"""Width-transfer diagnostics for torch models (private; see ``integrations/torch.py``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from transfersearch.errors import TransferSearchError
from transfersearch.experimental import experimental
from transfersearch.report import new_figure
from transfersearch.space import Hyperparameters

from ._torch_groups import (
    Pattern,
    check_base_width,
    classify_for,
    clean_name,
    named_parameters,
    unwrap,
)

__all__ = ["CoordCheck", "Diagnostics", "MatrixDiagnostics", "coord_check", "diagnostics"]


@dataclass(frozen=True)
class MatrixDiagnostics:
    """Measured vs expected scales of one matrix parameter (coupled weight decay λ).

    Attributes:
        name, group, shape: the parameter, its group and shape.
        lr, weight_decay: η and coupled λ of its group.
        width: d in Fan et al.'s law (``hp.scale["width"]``, else the matrix's fan-in).
        top_singular_value: σ_max of the weight (conv kernels flattened to (out, in·k…)).
        expected_top_singular_value: √(η/λ)·d^0.75 (Fan et al. 2025) up to an architecture
            constant: compare ``singular_value_ratio`` across widths, not to 1.
        singular_value_ratio: σ_max / (√(η/λ)·d^0.75); equal across widths ⇔ sublayer gains
            transfer.
        weight_rms: RMS of the entries.
        expected_weight_rms: √(η/(2λ)), the equilibrium RMS of Adam-like updates (Su,
            kexue.fm/archives/11459, the moving-average reading of docs/science.md §4).
        expected_relative_update: √(2ηλ), equilibrium ‖ΔW‖/‖W‖ (Kosson et al. Eq. 3).
        tau_iter: 1/(ηλ), the EMA horizon in iterations (Wang & Aitchison Eq. 4–6).
    The expectations are None when λ = 0.
    """

    name: str
    group: str
    shape: tuple[int, ...]
    lr: float
    weight_decay: float
    width: float
    top_singular_value: float
    expected_top_singular_value: float | None
    singular_value_ratio: float | None
    weight_rms: float
    expected_weight_rms: float | None
    expected_relative_update: float | None
    tau_iter: float


@dataclass(frozen=True)
class Diagnostics:
    """Per-matrix diagnostics of one model (:func:`diagnostics`); ``str()`` gives a table."""

    matrices: tuple[MatrixDiagnostics, ...]
    figure: Any = None

    def __iter__(self) -> Any:
        return iter(self.matrices)

    def __len__(self) -> int:
        return len(self.matrices)

    def to_rows(self) -> list[dict[str, Any]]:
        """One plain dict per matrix (for pandas or JSON)."""
        return [dict(m.__dict__) for m in self.matrices]

    def __str__(self) -> str:
        head = (
            f"{'name':<32} {'group':<7} {'sigma_max':>10} {'ratio':>8} {'rms':>9} "
            f"{'rms_eq':>9} {'rel_upd':>8} {'tau_iter':>9}"
        )

        def fmt(value: float | None) -> str:
            return "-" if value is None else f"{value:.3g}"

        lines = [head]
        for m in self.matrices:
            lines.append(
                f"{m.name[:32]:<32} {m.group:<7} {m.top_singular_value:>10.4g} "
                f"{fmt(m.singular_value_ratio):>8} {m.weight_rms:>9.3g} "
                f"{fmt(m.expected_weight_rms):>9} {fmt(m.expected_relative_update):>8} "
                f"{fmt(m.tau_iter):>9}"
            )
        return "\n".join(lines)


def diagnostics(
    model: nn.Module,
    hp: Hyperparameters,
    base_model: nn.Module | None = None,
    overrides: Mapping[Pattern, str] | None = None,
    plot: bool = False,
) -> Diagnostics:
    """Measured vs expected weight scales for every matrix of ``model`` (≥ 2 dimensions).

    For each matrix with η and coupled λ of its group: top singular value vs √(η/λ)·d^0.75
    (Fan et al. 2025; the ratio should match across widths), weight RMS vs √(η/(2λ)) (Su), the
    expected relative update √(2ηλ) (Kosson et al.) and τ_iter = 1/(ηλ) (Wang & Aitchison).
    Groups come from :func:`classify` with the same ``base_model``/``overrides`` as
    :func:`param_groups`. Expectations hold in equilibrium, after several τ_iter.

    Args:
        plot: also draw σ_max/expectation per matrix (matplotlib, imported only then).

    Raises:
        TransferSearchError: see :func:`classify` (its messages name this function's
            ``overrides``/``base_model`` arguments).
    """
    roles = classify_for(model, base_model, overrides, caller="diagnostics")
    check_base_width(roles, hp, "diagnostics")
    width = hp.scale.get("width")
    rows: list[MatrixDiagnostics] = []
    for name, param in named_parameters(model):
        role = roles[name]
        if role.group == "vector" or param.dim() < 2:
            continue
        lr = float(hp.groups[role.group]["lr"])
        wd = float(hp.groups[role.group]["weight_decay"])
        with torch.no_grad():
            weight = param.detach().float()
            matrix = weight.reshape(weight.shape[0], -1)
            if role.fan_out_axis == 1:  # ConvTranspose / Embedding: put fan-out first
                matrix = weight.transpose(0, 1).reshape(weight.shape[1], -1)
            sigma = float(torch.linalg.matrix_norm(matrix, ord=2))
            rms = float(weight.pow(2).mean().sqrt())
        d = float(width) if width is not None else float(role.fan_in or matrix.shape[1])
        product = lr * wd
        expected_sigma = math.sqrt(lr / wd) * d**0.75 if wd > 0 else None
        rows.append(
            MatrixDiagnostics(
                name=name,
                group=role.group,
                shape=role.shape,
                lr=lr,
                weight_decay=wd,
                width=d,
                top_singular_value=sigma,
                expected_top_singular_value=expected_sigma,
                singular_value_ratio=None if expected_sigma is None else sigma / expected_sigma,
                weight_rms=rms,
                expected_weight_rms=math.sqrt(lr / (2 * wd)) if wd > 0 else None,
                expected_relative_update=math.sqrt(2 * product) if wd > 0 else None,
                tau_iter=1.0 / product if product > 0 else math.inf,
            )
        )
    figure = None
    if plot:
        figure = new_figure(figsize=(max(4.0, 0.5 * len(rows)), 3.5))
        axis = figure.subplots()
        ratios = [r.singular_value_ratio or float("nan") for r in rows]
        axis.bar(range(len(rows)), ratios)
        axis.set_xticks(range(len(rows)), [r.name for r in rows], rotation=90, fontsize=7)
        axis.set_ylabel("σ_max / (√(η/λ)·d^0.75)")
        axis.set_title(f"width {width}: match these across widths (Fan et al.)")
        figure.tight_layout()
    return Diagnostics(matrices=tuple(rows), figure=figure)


# ----------------------------------------------------------------------------------------------
# Coordinate check
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CoordCheck:
    """Activation RMS per layer, width and step (:func:`coord_check`).

    ``rms[layer][width]`` is a list over steps 0..``steps`` (step 0: before any update). Under a
    working parametrisation the curves stay flat in width; :meth:`slopes` gives the log-log slope
    of RMS against width at the last step per layer (≈ 0 when it transfers).
    """

    widths: tuple[int, ...]
    steps: int
    rms: Mapping[str, Mapping[int, list[float]]]
    figure: Any = field(default=None, compare=False)

    def slopes(self, step: int = -1) -> dict[str, float]:
        """Least-squares slope of log RMS against log width, per layer, at ``step``."""
        out: dict[str, float] = {}
        logs = [math.log(w) for w in self.widths]
        mean_x = sum(logs) / len(logs)
        for layer, per_width in self.rms.items():
            ys = [math.log(max(per_width[w][step], 1e-30)) for w in self.widths]
            mean_y = sum(ys) / len(ys)
            num = sum((x - mean_x) * (y - mean_y) for x, y in zip(logs, ys))
            den = sum((x - mean_x) ** 2 for x in logs)
            out[layer] = num / den
        return out


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def _default_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if target.dtype in (torch.int64, torch.int32):
        return nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
    return nn.functional.mse_loss(output, target)


@experimental("0.1.0")
def coord_check(
    make_model: Callable[[int], nn.Module],
    widths: Sequence[int],
    data: tuple[torch.Tensor, torch.Tensor],
    *,
    steps: int = 3,
    make_optimizer: Callable[[nn.Module, int], torch.optim.Optimizer] | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    seed: int = 0,
    plot: bool = False,
) -> CoordCheck:
    """Activation RMS of every leaf module over a few training steps, for each width (µP's check).

    For each width: ``torch.manual_seed(seed)``, ``model = make_model(width)``, record the RMS of
    every leaf module's output on ``data``'s inputs, then take ``steps`` optimizer steps on the same
    batch, recording after each. Flat curves across widths mean activations neither blow up nor
    vanish with width.

    Args:
        make_model: width → model.
        widths: at least two widths.
        data: (inputs, targets), one fixed batch.
        steps: optimizer steps (0: only the initial forward pass).
        make_optimizer: (model, width) → optimizer, e.g. AdamW over :func:`param_groups` with the
            hyperparameters of that width; required when ``steps > 0``.
        loss_fn: (output, targets) → loss; default cross-entropy for integer targets, else MSE.
        plot: draw RMS vs width per layer at the last step (matplotlib, imported only then).

    Raises:
        TransferSearchError: fewer than two widths, negative steps, or no make_optimizer.
    """
    widths = _check_coord_args(widths, steps, make_optimizer)
    inputs, targets = data
    loss_of = loss_fn or _default_loss
    rms: dict[str, dict[int, list[float]]] = {}
    for width in widths:
        torch.manual_seed(seed)
        model = make_model(width)
        current: dict[str, float] = {}
        handles = _record_leaf_rms(unwrap(model), current)
        optimizer = make_optimizer(model, width) if make_optimizer is not None else None
        try:
            for step in range(steps + 1):
                current.clear()
                output = model(inputs)
                for key, value in current.items():
                    rms.setdefault(key, {}).setdefault(width, []).append(value)
                if step == steps or optimizer is None:
                    break
                optimizer.zero_grad(set_to_none=True)
                prediction = _first_tensor(output)
                if prediction is None:
                    raise TransferSearchError(
                        "coord_check: the model returned no tensor, so no loss can be taken."
                    )
                loss: torch.Tensor = loss_of(prediction, targets)
                loss.backward()  # type: ignore[no-untyped-call]
                optimizer.step()
        finally:
            for handle in handles:
                handle.remove()
    rms = {k: v for k, v in rms.items() if set(v) == set(widths)}
    figure = _plot_rms(widths, steps, rms) if plot else None
    return CoordCheck(widths=widths, steps=steps, rms=rms, figure=figure)


def _check_coord_args(
    widths: Sequence[int],
    steps: int,
    make_optimizer: Callable[[nn.Module, int], torch.optim.Optimizer] | None,
) -> tuple[int, ...]:
    """The widths as ints (at least two distinct positive ones); steps >= 0 with an optimizer."""
    checked = tuple(int(w) for w in widths)
    if len(set(checked)) < 2 or min(checked) <= 0:
        raise TransferSearchError(
            f"`widths` must hold at least two distinct positive widths, but got {checked}."
        )
    if steps < 0:
        raise TransferSearchError(f"`steps` must be >= 0, but got steps={steps}.")
    if steps > 0 and make_optimizer is None:
        raise TransferSearchError(
            f"coord_check(steps={steps}) needs make_optimizer=(model, width) -> optimizer, e.g. "
            "lambda m, w: torch.optim.AdamW(param_groups(m, hp_at(w), base_model=...))."
        )
    return checked


def _record_leaf_rms(root: nn.Module, store: dict[str, float]) -> list[RemovableHandle]:
    """Forward hooks writing the output RMS of every leaf module (and of the whole model, as
    "<output>") into ``store``, by clean name; returns their handles, for removal."""
    handles: list[RemovableHandle] = []
    for name, module in root.named_modules():
        if next(module.children(), None) is not None and name:
            continue  # only leaves, and the whole model ("")

        def hook(
            _m: nn.Module,
            _i: Any,
            out: Any,
            key: str = clean_name(name) or "<output>",
        ) -> None:
            tensor = _first_tensor(out)
            if tensor is not None and tensor.is_floating_point():
                store[key] = float(tensor.detach().float().pow(2).mean().sqrt())

        handles.append(module.register_forward_hook(hook))
    return handles


def _plot_rms(
    widths: tuple[int, ...], steps: int, rms: Mapping[str, Mapping[int, list[float]]]
) -> Any:
    """RMS vs width per layer at the last step, on log axes (matplotlib figure)."""
    figure = new_figure(figsize=(5, 3.5))
    axis = figure.subplots()
    for layer, per_width in rms.items():
        axis.plot(widths, [per_width[w][-1] for w in widths], marker="o", label=layer)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("width")
    axis.set_ylabel(f"activation RMS after {steps} steps")
    axis.legend(fontsize=6)
    figure.tight_layout()
    return figure

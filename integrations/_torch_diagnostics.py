"""Width- and depth-transfer diagnostics for torch models (private; see ``integrations/torch.py``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from transfersearch.errors import TransferSearchError, check_positive
from transfersearch.experimental import experimental
from transfersearch.report import new_figure
from transfersearch.space import Hyperparameters

from ._torch_groups import (
    ParameterRole,
    Pattern,
    check_base_width,
    check_width,
    classify_for,
    clean_name,
    find_blocks,
    group_of,
    named_parameters,
    unwrap,
)

__all__ = [
    "CoordCheck",
    "DepthCheck",
    "Diagnostics",
    "MatrixDiagnostics",
    "coord_check",
    "depth_check",
    "diagnostics",
]

#: Weight RMS within this factor of √(η/(2λ)) reads as "at equilibrium": the equilibrium RMS is an
#: order-of-magnitude statement (Su; Kosson et al. Eq. 3 hold up to update-alignment constants).
_EQUILIBRIUM_FACTOR = 2.0
#: How many τ_iter a run needs before the equilibrium expectations apply: the initial weights'
#: share decays as exp(−t/τ_iter) (Su, docs/science.md §4), to 5 % after 3 τ_iter.
_EQUILIBRIUM_HORIZONS = 3.0

_LEGEND = (
    "columns: sigma_max = top singular value; ratio = sigma_max / (sqrt(lr/wd) * d^0.75) (Fan et "
    "al. 2025; compare it across widths, equal ratios mean sublayer gains transfer); rms = weight "
    "RMS; rms_eq = sqrt(lr/(2 wd)), the equilibrium RMS (Su); rel_upd = sqrt(2 lr wd), the "
    "equilibrium relative update (Kosson et al. Eq. 3); tau_iter = 1/(lr wd) steps, the "
    "weights' averaging horizon (Wang & Aitchison Eq. 4-6); '-' = no weight decay."
)


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
        equilibrium_ratio: weight_rms / expected_weight_rms (≈ 1 at equilibrium).
        tau_exceeds_run: τ_iter > the run's steps / 3 (``hp.total_steps``; None when unknown):
            the weights cannot reach the equilibrium the expectations describe.
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
    equilibrium_ratio: float | None = None
    tau_exceeds_run: bool | None = None


@dataclass(frozen=True)
class Diagnostics:
    """Per-matrix diagnostics of one model (:func:`diagnostics`); ``str()`` gives a table, a
    legend of its columns and :meth:`verdict`."""

    matrices: tuple[MatrixDiagnostics, ...]
    figure: Any = None
    #: The run's length in steps (``hp.total_steps``), when known.
    total_steps: float | None = None

    def verdict(self) -> str:
        """What the numbers say, in words: runs too short for τ_iter, matrices off equilibrium.

        A matrix whose τ_iter exceeds a third of the run never forgets its initialisation
        (Su: its share decays as exp(−t/τ_iter)), so weight decay acts there as a mild shrink,
        not as the timescale the rules transfer; its RMS and σ expectations do not apply.
        """
        long = [m.name for m in self.matrices if m.tau_exceeds_run]
        lines: list[str] = []
        if long:
            tau = max(m.tau_iter for m in self.matrices if m.tau_exceeds_run)
            lines.append(
                f"tau_iter exceeds the run: {len(long)} matrices ({', '.join(long[:4])}) have "
                f"tau_iter up to {tau:.3g} steps, more than 1/{_EQUILIBRIUM_HORIZONS:g} of the "
                f"run's {self.total_steps:g}: their weights stay near the initialisation and the "
                "rms/sigma expectations do not apply. To make weight decay set the timescale, "
                "raise lr*weight_decay (a shorter tau_epoch) or train longer."
            )
        if self.total_steps is None and any(math.isfinite(m.tau_iter) for m in self.matrices):
            tau = max(m.tau_iter for m in self.matrices if math.isfinite(m.tau_iter))
            lines.append(
                f"the run's length is unknown (hp.total_steps is None: the scale gives neither "
                f"steps nor epochs with dataset_size and batch_size), so tau_iter (up to "
                f"{tau:.3g} steps) is not checked against it: pass diagnostics(..., "
                "total_steps=T), or give the target scale steps=T."
            )
        settled = [m for m in self.matrices if m.equilibrium_ratio is not None]
        off = [
            m
            for m in settled
            if not m.tau_exceeds_run
            and not 1 / _EQUILIBRIUM_FACTOR <= m.equilibrium_ratio <= _EQUILIBRIUM_FACTOR  # type: ignore[operator]
        ]
        if off:
            shown = ", ".join(f"{m.name} {m.equilibrium_ratio:.2g}" for m in off[:4])
            lines.append(
                f"off equilibrium: rms/rms_eq outside [1/{_EQUILIBRIUM_FACTOR:g}, "
                f"{_EQUILIBRIUM_FACTOR:g}] for {shown}: before training (or early in it) this is "
                "expected; after several tau_iter it means the group's lr or weight decay is not "
                "what the weights feel (check the group, or the optimizer's convention)."
            )
        elif settled and not long:
            lines.append(
                f"at equilibrium: every decayed matrix has rms within a factor "
                f"{_EQUILIBRIUM_FACTOR:g} of sqrt(lr/(2 wd)); compare the 'ratio' column across "
                "widths (equal = sublayer gains transfer)."
            )
        if not settled:
            lines.append("no matrix has weight decay: only sigma_max and rms are measured.")
        return "\n".join(lines)

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
        lines.append(_LEGEND)
        lines.append(self.verdict())
        return "\n".join(lines)


def _matrix_row(
    role: ParameterRole,
    param: torch.Tensor,
    lr: float,
    wd: float,
    width: float | None,
    total: float | None,
) -> MatrixDiagnostics:
    """One matrix's measured scales and their expectations at (η, λ) (see :func:`diagnostics`)."""
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
    expected_rms = math.sqrt(lr / (2 * wd)) if wd > 0 else None
    tau_iter = 1.0 / product if product > 0 else math.inf
    return MatrixDiagnostics(
        name=role.name,
        group=role.group,
        shape=role.shape,
        lr=lr,
        weight_decay=wd,
        width=d,
        top_singular_value=sigma,
        expected_top_singular_value=expected_sigma,
        singular_value_ratio=None if expected_sigma is None else sigma / expected_sigma,
        weight_rms=rms,
        expected_weight_rms=expected_rms,
        expected_relative_update=math.sqrt(2 * product) if wd > 0 else None,
        tau_iter=tau_iter,
        equilibrium_ratio=None if expected_rms is None else rms / expected_rms,
        tau_exceeds_run=None
        if total is None or wd <= 0
        else tau_iter > total / _EQUILIBRIUM_HORIZONS,
    )


def diagnostics(
    model: nn.Module,
    hp: Hyperparameters,
    base_model: nn.Module | None = None,
    overrides: Mapping[Pattern, str] | None = None,
    plot: bool = False,
    blocks: Pattern | None = None,
    total_steps: float | None = None,
) -> Diagnostics:
    """Measured vs expected weight scales for every matrix of ``model`` (≥ 2 dimensions).

    For each matrix with η and coupled λ of its group: top singular value vs √(η/λ)·d^0.75
    (Fan et al. 2025; the ratio should match across widths), weight RMS vs √(η/(2λ)) (Su), the
    expected relative update √(2ηλ) (Kosson et al.) and τ_iter = 1/(ηλ) (Wang & Aitchison).
    Groups come from :func:`classify` with the same ``base_model``/``overrides``/``blocks`` as
    :func:`param_groups`. Expectations hold in equilibrium, after several τ_iter: a matrix whose
    τ_iter exceeds a third of the run's length is flagged (``tau_exceeds_run``), and
    :meth:`Diagnostics.verdict` (printed under the table with a legend of its columns) says so.
    The run's length is ``total_steps``, else ``hp.total_steps`` (the target scale's ``steps``,
    or its ``epochs`` × N / B); when neither is known, the verdict asks for it.

    Args:
        plot: also draw σ_max/expectation per matrix (matplotlib, imported only then).
        total_steps: the run's length in optimizer steps, where ``hp`` does not know it (a scale
            given in tokens: T = tokens / (batch_size × sequence length)).

    Raises:
        TransferSearchError: see :func:`classify` (its messages name this function's
            ``overrides``/``base_model`` arguments).
    """
    roles = classify_for(model, base_model, overrides, caller="diagnostics", blocks=blocks)
    check_base_width(roles, hp, "diagnostics")
    check_width(roles, hp, "diagnostics")
    width = hp.scale.get("width")
    if total_steps is not None:
        check_positive("total_steps", total_steps, fix="The run's length in steps, e.g. 10000.")
    total = total_steps if total_steps is not None else hp.total_steps
    split = "block_vector" in hp.groups
    rows: list[MatrixDiagnostics] = []
    for name, param in named_parameters(model):
        role = roles[name]
        if role.group in ("vector", "block_vector") or param.dim() < 2:
            continue
        values = hp.group(group_of(role, split))
        rows.append(
            _matrix_row(
                role, param, float(values["lr"]), float(values["weight_decay"]), width, total
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
    return Diagnostics(matrices=tuple(rows), figure=figure, total_steps=total)


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


# ----------------------------------------------------------------------------------------------
# Across depth
# ----------------------------------------------------------------------------------------------
#: The per-depth quantities :class:`DepthCheck` records, with what Θ(1) in depth means for each.
DEPTH_COLUMNS: dict[str, str] = {
    "stream_rms": "RMS of the residual stream after the last block, after the steps",
    "stream_delta": "RMS change of that stream from step 0 to the last step (the feature update)",
    "block_delta": "mean over blocks of the RMS change of each block's output stream",
    "output_delta": "RMS change of the model's output (logits) from step 0 to the last step",
    "weight_update": "mean over block matrices of |W_T - W_0|_F / |W_0|_F",
    "weight_rms": "mean RMS of the block matrices after the steps",
    "top_singular_value": "mean top singular value of the block matrices after the steps",
}


@dataclass(frozen=True)
class DepthCheck:
    """Activation and update scales per depth (:func:`depth_check`); ``str()`` gives a table.

    ``rows[depth][column]`` for the columns of :data:`DEPTH_COLUMNS`. Under a parametrisation
    that transfers in depth (CompleteP, α = 1, with the residual multiplier 1/m_L applied;
    Dey et al. 2025) the stream and its update stay Θ(1) as depth grows: :meth:`slopes` (log-log
    slope against depth) near 0. Under the standard parametrisation the update grows with depth.
    """

    depths: tuple[int, ...]
    steps: int
    rows: Mapping[int, Mapping[str, float]]
    figure: Any = field(default=None, compare=False)

    def slopes(self) -> dict[str, float]:
        """Least-squares slope of log value against log depth, per column (≈ 0: Θ(1) in depth)."""
        xs = [math.log(d) for d in self.depths]
        mean_x = sum(xs) / len(xs)
        den = sum((x - mean_x) ** 2 for x in xs)
        out: dict[str, float] = {}
        for column in DEPTH_COLUMNS:
            ys = [math.log(max(self.rows[d][column], 1e-30)) for d in self.depths]
            mean_y = sum(ys) / len(ys)
            out[column] = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / den
        return out

    def __str__(self) -> str:
        names = list(DEPTH_COLUMNS)
        lines = [f"{'depth':>5} " + " ".join(f"{n:>18}" for n in names)]
        for depth in self.depths:
            lines.append(f"{depth:>5} " + " ".join(f"{self.rows[depth][n]:>18.4g}" for n in names))
        slopes = self.slopes()
        lines.append(f"{'slope':>5} " + " ".join(f"{slopes[n]:>18.3f}" for n in names))
        lines.append(
            "slope = d log(value) / d log(depth); near 0 = Theta(1) in depth. Columns: "
            + "; ".join(f"{k}: {v}" for k, v in DEPTH_COLUMNS.items())
        )
        return "\n".join(lines)


def _block_list(model: nn.Module, block_list: str | None) -> nn.ModuleList:
    """The model's residual blocks: the ModuleList named ``block_list``, else the detected one."""
    root = unwrap(model)
    if block_list is None:
        found = find_blocks(root, None)
        if not found.prefixes:
            raise TransferSearchError(
                f"depth_check cannot find the residual blocks: {found.problem}. Pass "
                "block_list='<name of the nn.ModuleList of blocks>', e.g. 'transformer.h'."
            )
        block_list = found.prefixes[0]
    modules = {clean_name(name): module for name, module in root.named_modules()}
    blocks = modules.get(block_list)
    if not isinstance(blocks, nn.ModuleList):
        raise TransferSearchError(
            f"`block_list`={block_list!r} is not an nn.ModuleList of the model; lists there: "
            f"{[n for n, m in modules.items() if isinstance(m, nn.ModuleList)][:5]}."
        )
    return blocks


def _stream_hook(store: list[torch.Tensor]) -> Callable[[nn.Module, Any, Any], None]:
    """A forward hook appending a copy of the block's output (the residual stream) to ``store``."""

    def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
        tensor = _first_tensor(output)
        if tensor is not None:
            store.append(tensor.detach().clone())

    return hook


def _rms(tensor: torch.Tensor) -> float:
    return float(tensor.detach().float().pow(2).mean().sqrt())


@experimental("0.2.0")
def depth_check(
    make_model: Callable[[int], nn.Module],
    depths: Sequence[int],
    data: tuple[torch.Tensor, torch.Tensor],
    *,
    steps: int = 3,
    make_optimizer: Callable[[nn.Module, int], torch.optim.Optimizer],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    block_list: str | None = None,
    seed: int = 0,
    plot: bool = False,
) -> DepthCheck:
    """The coordinate check across depth: activations, their updates and the block weights' scales.

    For each depth: ``torch.manual_seed(seed)``, ``model = make_model(depth)``, a forward pass on
    ``data``'s inputs recording the residual stream after every block, ``steps`` optimizer steps
    on the same batch, and the same forward pass again. Records the columns of
    :data:`DEPTH_COLUMNS` (stream RMS, the stream's and the output's change, the block matrices'
    relative update, RMS and top singular value). Θ(1) in depth is what CompleteP (Dey et al.
    2025) asks; the model must apply its residual multiplier (``hp.residual_multiplier``).

    Args:
        make_model: depth → model (the residual multiplier of that depth applied inside).
        depths: at least two distinct depths.
        data: (inputs, targets), one fixed batch.
        steps: optimizer steps (>= 1).
        make_optimizer: (model, depth) → optimizer, e.g. AdamW over :func:`param_groups` with the
            hyperparameters of that depth.
        block_list: the name of the ``nn.ModuleList`` of blocks (default: the model's one list of
            same-class modules).
        plot: draw each column against depth (matplotlib, imported only then).

    Raises:
        TransferSearchError: fewer than two depths, steps < 1, or no block list to be found.
    """
    checked = tuple(int(d) for d in depths)
    if len(set(checked)) < 2 or min(checked) <= 0:
        raise TransferSearchError(
            f"`depths` must hold at least two distinct positive depths, but got {checked}."
        )
    if steps < 1:
        raise TransferSearchError(f"depth_check needs steps >= 1 to see updates, got {steps=}.")
    loss_of = loss_fn or _default_loss
    rows: dict[int, dict[str, float]] = {}
    for depth in checked:
        torch.manual_seed(seed)
        model = make_model(depth)
        blocks = _block_list(model, block_list)
        optimizer = make_optimizer(model, depth)
        rows[depth] = _measure_depth(model, blocks, data, steps, optimizer, loss_of)
    figure = _plot_depth(checked, rows) if plot else None
    return DepthCheck(depths=checked, steps=steps, rows=rows, figure=figure)


def _measure_depth(
    model: nn.Module,
    blocks: nn.ModuleList,
    data: tuple[torch.Tensor, torch.Tensor],
    steps: int,
    optimizer: torch.optim.Optimizer,
    loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> dict[str, float]:
    """The :data:`DEPTH_COLUMNS` of one model: a forward pass, ``steps`` optimizer steps on
    ``data``, a forward pass again, with the residual stream recorded after every block."""
    inputs, targets = data
    streams: list[torch.Tensor] = []
    handles = [block.register_forward_hook(_stream_hook(streams)) for block in blocks]
    matrices = [p for p in blocks.parameters() if p.dim() >= 2]
    try:
        with torch.no_grad():
            before_out = _first_tensor(model(inputs))
        before = list(streams)
        initial = [p.detach().clone() for p in matrices]
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            prediction = _first_tensor(model(inputs))
            if prediction is None:
                raise TransferSearchError("depth_check: the model returned no tensor.")
            loss: torch.Tensor = loss_of(prediction, targets)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
        streams.clear()
        with torch.no_grad():
            after_out = _first_tensor(model(inputs))
        after = list(streams)
    finally:
        for handle in handles:
            handle.remove()
    if before_out is None or after_out is None:
        raise TransferSearchError("depth_check: the model returned no tensor.")
    with torch.no_grad():
        return {
            "stream_rms": _rms(after[-1]),
            "stream_delta": _rms(after[-1] - before[-1]),
            "block_delta": sum(_rms(a - b) for a, b in zip(after, before)) / len(after),
            "output_delta": _rms(after_out - before_out),
            "weight_update": sum(
                float((p - p0).norm() / p0.norm()) for p, p0 in zip(matrices, initial)
            )
            / len(matrices),
            "weight_rms": sum(_rms(p) for p in matrices) / len(matrices),
            "top_singular_value": sum(
                float(torch.linalg.matrix_norm(p.detach().float().reshape(p.shape[0], -1), 2))
                for p in matrices
            )
            / len(matrices),
        }


def _plot_depth(depths: tuple[int, ...], rows: Mapping[int, Mapping[str, float]]) -> Any:
    """Each column of :data:`DEPTH_COLUMNS` against depth, log-log (matplotlib figure)."""
    figure = new_figure(figsize=(9, 5))
    axes = figure.subplots(2, 4).ravel()
    for axis, column in zip(axes, DEPTH_COLUMNS):
        axis.plot(depths, [rows[d][column] for d in depths], marker="o")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(column, fontsize=8)
        axis.set_xlabel("depth", fontsize=7)
    axes[-1].axis("off")
    figure.tight_layout()
    return figure

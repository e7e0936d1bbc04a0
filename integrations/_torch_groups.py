"""Parameter classification and torch.optim param groups (private; see ``integrations/torch.py``).

Every trainable parameter goes to exactly one of :data:`transfersearch.rules.GROUPS`:

- ``"hidden"``: a matrix whose fan-in and fan-out both grow with width (µP's hidden weights).
- ``"input"``: only the fan-out grows (first layer, embedding tables), or nothing grows (a
  fixed-size matrix; µP gives it the same Θ(1) learning rate as the input layer).
- ``"output"``: only the fan-in grows (the readout).
- ``"vector"``: at most one dimension (biases, LayerNorm/RMSNorm gains, MHA ``bias_k``/``bias_v``).
- ``"block_vector"``: a vector inside a residual block, when the rule gives those their own values
  (a depth rule: CompleteP moves in-block norm gains and biases but not the final norm). The blocks
  are a ``blocks=`` name pattern, else the model's one ``nn.ModuleList`` of same-class modules.

Axes: ``nn.Linear``/``nn.ConvNd``/``nn.MultiheadAttention`` projections and unknown parameters
(torch's convention) have fan-out on axis 0 and fan-in on axis 1; ``nn.ConvTransposeNd`` has them
swapped (its weight is ``(in, out/groups, *kernel)``); an ``nn.Embedding``/``nn.EmbeddingBag`` table
``(vocab, d)`` has fan-out ``d`` on axis 1 (a one-hot input of size vocab on axis 0).
Nothing is stored on the tensors: the classification lives in the returned dicts.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, overload

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from transfersearch.errors import TransferSearchError
from transfersearch.rules import ALL_GROUPS, BLOCK_VECTOR
from transfersearch.space import Hyperparameters

__all__ = [
    "ParameterRole",
    "check_base_width",
    "check_module",
    "classify",
    "classify_for",
    "named_parameters",
    "param_groups",
    "unwrap",
]

logger = logging.getLogger(__name__)

Pattern = Union[str, "re.Pattern[str]"]
Convention = Literal["coupled", "independent"]

#: Name components that wrappers insert and that we drop: torch.compile, FSDP, activation
#: checkpointing. (DDP's and DataParallel's ``module.`` prefix is removed by unwrapping the object.)
_WRAPPER_COMPONENTS = frozenset({"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})


@dataclass(frozen=True)
class ParameterRole:
    """Why one parameter landed in its group.

    Attributes:
        name: the parameter's name with wrapper prefixes removed (``_orig_mod.``, DDP's ``module.``,
            ``_fsdp_wrapped_module.``), as used by ``overrides``.
        group: one of "input", "hidden", "output", "vector".
        shape: the parameter's (unsharded) shape.
        base_shape: the same parameter's shape in ``base_model``, or None without one.
        fan_out_axis, fan_in_axis: the axes read as fan-out and fan-in (None for vectors).
        reason: a short human-readable explanation.
        in_block: whether it lies in a residual block (``blocks=``, or the detected block list).
    """

    name: str
    group: str
    shape: tuple[int, ...]
    base_shape: tuple[int, ...] | None
    fan_out_axis: int | None
    fan_in_axis: int | None
    reason: str
    in_block: bool = False

    @property
    def fan_in(self) -> int | None:
        """Fan-in = size of the fan-in axis times the receptive field (conv kernels)."""
        if self.fan_in_axis is None:
            return None
        receptive = 1
        for axis, size in enumerate(self.shape):
            if axis not in (self.fan_in_axis, self.fan_out_axis):
                receptive *= size
        return self.shape[self.fan_in_axis] * receptive


# ----------------------------------------------------------------------------------------------
# Names and wrappers
# ----------------------------------------------------------------------------------------------
def check_module(value: object, name: str = "model") -> nn.Module:
    """``value`` if it is a ``torch.nn.Module``, else a TransferSearchError naming ``name``."""
    if not isinstance(value, nn.Module):
        raise TransferSearchError(
            f"`{name}` must be a torch.nn.Module (possibly wrapped by DDP, FSDP or torch.compile), "
            f"but got {name}={value!r} ({type(value).__name__}). Pass the model object itself, "
            "e.g. param_groups(model, hp)."
        )
    return value


def unwrap(model: nn.Module) -> nn.Module:
    """Strip DistributedDataParallel / DataParallel (``.module``) and torch.compile (``._orig_mod``).

    FSDP is not stripped: with ``use_orig_params=True`` its parameters are the ones to optimize.

    Raises:
        TransferSearchError: ``model`` is not an ``nn.Module`` (e.g. None).
    """
    model = check_module(model)
    while True:
        if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model = model.module
            continue
        inner = getattr(model, "_orig_mod", None)
        if isinstance(inner, nn.Module):
            model = inner
            continue
        return model


def clean_name(name: str) -> str:
    """Drop wrapper components (``_orig_mod``, ``_fsdp_wrapped_module``, …) from a dotted name."""
    return ".".join(part for part in name.split(".") if part not in _WRAPPER_COMPONENTS)


def named_parameters(model: nn.Module) -> Iterator[tuple[str, nn.Parameter]]:
    """``(clean name, parameter)`` for each distinct parameter (tied ones once, first name)."""
    for name, param in unwrap(model).named_parameters():
        yield clean_name(name), param


def _fsdp_full_shapes(model: nn.Module) -> dict[str, tuple[int, ...]] | None:
    """Unsharded shapes under FSDP (``use_orig_params=True``), or None when no FSDP is present.

    FSDP's original parameters are flat 1-D shards outside forward/backward; the full shapes are
    read inside ``FSDP.summon_full_params`` — a collective, so every rank must call param_groups.
    """
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except ImportError:  # pragma: no cover - torch built without distributed
        return None
    root = unwrap(model)
    if not any(isinstance(m, FSDP) for m in root.modules()):
        return None
    names = [n for n, _ in root.named_parameters()]
    if any(n.split(".")[-1] == "_flat_param" for n in names):
        raise TransferSearchError(
            "FSDP with use_orig_params=False exposes only flattened parameters, so their roles "
            "cannot be told. Wrap the model with FullyShardedDataParallel(..., use_orig_params=True)."
        )
    with FSDP.summon_full_params(root, writeback=False, recurse=True):
        return {clean_name(n): tuple(p.shape) for n, p in root.named_parameters()}


# ----------------------------------------------------------------------------------------------
# Layouts
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Layout:
    kind: str  # "embedding", "matrix", "vector", "generic"
    fan_out_axis: int | None
    fan_in_axis: int | None


_ATTENTION_MATRICES = ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight")
_VECTOR = _Layout("vector", None, None)
_GENERIC = _Layout("generic", 0, 1)


def _layout_of(module: nn.Module, local: str, ndim: int) -> _Layout:
    """How to read parameter ``local`` of ``module`` (``ndim``: its number of dimensions).

    A Linear/Conv layer's own ``weight`` has known axes. Any other parameter of such a layer (a
    subclass's gate matrix, loralib's ``lora_A``/``lora_B``) is no bias just because it lives
    there: with at most one dimension it is a vector, otherwise it is read like a raw
    ``nn.Parameter`` (by its shapes, or an override).
    """
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)) and local == "weight":
        return _Layout("embedding", 1, 0)
    if isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        if local == "weight":
            return _Layout("matrix", 1, 0)
        return _VECTOR if ndim <= 1 else _GENERIC
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        if local == "weight":
            return _Layout("matrix", 0, 1)
        return _VECTOR if ndim <= 1 else _GENERIC
    if isinstance(module, nn.MultiheadAttention):
        if local in _ATTENTION_MATRICES:
            return _Layout("matrix", 0, 1)
        return _VECTOR  # in_proj_bias, bias_k, bias_v ((1, 1, E): one non-singleton axis)
    return _GENERIC


def _owners(model: nn.Module) -> dict[int, list[tuple[nn.Module, str, int]]]:
    found: dict[int, list[tuple[nn.Module, str, int]]] = {}
    for module in model.modules():
        for local, param in module.named_parameters(recurse=False, remove_duplicate=False):
            found.setdefault(id(param), []).append((module, local, param.dim()))
    return found


def _layout_for(owners: list[tuple[nn.Module, str, int]]) -> tuple[_Layout, bool]:
    """The layout of a (possibly tied) parameter and whether it is a tied embedding.

    A table shared by an Embedding and a Linear readout is read as the embedding ("input"): one
    tensor can have only one learning rate, and µP keeps the shared table at the input's Θ(1) rate
    (the readout then needs its own 1/width output multiplier in the forward pass).
    """
    layouts = [_layout_of(module, local, ndim) for module, local, ndim in owners] or [_GENERIC]
    embedding = [lay for lay in layouts if lay.kind == "embedding"]
    if embedding:
        return embedding[0], len(layouts) > 1
    known = [lay for lay in layouts if lay.kind != "generic"]
    return (known or layouts)[0], False


# ----------------------------------------------------------------------------------------------
# Overrides
# ----------------------------------------------------------------------------------------------
def _check_overrides(overrides: Mapping[Pattern, str] | None) -> list[tuple[Pattern, str]]:
    if overrides is None:
        return []
    if not isinstance(overrides, Mapping):
        raise TransferSearchError(
            f"`overrides` must map name patterns to groups, e.g. {{'lm_head.*': 'output'}}, but got "
            f"{overrides!r}."
        )
    checked: list[tuple[Pattern, str]] = []
    for pattern, group in overrides.items():
        if not isinstance(pattern, (str, re.Pattern)):
            raise TransferSearchError(
                f"override pattern {pattern!r} must be a glob string or a compiled re.Pattern."
            )
        if group not in ALL_GROUPS:
            raise TransferSearchError(
                f"override {pattern!r} -> {group!r}: the group must be one of {ALL_GROUPS}."
            )
        checked.append((pattern, group))
    return checked


def _matches(pattern: Pattern, name: str) -> bool:
    if isinstance(pattern, str):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern.search(name) is not None


def _show(pattern: Pattern) -> str:
    return repr(pattern) if isinstance(pattern, str) else f"re.compile({pattern.pattern!r})"


# ----------------------------------------------------------------------------------------------
# Classification
# ----------------------------------------------------------------------------------------------
#: Fix named in errors when the shapes cannot settle a role because ``model`` is at base_model's
#: width (any width other than the model's works as a shape reference).
_OTHER_WIDTH = "base_model=make_model(2 * base_width) (any width other than the model's)"


def _check_initialised(model: nn.Module, argument: str, caller: str) -> None:
    """Refuse a model with uninitialised lazy parameters (``nn.LazyLinear`` before a forward)."""
    lazy = [clean_name(n) for n, p in unwrap(model).named_parameters() if is_lazy(p)]
    if lazy:
        raise TransferSearchError(
            f"`{argument}` has uninitialised lazy parameters {lazy[:5]}: nn.LazyLinear and the "
            "other Lazy* modules get their shapes at the first forward pass, so no shape (and no "
            f"role) can be read yet. Run one forward pass first, e.g. {argument}(example_batch), "
            f"then call {caller}."
        )


def _by_shapes(
    name: str,
    shape: tuple[int, ...],
    base_shape: tuple[int, ...],
    layout: _Layout,
    tied: bool,
    caller: str,
) -> tuple[str, str]:
    """(group, reason) by comparing a matrix's shape with the base-width shape."""
    if len(shape) != len(base_shape):
        raise TransferSearchError(
            f"parameter {name!r} has shape {shape} but {base_shape} in base_model: the number of "
            "dimensions differs. Build base_model with the same architecture at another width."
        )
    grown = {axis for axis, (a, b) in enumerate(zip(shape, base_shape)) if a != b}
    if layout.kind == "generic" and sum(size > 1 for size in shape) <= 1 and len(grown) <= 1:
        return "vector", "a vector stored with singleton axes"
    out_axis, in_axis = layout.fan_out_axis, layout.fan_in_axis
    stray = sorted(grown - {out_axis, in_axis})
    if stray:
        raise TransferSearchError(
            f"cannot tell the role of parameter {name!r}: shape {shape} vs {base_shape} in "
            f"base_model grows on axis {stray}, which is neither its fan-out axis ({out_axis}) nor "
            f"its fan-in axis ({in_axis}). Pass overrides={{{name!r}: 'input'}} (or the right "
            f"group) to {caller}."
        )
    fan_out, fan_in = out_axis in grown, in_axis in grown
    if layout.kind == "generic" and fan_out != fan_in:
        axis = out_axis if fan_out else in_axis
        raise TransferSearchError(
            f"cannot tell the role of parameter {name!r}: shape {shape} vs {base_shape} in "
            f"base_model grows only on axis {axis}. It is a raw nn.Parameter (or a matrix of a "
            "layer other than its own `weight`), with no layer type to say which axis is its "
            "fan-in, so it is an input (fan-out grows, e.g. a positional embedding (ctx, d)) or "
            "an output (fan-in grows) depending on how it is used. Pass "
            f"overrides={{{name!r}: 'input'}} (or 'output'/'hidden') to {caller}."
        )
    if fan_out and fan_in:
        return "hidden", "fan-in and fan-out grow with width"
    if fan_out:
        why = "tied embedding/readout: width grows" if tied else "only fan-out grows with width"
        return "input", why
    if fan_in:
        return "output", "only fan-in grows with width"
    return "input", "no dimension grows with width (Θ(1) lr, like the input layer)"


def classify(
    model: nn.Module,
    base_model: nn.Module | None = None,
    overrides: Mapping[Pattern, str] | None = None,
    blocks: Pattern | None = None,
) -> dict[str, ParameterRole]:
    """Assign each parameter of ``model`` to "input", "hidden", "output" or "vector".

    With ``base_model`` (the same architecture at another width, typically the base width; build
    it on the meta device, ``with torch.device("meta"): make_model(width=...)``, to allocate
    nothing), a parameter's group follows from which of its axes differ in size: fan-in and
    fan-out → hidden, only fan-out → input, only fan-in → output, none → input (a fixed-size
    matrix), ≤1 dimension → vector.

    When ``model`` has exactly ``base_model``'s shapes (the rung at the base width, with
    ``base_model=make_model(base_width)``), no axis can be seen to grow: vectors and embedding
    tables are still told by their type, and the Linear/Conv/attention weights by the
    registration-order heuristic below. There every width multiplier is 1, so input, hidden and
    output carry one lr and weight decay (``param_groups`` checks this against ``hp``) and the
    labels cannot change a number. A raw matrix then needs an override, or a shape reference at
    another width (``base_model=make_model(2 * base_width)``).

    Without ``base_model``, a documented heuristic by module type and registration order: ≤1-D
    parameters and norm/bias parameters are vectors; Embedding tables are inputs; of the remaining
    Linear/Conv/MultiheadAttention weights, in ``named_parameters()`` order, the first is the input
    (only when the model has no Embedding) and the last is the output (unless the model ties a
    readout to its embedding), the rest hidden.

    Raw ``nn.Parameter`` matrices (owned by no Linear/Conv/Embedding/attention layer), and matrices
    of a Linear/Conv layer other than its own ``weight`` (a subclass's gate matrix, loralib's
    ``lora_A``/``lora_B``; only ≤1-D ones such as ``bias`` are vectors there), follow one rule on
    every path: one whose role the shapes cannot settle asks for an override. The shapes settle it
    only against a ``base_model`` at another width and only when both of its first two axes grow
    (hidden) or neither does (input, fixed size); when one axis grows, the role depends on whether
    that axis is the fan-in, which a raw tensor does not say — a positional embedding ``(ctx, d)``
    is an input, a readout ``(d, vocab)`` an output — so an override is required, as it is for
    every raw matrix without a base_model.

    ``overrides`` maps name patterns to groups and wins over both: a ``str`` is a glob matched
    against the whole clean name (``fnmatch.fnmatchcase``), a compiled ``re.Pattern`` is searched in
    it. The first matching pattern applies; a pattern that matches nothing is an error (a typo).
    An override may name "block_vector" as well.

    ``blocks`` says which parameters lie in the residual blocks (:attr:`ParameterRole.in_block`),
    for a depth rule's "block_vector" group: a glob over clean names (``"transformer.h.*"``) or a
    compiled pattern. Without it, the blocks are the model's one ``nn.ModuleList`` whose children
    share one class and hold parameters (nanoGPT's ``transformer.h``, Hugging Face's ``layers``,
    ``nn.TransformerEncoder.layers``); with none or several such lists no parameter is in a block,
    and :func:`param_groups` refuses when the depth rule needs them told apart.

    Returns:
        clean parameter name → :class:`ParameterRole`, in ``named_parameters()`` order; tied
        parameters appear once, under their first name.

    Raises:
        TransferSearchError: an ambiguous role (naming the parameter and the override to add), a
            base_model whose parameters or dimensions do not match, uninitialised lazy parameters
            (run a forward pass first), or a bad override.
    """
    return classify_for(model, base_model, overrides, caller="classify", blocks=blocks)


@dataclass(frozen=True)
class _Blocks:
    """Where the residual blocks are: module-name prefixes (detected) or a name pattern (given);
    ``problem`` says why none could be told (empty when they could)."""

    prefixes: tuple[str, ...]
    pattern: Pattern | None
    problem: str

    def contains(self, name: str) -> bool:
        if self.pattern is not None:
            return _matches(self.pattern, name)
        return any(name.startswith(prefix + ".") for prefix in self.prefixes)


def find_blocks(model: nn.Module, blocks: Pattern | None) -> _Blocks:
    """The model's residual blocks: ``blocks`` if given, else its one ``nn.ModuleList`` of
    same-class modules with parameters (the outermost such lists; see :func:`classify`)."""
    if blocks is not None:
        if not isinstance(blocks, (str, re.Pattern)):
            raise TransferSearchError(
                f"`blocks` must be a glob over parameter names such as 'transformer.h.*' or a "
                f"compiled re.Pattern, but got blocks={blocks!r}."
            )
        return _Blocks((), blocks, "")
    found: list[str] = []
    for name, module in unwrap(model).named_modules():
        children = list(module.children())
        if not isinstance(module, nn.ModuleList) or not children:
            continue
        if len({type(child) for child in children}) != 1:
            continue
        if not any(True for child in children for _ in child.parameters()):
            continue
        clean = clean_name(name)
        if not any(clean.startswith(outer + ".") for outer in found):
            found.append(clean)
    if len(found) == 1:
        return _Blocks((found[0],), None, "")
    if found:
        problem = f"the model has several lists of same-class modules, {found}"
    else:
        problem = "the model has no nn.ModuleList of same-class modules (its residual blocks)"
    return _Blocks((), None, problem)


def classify_for(
    model: nn.Module,
    base_model: nn.Module | None,
    overrides: Mapping[Pattern, str] | None,
    *,
    caller: str,
    blocks: Pattern | None = None,
) -> dict[str, ParameterRole]:
    """:func:`classify`, naming ``caller`` (the public function called) in its errors."""
    found = find_blocks(model, blocks)
    rules = _check_overrides(overrides)
    root = unwrap(model)
    _check_initialised(root, "model", caller)
    if base_model is not None:
        check_module(base_model, "base_model")
        _check_initialised(base_model, "base_model", caller)
    owners = _owners(root)
    full_shapes = _fsdp_full_shapes(model)
    params = list(named_parameters(model))
    shapes = {
        name: full_shapes.get(name, tuple(p.shape)) if full_shapes else tuple(p.shape)
        for name, p in params
    }
    layouts = {name: _layout_for(owners.get(id(p), [])) for name, p in params}
    base_shapes = None if base_model is None else _base_shapes(base_model, params)
    overridden = {name for name, _ in params if any(_matches(p, name) for p, _ in rules)}
    groups = _groups(params, shapes, base_shapes, layouts, overridden, caller)
    roles = _roles(params, groups, rules, shapes, base_shapes, layouts, found)
    if found.pattern is not None and not any(role.in_block for role in roles.values()):
        raise TransferSearchError(
            f"blocks={_show(found.pattern)} matches no parameter. Names look like "
            f"{[n for n, _ in params][:4]} (wrapper prefixes such as '_orig_mod.' and 'module.' "
            "removed); a glob must match the whole name, e.g. 'transformer.h.*'."
        )
    return roles


def _base_shapes(
    base_model: nn.Module, params: list[tuple[str, nn.Parameter]]
) -> dict[str, tuple[int, ...]]:
    """base_model's (unsharded) parameter shapes by clean name; every one of ``params`` must be
    there (the same architecture at another width)."""
    base_full = _fsdp_full_shapes(base_model)
    base_shapes = {
        name: (base_full or {}).get(name, tuple(p.shape))
        for name, p in named_parameters(base_model)
    }
    missing = [name for name, _ in params if name not in base_shapes]
    if missing:
        raise TransferSearchError(
            f"base_model has no parameters named {missing[:5]}; it must be the same "
            "architecture as `model` (built by the same function at another width). With a "
            "deeper or shallower model, build base_model at the model's depth and the base "
            "width: it is a shape reference for width only."
        )
    return base_shapes


def _groups(
    params: list[tuple[str, nn.Parameter]],
    shapes: Mapping[str, tuple[int, ...]],
    base_shapes: Mapping[str, tuple[int, ...]] | None,
    layouts: Mapping[str, tuple[_Layout, bool]],
    overridden: set[str],
    caller: str,
) -> dict[str, tuple[str, str]]:
    """Each parameter's (group, reason) before the overrides: by the axes that differ from
    base_model's, or by type and registration order when there is no base_model or it has the
    model's shapes (the base width)."""
    if base_shapes is not None and not _same_shapes(shapes, base_shapes):
        groups: dict[str, tuple[str, str]] = {}
        for name, _ in params:
            layout, tied = layouts[name]
            if name in overridden:
                groups[name] = ("hidden", "placeholder, overridden")
            elif layout.kind == "vector" or len(shapes[name]) <= 1:
                groups[name] = ("vector", "at most one dimension (bias, gain)")
            else:
                groups[name] = _by_shapes(
                    name, shapes[name], base_shapes[name], layout, tied, caller
                )
        return groups
    at_base = base_shapes is not None
    groups = _by_position(params, shapes, layouts, overridden, caller, at_base)
    if at_base:
        logger.info(
            "%s: model has base_model's shapes (the base width): matrices grouped by type "
            "and registration order, where every width multiplier is 1",
            caller,
        )
    return groups


def _roles(
    params: list[tuple[str, nn.Parameter]],
    groups: Mapping[str, tuple[str, str]],
    rules: list[tuple[Pattern, str]],
    shapes: Mapping[str, tuple[int, ...]],
    base_shapes: Mapping[str, tuple[int, ...]] | None,
    layouts: Mapping[str, tuple[_Layout, bool]],
    blocks: _Blocks,
) -> dict[str, ParameterRole]:
    """The parameters' roles, the first matching override winning over ``groups``; an override
    that matches no parameter is an error (a typo)."""
    used: set[int] = set()
    roles: dict[str, ParameterRole] = {}
    for name, _ in params:
        group, reason = groups[name]
        for index, (pattern, target) in enumerate(rules):
            if _matches(pattern, name):
                group, reason = target, f"override {_show(pattern)}"
                used.add(index)
                break
        layout, _ = layouts[name]
        vector = group == "vector" or len(shapes[name]) <= 1
        roles[name] = ParameterRole(
            name=name,
            group=group,
            shape=shapes[name],
            base_shape=None if base_shapes is None else base_shapes[name],
            fan_out_axis=None if vector else layout.fan_out_axis,
            fan_in_axis=None if vector else layout.fan_in_axis,
            reason=reason,
            in_block=blocks.contains(name),
        )
    unused = [_show(pattern) for index, (pattern, _) in enumerate(rules) if index not in used]
    if unused:
        raise TransferSearchError(
            f"overrides {unused} match no parameter. Names look like {[n for n, _ in params][:4]} "
            "(wrapper prefixes such as '_orig_mod.' and 'module.' removed)."
        )
    return roles


def _same_shapes(
    shapes: Mapping[str, tuple[int, ...]], base_shapes: Mapping[str, tuple[int, ...]]
) -> bool:
    """Whether every matrix (≥ 2-D parameter) has its base_model shape: model at the base width."""
    matrices = [name for name, shape in shapes.items() if len(shape) > 1]
    return bool(matrices) and all(shapes[n] == base_shapes[n] for n in matrices)


def _by_position(
    params: list[tuple[str, nn.Parameter]],
    shapes: Mapping[str, tuple[int, ...]],
    layouts: Mapping[str, tuple[_Layout, bool]],
    overridden: set[str],
    caller: str,
    at_base: bool,
) -> dict[str, tuple[str, str]]:
    """The type-and-position heuristic (see :func:`classify`): without base_model, or with one of
    the model's own shapes (``at_base``)."""
    source = "model at base_model's width" if at_base else "no base_model"
    why = (
        "model has base_model's shapes (it is at the base width), so no axis can be seen to grow"
        if at_base
        else "no base_model was given"
    )
    reference = _OTHER_WIDTH if at_base else "a base_model"
    groups: dict[str, tuple[str, str]] = {}
    matrices: list[str] = []
    has_embedding = has_tied = False
    for name, _ in params:
        layout, tied = layouts[name]
        if layout.kind == "vector" or len(shapes[name]) <= 1:
            groups[name] = ("vector", "at most one dimension (bias, gain)")
        elif layout.kind == "embedding":
            groups[name] = ("input", f"embedding table ({source})")
            has_embedding, has_tied = True, has_tied or tied
        elif layout.kind == "generic" and sum(size > 1 for size in shapes[name]) <= 1:
            groups[name] = ("vector", "a vector stored with singleton axes")
        elif layout.kind == "generic":
            if name not in overridden:
                raise TransferSearchError(
                    f"cannot tell the role of parameter {name!r} (shape {shapes[name]}): it is not "
                    "a Linear, Conv, Embedding or MultiheadAttention weight (a raw nn.Parameter "
                    f"or another matrix of a layer) and {why}. Pass "
                    f"overrides={{{name!r}: 'input'}} (or 'hidden'/'output') to {caller}; "
                    f"{reference} settles it only when both or neither of its axes grow."
                )
            groups[name] = ("hidden", "placeholder, overridden")
        else:
            matrices.append(name)
    for name in matrices:
        groups[name] = ("hidden", f"a middle Linear/Conv/attention weight ({source})")
    if not has_embedding and matrices:
        groups[matrices[0]] = ("input", f"the first registered matrix ({source})")
    if not has_tied and matrices:
        last = matrices[-1]
        if groups[last][0] == "input" and last not in overridden:
            raise TransferSearchError(
                f"the model has a single matrix {last!r}, both first and last layer: its role is "
                f"ambiguous and {why}. Pass overrides={{{last!r}: 'input'}} (or 'output') to "
                f"{caller}, or {reference}."
            )
        groups[last] = ("output", f"the last registered matrix ({source})")
    return groups


# ----------------------------------------------------------------------------------------------
# Param groups
# ----------------------------------------------------------------------------------------------
#: The groups whose labels the type-and-position heuristic chooses among at the base width.
_MATRIX_GROUPS = ("input", "hidden", "output")
#: Relative tolerance for "the same lr / weight decay": the rules multiply by s^k = 1 exactly at
#: s = 1, so anything beyond float rounding means ``hp`` is not at the model's (base) width.
_SAME_VALUE_RTOL = 1e-9


def check_base_width(roles: Mapping[str, ParameterRole], hp: Hyperparameters, caller: str) -> None:
    """Refuse roles read at the base width (model has base_model's shapes) with an ``hp`` whose
    input, hidden and output groups differ: there the labels would pick the numbers.

    At the base width every width multiplier is 1 (s = d / d_base = 1, Wang & Aitchison Eq. 12),
    so the three matrix groups share one lr and weight decay and the heuristic's labels change
    nothing; ``hp`` for another width means ``model`` or ``base_model`` was built at the wrong one.
    """
    matrices = [r for r in roles.values() if len(r.shape) > 1 and r.base_shape is not None]
    if not matrices or any(r.shape != r.base_shape for r in matrices):
        return
    values = {
        g: (float(hp.groups[g]["lr"]), float(hp.groups[g]["weight_decay"])) for g in _MATRIX_GROUPS
    }
    first = values["input"]
    if all(
        math.isclose(v, f, rel_tol=_SAME_VALUE_RTOL)
        for value in values.values()
        for v, f in zip(value, first)
    ):
        return
    shown = ", ".join(f"{g} lr={lr:.4g} weight_decay={wd:.4g}" for g, (lr, wd) in values.items())
    width = hp.scale.get("width")
    base_width = None if hp.base is None else hp.base.get("width")
    at = "another width" if width is None else f"width={width:g}"
    if hp.width_mult is not None:
        at += f" (s = {hp.width_mult:g})"
    build = (
        "the model at hp's width"
        if width is None or base_width is None
        else f"the model at width {width:g} and base_model at the base width {base_width:g}"
    )
    raise TransferSearchError(
        "`model` has exactly base_model's shapes, so the shapes cannot tell its input, hidden and "
        "output matrices apart. That is harmless only at the base width, where every width "
        f"multiplier is 1 and the three groups share one lr and weight decay; but hp is for {at}: "
        f"{shown}. So model or base_model was built at the wrong width: build {build}, or pass "
        f"{_OTHER_WIDTH} to {caller}."
    )


#: Relative tolerance for "this axis grew by s": shapes are integers, so a ratio off by more than
#: float rounding means another width.
_RATIO_RTOL = 1e-6


def check_width(roles: Mapping[str, ParameterRole], hp: Hyperparameters, caller: str) -> None:
    """Refuse an ``hp`` concretised for another width than the model's (issue 27, item 1).

    Read off the axes whose size differs from base_model's, the model is at hp's width when one
    of them (a) grew by hp's ratio s = width / base width (Wang & Aitchison Eq. 12: base_model at
    hp's base width), or (b) the smallest fan-in axis of the hidden matrices has hp's ``width`` as
    its size (``width`` is the hidden matrices' fan-in d, :data:`transfersearch.scale.
    KNOWN_SCALE_NAMES`; an MLP's 4d → d projection has a larger one): base_model at any width. At
    s = 1 a reference *wider* than the model is also accepted (the documented base-rung
    ``base_model=make_model(2 * base_width)``, for widths counted in other units).

    Raises:
        TransferSearchError: naming the ratio, hp's width and both fixes.
    """
    s = hp.width_mult
    if s is None or hp.base is None:
        return
    width, base_width = hp.scale["width"], hp.base["width"]
    ratios: set[float] = set()
    fan_ins: list[int] = []
    for role in roles.values():
        if role.base_shape is None or len(role.shape) < 2:
            continue
        ratios.update(a / b for a, b in zip(role.shape, role.base_shape) if a != b)
        if role.group == "hidden" and role.fan_in_axis is not None:
            fan_ins.append(role.shape[role.fan_in_axis])
    if fan_ins and min(fan_ins) == width:
        return
    if not ratios or any(math.isclose(r, s, rel_tol=_RATIO_RTOL) for r in ratios):
        return
    if s == 1.0 and all(r < 1.0 for r in ratios):
        return
    shown = ", ".join(f"{r:g}" for r in sorted(ratios))
    ratio = max(ratios, key=lambda r: abs(math.log(r)))
    raise TransferSearchError(
        f"`model`'s matrices are {shown} times base_model's on the axes that grow, and none has "
        f"hp's width, but hp is for width={width:g}, s = {s:g} times its base width "
        f"{base_width:g}: the model would train with the learning rates of another width. Either "
        "hp was concretized at the wrong width: concretize it at the model's width "
        f"(width={base_width * ratio:g} when base_model is at the base width {base_width:g}); "
        f"or base_model is not at hp's base width: build base_model at width {base_width:g} "
        f"(and the model's depth). Called from {caller}."
    )


def _check_blocks(
    model: nn.Module,
    roles: Mapping[str, ParameterRole],
    hp: Hyperparameters,
    blocks: Pattern | None,
    caller: str,
) -> None:
    """Refuse when hp gives in-block vectors other values than the final norm's (a depth rule
    at m_L != 1, or ``eps_width``) and the model's blocks cannot be told apart."""
    inner, outer = hp.group(BLOCK_VECTOR), hp.group("vector")
    told = any(role.in_block or role.group == BLOCK_VECTOR for role in roles.values())
    if dict(inner) == dict(outer) or told:
        return
    problem = find_blocks(model, blocks).problem
    shown = ", ".join(
        f"{k}={inner[k]:.4g} vs {outer[k]:.4g}" for k in inner if inner[k] != outer[k]
    )
    vectors = [r.name for r in roles.values() if r.group == "vector"][:4]
    raise TransferSearchError(
        f"hp gives the vectors inside the residual blocks (norm gains, biases) other values than "
        f"those outside (the final norm): block_vector {shown} (CompleteP, Dey et al. 2025, "
        f"Table 1), but {problem}, so {caller} cannot tell which vectors are in a block rather "
        f"than guess. Pass blocks='<prefix>.*' (a glob over the block parameters' names, e.g. "
        f"'transformer.h.*'), or overrides={{'<pattern>': 'block_vector'}}. Vectors: {vectors}."
    )


@overload
def param_groups(
    model: nn.Module,
    hp: Hyperparameters,
    base_model: nn.Module | None = ...,
    overrides: Mapping[Pattern, str] | None = ...,
    convention: Convention = ...,
    blocks: Pattern | None = ...,
    *,
    by_optimizer: Literal[False] = ...,
) -> list[dict[str, Any]]: ...


@overload
def param_groups(
    model: nn.Module,
    hp: Hyperparameters,
    base_model: nn.Module | None = ...,
    overrides: Mapping[Pattern, str] | None = ...,
    convention: Convention = ...,
    blocks: Pattern | None = ...,
    *,
    by_optimizer: Literal[True],
) -> dict[str, list[dict[str, Any]]]: ...


def param_groups(
    model: nn.Module,
    hp: Hyperparameters,
    base_model: nn.Module | None = None,
    overrides: Mapping[Pattern, str] | None = None,
    convention: Convention = "coupled",
    blocks: Pattern | None = None,
    *,
    by_optimizer: bool = False,
) -> list[dict[str, Any]] | dict[str, list[dict[str, Any]]]:
    """torch.optim param groups carrying ``hp``'s per-group learning rate, weight decay and ε.

    Parameters are classified by :func:`classify` (shapes against ``base_model``, else the
    documented heuristic, with ``overrides`` on top). Only parameters with ``requires_grad`` are
    included; tied parameters appear once.

    Args:
        model: the model to train, possibly wrapped by torch.compile, DDP or FSDP
            (``use_orig_params=True``; under FSDP call this on every rank: reading unsharded shapes
            is a collective).
        hp: concrete hyperparameters from ``TransferSpace.concretize``.
        base_model: the same architecture at hp's base width and the model's depth: a shape
            reference only. The ratio of the model's shapes to it must be hp's width ratio s
            (else hp is for another width: refused, naming both fixes). On the base rung, where
            ``model`` has its shapes, the matrices are grouped by type and order
            (:func:`classify`), which is exact there because every width multiplier is 1; ``hp``
            must then give input, hidden and output one lr and weight decay (it does at the base
            width); a wider reference (``make_model(2 * base_width)``) is accepted there too.
        overrides: name pattern → group (see :func:`classify`).
        convention: ``"coupled"`` (default) puts PyTorch's λ, ``hp.groups[g]["weight_decay"]``, in
            ``weight_decay`` — torch.optim.AdamW decays ``w ← (1 − ηλ)w − ηu``, so the decay is
            multiplied by the learning rate (and follows its schedule). ``"independent"`` puts
            λ' = ηλ, ``hp.groups[g]["independent_wd"]``, there, for optimizers that decay
            ``w ← (1 − λ')w − ηu`` (decay *not* multiplied by the learning rate). Then a
            ``LambdaLR`` schedules only ``lr``: λ' stays at its peak value all run, so the
            per-step decay no longer follows the schedule as it does under the coupled
            convention. Add :class:`WeightDecaySchedule` with ``convention="independent"``
            (it multiplies λ' by the same lr multiplier) to keep η_t·λ_t as AdamW would.
        blocks: which parameters lie in the residual blocks (see :func:`classify`). Used when hp
            has a "block_vector" group (a depth rule or ``eps_width``): the vectors in the blocks
            go there, the rest (the final norm) to "vector". When the two groups' values differ
            and no block can be found, the call is refused with this fix rather than guessed.
        by_optimizer: False (default) returns one list for one torch.optim.AdamW, and refuses an
            ``hp`` whose groups run another family (Muon, Lion: AdamW would run them silently).
            True returns ``{family: groups}`` ("adamw", "muon", "lion"), each group carrying
            every value its optimizer reads (AdamW: ``betas``; Muon: ``momentum``, ``nesterov``,
            ``ns_steps``, ``adjust_lr_fn``; Lion: ``betas``) and ``optimizer``: pass each list to
            its optimizer, or call :func:`make_optimizer` (docs/muon.md).

    Returns:
        One plain dict per non-empty group (``by_optimizer=True``: grouped by family), in the
        order input, hidden, output, vector, block_vector:
        ``{"params", "lr", "weight_decay", "eps", "name", "param_names"}``
        (``param_names`` is torch.optim's own optional key; it is saved in the optimizer's
        state_dict). A group's ``eps`` is ``hp.groups[g]["eps"]`` and wins over the optimizer's
        ``eps=`` argument (they are equal unless the rule moves ε per group). torch.optim adopts
        these dicts as its ``param_groups``, so an lr scheduler later changes their ``lr`` in
        place; the scheduled values start from ``hp``'s.

    Raises:
        TransferSearchError: see :func:`classify` (its messages name this function); ``model``
            not an ``nn.Module`` (e.g. None), a bad ``convention``, a model without trainable
            parameters, a ``model`` with base_model's shapes but an ``hp`` for another width, a
            model whose width ratio to base_model is not hp's, in-block vectors that need
            their own group in a model whose blocks cannot be found; an ``hp`` with a Muon or
            Lion group without ``by_optimizer=True``; a parameter that is not 2-D in the Muon
            group (naming the override that moves it to AdamW); Muon on a torch without
            ``torch.optim.Muon`` (naming the version needed).
    """
    check_module(model)
    if convention not in ("coupled", "independent"):
        raise TransferSearchError(
            f"`convention` must be 'coupled' (torch.optim.AdamW) or 'independent', but got "
            f"convention={convention!r}."
        )
    if not isinstance(hp, Hyperparameters):
        raise TransferSearchError(
            f"`hp` must be transfersearch.Hyperparameters (from TransferSpace.concretize), but got "
            f"{type(hp).__name__}."
        )
    roles = classify_for(model, base_model, overrides, caller="param_groups", blocks=blocks)
    check_base_width(roles, hp, "param_groups")
    check_width(roles, hp, "param_groups")
    split = BLOCK_VECTOR in hp.groups
    if split:
        _check_blocks(model, roles, hp, blocks, "param_groups")
    members: dict[str, list[tuple[str, torch.nn.Parameter]]] = {g: [] for g in ALL_GROUPS}
    for name, param in named_parameters(model):
        if param.requires_grad:
            members[group_of(roles[name], split)].append((name, param))
    key = "weight_decay" if convention == "coupled" else "independent_wd"
    groups = [
        {
            "params": [p for _, p in members[g]],
            "lr": float(hp.group(g)["lr"]),
            "weight_decay": float(hp.group(g)[key]),
            "eps": float(hp.group(g)["eps"]),
            "name": g,
            "param_names": [n for n, _ in members[g]],
        }
        for g in ALL_GROUPS
        if members[g]
    ]
    if not groups:
        raise TransferSearchError("`model` has no parameters with requires_grad=True to optimize.")
    if not by_optimizer:
        _refuse_families(hp, groups)
        return groups
    return _by_family(hp, groups)


def _refuse_families(hp: Hyperparameters, groups: list[dict[str, Any]]) -> None:
    """Refuse groups another family must run when the caller asked for one AdamW list."""
    others = {g["name"]: hp.optimizer(g["name"]) for g in groups}
    others = {name: family for name, family in others.items() if family != "adamw"}
    if others:
        raise TransferSearchError(
            f"hp runs {others} (TransferSpace(optimizers=...)), but param_groups(...) without "
            "by_optimizer=True returns one list for torch.optim.AdamW, which would run those "
            "groups as AdamW. Call make_optimizer(model, hp, ...) for the optimizers (one "
            "object with step() and zero_grad()), or param_groups(..., by_optimizer=True) for "
            "{family: groups} (docs/muon.md)."
        )


def _family_keys(hp: Hyperparameters, name: str, family: str) -> dict[str, Any]:
    """The values the family's torch optimizer reads from a group, beyond lr, decay and eps."""
    values = hp.group(name)
    if family == "muon":
        muon = hp.optimizers.get(name) or hp.optimizers["vector"]
        return {
            "momentum": float(values["momentum"]),
            "nesterov": bool(getattr(muon, "nesterov", True)),
            "ns_steps": int(getattr(muon, "ns_steps", 5)),
            "adjust_lr_fn": str(getattr(muon, "adjust_lr_fn", "original")),
        }
    if family == "lion":
        return {"betas": (float(values["beta1"]), float(values["beta2"]))}
    return {"betas": tuple(hp.betas)}


def _check_muon_matrices(group: dict[str, Any]) -> None:
    """Refuse a parameter of the Muon group that is not a 2-D matrix (torch.optim.Muon's rule)."""
    bad = [
        (n, tuple(p.shape)) for n, p in zip(group["param_names"], group["params"]) if p.dim() != 2
    ]
    if bad:
        name, shape = bad[0]
        raise TransferSearchError(
            f"the {group['name']!r} group runs Muon, which takes only 2-D matrices "
            f"(torch.optim.Muon orthogonalises each one), but {name!r} has shape {shape}"
            + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
            + f". Move it to an AdamW group with overrides={{{name!r}: 'input'}} (or the group "
            "whose rule fits it), or reshape it into a 2-D nn.Linear weight in the model."
        )


def _by_family(
    hp: Hyperparameters, groups: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """``groups`` sorted into ``{family: groups}`` with each family's keys (AdamW first)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        family = hp.optimizer(group["name"])
        group.update(_family_keys(hp, group["name"], family), optimizer=family)
        if family == "muon":
            _check_muon_matrices(group)
        out.setdefault(family, []).append(group)
    if "muon" in out:
        from ._torch_optimizers import muon_class

        muon_class()
    return dict(sorted(out.items(), key=lambda item: item[0] != "adamw"))


def group_of(role: ParameterRole, split: bool) -> str:
    """The group whose values a parameter takes: its role's, with a vector inside a block in
    "block_vector" when ``split`` (hp has that group)."""
    if split and role.group == "vector" and role.in_block:
        return BLOCK_VECTOR
    return role.group

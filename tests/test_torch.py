"""Tests of transfersearch.integrations.torch on a small MLP, a tiny transformer and a CNN."""

from __future__ import annotations

import dataclasses
import io
import math
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import transfersearch as ts  # noqa: E402
from transfersearch.integrations.torch import (  # noqa: E402
    ModelEMA,
    WeightDecaySchedule,
    classify,
    coord_check,
    diagnostics,
    param_groups,
    schedule,
)
from transfersearch.rules import exp_warmup_factor, su_proportional_lr_wd  # noqa: E402

BASE_WIDTH, WIDTH = 32, 128
N, B = 50_000, 128

# Hand-computed for base_lr=3e-3, tau_epoch=1 at s = 128/32 = 4 under MuP(wd_width_exponent=1):
# ηλ = B/(τN) = 128/50000 = 2.56e-3, λ_base = 2.56e-3/3e-3; hidden/output η = 3e-3/4, λ = 4·λ_base.
ETA_LAMBDA = 128 / 50_000
EXPECTED = {
    "input": (3e-3, ETA_LAMBDA / 3e-3),
    "hidden": (3e-3 / 4, 4 * ETA_LAMBDA / 3e-3),
    "output": (3e-3 / 4, 4 * ETA_LAMBDA / 3e-3),
    "vector": (3e-3, 0.0),
}


def make_space(rule: ts.rules.Rule | None = None) -> ts.TransferSpace:
    return ts.TransferSpace(
        base=ts.Scale(width=BASE_WIDTH, dataset_size=N, batch_size=B),
        coords={
            "base_lr": ts.Float(1e-4, 1e-1, log=True),
            "tau_epoch": ts.Float(0.05, 20.0, log=True),
        },
        rule=rule or ts.rules.MuP(wd_width_exponent=1.0),
        ema_momentum=0.999,
    )


def make_hp(width: int = WIDTH, rule: ts.rules.Rule | None = None) -> ts.Hyperparameters:
    return make_space(rule).concretize(
        {"base_lr": 3e-3, "tau_epoch": 1.0}, scale=ts.Scale(width=width)
    )


class MLP(nn.Module):
    def __init__(self, width: int, d_in: int = 12, d_out: int = 5) -> None:
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.hid = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(torch.relu(self.hid(torch.relu(self.inp(x))))))


class TinyTransformer(nn.Module):
    def __init__(self, width: int, vocab: int = 37, seq: int = 8, tie: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(1, seq, width))  # raw parameter: needs an override
        self.block = nn.TransformerEncoderLayer(
            width, nhead=2, dim_feedforward=2 * width, dropout=0.0, batch_first=True
        )
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        if tie:
            self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.block(self.embed(tokens) + self.pos)))


class CNN(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.up = nn.ConvTranspose2d(width, width, 2, stride=2)
        self.bn = nn.BatchNorm2d(width)
        self.fc = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.up(torch.relu(self.conv(torch.relu(self.stem(x))))))
        return self.fc(h.mean(dim=(2, 3)))


def meta(factory, *args, **kwargs):  # type: ignore[no-untyped-def]
    with torch.device("meta"):
        return factory(*args, **kwargs)


def by_group(groups: list[dict]) -> dict[str, list[str]]:  # type: ignore[type-arg]
    return {g["name"]: g["param_names"] for g in groups}


POS = {"pos": "input"}

# ----------------------------------------------------------------------------------------------
# param_groups
# ----------------------------------------------------------------------------------------------


#: Where each of MLP's parameters belongs (at every width, the base width included).
MLP_GROUPS = {
    "input": ["inp.weight"],
    "hidden": ["hid.weight"],
    "output": ["out.weight"],
    "vector": ["inp.bias", "hid.bias", "norm.weight", "norm.bias", "out.bias"],
}


def test_mlp_groups_have_hand_computed_lr_and_weight_decay() -> None:
    groups = param_groups(MLP(WIDTH), make_hp(), base_model=meta(MLP, BASE_WIDTH))
    assert by_group(groups) == MLP_GROUPS
    for group in groups:
        lr, wd = EXPECTED[group["name"]]
        assert group["lr"] == pytest.approx(lr, rel=1e-12)
        assert group["weight_decay"] == pytest.approx(wd, rel=1e-12)
    torch.optim.AdamW(groups)  # plain dicts that torch.optim accepts


@pytest.mark.parametrize("width", [64, 128])
def test_tau_epoch_recomputed_from_groups_equals_the_coordinate(width: int) -> None:
    groups = param_groups(MLP(width), make_hp(width), base_model=meta(MLP, BASE_WIDTH))
    for group in groups:
        if group["name"] != "vector":
            tau_epoch = B / (group["lr"] * group["weight_decay"] * N)  # Wang & Aitchison Eq. 10
            assert tau_epoch == pytest.approx(1.0, rel=1e-12)


def test_independent_convention_puts_lr_times_weight_decay() -> None:
    groups = param_groups(
        MLP(WIDTH), make_hp(), base_model=meta(MLP, BASE_WIDTH), convention="independent"
    )
    for group in groups:
        lr, wd = EXPECTED[group["name"]]
        assert group["weight_decay"] == pytest.approx(lr * wd, rel=1e-12)
    with pytest.raises(ts.TransferSearchError, match="convention"):
        param_groups(MLP(WIDTH), make_hp(), meta(MLP, BASE_WIDTH), convention="decoupled")  # type: ignore[arg-type]


@pytest.mark.parametrize("tie", [True, False])
def test_transformer_groups(tie: bool) -> None:
    model = TinyTransformer(WIDTH, tie=tie)
    groups = param_groups(model, make_hp(), meta(TinyTransformer, BASE_WIDTH, tie=tie), POS)
    names = by_group(groups)
    assert names["input"] == ["embed.weight", "pos"] or names["input"] == ["pos", "embed.weight"]
    assert names["hidden"] == [
        "block.self_attn.in_proj_weight",  # (3d, d): both dims grow
        "block.self_attn.out_proj.weight",
        "block.linear1.weight",
        "block.linear2.weight",
    ]
    # A tied readout shares the embedding's tensor: it appears once, as "input".
    assert names.get("output") == (None if tie else ["head.weight"])
    assert "block.self_attn.in_proj_bias" in names["vector"] and "norm.weight" in names["vector"]
    every = [p for g in groups for p in g["params"]]
    assert len(every) == len({id(p) for p in every}) == len(list(model.parameters()))


def test_raw_parameter_growing_on_another_axis_needs_an_override() -> None:
    with pytest.raises(ts.TransferSearchError, match=r"overrides=\{'pos': 'input'\}"):
        classify(TinyTransformer(WIDTH), meta(TinyTransformer, BASE_WIDTH))


class RawPositions(nn.Module):
    """A raw 2-D positional table (ctx, d) and a raw (d, d) matrix between two Linear layers."""

    def __init__(self, width: int, ctx: int = 8) -> None:
        super().__init__()
        self.inp = nn.Linear(12, width)
        self.pos = nn.Parameter(torch.zeros(ctx, width))
        self.mix = nn.Parameter(torch.zeros(width, width))
        self.out = nn.Linear(width, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out((self.inp(x) + self.pos) @ self.mix)


def test_raw_2d_parameter_growing_on_one_axis_needs_an_override_on_both_paths() -> None:
    # (ctx, d) vs (ctx, d_base): only axis 1 grows. Read as fan-in it was "output" (lr/s, λ·s);
    # it is a positional embedding (input). A raw tensor cannot say which, so ask.
    model, base = RawPositions(WIDTH), meta(RawPositions, BASE_WIDTH)
    for reference in (base, None):
        with pytest.raises(ts.TransferSearchError, match=r"overrides=\{'pos': 'input'\}"):
            classify(model, reference, {"mix": "hidden"})
    with_base = classify(model, base, POS)
    assert with_base["pos"].group == "input"
    assert with_base["mix"].group == "hidden"  # both axes grow: the shapes settle it
    assert classify(model, None, {**POS, "mix": "hidden"})["pos"].group == "input"


@pytest.mark.parametrize("bad", [None, "model", nn.Linear(2, 2).weight])
def test_a_model_that_is_not_a_module_is_refused(bad: object) -> None:
    with pytest.raises(ts.TransferSearchError, match=r"`model` must be a torch\.nn\.Module"):
        param_groups(bad, make_hp())  # type: ignore[arg-type]
    if bad is not None:  # base_model=None means "no base model"
        with pytest.raises(
            ts.TransferSearchError, match=r"`base_model` must be a torch\.nn\.Module"
        ):
            classify(MLP(WIDTH), bad)  # type: ignore[arg-type]


def test_heuristic_without_base_model_matches_shapes() -> None:
    for model, base, over in [
        (MLP(WIDTH), MLP(BASE_WIDTH), None),
        (TinyTransformer(WIDTH, tie=False), TinyTransformer(BASE_WIDTH, tie=False), POS),
        (TinyTransformer(WIDTH), TinyTransformer(BASE_WIDTH), POS),
    ]:
        with_base = {n: r.group for n, r in classify(model, base, over).items()}
        heuristic = {n: r.group for n, r in classify(model, None, over).items()}
        assert heuristic == with_base


def test_heuristic_refuses_a_single_matrix() -> None:
    with pytest.raises(ts.TransferSearchError, match="single matrix"):
        classify(nn.Sequential(nn.Linear(4, 4)))
    roles = classify(nn.Sequential(nn.Linear(4, 4)), overrides={"0.weight": "input"})
    assert roles["0.weight"].group == "input"


def test_cnn_groups_read_conv_axes() -> None:
    roles = classify(CNN(WIDTH), meta(CNN, BASE_WIDTH))
    assert {n: r.group for n, r in roles.items() if r.group != "vector"} == {
        "stem.weight": "input",
        "conv.weight": "hidden",
        "up.weight": "hidden",
        "fc.weight": "output",
    }
    assert roles["conv.weight"].fan_in == WIDTH * 9
    narrow = nn.Sequential(nn.ConvTranspose2d(WIDTH, 4, 2), nn.ConvTranspose2d(4, WIDTH, 2))
    narrow_base = nn.Sequential(nn.ConvTranspose2d(8, 4, 2), nn.ConvTranspose2d(4, 8, 2))
    roles = classify(narrow, narrow_base)  # ConvTranspose weight is (in, out, k, k)
    assert (roles["0.weight"].group, roles["1.weight"].group) == ("output", "input")


def test_overrides_glob_and_regex_win_and_typos_raise() -> None:
    model, base = MLP(WIDTH), meta(MLP, BASE_WIDTH)
    roles = classify(model, base, {"out.*": "hidden", re.compile(r"^inp\.w"): "vector"})
    assert roles["out.weight"].group == "hidden" and roles["out.bias"].group == "hidden"
    assert roles["inp.weight"].group == "vector"
    with pytest.raises(ts.TransferSearchError, match="match no parameter"):
        classify(model, base, {"outt.*": "output"})
    with pytest.raises(ts.TransferSearchError, match="must be one of"):
        classify(model, base, {"out.*": "readout"})


def test_base_model_errors_name_the_fix() -> None:
    # base_model built at the model's width while hp is for s = 4: the shapes cannot tell the
    # matrices apart and the groups' numbers differ, so the labels would pick them
    with pytest.raises(
        ts.TransferSearchError,
        match=r"hp is for width=128 \(s = 4\).*base_model at the base width 32",
    ):
        param_groups(MLP(WIDTH), make_hp(), base_model=meta(MLP, WIDTH))
    with pytest.raises(ts.TransferSearchError, match="same architecture"):
        classify(MLP(WIDTH), nn.Sequential(nn.Linear(12, 32)))


def test_base_width_rung_with_the_base_width_model_as_base_model() -> None:
    # The µP user's loop: base_model=make_model(base_width) on every rung, the base rung included.
    hp = make_hp(BASE_WIDTH)  # s = 1: every matrix group has lr 3e-3 and λ = ηλ/η
    groups = param_groups(MLP(BASE_WIDTH), hp, base_model=meta(MLP, BASE_WIDTH))
    assert by_group(groups) == MLP_GROUPS
    for group in groups:
        want_wd = 0.0 if group["name"] == "vector" else ETA_LAMBDA / 3e-3
        assert group["lr"] == pytest.approx(3e-3, rel=1e-12)
        assert group["weight_decay"] == pytest.approx(want_wd, rel=1e-12)
    roles = classify(MLP(BASE_WIDTH), meta(MLP, BASE_WIDTH))
    assert "base_model's width" in roles["hid.weight"].reason
    assert diagnostics(MLP(BASE_WIDTH), hp, base_model=meta(MLP, BASE_WIDTH)).matrices


@pytest.mark.parametrize(
    ("factory", "kwargs", "overrides"),
    [
        (MLP, {}, None),
        (TinyTransformer, {"tie": True}, POS),
        (TinyTransformer, {"tie": False}, POS),
        (CNN, {}, None),
    ],
)
def test_a_parameter_keeps_its_group_at_the_base_width(factory, kwargs, overrides) -> None:  # type: ignore[no-untyped-def]
    # at the base width (same shapes as base_model) the groups are those that a shape reference
    # at another width gives, so a parameter is in the same group on every rung
    model = factory(BASE_WIDTH, **kwargs)
    same = classify(model, meta(factory, BASE_WIDTH, **kwargs), overrides)
    other = classify(model, meta(factory, WIDTH, **kwargs), overrides)
    assert {n: r.group for n, r in same.items()} == {n: r.group for n, r in other.items()}


def test_raw_matrix_at_the_base_width_asks_for_an_override_or_another_width() -> None:
    model, base = RawPositions(BASE_WIDTH), meta(RawPositions, BASE_WIDTH)
    # at another width both axes of `mix` grow (hidden); at the base width nothing can be seen
    assert classify(model, meta(RawPositions, WIDTH), POS)["mix"].group == "hidden"
    with pytest.raises(
        ts.TransferSearchError,
        match=r"'mix'.*base width.*overrides=\{'mix': 'input'\}.*to param_groups; "
        r"base_model=make_model\(2 \* base_width\)",
    ):
        param_groups(model, make_hp(BASE_WIDTH), base, POS)
    groups = param_groups(model, make_hp(BASE_WIDTH), base, {**POS, "mix": "hidden"})
    assert by_group(groups)["hidden"] == ["mix"]


def test_errors_name_the_function_called() -> None:
    # diagnostics' own `overrides` argument is the fix, not param_groups'
    model, base = TinyTransformer(WIDTH), meta(TinyTransformer, BASE_WIDTH)
    for function, name in ((diagnostics, "diagnostics"), (param_groups, "param_groups")):
        with pytest.raises(
            ts.TransferSearchError, match=rf"overrides=\{{'pos': 'input'\}}.*to {name}\."
        ):
            function(model, make_hp(), base_model=base)
    with pytest.raises(ts.TransferSearchError, match=r"to classify\."):
        classify(model, base)


class GatedLinear(nn.Linear):
    """A Linear subclass with a raw gate matrix (out, in) and a per-channel scale vector."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__(d_in, d_out)
        self.gate = nn.Parameter(torch.zeros(d_out, d_in))
        self.scale = nn.Parameter(torch.ones(d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (super().forward(x) * torch.sigmoid(x @ self.gate.T)) * self.scale


class LoRALinear(nn.Linear):
    """loralib's layout: raw lora_A (r, in) and lora_B (out, r) on a Linear subclass."""

    def __init__(self, d_in: int, d_out: int, rank: int = 4) -> None:
        super().__init__(d_in, d_out)
        self.lora_A = nn.Parameter(torch.zeros(rank, d_in))
        self.lora_B = nn.Parameter(torch.zeros(d_out, rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + x @ self.lora_A.T @ self.lora_B.T


class Adapted(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.inp = nn.Linear(12, width)
        self.gated = GatedLinear(width, width)
        self.lora = LoRALinear(width, width)
        self.out = nn.Linear(width, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.lora(self.gated(self.inp(x))))


def test_extra_matrices_of_linear_subclasses_are_read_by_shape_not_as_biases() -> None:
    model, base = Adapted(WIDTH), meta(Adapted, BASE_WIDTH)
    # lora_A (4, d) grows only on axis 1: as ambiguous as any raw matrix growing on one axis
    with pytest.raises(ts.TransferSearchError, match=r"'lora\.lora_A'.*grows only on axis 1"):
        param_groups(model, make_hp(), base)
    lora = {"lora.lora_A": "output", "lora.lora_B": "input"}
    groups = param_groups(model, make_hp(), base, lora)
    assert by_group(groups) == {
        "input": ["inp.weight", "lora.lora_B"],
        "hidden": ["gated.weight", "gated.gate", "lora.weight"],  # gate (d, d): both axes grow
        "output": ["lora.lora_A", "out.weight"],
        "vector": ["inp.bias", "gated.bias", "gated.scale", "lora.bias", "out.bias"],
    }
    values = {g["name"]: (g["lr"], g["weight_decay"]) for g in groups}
    # was: gate in "vector" (lr 3e-3, weight decay 0); now the hidden group's η/s and s·λ_base
    assert values["hidden"] == pytest.approx((3e-3 / 4, 4 * ETA_LAMBDA / 3e-3), rel=1e-12)
    assert values["vector"] == pytest.approx((3e-3, 0.0))
    # without base_model the raw matrices need overrides, as raw parameters do
    with pytest.raises(ts.TransferSearchError, match=r"'gated\.gate'.*no base_model"):
        classify(model, None, lora)
    heuristic = classify(model, None, {**lora, "gated.gate": "hidden"})
    assert heuristic["gated.gate"].group == "hidden" and heuristic["gated.scale"].group == "vector"


def test_uninitialised_lazy_modules_ask_for_a_forward_pass() -> None:
    model = nn.Sequential(nn.LazyLinear(16), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 3))
    for call in (
        lambda: param_groups(model, make_hp(), base_model=meta(MLP, BASE_WIDTH)),
        lambda: classify(model),
        lambda: diagnostics(model, make_hp()),
        lambda: ModelEMA(model, 0.9),
    ):
        with pytest.raises(ts.TransferSearchError, match=r"lazy .*'0\.weight'.*forward pass"):
            call()
    base = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.Linear(8, 8), nn.Linear(8, 3))
    model(torch.randn(2, 12))  # shapes known now
    with pytest.raises(ts.TransferSearchError, match=r"`base_model` has uninitialised lazy"):
        classify(model, base)
    base(torch.randn(2, 12))
    # the model is 2x base_model's width (16 vs 8): hp at s = 2
    hp = make_hp(width=2 * BASE_WIDTH)
    assert by_group(param_groups(model, hp, base_model=base))["hidden"] == ["2.weight"]
    ModelEMA(model, 0.9)


def test_wrapped_models_have_clean_names() -> None:
    model = MLP(WIDTH)
    expected = by_group(param_groups(model, make_hp(), meta(MLP, BASE_WIDTH)))
    wrapped = nn.DataParallel(model)  # same "module." prefix as DDP; runs on CPU
    assert by_group(param_groups(wrapped, make_hp(), meta(MLP, BASE_WIDTH))) == expected
    compiled = torch.compile(model, backend="eager")
    assert next(n for n, _ in compiled.named_parameters()).startswith("_orig_mod.")
    assert by_group(param_groups(compiled, make_hp(), meta(MLP, BASE_WIDTH))) == expected
    model.hid = torch.compile(model.hid, backend="eager")  # compiled submodule: inner _orig_mod
    assert by_group(param_groups(model, make_hp(), meta(MLP, BASE_WIDTH))) == expected


def test_compiled_model_trains_with_groups() -> None:
    torch.manual_seed(0)
    model = MLP(WIDTH)
    try:  # aot_eager traces forward and backward without needing a C compiler
        compiled = torch.compile(model, backend="aot_eager")
        compiled(torch.randn(2, 12))
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"torch.compile is unavailable here: {exc!r}")
    opt = torch.optim.AdamW(param_groups(compiled, make_hp(), meta(MLP, BASE_WIDTH)))
    before = model.hid.weight.detach().clone()
    for _ in range(2):
        opt.zero_grad()
        compiled(torch.randn(16, 12)).pow(2).mean().backward()
        opt.step()
    assert not torch.equal(before, model.hid.weight)
    ema = ModelEMA(compiled, 0.9)  # names without _orig_mod: copies into the plain model
    ema.copy_to(MLP(WIDTH))


# ----------------------------------------------------------------------------------------------
# schedules
# ----------------------------------------------------------------------------------------------


def test_exp_warmup_replaces_mup_on_hidden_and_output_only() -> None:
    # Kosson et al. §7: the warmup starts the base-width lr at 1/s instead of µP's η/s. Under
    # rules.Standard every group keeps η_base = 3e-3, so the first hidden lr is 3e-3/4, not /16.
    hp = make_hp(rule=ts.rules.Standard())
    opt = torch.optim.AdamW(param_groups(MLP(WIDTH), hp, meta(MLP, BASE_WIDTH)))
    mults = schedule(hp, 100, "constant", warmup="exp", warmup_steps=10, groups=opt)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, mults)
    assert opt.param_groups[1]["name"] == "hidden"
    assert opt.param_groups[1]["lr"] == pytest.approx(3e-3 / 4)
    for step in range(12):
        factor = float(exp_warmup_factor(step, 4.0, 10))
        for group in opt.param_groups:
            want = 3e-3 * factor if group["name"] in ("hidden", "output") else 3e-3
            assert group["lr"] == pytest.approx(want, rel=1e-12)
        opt.step()
        sched.step()
    assert opt.param_groups[1]["lr"] == pytest.approx(3e-3)


@pytest.mark.parametrize("warmup", [("linear", "exp"), "decay_away"])
def test_width_warmups_refuse_groups_mup_already_scaled(warmup: object) -> None:
    hp = make_hp()  # MuP: hidden lr = η_base/4; the exp factor would start it at η_base/16
    opt = torch.optim.AdamW(param_groups(MLP(WIDTH), hp, meta(MLP, BASE_WIDTH)))
    with pytest.raises(
        ts.TransferSearchError, match=r"'hidden'.*0\.0625·lr_base.*rules\.Standard\(\)"
    ):
        schedule(hp, 100, warmup=warmup, warmup_steps=10, groups=opt)  # type: ignore[arg-type]
    # at the base width µP scales nothing and the factors are 1: allowed
    base_hp = make_hp(BASE_WIDTH)
    base_opt = torch.optim.AdamW(param_groups(MLP(BASE_WIDTH), base_hp, meta(MLP, WIDTH)))
    assert schedule(base_hp, 100, warmup="exp", warmup_steps=10, groups=base_opt)[1](0) == 1.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"warmup": "linear", "warmup_steps": 100}, "warmup_steps=100"),
        ({"warmup": "linear", "warmup_steps": 10}, "warmup_steps=10"),
        ({"warmup": "exp", "exp_warmup_steps": 12, "groups": "opt"}, "exp_warmup_steps=12"),
    ],
)
def test_warmup_as_long_as_the_run_is_an_error(kwargs: dict, name: str) -> None:  # type: ignore[type-arg]
    hp = make_hp(rule=ts.rules.Standard())
    if kwargs.get("groups") == "opt":
        kwargs["groups"] = torch.optim.AdamW(param_groups(MLP(WIDTH), hp, meta(MLP, BASE_WIDTH)))
    # was: schedule(hp, 10, "cosine", warmup="linear", warmup_steps=100) gave lr 0 at every step
    with pytest.raises(
        ts.TransferSearchError, match=rf"shorter than the run, but got {name} >= total_steps=10"
    ):
        schedule(hp, 10, "cosine", **kwargs)


def test_schedule_shapes() -> None:
    hp = make_hp()
    cosine = schedule(hp, 110, "cosine", warmup="linear", warmup_steps=10, final_fraction=0.1)
    assert cosine(0) == pytest.approx(0.1)  # (t + 1)/T_w
    assert cosine(10) == pytest.approx(1.0)
    assert cosine(60) == pytest.approx(0.1 + 0.9 * 0.5)
    assert cosine(110) == pytest.approx(0.1)
    wsd = schedule(hp, 100, "wsd", decay_fraction=0.2)
    assert [wsd(t) for t in (0, 80, 90, 100)] == pytest.approx([1.0, 1.0, 0.5, 0.0])
    linear = schedule(hp, 100, "linear")
    assert linear(25) == pytest.approx(0.75)


def test_schedule_errors() -> None:
    hp = make_hp()
    without_base = dataclasses.replace(hp, base=None)
    with pytest.raises(ts.TransferSearchError, match="width_mult"):
        schedule(without_base, 100, warmup="exp", warmup_steps=10)
    with pytest.raises(ts.TransferSearchError, match="groups="):
        schedule(hp, 100, warmup="exp", warmup_steps=10, width_mult=4)
    with pytest.raises(ts.TransferSearchError, match="kind"):
        schedule(hp, 100, "step")
    with pytest.raises(ts.TransferSearchError, match="warmup_steps"):
        schedule(hp, 100, warmup="linear")
    with pytest.raises(ts.TransferSearchError, match="weight_decay=0"):
        schedule(
            hp,
            100,
            warmup="decay_away",
            width_mult=4,
            groups=[{"name": "vector"}],
            warmup_groups=("vector",),
        )


def test_su_proportional_schedules_lr_and_weight_decay() -> None:
    hp = make_hp()
    opt = torch.optim.AdamW(param_groups(MLP(WIDTH), hp, meta(MLP, BASE_WIDTH)))
    mults = schedule(hp, 50, "su_proportional", groups=opt)
    lr_sched = torch.optim.lr_scheduler.LambdaLR(opt, mults)
    wd_sched = WeightDecaySchedule(opt, mults)
    for _ in range(7):
        opt.step()
        lr_sched.step()
        wd_sched.step()
    for group in opt.param_groups:
        lr, wd = EXPECTED[group["name"]]
        if wd == 0.0:
            assert (group["lr"], group["weight_decay"]) == (pytest.approx(lr), 0.0)
            continue
        lr_s, wd_s = su_proportional_lr_wd(7, lr, wd)  # Su: both ÷ √(2λη s + 1)
        assert group["lr"] == pytest.approx(float(lr_s), rel=1e-12)
        assert group["weight_decay"] == pytest.approx(float(wd_s), rel=1e-12)


def test_independent_weight_decay_schedule_follows_the_lr() -> None:
    hp = make_hp()
    opt = torch.optim.AdamW(
        param_groups(MLP(WIDTH), hp, meta(MLP, BASE_WIDTH), convention="independent")
    )
    mults = schedule(hp, 20, "linear", groups=opt)
    wd_sched = WeightDecaySchedule(opt, mults, convention="independent")
    for _ in range(5):
        wd_sched.step()
    hidden = opt.param_groups[1]
    assert hidden["weight_decay"] == pytest.approx(ETA_LAMBDA * 0.75, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# EMA and checkpoints
# ----------------------------------------------------------------------------------------------


def test_ema_update_is_the_exact_average() -> None:
    model = MLP(8)
    ema = ModelEMA(model, momentum=make_hp().ema_momentum)
    assert ema.momentum == pytest.approx(0.999)
    start = model.hid.weight.detach().clone()
    with torch.no_grad():
        model.hid.weight.add_(1.0)
    ema.update(model)
    assert torch.allclose(ema.shadow["hid.weight"], start + 0.001, atol=1e-6)
    target = MLP(8)
    ema.copy_to(target)
    assert torch.equal(target.hid.weight, ema.shadow["hid.weight"])
    with pytest.raises(ts.TransferSearchError, match="ema_momentum"):
        ModelEMA(model, None)
    with pytest.raises(ts.TransferSearchError, match=r"\[0, 1\)"):
        ModelEMA(model, 1.5)


def _training_state(seed: int):  # type: ignore[no-untyped-def]
    torch.manual_seed(seed)
    hp = make_hp(rule=ts.rules.Standard())  # Kosson's exp warmup replaces µP's 1/s
    model = TinyTransformer(WIDTH)
    opt = torch.optim.AdamW(
        param_groups(model, hp, meta(TinyTransformer, BASE_WIDTH), POS), betas=hp.betas, eps=hp.eps
    )
    mults = schedule(
        hp, 40, "su_proportional", warmup="exp", warmup_steps=5, width_mult=4, groups=opt
    )
    return (
        model,
        opt,
        torch.optim.lr_scheduler.LambdaLR(opt, mults),
        WeightDecaySchedule(opt, mults),
        ModelEMA(model, hp.ema_momentum),
    )


def _train(parts, steps: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    model, opt, lr_sched, wd_sched, ema = parts
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        tokens = torch.randint(0, 37, (4, 8), generator=gen)
        opt.zero_grad()
        logits = model(tokens)
        nn.functional.cross_entropy(logits.reshape(-1, 37), tokens.reshape(-1)).backward()
        opt.step()
        lr_sched.step()
        wd_sched.step()
        ema.update(model)


def test_checkpoint_round_trip_resumes_exactly() -> None:
    first = _training_state(0)
    _train(first, 3, seed=1)
    buffer = io.BytesIO()
    model, opt, lr_sched, wd_sched, ema = first
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "lr": lr_sched.state_dict(),
            "wd": wd_sched.state_dict(),
            "ema": ema.state_dict(),
        },
        buffer,
    )
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    second = _training_state(123)  # different init: everything must come from the checkpoint
    model2, opt2, lr2, wd2, ema2 = second
    model2.load_state_dict(saved["model"])
    opt2.load_state_dict(saved["opt"])
    lr2.load_state_dict(saved["lr"])
    wd2.load_state_dict(saved["wd"])
    ema2.load_state_dict(saved["ema"])
    assert [g["weight_decay"] for g in opt2.param_groups] == [
        g["weight_decay"] for g in opt.param_groups
    ]
    _train(first, 2, seed=2)
    _train(second, 2, seed=2)
    for (name, p1), p2 in zip(model.named_parameters(), model2.parameters()):
        assert torch.equal(p1, p2), name
    for name in ema.shadow:
        assert torch.equal(ema.shadow[name], ema2.shadow[name]), name
    assert ema2.num_updates == 5
    with pytest.raises(ts.TransferSearchError, match="same architecture"):
        ModelEMA(MLP(8), 0.9).load_state_dict(ema.state_dict())


# ----------------------------------------------------------------------------------------------
# diagnostics
# ----------------------------------------------------------------------------------------------


def test_diagnostics_expectations() -> None:
    hp = make_hp()
    model = MLP(WIDTH)
    report = diagnostics(model, hp, base_model=meta(MLP, BASE_WIDTH))
    rows = {m.name: m for m in report}
    assert set(rows) == {"inp.weight", "hid.weight", "out.weight"}
    hidden = rows["hid.weight"]
    lr, wd = EXPECTED["hidden"]
    assert hidden.expected_top_singular_value == pytest.approx(math.sqrt(lr / wd) * WIDTH**0.75)
    assert hidden.expected_weight_rms == pytest.approx(math.sqrt(lr / (2 * wd)))
    assert hidden.expected_relative_update == pytest.approx(math.sqrt(2 * ETA_LAMBDA))
    assert hidden.tau_iter == pytest.approx(1 / ETA_LAMBDA)
    sigma = torch.linalg.matrix_norm(model.hid.weight.detach(), ord=2).item()
    assert hidden.top_singular_value == pytest.approx(sigma, rel=1e-5)
    assert hidden.weight_rms == pytest.approx(model.hid.weight.detach().pow(2).mean().sqrt().item())
    assert "hid.weight" in str(report)


def test_coord_check_reports_rms_per_layer_and_width() -> None:
    torch.manual_seed(0)
    inputs, targets = torch.randn(32, 12), torch.randn(32, 5)
    space = make_space()

    def make_optimizer(model: nn.Module, width: int) -> torch.optim.Optimizer:
        hp = space.concretize({"base_lr": 3e-3, "tau_epoch": 1.0}, ts.Scale(width=width))
        # base_model is a shape reference at any *other* width; hp carries the scaling.
        return torch.optim.AdamW(param_groups(model, hp, meta(MLP, 16)))

    check = coord_check(
        MLP, [32, 64, 128], (inputs, targets), steps=2, make_optimizer=make_optimizer
    )
    assert set(check.rms) >= {"inp", "hid", "norm", "out", "<output>"}
    assert all(len(check.rms["hid"][w]) == 3 for w in (32, 64, 128))
    slopes = check.slopes()
    assert abs(slopes["norm"]) < 0.05  # LayerNorm output has RMS ≈ 1 at every width
    with pytest.raises(ts.TransferSearchError, match="make_optimizer"):
        coord_check(MLP, [32, 64], (inputs, targets), steps=1)


def test_missing_torch_says_how_to_install() -> None:
    # torch made unimportable as on a machine without it (sys.modules['torch'] = None instead
    # breaks scipy.stats, which looks torch up in sys.modules)
    code = (
        "import importlib.abc, sys\n"
        "class NoTorch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "try:\n    import transfersearch.integrations.torch\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'transfersearch[torch]'" in out.stdout


def test_diagnostics_asks_for_the_run_length_or_takes_it() -> None:
    """Issue 49, item 9: with `hp.total_steps` None (a scale without steps or epochs), τ_iter
    longer than the run could not be flagged, silently. The verdict asks for the length, and
    `total_steps=` gives it."""
    hp = make_hp()
    assert hp.total_steps is None
    model, reference = MLP(WIDTH), meta(MLP, BASE_WIDTH)
    unknown = diagnostics(model, hp, base_model=reference)
    assert not any(m.tau_exceeds_run for m in unknown)
    assert "pass diagnostics(..., total_steps=T)" in unknown.verdict()
    short = diagnostics(model, hp, base_model=reference, total_steps=100)
    assert short.total_steps == 100 and all(m.tau_exceeds_run for m in short)  # τ_iter ≈ 390
    assert "tau_iter exceeds the run" in short.verdict()
    with pytest.raises(ts.TransferSearchError, match="total_steps"):
        diagnostics(model, hp, base_model=reference, total_steps=0)

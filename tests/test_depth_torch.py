"""param_groups under the depth rule: in-block vectors apart from the final norm, per-group ε,
refusals (blocks not found, hp for another width: issue 27 item 1), through the documented path."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import transfersearch as ts  # noqa: E402
from transfersearch import rules  # noqa: E402
from transfersearch.experimental import ExperimentalWarning  # noqa: E402
from transfersearch.integrations.torch import param_groups  # noqa: E402

BASE = ts.Scale(width=32, depth=2, dataset_size=1e5, batch_size=64)
VOCAB = 11


class Block(nn.Module):
    def __init__(self, width: int, residual: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, 2, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width)
        )
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.residual * self.attn(h, h, h, need_weights=False)[0]
        return x + self.residual * self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    """Pre-LN transformer: embedding, blocks in one ModuleList ``h``, final LN, readout."""

    def __init__(self, width: int, depth: int, residual: float = 1.0) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, width)
        self.h = nn.ModuleList(Block(width, residual) for _ in range(depth))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.wte(tokens)
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


class TwoStacks(TinyGPT):
    """Blocks in two lists (an encoder and a decoder): which ones are "the blocks" is ambiguous."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__(width, depth)
        self.dec = nn.ModuleList(Block(width, 1.0) for _ in range(depth))


def hp_at(scale: ts.Scale, rule: rules.Rule) -> ts.Hyperparameters:
    space = ts.TransferSpace(
        BASE, {"base_lr": ts.Float(1e-4, 1e-1, log=True), "tau_epoch": 1.0}, rule=rule
    )
    return space.concretize({"base_lr": 1e-2}, scale)


def meta(factory, *args):  # type: ignore[no-untyped-def]
    with torch.device("meta"):
        return factory(*args)


def by_name(groups: list[dict]) -> dict[str, dict]:  # type: ignore[type-arg]
    return {g["name"]: g for g in groups}


def test_block_norms_get_the_depth_rule_and_the_final_norm_does_not() -> None:
    """α = ½, m_L = 8 / 2 = 4, s = 2: block LN lr 1e-2 · 4^−½ = 5e-3, hidden 1e-2/2/2, final LN
    1e-2; ε 1e-8 · 4^−½ in the blocks, 1e-8 outside (eps_width off)."""
    rule = rules.MuP(depth="depth_mup")
    hp = hp_at(ts.Scale(width=64, depth=8), rule)
    model = TinyGPT(64, 8, residual=hp.residual_multiplier)
    assert hp.residual_multiplier == pytest.approx(0.5)
    groups = by_name(param_groups(model, hp, base_model=meta(TinyGPT, 32, 8)))
    assert set(groups) == {"input", "hidden", "output", "vector", "block_vector"}
    assert groups["vector"]["param_names"] == ["ln_f.weight", "ln_f.bias"]
    assert "h.7.ln_2.weight" in groups["block_vector"]["param_names"]
    assert "h.0.attn.in_proj_bias" in groups["block_vector"]["param_names"]
    assert groups["block_vector"]["lr"] == pytest.approx(5e-3)
    assert groups["hidden"]["lr"] == pytest.approx(2.5e-3)
    assert groups["vector"]["lr"] == pytest.approx(1e-2)
    assert groups["block_vector"]["eps"] == pytest.approx(5e-9)
    assert groups["hidden"]["eps"] == pytest.approx(5e-9)
    assert groups["vector"]["eps"] == groups["input"]["eps"] == groups["output"]["eps"] == 1e-8
    assert groups["block_vector"]["weight_decay"] == 0.0
    # torch.optim takes the per-group eps and steps
    opt = torch.optim.AdamW(list(groups.values()), betas=hp.betas, eps=hp.eps)
    model(torch.randint(0, VOCAB, (2, 5))).sum().backward()
    opt.step()
    assert opt.param_groups[4]["eps"] == pytest.approx(5e-9)


def test_at_the_base_depth_the_groups_carry_the_width_rules_numbers() -> None:
    with_depth = hp_at(ts.Scale(width=64, depth=2), rules.MuP(depth="completep"))
    plain = hp_at(ts.Scale(width=64, depth=2), rules.MuP())
    model, ref = TinyGPT(64, 2), meta(TinyGPT, 32, 2)
    deep = by_name(param_groups(model, with_depth, base_model=ref))
    flat = by_name(param_groups(model, plain, base_model=ref))
    assert set(flat) == {"input", "hidden", "output", "vector"}  # no depth rule: as before
    for name, group in flat.items():
        assert (deep[name]["lr"], deep[name]["weight_decay"], deep[name]["eps"]) == (
            group["lr"],
            group["weight_decay"],
            group["eps"],
        )
    assert deep["block_vector"]["lr"] == flat["vector"]["lr"]
    assert sorted(deep["vector"]["param_names"] + deep["block_vector"]["param_names"]) == sorted(
        flat["vector"]["param_names"]
    )


def test_blocks_that_cannot_be_told_apart_are_refused_with_the_fix() -> None:
    hp = hp_at(ts.Scale(width=64, depth=8), rules.MuP(depth="completep"))
    model, ref = TwoStacks(64, 8), meta(TwoStacks, 32, 8)
    with pytest.raises(ts.TransferSearchError) as info:
        param_groups(model, hp, base_model=ref)
    message = str(info.value)
    assert "several lists of same-class modules, ['h', 'dec']" in message
    assert "blocks='<prefix>.*'" in message and "block_vector eps=2.5e-09 vs 1e-08" in message
    # the fixes: a name pattern, or an override naming the group
    groups = by_name(param_groups(model, hp, base_model=ref, blocks="h.*"))
    assert "h.3.ln_1.weight" in groups["block_vector"]["param_names"]
    assert "dec.3.ln_1.weight" in groups["vector"]["param_names"]
    both = by_name(param_groups(model, hp, base_model=ref, blocks="*.[0-9]*.*"))
    assert "dec.3.ln_1.weight" in both["block_vector"]["param_names"]
    overridden = by_name(
        param_groups(model, hp, base_model=ref, overrides={"dec.*.ln_*": "block_vector"})
    )
    assert "dec.0.ln_1.bias" in overridden["block_vector"]["param_names"]
    with pytest.raises(ts.TransferSearchError, match="blocks='blocks.*' matches no parameter"):
        param_groups(model, hp, base_model=ref, blocks="blocks.*")
    # at the base depth the two groups agree: nothing to tell apart, no refusal
    param_groups(TwoStacks(32, 2), hp_at(BASE, rules.MuP(depth="completep")))


def test_hp_for_another_width_is_refused_naming_the_width_and_the_fix() -> None:
    """Issue 27 item 1: a 64-wide model with hp concretized at width 128 (base 32)."""
    hp = hp_at(ts.Scale(width=128), rules.MuP())
    with pytest.raises(ts.TransferSearchError) as info:
        param_groups(TinyGPT(64, 2), hp, base_model=meta(TinyGPT, 32, 2))
    message = str(info.value)
    assert "hp is for width=128, s = 4" in message
    assert "2 times base_model's" in message
    assert "concretize it at the model's width (width=64" in message
    # the right width is accepted, with base_model at the base width or at any other width
    right = hp_at(ts.Scale(width=64), rules.MuP())
    param_groups(TinyGPT(64, 2), right, base_model=meta(TinyGPT, 32, 2))
    param_groups(TinyGPT(64, 2), right, base_model=meta(TinyGPT, 16, 2))
    # the base rung with a wider reference (the documented fix there) stays accepted
    param_groups(TinyGPT(32, 2), hp_at(BASE, rules.MuP()), base_model=meta(TinyGPT, 64, 2))


def test_a_deeper_model_needs_a_reference_at_its_depth() -> None:
    hp = hp_at(ts.Scale(width=64, depth=8), rules.MuP(depth="completep"))
    with pytest.raises(ts.TransferSearchError, match="build base_model at the model's depth"):
        param_groups(TinyGPT(64, 8), hp, base_model=meta(TinyGPT, 32, 2))


def test_depth_check_shows_completep_stays_flat_where_standard_grows() -> None:
    """The residual stream and its update after 3 AdamW steps, depths 2 → 8 (base 2): flat in
    depth under CompleteP (residual 1/m_L; measured slopes −0.04 and −0.10 to depth 16), growing
    under the standard parametrisation (residual 1: +0.52 and +0.68)."""
    from transfersearch.integrations.torch import depth_check

    generator = torch.Generator().manual_seed(0)
    data = (
        torch.randint(0, VOCAB, (8, 12), generator=generator),
        torch.randint(0, VOCAB, (8, 12), generator=generator),
    )
    slopes = {}
    for name, rule, residual in (
        ("completep", rules.MuP(depth="completep"), True),
        ("standard", rules.MuP(), False),
    ):

        def make_model(depth: int, rule: rules.Rule = rule, residual: bool = residual) -> nn.Module:
            hp = hp_at(ts.Scale(width=32, depth=depth), rule)
            return TinyGPT(32, depth, residual=hp.residual_multiplier if residual else 1.0)

        def make_optimizer(
            model: nn.Module, depth: int, rule: rules.Rule = rule
        ) -> torch.optim.Optimizer:
            hp = hp_at(ts.Scale(width=32, depth=depth), rule)
            groups = param_groups(model, hp, base_model=meta(TinyGPT, 64, depth))
            return torch.optim.AdamW(groups, betas=hp.betas, eps=hp.eps)

        with warnings.catch_warnings():  # experimental: warned once per process
            warnings.simplefilter("ignore", ExperimentalWarning)
            check = depth_check(make_model, [2, 4, 8], data, steps=3, make_optimizer=make_optimizer)
        slopes[name] = check.slopes()
        assert "stream_delta" in str(check) and "slope" in str(check)
    assert abs(slopes["completep"]["stream_rms"]) < 0.15
    assert abs(slopes["completep"]["stream_delta"]) < 0.2
    assert slopes["standard"]["stream_rms"] > 0.35
    assert slopes["standard"]["stream_delta"] > 0.45


def test_diagnostics_explain_columns_give_a_verdict_and_flag_a_long_tau_iter() -> None:
    """Issue 27 item 12: τ_iter = 1/(ηλ) against the run's steps; a legend; a verdict."""
    from transfersearch.integrations.torch import diagnostics

    space = ts.TransferSpace(
        BASE.replace(steps=1000),
        {"base_lr": ts.Float(1e-4, 1e-1, log=True), "tau_iter": ts.Float(10, 1e5, log=True)},
    )
    short = space.concretize({"base_lr": 1e-2, "tau_iter": 100.0}, ts.Scale(width=64, depth=2))
    long = space.concretize({"base_lr": 1e-2, "tau_iter": 1e4}, ts.Scale(width=64, depth=2))
    model, ref = TinyGPT(64, 2), meta(TinyGPT, 32, 2)
    flagged = diagnostics(model, long, base_model=ref)
    hidden = next(m for m in flagged if m.group == "hidden")
    assert hidden.tau_iter == pytest.approx(1e4) and hidden.tau_exceeds_run is True
    assert "tau_iter exceeds the run" in flagged.verdict()
    assert "run's 1000" in flagged.verdict()
    text = str(flagged)
    assert "columns: sigma_max = top singular value" in text and "rms_eq = sqrt(lr/(2 wd))" in text
    fresh = diagnostics(model, short, base_model=ref)
    assert not any(m.tau_exceeds_run for m in fresh)
    # freshly initialised weights are far from sqrt(η/(2λ)): said, with the reason
    assert "off equilibrium" in fresh.verdict() and "before training" in fresh.verdict()

"""The pypto DeepSeek-V3 MoE layer against transformers' DeepseekV3MoE (random weights, no
download): DeepSeek-V3's hidden and expert sizes with 16 routed experts in 4 groups (2 kept)."""

import pytest
import torch

from models.common import rel_err
from models.deepseek_v3 import hf, moe

transformers = pytest.importorskip("transformers")
from transformers import DeepseekV3Config  # noqa: E402
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE  # noqa: E402


def _module(hidden=7168, ffn=2048, experts=16, groups=4, kept=2, top_k=6, seed=0):
    torch.manual_seed(seed)
    cfg = DeepseekV3Config(hidden_size=hidden, moe_intermediate_size=ffn, n_routed_experts=experts, n_group=groups,
                           topk_group=kept, num_experts_per_tok=top_k, n_shared_experts=1)
    m = DeepseekV3MoE(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.02)
        m.gate.e_score_correction_bias.normal_(0.0, 0.05)
    return m



@pytest.fixture(scope="module")
def real_sizes():
    return _module()


@pytest.mark.parametrize("tokens", [19, 1])
def test_the_layer_matches_transformers_at_real_sizes(real_sizes, tokens):
    m = real_sizes
    x = torch.randn(1, tokens, 7168)
    with torch.no_grad():
        want = m(x)
        assert hf.patch(m) == 1
        try:
            got = m(x)
        finally:
            hf.unpatch(m)
    assert rel_err(got, want) < 1e-4


def test_group_limited_routing_at_small_sizes():
    # 16 experts in 4 groups, 2 groups kept, top-6: the groups decide which experts may be chosen.
    m = _module(hidden=256, ffn=64, seed=3)
    layer = moe.DeepseekMoe.from_hf(m)
    x = torch.randn(57, 256)
    with torch.no_grad():
        want = m(x[None])[0]
        _, w_ref, ids_ref = m.gate(x)
    counts, starts, tokens, weights, slots, shared = layer._many.route(
        x, *[layer.w[k] for k in ("gate", "bias", "shared_gate", "shared_up", "shared_down")])
    assert torch.equal(counts, torch.bincount(ids_ref.flatten(), minlength=16).int())
    def expert_of(slot):
        return next(e for e in range(16) if starts[e] <= slot < starts[e] + counts[e])

    for t in range(57):
        mine = slots[t].tolist()
        assert all(int(tokens[i]) == t for i in mine)
        assert {expert_of(i) for i in mine} == set(ids_ref[t].tolist())
        assert sorted(float(weights[i, 0]) for i in mine) == pytest.approx(sorted(w_ref[t].tolist()), rel=1e-5)
    torch.testing.assert_close(shared, m.shared_experts(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer(x), want, rtol=1e-4, atol=1e-5)


def test_bf16_is_within_bf16_tolerance():
    m32 = _module(hidden=512, ffn=128, seed=5)
    x = torch.randn(1, 21, 512)
    with torch.no_grad():
        want = m32(x)
        m16 = _module(hidden=512, ffn=128, seed=5).to(torch.bfloat16)
        m16.gate.float()   # transformers keeps the router in fp32 (its forward casts to it)
        theirs = m16(x.bfloat16())
        hf.patch(m16)
        ours = m16(x.bfloat16())
    assert ours.dtype == torch.bfloat16
    assert rel_err(ours, want) < 1.5 * rel_err(theirs, want) + 1e-3


def test_bad_dims_and_weights_are_errors():
    with pytest.raises(ValueError, match="top_k 9 exceeds the 8 experts of 2 groups"):
        moe.make_kernels(moe.DeepseekMoeDims(256, 64, 16, 9, 4, 2))
    with pytest.raises(ValueError, match="15 experts do not split into 4 groups"):
        moe.make_kernels(moe.DeepseekMoeDims(256, 64, 15, 6, 4, 2))
    m = _module(hidden=256, ffn=64)
    layer = moe.DeepseekMoe.from_hf(m)
    w = dict(layer.w)
    del w["bias"]
    with pytest.raises(ValueError, match="weight 'bias' is missing"):
        moe.DeepseekMoe(w, layer.dims)

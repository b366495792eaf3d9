"""The pypto Qwen3-MoE block against transformers' Qwen3MoeSparseMoeBlock (random weights, no
download): Qwen3-30B-A3B's hidden and expert sizes and top-8, with 16 experts instead of 128."""

import re

import pytest
import torch

import pypto
from models.common import compile_fullgraph, rel_err
from models.qwen3_moe import block, hf

transformers = pytest.importorskip("transformers")
from transformers import Qwen3MoeConfig  # noqa: E402
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock  # noqa: E402


def _module(experts=16, hidden=2048, ffn=768, top_k=8, seed=0):
    torch.manual_seed(seed)
    cfg = Qwen3MoeConfig(hidden_size=hidden, moe_intermediate_size=ffn, num_experts=experts,
                         num_experts_per_tok=top_k, norm_topk_prob=True)
    m = Qwen3MoeSparseMoeBlock(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.02)
    return m



@pytest.fixture(scope="module")
def real_sizes():
    return _module()


@pytest.mark.parametrize("tokens", [37, 1, 5])
def test_the_block_matches_transformers_at_real_sizes(real_sizes, tokens):
    m = real_sizes
    x = torch.randn(1, tokens, 2048)
    with torch.no_grad():
        want = m(x)
        assert hf.patch(m) == 1
        try:
            got = m(x)
        finally:
            hf.unpatch(m)
    assert rel_err(got, want) < 1e-4


def test_the_patched_block_runs_under_torch_compile_fullgraph():
    m = _module(experts=8, hidden=256, ffn=64, top_k=2)
    x = torch.randn(1, 13, 256)
    with torch.no_grad():
        want = m(x)
        hf.patch(m)
        try:
            compiled, ops = compile_fullgraph(m)
            got = compiled(x)
        finally:
            hf.unpatch(m)
    assert rel_err(got, want) < 1e-4
    assert any("pypto.qwen3_moe_" in o and "route" in o for o in ops), ops
    assert any("pypto.qwen3_moe_" in o and "experts" in o for o in ops), ops


def test_the_grouping_by_expert(real_sizes):
    m = real_sizes
    moe = block.MoeBlock.from_hf(m)
    x = torch.randn(29, 2048)
    counts, starts, tokens, weights, slots = moe._many.route(x, moe.gate)
    probs = torch.softmax(x @ m.gate.weight.detach().T, -1)
    w, ids = torch.topk(probs, 8, -1)
    assert torch.equal(counts, torch.bincount(ids.flatten(), minlength=16).int())
    assert torch.equal(starts, (torch.cumsum(counts, 0) - counts).int())
    # Each pair's slot lies in its expert's run, holds its token and its normalised weight.
    for t in range(29):
        for k in range(8):
            s, e = int(slots[t, k]), int(ids[t, k])
            assert starts[e] <= s < starts[e] + counts[e]
            assert int(tokens[s]) == t
            torch.testing.assert_close(weights[s, 0], w[t, k] / w[t].sum())
    assert sorted(slots.flatten().tolist()) == list(range(29 * 8))


def test_bf16_is_within_bf16_tolerance(real_sizes):
    m32 = real_sizes
    x = torch.randn(1, 23, 2048)
    with torch.no_grad():
        want = m32(x)
        m16 = _module().to(torch.bfloat16)
        m16.load_state_dict({k: v.to(torch.bfloat16) for k, v in m32.state_dict().items()})
        theirs = m16(x.bfloat16())
        hf.patch(m16)
        ours = m16(x.bfloat16())
    assert ours.dtype == torch.bfloat16
    assert rel_err(ours, want) < 1.5 * rel_err(theirs, want) + 1e-3


def test_experts_no_token_chose_cost_nothing():
    # Tokens routed to only a few experts: the others run zero blocks, and the result still matches.
    m = _module(experts=16, hidden=256, ffn=96, top_k=2, seed=1)
    with torch.no_grad():
        m.gate.weight[4:] -= 1.0   # experts 4.. lose every routing decision
        x = torch.randn(1, 40, 256).abs()
        want = m(x)
        hf.patch(m)
        got = m(x)
    assert rel_err(got, want) < 1e-4
    counts = block.MoeBlock.from_hf(m)._many.route(x[0], m.gate.weight)[0]
    assert counts[4:].sum() == 0


def test_the_experts_kernel_reads_its_runs_from_memory(real_sizes):
    moe = block.MoeBlock.from_hf(real_sizes)
    x = torch.randn(12, 2048)
    routed = moe._many.route(x, moe.gate)
    pto = pypto.compile(moe._many.experts, x, *routed, moe.gate_up, moe.down).pto()
    assert "READ %starts_v0 <- %starts[e]" in pto and "READ %counts_v1 <- %counts[e]" in pto


def test_bad_weights_and_inputs_are_errors(real_sizes):
    m = real_sizes
    with pytest.raises(ValueError, match=r"weight 'down' has shape \(16, 768, 2048\), expected \(16, 2048, 768\)"):
        block.MoeBlock(m.gate.weight, m.experts.gate_up_proj, m.experts.down_proj.transpose(1, 2),
                       block.MoeDims(2048, 768, 16, 8))
    with pytest.raises(ValueError, match=r"x has shape \(3, 100\), expected \[tokens, 2048\]"):
        block.MoeBlock.from_hf(m)(torch.randn(3, 100))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_block_of_tokens_runs_its_three_products_in_one_task(dtype):
    # Each block of an expert's tokens is one InCore function: gate, up and down with the SwiGLU
    # between them (fp32: in tiles of weight rows, the block's x^T copied once for gate and up). A
    # shared operand's load forwarded past the buffer budget would cut that function in three.
    m = _module(experts=4, top_k=2).to(dtype)
    ours = block.MoeBlock.from_hf(m)
    x = torch.randn(40, 2048, dtype=dtype)
    k = ours._many
    routed = k.route(x, ours.gate)
    c = k.experts.compile(x, *routed, ours.gate_up, ours.down)
    text = c.dump()
    products = [f for f in set(re.findall(r"incore func @(\w+)\(.*fused=\[([^\]]*)\]", text))
                if "matmul" in f[1]]
    fused = {name: members.count("matmul") for name, members in products}
    if dtype == torch.bfloat16:
        assert list(fused.values()) == [3], fused
    else:
        # fp32: gate and up by tiles of weight rows in one function, down by its own tiles.
        assert sorted(fused.values()) == [1, 2], fused
        (gate_up,) = [n for n, c in fused.items() if c == 2]
        body = text[text.index(f"incore func @{gate_up}("):]
        body = body[:body.index("\n}\n")]
        assert body.count("tmatmul") == 2 and body.count("tload") == 3, body
    with torch.no_grad():
        want = m(x[None])[0].reshape(40, -1)
    assert rel_err(k.experts(x, *routed, ours.gate_up, ours.down), want) < (1e-4 if dtype == torch.float32 else 2e-2)

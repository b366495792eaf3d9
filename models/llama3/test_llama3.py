"""models/llama3 against transformers' LlamaDecoderLayer (built from a LlamaConfig with random
weights, no download): prefill and decode at LLaMA-3-8B's dimensions with few tokens, tails and
bf16 at small dimensions, greedy generation of a small patched LlamaForCausalLM, and the patched
model under torch.compile(fullgraph=True) and torch.export."""

import copy
import os
import re
import sys

import pytest
import torch

import pypto

# The model folders import as the namespace package `models` from the repository's root (a bare
# `import layer` would meet models/llama's module of that name in the same process).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from models.llama3 import hf  # noqa: E402
from models.llama3 import layer as L  # noqa: E402

from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding  # noqa: E402

SMALL = L.LlamaDims(hidden=256, heads=8, kv_heads=2, head_dim=32, ffn=640)


def config(dims: L.LlamaDims, **kw) -> LlamaConfig:
    return LlamaConfig(hidden_size=dims.hidden, num_attention_heads=dims.heads, num_key_value_heads=dims.kv_heads,
                       head_dim=dims.head_dim, intermediate_size=dims.ffn, rms_norm_eps=dims.eps,
                       rope_theta=dims.rope_theta, attn_implementation="sdpa", **kw)


def hf_layer(dims, std=0.02, seed=0):
    torch.manual_seed(seed)
    cfg = config(dims)
    layer = LlamaDecoderLayer(cfg, 0).eval().requires_grad_(False)
    for p in layer.parameters():
        torch.nn.init.normal_(p, std=std)
        if p.dim() == 1:
            p.add_(1.0)  # norm weights around 1
    return layer, LlamaRotaryEmbedding(cfg)


def hf_step(layer, rot, x, start, cache):
    """transformers' layer on x [1, S, hidden] at positions start.., appending to `cache`."""
    s = x.shape[1]
    pos = torch.arange(start, start + s)[None]
    mask = torch.full((s, start + s), float("-inf"), dtype=x.dtype).triu(start + 1)[None, None]
    with torch.no_grad():
        return layer(x, attention_mask=mask, position_ids=pos, position_embeddings=rot(x, pos), cache=cache,
                     use_cache=True)


def relative_error(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


@pytest.fixture(scope="module")
def real():
    layer, rot = hf_layer(L.LLAMA3_8B)
    return layer, rot, L.make_kernels(L.LLAMA3_8B)


def test_prefill_at_llama3_8b_dims_matches_transformers(real):
    ref, rot, kernels = real
    for seq in (16, 21):   # whole and partial tiles of the dynamic sequence
        ours = L.LlamaLayer.from_hf(ref, max_positions=64, kernels=kernels, inv_freq=rot.inv_freq)
        x = torch.randn(1, seq, L.LLAMA3_8B.hidden)
        cache = DynamicCache(config=ref.self_attn.config)
        want = hf_step(ref, rot, x, 0, cache)
        out = ours.prefill(x[0])
        assert relative_error(out, want[0]) < 1e-4
        # The keys and values the kernels cached are transformers' (after RoPE).
        assert relative_error(ours.k_cache[:, :seq], cache.layers[0].keys[0]) < 1e-5
        assert relative_error(ours.v_cache[:, :seq], cache.layers[0].values[0]) < 1e-5


def test_decode_at_llama3_8b_dims_against_a_cache_of_520_positions(real):
    ref, rot, kernels = real
    d = L.LLAMA3_8B
    past = 519
    ours = L.LlamaLayer.from_hf(ref, max_positions=528, kernels=kernels, inv_freq=rot.inv_freq)
    k, v = torch.randn(1, d.kv_heads, past, d.head_dim), torch.randn(1, d.kv_heads, past, d.head_dim)
    cache = DynamicCache(config=ref.self_attn.config)
    cache.update(k, v, 0)
    ours.k_cache[:, :past], ours.v_cache[:, :past], ours.length = k[0], v[0], past
    x = torch.randn(1, 1, d.hidden)
    for step in range(2):
        want = hf_step(ref, rot, x, past + step, cache)
        out = ours.decode(x[0])
        assert relative_error(out, want[0]) < 1e-4, step
        x = want
    assert ours.length == past + 2


def test_the_attention_is_fused_with_its_causal_mask_and_shared_key_heads():
    kernels = L.make_kernels(SMALL)
    d = SMALL
    x, q = torch.randn(40, d.hidden), torch.randn(40, d.heads, d.head_dim)
    k, v = torch.randn(d.kv_heads, 70, d.head_dim), torch.randn(d.kv_heads, 70, d.head_dim)
    w = [torch.randn(d.hidden, d.heads * d.head_dim), torch.ones(d.hidden), torch.randn(d.ffn, d.hidden),
         torch.randn(d.ffn, d.hidden), torch.randn(d.hidden, d.ffn)]
    passes = pypto.compile(kernels.attend, x, q, k, v, *w).dump("passes")
    fused = re.findall(r"= attention\(%\w+, %\w+, %\w+, %\w+, scale=[\d.]+", passes)
    assert len(set(fused)) == 1, passes   # one attention op (printed by each pass that keeps it)
    # q is read as [kv_heads, group, S, D] against keys [kv_heads, 1, T, D]: one key head per group;
    # the mask is recognised as causal, so each task skips the key blocks past its rows.
    assert re.search(rf"attention\(.*, causal=\(T - S\)\) : DT_FP32\[{d.kv_heads}, {d.group}, S, {d.head_dim}\]",
                     passes), passes


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_small_dims_prefill_then_decode_with_tails(dtype):
    ref32, rot = hf_layer(SMALL, std=0.1, seed=1)
    ref = copy.deepcopy(ref32).to(dtype)
    ours = L.LlamaLayer.from_hf(ref, max_positions=128, dtype=pypto.DT_BF16 if dtype == torch.bfloat16 else
                                pypto.DT_FP32, inv_freq=rot.inv_freq)
    x = torch.randn(1, 37, SMALL.hidden)
    cache, cache32 = DynamicCache(config=ref.self_attn.config), DynamicCache(config=ref.self_attn.config)
    steps = [(x, 0)] + [(torch.randn(1, 1, SMALL.hidden), 37 + i) for i in range(3)]
    for xs, start in steps:
        want32 = hf_step(ref32, rot, xs, start, cache32)
        want = hf_step(ref, rot, xs.to(dtype), start, cache)
        out = ours.prefill(xs[0].to(dtype)) if xs.shape[1] > 1 else ours.decode(xs[0].to(dtype))
        assert out.dtype == dtype
        if dtype == torch.float32:
            assert relative_error(out, want[0]) < 1e-4
        else:
            # bf16: as close to the fp32 layer as transformers' own bf16 layer is (within 1.5x of
            # its error; the two bf16 layers round differently, each about as far from fp32).
            assert relative_error(out, want32[0]) <= 1.5 * relative_error(want[0], want32[0]) + 1e-3
            assert relative_error(out, want32[0]) < 5e-2


def small_model(dtype=torch.float32):
    cfg = config(SMALL, vocab_size=600, num_hidden_layers=2, initializer_range=0.2)
    torch.manual_seed(3)
    return LlamaForCausalLM(cfg).eval().requires_grad_(False).to(dtype)


def test_a_patched_model_generates_the_same_32_greedy_tokens():
    model = small_model()
    ids = torch.randint(0, 600, (1, 13))
    want = model.generate(ids, max_new_tokens=32, do_sample=False)
    assert len(set(want[0, 13:].tolist())) > 8   # a varied continuation, not one repeated token
    hf.patch(model)
    got = model.generate(ids, max_new_tokens=32, do_sample=False)
    assert torch.equal(got, want)
    hf.unpatch(model)
    assert torch.equal(model.generate(ids, max_new_tokens=4, do_sample=False), want[:, :17])


def test_a_patched_model_runs_under_torch_compile_fullgraph_and_export():
    model = small_model()
    ids = torch.randint(0, 600, (1, 19))
    with torch.no_grad():
        want = model(ids).logits
        hf.patch(model)
        compiled = torch.compile(model, fullgraph=True)   # a graph break would raise
        torch.testing.assert_close(compiled(ids).logits, want, rtol=1e-4, atol=1e-4)
    layer = model.model.layers[0]
    x = torch.randn(1, 9, SMALL.hidden)
    pos = torch.arange(9)[None]
    ep = torch.export.export(layer, (x,), kwargs={"position_ids": pos})
    ops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert any("pypto.llama3_qkv_" in o for o in ops) and any("pypto.llama3_attend_" in o for o in ops), ops
    torch.testing.assert_close(ep.module()(x, position_ids=pos), layer(x, position_ids=pos))


def test_what_the_patch_and_the_layer_do_not_support_is_a_clear_error():
    model = small_model()
    hf.patch(model)
    with pytest.raises(pypto.NotSupportedError, match="batch 2; only batch 1 is supported yet"):
        with torch.no_grad():
            model(torch.randint(0, 600, (2, 5)))
    scaled = LlamaConfig(**{**config(SMALL).to_dict(), "rope_parameters": {"rope_type": "linear", "factor": 2.0,
                                                                           "rope_theta": 10000.0}})
    with pytest.raises(pypto.NotSupportedError, match="RoPE type 'linear' is not supported yet"):
        L.dims_of(scaled)
    ours = L.LlamaLayer.from_hf(hf_layer(SMALL)[0], max_positions=8)
    with pytest.raises(ValueError, match="0 cached positions and 9 new ones exceed max_positions 8"):
        ours.prefill(torch.randn(9, SMALL.hidden))
    with pytest.raises(ValueError, match=r"missing weights \['down_proj'\]"):
        L.LlamaLayer({k: None for k in L.QKV_WEIGHTS + L.MLP_WEIGHTS[:-1]})

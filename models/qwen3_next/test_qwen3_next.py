"""The pypto Qwen3-Next linear-attention layer against transformers' Qwen3NextGatedDeltaNet
(random weights, no download), prefill then decode with transformers' cache as the reference."""

import pytest
import torch

import pypto
from models.common import compile_fullgraph, rel_err
from models.qwen3_next import hf, layer

transformers = pytest.importorskip("transformers")
from transformers import DynamicCache, Qwen3NextConfig  # noqa: E402
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet  # noqa: E402

SMALL = dict(hidden_size=256, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
             linear_value_head_dim=32)


def _module(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = Qwen3NextConfig(num_hidden_layers=4, **kw)
    m = Qwen3NextGatedDeltaNet(cfg, 0).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name not in ("A_log", "dt_bias"):   # keep transformers' decay initialisation
                p.normal_(0.0, 0.05)
    return cfg, m



def _steps(cfg, n, dtype=torch.float32):
    torch.manual_seed(7)
    return [torch.randn(1, n, cfg.hidden_size, dtype=dtype)] + \
        [torch.randn(1, 1, cfg.hidden_size, dtype=dtype) for _ in range(2)]


@pytest.mark.parametrize("tokens", [70, 2])
def test_prefill_then_decode_match_transformers_at_qwen3_next_dims(tokens):
    cfg, m = _module()
    assert (cfg.hidden_size, cfg.linear_num_key_heads, cfg.linear_num_value_heads) == (2048, 16, 32)
    net = layer.GatedDeltaNet.from_hf(m)
    cache = DynamicCache(config=cfg)
    with torch.no_grad():
        for x in _steps(cfg, tokens):
            want = m(x, cache=cache)
            got = net.prefill(x[0]) if x.shape[1] > 1 else net.decode(x[0])
            assert rel_err(got, want[0]) < 1e-4
    torch.testing.assert_close(net.state, cache.layers[0].recurrent_states[0][0], rtol=1e-4, atol=1e-5)
    assert rel_err(net.conv_state, cache.layers[0].conv_states[0][0]) < 1e-5   # the last 4 projected inputs
    # Decode streams the weights in tiles of whole rows, with tiles of each op's own rank elsewhere
    # (a vec tile left set for another rank once cut the copies into thousands of tiny tasks).
    x1 = _steps(cfg, tokens)[1][0]
    assert pypto.compile(net.kernels.decode, x1, net.conv_state, net.state, *net.weights()).stats()["tasks"] < 700


def test_bf16_is_within_bf16_tolerance():
    cfg, m = _module(**SMALL)
    xs = _steps(cfg, 45)
    with torch.no_grad():
        want = [m(x, cache=c) for c in [DynamicCache(config=cfg)] for x in xs]
        m16 = _module(**SMALL)[1].to(torch.bfloat16)
        theirs = [m16(x.bfloat16(), cache=c) for c in [DynamicCache(config=cfg)] for x in xs]
        net = layer.GatedDeltaNet.from_hf(m16)
        got = [net.prefill(xs[0][0].bfloat16())] + [net.decode(x[0].bfloat16()) for x in xs[1:]]
    for g, t, w in zip(got, theirs, want):
        assert g.dtype == torch.bfloat16
        assert rel_err(g, w[0]) < 1.5 * rel_err(t, w) + 2e-3


def test_the_patch_runs_a_sequence_without_a_cache():
    cfg, m = _module(**SMALL)
    x = torch.randn(1, 33, cfg.hidden_size)
    with torch.no_grad():
        want = m(x)
        assert hf.patch(m) == 1
        try:
            torch.testing.assert_close(m(x), want, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(m(x), want, rtol=1e-4, atol=1e-5)   # states start from zero each call
        finally:
            hf.unpatch(m)


@pytest.mark.parametrize("prompt", [33, 2, 1])
def test_the_patch_continues_from_transformers_cache(prompt):
    cfg, m = _module(**SMALL)
    steps = _steps(cfg, prompt) + [torch.randn(1, 5, cfg.hidden_size)]   # a multi-token step after decode
    theirs, ours = DynamicCache(config=cfg), DynamicCache(config=cfg)
    with torch.no_grad():
        want = [m(x, cache=theirs) for x in steps]
        hf.patch(m)
        try:
            got = [m(x, cache=ours) for x in steps]
        finally:
            hf.unpatch(m)
    for g, w in zip(got, want):
        assert rel_err(g, w) < 1e-4
    mine, ref = ours.layers[0], theirs.layers[0]
    assert rel_err(mine.conv_states[0], ref.conv_states[0]) < 1e-5
    torch.testing.assert_close(mine.recurrent_states[0], ref.recurrent_states[0], rtol=1e-4, atol=1e-5)


def test_the_patched_layer_runs_under_torch_compile_fullgraph():
    cfg, m = _module(**SMALL)
    steps = _steps(cfg, 9)
    theirs = DynamicCache(config=cfg)
    with torch.no_grad():
        want = [m(x, cache=theirs) for x in steps]
        hf.patch(m)
        try:
            compiled, ops = compile_fullgraph(m)
            ours = DynamicCache(config=cfg)
            got = [compiled(x, cache=ours) for x in steps]   # prefill, then decode steps on the cache
        finally:
            hf.unpatch(m)
    for g, w in zip(got, want):
        assert rel_err(g, w) < 1e-4
    assert any("pypto.qwen3_next_" in o and "prefill" in o for o in ops), ops
    assert any("pypto.qwen3_next_" in o and "decode" in o for o in ops), ops


def test_a_patched_model_generates_the_same_tokens():
    from transformers import Qwen3NextForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3NextConfig(vocab_size=512, hidden_size=256, intermediate_size=512, moe_intermediate_size=128,
                          shared_expert_intermediate_size=128, num_experts=4, num_experts_per_tok=2,
                          num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                          linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
                          linear_value_head_dim=32)
    model = Qwen3NextForCausalLM(cfg).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 11))
    kw = dict(max_new_tokens=16, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        want = model.generate(prompt, **kw)
        assert hf.patch(model) == 3   # layers 0-2 linear attention, 3 full attention
        try:
            got = model.generate(prompt, **kw)
        finally:
            hf.unpatch(model)
    assert torch.equal(got, want)


def test_the_patch_rejects_what_it_does_not_support():
    cfg, m = _module(**SMALL)
    hf.patch(m)
    try:
        with pytest.raises(pypto.NotSupportedError, match="batch 2; only batch 1"):
            m(torch.randn(2, 3, cfg.hidden_size))
        cache = DynamicCache(config=cfg)
        cache.activate_past_recording()
        with pytest.raises(pypto.NotSupportedError, match="recording past states"):
            m(torch.randn(1, 3, cfg.hidden_size), cache=cache)
    finally:
        hf.unpatch(m)


def test_errors():
    cfg, m = _module(**SMALL)
    net = layer.GatedDeltaNet.from_hf(m)
    with pytest.raises(ValueError, match="x has 2 tokens, expected 1"):
        net.decode(torch.randn(2, cfg.hidden_size))
    w = dict(net.w)
    del w["A_log"]
    with pytest.raises(ValueError, match="weight 'A_log' is missing"):
        layer.GatedDeltaNet(w, net.dims)
    w = dict(net.w)
    w["conv"] = w["conv"][:, :3]
    with pytest.raises(ValueError, match=r"weight 'conv' has shape \(256, 3\), expected \(256, 4\)"):
        layer.GatedDeltaNet(w, net.dims)

"""The pypto DeepSeek-V3 attention (MLA, absorbed form) against transformers' DeepseekV3Attention
(random weights, no download), and a small DeepSeek-V3 model patched with both pypto blocks."""

import pytest
import torch

import pypto
from models.common import compile_fullgraph, rel_err
from models.deepseek_v3 import hf, mla

transformers = pytest.importorskip("transformers")
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, DynamicCache  # noqa: E402
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (  # noqa: E402
    DeepseekV3Attention, DeepseekV3RotaryEmbedding)

SMALL = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=64, kv_lora_rank=32,
             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)
DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
# DeepSeek-V3's own checkpoint's RoPE.
YARN_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
             "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}


def _attention(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = DeepseekV3Config(**kw)
    cfg._attn_implementation = "eager"
    a = DeepseekV3Attention(cfg, 0).eval()
    with torch.no_grad():
        for p in a.parameters():
            p.normal_(0.0, 0.02)
    return cfg, a



def _reference_steps(cfg, a, xs):
    """transformers' outputs of consecutive steps (prefill, then decodes) with its cache."""
    rot, cache, out, start = DeepseekV3RotaryEmbedding(cfg), DynamicCache(config=cfg), [], 0
    for x in xs:
        s = x.shape[1]
        t = start + s
        cos, sin = rot(x, torch.arange(start, t)[None])
        mask = torch.where(torch.arange(t)[None, :] - torch.arange(s)[:, None] > t - s, float("-inf"), 0.0)
        out.append(a(x, (cos, sin), mask[None, None].to(x.dtype), cache)[0])
        start = t
    return out, cache


def _steps(cfg, dtype=torch.float32):
    torch.manual_seed(11)
    return [torch.randn(1, 13, cfg.hidden_size, dtype=dtype)] + \
        [torch.randn(1, 1, cfg.hidden_size, dtype=dtype) for _ in range(2)]


def test_prefill_and_decode_match_transformers_at_deepseek_v3_dims():
    cfg, a = _attention(rope_parameters=DEFAULT_ROPE)
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.kv_lora_rank, cfg.q_lora_rank) == (7168, 128, 512, 1536)
    xs = _steps(cfg)
    with torch.no_grad():
        want, cache = _reference_steps(cfg, a, xs)
        ours = mla.MlaAttention.from_hf(a, DeepseekV3RotaryEmbedding(cfg), max_positions=32)
        got = [ours.prefill(xs[0][0])] + [ours.decode(x[0]) for x in xs[1:]]
    for g, w in zip(got, want):
        assert rel_err(g, w[0]) < 1e-4
    # The caches hold the same latents and rotated keys.
    latent, k_rope = cache.layers[0].keys[0, 0], cache.layers[0].values[0, 0]
    torch.testing.assert_close(ours.latent[:15], latent, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.k_rope[:15], k_rope, rtol=1e-5, atol=1e-5)


def test_yarn_rope_and_its_scaling_through_the_patch():
    # DeepSeek-V3's own RoPE (yarn: scaled frequencies, cos/sin and scores scaled by mscale), through
    # hf.patch, whose kernel writes into transformers' cache.
    cfg, a = _attention(rope_parameters=YARN_ROPE, max_position_embeddings=163840, **SMALL)
    assert a.scaling > 1.5 * (16 + 8) ** -0.5   # mscale^2
    default = 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8)
    assert not torch.allclose(DeepseekV3RotaryEmbedding(cfg).inv_freq, default)   # yarn's frequencies
    xs = _steps(cfg)
    with torch.no_grad():
        want, _ = _reference_steps(cfg, a, xs)
        assert hf.patch(a) == 1
        try:
            got, _ = _reference_steps(cfg, a, xs)
        finally:
            hf.unpatch(a)
    for g, w in zip(got, want):
        assert rel_err(g, w) < 1e-4


def test_bf16_is_within_bf16_tolerance():
    cfg, a = _attention(rope_parameters=DEFAULT_ROPE, **SMALL)
    xs = _steps(cfg)
    with torch.no_grad():
        want, _ = _reference_steps(cfg, a, xs)
        a16 = a.to(torch.bfloat16)
        theirs, _ = _reference_steps(cfg, a16, [x.bfloat16() for x in xs])
        ours = mla.MlaAttention.from_hf(a16, DeepseekV3RotaryEmbedding(cfg), max_positions=32)
        got = [ours.prefill(xs[0][0].bfloat16())] + [ours.decode(x[0].bfloat16()) for x in xs[1:]]
    for g, t, w in zip(got, theirs, want):
        assert g.dtype == torch.bfloat16
        assert rel_err(g, w[0]) < 1.5 * rel_err(t, w) + 1e-3


def _small_model():
    """A 2-layer DeepSeek-V3 (an MLA in each, one MoE layer of 8 experts) with random weights."""
    torch.manual_seed(0)
    cfg = DeepseekV3Config(vocab_size=300, num_hidden_layers=2, first_k_dense_replace=1, intermediate_size=128,
                           moe_intermediate_size=64, n_routed_experts=8, n_group=4, topk_group=2,
                           num_experts_per_tok=4, **SMALL)
    model = DeepseekV3ForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.05)
        for m in model.modules():
            if hasattr(m, "e_score_correction_bias"):
                m.e_score_correction_bias.normal_(0.0, 0.05)
    return model


def test_a_patched_small_model_generates_the_same_tokens():
    model = _small_model()
    prompt = torch.tensor([[1, 17, 42, 99, 7, 250]])
    want = model.generate(prompt, max_new_tokens=16, do_sample=False)
    assert hf.patch(model) == 3   # two attentions and one MoE layer
    got = model.generate(prompt, max_new_tokens=16, do_sample=False)
    assert torch.equal(got, want)
    assert len(set(want[0, 6:].tolist())) > 3


def test_a_patched_small_model_runs_under_torch_compile_fullgraph():
    model = _small_model()
    ids = torch.randint(0, 300, (1, 11))
    with torch.no_grad():
        want = model(ids).logits
        hf.patch(model)
        compiled, ops = compile_fullgraph(model)
        torch.testing.assert_close(compiled(ids).logits, want, rtol=1e-4, atol=1e-5)
    for kernel in ("deepseek_v3_mla_", "deepseek_v3_moe_"):   # the kernels ran as the patch's custom ops
        assert any(f"pypto.{kernel}" in o for o in ops), ops


def test_errors():
    cfg, a = _attention(rope_parameters=DEFAULT_ROPE, **SMALL)
    ours = mla.MlaAttention.from_hf(a, DeepseekV3RotaryEmbedding(cfg), max_positions=4)
    with pytest.raises(ValueError, match="x has 2 tokens, expected 1"):
        ours.decode(torch.randn(2, 256))
    with pytest.raises(ValueError, match="5 positions exceed the cache's 4"):
        ours.prefill(torch.randn(5, 256))
    w = dict(ours.w)
    del w["kv_b"]
    with pytest.raises(ValueError, match="weight 'kv_b' is missing"):
        mla.MlaAttention(w, ours.inv_freq, ours.dims)
    cfg2, a2 = _attention(rope_parameters=DEFAULT_ROPE, rope_interleave=False, **SMALL)
    with pytest.raises(pypto.NotSupportedError, match="rope_interleave=False"):
        mla.MlaAttention.from_hf(a2, DeepseekV3RotaryEmbedding(cfg2))

"""The pypto LLaMA-3 layer inside transformers: `patch(module)` swaps the forward of every
LlamaDecoderLayer in `module` (a layer, a LlamaModel or a LlamaForCausalLM) for the pypto kernels,
registered as torch custom ops (`pypto.torch.custom_op`), so that a patched model still runs under
torch.compile and generates as before.

The patched layer computes everything in pypto kernels; transformers keeps its own roles: the
embeddings, the final norm and head, the RoPE angles' parameters, and the KV cache's storage
(`cache.update` appends the keys and values the kernels computed). Batch 1, no padding: the
mask is the causal one (the kernels build it); a batch of several sequences is not supported yet.
"""

import functools

import torch

import pypto
from models.llama3 import layer as L


@functools.lru_cache(maxsize=None)
def _ops(dims: L.LlamaDims, dtype):
    """The kernels of these dims as torch custom ops (one registration per dims and dtype)."""
    k = L.make_kernels(dims, dtype)
    tag = f"{dims.hidden}_{dims.heads}_{dims.kv_heads}_{dims.head_dim}_{dims.ffn}_{'bf16' if dtype == pypto.DT_BF16 else 'fp32'}"
    mut = ("k_cache", "v_cache")

    class Ops:
        qkv = pypto.torch.custom_op(k.qkv, name=f"llama3_qkv_{tag}", mutates_args=mut)
        qkv_decode = pypto.torch.custom_op(k.qkv_decode, name=f"llama3_qkv_decode_{tag}", mutates_args=mut)
        attend = pypto.torch.custom_op(k.attend, name=f"llama3_attend_{tag}")
        attend_decode = pypto.torch.custom_op(k.attend_decode, name=f"llama3_attend_decode_{tag}")

    return Ops


_DTYPES = {torch.float32: pypto.DT_FP32, torch.bfloat16: pypto.DT_BF16}


def _rope_inv_freq(config):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = getattr(config, "rope_parameters", None) or {}
    rope_type = rope.get("rope_type", "default")
    if rope_type == "default":
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        inv_freq, scaling = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](config, None)
    if scaling != 1.0:
        raise pypto.NotSupportedError(f"models/llama3: RoPE attention scaling {scaling} is not supported yet")
    return inv_freq.float()


def _patched_forward(layer, dims, inv_freq, ops):
    a, m = layer.self_attn, layer.mlp
    qkv_w = [layer.input_layernorm.weight, a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]
    mlp_w = [a.o_proj.weight, layer.post_attention_layernorm.weight, m.gate_proj.weight, m.up_proj.weight,
             m.down_proj.weight]
    layer_idx = a.layer_idx

    def forward(hidden_states, attention_mask=None, position_ids=None, cache=None, use_cache=False,
                position_embeddings=None, **kwargs):
        b, s, _ = hidden_states.shape
        if b != 1:
            raise pypto.NotSupportedError(f"models/llama3 patch: batch {b}; only batch 1 is supported yet")
        x = hidden_states[0]
        if position_ids is None:
            past = cache.get_seq_length(layer_idx) if cache is not None else 0
            position_ids = torch.arange(past, past + s)[None]
        pos = position_ids[0]
        k_new = torch.empty(dims.kv_heads, s, dims.head_dim, dtype=hidden_states.dtype)
        v_new = torch.empty_like(k_new)
        w = [p.detach() for p in qkv_w]
        q = (ops.qkv_decode if s == 1 else ops.qkv)(x, pos, inv_freq, k_new, v_new, *w)
        keys, values = k_new, v_new
        if cache is not None:
            keys, values = cache.update(k_new[None], v_new[None], layer_idx)
            keys, values = keys[0], values[0]
        out = (ops.attend_decode if s == 1 else ops.attend)(x, q, keys, values, *[p.detach() for p in mlp_w])
        return out[None]

    return forward


def patch(module):
    """Swaps the forward of every LlamaDecoderLayer in `module` (itself included) for the pypto
    kernels; returns `module`. `unpatch(module)` restores them."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    layers = [mod for mod in module.modules() if isinstance(mod, LlamaDecoderLayer)]
    if not layers:
        raise ValueError(f"models/llama3 patch: {type(module).__name__} holds no LlamaDecoderLayer")
    config = layers[0].self_attn.config
    dims = L.dims_of(config)
    inv_freq = _rope_inv_freq(config)
    dtype = layers[0].self_attn.q_proj.weight.dtype
    if dtype not in _DTYPES:
        raise pypto.NotSupportedError(f"models/llama3 patch: weights of {dtype} (fp32 or bf16 only)")
    ops = _ops(dims, _DTYPES[dtype])
    for layer in layers:
        layer.forward = _patched_forward(layer, dims, inv_freq, ops)
    return module


def unpatch(module):
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    for mod in module.modules():
        if isinstance(mod, LlamaDecoderLayer) and "forward" in mod.__dict__:
            del mod.forward
    return module

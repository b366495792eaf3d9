"""DeepSeek-V3's blocks in pypto inside transformers: `patch(module)` swaps the forward of every
DeepseekV3MoE (the MoE layer) and every DeepseekV3Attention (MLA) in `module` for the pypto
kernels, called as torch custom ops (so a patched model runs under torch.compile with no graph
break); `unpatch(module)` restores them.

A patched attention keeps transformers' cache: `cache.update` appends placeholders for the new
positions and returns the layer's whole latent and rope-key storage, into whose last rows the
kernel writes the new positions' values before attending over all of them. Batch 1, no padding
(the kernel builds the causal mask).
"""

import torch

import pypto
from models.deepseek_v3 import mla as A
from models.deepseek_v3 import moe as M


def _layers(module):
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3MoE

    return [m for m in module.modules() if isinstance(m, (DeepseekV3MoE, DeepseekV3Attention))]


def _moe_forward(m):
    layer = M.DeepseekMoe.from_hf(m, torch_ops=True)

    def forward(hidden_states):
        b, s, h = hidden_states.shape
        return layer(hidden_states.reshape(b * s, h)).reshape(b, s, h)

    return forward


def _attention_forward(m):
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3RotaryEmbedding

    rotary = DeepseekV3RotaryEmbedding(m.config)
    attn = A.MlaAttention.from_hf(m, rotary, max_positions=1, torch_ops=True)   # its kernel and weights; the cache is transformers'
    d = attn.dims

    def forward(hidden_states, position_embeddings=None, attention_mask=None, cache=None, position_ids=None,
                **kwargs):
        b, s, _ = hidden_states.shape
        if b != 1:
            raise pypto.NotSupportedError(f"models/deepseek_v3 patch: batch {b}; only batch 1 is supported yet")
        past = cache.get_seq_length(m.layer_idx) if cache is not None else 0
        pos = position_ids[0] if position_ids is not None else torch.arange(past, past + s)
        dt = hidden_states.dtype
        latent = torch.zeros(1, 1, s, d.kv_lora_rank, dtype=dt)
        k_rope = torch.zeros(1, 1, s, d.qk_rope_head_dim, dtype=dt)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope, m.layer_idx)
        kernel = attn.decode_kernel if s == 1 else attn.prefill_kernel
        out = kernel(hidden_states[0], pos, attn.inv_freq, latent[0, 0], k_rope[0, 0], *[attn.w[k] for k in A.WEIGHTS])
        return out[None], None

    return forward


def patch(module):
    """Swaps the forward of every DeepseekV3MoE and DeepseekV3Attention in `module` for the pypto
    kernels; returns the number of modules patched."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    layers = _layers(module)
    for m in layers:
        if "forward" not in m.__dict__:
            m.forward = _moe_forward(m) if isinstance(m, DeepseekV3MoE) else _attention_forward(m)
    return len(layers)


def unpatch(module):
    """Restores the forward of every patched layer in `module`."""
    for m in _layers(module):
        m.__dict__.pop("forward", None)

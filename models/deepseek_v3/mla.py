"""DeepSeek-V3's multi-head latent attention (MLA) as pypto kernels, at its real dims by default.

    q        = q_b(rms_norm(q_a(x)))                   [S, heads, 128 + 64]: q_nope, q_rope
    c        = kv_a(x)                                 [S, 512 + 64]: the latent and the shared rope key
    latent   = rms_norm(c[:, :512]);  k_rope = rope(c[:, 512:])          (both cached, per position)
    q_rope   = rope(q_rope)                            RoPE on interleaved pairs (x0, x1), (x2, x3), ...
    k_h, v_h = latent W_uk_h^T | k_rope,  latent W_uv_h^T                 the expanded form (prefill)
    scores_h = (q_nope_h W_uk_h) latent^T + q_rope_h k_rope^T            the absorbed form (decode)
    out      = o_proj(concat_h softmax(scores_h * scale + causal) v_h)

kv_b's weight [heads * (128 + 128), 512] holds each head's W_uk [128, 512] (key) and W_uv
[128, 512] (value). The cache holds what transformers' holds (the normalised latent and the
rotated rope key of each position). Both kernels write the new positions into the caches they are
given and attend over all of them:

- `prefill` (S tokens, causal) expands every cached position's key and value per head, as
  transformers does (kv_b(latent)), and runs the attention as one flash attention (192-wide
  scores, 128-wide values): the [heads, S, T] scores never reach memory.
- `decode` (one token) runs the absorbed form: the query moves into the latent space
  (q_nope_h W_uk_h) and each head's output leaves it after the weighted sum, so a step reads 576
  numbers per cached position whatever the number of heads, and never expands the cache.
"""

import dataclasses

import pypto
from models import common

S = pypto.frontend.dynamic("S")   # new tokens
T = pypto.frontend.dynamic("T")   # cached positions, the new ones included

BUDGET_KB = common.BUDGET_KB


@dataclasses.dataclass(frozen=True)
class MlaDims:
    hidden: int = 7168
    heads: int = 128
    q_lora_rank: int = 1536
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    eps: float = 1e-6


DEEPSEEK_V3 = MlaDims()

WEIGHTS = ("q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b", "o_proj")


def _proj(x, w, dtype):
    return common.linear(x, w, dtype)


def _rope_pairs(x, cos, sin):
    """RoPE on interleaved pairs of x's last dim: [x0 c - x1 s, ..., x1 c + x0 s, ...] (the
    rotated evens, then the rotated odds, as transformers' apply_rotary_pos_emb_interleave)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return pypto.concat([even * cos - odd * sin, odd * cos + even * sin], -1)


def _new_positions(x, pos, inv_freq, latent, k_rope, q_a, q_a_norm, q_b, kv_a, kv_a_norm, dims: MlaDims, dt,
                   rope_scale):
    """The projections and RoPE of the new tokens, traced into the calling kernel: writes their
    normalised latents and rotated rope keys into the last rows of the caches; returns their
    q_nope [S, heads, 128] and rotated q_rope [S, heads, 64] (dt)."""
    NH, L, DN, R = dims.heads, dims.kv_lora_rank, dims.qk_nope_head_dim, dims.qk_rope_head_dim
    n, t, eps = x.shape[0], latent.shape[0], dims.eps
    pypto.set_vec_tile_shapes(8, 512)
    q = pypto.reshape(_proj(pypto.rms_norm(_proj(x, q_a, dt), q_a_norm, eps), q_b, dt), [n, NH, DN + R])
    c = _proj(x, kv_a, dt)                                               # [S, L + R]
    pypto.set_vec_tile_shapes(8, 512)
    new_latent = pypto.rms_norm(pypto.view(c, [n, L], [0, 0]), kv_a_norm, eps)
    # cos and sin of each position's angles [S, R/2] (fp32)
    pypto.set_vec_tile_shapes(64)
    p32 = pypto.cast(pos, pypto.DT_FP32)
    pypto.set_vec_tile_shapes(8, R // 2)
    angles = pypto.reshape(p32, [n, 1]) * pypto.reshape(inv_freq, [1, R // 2])
    cos, sin = pypto.cos(angles) * rope_scale, pypto.sin(angles) * rope_scale
    new_k = pypto.cast(_rope_pairs(pypto.cast(pypto.view(c, [n, R], [0, L]), pypto.DT_FP32), cos, sin), dt)
    pypto.set_vec_tile_shapes(8, 512)
    pypto.assemble(new_latent, [t - n, 0], latent)
    pypto.assemble(new_k, [t - n, 0], k_rope)
    pypto.set_vec_tile_shapes(8, 8, 64)
    q_nope = pypto.view(q, [n, NH, DN], [0, 0, 0])
    q_rot = pypto.cast(_rope_pairs(pypto.cast(pypto.view(q, [n, NH, R], [0, 0, DN]), pypto.DT_FP32),
                                   pypto.reshape(cos, [n, 1, R // 2]), pypto.reshape(sin, [n, 1, R // 2])), dt)
    return q_nope, q_rot


def make_kernels(dims: MlaDims = DEEPSEEK_V3, dtype=pypto.DT_FP32, scale: float | None = None,
                 rope_scale: float = 1.0):
    """The `prefill` (S tokens, the expanded form) and `decode` (one token, the absorbed form)
    kernels for these dims and dtype (DT_FP32 or DT_BF16). `scale` multiplies the scores (default
    qk_head_dim^-0.5); `rope_scale` multiplies cos and sin (transformers' attention_scaling of its
    RoPE type)."""
    H, NH, QL, L = dims.hidden, dims.heads, dims.q_lora_rank, dims.kv_lora_rank
    DN, R, DV = dims.qk_nope_head_dim, dims.qk_rope_head_dim, dims.v_head_dim
    dt = dtype
    scale = (DN + R) ** -0.5 if scale is None else scale

    def fp32(x):
        return pypto.cast(x, pypto.DT_FP32) if dt != pypto.DT_FP32 else x

    def output(o, n):
        """o [NH, S, DV] (fp32) through o_proj: [S, H] (dt)."""
        pypto.set_vec_tile_shapes(8, 8, DV)
        o = pypto.reshape(pypto.cast(pypto.permute(o, 1, 0, 2), dt), [n, NH * DV])
        pypto.set_vec_tile_shapes(8, 512)
        return o

    def prefill_body(x, pos, inv_freq, latent, k_rope, q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o_proj):
        """Every cached position's key and value expanded per head (kv_b(latent), as transformers
        computes them), then causal flash attention: the scores never reach memory."""
        n, t = x.shape[0], latent.shape[0]
        q_nope, q_rot = _new_positions(x, pos, inv_freq, latent, k_rope, q_a, q_a_norm, q_b, kv_a, kv_a_norm,
                                       dims, dt, rope_scale)
        kv = pypto.reshape(_proj(latent, kv_b, dt), [t, NH, DN + DV])        # [T, NH, DN + DV]
        pypto.set_vec_tile_shapes(8, 8, 64)
        k_shared = pypto.expand_clone(pypto.reshape(k_rope, [t, 1, R]), [t, NH, R])
        k = pypto.concat([pypto.view(kv, [t, NH, DN], [0, 0, 0]), k_shared], -1)   # [T, NH, DN + R]
        q = pypto.concat([q_nope, q_rot], -1)                                      # [S, NH, DN + R]
        qh, kh = pypto.permute(q, 1, 0, 2), pypto.permute(k, 1, 0, 2)
        vh = fp32(pypto.permute(pypto.view(kv, [t, NH, DV], [0, 0, DN]), 1, 0, 2))  # [NH, T, DV]
        pypto.set_vec_tile_shapes(8, 512)
        mask = common.causal_mask(n, t)
        pypto.set_vec_tile_shapes(1, 8, 256)
        pypto.set_cube_tile_shapes([64, 64], [DN + R, DN + R], [256, 256])
        scores = pypto.matmul(qh, kh, pypto.DT_FP32, b_trans=True) * scale + mask
        o = pypto.matmul(pypto.softmax(scores, -1), vh, pypto.DT_FP32)            # [NH, S, DV]
        return _proj(output(o, n), o_proj, dt)

    def decode_body(x, pos, inv_freq, latent, k_rope, q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o_proj):
        """The absorbed form: the query moves into the latent space, so a step reads 576 numbers
        per cached position whatever the number of heads."""
        t = latent.shape[0]
        q_nope, q_rot = _new_positions(x, pos, inv_freq, latent, k_rope, q_a, q_a_norm, q_b, kv_a, kv_a_norm,
                                       dims, dt, rope_scale)
        pypto.set_vec_tile_shapes(8, 8, 64)
        q_nope, q_rot = pypto.permute(q_nope, 1, 0, 2), pypto.permute(q_rot, 1, 0, 2)   # [NH, 1, .]
        w = pypto.reshape(kv_b, [NH, DN + DV, L])
        w_uk = pypto.view(w, [NH, DN, L], [0, 0, 0])
        w_uv = pypto.view(w, [NH, DV, L], [0, DN, 0])
        pypto.set_cube_tile_shapes([64, 64], [128, 128], [256, 256])
        q_lat = pypto.matmul(q_nope, w_uk, pypto.DT_FP32)                      # [NH, 1, L]
        if dt != pypto.DT_FP32:
            q_lat = pypto.cast(q_lat, dt)
        lat = pypto.reshape(latent, [1, t, L])
        kr = pypto.reshape(k_rope, [1, t, R])
        scores = pypto.matmul(q_lat, lat, pypto.DT_FP32, b_trans=True) \
            + pypto.matmul(q_rot, kr, pypto.DT_FP32, b_trans=True)             # [NH, 1, T]
        pypto.set_vec_tile_shapes(1, 8, 512)
        p = pypto.softmax(scores * scale, -1)
        if dt != pypto.DT_FP32:
            p = pypto.cast(p, dt)
        o_lat = pypto.matmul(p, lat, pypto.DT_FP32)                            # [NH, 1, L]
        if dt != pypto.DT_FP32:
            o_lat = pypto.cast(o_lat, dt)
        o = pypto.matmul(o_lat, w_uv, pypto.DT_FP32, b_trans=True)              # [NH, 1, DV]
        return _proj(output(o, 1), o_proj, dt)

    def kernel(rows, body, name):
        def fn(x: pypto.Tensor((rows, H), dt), pos: pypto.Tensor((rows,), pypto.DT_INT64),
               inv_freq: pypto.Tensor((R // 2,), pypto.DT_FP32),
               latent: pypto.Tensor((T, L), dt), k_rope: pypto.Tensor((T, R), dt),
               q_a: pypto.Tensor((QL, H), dt), q_a_norm: pypto.Tensor((QL,), dt),
               q_b: pypto.Tensor((NH * (DN + R), QL), dt), kv_a: pypto.Tensor((L + R, H), dt),
               kv_a_norm: pypto.Tensor((L,), dt), kv_b: pypto.Tensor((NH * (DN + DV), L), dt),
               o_proj: pypto.Tensor((H, NH * DV), dt)) -> pypto.Tensor((rows, H), dt):
            return body(x, pos, inv_freq, latent, k_rope, q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o_proj)

        fn.__name__ = fn.__qualname__ = name
        return pypto.frontend.jit(fn, pass_options={"sram_budget_kb": BUDGET_KB})

    class Kernels:
        prefill = kernel(S, prefill_body, "mla_prefill")
        decode = kernel(1, decode_body, "mla_decode")

    return Kernels


class MlaAttention:
    """The attention on its weights (dict of WEIGHTS, torch tensors in transformers' layouts) with
    its own cache of `max_positions` positions; `prefill(x)` then `decode(x)` steps (batch 1)."""

    def __init__(self, weights: dict, inv_freq, dims: MlaDims = DEEPSEEK_V3, dtype=pypto.DT_FP32,
                 scale: float | None = None, rope_scale: float = 1.0, max_positions: int = 4096,
                 torch_ops: bool = False):
        import torch

        for name in WEIGHTS:
            if name not in weights:
                raise ValueError(f"MlaAttention: weight '{name}' is missing")
        self.dims, self.w, self.inv_freq = dims, weights, inv_freq.float()
        if torch_ops:   # the kernels as torch custom ops, writing into the cache storage they are given
            kernels = common.torch_ops("deepseek_v3_mla", (dims, dtype, scale, rope_scale),
                                       lambda: make_kernels(dims, dtype, scale, rope_scale),
                                       {"prefill": ("latent", "k_rope"), "decode": ("latent", "k_rope")})
        else:
            kernels = make_kernels(dims, dtype, scale, rope_scale)
        self.prefill_kernel, self.decode_kernel = kernels.prefill, kernels.decode
        tdt = weights["q_a"].dtype
        self.latent = torch.zeros(max_positions, dims.kv_lora_rank, dtype=tdt)
        self.k_rope = torch.zeros(max_positions, dims.qk_rope_head_dim, dtype=tdt)
        self.length = 0

    @classmethod
    def from_hf(cls, attn, rotary, **kwargs):
        """The attention of a transformers DeepseekV3Attention (weights used in place) and the
        model's DeepseekV3RotaryEmbedding."""
        c = attn.config
        if attn.q_lora_rank is None or c.attention_bias:
            raise pypto.NotSupportedError("models/deepseek_v3 MLA: q_lora_rank=None or attention_bias is not supported yet")
        dims = MlaDims(c.hidden_size, c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim,
                       c.qk_rope_head_dim, c.v_head_dim, attn.q_a_layernorm.variance_epsilon)
        if not c.rope_interleave:
            raise pypto.NotSupportedError("models/deepseek_v3 MLA: rope_interleave=False is not supported yet")
        w = {"q_a": attn.q_a_proj.weight, "q_a_norm": attn.q_a_layernorm.weight, "q_b": attn.q_b_proj.weight,
             "kv_a": attn.kv_a_proj_with_mqa.weight, "kv_a_norm": attn.kv_a_layernorm.weight,
             "kv_b": attn.kv_b_proj.weight, "o_proj": attn.o_proj.weight}
        w = {k: v.detach() for k, v in w.items()}
        dtype = pypto.DT_BF16 if str(w["q_a"].dtype) == "torch.bfloat16" else pypto.DT_FP32
        return cls(w, rotary.inv_freq, dims, dtype, scale=attn.scaling, rope_scale=float(rotary.attention_scaling),
                   **kwargs)

    def reset(self):
        self.length = 0

    def _step(self, x):
        import torch

        n = x.shape[0]
        if self.length + n > self.latent.shape[0]:
            raise ValueError(f"MlaAttention: {self.length + n} positions exceed the cache's {self.latent.shape[0]}")
        pos = torch.arange(self.length, self.length + n)
        self.length += n
        t = self.length
        w = self.w
        kernel = self.decode_kernel if n == 1 else self.prefill_kernel
        return kernel(x, pos, self.inv_freq, self.latent[:t], self.k_rope[:t], *[w[k] for k in WEIGHTS])

    def prefill(self, x):
        return self._step(x)

    def decode(self, x):
        if x.shape[0] != 1:
            raise ValueError(f"MlaAttention.decode: x has {x.shape[0]} tokens, expected 1")
        return self._step(x)

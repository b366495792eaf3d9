"""A LLaMA-3 decoder layer as pypto kernels, at LLaMA-3-8B's dimensions by default.

    h   = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1)))   n1 = rms_norm(x)
    out = h + down_proj(silu(gate_proj(n2)) * up_proj(n2))                          n2 = rms_norm(h)

RoPE rotates the two halves of each head (`rotate_half`) by the angles position * inv_freq
(inv_freq_i = theta^(-2i/d)); the cos/sin tables are computed inside the kernel from the
positions. Query head j reads key/value head j // (heads / kv_heads) (grouped-query attention),
causally: query i of a chunk of S new tokens after T - S cached ones sees keys 0 .. T - S + i.

Two kernels make a step, prefill (S tokens) or decode (one):

- `qkv`: RMSNorm, the q/k/v projections and RoPE; writes k and v into the last S positions of
  the KV cache views it is given ([kv_heads, T, head_dim], the layout of transformers' cache
  with batch 1) and returns q [S, heads, head_dim];
- `attend` (S tokens, a causal mask) or `attend_decode` (one token: the query heads of a group
  are the rows of one attention, no mask): attention over the cache, the output projection, the
  residual, RMSNorm and the SwiGLU MLP with its residual.

Weights stay in torch's nn.Linear layout [out, in] and are read transposed (`b_trans=True`).
The Python here binds weights, allocates the cache and calls the kernels: every computation of
the layer runs in kernels pypto generated.
"""

import dataclasses
import math

import pypto
from models import common

S = pypto.frontend.dynamic("S")   # new tokens of the step
T = pypto.frontend.dynamic("T")   # cached positions, the new tokens' included


@dataclasses.dataclass(frozen=True)
class LlamaDims:
    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 14336
    eps: float = 1e-5
    rope_theta: float = 500000.0

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


LLAMA3_8B = LlamaDims()

# The weights of one layer, in the order the kernels take them (torch's nn.Linear layout).
QKV_WEIGHTS = ("input_norm", "q_proj", "k_proj", "v_proj")
MLP_WEIGHTS = ("o_proj", "post_norm", "gate_proj", "up_proj", "down_proj")


# Tile-buffer budget of the kernels (a core's L2 of 1 MiB, not the default 256 KiB): prefill's
# matmuls take 256-row tiles, so each weight panel is read once per 256 tokens (32-row tiles: half
# the speed at 512 tokens); decode's weight tiles of whole rows are read where they lie, so a large
# one costs no copy, and makes fewer, larger tasks (models/common.py).
BUDGET_KB = common.BUDGET_KB


def _row_tiles():
    pypto.set_vec_tile_shapes(32, 512)
    pypto.set_cube_tile_shapes(*common.PREFILL_TILES)


def _rope(x, cos, sin, half: int):
    """x [S, heads, D] rotated: x * cos + rotate_half(x) * sin, with cos/sin [S, 1, D]."""
    n, h = x.shape[0], x.shape[1]
    pypto.set_vec_tile_shapes(16, 8, 2 * half)
    x1 = pypto.view(x, [n, h, half], [0, 0, 0])
    x2 = pypto.view(x, [n, h, half], [0, 0, half])
    rotated = pypto.concat([pypto.neg(x2), x1], -1)
    return x * cos + rotated * sin


def _cos_sin(pos, inv_freq, n):
    """The cos and sin tables [n, 1, D] (fp32) of the positions pos [n] (int64, as torch's)."""
    pypto.set_vec_tile_shapes(64)
    pos = pypto.cast(pos, pypto.DT_FP32)
    pypto.set_vec_tile_shapes(8, 64)
    freqs = pypto.reshape(pos, [n, 1]) * pypto.reshape(inv_freq, [1, inv_freq.shape[0]])
    emb = pypto.concat([freqs, freqs], -1)
    d = emb.shape[1]
    cos, sin = pypto.cos(emb), pypto.sin(emb)
    return pypto.reshape(cos, [n, 1, d]), pypto.reshape(sin, [n, 1, d])


def _fp32(x):
    """x in fp32 (the probabilities of an attention are fp32; its values join them in fp32)."""
    return x if x.dtype == pypto.DT_FP32 else pypto.cast(x, pypto.DT_FP32)


def _output_and_mlp(x, o, o_proj, post_norm, gate_proj, up_proj, down_proj, eps, dtype):
    """x + o_proj(o), then the MLP block with its residual."""
    _row_tiles()
    h = x + common.linear(o, o_proj, dtype)
    n2 = pypto.rms_norm(h, post_norm, eps)
    gate = common.linear(n2, gate_proj, dtype)
    up = common.linear(n2, up_proj, dtype)
    return h + common.linear(pypto.silu(gate) * up, down_proj, dtype)


def make_kernels(dims: LlamaDims = LLAMA3_8B, dtype=pypto.DT_FP32):
    """The layer's kernels for these dims and activation/weight dtype (DT_FP32 or DT_BF16):
    a namespace with `qkv` and `attend` (S tokens), `qkv_decode` and `attend_decode` (one)."""
    H, NH, KV, D, F, G = dims.hidden, dims.heads, dims.kv_heads, dims.head_dim, dims.ffn, dims.group
    dt = dtype
    eps, half, scale = dims.eps, dims.head_dim // 2, 1.0 / math.sqrt(dims.head_dim)

    def qkv(x, pos, inv_freq, k_cache, v_cache, input_norm, q_proj, k_proj, v_proj):
        n, t = x.shape[0], k_cache.shape[1]
        _row_tiles()
        n1 = pypto.rms_norm(x, input_norm, eps)
        q = pypto.reshape(common.linear(n1, q_proj, dt), [n, NH, D])
        k = pypto.reshape(common.linear(n1, k_proj, dt), [n, KV, D])
        v = pypto.reshape(common.linear(n1, v_proj, dt), [n, KV, D])
        cos, sin = _cos_sin(pos, inv_freq, n)
        q = pypto.cast(_rope(q, cos, sin, half), dt)
        k = pypto.cast(_rope(k, cos, sin, half), dt)
        pypto.set_vec_tile_shapes(1, 32, D)
        pypto.assemble(pypto.permute(k, 1, 0, 2), [0, t - n, 0], k_cache)
        pypto.assemble(pypto.permute(v, 1, 0, 2), [0, t - n, 0], v_cache)
        return q

    def qkv_kernel(rows, name):
        def kernel(x: pypto.Tensor((rows, H), dt), pos: pypto.Tensor((rows,), pypto.DT_INT64),
                   inv_freq: pypto.Tensor((D // 2,), pypto.DT_FP32),
                   k_cache: pypto.Tensor((KV, T, D), dt), v_cache: pypto.Tensor((KV, T, D), dt),
                   input_norm: pypto.Tensor((H,), dt), q_proj: pypto.Tensor((NH * D, H), dt),
                   k_proj: pypto.Tensor((KV * D, H), dt), v_proj: pypto.Tensor((KV * D, H), dt)) \
                -> pypto.Tensor((rows, NH, D), dt):
            return qkv(x, pos, inv_freq, k_cache, v_cache, input_norm, q_proj, k_proj, v_proj)

        kernel.__name__ = kernel.__qualname__ = name
        return pypto.frontend.jit(kernel, pass_options={"sram_budget_kb": BUDGET_KB})

    @pypto.frontend.jit(pass_options={"sram_budget_kb": BUDGET_KB})
    def llama3_attend(x: pypto.Tensor((S, H), dt), q: pypto.Tensor((S, NH, D), dt),
                      k_cache: pypto.Tensor((KV, T, D), dt), v_cache: pypto.Tensor((KV, T, D), dt),
                      o_proj: pypto.Tensor((H, NH * D), dt), post_norm: pypto.Tensor((H,), dt),
                      gate_proj: pypto.Tensor((F, H), dt), up_proj: pypto.Tensor((F, H), dt),
                      down_proj: pypto.Tensor((H, F), dt)) -> pypto.Tensor((S, H), dt):
        n, t = x.shape[0], k_cache.shape[1]
        # Head-major views: q [KV, G, S, D] (a group of query heads per key head), k and v
        # [KV, 1, T, D], shared by the group.
        qh = pypto.permute(pypto.reshape(q, [n, KV, G, D]), 1, 2, 0, 3)
        kh = pypto.reshape(k_cache, [KV, 1, t, D])
        vh = pypto.reshape(v_cache, [KV, 1, t, D])
        # The causal mask of S queries after T - S cached positions: -inf where key > T - S + query.
        pypto.set_vec_tile_shapes(8, 256)
        mask = common.causal_mask(n, t)
        pypto.set_vec_tile_shapes(1, 1, 8, 256)
        pypto.set_cube_tile_shapes([64, 64], [D, D], [256, 256])
        scores = pypto.matmul(qh, kh, pypto.DT_FP32, b_trans=True) * scale + mask
        o = pypto.matmul(pypto.softmax(scores, -1), _fp32(vh), pypto.DT_FP32)   # [KV, G, S, D]
        pypto.set_vec_tile_shapes(8, KV, G, D)
        o = pypto.reshape(pypto.cast(pypto.permute(o, 2, 0, 1, 3), dt), [n, NH * D])
        return _output_and_mlp(x, o, o_proj, post_norm, gate_proj, up_proj, down_proj, eps, dt)

    @pypto.frontend.jit(pass_options={"sram_budget_kb": BUDGET_KB})
    def llama3_attend_decode(x: pypto.Tensor((1, H), dt), q: pypto.Tensor((1, NH, D), dt),
                             k_cache: pypto.Tensor((KV, T, D), dt), v_cache: pypto.Tensor((KV, T, D), dt),
                             o_proj: pypto.Tensor((H, NH * D), dt), post_norm: pypto.Tensor((H,), dt),
                             gate_proj: pypto.Tensor((F, H), dt), up_proj: pypto.Tensor((F, H), dt),
                             down_proj: pypto.Tensor((H, F), dt)) -> pypto.Tensor((1, H), dt):
        # One token sees every cached position: no mask, and the G query heads of a key head are
        # the rows of one attention, so each key and value block is read once per group.
        qh = pypto.reshape(q, [KV, G, D])
        pypto.set_vec_tile_shapes(1, 8, 256)
        pypto.set_cube_tile_shapes([16, 16], [D, D], [256, 256])
        scores = pypto.matmul(qh, k_cache, pypto.DT_FP32, b_trans=True) * scale
        o = pypto.matmul(pypto.softmax(scores, -1), _fp32(v_cache), pypto.DT_FP32)   # [KV, G, D]
        pypto.set_vec_tile_shapes(8, 8, D)
        o = pypto.reshape(pypto.cast(o, dt), [1, NH * D])
        return _output_and_mlp(x, o, o_proj, post_norm, gate_proj, up_proj, down_proj, eps, dt)

    class Kernels:
        qkv = qkv_kernel(S, "llama3_qkv")
        qkv_decode = qkv_kernel(1, "llama3_qkv_decode")
        attend = llama3_attend
        attend_decode = llama3_attend_decode

    return Kernels


def rope_frequencies(dims: LlamaDims):
    """The RoPE frequencies theta^(-2i/d), i < d/2 (fp32; a parameter of the model, like its
    weights, computed once in NumPy)."""
    import numpy as np

    exponent = np.arange(0, dims.head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dims.head_dim)
    return (1.0 / (np.float32(dims.rope_theta) ** exponent)).astype(np.float32)


class LlamaLayer:
    """One decoder layer with its own KV cache: `prefill(x)` takes the prompt's hidden states
    [S, hidden], `decode(x)` one token's [1, hidden]; both return the layer's output and append
    the tokens' keys and values to the cache. Arrays are torch tensors or NumPy arrays (weights
    and activations of one kind and the kernels' dtype); weights are used in place."""

    def __init__(self, weights: dict, dims: LlamaDims = LLAMA3_8B, dtype=pypto.DT_FP32, max_positions: int = 8192,
                 kernels=None, inv_freq=None):
        missing = [w for w in QKV_WEIGHTS + MLP_WEIGHTS if w not in weights]
        if missing:
            raise ValueError(f"LlamaLayer: missing weights {missing}")
        self.dims, self.dtype, self.max_positions = dims, dtype, max_positions
        self.kernels = kernels or make_kernels(dims, dtype)
        self.qkv_weights = [weights[w] for w in QKV_WEIGHTS]
        self.mlp_weights = [weights[w] for w in MLP_WEIGHTS]
        first = self.qkv_weights[1]
        self._torch = type(first).__module__.startswith("torch")
        self.inv_freq = rope_frequencies(dims) if inv_freq is None else inv_freq
        if self._torch and not type(self.inv_freq).__module__.startswith("torch"):
            import torch

            self.inv_freq = torch.from_numpy(self.inv_freq)
        self.k_cache = self._empty((dims.kv_heads, max_positions, dims.head_dim), first)
        self.v_cache = self._empty((dims.kv_heads, max_positions, dims.head_dim), first)
        self.length = 0

    @classmethod
    def from_hf(cls, layer, dims: LlamaDims | None = None, **kwargs):
        """A LlamaLayer on the weights of a transformers LlamaDecoderLayer (used in place)."""
        a, m = layer.self_attn, layer.mlp
        w = {"input_norm": layer.input_layernorm.weight, "q_proj": a.q_proj.weight, "k_proj": a.k_proj.weight,
             "v_proj": a.v_proj.weight, "o_proj": a.o_proj.weight, "post_norm": layer.post_attention_layernorm.weight,
             "gate_proj": m.gate_proj.weight, "up_proj": m.up_proj.weight, "down_proj": m.down_proj.weight}
        return cls({k: v.detach() for k, v in w.items()}, dims or dims_of(layer.self_attn.config), **kwargs)

    def _empty(self, shape, like):
        if self._torch:
            import torch

            return torch.zeros(shape, dtype=like.dtype)
        import numpy as np

        return np.zeros(shape, dtype=like.dtype)

    def _positions(self, n):
        if self.length + n > self.max_positions:
            raise ValueError(f"LlamaLayer: {self.length} cached positions and {n} new ones exceed max_positions "
                             f"{self.max_positions}")
        import numpy as np

        pos = np.arange(self.length, self.length + n, dtype=np.int64)
        if self._torch:
            import torch

            pos = torch.from_numpy(pos)
        t = self.length + n
        return pos, self.k_cache[:, :t], self.v_cache[:, :t]

    def reset(self):
        self.length = 0

    def prefill(self, x):
        pos, k, v = self._positions(x.shape[0])
        q = self.kernels.qkv(x, pos, self.inv_freq, k, v, *self.qkv_weights)
        out = self.kernels.attend(x, q, k, v, *self.mlp_weights)
        self.length += x.shape[0]
        return out

    def decode(self, x):
        pos, k, v = self._positions(1)
        q = self.kernels.qkv_decode(x, pos, self.inv_freq, k, v, *self.qkv_weights)
        out = self.kernels.attend_decode(x, q, k, v, *self.mlp_weights)
        self.length += 1
        return out


def dims_of(config) -> LlamaDims:
    """The LlamaDims of a transformers LlamaConfig (default RoPE only)."""
    rope = getattr(config, "rope_parameters", None) or {}
    rope_type = rope.get("rope_type", "default")
    if rope_type != "default":
        raise pypto.NotSupportedError(f"models/llama3: RoPE type '{rope_type}' is not supported yet (only 'default')")
    theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    return LlamaDims(hidden=config.hidden_size, heads=config.num_attention_heads, kv_heads=config.num_key_value_heads,
                     head_dim=getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
                     ffn=config.intermediate_size, eps=config.rms_norm_eps, rope_theta=float(theta))

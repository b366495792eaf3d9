"""Qwen3-Next's linear-attention layer (Qwen3NextGatedDeltaNet) as pypto kernels, at
Qwen3-Next-80B-A3B's dims by default (hidden 2048, 16 key heads and 32 value heads of dim 128, a
causal depthwise convolution of width 4).

    q, k, v, z = in_proj_qkvz(x) per key head;  b, a = in_proj_ba(x)
    q, k, v    = silu(causal_conv1d(q | k | v))           width 4 over time, per channel
    beta       = sigmoid(b);  g = -exp(A_log) * softplus(a + dt_bias)
    o          = gated_delta_rule(q, k, v, g, beta)      chunked (prefill) or recurrent (decode)
    out        = out_proj(rms_norm(o) * weight * silu(z))  per value head

Two kernels, `prefill` (S tokens, the chunked rule) and `decode` (one token, the recurrence), read
and update the layer's two states in transformers' cache layouts: the convolution's last `width`
inputs per channel [conv_dim, width] (oldest first; the window of the next token is the last
width - 1 of them and the token itself) and the rule's state [v_heads, d_k, d_v] (fp32).
`GatedDeltaNet` keeps them, or `hf.patch` hands the kernels the tensors of transformers' cache;
the kernels compute everything.
"""

import dataclasses

import pypto
from models import common
from models.qwen3_next import gated_delta as gd

S = gd.S
BUDGET_KB = common.BUDGET_KB


@dataclasses.dataclass(frozen=True)
class LayerDims:
    hidden: int = 2048
    k_heads: int = 16
    v_heads: int = 32
    k_dim: int = 128
    v_dim: int = 128
    conv_width: int = 4
    eps: float = 1e-6

    @property
    def rule(self) -> gd.DeltaDims:
        return gd.DeltaDims(self.k_heads, self.v_heads, self.k_dim, self.v_dim)

    @property
    def conv_dim(self) -> int:
        return 2 * self.k_heads * self.k_dim + self.v_heads * self.v_dim


QWEN3_NEXT_80B = LayerDims()

WEIGHTS = ("in_proj_qkvz", "in_proj_ba", "conv", "dt_bias", "A_log", "norm", "out_proj")


def _proj(x, w, dtype):
    return common.linear(x, w, dtype, multiple=8)


def make_kernels(dims: LayerDims = QWEN3_NEXT_80B, dtype=pypto.DT_FP32):
    """The layer's `prefill` and `decode` kernels for these dims and dtype (DT_FP32 or DT_BF16)."""
    H, KH, VH, DK, DV, W = dims.hidden, dims.k_heads, dims.v_heads, dims.k_dim, dims.v_dim, dims.conv_width
    KD, VD, C, G = KH * DK, VH * DV, dims.conv_dim, VH // KH
    dt, rule = dtype, dims.rule

    def layer(x, conv_state, state, in_proj_qkvz, in_proj_ba, conv, dt_bias, a_log, norm, out_proj, one_row):
        n = x.shape[0]
        pypto.set_vec_tile_shapes(8, 512)
        qkvz = pypto.reshape(_proj(x, in_proj_qkvz, dt), [n, KH, 2 * DK + 2 * G * DV])
        ba = pypto.reshape(_proj(x, in_proj_ba, pypto.DT_FP32), [n, KH, 2 * G])
        # Tiles of 64-256 KiB for the copies and the convolution below: one task a tile, and a task
        # of a few thousand elements costs more to schedule than to run.
        def part(off, width):
            pypto.set_vec_tile_shapes(16, KH, 256)
            return pypto.reshape(pypto.view(qkvz, [n, KH, width], [0, 0, off]), [n, KH * width])
        parts = [part(0, DK), part(DK, DK), part(2 * DK, G * DV)]
        z = pypto.reshape(pypto.view(qkvz, [n, KH, G * DV], [0, 0, 2 * DK + G * DV]), [n, VH, DV])
        pypto.set_vec_tile_shapes(32, 2048)
        mixed = pypto.concat(parts, -1)                                      # [n, C]: q | k | v
        # The convolution over the last W inputs of each channel (the previous call's last W first:
        # new token i sees rows i + 1 .. i + W of the padded inputs).
        pypto.set_vec_tile_shapes(32, 512)
        padded = pypto.cast(pypto.concat([pypto.transpose(conv_state, 0, 1), mixed], 0), pypto.DT_FP32)  # [W + n, C]
        taps = pypto.cast(pypto.transpose(conv, 0, 1), pypto.DT_FP32)                # [W, C]
        acc = pypto.view(padded, [n, C], [1, 0]) * pypto.view(taps, [1, C], [0, 0])
        for j in range(1, W):
            acc = acc + pypto.view(padded, [n, C], [1 + j, 0]) * pypto.view(taps, [1, C], [j, 0])
        act = pypto.silu(acc)
        if dt != pypto.DT_FP32:
            act = pypto.cast(pypto.cast(act, dt), pypto.DT_FP32)   # transformers' conv output is in dtype
        last = pypto.cast(pypto.view(padded, [W, C], [n, 0]), dt)
        pypto.set_vec_tile_shapes(512, W)
        pypto.assemble(pypto.transpose(last, 0, 1), [0, 0], conv_state)
        pypto.set_vec_tile_shapes(32, 1024)
        q = pypto.reshape(pypto.view(act, [n, KD], [0, 0]), [n, KH, DK])
        k = pypto.reshape(pypto.view(act, [n, KD], [0, KD]), [n, KH, DK])
        v = pypto.reshape(pypto.view(act, [n, VD], [0, 2 * KD]), [n, VH, DV])
        # beta and the decay g per value head.
        pypto.set_vec_tile_shapes(64, KH, 2)
        b = pypto.reshape(pypto.view(ba, [n, KH, G], [0, 0, 0]), [n, VH])
        a = pypto.reshape(pypto.view(ba, [n, KH, G], [0, 0, G]), [n, VH])
        pypto.set_vec_tile_shapes(64, VH)
        beta = pypto.sigmoid(b)
        u = a + pypto.reshape(pypto.cast(dt_bias, pypto.DT_FP32), [1, VH])
        softplus = pypto.where(u > 20.0, u, pypto.log1p(pypto.exp(u)))
        g = (0.0 - pypto.reshape(pypto.exp(pypto.cast(a_log, pypto.DT_FP32)), [1, VH])) * softplus
        qv, kv = gd.qk_per_value_head(q, k, n, rule)
        o = gd.recurrent_step(qv, kv, v, g, beta, state, rule) if one_row else \
            gd.chunked_rule(qv, kv, v, g, beta, state, n, rule)                    # [n, VH, DV] fp32
        # The gated RMSNorm per value head (rounded to dtype first, as transformers), then the output
        # projection.
        pypto.set_vec_tile_shapes(8, VH, DV)
        if dt != pypto.DT_FP32:
            o = pypto.cast(pypto.cast(o, dt), pypto.DT_FP32)
        normed = o * pypto.rsqrt(pypto.sum(o * o, -1, True) * (1.0 / DV) + dims.eps)
        if dt != pypto.DT_FP32:
            normed = pypto.cast(pypto.cast(normed, dt), pypto.DT_FP32)
        gated = normed * pypto.reshape(pypto.cast(norm, pypto.DT_FP32), [1, 1, DV]) * \
            pypto.silu(pypto.cast(z, pypto.DT_FP32))
        pypto.set_vec_tile_shapes(8, 512)
        return _proj(pypto.cast(pypto.reshape(gated, [n, VD]), dt), out_proj, dt)

    def kernel(rows, name):
        def fn(x: pypto.Tensor((rows, H), dt), conv_state: pypto.Tensor((C, W), dt),
               state: pypto.Tensor((VH, DK, DV), pypto.DT_FP32),
               in_proj_qkvz: pypto.Tensor((2 * KD + 2 * VD, H), dt), in_proj_ba: pypto.Tensor((2 * VH, H), dt),
               conv: pypto.Tensor((C, W), dt), dt_bias: pypto.Tensor((VH,), dt), a_log: pypto.Tensor((VH,), dt),
               norm: pypto.Tensor((DV,), dt), out_proj: pypto.Tensor((H, VD), dt)) -> pypto.Tensor((rows, H), dt):
            return layer(x, conv_state, state, in_proj_qkvz, in_proj_ba, conv, dt_bias, a_log, norm, out_proj,
                         one_row=isinstance(rows, int) and rows == 1)

        fn.__name__ = fn.__qualname__ = name
        return pypto.frontend.jit(fn, pass_options={"sram_budget_kb": BUDGET_KB})

    class Kernels:
        prefill = kernel(S, "gated_deltanet_prefill")
        decode = kernel(1, "gated_deltanet_decode")

    return Kernels


class GatedDeltaNet:
    """The layer on its weights (dict of WEIGHTS: torch tensors in transformers' layouts, `conv`
    [conv_dim, width]) with its two states (`conv_state` [conv_dim, width] in the weights' dtype,
    `state` [v_heads, d_k, d_v] fp32); `prefill(x)` then `decode(x)` steps (batch 1)."""

    def __init__(self, weights: dict, dims: LayerDims = QWEN3_NEXT_80B, dtype=pypto.DT_FP32, torch_ops: bool = False):
        import torch

        for name in WEIGHTS:
            if name not in weights:
                raise ValueError(f"GatedDeltaNet: weight '{name}' is missing")
        if tuple(weights["conv"].shape) != (dims.conv_dim, dims.conv_width):
            raise ValueError(f"GatedDeltaNet: weight 'conv' has shape {tuple(weights['conv'].shape)}, "
                             f"expected {(dims.conv_dim, dims.conv_width)}")
        self.dims, self.w = dims, weights
        if torch_ops:   # the kernels as torch custom ops (models.common.torch_ops), updating the states they are given
            states = ("conv_state", "state")
            self.kernels = common.torch_ops("qwen3_next", (dims, dtype), lambda: make_kernels(dims, dtype),
                                            {"prefill": states, "decode": states})
        else:
            self.kernels = make_kernels(dims, dtype)
        self.conv_state = torch.zeros(dims.conv_dim, dims.conv_width, dtype=weights["conv"].dtype)
        self.state = torch.zeros(dims.v_heads, dims.k_dim, dims.v_dim)

    @classmethod
    def from_hf(cls, module, torch_ops: bool = False):
        """The layer of a transformers Qwen3NextGatedDeltaNet (its weights used in place); with
        `torch_ops`, its kernels are called as torch custom ops."""
        dims = LayerDims(module.hidden_size, module.num_k_heads, module.num_v_heads, module.head_k_dim,
                         module.head_v_dim, module.conv_kernel_size, module.layer_norm_epsilon)
        if module.conv1d.bias is not None:
            raise pypto.NotSupportedError("models/qwen3_next: a conv1d bias is not supported yet")
        w = {"in_proj_qkvz": module.in_proj_qkvz.weight, "in_proj_ba": module.in_proj_ba.weight,
             "conv": module.conv1d.weight[:, 0, :], "dt_bias": module.dt_bias, "A_log": module.A_log,
             "norm": module.norm.weight, "out_proj": module.out_proj.weight}
        w = {k: v.detach() for k, v in w.items()}
        dtype = pypto.DT_BF16 if str(w["conv"].dtype) == "torch.bfloat16" else pypto.DT_FP32
        return cls(w, dims, dtype, torch_ops)

    def reset(self):
        self.conv_state.zero_()
        self.state.zero_()

    def weights(self):
        """The weights in the kernels' argument order."""
        return [self.w[k] for k in WEIGHTS]

    def prefill(self, x):
        return self.kernels.prefill(x, self.conv_state, self.state, *self.weights())

    def decode(self, x):
        if x.shape[0] != 1:
            raise ValueError(f"GatedDeltaNet.decode: x has {x.shape[0]} tokens, expected 1")
        return self.kernels.decode(x, self.conv_state, self.state, *self.weights())

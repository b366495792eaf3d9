"""The gated delta rule of Qwen3-Next's linear-attention layers as pypto kernels, at
Qwen3-Next-80B-A3B's dims by default (16 key heads and 32 value heads of dim 128).

Per value head (key head h // 2 serves value heads h), with q and k L2-normalised, q scaled by
d^-0.5, a decay g <= 0 (log space) and a rate beta per token, the state S [d_k, d_v] runs

    S   = S * exp(g_t)
    S   = S + k_t (beta_t (v_t - k_t^T S))^T          the delta rule: write the correction only
    o_t = q_t^T S

`recurrent` is that recurrence, one token a step (decode). `chunked` (prefill) computes the
same outputs and final state in chunks of 64 tokens, as transformers' torch_chunk_gated_delta_rule:
within a chunk, the UT transform T = (I + strictly_lower(beta K K^T * decay))^-1 (a unit lower
triangular inverse, by forward substitution over the chunk's rows) condenses the chunk's delta
updates into products; across chunks, a scan carries the state. Both kernels read and write the
state [heads_v, d_k, d_v] (fp32) they are given.
"""

import dataclasses

import pypto
from models import common

S = pypto.frontend.dynamic("S")   # tokens of the step
CHUNK = 64


@dataclasses.dataclass(frozen=True)
class DeltaDims:
    k_heads: int = 16
    v_heads: int = 32
    k_dim: int = 128
    v_dim: int = 128

    @property
    def group(self) -> int:
        return self.v_heads // self.k_heads


QWEN3_NEXT_80B = DeltaDims()


def _l2norm(x):
    """x * rsqrt(sum(x^2) + 1e-6) along the last dim (the FLA library's l2norm)."""
    return x * pypto.rsqrt(pypto.sum(x * x, -1, True) + 1e-6)


def _per_value_head(x, n, dims: DeltaDims):
    """x [n, k_heads, d] repeated for each value head of its group: [n, v_heads, d]."""
    kh, g, d = dims.k_heads, dims.group, x.shape[-1]
    pypto.set_vec_tile_shapes(8, kh, g, d)
    return pypto.reshape(pypto.reshape(x, [n, kh, 1, d]) * pypto.ones([1, 1, g, 1], pypto.DT_FP32), [n, kh * g, d])


def qk_per_value_head(q, k, n, dims: DeltaDims):
    """q and k [n, k_heads, d] -> L2-normalised (q also scaled by d^-0.5), fp32, per value head."""
    pypto.set_vec_tile_shapes(16, dims.k_heads, dims.k_dim)
    q = _l2norm(pypto.cast(q, pypto.DT_FP32)) * dims.k_dim ** -0.5
    k = _l2norm(pypto.cast(k, pypto.DT_FP32))
    return _per_value_head(q, n, dims), _per_value_head(k, n, dims)


def recurrent_step(qv, kv, v, g, beta, state, dims: DeltaDims):
    """One token: qv, kv [1, v_heads, d_k] (from qk_per_value_head), v [1, v_heads, d_v], g and beta
    [1, v_heads] (fp32); updates `state` [v_heads, d_k, d_v] and returns the output [1, v_heads, d_v]
    (fp32). Traced into the calling kernel."""
    VH, DK, DV = dims.v_heads, dims.k_dim, dims.v_dim
    pypto.set_vec_tile_shapes(VH, 1, DK)
    qv, kcol = pypto.reshape(qv, [VH, 1, DK]), pypto.reshape(kv, [VH, DK, 1])
    krow = pypto.reshape(kv, [VH, 1, DK])
    pypto.set_vec_tile_shapes(4, 32, DV)
    st = state * pypto.reshape(pypto.exp(g), [VH, 1, 1])
    pypto.set_cube_tile_shapes([8, 8], [DK, DK], [DV, DV])
    kv_mem = pypto.matmul(krow, st, pypto.DT_FP32)                          # [VH, 1, DV]
    delta = (pypto.reshape(pypto.cast(v, pypto.DT_FP32), [VH, 1, DV]) - kv_mem) * pypto.reshape(beta, [VH, 1, 1])
    st = st + kcol * delta
    out = pypto.matmul(qv, st, pypto.DT_FP32)                               # [VH, 1, DV]
    pypto.assemble(st, [0, 0, 0], state)
    return pypto.reshape(out, [1, VH, DV])


def chunked_rule(qv, kv, v, g, beta, state, n, dims: DeltaDims):
    """n tokens in chunks of 64 (same inputs as recurrent_step, n rows); updates `state` and
    returns the outputs [n, v_heads, d_v] (fp32). Traced into the calling kernel."""
    VH, DK, DV = dims.v_heads, dims.k_dim, dims.v_dim
    L = CHUNK
    nc = pypto.ceildiv(n, L)
    # Head-major, zero-padded to whole chunks: [VH, C, L, d] (padding has g = beta = 0: no effect),
    # copied so that a chunk's rows lie next to each other (the products below read [L, d] blocks;
    # read through a permuted view of the token-major input, their rows are VH * d apart and
    # share the first-level cache's sets).
    def chunks(x, d):
        pypto.set_vec_tile_shapes(VH if d == 1 else 4, 64, d)   # 128 KiB tiles: few tasks
        padded = pypto.zeros([VH, nc * L, d], pypto.DT_FP32)
        pypto.assemble(pypto.cast(pypto.permute(x, 1, 0, 2), pypto.DT_FP32), [0, 0, 0], padded)
        return pypto.reshape(padded, [VH, nc, L, d])
    Q, K, V = chunks(qv, DK), chunks(kv, DK), chunks(v, DV)
    B = chunks(pypto.reshape(beta, [n, VH, 1]), 1)                          # [VH, C, L, 1]
    G = pypto.reshape(chunks(pypto.reshape(g, [n, VH, 1]), 1), [VH, nc, L])
    pypto.set_vec_tile_shapes(4, 4, L)
    cum = pypto.cumsum(G, -1)                                                # [VH, C, L]
    # The [L, L] masks, each one tile (a 4-D tile shape would cut them into 2 x 2 tiles).
    pypto.set_vec_tile_shapes(L, L)
    rows = pypto.reshape(pypto.arange(L, dtype=pypto.DT_INT32), [L, 1])
    cols = pypto.reshape(pypto.arange(L, dtype=pypto.DT_INT32), [1, L])
    above, below = cols > rows, cols < rows
    eye = pypto.where(cols == rows, 1.0, 0.0)
    pypto.set_vec_tile_shapes(2, 2, L, L)
    diff = pypto.reshape(cum, [VH, nc, L, 1]) - pypto.reshape(cum, [VH, nc, 1, L])
    decay = pypto.exp(pypto.where(above, float("-inf"), diff))             # [VH, C, L, L], 0 above the diagonal
    pypto.set_vec_tile_shapes(2, 2, L, 64)
    kb, vb = K * B, V * B
    pypto.set_cube_tile_shapes([L, L], [64, 64], [L, L])
    ut = pypto.matmul(kb, K, pypto.DT_FP32, b_trans=True) * decay
    pypto.set_vec_tile_shapes(2, 2, L, L)
    a = pypto.zeros([VH, nc, L, L], pypto.DT_FP32)
    pypto.assemble(pypto.where(below, 0.0 - ut, 0.0), [0, 0, 0, 0], a)
    # Forward substitution: row i += row i @ A (rows above it done), i = 1 .. L-1, with heads and
    # chunks as one batch dim so that a task's block of consecutive products (matmul_output_tile:
    # 64 of them) spans heads. (A product of doubling factors (I + A)(I + A^2)... would take 10
    # products instead of 63 steps, but its powers of A overflow where the keys are correlated:
    # test_correlated_keys_and_slow_decay.)
    a_rows = pypto.reshape(a, [VH * nc, L, L])
    for i in pypto.loop(1, L, idx_name="i"):
        row = pypto.view(a_rows, [VH * nc, 1, L], [0, i, 0])
        pypto.set_cube_tile_shapes([8, 8], [L, L], [L, L])
        pypto.set_vec_tile_shapes(64, 1, L)
        pypto.assemble(row + pypto.matmul(row, a_rows, pypto.DT_FP32), [0, i, 0], a_rows)
    pypto.set_vec_tile_shapes(2, 2, L, L)
    t = a + eye
    e = pypto.exp(cum)
    pypto.set_vec_tile_shapes(2, 2, L, DV)
    pypto.set_cube_tile_shapes([L, L], [L, L], [DV, DV])
    values = pypto.matmul(t, vb, pypto.DT_FP32)                             # [VH, C, L, DV]
    k_cumdecay = pypto.matmul(t, kb * pypto.reshape(e, [VH, nc, L, 1]), pypto.DT_FP32)
    pypto.set_cube_tile_shapes([L, L], [64, 64], [L, L])
    intra = pypto.matmul(Q, K, pypto.DT_FP32, b_trans=True) * decay         # [VH, C, L, L]
    qd = Q * pypto.reshape(e, [VH, nc, L, 1])
    last = pypto.view(cum, [VH, nc, 1], [0, 0, L - 1])
    kd = K * pypto.reshape(pypto.exp(last - cum), [VH, nc, L, 1])
    chunk_decay = pypto.reshape(pypto.exp(last), [VH, nc, 1, 1])
    out = pypto.zeros([VH, nc, L, DV], pypto.DT_FP32)
    # The scan over chunks, carrying the state. Chunk c's operands are read where they lie, as
    # [VH, 1, L, d] views (no copies), against the state seen as [VH, 1, DK, DV].
    for c in pypto.loop(0, nc, idx_name="c"):
        st = pypto.reshape(state, [VH, 1, DK, DV])
        def at(x, d):
            return pypto.view(x, [VH, 1, L, d], [0, c, 0, 0])
        pypto.set_cube_tile_shapes([L, L], [DK, DK], [DV, DV])
        pypto.set_vec_tile_shapes(4, 1, L, DV)
        v_new = at(values, DV) - pypto.matmul(at(k_cumdecay, DK), st, pypto.DT_FP32)
        o = pypto.matmul(at(qd, DK), st, pypto.DT_FP32) + pypto.matmul(at(intra, L), v_new, pypto.DT_FP32)
        pypto.assemble(o, [0, c, 0, 0], out)
        cd = pypto.view(chunk_decay, [VH, 1, 1, 1], [0, c, 0, 0])
        pypto.set_vec_tile_shapes(4, 1, 64, DV)
        new_state = st * cd + pypto.matmul(at(kd, DK), v_new, pypto.DT_FP32, a_trans=True)
        pypto.set_vec_tile_shapes(4, 64, DV)
        pypto.assemble(pypto.reshape(new_state, [VH, DK, DV]), [0, 0, 0], state)
    pypto.set_vec_tile_shapes(1, 16, VH, DV)
    tokens = pypto.reshape(pypto.permute(out, 1, 2, 0, 3), [nc * L, VH, DV])
    return pypto.view(tokens, [n, VH, DV], [0, 0, 0])


def make_kernels(dims: DeltaDims = QWEN3_NEXT_80B, dtype=pypto.DT_FP32):
    """The `recurrent` (one token) and `chunked` kernels of the rule alone, for these dims; q, k, v
    in `dtype` (DT_FP32 or DT_BF16), g and beta and the state in fp32."""
    KH, VH, DK, DV = dims.k_heads, dims.v_heads, dims.k_dim, dims.v_dim
    dt = dtype

    @pypto.frontend.jit(pass_options={"sram_budget_kb": common.BUDGET_KB})
    def gated_delta_recurrent(q: pypto.Tensor((1, KH, DK), dt), k: pypto.Tensor((1, KH, DK), dt),
                              v: pypto.Tensor((1, VH, DV), dt), g: pypto.Tensor((1, VH), pypto.DT_FP32),
                              beta: pypto.Tensor((1, VH), pypto.DT_FP32),
                              state: pypto.Tensor((VH, DK, DV), pypto.DT_FP32)) -> pypto.Tensor((1, VH, DV), dt):
        qv, kv = qk_per_value_head(q, k, 1, dims)
        out = recurrent_step(qv, kv, v, g, beta, state, dims)
        pypto.set_vec_tile_shapes(1, 8, DV)
        return pypto.cast(out, dt) if dt != pypto.DT_FP32 else out * 1

    @pypto.frontend.jit(pass_options={"sram_budget_kb": common.BUDGET_KB})
    def gated_delta_chunked(q: pypto.Tensor((S, KH, DK), dt), k: pypto.Tensor((S, KH, DK), dt),
                            v: pypto.Tensor((S, VH, DV), dt), g: pypto.Tensor((S, VH), pypto.DT_FP32),
                            beta: pypto.Tensor((S, VH), pypto.DT_FP32),
                            state: pypto.Tensor((VH, DK, DV), pypto.DT_FP32)) -> pypto.Tensor((S, VH, DV), dt):
        n = q.shape[0]
        qv, kv = qk_per_value_head(q, k, n, dims)
        out = chunked_rule(qv, kv, v, g, beta, state, n, dims)
        pypto.set_vec_tile_shapes(16, VH, DV)
        return pypto.cast(out, dt) if dt != pypto.DT_FP32 else out * 1

    class Kernels:
        recurrent = gated_delta_recurrent
        chunked = gated_delta_chunked

    return Kernels

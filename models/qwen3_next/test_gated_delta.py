"""The pypto gated delta rule against transformers' own torch implementation in its Qwen3-Next
model (torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule), at Qwen3-Next-80B-A3B's
linear-attention dims (16 key heads, 32 value heads, head dim 128)."""

import pytest
import torch

from models.common import rel_err
from models.qwen3_next import gated_delta as gd

transformers = pytest.importorskip("transformers")
from transformers.models.qwen3_next.modeling_qwen3_next import (  # noqa: E402
    torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule)


def _inputs(n, dims, seed, dtype=torch.float32):
    torch.manual_seed(seed)
    q = torch.randn(1, n, dims.k_heads, dims.k_dim).to(dtype)
    k = torch.randn(1, n, dims.k_heads, dims.k_dim).to(dtype)
    v = torch.randn(1, n, dims.v_heads, dims.v_dim).to(dtype)
    g = -torch.rand(1, n, dims.v_heads) * 0.5       # log decays <= 0
    beta = torch.rand(1, n, dims.v_heads)
    return q, k, v, g, beta



@pytest.fixture(scope="module")
def real():
    return gd.make_kernels(gd.QWEN3_NEXT_80B)


@pytest.mark.parametrize("n", [150, 64, 7])
def test_chunked_prefill_then_recurrent_decode_at_qwen3_next_dims(real, n):
    dims = gd.QWEN3_NEXT_80B
    q, k, v, g, beta = _inputs(n, dims, seed=n)
    s0 = torch.randn(1, dims.v_heads, dims.k_dim, dims.v_dim) * 0.1
    want, want_state = torch_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=s0, output_final_state=True,
                                                    use_qk_l2norm_in_kernel=True)
    state = s0[0].clone()
    got = real.chunked(q[0], k[0], v[0], g[0], beta[0], state)
    assert rel_err(got, want[0]) < 1e-4
    assert rel_err(state, want_state[0]) < 1e-4
    # Two decode steps carry the state on.
    for step in range(2):
        q1, k1, v1, g1, b1 = _inputs(1, dims, seed=100 + step)
        want1, want_state = torch_recurrent_gated_delta_rule(q1, k1, v1, g1, b1, initial_state=want_state,
                                                             output_final_state=True, use_qk_l2norm_in_kernel=True)
        got1 = real.recurrent(q1[0], k1[0], v1[0], g1[0], b1[0], state)
        assert rel_err(got1, want1[0]) < 1e-4
        assert rel_err(state, want_state[0]) < 1e-4


def test_the_chunked_and_recurrent_forms_agree_token_by_token():
    dims = gd.DeltaDims(2, 4, 16, 32)
    kernels = gd.make_kernels(dims)
    q, k, v, g, beta = _inputs(70, dims, seed=3)
    chunked_state = torch.zeros(4, 16, 32)
    whole = kernels.chunked(q[0], k[0], v[0], g[0], beta[0], chunked_state)
    state = torch.zeros(4, 16, 32)
    steps = [kernels.recurrent(q[:, i], k[:, i], v[:, i], g[:, i], beta[:, i], state) for i in range(70)]
    torch.testing.assert_close(torch.cat(steps), whole, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(state, chunked_state, rtol=1e-4, atol=1e-5)


def test_bf16_inputs():
    dims = gd.DeltaDims(2, 4, 32, 32)
    kernels = gd.make_kernels(dims, gd.pypto.DT_BF16)
    q, k, v, g, beta = _inputs(90, dims, seed=5, dtype=torch.bfloat16)
    want, _ = torch_chunk_gated_delta_rule(q.float(), k.float(), v.float(), g, beta, use_qk_l2norm_in_kernel=True)
    theirs, _ = torch_chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
    got = kernels.chunked(q[0], k[0], v[0], g[0], beta[0], torch.zeros(4, 32, 32))
    assert got.dtype == torch.bfloat16
    assert rel_err(got, want[0]) < 1.5 * rel_err(theirs, want) + 1e-3


def test_correlated_keys_and_slow_decay():
    # Keys close to one shared direction, rates near 1 and almost no decay: the chunk's matrix
    # beta K K^T has entries near 1 below the diagonal, where the UT transform's powers of the
    # matrix grow like binomial coefficients (a sum of them cancels only in exact arithmetic).
    dims = gd.DeltaDims(2, 4, 32, 32)
    kernels = gd.make_kernels(dims)
    n = 130
    torch.manual_seed(11)
    base = torch.randn(1, 1, dims.k_heads, dims.k_dim)
    q = torch.randn(1, n, dims.k_heads, dims.k_dim)
    k = base + 0.05 * torch.randn(1, n, dims.k_heads, dims.k_dim)
    v = torch.randn(1, n, dims.v_heads, dims.v_dim)
    g = -torch.rand(1, n, dims.v_heads) * 1e-3
    beta = 0.9 + 0.1 * torch.rand(1, n, dims.v_heads)
    want, want_state = torch_chunk_gated_delta_rule(q.double(), k.double(), v.double(), g.double(), beta.double(),
                                                    output_final_state=True, use_qk_l2norm_in_kernel=True)
    state = torch.zeros(dims.v_heads, dims.k_dim, dims.v_dim)
    got = kernels.chunked(q[0], k[0], v[0], g[0], beta[0], state)
    assert rel_err(got, want[0].float()) < 1e-3
    assert rel_err(state, want_state[0].float()) < 1e-3

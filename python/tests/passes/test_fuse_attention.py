"""fuse_attention: attention written from primitives becomes one online-softmax
(flash) loop over key blocks, with no score matrix in global memory, and gives
torch's results for every shape, scale form, batch, dynamic dim and tail."""

import math
import re

import pytest
import torch

import pypto

F = torch.nn.functional
S_DIM = pypto.frontend.dynamic("S")
T_DIM = pypto.frontend.dynamic("T")


def _attention(q_shape, k_shape, v_shape, scale="mul", cube=None, dtype=pypto.DT_FP32, **jit_opts):
    """A jitted attention written from matmul, amax, exp, sum and div."""

    def attention(q: pypto.Tensor(q_shape, dtype), k: pypto.Tensor(k_shape, dtype), v: pypto.Tensor(v_shape, dtype)):
        pypto.set_vec_tile_shapes(8, 64)
        if cube:
            pypto.set_cube_tile_shapes(*cube)
        s = pypto.matmul(q, k, b_trans=True, out_dtype=pypto.DT_FP32)
        d = q.shape[-1]
        if scale == "mul":
            s = s * (1.0 / math.sqrt(d))
        elif scale == "div":
            s = s / math.sqrt(d)
        elif scale == "rmul":
            s = 0.5 * s
        e = pypto.exp(s - pypto.amax(s, -1, True))
        if v.dtype != pypto.DT_FP32:
            v = pypto.cast(v, pypto.DT_FP32)
        return pypto.matmul(e / pypto.sum(e, -1, True), v)

    return pypto.jit(attention, pass_options=jit_opts or None)


def _reference(q, k, v, scale="mul"):
    q, k, v = q.double(), k.double(), v.double()
    factor = {"mul": 1 / math.sqrt(q.shape[-1]), "div": 1 / math.sqrt(q.shape[-1]), "rmul": 0.5, "none": 1.0}[scale]
    return torch.softmax(q @ k.transpose(-1, -2) * factor, -1) @ v


def _passes(compiled):
    text = compiled.dump("passes")
    return {m.group(1): m.group(2) for m in re.finditer(r"-- pass (\w+) \([\d.]+ ms, (\w+)", text)}


def _memrefs(compiled):
    """name -> (shape, kind) of every memref of the Execution Graph."""
    ir = compiled.dump("execution")
    return {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(r"%(\w+) : !pto.memref<gm,([\dx]+),\w+>  // (\w+)", ir)}


@pytest.mark.parametrize("s,t,d,dv", [(128, 128, 64, 64), (200, 200, 64, 64), (100, 77, 32, 48), (5, 300, 16, 8),
                                      (64, 1, 32, 32)])
def test_fused_attention_matches_torch_on_shapes_that_do_and_do_not_divide_the_blocks(s, t, d, dv):
    fn = _attention((s, d), (t, d), (t, dv))
    q, k, v = torch.randn(s, d), torch.randn(t, d), torch.randn(t, dv)
    out = fn(q, k, v)
    torch.testing.assert_close(out, _reference(q, k, v).float(), atol=2e-5, rtol=1e-4)
    c = pypto.compile(fn, q, k, v)
    assert _passes(c)["fuse_attention"] == "changed"
    # Only the inputs, the output and the dense transposed key are memory; no S x T scores.
    mem = _memrefs(c)
    assert sorted(kind for _, kind in mem.values()) == ["input", "input", "input", "output", "view", "workspace"]
    assert mem["k_t"] == (f"{d}x{t}", "workspace")


@pytest.mark.parametrize("scale", ["mul", "div", "rmul", "none"])
def test_every_form_of_the_score_scale_is_folded_into_the_fused_op(scale):
    fn = _attention((96, 32), (96, 32), (96, 32), scale=scale)
    q, k, v = torch.randn(96, 32), torch.randn(96, 32), torch.randn(96, 32)
    torch.testing.assert_close(fn(q, k, v), _reference(q, k, v, scale).float(), atol=2e-5, rtol=1e-4)
    tg = pypto.compile(fn, q, k, v).dump("passes").split("-- pass fuse_attention")[1].split("-- pass")[0]
    factor = {"mul": 1 / math.sqrt(32), "div": 1 / math.sqrt(32), "rmul": 0.5, "none": 1.0}[scale]
    assert re.search(r"= attention\(%q, %k_t, %v, scale=([\d.e-]+), rows=128, key_block=128\)", tg)  # the default cube tile
    found = float(re.search(r"scale=([\d.e-]+)", tg).group(1))
    assert found == pytest.approx(factor, rel=1e-6)


def test_batched_attention_and_the_composite_softmax_fuse():
    @pypto.jit
    def attention(q: pypto.Tensor((3, 70, 32), pypto.DT_FP32), k: pypto.Tensor((3, 90, 32), pypto.DT_FP32),
                  v: pypto.Tensor((3, 90, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8, 64)
        pypto.set_cube_tile_shapes([32, 32], [64, 128], [64, 64])  # blocks of 32 query rows
        return pypto.matmul(pypto.softmax(pypto.matmul(q, k, b_trans=True) * 0.25, -1), v)

    q, k, v = torch.randn(3, 70, 32), torch.randn(3, 90, 32), torch.randn(3, 90, 16)
    torch.testing.assert_close(attention(q, k, v), F.scaled_dot_product_attention(q, k, v, scale=0.25), atol=2e-5,
                               rtol=1e-4)
    c = pypto.compile(attention, q, k, v)
    assert _passes(c)["fuse_attention"] == "changed"
    # The attention nest stays alone: one task per (head, block of 32 query rows), 3 x 3, after
    # the key copy's 3 x 2 tiles; fused with the copy it would be one task per head.
    assert c.stats()["incore_functions"] == 2
    attention(q, k, v)
    assert c.stats()["tasks"] == 9 + 6


@pytest.mark.parametrize("s,t", [(33, 100), (64, 64), (1, 130)])
def test_dynamic_query_and_key_lengths_share_one_kernel(s, t):
    fn = _attention((S_DIM, 32), (T_DIM, 32), (T_DIM, 32))
    q, k, v = torch.randn(s, 32), torch.randn(t, 32), torch.randn(t, 32)
    torch.testing.assert_close(fn(q, k, v), _reference(q, k, v).float(), atol=2e-5, rtol=1e-4)
    assert _passes(pypto.compile(fn, q, k, v))["fuse_attention"] == "changed"


def test_dynamic_lengths_reuse_one_compiled_library():
    fn = _attention((S_DIM, 16), (T_DIM, 16), (T_DIM, 16))
    libs = set()
    for s, t in ((10, 70), (40, 129)):
        q, k, v = torch.randn(s, 16), torch.randn(t, 16), torch.randn(t, 16)
        torch.testing.assert_close(fn(q, k, v), _reference(q, k, v).float(), atol=2e-5, rtol=1e-4)
        libs.add(pypto.compile(fn, q, k, v).stats()["library"])
    assert len(libs) == 1


def test_a_dynamic_head_size_keeps_the_primitives_and_is_still_right():
    d_dim = pypto.frontend.dynamic("D")
    fn = _attention((48, d_dim), (40, d_dim), (40, 24), scale="none")
    q, k, v = torch.randn(48, 20), torch.randn(40, 20), torch.randn(40, 24)
    torch.testing.assert_close(fn(q, k, v), _reference(q, k, v, "none").float(), atol=2e-5, rtol=1e-4)
    assert _passes(pypto.compile(fn, q, k, v))["fuse_attention"] == "unchanged"


def test_very_negative_scores_in_a_tail_key_block_stay_finite():
    # Every score is about -5000 (exact in fp32): exp(0 - max) of the zero-filled columns past the
    # key tail would overflow to inf (and inf * 0 = nan) unless they are kept out.
    fn = _attention((40, 64), (70, 64), (70, 8), scale="none")
    q = torch.full((40, 64), 10.0)
    k = -8.0 + (torch.arange(70) % 16).float()[:, None].expand(70, 64) / 1024
    v = torch.randn(70, 8)
    out = fn(q, k, v)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, _reference(q, k, v, "none").float(), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("masked", [64, 128, 150])
def test_rows_whose_first_key_blocks_are_fully_masked_stay_finite(masked):
    # Scores of -inf for the first `masked` keys of every row (as a causal or padding mask gives):
    # the running max starts finite, so exp(m - max) is not exp(-inf + inf) = nan.
    fn = _attention((40, 32), (256, 32), (256, 16), scale="none")
    plain = _attention((40, 32), (256, 32), (256, 16), scale="none", disable_passes=["fuse_attention"])
    q = torch.rand(40, 32) + 0.5
    k = torch.randn(256, 32)
    k[:masked] = -math.inf
    v = torch.randn(256, 16)
    ref = torch.softmax(q @ k.T, -1) @ v
    assert torch.isfinite(ref).all()
    out = fn(q, k, v)
    assert _passes(pypto.compile(fn, q, k, v))["fuse_attention"] == "changed"
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(plain(q, k, v), ref, atol=2e-5, rtol=1e-4)


def test_a_fully_masked_row_is_nan_as_in_torch():
    fn = _attention((8, 32), (64, 32), (64, 16), scale="none")
    q, k, v = torch.rand(8, 32) + 0.5, torch.full((64, 32), -math.inf), torch.randn(64, 16)
    assert torch.isnan(torch.softmax(q @ k.T, -1) @ v).all()
    assert torch.isnan(fn(q, k, v)).all()


def test_half_precision_inputs_with_fp32_scores():
    fn = _attention((80, 32), (80, 32), (80, 32), dtype=pypto.DT_FP16)
    q, k, v = (torch.randn(80, 32, dtype=torch.float16) for _ in range(3))
    out = fn(q, k, v)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, _reference(q, k, v).float(), atol=1e-4, rtol=1e-3)
    assert _passes(pypto.compile(fn, q, k, v))["fuse_attention"] == "changed"


def test_a_chain_whose_probabilities_are_returned_is_left_unfused_and_still_right():
    @pypto.jit
    def attention(q: pypto.Tensor((48, 32), pypto.DT_FP32), k: pypto.Tensor((48, 32), pypto.DT_FP32),
                  v: pypto.Tensor((48, 32), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        p = pypto.softmax(pypto.matmul(q, k, b_trans=True), -1)
        return pypto.matmul(p, v), p

    q, k, v = torch.randn(48, 32), torch.randn(48, 32), torch.randn(48, 32)
    out, p = attention(q, k, v)
    torch.testing.assert_close(p, torch.softmax(q @ k.T, -1), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out, _reference(q, k, v, "none").float(), atol=2e-5, rtol=1e-4)
    assert _passes(pypto.compile(attention, q, k, v))["fuse_attention"] == "unchanged"


def test_disabling_the_pass_keeps_the_scores_in_a_workspace_with_the_same_result():
    q, k, v = torch.randn(64, 32), torch.randn(64, 32), torch.randn(64, 32)
    fused = _attention((64, 32), (64, 32), (64, 32))
    plain = _attention((64, 32), (64, 32), (64, 32), disable_passes=["fuse_attention"])
    torch.testing.assert_close(fused(q, k, v), plain(q, k, v), atol=2e-6, rtol=1e-5)
    c = pypto.compile(plain, q, k, v)
    assert _passes(c)["fuse_attention"] == "skipped"
    block = c.dump("block")
    assert "fused=[attention" not in block and "amax_" in block


def test_a_tight_buffer_budget_shrinks_the_key_block_then_the_query_rows():
    q, k, v = torch.randn(64, 128), torch.randn(256, 128), torch.randn(256, 128)
    fn = _attention((64, 128), (256, 128), (256, 128), cube=((64, 64), (128, 128), (128, 128)), sram_budget_kb=96)
    torch.testing.assert_close(fn(q, k, v), _reference(q, k, v).float(), atol=2e-5, rtol=1e-4)
    text = pypto.compile(fn, q, k, v).dump("passes")
    m = re.search(r"shrank the cube tile of attention_\d+ from m=64, k=128, n=128 to m=(\d+), k=128, n=(\d+)", text)
    rows, block = map(int, m.groups())
    assert block < 128 and rows <= 64


def test_attention_tiles_are_one_parallel_task_per_query_block():
    fn = _attention((256, 64), (256, 64), (256, 64), cube=((64, 64), (64, 64), (128, 128)))
    q, k, v = torch.randn(256, 64), torch.randn(256, 64), torch.randn(256, 64)
    c = pypto.compile(fn, q, k, v)
    fn(q, k, v)
    # 4 tiles of the key copy (64 x 64 tiles of the 64 x 256 transposed key) and 4 query blocks of 64 rows.
    assert c.stats()["tasks"] == 4 + 4
    ir = c.dump("block")
    assert re.search(r"FOR %j\d+:idx, 0:idx, 2:idx", ir)  # two key blocks of 128 inside each task


def _masked_gqa(hk, g, d, mask_rank, scale_first=True, mask_dtype=pypto.DT_FP32):
    """Grouped-query attention, q [hk, g, S, d] against one key/value head per group [hk, 1, T, d],
    with an additive mask of rank `mask_rank` ([S, T], [1, S, T] or [hk, g, S, T])."""
    mask_shape = {2: (S_DIM, T_DIM), 3: (1, S_DIM, T_DIM), 4: (hk, g, S_DIM, T_DIM)}[mask_rank]

    @pypto.frontend.jit
    def attention(q: pypto.Tensor((hk, g, S_DIM, d), pypto.DT_FP32), k: pypto.Tensor((hk, 1, T_DIM, d), pypto.DT_FP32),
                  v: pypto.Tensor((hk, 1, T_DIM, d), pypto.DT_FP32), mask: pypto.Tensor(mask_shape, mask_dtype)):
        pypto.set_vec_tile_shapes(1, 1, 8, 64)
        pypto.set_cube_tile_shapes([32, 32], [64, 64], [64, 64])
        s = pypto.matmul(q, k, b_trans=True)
        s = s * (1 / math.sqrt(d)) + mask if scale_first else mask + s / math.sqrt(d)
        return pypto.matmul(pypto.softmax(s, -1), v)

    return attention


def _causal(s, t, dtype=torch.float32):
    """The additive causal mask of s queries at the end of t keys (0 or -inf)."""
    return torch.full((s, t), -math.inf).triu(t - s + 1).to(dtype)


@pytest.mark.parametrize("s,t", [(100, 100), (64, 64), (37, 150), (1, 77)])
def test_a_causal_mask_and_grouped_heads_fuse_and_match_sdpa(s, t):
    hk, g, d = 2, 3, 32
    fn = _masked_gqa(hk, g, d, 2)
    q, k, v = torch.randn(hk, g, s, d), torch.randn(hk, 1, t, d), torch.randn(hk, 1, t, d)
    mask = _causal(s, t)
    out = fn(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q.double(), k.double().expand(hk, g, t, d), v.double().expand(hk, g, t, d),
                                         attn_mask=mask.double())
    torch.testing.assert_close(out, ref.float(), atol=2e-5, rtol=1e-4)
    c = pypto.compile(fn, q, k, v, mask)
    assert _passes(c)["fuse_attention"] == "changed"
    assert re.search(r"attention\(%q, %k_t, %v, %mask, scale=", c.dump("passes")), c.dump("passes")
    # No buffer of scores: the only [S, T] memref is the mask itself.
    score_shaped = [ln for ln in c.dump("execution").splitlines() if re.search(r"memref<\w+,[\dx]*\(S\)x\(T\)", ln)]
    assert [ln.split(":")[0].strip() for ln in score_shaped] == ["%mask"], score_shaped


@pytest.mark.parametrize("mask_rank", [3, 4])
def test_masks_of_every_rank_and_either_operand_order(mask_rank):
    hk, g, d, s, t = 2, 2, 16, 45, 70
    fn = _masked_gqa(hk, g, d, mask_rank, scale_first=False)
    q, k, v = torch.randn(hk, g, s, d), torch.randn(hk, 1, t, d), torch.randn(hk, 1, t, d)
    mask = torch.randn((1, s, t) if mask_rank == 3 else (hk, g, s, t))  # any additive bias, not only 0/-inf
    mask[..., 5] = -math.inf
    ref = torch.softmax(q.double() @ k.double().transpose(-1, -2) / math.sqrt(d) + mask.double(), -1) @ v.double()
    torch.testing.assert_close(fn(q, k, v, mask), ref.float(), atol=2e-5, rtol=1e-4)
    assert _passes(pypto.compile(fn, q, k, v, mask))["fuse_attention"] == "changed"


def test_a_bf16_mask_is_read_in_fp32():
    hk, g, d, s = 1, 4, 32, 66
    fn = _masked_gqa(hk, g, d, 2, mask_dtype=pypto.DT_BF16)
    q, k, v = torch.randn(hk, g, s, d), torch.randn(hk, 1, s, d), torch.randn(hk, 1, s, d)
    mask = _causal(s, s, torch.bfloat16)
    ref = F.scaled_dot_product_attention(q, k.expand(hk, g, s, d), v.expand(hk, g, s, d), is_causal=True)
    torch.testing.assert_close(fn(q, k, v, mask), ref, atol=2e-5, rtol=1e-4)


def test_a_mask_of_the_wrong_shape_keeps_the_primitives():
    # A [1, T] padding row broadcast over the queries is not a block of the scores: left unfused, still right.
    @pypto.frontend.jit
    def attention(q: pypto.Tensor((2, 40, 16), pypto.DT_FP32), k: pypto.Tensor((2, 50, 16), pypto.DT_FP32),
                  v: pypto.Tensor((2, 50, 16), pypto.DT_FP32), mask: pypto.Tensor((1, 50), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8, 64)
        return pypto.matmul(pypto.softmax(pypto.matmul(q, k, b_trans=True) + mask, -1), v)

    q, k, v = torch.randn(2, 40, 16), torch.randn(2, 50, 16), torch.randn(2, 50, 16)
    mask = torch.zeros(1, 50)
    mask[0, 40:] = -math.inf
    ref = torch.softmax(q @ k.transpose(-1, -2) + mask, -1) @ v
    torch.testing.assert_close(attention(q, k, v, mask), ref, atol=2e-5, rtol=1e-4)
    assert _passes(pypto.compile(attention, q, k, v, mask))["fuse_attention"] == "unchanged"


def _in_kernel_mask(hk, g, d, compare):
    """Grouped-query attention whose additive mask the kernel builds from arange over dynamic S
    queries at the end of T keys: -inf where compare(j - i) holds for key j of query row i."""

    @pypto.frontend.jit
    def attention(q: pypto.Tensor((hk, g, S_DIM, d), pypto.DT_FP32), k: pypto.Tensor((hk, 1, T_DIM, d), pypto.DT_FP32),
                  v: pypto.Tensor((hk, 1, T_DIM, d), pypto.DT_FP32)):
        n, t = q.shape[2], k.shape[2]
        pypto.set_vec_tile_shapes(64, 64)
        rows = pypto.reshape(pypto.arange(n, dtype=pypto.DT_INT32), [n, 1])
        cols = pypto.reshape(pypto.arange(t, dtype=pypto.DT_INT32), [1, t])
        mask = pypto.where(compare(cols - rows, t - n), float("-inf"), 0.0)
        pypto.set_vec_tile_shapes(1, 1, 8, 64)
        pypto.set_cube_tile_shapes([32, 32], [64, 64], [64, 64])
        s = pypto.matmul(q, k, b_trans=True) * (1 / math.sqrt(d))
        return pypto.matmul(pypto.softmax(s + mask, -1), v)

    return attention


@pytest.mark.parametrize("s,t", [(100, 100), (64, 64), (37, 150), (1, 77), (130, 200)])
def test_a_causal_mask_built_in_the_kernel_skips_the_key_blocks_past_each_row_block(s, t):
    hk, g, d = 2, 2, 32
    fn = _in_kernel_mask(hk, g, d, lambda diff, c: diff > c)
    q, k, v = torch.randn(hk, g, s, d), torch.randn(hk, 1, t, d), torch.randn(hk, 1, t, d)
    ref = F.scaled_dot_product_attention(q.double(), k.double().expand(hk, g, t, d), v.double().expand(hk, g, t, d),
                                         attn_mask=_causal(s, t).double())
    torch.testing.assert_close(fn(q, k, v), ref.float(), atol=2e-5, rtol=1e-4)
    c = pypto.compile(fn, q, k, v)
    # The bound T - S is symbolic: one kernel serves every length.
    assert re.search(r"attention\(.*, causal=\(?T - S\)?\)", c.dump("passes")), c.dump("passes")
    # The key loop of a task stops at its last row's bound (row block offset + 32 rows + T - S).
    assert re.search(r"for \(int64_t v_j\d+ = INT64_C\(0\); v_j\d+ < pto::floordiv\(\(pto::imin\(", c.source())


def test_a_greater_or_equal_causal_compare_is_recognised_too():
    hk, g, d, s, t = 1, 2, 16, 70, 90
    fn = _in_kernel_mask(hk, g, d, lambda diff, c: diff >= c + 1)
    q, k, v = torch.randn(hk, g, s, d), torch.randn(hk, 1, t, d), torch.randn(hk, 1, t, d)
    ref = F.scaled_dot_product_attention(q.double(), k.double().expand(hk, g, t, d), v.double().expand(hk, g, t, d),
                                         attn_mask=_causal(s, t).double())
    torch.testing.assert_close(fn(q, k, v), ref.float(), atol=2e-5, rtol=1e-4)
    assert "causal=" in pypto.compile(fn, q, k, v).dump("passes")


def test_a_mask_that_is_not_causal_visits_every_key_block():
    # -inf where j - i < T - S (the keys before the diagonal): no block is skippable by the causal rule.
    hk, g, d, s, t = 1, 2, 16, 70, 150
    fn = _in_kernel_mask(hk, g, d, lambda diff, c: diff < c)
    q, k, v = torch.randn(hk, g, s, d), torch.randn(hk, 1, t, d), torch.randn(hk, 1, t, d)
    mask = torch.full((s, t), -math.inf).tril(t - s - 1)
    ref = torch.softmax(q.double() @ k.double().transpose(-1, -2) / math.sqrt(d) + mask.double(), -1) @ v.double()
    torch.testing.assert_close(fn(q, k, v), ref.float(), atol=2e-5, rtol=1e-4)
    c = pypto.compile(fn, q, k, v)
    assert _passes(c)["fuse_attention"] == "changed"
    assert "causal=" not in c.dump("passes")

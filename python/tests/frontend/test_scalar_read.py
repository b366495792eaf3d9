"""PyPTO's single-element access `x[i, j]` on a DT_INT32 tensor: a symbolic scalar read from the
tensor's memory when the kernel runs (offsets, valid shapes and loop bounds may use it)."""

import numpy as np
import pytest
import torch

import pypto

N = 48
SEGMENTS = 5


def _segments(counts):
    counts = np.asarray(counts, dtype=np.int32)
    starts = (np.cumsum(counts) - counts).astype(np.int32)
    return torch.from_numpy(starts), torch.from_numpy(counts)


def _make_segment_kernel(dtype, rows):
    @pypto.frontend.jit
    def segment_scale(x: pypto.Tensor((pypto.DYNAMIC, N), dtype), starts: pypto.Tensor((SEGMENTS,), pypto.DT_INT32),
                      counts: pypto.Tensor((SEGMENTS,), pypto.DT_INT32)) -> pypto.Tensor((pypto.DYNAMIC, N), dtype):
        pypto.set_vec_tile_shapes(rows, 16)
        out = pypto.zeros(x.shape, dtype)
        for s in pypto.loop(SEGMENTS, idx_name="s"):
            start, count = starts[s], counts[s]
            for b in pypto.loop(0, pypto.ceildiv(count, rows), idx_name="b"):
                n = pypto.min(rows, count - b * rows)
                block = pypto.view(x, [n, N], [start + b * rows, 0])
                # Segment s is scaled by s + 1 and shifted by its row count.
                y = block * (s + 1) + count
                pypto.assemble(y, [start + b * rows, 0], out)
        return out

    return segment_scale


@pytest.mark.parametrize("dtype", [pypto.DT_FP32, pypto.DT_BF16])
@pytest.mark.parametrize("rows", [4, 8])
def test_segments_read_from_memory_bound_loops_and_offsets(dtype, rows):
    kernel = _make_segment_kernel(dtype, rows)
    tdt = torch.float32 if dtype == pypto.DT_FP32 else torch.bfloat16
    # Counts that divide the block, leave a tail, are zero, and leave rows no segment covers.
    for counts in ([8, 3, 0, 13, 5], [0, 0, 1, 16, 2], [7, 7, 7, 7, 7]):
        starts, cnt = _segments(counts)
        total = int(cnt.sum()) + 3
        x = torch.randn(total, N).to(tdt)
        want = torch.zeros(total, N, dtype=torch.float32)
        for s in range(SEGMENTS):
            a, c = int(starts[s]), int(cnt[s])
            want[a:a + c] = x[a:a + c].float() * (s + 1) + c
        got = kernel(x, starts, cnt)
        tol = 1e-6 if dtype == pypto.DT_FP32 else 2e-2
        torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


def test_the_same_kernel_follows_new_data_without_recompiling():
    kernel = _make_segment_kernel(pypto.DT_FP32, 4)
    x = np.random.default_rng(0).standard_normal((30, N)).astype(np.float32)
    for counts in ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]):
        starts, cnt = _segments(counts)
        got = kernel(x, starts.numpy(), cnt.numpy())
        a, c = int(starts[4]), int(cnt[4])
        np.testing.assert_allclose(got[a:a + c], x[a:a + c] * 5 + c, rtol=1e-6)
    assert len(kernel._cache) == 1   # one compiled program serves both


def test_a_grouped_matmul_reads_each_groups_rows_and_weights():
    G, K, M = 3, 32, 24

    @pypto.frontend.jit
    def grouped(x: pypto.Tensor((pypto.DYNAMIC, K), pypto.DT_FP32), w: pypto.Tensor((G, M, K), pypto.DT_FP32),
                offs: pypto.Tensor((G + 1,), pypto.DT_INT32)) -> pypto.Tensor((pypto.DYNAMIC, M), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, 32)
        pypto.set_cube_tile_shapes([8, 8], [32, 32], [32, 32])
        out = pypto.zeros([x.shape[0], M], pypto.DT_FP32)
        for g in pypto.loop(G, idx_name="g"):
            lo, hi = offs[g], offs[g + 1]
            for b in pypto.loop(0, pypto.ceildiv(hi - lo, 8), idx_name="b"):
                n = pypto.min(8, hi - lo - b * 8)
                y = pypto.matmul(pypto.view(x, [n, K], [lo + b * 8, 0]), w[g], pypto.DT_FP32, b_trans=True)
                pypto.assemble(y, [lo + b * 8, 0], out)
        return out

    x, w = torch.randn(29, K), torch.randn(G, M, K)
    offs = torch.tensor([0, 11, 11, 29], dtype=torch.int32)
    want = torch.cat([x[0:11] @ w[0].T, x[11:29] @ w[2].T])
    torch.testing.assert_close(grouped(x, w, offs), want, rtol=1e-5, atol=1e-5)


def test_a_2d_table_and_negative_indices():
    @pypto.frontend.jit
    def pick(x: pypto.Tensor((16, 8), pypto.DT_FP32), table: pypto.Tensor((2, 3), pypto.DT_INT32)) \
            -> pypto.Tensor((4, 8), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(4, 8)
        # table[-1, 0]: the row offset; table[0, -1]: the scale.
        return pypto.view(x, [4, 8], [table[-1, 0], 0]) * table[0, -1]

    x = torch.randn(16, 8)
    table = torch.tensor([[0, 0, 3], [5, 0, 0]], dtype=torch.int32)
    torch.testing.assert_close(pick(x, table), x[5:9] * 3)


def test_the_dumps_show_the_read():
    kernel = _make_segment_kernel(pypto.DT_FP32, 4)
    starts, cnt = _segments([1, 2, 3, 4, 5])
    c = pypto.compile(kernel, torch.randn(15, N), starts, cnt)
    assert "= read %starts[s]" in c.dump("tensor")
    assert "READ %starts_v0 <- %starts[s]" in c.pto()
    assert c.stats()["tasks"] is None   # how many tasks run depends on the data


def test_an_index_outside_the_tensor_is_an_error_when_the_kernel_runs():
    kernel = _make_segment_kernel(pypto.DT_FP32, 4)
    starts, cnt = _segments([1, 2, 3, 4, 5])
    cnt[2] = 40   # segment 2's rows now leave x
    with pytest.raises(Exception, match="outside"):
        kernel(torch.randn(15, N), starts, cnt)


def test_reading_a_computed_tensor_is_not_supported_yet():
    @pypto.frontend.jit
    def bad(x: pypto.Tensor((8, 8), pypto.DT_FP32), i: pypto.Tensor((2,), pypto.DT_INT32)) \
            -> pypto.Tensor((1, 8), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, 8)
        j = i + 1
        return pypto.view(x, [1, 8], [j[0], 0]) * 1

    with pytest.raises(pypto.NotSupportedError, match=r"test_scalar_read.py:[0-9]+: only a parameter of the kernel can be read"):
        bad(torch.randn(8, 8), torch.zeros(2, dtype=torch.int32))


def test_reading_a_tensor_the_kernel_writes_is_not_supported_yet():
    @pypto.frontend.jit
    def bad(x: pypto.Tensor((8, 8), pypto.DT_FP32), i: pypto.Tensor((2,), pypto.DT_INT32)) \
            -> pypto.Tensor((1, 8), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, 8)
        y = pypto.view(x, [1, 8], [i[0], 0]) * 1
        pypto.assemble(pypto.full([2], 7, pypto.DT_INT32), [0], i)
        return y

    with pytest.raises(pypto.NotSupportedError, match="reads a scalar from 'i'.*also writes 'i'"):
        bad(torch.randn(8, 8), torch.zeros(2, dtype=torch.int32))


def test_a_static_index_outside_the_dim_is_an_error_at_trace_time():
    @pypto.frontend.jit
    def bad(x: pypto.Tensor((8, 8), pypto.DT_FP32), i: pypto.Tensor((2,), pypto.DT_INT32)) \
            -> pypto.Tensor((1, 8), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.view(x, [1, 8], [i[2], 0]) * 1

    with pytest.raises(pypto.UserError, match="index 2 is out of range for dim 0 of size 2"):
        bad(torch.randn(8, 8), torch.zeros(2, dtype=torch.int32))


def test_other_dtypes_and_partial_indices_still_give_views():
    @pypto.frontend.jit
    def views(x: pypto.Tensor((4, 8), pypto.DT_FP32), i: pypto.Tensor((4, 8), pypto.DT_INT32)) \
            -> pypto.Tensor((8,), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8)
        return x[1] + pypto.cast(i[2], pypto.DT_FP32)

    x, i = torch.randn(4, 8), torch.arange(32, dtype=torch.int32).reshape(4, 8)
    torch.testing.assert_close(views(x, i), x[1] + i[2].float())

"""``out[b:, ...] = t``: PyPTO's offset-style slice assignment. A slice without a stop takes
its length from the value, so ``t`` is written at offset ``b``; slices with a stop keep
meaning the region they name."""

import pytest
import torch

import pypto


@pytest.mark.parametrize("rows, tile", [(8, 4), (9, 4)])  # the tile divides the rows, or does not
@pytest.mark.parametrize("dt, tdt", [(pypto.DT_FP32, torch.float32), (pypto.DT_FP16, torch.float16),
                                     (pypto.DT_BF16, torch.bfloat16)])
def test_blocks_written_at_a_loop_offset(rows, tile, dt, tdt):
    B = pypto.frontend.dynamic("B")

    @pypto.frontend.jit
    def f(x: pypto.Tensor((B, rows, 24), dt), out: pypto.Tensor((B, rows, 24), dt)):
        pypto.set_vec_tile_shapes(1, tile, 16)
        for b in pypto.loop(0, B, 1):
            blk = x[b:b + 1, :, :]
            out[b:, ...] = pypto.exp(blk) * 2.0  # region [b, b+1) x all x all, from the value's shape

    for batch in (3, 5):
        x = torch.randn(batch, rows, 24).to(tdt)
        out = torch.zeros(batch, rows, 24, dtype=tdt)
        f(x, out)
        torch.testing.assert_close(out.float(), (torch.exp(x.float()) * 2).to(tdt).float(), rtol=2e-2, atol=1e-2)


def test_a_smaller_block_at_static_offsets_leaves_the_rest():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((3, 5), pypto.DT_FP32), out: pypto.Tensor((8, 10), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4)
        out[4:, 5:] = x + 1.0      # rows 4..6, cols 5..9
        out[0, 1:] = x[0, :] * 3.0  # an int index drops the dim: row 0, cols 1..5

    x = torch.randn(3, 5)
    out = torch.full((8, 10), -7.0)
    f(x, out)
    ref = torch.full((8, 10), -7.0)
    ref[4:7, 5:10] = x + 1
    ref[0, 1:6] = x[0] * 3
    torch.testing.assert_close(out, ref)


def test_a_region_that_does_not_fit_names_the_dim():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((4, 4), pypto.DT_FP32), out: pypto.Tensor((6, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        out[3:, :] = x

    with pytest.raises(ValueError, match=r"a region of 4 elements from offset 3 \(step 1\) does not fit dim 0 of size 6"):
        f(torch.randn(4, 4), torch.zeros(6, 4))


def test_an_explicit_stop_still_names_the_region():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((2, 4), pypto.DT_FP32), out: pypto.Tensor((6, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        out[1:4, :] = x  # three rows named, two given

    with pytest.raises(ValueError, match=r"source of shape \[2, 4\] does not match the destination region \[3, 4\]"):
        f(torch.randn(2, 4), torch.zeros(6, 4))

"""Tensor.move (PyPTO's): a tensor takes another's data, into its own memory."""

import pytest
import torch

import pypto


@pytest.mark.parametrize("shape", [(32, 32), (40, 48)])  # one divides the 32x32 tile, one does not
@pytest.mark.parametrize("dt, tdt", [(pypto.DT_FP32, torch.float32), (pypto.DT_FP16, torch.float16),
                                     (pypto.DT_BF16, torch.bfloat16)])
def test_an_output_takes_a_results_data(shape, dt, tdt):
    @pypto.frontend.jit
    def f(a: pypto.Tensor([], dt), b: pypto.Tensor([], dt), c: pypto.Tensor([], dt)):
        for _ in pypto.loop(1):
            pypto.set_vec_tile_shapes(32, 32)
            c.move(a + b)

    a, b = torch.rand(*shape).to(tdt), torch.rand(*shape).to(tdt)
    c = torch.zeros(*shape, dtype=tdt)
    f(a, b, c)
    torch.testing.assert_close(c, a + b)


def test_a_dynamic_output_and_a_local_tensor():
    M = pypto.frontend.dynamic("M")

    @pypto.frontend.jit
    def f(a: pypto.Tensor((M, 8), pypto.DT_FP32), c: pypto.Tensor((M, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        t = pypto.zeros([M, 8])
        t.move(pypto.exp(a))      # a local tensor takes the data ...
        c.move(pypto.add(t, 1.0))  # ... and so does the output

    for m in (4, 7):
        a, c = torch.randn(m, 8), torch.zeros(m, 8)
        f(a, c)
        torch.testing.assert_close(c, torch.exp(a) + 1)


@pytest.mark.parametrize("other, kind, words", [
    ("a", ValueError, r"other has shape \[8, 8\], expected the shape \[8, 4\] of this tensor"),
    ("half", TypeError, r"other has dtype DT_FP16, expected the dtype DT_FP32 of this tensor"),
    ("number", TypeError, r"other must be a pypto.Tensor, found float"),
])
def test_mismatches_name_the_line(other, kind, words):
    @pypto.frontend.jit
    def f(a: pypto.Tensor((8, 8), pypto.DT_FP32), c: pypto.Tensor((8, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        src = {"a": a, "half": pypto.cast(pypto.view(a, [8, 4], [0, 0]), pypto.DT_FP16), "number": 1.0}[other]
        c.move(src)  # the move

    with pytest.raises(kind, match=r"pypto.Tensor.move at .*test_tensor_move.py:\d+: " + words):
        f(torch.randn(8, 8), torch.zeros(8, 4))

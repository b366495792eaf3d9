"""A PTO program binds its arguments with the same binder as a jitted function
(frontend/signature.py's Binder): the same checks, in the same words."""

import numpy as np
import pytest

import pypto
from pypto import pto

# y's rows are an expression of M, which x's rows give.
TEXT = """module @m entry @main

incore func @copy(%a: !pto.memref<gm,8x8,f32>, %b: !pto.memref<gm,8x8,f32> out) buffer_bytes=0 {
  %t = alloc_tile : !pto.tile<8x8xf32>
  %t = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  tstore %t, %b[0, 0] valid [8, 8]
  return
}

orchestration func @main(%x: !pto.memref<gm,(M)x8,f32>, %y: !pto.memref<gm,((M * 2))x8,f32> out) {
  %M = alloc_scalar : i64
  FOR %i:idx, 0:idx, (M // 8):idx, 1:idx
    CALL @copy(%a -> %x[(i * 8), 0; 8, 8], %b -> %y[(i * 8), 0; 8, 8])
  ENDFOR
  return
}
"""


@pytest.fixture(scope="module")
def prog():
    return pto.compile(TEXT)


@pytest.mark.parametrize("rows", [8, 24])
def test_dims_given_by_an_expression_are_checked_after_the_names(prog, rows):
    x = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
    y = np.full((2 * rows, 8), 7.0, np.float32)
    prog(x, y)
    np.testing.assert_array_equal(y[:rows], x)
    assert (y[rows:] == 7.0).all()
    with pytest.raises(ValueError, match=rf"@main\(\): parameter 'y' expects shape \(\(M \* 2\), 8\), found "
                                         rf"\({2 * rows - 1}, 8\) \(dim 0 must be \(M \* 2\) = {2 * rows}\)"):
        prog(x, np.zeros((2 * rows - 1, 8), np.float32))


def test_jit_and_pto_programs_word_binding_errors_alike(prog):
    M = pypto.frontend.dynamic("M")

    @pypto.frontend.jit
    def copy(x: pypto.Tensor((M, 8), pypto.DT_FP32), y: pypto.Tensor((M, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.add(x, y)

    x, y = np.zeros((8, 8), np.float32), np.zeros((16, 8), np.float32)
    cases = [
        ((x.astype(np.float64), y), TypeError, r"\(\): parameter 'x' expects dtype DT_FP32, found DT_DOUBLE \(float64\)"),
        ((x,), TypeError, r"\(\) takes \(x, y\); called with 1 positional and 0 keyword argument\(s\): "
                          r"missing argument\(s\): y"),
        ((x, [1.0]), TypeError, r"\(\): parameter 'y' expects a tensor \(torch.Tensor or numpy.ndarray\), found list"),
        ((np.zeros(8, np.float32), y), ValueError, r"\(\): parameter 'x' expects shape \(M, 8\), found \(8,\)"),
    ]
    for args, kind, words in cases:
        for fn in (copy, prog):
            with pytest.raises(kind, match=words):
                fn(*args)
    with pytest.raises(ValueError, match=r"dynamic dim 'M' is 8 in parameter 'x' but 9 in parameter 'y' \(dim 0\)"):
        copy(x, np.zeros((9, 8), np.float32))


def test_scalars_of_a_pto_program_are_ints():
    text = TEXT.replace("(M // 8):idx", "n:idx").replace("%M = alloc_scalar : i64", "%M = alloc_scalar : i64\n"
                                                                                          "  %n = alloc_scalar : i32")
    p = pto.compile(text)
    assert p.parameters == ["x", "y", "n"]
    x, y = np.ones((16, 8), np.float32), np.zeros((32, 8), np.float32)
    p(x, y, n=1)  # only the first block is copied
    assert (y[:8] == 1).all() and (y[8:] == 0).all()
    with pytest.raises(TypeError, match=r"@main\(\): scalar 'n' must be an int, found float"):
        p(x, y, 1.5)

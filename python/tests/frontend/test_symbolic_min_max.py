"""pypto.min / pypto.max, and the built-in min(a, b) / max(a, b) in a jitted function, on
symbolic scalars (PyPTO's rule): a symbolic scalar, not a Python truth value."""

import pytest
import torch

import pypto


def test_min_max_of_ints_and_symbolic_scalars():
    assert pypto.min(3, 5) == 3 and pypto.max(3, 5) == 5
    n = pypto.frontend.dynamic("n")
    assert str(pypto.min(n, 8)) == "min(n, 8)"
    assert str(pypto.max(4, n * 2)) == "max(4, (n * 2))"
    with pytest.raises(TypeError, match="pypto.min: b must be an int or a symbolic scalar, found str"):
        pypto.min(n, "8")


@pytest.mark.parametrize("rows", [16, 21, 5])  # blocks of 8: whole, a tail, a single short block
def test_builtin_min_bounds_the_last_block_of_a_dynamic_loop(rows):
    N = pypto.frontend.dynamic("N")

    @pypto.frontend.jit
    def f(x: pypto.Tensor((N, 16), pypto.DT_FP32), out: pypto.Tensor((N, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        rows = x.shape[0]
        for i in pypto.loop(0, pypto.ceildiv(rows, 8), 1):
            valid = min(rows - i * 8, 8)       # symbolic: pypto.min
            valid = max(valid, 1)              # symbolic: pypto.max
            xb = pypto.view(x, [8, 16], [i * 8, 0], valid_shape=[valid, 16])
            pypto.assemble(pypto.mul(xb, 2.0), [i * 8, 0], out)

    x = torch.randn(rows, 16)
    out = torch.zeros(rows, 16)
    f(x, out)
    torch.testing.assert_close(out, x * 2)


def test_builtin_min_on_plain_values_and_a_users_own_min_are_untouched():
    def min(a, b):  # noqa: A001 - the user's own min
        return 4

    @pypto.frontend.jit
    def f(x: pypto.Tensor((8, 8), pypto.DT_FP32)) -> pypto.Tensor((8, 8), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, max([2, 8]))  # the built-in, on a list
        return pypto.add(x, float(min(1, 2)))     # the closure's min

    x = torch.randn(8, 8)
    torch.testing.assert_close(f(x), x + 4)

"""Views, writes into views and creation ops against torch (issue 3)."""

import numpy as np
import pytest
import torch

import pypto


def test_slicing_transpose_permute_unsqueeze():
    @pypto.jit
    def f(x: pypto.Tensor((12, 40), pypto.DT_FP32), y: pypto.Tensor((2, 3, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 16)
        a = x[2:10, 5:37] * 2            # box slice
        b = x[::3, 1:2] + 0              # stepped slice: rows 0, 3, 6, 9 of column 1
        c = pypto.transpose(x, 0, 1) + 1  # (40, 12)
        pypto.set_vec_tile_shapes(2, 2, 4)
        d = pypto.permute(y, 2, 0, 1) * 1  # (4, 2, 3)
        e = pypto.unsqueeze(x[0, :], 0)    # (1, 40)
        pypto.set_vec_tile_shapes(1, 16)
        e = e - 1
        return a, b, c, d, e

    x, y = torch.randn(12, 40), torch.randn(2, 3, 4)
    a, b, c, d, e = f(x, y)
    torch.testing.assert_close(b, x[::3, 1:2])
    torch.testing.assert_close(a, x[2:10, 5:37] * 2)
    torch.testing.assert_close(c, x.t() + 1)
    torch.testing.assert_close(d, y.permute(2, 0, 1))
    torch.testing.assert_close(e, x[0:1, :] - 1)


def test_reshape_and_expand_clone_and_concat():
    @pypto.jit
    def f(x: pypto.Tensor((6, 8), pypto.DT_FP32), r: pypto.Tensor((1, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        y = pypto.exp(x)
        pypto.set_vec_tile_shapes(4, 4, 4)
        z = pypto.reshape(y, (3, 2, 8)) + 1
        pypto.set_vec_tile_shapes(4, 8)
        w = pypto.expand_clone(r, (6, 8))
        c = pypto.concat([x, w], dim=0)
        return z, w, c

    x, r = torch.randn(6, 8), torch.randn(1, 8)
    z, w, c = f(x, r)
    torch.testing.assert_close(z, torch.exp(x).reshape(3, 2, 8) + 1)
    torch.testing.assert_close(w, r.expand(6, 8))
    torch.testing.assert_close(c, torch.cat([x, r.expand(6, 8)], 0))


def test_reshape_of_a_strided_input_is_read_correctly():
    @pypto.jit
    def f(x: pypto.Tensor((8, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.reshape(x, (4, 12)) * 1

    base = torch.randn(6, 8)
    x = base.t()
    torch.testing.assert_close(f(x), x.reshape(4, 12))


def test_reshape_splitting_a_static_dim_next_to_a_dynamic_one():
    # [n, 96] and [n, 3, 32] hold n * 96 elements whatever n is: the counts match as products of the
    # same dims and constants; [n, 96] to [n, 5, 32] does not
    @pypto.jit
    def f(x: pypto.Tensor((pypto.DYNAMIC, 96), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 3, 32)
        return pypto.reshape(x, (x.shape[0], 3, 32)) * 2

    for rows in (5, 2):
        x = torch.randn(rows, 96)
        torch.testing.assert_close(f(x), x.reshape(rows, 3, 32) * 2)

    @pypto.jit
    def g(x: pypto.Tensor((pypto.DYNAMIC, 96), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 3, 32)
        return pypto.reshape(x, (x.shape[0], 5, 32)) * 2

    with pytest.raises(pypto.UserError, match=r"cannot reshape \[\w+, 96\] .* to \[\w+, 5, 32\]"):
        g(torch.randn(4, 96))


def test_reshape_splitting_a_dim_that_is_a_product():
    # [2, c * 8, 4] and [2, c, 8, 4] (c a dynamic chunk count) hold the same elements: a dim that is a
    # product counts as its factors; [2, c, 7, 4] does not match
    def make(inner):
        @pypto.jit
        def f(x: pypto.Tensor((2, pypto.DYNAMIC, 4), pypto.DT_FP32)):
            c = pypto.ceildiv(x.shape[1], 8)
            pypto.set_vec_tile_shapes(2, 8, 4)
            padded = pypto.zeros([2, c * 8, 4], pypto.DT_FP32)
            pypto.assemble(x, [0, 0, 0], padded)
            pypto.set_vec_tile_shapes(2, 1, 8, 4)
            return pypto.reshape(padded, [2, c, inner, 4]) * 2
        return f

    f = make(8)
    for n in (5, 16, 19):
        x = torch.randn(2, n, 4)
        c = -(-n // 8)
        ref = torch.zeros(2, c * 8, 4)
        ref[:, :n] = x
        torch.testing.assert_close(f(x), ref.reshape(2, c, 8, 4) * 2)

    with pytest.raises(pypto.UserError, match=r"cannot reshape \[2, .*, 4\] .* to \[2, .*, 7, 4\]"):
        make(7)(torch.randn(2, 5, 4))


def test_creation_ops():
    @pypto.jit
    def f(x: pypto.Tensor((5, 7), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        a = x + pypto.full((5, 7), 2.5, pypto.DT_FP32)
        b = pypto.zeros((5, 7), pypto.DT_FP32) + pypto.ones((5, 7), pypto.DT_FP32)
        pypto.set_vec_tile_shapes(8)
        c = pypto.arange(10) * 1
        d = pypto.arange(1.0, 2.0, 0.25) * 1
        return a, b, c, d

    x = torch.randn(5, 7)
    a, b, c, d = f(x)
    torch.testing.assert_close(a, x + 2.5)
    torch.testing.assert_close(b, torch.ones(5, 7))
    torch.testing.assert_close(c, torch.arange(10))
    torch.testing.assert_close(d, torch.arange(1.0, 2.0, 0.25))


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_output_parameters_pypto_style(kind):
    @pypto.jit
    def f(x: pypto.Tensor((10, 16), pypto.DT_FP32), out: pypto.Tensor((10, 16), pypto.DT_FP32),
          part: pypto.Tensor((4, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        out[:] = pypto.exp(x)
        part[0:2, :] = x[0:2, :] * 2
        pypto.assemble(x[8:10, :] + 1, [2, 0], part)

    x = torch.randn(10, 16)
    out, part = torch.zeros(10, 16), torch.zeros(4, 16)
    if kind == "numpy":
        x, out, part = x.numpy(), out.numpy(), part.numpy()
    assert f(x, out, part) is None
    xt, ot, pt = (torch.as_tensor(v) for v in (x, out, part))
    torch.testing.assert_close(ot, torch.exp(xt))
    torch.testing.assert_close(pt[0:2], xt[0:2] * 2)
    torch.testing.assert_close(pt[2:4], xt[8:10] + 1)


def test_output_parameter_with_strides_is_respected():
    @pypto.jit
    def f(x: pypto.Tensor((6, 5), pypto.DT_FP32), out: pypto.Tensor((6, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        out[:] = x * 3

    x = torch.randn(6, 5)
    big = torch.zeros(5, 6)
    out = big.t()  # a strided view of the caller's memory
    f(x, out)
    torch.testing.assert_close(big.t(), x * 3)


def test_view_with_valid_shape_marks_a_tail():
    @pypto.jit
    def f(x: pypto.Tensor((10, 8), pypto.DT_FP32), out: pypto.Tensor((10, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        for off in (0, 8):
            v = pypto.view(x, [8, 8], [off, 0], valid_shape=[min(8, 10 - off), 8])
            s = pypto.sum(v, -1, True)
            pypto.assemble(v / s, [off, 0], out) if off == 0 else pypto.assemble(v[0:2, :] / s[0:2, :], [off, 0], out)

    x = torch.rand(10, 8) + 0.5
    out = torch.zeros(10, 8)
    f(x, out)
    torch.testing.assert_close(out, x / x.sum(-1, keepdim=True))


def test_returning_a_parameter_or_view_returns_a_copy():
    @pypto.jit
    def f(x: pypto.Tensor((4, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return x, x[1:3, :]

    x = torch.randn(4, 6)
    a, b = f(x)
    torch.testing.assert_close(a, x)
    torch.testing.assert_close(b, x[1:3])
    assert a.data_ptr() != x.data_ptr()


def test_view_out_of_range_is_an_error():
    @pypto.jit
    def f(x: pypto.Tensor((4, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.view(x, [4, 4], [0, 4]) * 1

    with pytest.raises(ValueError, match=r"pypto.view at .*test_views.py:\d+: the view reaches index 7 of dim 1"):
        f(torch.randn(4, 6))


def test_returned_view_is_copied_with_a_tile_of_its_rank():
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), y: pypto.Tensor((2, 2, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 2, 8)
        return x[0:2, :], y * 1

    x, y = torch.randn(4, 8), torch.randn(2, 2, 8)
    a, b = f(x, y)
    torch.testing.assert_close(a, x[0:2])
    torch.testing.assert_close(b, y)


def test_fused_low_precision_intermediate_is_rounded_to_its_type():
    @pypto.jit
    def f(x: pypto.Tensor((8, 16), pypto.DT_FP16)):
        pypto.set_vec_tile_shapes(8, 16)
        z = x * 0.3
        return z, pypto.cast(z, pypto.DT_FP32)

    z, z32 = f(torch.randn(8, 16).half())
    assert torch.equal(z32, z.float())


def test_a_copy_of_every_element_makes_no_zero_fill_first():
    x = torch.randn(20, 48)

    @pypto.jit
    def whole(x: pypto.Tensor((20, 48), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.clone(x), pypto.scatter(x, 1, pypto.full([20, 1], 3, pypto.DT_INT64), 0.0)

    c = whole.compile(x)
    assert ", covered)" in c.dump()
    assert "tfill" not in c.pto().split("incore func @assemble")[1].split("incore func")[0]
    a, b = whole(x)
    assert torch.equal(a, x)
    assert torch.equal(b, x.scatter(1, torch.full((20, 1), 3), 0.0))

    @pypto.jit
    def tail(x: pypto.Tensor((20, 48), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        v = pypto.view(x, [20, 48], [0, 0], valid_shape=[20, 40])  # a tail: the rest stays zero
        return pypto.clone(v)

    assert ", covered" not in tail.compile(x).dump()
    got = tail(x)
    assert torch.equal(got[:, :40], x[:, :40])

N = pypto.frontend.dynamic("N")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_concat_of_whole_parts_and_copies_of_dynamic_views_make_no_zero_fill(dtype):
    """concat's parts and a reshaped copy of a permuted view write every element, dynamic dims and
    tails included: their outputs are not filled first, and the results match torch's."""
    dt = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16}[dtype]

    @pypto.jit
    def f(x: pypto.Tensor((N, 24), dt), y: pypto.Tensor((N, 10), dt), z: pypto.Tensor((3, 24), dt)):
        pypto.set_vec_tile_shapes(8, 16)
        cols = pypto.concat([x, y], 1)                 # [N, 34]
        rows = pypto.concat([z, x], 0)                 # [3 + N, 24]
        pypto.set_vec_tile_shapes(4, 8, 8)
        flat = pypto.reshape(pypto.permute(pypto.reshape(x, [N, 4, 6]), 1, 0, 2), [4 * N, 6])
        return cols * 1, rows * 1, flat * 1

    for n in (1, 13, 32):
        x, y, z = (torch.randn(n, 24).to(dtype), torch.randn(n, 10).to(dtype), torch.randn(3, 24).to(dtype))
        c = f.compile(x, y, z)
        assert c.dump("tensor").count(", covered)") == 3
        assert "tfill" not in c.pto()
        cols, rows, flat = f(x, y, z)
        assert torch.equal(cols, torch.cat([x, y], 1))
        assert torch.equal(rows, torch.cat([z, x], 0))
        assert torch.equal(flat, x.reshape(n, 4, 6).permute(1, 0, 2).reshape(4 * n, 6))


def test_concat_with_a_tail_part_keeps_the_zero_fill():
    @pypto.jit
    def f(x: pypto.Tensor((N, 24), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        head = pypto.view(x, [N, 16], [0, 0], valid_shape=[N, 12])   # columns 12..15 are a tail
        return pypto.concat([head, x], 1) * 1

    x = torch.randn(13, 24)
    assert ", covered" not in f.compile(x).dump("tensor")
    got = f(x)
    assert torch.equal(got[:, :12], x[:, :12])
    assert torch.equal(got[:, 12:16], torch.zeros(13, 4))
    assert torch.equal(got[:, 16:], x)


def test_intermediates_stored_whole_skip_the_zero_fill_and_ops_in_loops_keep_it():
    """exp(x) and a product, stored whole by their tile nests (tails and a dynamic dim included),
    are allocated uninitialised; a tensor written inside a loop, which may run no iteration, and a
    fill that is assembled into stay zero-filled."""

    @pypto.jit
    def f(x: pypto.Tensor((N, 40), pypto.DT_FP32), w: pypto.Tensor((40, 24), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        e = pypto.exp(x)
        pypto.set_vec_tile_shapes(16, 32)              # another tile shape: e goes through memory
        pypto.set_cube_tile_shapes([16, 16], [16, 16], [16, 16])
        p = pypto.matmul(e * 0.5, w, pypto.DT_FP32)      # [N, 24]
        acc = pypto.zeros([N, 24], pypto.DT_FP32)
        for i in pypto.loop(0, 2, idx_name="i"):
            pypto.assemble(pypto.view(p, [N, 24], [0, 0]) * 2.0, [0, 0], acc)
        return p + 1.0, acc * 1

    x, w = torch.randn(21, 40) * 0.1, torch.randn(40, 24)
    pto = f.compile(x, w).pto()
    workspaces = [line for line in pto.splitlines() if "= alloc_workspace" in line]
    uninit = [line for line in workspaces if "alloc_workspace uninit" in line]
    assert len(uninit) >= 2, pto
    assert len(uninit) < len(workspaces), pto   # the accumulator and the loop's product
    p, acc = f(x, w)
    ref = (torch.exp(x) * 0.5) @ w
    torch.testing.assert_close(p, ref + 1.0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(acc, ref * 2.0, rtol=1e-5, atol=1e-5)


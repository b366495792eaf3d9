"""PyPTO's Tensor methods: the op methods (x.matmul, x.view, x.softmax, ...), clone, assemble,
fill_, copy and the queries id, format, is_empty."""

import pytest
import torch

import pypto

R = pypto.frontend.dynamic("R")


@pytest.mark.parametrize("rows", [8, 11])  # divides the tile, or does not
@pytest.mark.parametrize("dt, tdt", [(pypto.DT_FP32, torch.float32), (pypto.DT_BF16, torch.bfloat16)])
def test_op_methods_are_the_functions(rows, dt, tdt):
    @pypto.frontend.jit
    def f(x: pypto.Tensor((R, 16), dt), w: pypto.Tensor((16, 12), dt), idx: pypto.Tensor((R, 3), pypto.DT_INT64)):
        pypto.set_vec_tile_shapes(4, 16)
        pypto.set_cube_tile_shapes([8, 8], [8, 16], [8, 16])
        mm = x.matmul(w, pypto.DT_FP32, b_trans=False)
        sm = x.softmax(-1)
        v = x.view([4, 8], [1, 4])
        g = x.gather(1, idx)
        sc = x.scatter(1, idx, 0.0)
        ex = x[0:1, :].expand_clone([3, 16])
        return mm, sm, v, g, sc, ex

    g = torch.Generator().manual_seed(rows)
    x, w = torch.randn(rows, 16, generator=g).to(tdt), torch.randn(16, 12, generator=g).to(tdt)
    idx = torch.randint(0, 16, (rows, 3), generator=g)
    mm, sm, v, ga, sc, ex = f(x, w, idx)
    tol = dict(rtol=2e-2, atol=2e-2) if tdt == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mm, x.float() @ w.float(), **tol)
    torch.testing.assert_close(sm.float(), torch.softmax(x.float(), -1), **tol)
    assert torch.equal(v, x[1:5, 4:12])
    assert torch.equal(ga, torch.gather(x, 1, idx))
    assert torch.equal(sc, torch.scatter(x, 1, idx, 0.0))
    assert torch.equal(ex, x[0:1].expand(3, 16))


def test_clone_copies_the_data_at_that_point():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((R, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        t = x * 2.0
        before = t.clone()
        part = pypto.clone(t[1:3, :])        # of a view too
        t[0:2, :] = x[0:2, :] * 0.0           # written after the clones
        return before, part, t

    x = torch.randn(6, 8)
    before, part, t = f(x)
    torch.testing.assert_close(before, x * 2)
    torch.testing.assert_close(part, x[1:3] * 2)
    ref = x * 2
    ref[0:2] = 0
    torch.testing.assert_close(t, ref)


def test_assemble_fill_and_copy_methods():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((4, 6), pypto.DT_FP32), out: pypto.Tensor((8, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        out.fill_(-1.0)
        out.assemble(x + 1.0, [3, 0])
        blank = x.copy("blank")          # same shape and dtype, its own (zeroed) memory
        assert blank.shape == (4, 6) and blank.dtype == pypto.DT_FP32 and blank.id() != x.id()
        assert x.format() == pypto.TileOpFormat.TILEOP_ND and not x.is_empty() and x.dim() == 2
        return blank

    x = torch.randn(4, 6)
    out = torch.zeros(8, 6)
    blank = f(x, out)
    ref = torch.full((8, 6), -1.0)
    ref[3:7] = x + 1
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(blank, torch.zeros(4, 6))
    assert pypto.Tensor((2, 2), pypto.DT_FP32).id() == -1


def test_clone_of_a_number_is_refused():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((4, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.clone(1.0)

    with pytest.raises(TypeError, match=r"pypto.clone: the operand must be a pypto.Tensor, found float"):
        f(torch.randn(4, 4))


@pytest.mark.parametrize("rows", [4, 13])
def test_where_method_keeps_self_where_the_condition_holds(rows):
    @pypto.frontend.jit
    def f(x: pypto.Tensor((R, 10), pypto.DT_FP16), y: pypto.Tensor((R, 1), pypto.DT_FP16)):
        pypto.set_vec_tile_shapes(4, 8)
        return x.where(x > 0, y), x.where(x < 0.5, 2.0)

    g = torch.Generator().manual_seed(rows)
    x, y = torch.randn(rows, 10, generator=g).half(), torch.randn(rows, 1, generator=g).half()
    a, b = f(x, y)
    assert torch.equal(a, x.where(x > 0, y)) and torch.equal(b, x.where(x < 0.5, torch.tensor(2.0).half()))


@pytest.mark.parametrize("rows", [8, 11])
def test_base_and_logical_tensor_name_the_graph_value(rows):
    M = pypto.frontend.dynamic("M")

    @pypto.frontend.jit
    def f(x: pypto.Tensor((M, 8), pypto.DT_FP32), out: pypto.Tensor((M, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        y = x * 2
        base = y.base()
        assert base == y.logical_tensor() and base != x.base()
        z = pypto.Tensor.from_base(base, "z")
        assert z.id() == y.id() and z.name == "z" and list(z.shape) == list(y.shape)
        assert pypto.Tensor.from_logical_tensor(y.logical_tensor()).id() == y.id()
        assert y.to_tensor() is y and y.to_tensor("yy").name == "yy"
        out.set_logical_tensor((z + 1).logical_tensor())  # out takes that value's data, as move

    x, out = torch.randn(rows, 8), torch.zeros(rows, 8)
    f(x, out)
    torch.testing.assert_close(out, x * 2 + 1)


def test_base_of_an_annotation_is_refused():
    with pytest.raises(ValueError, match=r"pypto.Tensor.base: tensor 'x' is not a traced tensor"):
        pypto.Tensor((4, 4), pypto.DT_FP32, "x").base()
    with pytest.raises(TypeError, match=r"pypto.Tensor.from_base: expected the result of Tensor.base\(\), found int"):
        pypto.Tensor.from_base(3)

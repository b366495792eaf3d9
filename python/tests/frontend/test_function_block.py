"""with pypto.function(name, *tensors): blocks, get_current_function / get_last_function and
pypto.from_torch (PyPTO's kernels without a decorated function)."""

import numpy as np
import pytest
import torch

import pypto


@pytest.mark.parametrize("rows, cols", [(64, 64), (72, 71)])  # tiles that do and do not divide
def test_block_with_loops_views_and_assemble(rows, cols):
    x = pypto.tensor((rows, cols), pypto.DT_INT32, "x")
    out = pypto.tensor((rows, cols), pypto.DT_INT32, "out")
    with pypto.function("MAIN", x, out) as fn:
        assert pypto.get_current_function() is fn
        for b in pypto.loop(-(-rows // 32), idx_name="b"):
            for s in pypto.loop(-(-cols // 32), idx_name="s"):
                v = pypto.view(x, [32, 32], [b * 32, s * 32],
                               valid_shape=[pypto.min(rows - b * 32, 32), pypto.min(cols - s * 32, 32)])
                pypto.set_vec_tile_shapes(32, 32)
                pypto.assemble(pypto.add(v, 1), [b * 32, s * 32], out)
    assert pypto.get_current_function() is None and pypto.get_last_function() is fn
    assert isinstance(out, pypto.tensor) and not out.is_traced  # an annotation again after the block
    a = torch.randint(-100, 100, (rows, cols), dtype=torch.int32)
    o = torch.zeros(rows, cols, dtype=torch.int32)
    fn(pypto.from_torch(a, "a"), pypto.from_torch(o, "o"))
    torch.testing.assert_close(o, a + 1)
    o2 = np.zeros((rows, cols), np.int32)
    fn(a.numpy(), o2)  # plain arrays too
    np.testing.assert_array_equal(o2, a.numpy() + 1)
    assert "MAIN" in fn.dump("tensor") and fn.pto()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_list_form_with_a_dynamic_dim_and_move(dtype):
    dt = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16}[dtype]
    n = pypto.SymbolicScalar("n")  # one dynamic dim shared by both tensors
    x = pypto.tensor([n, 48], dt, "x")
    res = pypto.tensor([n, 1], dt, "res")
    with pypto.function("ROW_SUM", [x], [res]):
        pypto.set_vec_tile_shapes(8, 16)
        res.move(pypto.sum(pypto.mul(x, 2.0), -1, True))
    fn = pypto.get_last_function()
    for rows in (5, 17):
        a = torch.randn(rows, 48, dtype=dtype)
        r = torch.zeros(rows, 1, dtype=dtype)
        fn(a, r)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(r, (a.float() * 2).sum(-1, keepdim=True).to(dtype), atol=tol * 10, rtol=tol)


def test_block_errors():
    x = pypto.tensor((8, 8), pypto.DT_FP32, "x")
    out = pypto.tensor((8, 8), pypto.DT_FP32, "out")
    with pytest.raises(TypeError, match=r"pypto.function 'F': argument 1 must be a tensor made by pypto.tensor"):
        pypto.function("F", x, 3)
    with pytest.raises(ValueError, match=r"argument 0 \('y'\) needs a full shape and a dtype"):
        pypto.function("F", pypto.Tensor(dtype=pypto.DT_FP32, name="y"))
    with pypto.function("F", x, out) as fn:
        pypto.set_vec_tile_shapes(8, 8)
        out[:] = pypto.exp(x)
    with pytest.raises(ValueError, match=r"F\(\): parameter 'x' expects shape \(8, 8\), found \(4, 8\)"):
        fn(torch.randn(4, 8), torch.zeros(4, 8))
    with pytest.raises(TypeError, match=r"F\(\) takes \(x, out\)"):
        fn(torch.randn(8, 8))
    with pytest.raises(ValueError, match="writes no output parameter"):
        with pypto.function("G", x, out):
            pypto.set_vec_tile_shapes(8, 8)
            pypto.exp(x)
    assert not x.is_traced  # restored after a failed block too


def test_get_last_function_after_a_jit_compile_and_from_torch_into_jit():
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32)) -> pypto.Tensor((4, 8), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(4, 8)
        return x * 3

    a = torch.randn(4, 8)
    torch.testing.assert_close(f(pypto.from_torch(a)), a * 3)
    assert pypto.get_last_function() is f.compile(a)
    d = pypto.from_torch(a, "d", dynamic_axis=[0])
    assert d.shape == (pypto.DYNAMIC, 8) and d.name == "d" and d.dtype == pypto.DT_FP32
    with pytest.raises(TypeError, match=r"pypto.from_torch: tensor must be a torch.Tensor, found ndarray"):
        pypto.from_torch(np.zeros(3))
    with pytest.raises(ValueError, match=r"dynamic_axis 2 is out of range for a tensor of rank 2"):
        pypto.from_torch(a, dynamic_axis=[2])
    # dtype= reads the same memory as another dtype of the same size (a bitcast, no copy).
    bits = pypto.from_torch(a, dtype=pypto.DT_INT32)
    assert bits.dtype == pypto.DT_INT32 and bits.shape == (4, 8)

    @pypto.jit
    def g(x: pypto.Tensor((4, 8), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 8)
        return x + 1

    assert torch.equal(g(bits), a.view(torch.int32) + 1)
    with pytest.raises(NotImplementedError, match=r"reading torch.float32 data \(4 bytes an element\) as DT_INT8 "
                                                  r"\(1 bytes\) keeping the shape is not supported"):
        pypto.from_torch(a, dtype=pypto.DT_INT8)


def test_last_function_is_a_pypto_function(tmp_path):
    x = pypto.tensor((8, 8), pypto.DT_FP32, "x")
    out = pypto.tensor((8, 8), pypto.DT_FP32, "out")
    with pypto.function("BLOCK", x, out) as fn:
        pypto.set_vec_tile_shapes(8, 8)
        out[:] = x + 1
    assert isinstance(fn, pypto.Function) and fn.raw_name == "BLOCK" and fn.is_explicit
    assert fn.function_type_str == "STATIC" and fn.is_static and not fn.is_eager and not fn.has_parent
    assert fn.magic_name == f"BLOCK_{fn.func_magic}" and fn.base is not None
    fn.dump_file(tmp_path / "block.txt")
    assert "tensor" in (tmp_path / "block.txt").read_text().lower()
    fn.dump_json_file(str(tmp_path / "block.json"))
    import json

    doc = json.loads((tmp_path / "block.json").read_text())
    assert doc["name"] == "BLOCK" and set(doc["stages"]) >= {"tensor", "pto", "cpp"}

    @pypto.frontend.jit
    def g(a: pypto.Tensor((pypto.DYNAMIC, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return a * 2

    g(torch.randn(5, 8))
    last = pypto.get_last_function()
    assert isinstance(last, pypto.Function) and last.raw_name == "g" and not last.is_explicit
    assert last.function_type_str == "DYNAMIC" and not last.is_static
    assert last.func_magic != fn.func_magic
    with pytest.raises(TypeError, match=r"pypto.Function.dump_file: file_path must be a path, found 3"):
        last.dump_file(3)

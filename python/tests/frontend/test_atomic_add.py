"""pypto.atomic_add: in-place accumulation into a region, with tasks that add into one tensor left
unordered among themselves by the runtime (the accumulate access mode), but ordered against the
tensor's plain reads and writes."""

import numpy as np
import pytest
import torch

import pypto


def test_adds_into_the_region_at_the_offsets():
    @pypto.jit
    def f(x: pypto.Tensor((2, 2), pypto.DT_FP32), out: pypto.Tensor((4, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 2)
        pypto.atomic_add(x, [0, 0], out)
        pypto.atomic_add(x * 10, [2, 1], out)

    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    want = out.clone()
    want[0:2, 0:2] += x
    want[2:4, 1:3] += x * 10
    assert f(x, out) is None
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.int16])
def test_integer_sums_over_many_tasks_are_exact(dtype):
    pdt = {torch.int32: pypto.DT_INT32, torch.int64: pypto.DT_INT64, torch.int8: pypto.DT_INT8,
           torch.int16: pypto.DT_INT16}[dtype]

    @pypto.jit
    def col_sums(x: pypto.Tensor([pypto.DYNAMIC, 40], pdt), out: pypto.Tensor((3, 40), pdt)):
        pypto.set_vec_tile_shapes(3, 16)
        for i in pypto.loop(x.shape[0] // 3):
            pypto.atomic_add(pypto.view(x, [3, 40], [i * 3, 0]), [0, 0], out)

    lo, hi = (-3, 4) if dtype == torch.int8 else (-1000, 1000)
    for rows in (3, 48, 300):
        x = torch.randint(lo, hi, (rows, 40), dtype=dtype)
        out = torch.randint(lo, hi, (3, 40), dtype=dtype)
        want = out.to(torch.int64) + x.to(torch.int64).reshape(-1, 3, 40).sum(0)
        col_sums(x, out)
        assert torch.equal(out, want.to(dtype)), rows


def test_k_split_matmul_accumulates_partial_products():
    # Each k block's product is added into the one output: the tasks run in any order.
    @pypto.jit
    def mm(a: pypto.Tensor((48, 256), pypto.DT_FP32), b: pypto.Tensor((256, 40), pypto.DT_FP32),
           out: pypto.Tensor((48, 40), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        pypto.set_vec_tile_shapes(16, 16)
        for k in pypto.loop(8):
            part = pypto.matmul(pypto.view(a, [48, 32], [0, k * 32]), pypto.view(b, [32, 40], [k * 32, 0]),
                                pypto.DT_FP32)
            pypto.atomic_add(part, [0, 0], out)

    a, b = torch.randn(48, 256), torch.randn(256, 40)
    out = torch.zeros(48, 40)
    mm(a, b, out)
    torch.testing.assert_close(out, (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,pdt,tol", [(torch.float16, pypto.DT_FP16, 2e-2), (torch.bfloat16, pypto.DT_BF16, 1e-1),
                                           (torch.float64, pypto.DT_DOUBLE, 1e-12)])
def test_low_and_high_precision_floats(dtype, pdt, tol):
    @pypto.jit
    def f(x: pypto.Tensor((32, 24), pdt), out: pypto.Tensor((8, 24), pdt)):
        pypto.set_vec_tile_shapes(8, 8)
        for i in pypto.loop(4):
            pypto.atomic_add(pypto.view(x, [8, 24], [i * 8, 0]), [0, 0], out)

    x, out = torch.randn(32, 24, dtype=dtype), torch.randn(8, 24, dtype=dtype)
    want = out.double() + x.double().reshape(4, 8, 24).sum(0)
    f(x, out)
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)


def test_tails_that_do_not_divide_the_tile_and_symbolic_offsets():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 7], pypto.DT_FP32), out: pypto.Tensor((9, 13), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        for i in pypto.loop(x.shape[0] // 5):
            pypto.atomic_add(pypto.view(x, [5, 7], [i * 5, 0]), [3, 1 + i % 3], out)

    for rows in (5, 35):
        x = torch.randn(rows, 7)
        out = torch.randn(9, 13)
        want = out.double()
        for i in range(rows // 5):
            want[3:8, 1 + i % 3:8 + i % 3] += x[i * 5:(i + 1) * 5].double()
        f(x, out)
        torch.testing.assert_close(out.double(), want, rtol=1e-6, atol=1e-6)


def test_accumulators_run_unordered_and_readers_wait_for_all():
    @pypto.jit
    def f(x: pypto.Tensor((64, 16), pypto.DT_FP32), out: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        acc = pypto.full([8, 16], 1.0, pypto.DT_FP32)
        for i in pypto.loop(8):
            pypto.atomic_add(pypto.view(x, [8, 16], [i * 8, 0]), [0, 0], acc)
        out[:, :] = acc * 2.0

    x = torch.randn(64, 16)
    out = torch.zeros(8, 16)
    f(x, out)
    torch.testing.assert_close(out, (1.0 + x.reshape(8, 8, 16).sum(0)) * 2.0, rtol=1e-5, atol=1e-5)
    c = f.compile(x, out)
    text = c.pto()
    assert "atomic_add" in text and " accum" in text
    g = c.task_graph(x, out)
    names = {tid: name for tid, name, *_ in g.tasks}
    adders = sorted(t for t, n in names.items() if n.startswith("atomic_add"))
    assert len(adders) == 8, g.tasks
    # No edge joins two accumulating tasks; the fill comes before each, the reader after all.
    assert not [(p, s) for p, s in g.edges if p in adders and s in adders]
    fill = min(adders) - 1
    reader = max(names)
    assert all((fill, a) in g.edges for a in adders), g.edges
    assert all((a, reader) in g.edges for a in adders), g.edges


def test_numpy_arrays_without_torch_in_the_execution_path():
    @pypto.jit
    def f(x: pypto.Tensor((6, 5), pypto.DT_INT32), out: pypto.Tensor((2, 5), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(2, 8)
        for i in pypto.loop(3):
            pypto.atomic_add(pypto.view(x, [2, 5], [i * 2, 0]), [0, 0], out)

    x = np.arange(30, dtype=np.int32).reshape(6, 5)
    out = np.ones((2, 5), dtype=np.int32)
    f(x, out)
    np.testing.assert_array_equal(out, 1 + x.reshape(3, 2, 5).sum(0))


def test_bad_arguments_name_the_op_and_the_value():
    def jit_call(body, x, out):
        @pypto.jit
        def f(x: pypto.Tensor((4, 4), pypto.DT_FP32), out: pypto.Tensor((8, 8), pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(4, 4)
            body(x, out)
        f(x, out)

    x, out = torch.randn(4, 4), torch.zeros(8, 8)
    with pytest.raises(pypto.UserError, match=r"pypto.atomic_add: 1 offsets for a destination of rank 2"):
        jit_call(lambda a, o: pypto.atomic_add(a, [0], o), x, out)
    with pytest.raises(TypeError, match=r"pypto.atomic_add: src must be a pypto.Tensor, found float"):
        jit_call(lambda a, o: pypto.atomic_add(1.5, [0, 0], o), x, out)
    with pytest.raises(TypeError, match=r"pypto.atomic_add: dst must be a pypto.Tensor, found list"):
        jit_call(lambda a, o: pypto.atomic_add(a, [0, 0], [o]), x, out)
    with pytest.raises(pypto.UserError, match=r"atomic_add"):
        jit_call(lambda a, o: pypto.atomic_add(a, [6, 0], o), x, out)  # rows 6..9 of 8

    @pypto.jit
    def on_bool(x: pypto.Tensor((4, 4), pypto.DT_BOOL), out: pypto.Tensor((4, 4), pypto.DT_BOOL)):
        pypto.set_vec_tile_shapes(4, 4)
        pypto.atomic_add(x, [0, 0], out)

    with pytest.raises(TypeError, match=r"atomic_add.*dst has dtype DT_BOOL, expected a float .* or integer dtype"):
        on_bool(torch.ones(4, 4, dtype=torch.bool), torch.zeros(4, 4, dtype=torch.bool))

"""pypto.loop, symbolic conditions and their errors (issue 3)."""

import pytest
import torch

import pypto


def test_loop_over_dynamic_batch_in_slices():
    @pypto.jit
    def softmax_rows(x: pypto.Tensor([pypto.DYNAMIC, 48], pypto.DT_FP32),
                     out: pypto.Tensor([pypto.DYNAMIC, 48], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 16)
        for b in pypto.loop(x.shape[0]):
            xb = x[b:b + 1, :]
            out[b:b + 1, ...] = pypto.softmax(xb, -1)

    for rows in (1, 5, 9):
        x, out = torch.randn(rows, 48), torch.zeros(rows, 48)
        softmax_rows(x, out)
        torch.testing.assert_close(out, torch.softmax(x, -1), atol=1e-5, rtol=0)
    assert len(softmax_rows._cache) == 1
    c = softmax_rows.compile(torch.randn(9, 48), torch.zeros(9, 48))
    assert "for %idx1" in c.dump("tensor") and "FOR %idx1" in c.pto()


def test_loop_with_blocks_and_tail_valid_shape():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        rows = x.shape[0]
        for i in pypto.loop(0, pypto.ceildiv(rows, 8), 1, idx_name="blk"):
            valid = (rows - i * 8).min(8)
            xb = pypto.view(x, [8, 32], [i * 8, 0], valid_shape=[valid, 32])
            pypto.assemble(pypto.rms_norm(xb), [i * 8, 0], out)

    for rows in (8, 13, 30):
        x, out = torch.randn(rows, 32), torch.zeros(rows, 32)
        f(x, out)
        torch.testing.assert_close(out, torch.nn.functional.rms_norm(x, (32,), eps=1e-6), atol=1e-5, rtol=1e-5)


def test_nested_loops_with_branches_on_the_index():
    @pypto.jit
    def f(x: pypto.Tensor((4, 3, 16), pypto.DT_FP32), out: pypto.Tensor((4, 3, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 1, 16)
        for i in pypto.loop(4):
            for j in pypto.loop(3):
                v = x[i:i + 1, j:j + 1, :]
                if i == 0:
                    out[i:i + 1, j:j + 1, :] = v * 10
                elif pypto.is_loop_end(j):
                    out[i:i + 1, j:j + 1, :] = v - 100
                else:
                    out[i:i + 1, j:j + 1, :] = pypto.exp(v)
                if pypto.is_loop_begin(j):
                    out[i:i + 1, j:j + 1, :] = v + 1000

    x = torch.randn(4, 3, 16)
    out = torch.zeros(4, 3, 16)
    f(x, out)
    ref = torch.exp(x)
    ref[:, 2] = x[:, 2] - 100
    ref[0] = x[0] * 10
    ref[:, 0] = x[:, 0] + 1000
    torch.testing.assert_close(out, ref)


def test_static_python_control_flow_unrolls():
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), n: int):
        pypto.set_vec_tile_shapes(4, 8)
        y = x
        for _ in range(n):
            y = y * 2
        if n > 2:
            y = y + 1
        return y

    x = torch.randn(4, 8)
    torch.testing.assert_close(f(x, 2), x * 4)
    torch.testing.assert_close(f(x, 3), x * 8 + 1)


def test_cond_explicit_form():
    @pypto.jit
    def f(x: pypto.Tensor((3, 8), pypto.DT_FP32), out: pypto.Tensor((3, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        for i in pypto.loop(3):
            def then():
                out[i:i + 1, :] = x[i:i + 1, :] * 2

            def other():
                out[i:i + 1, :] = x[i:i + 1, :] * 3

            pypto.cond(i < 1, then, other)

    x, out = torch.randn(3, 8), torch.zeros(3, 8)
    f(x, out)
    torch.testing.assert_close(out, torch.cat([x[:1] * 2, x[1:] * 3]))


def test_break_in_loop_is_refused_with_line():
    @pypto.jit
    def f(x: pypto.Tensor((3, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        for i in pypto.loop(3):
            break
        return x * 1

    with pytest.raises(NotImplementedError, match=r"'break' inside 'for ... in pypto.loop\(...\)' at .*test_control.py:\d+"):
        f(torch.randn(3, 8))


def test_while_on_symbolic_value_is_refused_with_line():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 8], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        n = x.shape[0]
        while n > 0:
            n = n - 1
        return x * 1

    with pytest.raises(NotImplementedError, match=r"'while' on a symbolic value at .*test_control.py:\d+"):
        f(torch.randn(3, 8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_tensor_assigned_differently_in_branches_is_merged(dtype):
    dt = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16}[dtype]

    @pypto.jit
    def f(x: pypto.Tensor((5, 13), dt), out: pypto.Tensor((5, 13), dt)):
        pypto.set_vec_tile_shapes(1, 8)  # 13 columns: a full tile and a tail
        for i in pypto.loop(5):
            if i == 0:
                y = x[i:i + 1, :] * 2
            elif i < 3:
                y = pypto.exp(x[i:i + 1, :])
            else:
                y = x[i:i + 1, :] * 3
            out[i:i + 1, :] = y + 1

    x, out = torch.randn(5, 13, dtype=dtype), torch.zeros(5, 13, dtype=dtype)
    f(x, out)
    ref = torch.cat([x[:1] * 2, torch.exp(x[1:3]), x[3:] * 3]) + 1
    torch.testing.assert_close(out, ref)


def test_tensor_merged_over_a_dynamic_dim_and_kept_when_one_branch_leaves_it():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        rows = x.shape[0]
        for i in pypto.loop(2):
            y = x + 0.5
            if pypto.cond(i == 1):        # PyPTO's spelling of the condition
                y = y * x
            if i == 1:
                out[:rows, :] = y

    for rows in (3, 20):
        x, out = torch.randn(rows, 16), torch.zeros(rows, 16)
        f(x, out)
        torch.testing.assert_close(out, (x + 0.5) * x)


def test_tensors_of_different_shapes_in_the_branches_are_refused_on_use():
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), out: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        for i in pypto.loop(2):
            if i == 0:
                y = x[0:1, :]
            else:
                y = x[0:2, :]
            out[0:1, :] = y[0:1, :]

    with pytest.raises(NotImplementedError, match=r"'y' is assigned in a branch of the symbolic 'if' at .*test_control.py:\d+ "
                                                  r"and differs between the branches.*only tensors of one shape"):
        f(torch.randn(4, 8), torch.zeros(4, 8))


def test_helpers_are_inlined():
    def helper(v):
        return pypto.exp(v) * 2

    @pypto.frontend.function
    def helper2(v, flag: bool):
        if flag:
            return v + 1
        return v - 1

    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return helper2(helper(x), True)

    x = torch.randn(4, 8)
    torch.testing.assert_close(f(x), torch.exp(x) * 2 + 1)


def test_a_value_that_differs_between_branches_may_stay_unused_or_be_reassigned():
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), out: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        count = 0
        for i in pypto.loop(4):
            if i < 2:
                count = count + 1      # a Python value, different in each branch ...
                y = x[i:i + 1, :] * 2
                out[i:i + 1, :] = y
            else:
                y = x[i:i + 1, :] - 1
                out[i:i + 1, :] = y
            y = x[i:i + 1, :]           # ... and a tensor reassigned before any use
        assert repr(count).startswith("<'count': differs between the branches of the symbolic 'if' at ")

    x = torch.randn(4, 8)
    out = torch.zeros(4, 8)
    f(x, out)
    torch.testing.assert_close(out, torch.cat([x[:2] * 2, x[2:] - 1]))


@pytest.mark.parametrize("use", ["print", "arith", "op"])
def test_using_a_value_that_differs_between_branches_names_it(use):
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), out: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        for i in pypto.loop(4):
            n = 1
            if i < 2:
                n = 2
            if use == "print":
                print(f"{n}")
            elif use == "arith":
                out[i:i + 1, :] = x[i:i + 1, :] * (n + 1)
            else:
                out[i:i + 1, :] = pypto.mul(x[i:i + 1, :], n)

    with pytest.raises(NotImplementedError, match=r"'n' is assigned in a branch of the symbolic 'if' at "
                                                  r".*test_control.py:\d+ and differs between the branches"):
        f(torch.randn(4, 8), torch.zeros(4, 8))


@pytest.mark.parametrize("kind", ["a", "b", "c"])
def test_elif_on_a_python_value_with_a_name_assigned_in_one_branch(kind):
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        if kind == "a":
            r = x + 1
        elif kind == "b":
            only_here = x * 2      # assigned in this branch alone
            r = only_here - 1
        else:
            r = x * 0
        return r

    x = torch.randn(4, 8)
    ref = {"a": x + 1, "b": x * 2 - 1, "c": x * 0}[kind]
    torch.testing.assert_close(f(x), ref)


def test_if_pypto_cond_form_with_elif_and_else():
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), out: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        for i in pypto.loop(4, parallel=True, submit_before_loop=True, unroll_list=[2, 4]):
            if pypto.cond(pypto.is_loop_begin(i)):
                out[i:i + 1, :] = x[i:i + 1, :] + 10
            elif pypto.cond(pypto.is_loop_end(i)):
                out[i:i + 1, :] = x[i:i + 1, :] - 10
            elif pypto.cond(1):
                out[i:i + 1, :] = x[i:i + 1, :] * 2
            else:
                out[i:i + 1, :] = x[i:i + 1, :] * 0

    x, out = torch.randn(4, 8), torch.zeros(4, 8)
    f(x, out)
    torch.testing.assert_close(out, torch.cat([x[:1] + 10, x[1:3] * 2, x[3:] - 10]))
    assert pypto.cond(True) is True and pypto.cond(0) == 0


def test_loop_hint_arguments_are_checked():
    with pytest.raises(ValueError, match=r"pypto.loop: unroll_list must be a non-empty list of positive ints, found \[0\]"):
        pypto.loop(4, unroll_list=[0])
    with pytest.raises(TypeError, match=r"pypto.loop: parallel must be a bool, found 'yes'"):
        pypto.loop(4, parallel="yes")
    with pytest.raises(TypeError, match=r"pypto.cond: then_fn and else_fn must be callables, found int and NoneType"):
        pypto.cond(True, 3)


@pytest.mark.parametrize("unroll", [[4, 2], [3], [1]])
def test_loop_unroll_covers_every_index_once(unroll):
    N = pypto.frontend.dynamic("N")

    @pypto.jit
    def f(x: pypto.Tensor([N, 8], pypto.DT_FP32), out: pypto.Tensor([N, 8], pypto.DT_FP32), factors: list):
        pypto.set_vec_tile_shapes(1, 8)
        for i, n in pypto.loop_unroll(0, x.shape[0], 1, name="rows", idx_name="r", unroll_list=factors):
            for k in range(n):  # the body handles n consecutive rows
                out[i + k:i + k + 1, :] = out[i + k:i + k + 1, :] + x[i + k:i + k + 1, :] * n

    for rows in (1, 6, 7, 12, 13):  # one compiled kernel: the row count is dynamic
        x, out = torch.randn(rows, 8), torch.zeros(rows, 8)
        f(x, out, unroll)
        # each row is written exactly once, by the loop of the largest factor that reaches it
        factors = sorted(set(unroll) | {1}, reverse=True)
        ref, begin = torch.zeros(rows, 8), 0
        for n in factors:
            end = rows - (rows - begin) % n
            ref[begin:end] = x[begin:end] * n
            begin = end
        torch.testing.assert_close(out, ref)
    assert len(f._cache) == 1


def test_loop_unroll_with_a_step_and_one_argument():
    @pypto.jit
    def f(x: pypto.Tensor((10, 8), pypto.DT_FP32), out: pypto.Tensor((10, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 8)
        for i, n in pypto.loop_unroll(0, 10, 2, unroll_list=[2]):
            out[i:i + 2 * n, :] = x[i:i + 2 * n, :] + n
        return None

    x, out = torch.randn(10, 8), torch.zeros(10, 8)
    f(x, out)
    torch.testing.assert_close(out, torch.cat([x[:8] + 2, x[8:] + 1]))
    with pytest.raises(TypeError, match=r"pypto.loop_unroll: takes 1 to 3 positional arguments"):
        next(iter(pypto.loop_unroll()))

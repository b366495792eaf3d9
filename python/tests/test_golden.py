"""pypto.verify (PyPTO's verification driver over golden data) and pass_verify_print/save."""

import warnings

import numpy as np
import pytest
import torch

import pypto


@pytest.fixture(autouse=True)
def _defaults():
    pypto.reset_options()
    yield
    pypto.reset_options()
    pypto.set_verify_golden_data()


def _block(rows, cols):
    """PyPTO's form: func(inputs, outputs) writes a function block over the given tensors."""
    def func(inputs, outputs, bump):
        t0, t1 = inputs
        out, = outputs
        with pypto.function("main", t0, t1, out):
            pypto.set_vec_tile_shapes(16, 16)
            for b in pypto.loop(-(-rows // 16), idx_name="b"):
                n = pypto.min(rows - b * 16, 16)
                a = pypto.view(t0, [16, cols], [b * 16, 0], valid_shape=[n, cols])
                c = pypto.view(t1, [16, cols], [b * 16, 0], valid_shape=[n, cols])
                pypto.pass_verify_print(a, " at b=", b, cond=(b > 0))  # no effect without pass verify
                pypto.assemble(a * c + bump, [b * 16, 0], out)
    return func


@pytest.mark.parametrize("rows, cols", [(32, 16), (37, 20)])  # tiles that do and do not divide
@pytest.mark.parametrize("dt", [torch.float32, torch.float16])
def test_verify_runs_a_block_on_the_data_and_compares_the_goldens(rows, cols, dt):
    t0, t1 = torch.randn(rows, cols).to(dt), torch.randn(rows, cols).to(dt)
    out = torch.zeros(rows, cols, dtype=dt)
    golden = (t0.float() * t1.float() + 2).to(dt)
    tol = 1e-5 if dt == torch.float32 else 1e-2  # fp16 rounds the product, then the sum
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.VerifyWarning)
        pypto.verify(_block(rows, cols), [t0, t1], [out], [None, None, golden], 2.0,
                     verify_options={"enable_pass_verify": True, "pass_verify_error_tol": [tol, tol]})
    assert pypto.get_verify_options()["pass_verify_error_tol"] == [tol, tol]
    torch.testing.assert_close(out, golden, rtol=tol, atol=tol)
    # With pass verify off the block still runs on the data, and nothing is compared.
    out.zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.VerifyWarning)
        pypto.verify(_block(rows, cols), [t0, t1], [out], [None, None, golden * 3], 2.0,
                     verify_options={"enable_pass_verify": False})
    torch.testing.assert_close(out, golden, rtol=tol, atol=tol)


def test_verify_warns_for_each_output_that_differs():
    t0, t1, out = torch.randn(20, 16), torch.randn(20, 16), torch.zeros(20, 16)
    wrong = t0 * t1 + 1
    wrong[3, 4] += 1

    def func(inputs, outputs):
        t0, t1 = inputs
        with pypto.function("main", t0, t1, outputs[0]):
            pypto.set_vec_tile_shapes(16, 16)
            outputs[0][:] = t0 * t1 + 1

    with pytest.warns(pypto.VerifyWarning, match=r"main: verify: parameter 'OUT_0' differs from its golden in 1 of "
                                                 r"320 elements"):
        pypto.verify(func, [t0, t1], [out], [t0, t1, wrong])
    assert pypto.get_verify_options()["enable_pass_verify"] is True  # the default verify_options, as PyPTO
    torch.testing.assert_close(out, t0 * t1 + 1)


@pytest.mark.filterwarnings("ignore::pypto.OptionWarning")  # the NPU options, stored and without effect
def test_verify_with_a_jitted_kernel_and_options():
    @pypto.frontend.jit
    def kern(x: pypto.Tensor((pypto.DYNAMIC, 24), pypto.DT_FP32), y: pypto.Tensor((pypto.DYNAMIC, 24), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        y[:] = pypto.exp(x)

    x, y = torch.randn(13, 24), torch.zeros(13, 24)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.VerifyWarning)
        pypto.verify(lambda ins, outs: kern(ins[0], outs[0]), [x], [y], [None, torch.exp(x)],
                     pass_options={"vec_nbuffer_setting": {-1: 2}}, host_options={"compile_timeout": 30})
    assert pypto.get_host_options()["compile_timeout"] == 30
    torch.testing.assert_close(y, torch.exp(x))
    bad = torch.exp(x) * 1.5
    with pytest.warns(pypto.VerifyWarning, match=r"kern: verify: parameter 'y' differs"):
        pypto.verify(lambda ins, outs: kern(ins[0], outs[0]), [x], [y], [None, bad])
    y.zero_()
    with warnings.catch_warnings():  # pass verify off: the kernel runs, nothing is compared
        warnings.simplefilter("error", pypto.VerifyWarning)
        pypto.verify(lambda ins, outs: kern(ins[0], outs[0]), [x], [y], [None, bad],
                     verify_options={"enable_pass_verify": False})
    torch.testing.assert_close(y, torch.exp(x))
    assert not pypto.golden.pending()


def test_verify_errors_name_the_argument():
    x = torch.randn(4, 8)
    with pytest.raises(TypeError, match=r"pypto.verify: func must be callable, found int"):
        pypto.verify(3, [x], [], [])
    with pytest.raises(TypeError, match=r"pypto.verify: inputs must be a list, found Tensor"):
        pypto.verify(lambda i, o: None, x, [], [])
    with pytest.raises(TypeError, match=r"pypto.verify: inputs\[0\] must be a torch tensor or a pypto.from_torch "
                                        r"tensor, found str"):
        pypto.verify(lambda i, o: None, ["x"], [], [])
    with pytest.raises(ValueError, match=r"pypto.verify: 3 goldens for 1 inputs and 1 outputs"):
        pypto.verify(lambda i, o: None, [x], [x], [x, x, x])
    with pytest.raises(ValueError, match=r"pypto.verify: func neither called a jitted function nor completed a "
                                         r"`with pypto.function\(...\)` block"):
        pypto.verify(lambda i, o: None, [x], [], [x])
    with pytest.raises(TypeError, match=r"pypto.verify: pass_options must be a dict, found list"):
        pypto.verify(lambda i, o: None, [x], [], [], pass_options=[1])
    assert not pypto.golden.pending()  # a failed verify leaves no goldens behind


def test_pass_verify_calls_have_no_effect_without_pass_verify():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((pypto.DYNAMIC, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        y = x + 1
        for i in pypto.loop(2, idx_name="i"):
            pypto.pass_verify_print("y=", y, " i=", i, 7, cond=(i == 1))
            pypto.pass_verify_save(y, "y_$i", cond=1, i=i)
        return y

    x = torch.randn(10, 16)
    torch.testing.assert_close(f(x), x + 1)


def _fmt(a) -> str:
    return np.array2string(np.asarray(a), precision=4, threshold=1000, edgeitems=3, max_line_width=80)


@pytest.mark.parametrize("rows", [12, 10])  # tiles that do and do not divide
def test_pass_verify_print_prints_each_run_in_program_order(rows, capsys):
    N = pypto.frontend.dynamic("N")

    @pypto.frontend.jit(verify_options={"enable_pass_verify": True})
    def f(x: pypto.Tensor((N, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 6)
        pypto.pass_verify_print("start ", 7, " ", x.shape[0])
        out = pypto.tensor([N, 6], pypto.DT_FP32)
        for b in pypto.loop((N + 3) // 4, idx_name="b"):
            v = pypto.view(x, [4, 6], [b * 4, 0], valid_shape=[pypto.min(N - b * 4, 4), 6])
            y = v * 2
            pypto.pass_verify_print("b=", b, " y=", y, cond=(b > 0))
            for k in pypto.loop(2, idx_name="k"):
                pypto.pass_verify_print("  k=", k + b * 10)
            pypto.assemble(y, [b * 4, 0], out)
        pypto.pass_verify_print("end", cond=0)  # never
        return out

    x = torch.arange(rows * 6, dtype=torch.float32).reshape(rows, 6)
    torch.testing.assert_close(f(x), x * 2)
    want = [f"start 7 {rows}"]
    for b in range(-(-rows // 4)):
        if b > 0:
            want += f"b={b} y={_fmt((x[b * 4:b * 4 + 4] * 2).numpy())}".splitlines()
        want += [f"  k={b * 10}", f"  k={b * 10 + 1}"]
    assert capsys.readouterr().out.splitlines() == want
    f(x)  # every call prints its own runs
    assert capsys.readouterr().out.splitlines() == want


@pytest.mark.parametrize("dt, tdt", [(pypto.DT_FP16, torch.float16), (pypto.DT_BF16, torch.bfloat16),
                                     (pypto.DT_INT32, torch.int32)])
def test_pass_verify_print_of_each_dtype(dt, tdt, capsys):
    @pypto.frontend.jit(verify_options={"enable_pass_verify": True})
    def f(x: pypto.Tensor((3, 5), dt)):
        pypto.set_vec_tile_shapes(2, 4)
        y = x + x
        pypto.pass_verify_print(y)
        return y

    x = (torch.arange(15).reshape(3, 5) - 7).to(tdt)
    f(x)
    ref = (x + x).float().numpy() if tdt == torch.bfloat16 else (x + x).numpy()  # bf16 prints as its fp32 values
    assert capsys.readouterr().out == _fmt(ref) + "\n"


@pytest.mark.parametrize("rows, cols", [(32, 16), (37, 20)])
def test_pass_verify_save_under_verify_writes_each_iteration(rows, cols, tmp_path):
    t0, t1 = torch.randn(rows, cols), torch.randn(rows, cols)
    out = torch.zeros(rows, cols)

    def func(inputs, outputs):
        a0, a1 = inputs
        with pypto.function("main", a0, a1, outputs[0]):
            pypto.set_vec_tile_shapes(16, 16)
            for b in pypto.loop(-(-rows // 16), idx_name="b"):
                n = pypto.min(rows - b * 16, 16)
                s = pypto.view(a0, [16, cols], [b * 16, 0], valid_shape=[n, cols]) + \
                    pypto.view(a1, [16, cols], [b * 16, 0], valid_shape=[n, cols])
                pypto.pass_verify_save(s, "sum_b$b", b=b)
                pypto.pass_verify_save(s, "last", cond=(b == (rows - 1) // 16))
                pypto.assemble(s, [b * 16, 0], outputs[0])

    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.VerifyWarning)
        pypto.verify(func, [t0, t1], [out], [None, None, t0 + t1],
                     verify_options={"enable_pass_verify": True, "pass_verify_save_tensor_dir": str(tmp_path)})
    ref = (t0 + t1).numpy()
    for b in range(-(-rows // 16)):
        part = ref[b * 16:b * 16 + 16]
        data = np.fromfile(tmp_path / "tensor" / f"sum_b{b}.data", np.float32).reshape(part.shape)
        np.testing.assert_array_equal(data, part)
        assert (tmp_path / "tensor" / f"sum_b{b}.csv").read_text() == \
            f"dtype,shape\nDT_FP32,{part.shape[0]} {part.shape[1]}\n"
    last = ref[(rows - 1) // 16 * 16:]
    np.testing.assert_array_equal(np.fromfile(tmp_path / "tensor" / "last.data", np.float32).reshape(last.shape), last)
    assert sorted(p.name for p in (tmp_path / "tensor").iterdir()) == sorted(
        [f"sum_b{b}.{e}" for b in range(-(-rows // 16)) for e in ("data", "csv")] + ["last.csv", "last.data"])


def test_pass_verify_argument_errors():
    with pytest.raises(pypto.TracingError, match=r"pypto.pass_verify_print was used outside a jitted function"):
        pypto.pass_verify_print("x")

    def kernel(call):
        @pypto.frontend.jit
        def f(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(8, 16)
            call(x)
            return x + 1
        return f

    x = torch.randn(8, 16)
    with pytest.raises(TypeError, match=r"pypto.pass_verify_print: cond must be an int or a symbolic scalar \(1: "
                                        r"always\), found None"):
        kernel(lambda t: pypto.pass_verify_print(t, cond=None))(x)
    with pytest.raises(ValueError, match=r"pypto.pass_verify_save: fname 't_\$idx' names \$idx, which no keyword "
                                         r"argument gives"):
        kernel(lambda t: pypto.pass_verify_save(t, "t_$idx"))(x)
    with pytest.raises(TypeError, match=r"pypto.pass_verify_save: tensor must be a pypto.Tensor, found int"):
        kernel(lambda t: pypto.pass_verify_save(3, "t"))(x)
    with pytest.raises(TypeError, match=r"pypto.pass_verify_save: keyword argument i must be an int or a symbolic "
                                        r"scalar, found 'a'"):
        kernel(lambda t: pypto.pass_verify_save(t, "t_$i", i="a"))(x)

"""Arguments a program writes must be writable, must not repeat elements and must not partly
overlap another argument; torch tensors must be dense and hold their values as stored. Each of
these used to be written silently (or crash); now each is a clear error, checked on the cached-call
path too."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import pypto


@pypto.frontend.jit
def add_one(x: pypto.Tensor((8, 16), pypto.DT_FP32), out: pypto.Tensor((8, 16), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 16)
    pypto.assemble(pypto.add(x, 1.0), [0, 0], out)


@pypto.frontend.jit
def transpose_into(a: pypto.Tensor((16, 16), pypto.DT_FP32), out: pypto.Tensor((16, 16), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 16)
    pypto.assemble(pypto.transpose(a, 0, 1), [0, 0], out)


def _call_twice(fn, *args):
    """The first call binds and compiles; the second takes the cached-call path."""
    for _ in range(2):
        fn(*args)


def test_writable_outputs_work():
    x = np.arange(128, dtype=np.float32).reshape(8, 16)
    out = np.zeros_like(x)
    _call_twice(add_one, x, out)
    np.testing.assert_array_equal(out, x + 1)


def _readonly():
    a = np.zeros((8, 16), np.float32)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("make", [
    _readonly,
    lambda: np.frombuffer(bytes(8 * 16 * 4), np.float32).reshape(8, 16),
    lambda: np.broadcast_to(np.zeros(16, np.float32), (8, 16)),
], ids=["writeable_false", "over_bytes", "broadcast_to"])
def test_a_read_only_numpy_output_is_refused(make):
    out = make()
    before = np.array(out)
    x = np.ones((8, 16), np.float32)
    for _ in range(2):  # normal and cached-call path
        with pytest.raises(ValueError, match=r"add_one\(\): parameter 'out' is written by the program but the "
                                             r"NumPy array is read-only"):
            add_one(x, out)
    np.testing.assert_array_equal(out, before)


def test_a_read_only_memmap_output_is_refused_not_a_crash(tmp_path):
    path = tmp_path / "out.bin"
    np.zeros((8, 16), np.float32).tofile(path)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import numpy as np, pypto
        @pypto.frontend.jit
        def add_one(x: pypto.Tensor((8, 16), pypto.DT_FP32), out: pypto.Tensor((8, 16), pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(4, 16)
            pypto.assemble(pypto.add(x, 1.0), [0, 0], out)
        out = np.memmap({str(path)!r}, dtype=np.float32, mode="r", shape=(8, 16))
        try:
            add_one(np.ones((8, 16), np.float32), out)
        except ValueError as e:
            print("ERROR", e)
    """)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "ERROR add_one(): parameter 'out' is written by the program but the NumPy array is read-only" in r.stdout


def test_a_stride_0_output_is_refused():
    x = torch.ones(8, 16)
    out = torch.zeros(1, 16).expand(8, 16)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"'out' is written by the program but dim 0 has stride 0"):
            add_one(x, out)
    assert not out.any()


@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_a_partly_overlapping_input_and_output_are_refused(lib):
    buf = torch.zeros(9, 16) if lib == "torch" else np.zeros((9, 16), np.float32)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"'out' is written by the program and shares memory with 'x'"):
            add_one(buf[0:8], buf[1:9])
    assert not buf.any()


def test_an_in_place_transpose_is_refused():
    a = torch.randn(16, 16)
    before = a.clone()
    with pytest.raises(ValueError, match=r"'out' is written by the program and shares memory with 'a'"):
        transpose_into(a, a.t())
    with pytest.raises(ValueError, match=r"'out' is written by the program and is the same array as 'a', which the "
                                         r"program reads elsewhere than where it writes 'out'"):
        transpose_into(a, a)
    torch.testing.assert_close(a, before)


def test_exact_in_place_elementwise_use_is_allowed_and_right():
    a = torch.randn(8, 16)
    expect = a + 1
    add_one(a, a)
    torch.testing.assert_close(a, expect)
    b = np.arange(128, dtype=np.float32).reshape(8, 16)
    add_one(b, b)
    np.testing.assert_array_equal(b, np.arange(128, dtype=np.float32).reshape(8, 16) + 1)


def test_disjoint_views_of_one_buffer_are_fine():
    buf = torch.arange(16 * 16, dtype=torch.float32).reshape(16, 16)
    add_one(buf[0:8], buf[8:16])
    torch.testing.assert_close(buf[8:16], buf[0:8] + 1)


def test_a_torch_view_with_the_negative_bit_is_refused():
    z = torch.randn(8, 16, dtype=torch.complex64)
    x = z.conj().imag
    assert x.is_neg()
    for _ in range(2):
        with pytest.raises(ValueError, match="negative bit set .* call .resolve_neg\\(\\) first"):
            add_one(x, torch.zeros(8, 16))
    out = torch.zeros(8, 16)
    add_one(x.resolve_neg(), out)
    torch.testing.assert_close(out, -z.imag + 1)


def test_a_sparse_torch_tensor_is_a_type_error():
    x = torch.ones(8, 16).to_sparse()
    with pytest.raises(TypeError, match=r"dense \(strided\) tensors; found a torch tensor with layout torch.sparse_coo"):
        add_one(x, torch.zeros(8, 16))

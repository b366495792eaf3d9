"""Repeated calls take the cached-call path (no re-binding or re-checking of the signature): the
results stay right for new data, new strides, NumPy and torch, dynamic dims; anything that changes
compilation (settings, dtypes, shapes) still goes through the full path."""

import numpy as np
import pytest
import torch

import pypto
from pypto.frontend.compiled import _FastEntry


@pypto.frontend.jit
def scaled_exp(x: pypto.Tensor([pypto.DYNAMIC, 48], pypto.DT_FP32)) -> pypto.Tensor([pypto.DYNAMIC, 48], pypto.DT_FP32):
    pypto.set_vec_tile_shapes(8, 48)
    return pypto.exp(x) * 2.0


def test_repeated_calls_see_new_data_and_layouts():
    for rows in (5, 64, 5):
        for _ in range(3):
            x = torch.randn(rows, 48)
            torch.testing.assert_close(scaled_exp(x), torch.exp(x) * 2)
    # A transposed (strided) input of the same shape and dtype reuses the entry; strides are read per call.
    xt = torch.randn(48, 64).t()
    torch.testing.assert_close(scaled_exp(xt), torch.exp(xt) * 2)
    xn = np.random.rand(7, 48).astype(np.float32)
    out = scaled_exp(xn)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, np.exp(xn) * 2, rtol=1e-6)


def test_wrong_arguments_after_cached_calls_still_raise():
    x = torch.randn(4, 48)
    scaled_exp(x)
    scaled_exp(x)
    with pytest.raises(pypto.UserTypeError, match="expects dtype"):
        scaled_exp(x.double())
    with pytest.raises(pypto.UserError, match="expects shape"):
        scaled_exp(torch.randn(4, 47))
    with pytest.raises(TypeError):
        scaled_exp(x, x)
    with pytest.raises(pypto.UserTypeError, match="expects a tensor"):
        scaled_exp([[1.0] * 48])


def test_settings_changes_recompile():
    @pypto.frontend.jit
    def exp_plus(x: pypto.Tensor((64, 64), pypto.DT_FP32)) -> pypto.Tensor((64, 64), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(16, 64)
        return pypto.exp(x) + x

    x = torch.randn(64, 64)
    torch.testing.assert_close(exp_plus(x), torch.exp(x) + x)
    fused = exp_plus.compile(x)
    exp_plus(x)
    with pypto.options(fusion=False):
        torch.testing.assert_close(exp_plus(x), torch.exp(x) + x)
        unfused = exp_plus.compile(x)
        exp_plus(x)
    assert unfused is not fused
    assert unfused.stats()["incore_functions"] > fused.stats()["incore_functions"]
    torch.testing.assert_close(exp_plus(x), torch.exp(x) + x)
    assert exp_plus.compile(x) is fused


def test_cached_calls_on_views_and_large_outputs():
    # Row slices of one storage start at different offsets: each call must read its own pointer.
    base = torch.randn(40, 48)
    for start in (0, 3, 11):
        view = base[start:start + 20]
        torch.testing.assert_close(scaled_exp(view), torch.exp(view) * 2)
    # Outputs of 4 MiB and more come from the runtime's output cache, also on the cached path.
    big = torch.randn(32768, 48)
    for _ in range(3):
        out = scaled_exp(big)
        assert out.shape == (32768, 48) and out.dtype == torch.float32
        torch.testing.assert_close(out, torch.exp(big) * 2)


def test_cached_call_rejects_a_tensor_off_the_cpu():
    x = torch.randn(6, 48)
    scaled_exp(x)
    scaled_exp(x)
    with pytest.raises(ValueError, match="pypto runs on the CPU; found a torch tensor on device 'meta'"):
        scaled_exp(torch.empty(6, 48, device="meta"))


@pypto.frontend.jit
def two_outputs(a: pypto.Tensor((6, 40), pypto.DT_FP32), b: pypto.Tensor((6, 40), pypto.DT_FP16)):
    pypto.set_vec_tile_shapes(4, 32)
    return a * 3.0 - 1.0, pypto.cast(pypto.exp(a), pypto.DT_FP16) + b


def test_the_cpp_path_runs_repeated_torch_calls_and_falls_back_on_anything_else(monkeypatch):
    # Goldens set once and cleared again (as earlier tests in this process may have done) leave
    # nothing to check: the C++ path still takes the calls.
    pypto.set_verify_golden_data(goldens=[None])
    pypto.set_verify_golden_data()
    a, b = torch.randn(6, 40), torch.randn(6, 40, dtype=torch.float16)
    two_outputs(a, b)
    two_outputs(a, b)
    assert two_outputs._fast_call is not None  # the C++ path is set up after the second call
    with monkeypatch.context() as m:
        m.setattr(_FastEntry, "run", lambda self, args: pytest.fail("the Python cached-call path ran"))
        for _ in range(3):
            a, b = torch.randn(6, 40), torch.randn(6, 40, dtype=torch.float16)
            y, z = two_outputs(a, b)
            torch.testing.assert_close(y, a * 3.0 - 1.0, rtol=0, atol=0)  # two roundings, as in torch
            torch.testing.assert_close(z, torch.exp(a).half() + b)
    # A subclass of torch.Tensor (a Parameter), a strided view: the general path, same results.
    p = torch.nn.Parameter(torch.randn(6, 40), requires_grad=False)
    torch.testing.assert_close(two_outputs(p, b)[0], p * 3.0 - 1.0, rtol=0, atol=0)
    at = torch.randn(40, 6).t()
    torch.testing.assert_close(two_outputs(at, b)[0], at * 3.0 - 1.0, rtol=0, atol=0)
    # What the C++ path does not take still gets the general path's errors.
    with pytest.raises(pypto.UserError, match="negative bit"):
        two_outputs(torch.randn(6, 40)._neg_view(), b)
    with pytest.raises(pypto.UserTypeError, match="dense"):
        two_outputs(torch.randn(6, 40).to_sparse(), b)
    with pytest.raises(ValueError, match="device 'meta'"):
        two_outputs(torch.empty(6, 40, device="meta"), b)
    with pytest.raises(pypto.UserTypeError, match="expects dtype"):
        two_outputs(a, b.float())
    y, _ = two_outputs(a, b)
    torch.testing.assert_close(y, a * 3.0 - 1.0, rtol=0, atol=0)


def test_the_cpp_path_follows_the_settings_version():
    x = torch.randn(64, 64)

    @pypto.frontend.jit
    def exp_plus(x: pypto.Tensor((64, 64), pypto.DT_FP32)) -> pypto.Tensor((64, 64), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(16, 64)
        return pypto.exp(x) + x

    exp_plus(x)
    exp_plus(x)
    fused = exp_plus.compile(x)
    with pypto.options(fusion=False):
        exp_plus(x)
        exp_plus(x)  # a new C++ path, for these settings
        torch.testing.assert_close(exp_plus(x), torch.exp(x) + x)
        assert exp_plus._fast_call is not None
    torch.testing.assert_close(exp_plus(x), torch.exp(x) + x)
    assert exp_plus.compile(x) is fused

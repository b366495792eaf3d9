"""Repeated calls take the cached-call path (no re-binding or re-checking of the signature): the
results stay right for new data, new strides, NumPy and torch, dynamic dims; anything that changes
compilation (settings, dtypes, shapes) still goes through the full path."""

import numpy as np
import pytest
import torch

import pypto


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

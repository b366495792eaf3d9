"""The output cache (python/pypto/memory.py, csrc/runtime/memory.cc): large outputs come from
recycled blocks, are correct and independent while alive, and the limit is honoured."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pypto
from pypto import memory

ROWS, COLS = 1024, 2048  # 8 MiB of fp32: above the cached-output threshold


@pytest.fixture(autouse=True)
def _restore_limit():
    limit = pypto.get_output_cache_limit()
    yield
    pypto.set_output_cache_limit(limit)


@pytest.fixture(scope="module")
def scale():
    @pypto.frontend.jit
    def scale(x: pypto.Tensor((ROWS, COLS), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 512)
        return x * 2.0 + 1.0
    return scale


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_released_output_is_reused_and_results_stay_correct(scale, kind):
    pypto.set_output_cache_limit(1 << 30)
    pypto.clear_output_cache()
    make = (lambda a: torch.from_numpy(a)) if kind == "torch" else (lambda a: a)
    x1 = make(np.random.default_rng(1).standard_normal((ROWS, COLS)).astype(np.float32))
    x2 = make(np.random.default_rng(2).standard_normal((ROWS, COLS)).astype(np.float32))
    y1 = scale(x1)
    addr = y1.data_ptr() if kind == "torch" else y1.ctypes.data
    # While y1 is alive, a second output gets other memory and y1 keeps its values.
    y2 = scale(x2)
    addr2 = y2.data_ptr() if kind == "torch" else y2.ctypes.data
    assert addr2 != addr
    np.testing.assert_allclose(np.asarray(y1), np.asarray(x1) * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(y2), np.asarray(x2) * 2 + 1, rtol=1e-6)
    hits = pypto.output_cache_info()["hits"]
    del y1
    y3 = scale(x2)
    assert (y3.data_ptr() if kind == "torch" else y3.ctypes.data) == addr
    assert pypto.output_cache_info()["hits"] == hits + 1
    np.testing.assert_allclose(np.asarray(y3), np.asarray(x2) * 2 + 1, rtol=1e-6)
    assert (y3.shape == (ROWS, COLS)) and (y3.dtype == (torch.float32 if kind == "torch" else np.float32))


def test_outputs_are_writable_and_outlive_other_references(scale):
    y = scale(torch.ones(ROWS, COLS))
    y[0, 0] = -5.0
    assert float(y[0, 0]) == -5.0 and float(y[1, 1]) == 3.0
    n = scale(np.ones((ROWS, COLS), np.float32))
    assert n.flags["WRITEABLE"] and n.flags["C_CONTIGUOUS"]
    n[3, 3] = 7.0
    v = n[1:3]  # a view keeps the block alive after the array itself is gone
    del n
    assert float(v[0, 0]) == 3.0


def test_limit_zero_turns_recycling_off(scale):
    pypto.set_output_cache_limit(0)
    assert pypto.output_cache_info()["cached_bytes"] == 0
    y = scale(torch.ones(ROWS, COLS))
    del y
    assert pypto.output_cache_info()["cached_bytes"] == 0
    pypto.set_output_cache_limit(64 << 20)
    y = scale(torch.ones(ROWS, COLS))
    del y
    info = pypto.output_cache_info()
    assert 0 < info["cached_bytes"] <= info["limit"] == 64 << 20
    pypto.clear_output_cache()
    assert pypto.output_cache_info()["cached_bytes"] == 0


def test_small_outputs_are_not_cached():
    before = pypto.output_cache_info()
    out = memory.empty_like_kind(torch.ones(1), [16, 16], pypto.DT_FP32)
    assert tuple(out.shape) == (16, 16) and pypto.output_cache_info()["misses"] == before["misses"]


def test_bad_limits_are_rejected():
    with pytest.raises(ValueError, match=r"set_output_cache_limit: nbytes must be a non-negative int, found -1"):
        pypto.set_output_cache_limit(-1)
    with pytest.raises(TypeError, match=r"set_output_cache_limit: nbytes must be a non-negative int, found float"):
        pypto.set_output_cache_limit(1.5)


def test_limit_from_environment():
    code = "import pypto; print(pypto.get_output_cache_limit())"
    for env, expected in (("16", 16 << 20), ("0", 0), ("", 1024 << 20)):
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYPTO_OUTPUT_CACHE_MB=env),
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert int(out.stdout.strip()) == expected
    # A malformed value is an error naming the variable, not a silent default.
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYPTO_OUTPUT_CACHE_MB="junk"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "PYPTO_OUTPUT_CACHE_MB must be an integer from 0 to 1073741824, found 'junk'" in out.stderr

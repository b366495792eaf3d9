"""Shared fixtures: every test session compiles into its own kernel cache so
runs do not depend on (or pollute) the user's ~/.cache/pypto."""

import os
import tempfile

import numpy as np
import pytest

_CACHE = tempfile.mkdtemp(prefix="pypto-test-cache-")
os.environ.setdefault("PYPTO_CACHE_DIR", _CACHE)

import pypto  # noqa: E402  (after the cache dir is chosen)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def softmax_kernel(M, N, tile=(32, 32)):
    """Softmax written exactly as in the README."""

    @pypto.frontend.jit
    def softmax(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(*tile)
        m = pypto.amax(x, -1, True)
        e = pypto.exp(pypto.sub(x, m))
        return pypto.div(e, pypto.sum(e, -1, True))

    return softmax


@pytest.fixture
def fresh_cpu_target(monkeypatch):
    """The native CPU target and this CPU's real features, before and after the test."""
    monkeypatch.delenv("PYPTO_CPU_TARGET", raising=False)
    pypto.set_cpu_target(None)
    yield
    pypto.set_cpu_target(None)
    pypto._C.testing.set_host_features(None)


def streaming_rows(n: int) -> int:
    """Rows of n floats that make an output at stream_stores' threshold (sixteen times this CPU's
    L2): at least 2048 (16 MiB of 2048-float rows with 1 MiB L2s)."""
    return max(2048, -(-16 * pypto._C.cpu_target_info("native")["l2_bytes"] // (n * 4)))

"""pypto.uniform and pypto.normal (the op families issue, item 6): counter-based Philox4x32-10
draws checked bit for bit against a NumPy Philox written here, against PyPTO's documented
example, for independence of the tile shape and the worker count, and statistically."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pypto

M = 0xFFFFFFFF


def philox_stream(n: int, key: int, counter: int) -> np.ndarray:
    """The first n raw uint32 draws of the stream: lane e % 4 of Philox4x32-10 of the counter
    (e // 4, counter) as (low 64, high 64) bits, under the 64-bit key."""
    blocks = (n + 3) // 4
    b = np.arange(blocks, dtype=np.uint64)
    x = [b & M, b >> np.uint64(32), np.full(blocks, counter & M, np.uint64), np.full(blocks, counter >> 32, np.uint64)]
    k0, k1 = key & M, key >> 32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * x[0]
        p1 = np.uint64(0xCD9E8D57) * x[2]
        x = [((p1 >> np.uint64(32)) ^ x[1] ^ np.uint64(k0)) & np.uint64(M), p1 & np.uint64(M),
             ((p0 >> np.uint64(32)) ^ x[3] ^ np.uint64(k1)) & np.uint64(M), p0 & np.uint64(M)]
        k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
    return np.stack(x, axis=1).reshape(-1)[:n].astype(np.uint32)


def uniform_ref(n, key, counter, bits=23):
    raw = philox_stream(n, key, counter)
    return (raw & np.uint32((1 << bits) - 1)).astype(np.float64) / (1 << bits)


def normal_ref(n, key, counter):
    """Box-Muller of the fp32 uniform pairs, in float64."""
    u = uniform_ref(n + (n & 1), key, counter)
    u1, u2 = np.maximum(u[0::2], np.float32(1e-7)), u[1::2]
    r = np.sqrt(-2.0 * np.log(u1))
    v = (u2.astype(np.float32) * np.float32(2 * math.pi)).astype(np.float64)  # the angle is rounded to fp32
    out = np.empty(n + (n & 1))
    out[0::2], out[1::2] = np.sin(v) * r, np.cos(v) * r
    return out[:n]


BITS = {pypto.DT_FP32: 23, pypto.DT_FP16: 10, pypto.DT_BF16: 7}
TORCH = {pypto.DT_FP32: torch.float32, pypto.DT_FP16: torch.float16, pypto.DT_BF16: torch.bfloat16}


def _draw(op, shape, key, counter, dtype, tile, alg=1):
    @pypto.jit
    def f(x: pypto.Tensor((1,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        return getattr(pypto, op)(list(shape), [key], [5, counter], [alg], dtype)

    return f(torch.zeros(1))


def test_the_documented_examples():
    """PyPTO's API reference prints these 4x4 results for key 1234, counter [0, 1]."""
    u = _draw("uniform", (4, 4), 1234, 1, pypto.DT_FP32, (4, 4))
    want = torch.tensor([[0.1689806, 0.9725481, 0.90036285, 0.16582811],
                         [0.1454581, 0.48029935, 0.02495587, 0.99239147],
                         [0.02835405, 0.10649502, 0.45283175, 0.87260246],
                         [0.6877538, 0.24809706, 0.95886254, 0.24039495]])
    torch.testing.assert_close(u, want, rtol=0, atol=5e-8)
    z = _draw("normal", (4, 4), 1234, 1, pypto.DT_FP32, (4, 4))
    want = torch.tensor([[-0.32364845, 1.8577391, 0.39556974, 0.2311697],
                         [0.24243996, -1.9485782, -0.12983137, 2.7137496],
                         [1.6558666, 2.0938187, -0.90338254, 0.8765667],
                         [0.86518306, 0.01034508, 0.2893259, 0.01748212]])
    torch.testing.assert_close(z, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("shape,tile,dtype", [((1000,), (64,), pypto.DT_FP32), ((7, 13), (4, 8), pypto.DT_FP16),
                                               ((3, 5, 9), (2, 4, 4), pypto.DT_BF16),
                                               ((2, 3, 4, 5), (1, 2, 2, 4), pypto.DT_FP32),
                                               ((33,), (33,), pypto.DT_BF16), ((7, 13), (4, 8), pypto.DT_FP32)])
def test_uniform_is_the_philox_stream_bit_for_bit(dtype, shape, tile):
    key, counter = 0xDEADBEEF12345678, 2 ** 40 + 3
    got = _draw("uniform", shape, key, counter, dtype, tile)
    assert got.dtype == TORCH[dtype] and tuple(got.shape) == shape
    want = uniform_ref(math.prod(shape), key, counter, BITS[dtype]).reshape(shape)
    assert torch.equal(got.double(), torch.from_numpy(want))
    assert float(got.min()) >= 0 and float(got.max()) < 1


@pytest.mark.parametrize("shape,tile,dtype", [((1001,), (64,), pypto.DT_FP32), ((7, 13), (4, 8), pypto.DT_FP16),
                                               ((3, 5, 9), (3, 3, 3), pypto.DT_BF16),
                                               ((7, 13), (4, 8), pypto.DT_FP32)])
def test_normal_is_box_muller_of_the_stream(dtype, shape, tile):
    key, counter = 99, 7
    got = _draw("normal", shape, key, counter, dtype, tile, alg=3)
    assert got.dtype == TORCH[dtype] and tuple(got.shape) == shape
    want = torch.from_numpy(normal_ref(math.prod(shape), key, counter).reshape(shape))
    if dtype == pypto.DT_FP32:
        torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)
    else:  # computed in fp32, rounded once to the dtype: at most one ulp of the dtype away
        eps = torch.finfo(TORCH[dtype]).eps
        torch.testing.assert_close(got.double(), want.to(TORCH[dtype]).double(), rtol=eps, atol=1e-6)


@pytest.mark.parametrize("op", ["uniform", "normal"])
def test_the_values_do_not_depend_on_the_tile_shape(op):
    outs = [_draw(op, (37, 50), 42, 9, pypto.DT_FP32, tile) for tile in ((37, 50), (8, 16), (5, 7), (1, 3))]
    for o in outs[1:]:
        assert torch.equal(o, outs[0])


def test_the_values_do_not_depend_on_the_worker_count():
    code = ("import pypto, torch, hashlib\n"
            "@pypto.jit\n"
            "def f(x: pypto.Tensor((1,), pypto.DT_FP32)):\n"
            "    pypto.set_vec_tile_shapes(8, 16)\n"
            "    return pypto.normal([64, 96], [3], [0, 4], [1], pypto.DT_FP32)\n"
            "print(hashlib.sha256(f(torch.zeros(1)).numpy().tobytes()).hexdigest())\n")
    digests = set()
    for workers in ("1", "3"):
        r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYPTO_NUM_THREADS=workers),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        digests.add(r.stdout.strip())
    assert len(digests) == 1


def test_a_dynamic_shape_and_a_fused_consumer():
    """Dropout: the mask comes from the stream of the flattened (rows, 40) shape, whatever rows is."""
    @pypto.jit
    def dropout(x: pypto.Tensor((pypto.DYNAMIC, 40), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        u = pypto.uniform([x.shape[0], 40], [11], [0, 1], [1], pypto.DT_FP32)
        return pypto.where(u >= 0.25, x / 0.75, 0.0)

    for rows in (1, 9, 30):
        x = torch.randn(rows, 40)
        keep = torch.from_numpy(uniform_ref(rows * 40, 11, 1).reshape(rows, 40)) >= 0.25
        torch.testing.assert_close(dropout(x), torch.where(keep, x / 0.75, torch.zeros(())))


def test_streams_of_other_keys_and_counters_are_uncorrelated():
    n = 1 << 16
    a = _draw("uniform", (n,), 1, 0, pypto.DT_FP32, (4096,)).double()
    b = _draw("uniform", (n,), 2, 0, pypto.DT_FP32, (4096,)).double()
    c = _draw("uniform", (n,), 1, 1, pypto.DT_FP32, (4096,)).double()
    for other in (b, c):
        assert abs(float(torch.corrcoef(torch.stack([a, other]))[0, 1])) < 0.02
    assert abs(float(torch.corrcoef(torch.stack([a[:-1], a[1:]]))[0, 1])) < 0.02  # neighbours


def _ks(sample: torch.Tensor, cdf) -> float:
    """The Kolmogorov-Smirnov statistic of sample against the continuous cdf."""
    x, _ = torch.sort(sample.double())
    n = x.numel()
    f = cdf(x)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return float(torch.maximum(i / n - f, f - (i - 1) / n).max())


def test_statistics_of_uniform_and_normal():
    n = 1 << 18
    crit = 1.95 / math.sqrt(n)  # the KS test at the 0.1% level
    u = _draw("uniform", (512, 512), 2024, 0, pypto.DT_FP32, (64, 128)).reshape(-1)
    assert abs(float(u.double().mean()) - 0.5) < 4 * math.sqrt(1 / 12 / n)
    assert abs(float(u.double().var()) - 1 / 12) < 0.002
    assert _ks(u, lambda x: x) < crit
    z = _draw("normal", (512, 512), 2024, 0, pypto.DT_FP32, (64, 128)).reshape(-1)
    assert abs(float(z.double().mean())) < 4 / math.sqrt(n)
    assert abs(float(z.double().var()) - 1) < 0.015
    assert _ks(z, torch.special.ndtr) < crit
    assert bool(torch.isfinite(z).all())


def test_errors_name_the_op_the_argument_and_the_value():
    def build(op="uniform", shape=(4, 4), key=(1,), counter=(0, 1), alg=(1,), dtype=pypto.DT_FP32):
        @pypto.jit
        def f(x: pypto.Tensor((1,), pypto.DT_FP32)):
            return getattr(pypto, op)(shape, key, counter, alg, dtype)
        return lambda: f(torch.zeros(1))

    with pytest.raises(ValueError, match=r"pypto\.uniform at .*test_random\.py:\d+: shape must be a list of 1 to 4 "
                                         r"dims, found \(1, 2, 3, 4, 5\)"):
        build(shape=(1, 2, 3, 4, 5))()
    with pytest.raises(ValueError, match=r"every dim of shape must be positive, found \[4, 0\]"):
        build(shape=(4, 0))()
    with pytest.raises(TypeError, match=r"pypto\.normal at .*: key must be a list of 1 int, found \[1, 2\]"):
        build("normal", key=[1, 2])()
    with pytest.raises(ValueError, match=r"key\[0\] must be in \[0, 2\*\*64\), found -1"):
        build(key=[-1])()
    with pytest.raises(TypeError, match=r"counter must be a list of 2 ints, found \[1\]"):
        build(counter=[1])()
    with pytest.raises(pypto.NotSupportedError, match=r"alg \[2\] is not supported yet"):
        build(alg=[2])()
    with pytest.raises(ValueError, match=r"alg must be \[1\] \(Philox\) or \[3\] \(auto_select\), found \[7\]"):
        build(alg=[7])()
    with pytest.raises(TypeError, match=r"dtype must be DT_FP32, DT_FP16 or DT_BF16, found 'DT_INT32'"):
        build(dtype=pypto.DT_INT32)()

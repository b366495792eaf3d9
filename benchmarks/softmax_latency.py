"""Quick side-by-side figures for the README softmax (not a test): cold
compile time in a fresh cache, the cached-call overhead on a tiny tensor, and
pypto versus torch.softmax on 4096 x 4096 fp32, medians measured in one run.

    python benchmarks/softmax_latency.py
"""

import os
import tempfile
import time

import torch

import pypto


def make(m, n):
    @pypto.frontend.jit
    def softmax(x: pypto.Tensor((m, n), pypto.DT_FP32)) -> pypto.Tensor((m, n), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(32, 32)
        mx = pypto.amax(x, -1, True)
        e = pypto.exp(pypto.sub(x, mx))
        return pypto.div(e, pypto.sum(e, -1, True))

    return softmax


def median_time(fn, n=10):
    fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]


def main():
    os.environ["PYPTO_CACHE_DIR"] = tempfile.mkdtemp(prefix="pypto-bench-")
    f = make(4096, 4096)
    x = torch.randn(4096, 4096)
    t = time.perf_counter()
    f(x)
    cold = time.perf_counter() - t
    stats = pypto.compile(f, x).stats()
    tp = median_time(lambda: f(x))
    tt = median_time(lambda: torch.softmax(x, -1))
    small = make(8, 32)
    xs = torch.randn(8, 32)
    overhead = median_time(lambda: small(xs), 200)
    print(f"cold first call: {cold:.2f} s (compile_seconds {stats['compile_seconds']:.2f} s)")
    print(f"softmax 4096x4096 fp32: pypto {tp * 1e3:.1f} ms, torch.softmax {tt * 1e3:.1f} ms, "
          f"torch/pypto {tt / tp:.2f}x")
    print(f"cached call on 8x32: {overhead * 1e6:.0f} us")


if __name__ == "__main__":
    main()

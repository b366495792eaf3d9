"""pypto against its peers on the CPU: torch eager, torch's built-in op,
torch.compile and NumPy, for row kernels (add, GELU, softmax, the norms,
SwiGLU), matmuls and single-head attention, plus pypto's call and compile
latencies. Everything runs in one process (the disk-cache load time is
measured in a child process).

    python benchmarks/run.py [--quick] [--repeats N] [--json OUT.json] [--plot OUT.png]

--quick runs the first size of each kernel with 3 repeats (default: every
size, 10 repeats; --repeats overrides either); --json writes every number,
every sample and the machine info; --plot draws the peer/pypto time ratios
(needs matplotlib). Each implementation is checked against a float64 torch
reference before it is timed; that first call is the warm-up (it compiles
pypto and torch.compile). Times are medians of interleaved (round-robin)
repeats.
See docs/performance.md for the method and the latest numbers.
"""

# No "from __future__ import annotations" here: pypto reads the pypto.Tensor annotations of a jitted
# function when it is decorated, and string annotations would silently drop them (no shape and dtype
# checks, no cached-call fast path).
import argparse
import datetime
import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Union

# NumPy's OpenBLAS worker threads busy-wait for about 0.1 s after each call; on a 2-core machine they
# would steal a core from the implementation timed next in the round robin. One BLAS thread keeps
# the interleaved timings independent of each other (set the variable to override).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The same for torch's OpenMP threads (libgomp), which by default spin for a long time after each
# parallel region: timed right after a torch call, pypto ran at 0.6-0.8 of its speed alone while
# they held the cores. Passive waiting makes them sleep when idle, as pypto's workers do after
# 50 us (torch's own times do not change measurably); set the variable to override.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402 - after the BLAS thread setting
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import pypto  # noqa: E402

ROWS = COLS = 4096                 # the shape of the row kernels
EPS = 1e-5                         # layer norm and RMS norm epsilon
VEC_TILE = (4, 4096)               # pypto vec tile of the row kernels (clipped to small tensors)
ATTENTION_VEC_TILE = (8, 512)      # vec tile the score ops are traced with (fused into the attention op, unused)
SWIGLU = (1024, 1024, 2816)        # tokens, model dim, hidden dim
COPY_MIB = 256                     # size of the array copied to measure the memory bandwidth
TINY = (8, 32)                     # the softmax of the cached-call latency
INV_SQRT2 = 1.0 / math.sqrt(2.0)
PEERS = {"eager": "torch eager sequence", "builtin": "torch built-in", "compile": "torch.compile", "numpy": "NumPy"}
PYPTO_DT = {torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16}
LOW_PRECISION_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


# --------------------------------------------------------------------------- pypto kernels

def vec_tile(m: int, n: int, tile: tuple[int, int] = VEC_TILE) -> tuple[int, int]:
    """`tile`, clipped to an (m, n) tensor."""
    return min(tile[0], m), min(tile[1], n)


def pypto_add(m: int, n: int):
    @pypto.frontend.jit
    def add(x: pypto.Tensor((m, n), pypto.DT_FP32), y: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return x + y
    return add


def pypto_gelu(m: int, n: int):
    @pypto.frontend.jit
    def gelu(x: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.gelu(x)
    return gelu


def pypto_unary(name: str, m: int, n: int):
    """pypto.<name>(x) of an (m, n) fp32 tensor."""
    @pypto.frontend.jit
    def unary(x: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return getattr(pypto, name)(x)
    return unary


def pypto_cumsum(m: int, n: int):
    """pypto.cumsum(x, -1) of an (m, n) fp32 tensor (a running sum along each row)."""
    @pypto.frontend.jit
    def cumsum(x: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.cumsum(x, -1)
    return cumsum


def pypto_topk(m: int, n: int, k: int):
    """The k largest of each row of an (m, n) fp32 tensor and their positions."""
    @pypto.frontend.jit
    def topk(x: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.topk(x, k)
    return topk


def pypto_argsort(m: int, n: int):
    """The positions sorting each row of an (m, n) fp32 tensor, largest first."""
    @pypto.frontend.jit
    def argsort(x: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.argsort(x)
    return argsort


def pypto_index_add(m: int, n: int, t: int):
    """An (m, n) fp32 tensor plus the rows of a (t, n) source at row positions index (duplicates add up)."""
    @pypto.frontend.jit
    def index_add(x: pypto.Tensor((m, n), pypto.DT_FP32), index: pypto.Tensor((t,), pypto.DT_INT64),
                  source: pypto.Tensor((t, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, min(n, 1024))  # 32 source rows per task: fewer tasks in the ordered chain
        return pypto.index_add(x, 0, index, source)
    return index_add


def pypto_softmax(m: int, n: int):
    @pypto.frontend.jit
    def softmax(x: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        mx = pypto.amax(x, -1, True)
        e = pypto.exp(x - mx)
        return e / pypto.sum(e, -1, True)
    return softmax


def pypto_layer_norm(m: int, n: int):
    @pypto.frontend.jit
    def layer_norm(x: pypto.Tensor((m, n), pypto.DT_FP32), w: pypto.Tensor((n,), pypto.DT_FP32),
                   b: pypto.Tensor((n,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.layer_norm(x, w, b, EPS)
    return layer_norm


def pypto_rms_norm(m: int, n: int):
    @pypto.frontend.jit
    def rms_norm(x: pypto.Tensor((m, n), pypto.DT_FP32), w: pypto.Tensor((n,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.rms_norm(x, w, EPS)
    return rms_norm


def pypto_swiglu_tail(m: int, n: int):
    @pypto.frontend.jit
    def swiglu_tail(a: pypto.Tensor((m, n), pypto.DT_FP32), b: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.silu(a) * b
    return swiglu_tail


def pypto_swiglu_ffn(t: int, d: int, f: int):
    @pypto.frontend.jit
    def swiglu_ffn(x: pypto.Tensor((t, d), pypto.DT_FP32), w1: pypto.Tensor((d, f), pypto.DT_FP32),
                   w3: pypto.Tensor((d, f), pypto.DT_FP32), w2: pypto.Tensor((f, d), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(t, f))
        return pypto.matmul(pypto.silu(pypto.matmul(x, w1)) * pypto.matmul(x, w3), w2)
    return swiglu_ffn


def pypto_matmul(m: int, k: int, n: int, dtype, out_dtype=pypto.DT_FP32):
    @pypto.frontend.jit
    def matmul(a: pypto.Tensor((m, k), dtype), b: pypto.Tensor((k, n), dtype)):
        return pypto.matmul(a, b, out_dtype=out_dtype)
    return matmul


def pypto_matmul_bias_gelu(m: int, k: int, n: int):
    @pypto.frontend.jit
    def matmul_bias_gelu(x: pypto.Tensor((m, k), pypto.DT_FP32), w: pypto.Tensor((k, n), pypto.DT_FP32),
                         bias: pypto.Tensor((n,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(m, n))
        return pypto.gelu(pypto.matmul(x, w) + bias)
    return matmul_bias_gelu


def pypto_attention(s: int, d: int):
    @pypto.frontend.jit
    def attention(q: pypto.Tensor((s, d), pypto.DT_FP32), k: pypto.Tensor((s, d), pypto.DT_FP32),
                  v: pypto.Tensor((s, d), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*vec_tile(s, s, ATTENTION_VEC_TILE))
        scores = pypto.matmul(q, k, b_trans=True) * (1.0 / math.sqrt(d))
        e = pypto.exp(scores - pypto.amax(scores, -1, True))
        return pypto.matmul(e / pypto.sum(e, -1, True), v)
    return attention


# --------------------------------------------------------------------------- torch eager sequences

def eager_add(x, y):
    return x + y


def eager_gelu(x):
    return 0.5 * x * (1 + torch.erf(x * INV_SQRT2))


def eager_softmax(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def eager_layer_norm(x, w, b):
    d = x - x.mean(-1, keepdim=True)
    return d * torch.rsqrt((d * d).mean(-1, keepdim=True) + EPS) * w + b


def eager_rms_norm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def eager_swiglu_tail(a, b):
    return F.silu(a) * b


def eager_swiglu_ffn(x, w1, w3, w2):
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def eager_matmul(a, b):
    return a @ b


def eager_matmul_fp32_out(a, b):
    return a.float() @ b.float()


def eager_matmul_bias_gelu(x, w, bias):
    return eager_gelu(x @ w + bias)


def eager_attention(q, k, v):
    return eager_softmax(q @ k.T * (1.0 / math.sqrt(q.shape[-1]))) @ v


# --------------------------------------------------------------------------- NumPy sequences

def numpy_erf():
    """scipy.special.erf, or None when scipy is missing (NumPy itself has no erf)."""
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return erf


NO_ERF = "n/a: exact (erf) GELU needs scipy"
ERF_FOOTNOTE = "NumPy has no erf: the NumPy row uses scipy.special.erf"


def numpy_gelu_of(erf):
    return lambda x: 0.5 * x * (1 + erf(x * INV_SQRT2))


def numpy_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_layer_norm(x, w, b):
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + EPS) * w + b


def numpy_rms_norm(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w


def numpy_silu(a):
    return a / (1 + np.exp(-a))


def numpy_swiglu_tail(a, b):
    return numpy_silu(a) * b


def numpy_swiglu_ffn(x, w1, w3, w2):
    return (numpy_silu(x @ w1) * (x @ w3)) @ w2


def numpy_matmul_fp32_out(a, b):
    return a.astype(np.float32) @ b.astype(np.float32)


def numpy_attention(q, k, v):
    return numpy_softmax(q @ k.T * np.float32(1.0 / math.sqrt(q.shape[-1]))) @ v


# --------------------------------------------------------------------------- kernel definitions

@dataclass
class Kernel:
    """One benchmarked kernel: its inputs and an implementation per column."""

    name: str
    inputs: tuple
    pypto: Callable
    eager: Callable                        # the torch op sequence; also compiled by torch.compile
    builtin: Optional[tuple[str, Callable]]  # (label, torch's built-in op)
    numpy: Union[Callable, str]            # the NumPy sequence, or why there is none
    work: float                            # bytes moved (memory-bound) or flops (compute-bound)
    unit: str                              # "GB/s" or "GFLOP/s"
    tol: tuple[float, float] = (1e-5, 1e-4)   # atol, rtol against the float64 reference
    reference: Optional[Callable] = None   # default: the eager sequence on float64 copies
    footnote: str = ""                     # printed under the kernel's table

    def reference_output(self) -> torch.Tensor:
        if self.reference is not None:
            return self.reference(*self.inputs).double()
        return self.eager(*(t.double() for t in self.inputs))


def randn(*shape, scale=1.0, dtype=torch.float32) -> torch.Tensor:
    return (torch.randn(*shape) * scale).to(dtype)


def row_bytes(*shapes) -> float:
    """fp32 bytes of the given tensor shapes (inputs and outputs, each once)."""
    return 4.0 * sum(math.prod(s) for s in shapes)


def add_kernel() -> Kernel:
    m, n = ROWS, COLS
    return Kernel(f"add {m}x{n}", (randn(m, n), randn(m, n)), pypto_add(m, n), eager_add, None,
                  np.add, row_bytes((m, n), (m, n), (m, n)), "GB/s")


def gelu_kernel() -> Kernel:
    m, n = ROWS, COLS
    erf = numpy_erf()
    return Kernel(f"GELU {m}x{n}", (randn(m, n),), pypto_gelu(m, n), eager_gelu, ("F.gelu", F.gelu),
                  numpy_gelu_of(erf) if erf else NO_ERF, row_bytes((m, n), (m, n)), "GB/s",
                  footnote=ERF_FOOTNOTE if erf else "")


def unary_kernel(name: str) -> Kernel:
    """One elementwise math op of the op families (sin, log1p), against torch's and NumPy's."""
    m, n = ROWS, COLS
    x = randn(m, n).abs() if name == "log1p" else randn(m, n, scale=10.0)
    fn = getattr(torch, name)
    return Kernel(f"{name} {m}x{n}", (x,), pypto_unary(name, m, n), fn, None, getattr(np, name),
                  row_bytes((m, n), (m, n)), "GB/s", tol=(1e-6, 1e-6))


def cumsum_kernel() -> Kernel:
    """A running sum along the rows, against torch.cumsum and np.cumsum."""
    m, n = ROWS, COLS
    return Kernel(f"cumsum {m}x{n}", (randn(m, n),), pypto_cumsum(m, n), lambda x: torch.cumsum(x, -1), None,
                  lambda x: np.cumsum(x, -1), row_bytes((m, n), (m, n)), "GB/s", tol=(1e-3, 1e-4))


def topk_kernel(k: int = 8) -> Kernel:
    """torch.topk's values and positions (sorted) of each row; the reference checks the values."""
    m, n = ROWS, COLS
    kernel = pypto_topk(m, n, k)
    return Kernel(f"topk k={k} {m}x{n}", (randn(m, n),), lambda x: kernel(x)[0],
                  lambda x: torch.topk(x, k).values, None,
                  lambda x: -np.sort(np.partition(-x, k - 1, axis=-1)[:, :k], axis=-1),
                  row_bytes((m, n), (m, 2 * k)), "GB/s", tol=(0.0, 0.0))


def argsort_kernel() -> Kernel:
    """Stable argsort of each row of a 1024-wide tensor; positions compared through the values they pick."""
    m, n = ROWS, 1024
    return Kernel(f"argsort {m}x{n}", (randn(m, n),), pypto_argsort(m, n),
                  lambda x: torch.argsort(x, dim=-1, descending=True, stable=True), None,
                  lambda x: np.argsort(-x, axis=-1, kind="stable"), row_bytes((m, n), (m, n)), "GB/s",
                  tol=(0.0, 0.0), reference=lambda x: torch.argsort(x, dim=-1, descending=True, stable=True))


def index_add_kernel() -> Kernel:
    """Rows of a source added into a copy of x at random row positions (duplicates accumulate)."""
    m, n, t = ROWS, 1024, ROWS
    index = torch.randint(0, m, (t,), generator=torch.Generator().manual_seed(0))

    def numpy_index_add(x, i, s):
        out = x.copy()
        np.add.at(out, i, s)
        return out

    return Kernel(f"index_add {m}x{n} +{t} rows", (randn(m, n), index, randn(t, n)), pypto_index_add(m, n, t),
                  lambda x, i, s: torch.index_add(x, 0, i, s), None, numpy_index_add,
                  row_bytes((m, n), (t, n), (m, n)) + 8.0 * t, "GB/s", tol=(1e-5, 1e-4),
                  reference=lambda x, i, s: torch.index_add(x.double(), 0, i, s.double()))


def softmax_kernel() -> Kernel:
    m, n = ROWS, COLS
    return Kernel(f"softmax {m}x{n}", (randn(m, n),), pypto_softmax(m, n), eager_softmax,
                  ("torch.softmax", lambda x: torch.softmax(x, -1)), numpy_softmax,
                  row_bytes((m, n), (m, n)), "GB/s", tol=(1e-6, 1e-4))


def layer_norm_kernel() -> Kernel:
    m, n = ROWS, COLS
    return Kernel(f"layer norm {m}x{n}", (randn(m, n, scale=3.0), randn(n), randn(n)), pypto_layer_norm(m, n),
                  eager_layer_norm, ("F.layer_norm", lambda x, w, b: F.layer_norm(x, (n,), w, b, EPS)),
                  numpy_layer_norm, row_bytes((m, n), (n,), (n,), (m, n)), "GB/s", tol=(1e-4, 1e-4))


def rms_norm_kernel() -> Kernel:
    m, n = ROWS, COLS
    return Kernel(f"RMS norm {m}x{n}", (randn(m, n, scale=3.0), randn(n)), pypto_rms_norm(m, n), eager_rms_norm,
                  ("F.rms_norm", lambda x, w: F.rms_norm(x, (n,), w, EPS)), numpy_rms_norm,
                  row_bytes((m, n), (n,), (m, n)), "GB/s", tol=(1e-4, 1e-4))


def swiglu_tail_kernel() -> Kernel:
    m, n = ROWS, COLS
    return Kernel(f"SwiGLU tail silu(a)*b {m}x{n}", (randn(m, n), randn(m, n)), pypto_swiglu_tail(m, n),
                  eager_swiglu_tail, None, numpy_swiglu_tail, row_bytes((m, n), (m, n), (m, n)), "GB/s")


def swiglu_ffn_kernel() -> Kernel:
    t, d, f = SWIGLU
    inputs = (randn(t, d), randn(d, f, scale=d ** -0.5), randn(d, f, scale=d ** -0.5), randn(f, d, scale=f ** -0.5))
    return Kernel(f"SwiGLU FFN T={t} D={d} F={f}", inputs, pypto_swiglu_ffn(t, d, f), eager_swiglu_ffn, None,
                  numpy_swiglu_ffn, 6.0 * t * d * f, "GFLOP/s", tol=(1e-3, 1e-3))


def matmul_kernel(s: int) -> Kernel:
    return Kernel(f"matmul fp32 {s}^3", (randn(s, s), randn(s, s, scale=s ** -0.5)),
                  pypto_matmul(s, s, s, pypto.DT_FP32), eager_matmul, ("torch.matmul", torch.matmul), np.matmul,
                  2.0 * s ** 3, "GFLOP/s", tol=(1e-3, 1e-3),
                  footnote="the eager sequence (a @ b) is the same call as torch.matmul")


def matmul_low_precision_kernel(dtype) -> Kernel:
    s = 1024
    name = LOW_PRECISION_NAMES[dtype]
    numpy_fn = numpy_matmul_fp32_out if dtype == torch.float16 else "n/a: NumPy has no bfloat16"
    inputs = (randn(s, s, dtype=dtype), randn(s, s, scale=s ** -0.5, dtype=dtype))
    return Kernel(f"matmul {name} in, fp32 out {s}^3", inputs, pypto_matmul(s, s, s, PYPTO_DT[dtype]),
                  eager_matmul_fp32_out, (f"torch.matmul ({name} out)", torch.matmul), numpy_fn, 2.0 * s ** 3,
                  "GFLOP/s", tol=(2e-2, 2e-2), reference=lambda a, b: a.double() @ b.double(),
                  footnote=f"eager, torch.compile and NumPy cast to fp32 and multiply (a.float() @ b.float()); "
                           f"torch.matmul multiplies in {name} and returns {name}")


def matmul_bf16_kernel(s: int) -> Kernel:
    inputs = (randn(s, s, dtype=torch.bfloat16), randn(s, s, scale=s ** -0.5, dtype=torch.bfloat16))
    dots = pypto._C.cpu_target_info(pypto.get_cpu_target())["bf16_dot_products"] or "none (widened to fp32)"
    return Kernel(f"matmul bf16 in and out {s}^3", inputs, pypto_matmul(s, s, s, pypto.DT_BF16, pypto.DT_BF16),
                  eager_matmul, ("torch.matmul", torch.matmul), "n/a: NumPy has no bfloat16", 2.0 * s ** 3,
                  "GFLOP/s", tol=(2e-2, 2e-2), reference=lambda a, b: a.double() @ b.double(),
                  footnote=f"every column multiplies bf16 and returns bf16; pypto's bf16 dot products on this "
                           f"target: {dots}")


def pypto_linear_bf16(m: int, k: int, n: int):
    @pypto.frontend.jit(pass_options={"sram_budget_kb": 1024})   # as models/common.py: a core's L2
    def linear_bf16(x: pypto.Tensor((m, k), pypto.DT_BF16), w: pypto.Tensor((n, k), pypto.DT_BF16)):
        pypto.set_cube_tile_shapes([256, 256], [256, 256], [256, 256])   # the model blocks' prefill tiles
        return pypto.matmul(x, w, out_dtype=pypto.DT_BF16, b_trans=True)
    return linear_bf16


def linear_bf16_kernel(m: int) -> Kernel:
    """A LLaMA-3-8B MLP projection in bf16: x [m, 4096] @ w^T, w [14336, 4096] in nn.Linear's layout."""
    k, n = 4096, 14336
    inputs = (randn(m, k, dtype=torch.bfloat16), randn(n, k, scale=k ** -0.5, dtype=torch.bfloat16))
    dots = pypto._C.cpu_target_info(pypto.get_cpu_target())["bf16_dot_products"] or "none (widened to fp32)"
    return Kernel(f"linear bf16 {m}x{k} @ [{n}, {k}]^T", inputs, pypto_linear_bf16(m, k, n),
                  lambda x, w: x @ w.t(), ("torch.nn.functional.linear", torch.nn.functional.linear),
                  "n/a: NumPy has no bfloat16", 2.0 * m * k * n, "GFLOP/s", tol=(2e-2, 2e-2),
                  reference=lambda x, w: x.double() @ w.double().t(),
                  footnote=f"bf16 in and out, the weight read transposed; pypto's bf16 dot products on this "
                           f"target: {dots}")


def pypto_scaled_mm_int8(s: int):
    @pypto.jit
    def scaled_mm_int8(a: pypto.Tensor((s, s), pypto.DT_INT8), b: pypto.Tensor((s, s), pypto.DT_INT8),
                       sa: pypto.Tensor((s, 1), pypto.DT_FP32), sb: pypto.Tensor((1, s), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([128, 128], [512, 512], [128, 128])  # int8 tiles: k = 512 is 64 KB of a
        return pypto.scaled_mm(a, b, pypto.DT_FP32, sa, sb)
    return scaled_mm_int8


def scaled_mm_int8_kernel() -> Kernel:
    """int8 x int8 with an exact int32 product, then a scale per row of a and per column of b."""
    s = 1024
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (s, s), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (s, s), generator=g, dtype=torch.int8)
    sa, sb = torch.rand(s, 1, generator=g) / 64, torch.rand(1, s, generator=g) / 64
    builtin = None
    if hasattr(torch, "_int_mm"):
        builtin = ("torch._int_mm", lambda a, b, sa, sb: torch._int_mm(a, b).float() * sa * sb)
    return Kernel(f"scaled_mm int8 {s}^3", (a, b, sa, sb), pypto_scaled_mm_int8(s),
                  lambda a, b, sa, sb: (a.float() @ b.float()) * sa * sb, builtin,
                  lambda a, b, sa, sb: (a.astype(np.float32) @ b.astype(np.float32)) * sa * sb, 2.0 * s ** 3,
                  "GFLOP/s", tol=(1e-3, 1e-5),
                  reference=lambda a, b, sa, sb: (a.long() @ b.long()).double() * sa.double() * sb.double(),
                  footnote="eager, torch.compile and NumPy multiply in fp32 (a.float() @ b.float()); pypto and "
                           "torch._int_mm in int32")


def pypto_conv(n: int, c: int, hw: int):
    @pypto.jit
    def conv3x3(x: pypto.Tensor((n, c, hw, hw), pypto.DT_FP32), w: pypto.Tensor((c, c, 3, 3), pypto.DT_FP32)):
        return pypto.conv(x, w, pypto.DT_FP32, [1, 1], [1, 1, 1, 1], [1, 1])
    return conv3x3


def conv_kernel() -> Kernel:
    """A ResNet-style 3x3 layer: 64 channels in and out, 56x56, padding 1."""
    n, c, hw = 1, 64, 56
    return Kernel(f"conv 3x3 {c}->{c} {hw}x{hw}", (randn(n, c, hw, hw), randn(c, c, 3, 3, scale=(9 * c) ** -0.5)),
                  pypto_conv(n, c, hw), lambda x, w: F.conv2d(x, w, padding=1), None,
                  "NumPy has no convolution", 2.0 * n * c * c * 9 * hw * hw, "GFLOP/s", tol=(1e-4, 1e-3),
                  footnote="eager is torch's F.conv2d (oneDNN's direct convolution); pypto pads the input and "
                           "runs an implicit GEMM (conv2d_tiles: the matmul loads each tap's input rows)")


def matmul_bias_gelu_kernel() -> Kernel:
    s = 1024
    erf = numpy_erf()
    numpy_fn = (lambda x, w, bias: numpy_gelu_of(erf)(x @ w + bias)) if erf else NO_ERF
    return Kernel(f"matmul+bias+GELU {s}^3", (randn(s, s), randn(s, s, scale=s ** -0.5), randn(s)),
                  pypto_matmul_bias_gelu(s, s, s), eager_matmul_bias_gelu,
                  ("F.gelu(torch.addmm)", lambda x, w, bias: F.gelu(torch.addmm(bias, x, w))), numpy_fn,
                  2.0 * s ** 3, "GFLOP/s", tol=(1e-3, 1e-3), footnote=ERF_FOOTNOTE if erf else "")


def attention_kernel(s: int, d: int) -> Kernel:
    return Kernel(f"attention seq {s} head {d}", (randn(s, d), randn(s, d), randn(s, d)), pypto_attention(s, d),
                  eager_attention, ("F.scaled_dot_product_attention", F.scaled_dot_product_attention),
                  numpy_attention, 4.0 * s * s * d, "GFLOP/s", tol=(1e-4, 1e-3))


def kernel_builders(quick: bool) -> list[Callable[[], Kernel]]:
    """The kernels to run, as builders (inputs are made when a kernel runs)."""
    matmul_sizes = [256] if quick else [256, 512, 1024, 2048]
    attention = [(1024, 64), (2048, 128)] if quick else [(s, d) for s in (1024, 2048, 4096) for d in (64, 128)]
    return ([add_kernel, gelu_kernel, softmax_kernel, layer_norm_kernel, rms_norm_kernel, swiglu_tail_kernel,
             swiglu_ffn_kernel]
            + [functools.partial(unary_kernel, name) for name in ("sin", "log1p")] + [cumsum_kernel, topk_kernel, argsort_kernel, index_add_kernel]
            + [functools.partial(matmul_kernel, s) for s in matmul_sizes]
            + [functools.partial(matmul_low_precision_kernel, dt) for dt in (torch.float16, torch.bfloat16)]
            + [functools.partial(matmul_bf16_kernel, s) for s in matmul_sizes if s >= 512 or quick]
            + [functools.partial(linear_bf16_kernel, m) for m in ([64] if quick else [512, 1])]
            + [scaled_mm_int8_kernel, conv_kernel, matmul_bias_gelu_kernel]
            + [functools.partial(attention_kernel, s, d) for s, d in attention])


# --------------------------------------------------------------------------- measuring

@dataclass
class Row:
    """One implementation of one kernel."""

    impl: str                  # "pypto" or one of PEERS
    label: str
    median_ms: Optional[float] = None
    rate: Optional[float] = None   # GB/s or GFLOP/s
    ratio: Optional[float] = None  # this time / pypto's time
    note: str = ""
    error: str = ""            # full text of an exception or a mismatch
    first_call_s: Optional[float] = None
    samples_ms: list[float] = field(default_factory=list)


def error_text(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def implementations(k: Kernel) -> dict[str, tuple[str, Union[Callable, str]]]:
    """impl -> (label, zero-argument callable, or the reason there is none)."""
    impls = {"pypto": ("pypto", functools.partial(k.pypto, *k.inputs)),
             "eager": (PEERS["eager"], functools.partial(k.eager, *k.inputs))}
    if k.builtin is not None:
        impls["builtin"] = (k.builtin[0], functools.partial(k.builtin[1], *k.inputs))
    # Static shapes; torch.compile compiles at the first call (the warm-up).
    impls["compile"] = (PEERS["compile"], functools.partial(torch.compile(k.eager, dynamic=False), *k.inputs))
    if isinstance(k.numpy, str):
        impls["numpy"] = (PEERS["numpy"], k.numpy)
    else:
        arrays = [t.numpy() for t in k.inputs]
        impls["numpy"] = (PEERS["numpy"], functools.partial(k.numpy, *arrays))
    return impls


def warm_up_and_check(row: Row, fn: Callable, ref: torch.Tensor, tol: tuple[float, float]) -> bool:
    """The first call (compiles pypto and torch.compile), checked against the reference.
    Returns False when the implementation failed and cannot be timed."""
    t0 = time.perf_counter()
    try:
        out = fn()
    except pypto.NotSupportedError as e:
        row.note, row.error = f"not supported ({error_text(e)})", str(e)
        return False
    except Exception as e:  # noqa: BLE001 - any failure is recorded in the row, the run goes on
        prefix = "torch.compile failed" if row.impl == "compile" else "error"
        row.note, row.error = f"{prefix}: {error_text(e)}", str(e)
        return False
    row.first_call_s = time.perf_counter() - t0
    got = torch.from_numpy(np.asarray(out)) if isinstance(out, np.ndarray) else out
    try:
        torch.testing.assert_close(got.double(), ref, atol=tol[0], rtol=tol[1])
    except AssertionError as e:
        err = (got.double() - ref).abs().max().item() if got.shape == ref.shape else float("nan")
        row.note, row.error = f"WRONG (max abs err {err:.2e})", str(e)
    return True


def time_interleaved(fns: dict[str, Callable], repeats: int) -> dict[str, list[float]]:
    """Times each function `repeats` times, round-robin, so machine noise hits all of them alike. The
    order rotates by one each round, so that no function always runs right after the same other one:
    a call finds the caches, the clock and the threads of the call before it as that call left them
    (timed in a fixed order on this box, the second of two identical kernels ran 5-17% faster)."""
    samples = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        first = r % len(names) if names else 0
        for name in names[first:] + names[:first]:
            t0 = time.perf_counter()
            fns[name]()
            samples[name].append(time.perf_counter() - t0)
    return samples


class _Copier:
    """np.copyto of COPY_MIB, the memory-bound kernels' yardstick, timed in the same rounds as
    each kernel (the machine's bandwidth drifts between kernels)."""

    def __init__(self):
        self.src = np.ones(COPY_MIB * 2 ** 20 // 4, dtype=np.float32)
        self.dst = np.empty_like(self.src)
        np.copyto(self.dst, self.src)

    def __call__(self):
        np.copyto(self.dst, self.src)

    def gbs(self, seconds: float) -> float:
        return 2 * self.src.nbytes / seconds * 1e-9


_COPIER: "_Copier | None" = None


def run_kernel(k: Kernel, repeats: int, copy_gbs: float) -> dict:
    """Times the kernel's implementations round-robin; memory-bound kernels also time the copy in
    the same rounds and report pypto's GB/s as a fraction of it."""
    global _COPIER
    ref = k.reference_output()
    rows, timed = [], {}
    for impl, (label, fn) in implementations(k).items():
        row = Row(impl, label)
        rows.append(row)
        if isinstance(fn, str):
            row.note = fn
        elif warm_up_and_check(row, fn, ref, k.tol):
            timed[impl] = fn
    if k.unit == "GB/s":
        _COPIER = _COPIER or _Copier()
        timed["copy"] = _COPIER
    samples = time_interleaved(timed, repeats)
    if "copy" in samples:
        copy_gbs = _COPIER.gbs(statistics.median(samples.pop("copy")))
    for row in rows:
        if row.impl in samples:
            row.samples_ms = [t * 1e3 for t in samples[row.impl]]
            row.median_ms = statistics.median(row.samples_ms)
            row.rate = k.work * 1e-9 / (row.median_ms * 1e-3)  # GB/s or GFLOP/s
    pypto_row = rows[0]
    if pypto_row.median_ms:
        for row in rows:
            if row.median_ms:
                row.ratio = row.median_ms / pypto_row.median_ms
        if k.unit == "GB/s" and not pypto_row.note:
            pypto_row.note = f"{100 * pypto_row.rate / copy_gbs:.0f}% of copy bandwidth ({copy_gbs:.1f} GB/s)"
    return {"name": k.name, "unit": k.unit, "work": k.work, "footnote": k.footnote, "rows": [asdict(r) for r in rows],
            "copy_gbs": copy_gbs if k.unit == "GB/s" else None}


def copy_bandwidth(repeats: int) -> float:
    """GB/s of np.copyto on a COPY_MIB float32 array, counting the bytes read and written."""
    src = np.ones(COPY_MIB * 2 ** 20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    seconds = statistics.median(time_interleaved({"copy": lambda: np.copyto(dst, src)}, repeats)["copy"])
    return 2 * src.nbytes / seconds * 1e-9


def clone_bandwidth(repeats: int) -> float:
    """GB/s of torch's clone of a ROWS x COLS fp32 tensor: a copy into a fresh output, as a kernel
    that returns a new tensor makes (its pages are faulted in on the first write)."""
    x = torch.ones(ROWS, COLS)
    seconds = statistics.median(time_interleaved({"clone": x.clone}, repeats)["clone"])
    return 2 * x.numel() * x.element_size() / seconds * 1e-9


# --------------------------------------------------------------------------- latency

CHILD_LOAD = """
import importlib.util, json, sys, time
import torch, pypto
spec = importlib.util.spec_from_file_location("pypto_bench_run", sys.argv[1])
bench = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
x = torch.randn(bench.ROWS, bench.COLS)
t0 = time.perf_counter()
f = bench.pypto_softmax(bench.ROWS, bench.COLS)
compiled = pypto.compile(f, x)
load = time.perf_counter() - t0
t0 = time.perf_counter()
f(x)
first = time.perf_counter() - t0
t0 = time.perf_counter()
f(x)
second = time.perf_counter() - t0
print(json.dumps({"load_s": load, "first_call_s": first, "second_call_s": second,
                  "host_compile_seconds": compiled.stats().get("host_compile_seconds")}))
"""


def cached_call_us(calls: int = 1000, batches: int = 5) -> tuple[float, list[float]]:
    """Time of a cached jitted call on a tiny softmax, in microseconds: the median of `batches`
    batch medians of `calls` calls each, 0.2 s apart (one batch takes a few ms, so a burst of noise
    from other work on the machine moves one batch, not the result); also the batch medians."""
    f = pypto_softmax(*TINY)
    x = torch.randn(*TINY)
    f(x)
    medians = []
    for i in range(batches):
        if i:
            time.sleep(0.2)
        medians.append(statistics.median(time_interleaved({"tiny": lambda: f(x)}, calls)["tiny"]) * 1e6)
    return statistics.median(medians), medians


def cold_compile(cache_dir: str) -> dict:
    """First call of the row softmax in an empty kernel cache (trace, passes, host compiler, run)."""
    previous = os.environ.get("PYPTO_CACHE_DIR")
    os.environ["PYPTO_CACHE_DIR"] = cache_dir
    try:
        f = pypto_softmax(ROWS, COLS)
        x = torch.randn(ROWS, COLS)
        t0 = time.perf_counter()
        f(x)
        first = time.perf_counter() - t0
        stats = pypto.compile(f, x).stats()
    finally:
        if previous is None:
            del os.environ["PYPTO_CACHE_DIR"]
        else:
            os.environ["PYPTO_CACHE_DIR"] = previous
    return {"first_call_s": first, "compile_seconds": stats["compile_seconds"],
            "host_compile_seconds": stats.get("host_compile_seconds")}


def disk_cache_load(cache_dir: str) -> dict:
    """Define + first call of the same softmax in a fresh process whose kernel cache is warm."""
    env = dict(os.environ, PYPTO_CACHE_DIR=cache_dir)
    proc = subprocess.run([sys.executable, "-c", CHILD_LOAD, os.path.abspath(__file__)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def latency() -> dict:
    cache_dir = tempfile.mkdtemp(prefix="pypto-bench-cache-")
    try:
        call_us, batch_us = cached_call_us()
        return {"cached_call_us": call_us, "cached_call_batches_us": batch_us, "cold_compile": cold_compile(cache_dir),
                "disk_cache_load": disk_cache_load(cache_dir)}
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


# --------------------------------------------------------------------------- report

def cpuinfo() -> dict[str, str]:
    """The fields of the first processor in /proc/cpuinfo."""
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def git_revision() -> str:
    """The commit of the checkout this script is in ("+dirty" with uncommitted changes), or "unknown"."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def machine_info() -> dict:
    cpu = cpuinfo()
    return {"cpu": cpu.get("model name", "unknown"), "cpu_family": cpu.get("cpu family"), "cpu_model": cpu.get("model"),
            "cores": os.cpu_count(), "python": sys.version.split()[0], "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "numpy": np.__version__,
            "openblas_threads": os.environ["OPENBLAS_NUM_THREADS"], "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
            "pypto": pypto.__version__,
            "revision": git_revision(),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def fmt(value: Optional[float], width: int) -> str:
    """value with 2 decimals right-aligned in width characters; "-" when there is none."""
    return ("-" if value is None else f"{value:.2f}").rjust(width)


def format_kernel(result: dict) -> str:
    memory_bound = result["unit"] == "GB/s"
    work = f"{result['work'] * 1e-9:.2f} {'GB moved' if memory_bound else 'GFLOP'}"
    lines = [f"{result['name']} ({'memory' if memory_bound else 'compute'}-bound, {work})",
             f"  {'implementation':34s} {'median ms':>10s} {result['unit']:>9s} {'peer/pypto':>11s}  note"]
    for r in result["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        lines.append(f"  {r['label']:34s} {fmt(r['median_ms'], 10)} {fmt(r['rate'], 9)} {ratio:>11s}  "
                     f"{r['note']}".rstrip())
    if result["footnote"]:
        lines.append(f"  note: {result['footnote']}")
    return "\n".join(lines)


def format_latency(lat: dict) -> str:
    cold, load = lat["cold_compile"], lat["disk_cache_load"]
    host = cold["host_compile_seconds"]
    lines = ["latency (pypto)",
             f"  cached call, {TINY[0]}x{TINY[1]} softmax (median of 5 batch medians of 1000 calls): "
             f"{lat['cached_call_us']:.1f} us (batches: {', '.join(f'{v:.1f}' for v in lat['cached_call_batches_us'])})",
             f"  cold compile, {ROWS}x{COLS} softmax, empty cache (first call): {cold['first_call_s']:.3f} s "
             f"(compile_seconds {cold['compile_seconds']:.3f} s"
             + (f", host_compile_seconds {host:.3f} s)" if host is not None else ")")]
    if "error" in load:
        lines.append(f"  disk cache load in a fresh process: FAILED\n{load['error']}")
    else:
        lines.append(f"  disk cache load in a fresh process (define, trace, cache hit, load the library): "
                     f"{load['load_s'] * 1e3:.1f} ms (then the first call {load['first_call_s'] * 1e3:.1f} ms, "
                     f"the second {load['second_call_s'] * 1e3:.1f} ms; host_compile_seconds {load['host_compile_seconds']})")
    return "\n".join(lines)


def plot(results: list[dict], path: str, plt) -> None:
    """Grouped bars of peer_time / pypto_time per kernel (log scale; above 1 means pypto is faster)."""
    fig, ax = plt.subplots(figsize=(max(10, 0.7 * len(results)), 6))
    width = 0.8 / len(PEERS)
    for i, (peer, label) in enumerate(PEERS.items()):
        ratios = [next((r["ratio"] for r in res["rows"] if r["impl"] == peer and r["ratio"]), float("nan"))
                  for res in results]
        ax.bar([x + (i - (len(PEERS) - 1) / 2) * width for x in range(len(results))], ratios, width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("peer time / pypto time (>1: pypto faster)")
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([res["name"] for res in results], rotation=60, ha="right", fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def import_pyplot():
    """matplotlib.pyplot with a file-only backend; exits with a hint when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("--plot needs matplotlib: pip install matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def format_header(machine: dict, repeats: int, copy_gbs: float, clone_gbs: float) -> str:
    return "\n".join([
        f"pypto benchmarks, {machine['date']}",
        f"machine: {machine['cpu']} (family {machine['cpu_family']} model {machine['cpu_model']}), "
        f"{machine['cores']} cores; python {machine['python']}, "
        f"torch {machine['torch']} ({machine['torch_threads']} threads), numpy {machine['numpy']} "
        f"(OPENBLAS_NUM_THREADS={machine['openblas_threads']}, OMP_WAIT_POLICY={machine['omp_wait_policy']}), "
        f"pypto {machine['pypto']} at {machine['revision']}",
        f"method: median of {repeats} interleaved repeats after a checked warm-up call; "
        f"fp32 unless a kernel's name says otherwise",
        f"copy bandwidth (np.copyto of {COPY_MIB} MiB fp32, read + write): {copy_gbs:.2f} GB/s",
        f"copy into a fresh output (torch clone of {ROWS}x{COLS} fp32, read + write): {clone_gbs:.2f} GB/s",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="first size of each kernel, 3 repeats")
    parser.add_argument("--repeats", type=int, help="timed repeats per implementation (default 10, 3 with --quick)")
    parser.add_argument("--only", metavar="TEXT", action="append",
                        help="run only the kernels whose name contains TEXT (repeatable), e.g. 'matmul bf16'")
    parser.add_argument("--json", metavar="OUT", help="write every number and the machine info to this file")
    parser.add_argument("--plot", metavar="OUT.png", help="write a bar chart of the peer/pypto ratios")
    parser.add_argument("--cpu-target", metavar="T", help="build pypto's kernels for this CPU target (default: "
                        "PYPTO_CPU_TARGET or native; see pypto.set_cpu_target)")
    parser.add_argument("--all-targets", action="store_true",
                        help="run everything once per CPU target this machine can run, one after another")
    args = parser.parse_args()
    plt = import_pyplot() if args.plot else None  # fail before the long run, not after it
    repeats = args.repeats or (3 if args.quick else 10)
    if args.all_targets:
        targets = [t for t in pypto._C.cpu_targets() if not pypto._C.cpu_target_info(t)["missing_here"]]
    else:
        targets = [args.cpu_target or pypto.get_cpu_target()]

    started = time.perf_counter()
    machine = machine_info()
    copy_gbs, clone_gbs = copy_bandwidth(repeats), clone_bandwidth(repeats)
    print(format_header(machine, repeats, copy_gbs, clone_gbs) + "\n", flush=True)
    per_target = {}
    for target in targets:
        pypto.set_cpu_target(target)
        os.environ["PYPTO_CPU_TARGET"] = target  # for the fresh process of the latency check
        print(f"== CPU target {pypto._C.cpu_target_info(target)['description']}\n", flush=True)
        torch.manual_seed(0)
        results = []
        for build in kernel_builders(args.quick):
            kernel = build()
            if args.only and not any(part in kernel.name for part in args.only):
                continue
            results.append(run_kernel(kernel, repeats, copy_gbs))
            print(format_kernel(results[-1]) + "\n", flush=True)
        lat = latency()
        print(format_latency(lat) + "\n", flush=True)
        per_target[target] = {"kernels": results, "latency": lat}
    wall = time.perf_counter() - started
    print(f"wall time: {wall:.0f} s")

    first = per_target[targets[0]]
    if args.json:
        report = {"machine": machine, "quick": args.quick, "repeats": repeats, "vec_tile": VEC_TILE, "attention_vec_tile": ATTENTION_VEC_TILE,
                  "copy_bandwidth_gbs": copy_gbs, "clone_bandwidth_gbs": clone_gbs, "cpu_target": targets[0],
                  "kernels": first["kernels"], "latency": first["latency"], "targets": per_target,
                  "wall_seconds": wall}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.plot:
        plot(first["kernels"], args.plot, plt)


if __name__ == "__main__":
    main()

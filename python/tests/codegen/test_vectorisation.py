"""Generated tile loops vectorise: each InCore kernel of a few fused kernels, compiled with the
flags pypto uses, contains packed SIMD arithmetic, no scalar fused multiply-add and no call to a
scalar libm function."""

import os
import re
import subprocess

import numpy as np
import pytest

import pypto
from pypto import _C

M, N = 64, 256


@pypto.frontend.jit
def softmax(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
    pypto.set_vec_tile_shapes(16, 256)
    e = pypto.exp(pypto.sub(x, pypto.amax(x, -1, True)))
    return pypto.div(e, pypto.sum(e, -1, True))


@pypto.frontend.jit
def gelu_tanh_log(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
    pypto.set_vec_tile_shapes(16, 256)
    return pypto.gelu(x) + pypto.tanh(x) + pypto.log(pypto.abs(x) + 1.0) + pypto.rsqrt(x * x + 1.0)


@pypto.frontend.jit
def math_family(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
    # The vector math of the op-families issue (each a tile library function of its own).
    pypto.set_vec_tile_shapes(16, 256)
    a = pypto.log2(x) + pypto.log10(x) + pypto.log1p(x) + pypto.sinh(x) + pypto.cosh(x) + pypto.asinh(x)
    b = pypto.acosh(x) + pypto.atanh(x) + pypto.cbrt(x) + pypto.atan(x) + pypto.asin(x) + pypto.acos(x)
    c = pypto.sin(x) + pypto.cos(x) + pypto.tan(x)
    return a + b + c + pypto.hypot(x, a) + pypto.copysign(b, x) + pypto.atan2(a, x)


@pypto.frontend.jit
def scans(x: pypto.Tensor((M, N), pypto.DT_FP32)):
    # A running sum along rows (scanned a SIMD vector at a time) and a running product down columns.
    pypto.set_vec_tile_shapes(16, 256)
    return pypto.cumsum(x, 1), pypto.cumprod(x, 0)


@pypto.frontend.jit
def rms_norm(x: pypto.Tensor((M, N), pypto.DT_FP32), w: pypto.Tensor((N,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 256)
    return pypto.rms_norm(x, w, 1e-5)


@pypto.frontend.jit
def narrow_casts(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
    # Through each narrow storage format and back: the FP8, FP4 and INT4 conversions of the tile library.
    pypto.set_vec_tile_shapes(16, 256)
    out = pypto.cast(pypto.cast(x, pypto.DT_FP8E4M3), pypto.DT_FP32)
    for dt in (pypto.DT_FP8E5M2, pypto.DT_FP8E8M0, pypto.DT_FP4_E2M1, pypto.DT_FP4_E1M2, pypto.DT_INT4):
        out = out + pypto.cast(pypto.cast(x, dt), pypto.DT_FP32)
    return out


@pypto.frontend.jit
def random_draws(x: pypto.Tensor((M, N), pypto.DT_FP32)):
    # Philox blocks (32 x 32 -> 64-bit products, packed) and Box-Muller's log, sin and cos.
    pypto.set_vec_tile_shapes(16, 256)
    return x * pypto.uniform([M, N], [5], [0, 1], [1], pypto.DT_FP32) + pypto.normal([M, N], [5], [0, 2], [1],
                                                                                   pypto.DT_FP32)


# Packed single-precision arithmetic on SIMD registers (SSE, AVX or AVX-512).
PACKED = re.compile(r"^\s+v?(fmadd|fnmadd|fmsub|mul|add|sub|div|max|sqrt)\w*ps\s", re.M)
# A fused multiply-add on one float: the vector math (exp, log, tanh, erf) left scalar, as GCC leaves
# it on ISAs without masked operations (AVX2) unless it may if-convert (-fno-trapping-math).
SCALAR_FMA = re.compile(r"^\s+vfn?m(add|sub)\w*ss\s", re.M)
SCALAR_LIBM = re.compile(r"call\s+\S*\b(expf|logf|tanhf|erff|exp|log|tanh|erf|fmaf|fma|ldexpf|ilogbf|nearbyintf|"
                         r"sinf|cosf|tanf|sin|cos|tan|log2f|log10f|log1pf|sinhf|coshf|asinhf|acoshf|atanhf|cbrtf|"
                         r"atanf|asinf|acosf|hypotf|hypot|atan2f|atan2|sqrt)(@PLT)?\b")
# One float converted from an integer or rounded: a conversion loop (FP8, FP4, INT4) left scalar.
SCALAR_CONVERT = re.compile(r"^\s+v?(cvtsi2ss|roundss|cvttss2si)\w*\s", re.M)
# The widest registers each x86 CPU target's packed code uses.
REGISTERS = {"x86-64-v2": "xmm", "generic": "xmm", "x86-64-v3": "ymm", "x86-64-v4": "zmm"}


def kernel_assembly(compiled, tmp_path):
    """{kernel function name: its assembly} of the compiled program's generated source."""
    src = tmp_path / "kernel.cc"
    src.write_text(compiled.source())
    asm = tmp_path / "kernel.s"
    target = compiled.stats()["cpu_target"]
    flags = [f for f in _C.compiler_flags(target) if f not in ("-shared", "-fPIC")]
    subprocess.run(_C.compiler_command() + flags + ["-S", "-o", str(asm), str(src)], check=True)
    text = asm.read_text()
    out = {}
    # Kernels are static C++ functions, so their labels are mangled (_ZL<len>k_<name>...); the
    # compiler may split one into parts (name.part.0, name.cold), which count as the kernel.
    for m in re.finditer(r"^([\w$]*?k_\w+)((?:\.\w+)*):\n(.*?)\.cfi_endproc", text, re.S | re.M):
        out[m.group(1)] = out.get(m.group(1), "") + m.group(3)
    return out


@pytest.mark.parametrize("kernel,args", [
    (softmax, (np.zeros((M, N), np.float32),)),
    (gelu_tanh_log, (np.zeros((M, N), np.float32),)),
    (math_family, (np.zeros((M, N), np.float32),)),
    (scans, (np.zeros((M, N), np.float32),)),
    (rms_norm, (np.zeros((M, N), np.float32), np.ones(N, np.float32))),
    (narrow_casts, (np.zeros((M, N), np.float32),)),
])
@pytest.mark.parametrize("target", ["native", "x86-64-v2", "x86-64-v3", "x86-64-v4", "generic"])
def test_generated_kernels_use_packed_simd(kernel, args, target, tmp_path):
    # Compile-only: the assembly of each target, whether or not this CPU can run it.
    pypto.set_cpu_target(target)
    try:
        compiled = pypto.compile(kernel, *args)
    finally:
        pypto.set_cpu_target(None)
    assert compiled.stats()["cpu_target"] == target
    kernels = kernel_assembly(compiled, tmp_path)
    assert kernels, "no kernel function found in the assembly"
    reg = REGISTERS.get(target)
    for name, asm in kernels.items():
        packed = PACKED.findall(asm)
        assert len(packed) >= 4, f"{name}: only {len(packed)} packed float instructions"
        assert not SCALAR_LIBM.search(asm), f"{name} calls a scalar libm function"
        assert not SCALAR_CONVERT.findall(asm), f"{name}: scalar conversions (a conversion loop left scalar)"
        scalar = SCALAR_FMA.findall(asm)
        assert not scalar, f"{name}: {len(scalar)} scalar fused multiply-adds (vector math left scalar)"
        if reg is not None:
            wide = re.findall(r"^\s+v?(?:fmadd|mul|add|max)\w*ps\s.*%(xmm|ymm|zmm)", asm, re.M)
            assert reg in wide, f"{name} ({target}): no packed arithmetic on {reg} registers"
            wider = {"xmm": ("ymm", "zmm"), "ymm": ("zmm",), "zmm": ()}[reg]
            assert not any(w in asm for w in wider), f"{name} ({target}) uses registers wider than {reg}"


@pypto.frontend.jit
def int8_matmul(a: pypto.Tensor((M, N), pypto.DT_INT8), b: pypto.Tensor((N, M), pypto.DT_INT8)):
    pypto.set_cube_tile_shapes([32, 32], [128, 128], [32, 32])
    return pypto.matmul(a, b, pypto.DT_INT32)


@pytest.mark.parametrize("target", ["x86-64-v2", "x86-64-v3", "x86-64-v4"])
def test_int8_matmul_multiplies_packed_int16_pairs(target, tmp_path):
    # The tile matmul of int8 operands: PMADDWD (two int16 products and their sum per int32 lane)
    # on the target's widest registers, in its out-of-line micro-kernel.
    pypto.set_cpu_target(target)
    try:
        compiled = pypto.compile(int8_matmul, np.zeros((M, N), np.int8), np.zeros((N, M), np.int8))
    finally:
        pypto.set_cpu_target(None)
    text = (tmp_path / "kernel.s").read_text() if kernel_assembly(compiled, tmp_path) else ""
    reg = REGISTERS[target]
    assert len(re.findall(rf"^\s+v?pmaddwd\s.*%{reg}", text, re.M)) >= 8, "no packed int16-pair products"


def host_cpu_flags() -> set:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    return set()


def test_int8_matmul_uses_dot_products_where_the_cpu_has_them(tmp_path):
    # The native target on a CPU with AVX-512 and AVX512-VNNI: VPDPBUSD (four int8 products and their
    # sum per int32 lane); without VNNI, the int16 pairs. x86-64-v4 is AVX-512 without VNNI (the
    # psABI level): the pairs, whatever this CPU has.
    flags = host_cpu_flags()
    dot = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"} <= flags
    a, b = np.zeros((M, N), np.int8), np.zeros((N, M), np.int8)
    compiled = pypto.compile(int8_matmul, a, b)
    assert f"#define PTO_INT8_DOT {int(dot)}" in compiled.source()
    text = (tmp_path / "kernel.s").read_text() if kernel_assembly(compiled, tmp_path) else ""
    if dot:
        assert len(re.findall(r"^\s+vpdpbusd\s.*%zmm", text, re.M)) >= 8, "no int8 dot products"
    elif "x86_64" in os.uname().machine:
        assert re.search(r"^\s+v?pmaddwd\s", text, re.M), "no packed int16-pair products"
    pypto.set_cpu_target("x86-64-v4")
    try:
        compiled = pypto.compile(int8_matmul, a, b)
    finally:
        pypto.set_cpu_target(None)
    assert "#define PTO_INT8_DOT 0" in compiled.source()
    text = (tmp_path / "kernel.s").read_text() if kernel_assembly(compiled, tmp_path) else ""
    assert "vpdpbusd" not in text and re.search(r"^\s+vpmaddwd\s.*%zmm", text, re.M)


@pytest.mark.parametrize("target", ["x86-64-v2", "x86-64-v3", "x86-64-v4", "generic"])
def test_random_draws_are_packed(target, tmp_path):
    # The kernels call pto::trandom once per tile: its Philox rounds run vectors of blocks at a time
    # (packed 32 x 32 -> 64-bit products: pmuludq, or AVX-512's vpmullq) and Box-Muller's log, sin
    # and cos are the vector math.
    pypto.set_cpu_target(target)
    try:
        compiled = pypto.compile(random_draws, np.zeros((M, N), np.float32))
    finally:
        pypto.set_cpu_target(None)
    kernels = kernel_assembly(compiled, tmp_path)
    assert len(kernels) == 2, list(kernels)  # each draw fused with its consumer
    # The tile library's random functions, where the compiler keeps them out of line, count as part of
    # the kernels.
    outlined = re.findall(r"^(_ZN3pto\w*(?:trandom|philox)[\w.]*):\n(.*?)\.cfi_endproc",
                          (tmp_path / "kernel.s").read_text(), re.S | re.M)
    body = "".join(kernels.values()) + "".join(b for _, b in outlined)
    reg = REGISTERS[target]
    assert len(re.findall(rf"^\s+v?pmul(?:udq|lq)\s.*%{reg}", body, re.M)) >= 20, "Philox's products are not packed"
    assert re.search(rf"^\s+v?cvtdq2ps\s.*%{reg}", body, re.M), "the conversion to floats is not packed"
    assert not SCALAR_LIBM.search(body), "a scalar libm call"
    assert not SCALAR_FMA.findall(body), "scalar fused multiply-adds (vector math left scalar)"


def test_host_cpu_flags_are_used():
    # Code is built for the host CPU by default; the CPU's identity is part of the cache key (test_cache.py).
    assert "-march=native" in _C.compiler_flags()
    assert "-march=x86-64-v3" in _C.compiler_flags("x86-64-v3")
    assert "-march=native" not in _C.compiler_flags("generic")
    assert os.path.isabs(_C.cache_dir())

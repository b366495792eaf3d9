"""The `generic` CPU target is portable: generated kernels and the tile library, compiled for ARM64
with a cross compiler (aarch64-linux-gnu-g++) and run under user-mode emulation (qemu-aarch64),
against NumPy references. The sources are the ones pypto generates for `generic`; a small
sequential host (portable_runner.cc) stands in for the runtime, which is not built for ARM64.
The README's test command installs both tools (Debian packages g++-aarch64-linux-gnu, qemu-user)."""

import math
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
import torch

import pypto
from pypto import _C

HERE = pathlib.Path(__file__).parent
ABI_DIR = HERE.parents[2] / "csrc" / "runtime"
CXX = shutil.which("aarch64-linux-gnu-g++")
QEMU = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")

pytestmark = pytest.mark.skipif(CXX is None or QEMU is None,
                                reason="needs aarch64-linux-gnu-g++ and qemu-aarch64 (apt-get install "
                                       "g++-aarch64-linux-gnu qemu-user; the README's test command does)")


@pytest.fixture(autouse=True)
def _generic():
    pypto.set_cpu_target("generic")
    yield
    pypto.set_cpu_target(None)


def _cross_flags() -> list[str]:
    """The flags pypto compiles `generic` kernels with, for ARM64 and linked statically."""
    keep = [f for f in _C.compiler_flags("generic") if not f.startswith(("-march", "-mtune")) and f not in
            ("-fPIC", "-shared")]
    return keep + ["-march=armv8-a", "-static"]


def run_arm64(fn, args, tmp_path: pathlib.Path, want_asm: bool = False):
    """Compiles `fn` for `generic`, builds its source for ARM64 and runs it under qemu on `args`;
    returns the outputs and (with `want_asm`) the assembly of the kernel source."""
    compiled = pypto.compile(fn, *args)
    assert compiled.stats()["cpu_target"] == "generic"
    src = tmp_path / "kernel.cc"
    src.write_text(compiled.source())
    exe = tmp_path / "run"
    flags = _cross_flags()
    subprocess.run([CXX, *flags, f"-I{ABI_DIR}", str(src), str(HERE / "portable_runner.cc"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    asm = ""
    if want_asm:
        asm = subprocess.run([CXX, *[f for f in flags if f != "-static"], "-S", "-o", "-", str(src)], check=True,
                             capture_output=True, text=True).stdout
    _, _, outs, dyn = compiled._bind_call(tuple(args), {})
    argv = [QEMU, str(exe), str(len(dyn)), *map(str, dyn), str(len(args) + len(outs))]
    for i, a in enumerate([*args, *outs]):
        path = tmp_path / f"t{i}.bin"
        a.contiguous().view(torch.uint8).numpy().tofile(path)  # the tensor's bytes
        argv += [str(path), str(a.element_size()), str(a.dim()), *map(str, a.shape)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = [torch.from_numpy(np.fromfile(tmp_path / f"t{len(args) + i}.bin", np.uint8)).view(o.dtype).reshape(o.shape)
               for i, o in enumerate(outs)]
    return results, asm


M = pypto.frontend.dynamic("M")


@pypto.frontend.jit
def row_kernels(x: pypto.Tensor((M, 100), pypto.DT_FP32), w: pypto.Tensor((100,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 100)
    act = pypto.gelu(x) + pypto.sigmoid(x) * pypto.tanh(x) + pypto.log(pypto.abs(x) + 1.0)
    return pypto.softmax(x, -1), act, pypto.rms_norm(x, w, 1e-6)


def test_row_kernels_with_a_dynamic_dim(tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 100, generator=g)  # 37 rows: a partial last tile
    w = torch.randn(100, generator=g)
    (soft, act, norm), asm = run_arm64(row_kernels, [x, w], tmp_path, want_asm=True)
    xd, w = x.double().numpy(), w.numpy()
    e = np.exp(xd - xd.max(-1, keepdims=True))
    erf = np.vectorize(math.erf)
    want_act = 0.5 * xd * (1 + erf(xd / math.sqrt(2))) + np.tanh(xd) / (1 + np.exp(-xd)) + np.log1p(np.abs(xd))
    np.testing.assert_allclose(soft, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(act, want_act, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm, xd / np.sqrt((xd * xd).mean(-1, keepdims=True) + 1e-6) * w, rtol=1e-5, atol=1e-5)
    # The vector math is in NEON registers: packed float multiply-adds on four lanes.
    assert "fmla\tv" in asm and ".4s" in asm


@pytest.mark.parametrize("shape", [(64, 96, 80), (50, 70, 33)])
def test_matmul_fp32(tmp_path, shape):
    m, k, n = shape

    @pypto.frontend.jit
    def mm(a: pypto.Tensor((m, k), pypto.DT_FP32), b: pypto.Tensor((k, n), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 32], [32, 64], [16, 32])
        return pypto.matmul(a, b)

    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    (c,), _ = run_arm64(mm, [a, b], tmp_path)
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)


def test_half_and_bfloat16_storage(tmp_path):
    @pypto.frontend.jit
    def lowp(a: pypto.Tensor((40, 72), pypto.DT_FP16), b: pypto.Tensor((72, 24), pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(16, 32)
        prod = pypto.matmul(pypto.cast(a, pypto.DT_BF16), b, out_dtype=pypto.DT_FP32)
        return prod, pypto.cast(pypto.exp(pypto.cast(a, pypto.DT_FP32)), pypto.DT_FP16)

    g = torch.Generator().manual_seed(2)
    a = torch.randn(40, 72, generator=g).half()
    a[0, :4] = torch.tensor([math.inf, -math.inf, 0.0, -0.0])
    a[1, 0] = 6e-8  # a subnormal
    b = torch.randn(72, 24, generator=g).bfloat16()
    (prod, e), _ = run_arm64(lowp, [a, b], tmp_path)
    finite = torch.where(a.isfinite(), a, torch.zeros_like(a))
    want_prod = torch.where(a.isfinite().all(-1, keepdim=True), finite.bfloat16().double() @ b.double(), math.nan)
    ok = a.isfinite().all(-1)
    torch.testing.assert_close(prod[ok].double(), want_prod[ok], rtol=1e-4, atol=1e-4)
    want = torch.exp(a.float()).half()
    assert e.dtype == torch.float16
    assert torch.equal(e[0, :4], want[0, :4])  # inf, 0, 1, 1
    torch.testing.assert_close(e.float(), want.float(), rtol=1e-3, atol=0)

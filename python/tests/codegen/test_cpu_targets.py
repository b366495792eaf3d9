"""CPU targets: pypto.set_cpu_target / get_cpu_target / PYPTO_CPU_TARGET choose what generated code
is built for; each target the machine can run gives torch's numbers; code for a target this CPU
cannot run is refused before the call."""

import platform

import numpy as np
import pytest
import torch

import pypto
from pypto import _C

TARGETS = list(_C.cpu_targets())
RUNNABLE = [t for t in TARGETS if not _C.cpu_target_info(t)["missing_here"]]


pytestmark = pytest.mark.usefixtures("fresh_cpu_target")


N = pypto.frontend.dynamic("N")


@pypto.frontend.jit
def fused(x: pypto.Tensor((N, 200), pypto.DT_FP32), y: pypto.Tensor((N, 200), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 200)
    soft = pypto.softmax(x, -1)
    act = pypto.gelu(x) + pypto.tanh(y) * pypto.sigmoid(x) + pypto.log(pypto.abs(y) + 1.0)
    return soft, act, pypto.rsqrt(y * y + 1.0)


@pypto.frontend.jit
def mm(a: pypto.Tensor((N, 96), pypto.DT_FP32), b: pypto.Tensor((96, 80), pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([16, 16], [32, 32], [32, 32])
    return pypto.matmul(a, b, pypto.DT_FP32)


def test_names_defaults_and_errors(monkeypatch):
    assert TARGETS == ["native", "x86-64-v2", "x86-64-v3", "x86-64-v4", "generic"]
    assert pypto.get_cpu_target() == "native"
    pypto.set_cpu_target("x86-64-v3")
    assert pypto.get_cpu_target() == "x86-64-v3"
    pypto.set_cpu_target(None)
    monkeypatch.setenv("PYPTO_CPU_TARGET", "generic")
    assert pypto.get_cpu_target() == "generic"
    pypto.set_cpu_target("x86-64-v2")  # the function wins over the variable
    assert pypto.get_cpu_target() == "x86-64-v2"
    with pytest.raises(ValueError, match=r"pypto.set_cpu_target: 'avx9' is not a CPU target \(known: native, "
                                         r"x86-64-v2, x86-64-v3, x86-64-v4, generic\)"):
        pypto.set_cpu_target("avx9")
    pypto.set_cpu_target(None)
    monkeypatch.setenv("PYPTO_CPU_TARGET", "x86-64-v9")
    with pytest.raises(ValueError, match=r"PYPTO_CPU_TARGET: 'x86-64-v9' is not a CPU target"):
        mm(np.zeros((4, 96), np.float32), np.zeros((96, 80), np.float32))
    info = _C.cpu_target_info("x86-64-v4")
    assert info["vector_bytes"] == 64 and info["library"] == "avx512" and "avx512f" in info["features"]
    assert _C.cpu_target_info("x86-64-v3")["library"] == "avx2"
    assert _C.cpu_target_info("generic")["library"] == "generic"


def test_int8_dot_products_follow_the_targets_features():
    # VNNI is no psABI level's: x86-64-v4 never has it; native has it on an AVX-512 CPU with avx512_vnni.
    v4 = _C.cpu_target_info("x86-64-v4")["features"]
    assert not _C.cpu_target_info("x86-64-v4")["int8_dot_products"]
    try:
        _C.testing.set_host_features(v4 + ["avx512_vnni"])
        assert _C.cpu_target_info("native")["int8_dot_products"] == (platform.machine() == "x86_64")
        _C.testing.set_host_features(v4)
        assert not _C.cpu_target_info("native")["int8_dot_products"]
        v3 = _C.cpu_target_info("x86-64-v3")["features"]
        _C.testing.set_host_features(v3 + ["avx512_vnni"])  # no AVX-512 library: no dot products
        assert not _C.cpu_target_info("native")["int8_dot_products"]
    finally:
        _C.testing.set_host_features(None)


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("rows", [16, 13])  # tiles that do and do not divide
def test_each_runnable_target_matches_torch(target, rows):
    pypto.set_cpu_target(target)
    g = torch.Generator().manual_seed(rows)
    x, y = torch.randn(rows, 200, generator=g) * 3, torch.randn(rows, 200, generator=g)
    soft, act, rs = fused(x, y)
    torch.testing.assert_close(soft, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    ref = torch.nn.functional.gelu(x) + torch.tanh(y) * torch.sigmoid(x) + torch.log(y.abs() + 1)
    torch.testing.assert_close(act, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rs, torch.rsqrt(y * y + 1), rtol=1e-6, atol=1e-6)
    c = pypto.compile(fused, x, y)
    assert c.stats()["cpu_target"] == target and f"// CPU target {target}:" in c.source()
    a, b = torch.randn(rows, 96, generator=g), torch.randn(96, 80, generator=g)
    torch.testing.assert_close(mm(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_the_target_is_part_of_the_cache_key():
    a, b = np.ones((8, 96), np.float32), np.ones((96, 80), np.float32)
    pypto.set_cpu_target("x86-64-v2")
    v2 = pypto.compile(mm, a, b)
    pypto.set_cpu_target("generic")
    gen = pypto.compile(mm, a, b)
    assert gen is not v2 and gen.stats()["library"] != v2.stats()["library"]
    assert "#define PTO_ISA 1" in gen.source() and "#define PTO_ISA 2" in v2.source()
    pypto.set_cpu_target("x86-64-v2")
    assert pypto.compile(mm, a, b) is v2  # the memory cache keeps both


def test_the_variable_changed_between_cached_calls_takes_effect(monkeypatch):
    a, b = torch.randn(8, 96), torch.randn(96, 80)
    monkeypatch.setenv("PYPTO_CPU_TARGET", "x86-64-v2")
    mm(a, b)
    mm(a, b)  # the cached-call path
    monkeypatch.setenv("PYPTO_CPU_TARGET", "generic")
    torch.testing.assert_close(mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    built = sorted(c.stats()["cpu_target"] for c in mm._cache.values())
    assert "generic" in built and "x86-64-v2" in built
    monkeypatch.setenv("PYPTO_CPU_TARGET", "x86-64-v9")
    with pytest.raises(ValueError, match=r"PYPTO_CPU_TARGET: 'x86-64-v9' is not a CPU target"):
        mm(a, b)


def test_code_this_cpu_cannot_run_is_refused_before_the_call():
    a, b = np.ones((8, 96), np.float32), np.ones((96, 80), np.float32)
    pypto.set_cpu_target("x86-64-v4")
    if _C.cpu_target_info("x86-64-v4")["missing_here"]:
        pypto.compile(mm, a, b)  # this CPU has no AVX-512: compiled only
    else:
        mm(a, b)  # compiled and run once, so the refusal below is not the first check of this program
    v3_only = _C.cpu_target_info("x86-64-v3")["features"]
    _C.testing.set_host_features(v3_only)  # a CPU with AVX2 and no AVX-512
    assert _C.cpu_target_info("x86-64-v4")["missing_here"][:1] == ["avx512f"]
    with pytest.raises(NotImplementedError, match=r"'mm' was compiled for CPU target x86-64-v4, whose code this CPU "
                                                  r"cannot run \(it lacks avx512f, avx512bw, avx512cd, avx512dq, "
                                                  r"avx512vl\)"):
        mm(a, b)
    compiled = pypto.compile(mm, a, b)  # compiling for it still works
    assert compiled.stats()["cpu_target"] == "x86-64-v4" and compiled.stats()["tasks"] is None
    pypto.set_cpu_target("x86-64-v3")
    np.testing.assert_allclose(mm(a, b), a @ b)  # the target it has runs

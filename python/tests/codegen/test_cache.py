"""Issue 2, point 4: the disk cache. A second process running the same
kernel must not start the host compiler at all; a CXX wrapper that logs its
calls observes that."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

import pypto

SCRIPT = textwrap.dedent("""
    import sys, torch, pypto
    M, N = 48, 80

    @pypto.frontend.jit
    def softmax(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(16, 32)
        m = pypto.amax(x, -1, True)
        e = pypto.exp(pypto.sub(x, m))
        return pypto.div(e, pypto.sum(e, -1, True))

    x = torch.randn(M, N)
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
    print(next(iter(softmax._cache.values())).stats()["cache"])
""")


def _wrapper(tmp_path):
    log = tmp_path / "cxx.log"
    wrapper = tmp_path / "cxx-wrapper.sh"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec g++ \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper, log


def _run(tmp_path, env_extra):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path / "cache"), **env_extra)
    script = tmp_path / "kernel.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_second_process_does_not_run_the_compiler(tmp_path):
    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and "-shared" in calls[0]
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "disk"
    assert log.read_text().splitlines() == calls  # no new compiler call


def test_damaged_cache_entry_is_rebuilt(tmp_path):
    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    libs = list((tmp_path / "cache").rglob("*.so"))
    assert len(libs) == 1
    libs[0].write_bytes(b"not a shared library")
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    assert len(log.read_text().splitlines()) == 2


def test_cache_dir_holds_source_and_log(tmp_path):
    _run(tmp_path, {})
    cache = tmp_path / "cache"
    assert list(cache.rglob("*.cc")) and list(cache.rglob("*.log")) and list(cache.rglob("*.so"))
    assert not list(cache.rglob("*.tmp.*"))


def test_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    from conftest import softmax_kernel
    import torch

    f = softmax_kernel(8, 24, tile=(8, 8))
    with pytest.raises(pypto.CompileError, match="does not name an executable compiler"):
        f(torch.randn(8, 24))


def test_compiler_failure_names_kernel_source_and_log(tmp_path, monkeypatch):
    bad = tmp_path / "bad-cxx.sh"
    bad.write_text("#!/bin/sh\necho 'simulated compiler failure' >&2\nexit 3\n")
    bad.chmod(bad.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", str(bad))
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    from conftest import softmax_kernel
    import torch

    f = softmax_kernel(8, 40, tile=(8, 8))
    with pytest.raises(pypto.CompileError) as e:
        f(torch.randn(8, 40))
    msg = str(e.value)
    assert "compiling kernel 'softmax' failed (exit 3)" in msg
    assert "source: " in msg and ".cc" in msg and "compiler log: " in msg and "simulated compiler failure" in msg

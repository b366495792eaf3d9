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

# NumPy, not torch: importing torch would cost each of these processes about three seconds.
SCRIPT = textwrap.dedent("""
    import sys, numpy as np, pypto
    M, N = 48, 80

    @pypto.frontend.jit
    def softmax(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(16, 32)
        m = pypto.amax(x, -1, True)
        e = pypto.exp(pypto.sub(x, m))
        return pypto.div(e, pypto.sum(e, -1, True))

    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax(x), e / e.sum(-1, keepdims=True), atol=1e-5, rtol=0)
    assert "torch" not in sys.modules
    print(next(iter(softmax._cache.values())).stats()["cache"])
""")


def _wrapper(tmp_path):
    log = tmp_path / "cxx.log"
    wrapper = tmp_path / "cxx-wrapper.sh"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec g++ \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper, log


def _kernel_compiles(log):
    """The logged compiler calls that built a kernel library (not the precompiled prelude)."""
    return [c for c in log.read_text().splitlines() if "-shared" in c]


def _run(tmp_path, env_extra, script_text=SCRIPT):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path / "cache"), **env_extra)
    script = tmp_path / "kernel.py"
    script.write_text(script_text)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_second_process_does_not_run_the_compiler(tmp_path):
    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    calls = log.read_text().splitlines()
    # The kernel's whole source at once and, beside it, the prelude (target defines, ABI header,
    # tile library) as a precompiled header for the kernels compiled after it.
    assert len(calls) == 2
    assert sorted("c++-header" in c for c in calls) == [False, True]
    kernel = next(c for c in calls if "c++-header" not in c)
    assert "-shared" in kernel and ".pch." not in kernel
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "disk"
    assert log.read_text().splitlines() == calls  # no new compiler call


def test_a_kernel_compiled_after_the_precompile_includes_it(tmp_path):
    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    # Another shape: another kernel, same prelude, now precompiled.
    assert _run(tmp_path, {"CXX": str(wrapper)}, SCRIPT.replace("M, N = 48, 80", "M, N = 24, 72")) == "compiled"
    calls = log.read_text().splitlines()
    assert len(calls) == 3 and ".pch." in calls[2] and "c++-header" not in calls[2]


def test_damaged_cache_entry_is_rebuilt(tmp_path):
    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    libs = list((tmp_path / "cache").rglob("*.so"))
    assert len(libs) == 1
    libs[0].write_bytes(b"not a shared library")
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    calls = log.read_text().splitlines()
    assert len(calls) == 3 and "-shared" in calls[2]  # the kernel again; the precompiled prelude is reused


def test_cache_dir_holds_source_and_log(tmp_path):
    _run(tmp_path, {})
    cache = tmp_path / "cache"
    assert list(cache.rglob("*.cc")) and list(cache.rglob("*.log")) and list(cache.rglob("*.so"))
    assert not list(cache.rglob("*.tmp.*"))


def test_the_prelude_is_precompiled_once_and_a_damaged_one_is_harmless(tmp_path):
    wrapper, log = _wrapper(tmp_path)
    _run(tmp_path, {"CXX": str(wrapper)})
    pch = tmp_path / "cache" / "pch"
    headers, gch = list(pch.glob("prelude_*.h")), list(pch.glob("prelude_*.h.gch"))
    assert len(headers) == 1 and len(gch) == 1 and gch[0].stat().st_size > 0
    source = next((tmp_path / "cache").rglob("*.cc")).read_text()
    assert headers[0].read_text() in source  # the stored source stays self-contained
    assert not [p for p in (tmp_path / "cache").rglob("*.pch.*")]  # the short file is removed
    gch[0].write_bytes(b"garbage, not a precompiled header")
    for lib in (tmp_path / "cache").rglob("*.so"):
        lib.unlink()
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"  # right results: SCRIPT checks them


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


@pytest.mark.parametrize("cut", ["half", "tenth", "page"])
def test_a_truncated_library_is_rebuilt_not_loaded(tmp_path, cut):
    # A truncated ELF used to be loaded and die with SIGBUS; each entry now carries the size and
    # SHA-256 of its library, checked before it is loaded.
    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    (lib,) = (tmp_path / "cache").rglob("*.so")
    size = lib.stat().st_size
    keep = {"half": size // 2, "tenth": size // 10, "page": size - 4096}[cut]
    with open(lib, "r+b") as f:
        f.truncate(keep)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    assert len(_kernel_compiles(log)) == 2
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "disk"


def test_a_planted_library_is_not_loaded(tmp_path):
    # Whatever sits at the entry's path is checked against the record written with it before any
    # of its code runs; a library that does not match is rebuilt.
    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    (lib,) = (tmp_path / "cache").rglob("*.so")
    marker = tmp_path / "planted-ran"
    src = tmp_path / "planted.c"
    src.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void run(void) {{ '
                   f'FILE* f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    assert not marker.exists()


def test_the_cache_directory_is_private_and_a_shared_one_is_not_used(tmp_path):
    _run(tmp_path, {})
    cache = tmp_path / "cache"
    for d in [cache, *[p for p in cache.iterdir() if p.is_dir()]]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    cache.chmod(0o777)  # others could plant libraries here now
    env = dict(os.environ, PYPTO_CACHE_DIR=str(cache))
    script = tmp_path / "kernel.py"
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "compiled"  # not loaded from the shared directory
    assert f"not using the kernel cache directory '{cache}': others may write to it (mode 777)" in out.stderr


def test_an_abi_mismatch_is_repaired_within_the_process(tmp_path):
    # An entry whose library loads but reports another ABI version (a library of an older pypto) is
    # closed, rebuilt and loaded anew by the same process; the stale library used to stay loaded
    # and shadow the rebuilt one, so only the next process worked.
    import hashlib

    wrapper, log = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"
    (lib,) = (tmp_path / "cache").rglob("*.so")
    src = tmp_path / "old_abi.c"
    src.write_text("int pypto_abi_version(void) { return 0; }\n")
    lib.unlink()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    data = lib.read_bytes()
    lib.with_suffix(".sum").write_text(f"pypto-library {len(data)} {hashlib.sha256(data).hexdigest()}\n")
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "compiled"  # the script also checks the results
    assert len(_kernel_compiles(log)) == 2
    assert _run(tmp_path, {"CXX": str(wrapper)}) == "disk"


def test_a_compiler_that_writes_nothing_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "/bin/true")
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    from conftest import softmax_kernel
    import torch

    with pytest.raises(pypto.CompileError, match=r"compiling kernel 'softmax': the compiler '/bin/true' exited 0 but "
                                                 r"produced no output file; source: .*\.cc"):
        softmax_kernel(8, 56, tile=(8, 8))(torch.randn(8, 56))


def test_a_hung_compiler_is_stopped_after_pypto_compile_timeout(tmp_path, monkeypatch):
    slow = tmp_path / "slow-cxx.sh"
    slow.write_text("#!/bin/sh\nsleep 120\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", str(slow))
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYPTO_COMPILE_TIMEOUT", "1")
    from conftest import softmax_kernel
    import time
    import torch

    t0 = time.monotonic()
    with pytest.raises(pypto.CompileError, match=r"compiling kernel 'softmax' took longer than 1 s and was stopped "
                                                 r"\(PYPTO_COMPILE_TIMEOUT\); source: .*\.cc"):
        softmax_kernel(8, 72, tile=(8, 8))(torch.randn(8, 72))
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1e99x"])
def test_a_malformed_compile_timeout_is_a_value_error(tmp_path, monkeypatch, value):
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYPTO_COMPILE_TIMEOUT", value)
    from conftest import softmax_kernel
    import torch

    with pytest.raises(ValueError, match=f"PYPTO_COMPILE_TIMEOUT must be a positive number of seconds, found '{value}'"):
        softmax_kernel(8, 88, tile=(8, 8))(torch.randn(8, 88))


FORK_SCRIPT = textwrap.dedent("""
    import os, sys, numpy as np, pypto
    @pypto.frontend.jit
    def sm(x: pypto.Tensor((8, 48), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.softmax(x)
    sm(np.ones((8, 48), np.float32))  # starts the precompile of the prelude in the background
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # must not wait for a build thread it does not have
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
""")


def test_the_background_precompile_survives_fork_and_a_removed_cache(tmp_path):
    # A child forked while the prelude is being precompiled exits at once; a cache folder removed
    # under the build (the fuzzer does this) costs the precompiled header, never the process.
    # The wrapper is a compiler the installed package has no precompiled prelude for, so the
    # prelude is precompiled into the cache, in the background.
    wrapper, _ = _wrapper(tmp_path)
    assert _run(tmp_path, {"CXX": str(wrapper)}, FORK_SCRIPT) == "0"
    assert list((tmp_path / "cache" / "pch").glob("prelude_*.h.gch"))
    remove = SCRIPT + "\nimport shutil, os\nshutil.rmtree(os.environ['PYPTO_CACHE_DIR'])\nprint('removed')\n"
    for _ in range(3):
        assert _run(tmp_path, {"CXX": str(wrapper)}, remove) == "removed"


def test_the_install_precompiles_the_native_prelude_and_a_cold_cache_uses_it(tmp_path):
    """The package's install step leaves the native target's precompiled prelude beside the
    extension module; the first kernel compiled into an empty cache includes it rather than parse
    the tile library, and builds no precompiled prelude of its own in the cache."""
    installed = os.path.join(os.path.dirname(pypto._C.__file__), "pch")
    headers = sorted(f for f in os.listdir(installed) if f.endswith(".h"))
    assert headers and all(os.path.getsize(os.path.join(installed, h + ".gch")) > 0 for h in headers)
    for var in ("CXX", "PYPTO_CPU_TARGET"):
        assert var not in os.environ, f"{var} is set: the installed prelude is for the default compiler and target"
    wrapper, _ = _wrapper(tmp_path)
    # The wrapper is another compiler identity: it gets a prelude of its own in the cache.
    (tmp_path / "other").mkdir()
    assert _run(tmp_path / "other", {"CXX": str(wrapper)}) == "compiled"
    assert list((tmp_path / "other" / "cache" / "pch").glob("prelude_*.h.gch"))
    # The default compiler finds the installed one.
    (tmp_path / "default").mkdir()
    assert _run(tmp_path / "default", {}) == "compiled"
    assert not (tmp_path / "default" / "cache" / "pch").exists()
    source = next((tmp_path / "default" / "cache").rglob("*.cc")).read_text()
    assert any(open(os.path.join(installed, h)).read() in source for h in headers)

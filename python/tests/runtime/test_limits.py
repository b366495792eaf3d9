"""PYPTO_* variables are parsed strictly (a ValueError naming the variable and the value at the
first call that reads it), limits are checked when they are set, allocation failure is a
MemoryError, and a trace that cannot be written never costs the run its results. Variables read
once per process are tried in a child process."""

import os
import stat
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pypto
import pypto.pto

KERNEL = textwrap.dedent("""
    import numpy as np, pypto
    @pypto.frontend.jit
    def f(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.add(x, 1.0)
    try:
        print("SUM", float(f(np.ones((8, 16), np.float32)).sum()))
    except ValueError as e:
        print("ValueError:", e)
""")


def _child(env_extra, code=KERNEL):
    env = dict(os.environ, **env_extra)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("var, value, accepted", [
    ("PYPTO_NUM_THREADS", "1abc", "from 1 to 256"),
    ("PYPTO_NUM_THREADS", "0", "from 1 to 256"),
    ("PYPTO_NUM_THREADS", "5000", "from 1 to 256"),
    ("PYPTO_TASK_WINDOW", "1x", "from 1 to 4194304"),
    ("PYPTO_TASK_WINDOW", "99999999999999", "from 1 to 4194304"),
    ("PYPTO_TASK_WINDOW", str(2**63 - 1), "from 1 to 4194304"),
    ("PYPTO_TASK_WINDOW", "99999999999999999999999", "from 1 to 4194304"),
])
def test_a_malformed_or_out_of_range_variable_is_a_value_error(var, value, accepted):
    out = _child({var: value})
    assert out == f"ValueError: {var} must be an integer {accepted}, found '{value}'"


@pytest.mark.parametrize("var, value", [("PYPTO_NUM_THREADS", "3"), ("PYPTO_NUM_THREADS", "256"),
                                        ("PYPTO_TASK_WINDOW", "+64")])
def test_valid_values_are_taken(var, value):
    assert _child({var: value}) == "SUM 256.0"


def test_more_threads_than_cores_are_allowed_up_to_the_cap():
    code = "import pypto; print(pypto._C.testing.Runtime(256).num_workers)"
    assert _child({}, code) == "256"
    with pytest.raises(ValueError, match="a runtime takes at most 256 threads, asked for 257"):
        pypto._C.testing.Runtime(257)


def test_a_malformed_output_cache_limit_is_a_value_error():
    code = KERNEL.replace("np.ones((8, 16)", "np.ones((8, 16)") + textwrap.dedent("""
        try:
            pypto.output_cache_info()
        except ValueError as e:
            print("ValueError:", e)
    """)
    assert "ValueError: PYPTO_OUTPUT_CACHE_MB must be an integer from 0 to 1073741824, found '-3'" in _child(
        {"PYPTO_OUTPUT_CACHE_MB": "-3"}, code)


@pytest.fixture
def restore_window():
    before = pypto.get_task_window()
    yield
    pypto.set_task_window(before)


@pytest.mark.parametrize("n", [2**40, 2**22 + 1])
def test_a_task_window_past_the_limit_is_refused_when_set(restore_window, n):
    before = pypto.get_task_window()
    with pytest.raises(ValueError, match=f"the task window must be from 1 to 4194304 tasks, found {n}"):
        pypto.set_task_window(n)
    assert pypto.get_task_window() == before
    pypto.set_task_window(2**22)  # the limit itself is fine


def test_an_output_too_large_for_memory_is_a_memory_error():
    @pypto.frontend.jit
    def big(x: pypto.Tensor((1 << 40, 2), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1024, 2)
        return pypto.add(x, 1.0)

    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(1 << 40, 2), strides=(0, 0))
    with pytest.raises(MemoryError):
        big(x)


WORKSPACE = """\
// Function Type: InCore
func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out) {
  %t = alloc_tile : !pto.tile<8x8xf32>
  %t = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  tstore %t, %o[0, 0] valid [8, 8]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,8x8,f32>, %y: !pto.memref<gm,8x8,f32> out) {
  %w = alloc_workspace : !pto.memref<gm,ROWSx8,f32>
  CALL @k(%a -> %x, %o -> %w[0, 0; 8, 8])
  CALL @k(%a -> %w[0, 0; 8, 8], %o -> %y)
  return
}
"""


@pytest.mark.parametrize("rows, message", [
    (1 << 42, r"pypto: a workspace of 140737488355328 bytes \(131072.0 GiB\) could not be allocated"),
    (1 << 62, r"pypto: a workspace of more than 2\^63 bytes cannot be allocated"),
])
def test_a_workspace_too_large_for_memory_is_a_memory_error_naming_its_size(rows, message):
    prog = pypto.pto.compile(WORKSPACE.replace("ROWS", str(rows)))
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    y = np.zeros_like(x)
    with pytest.raises(MemoryError, match=message):
        prog(x, y)
    small = pypto.pto.compile(WORKSPACE.replace("ROWS", "16"))
    small(x, y)
    np.testing.assert_array_equal(y, x)


def _seed_softmax(tmp_path, env_extra):
    code = textwrap.dedent("""
        import warnings, numpy as np, pypto
        @pypto.frontend.jit
        def sm(x: pypto.Tensor((16, 32), pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(8, 32)
            return pypto.softmax(x, -1)
        x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = sm(x)
        e = np.exp(x - x.max(-1, keepdims=True))
        print("RIGHT", bool(np.allclose(y, e / e.sum(-1, keepdims=True), atol=1e-6)))
        for m in w:
            print("WARNING", m.category.__name__, m.message)
    """)
    return _child(env_extra, code)


def test_an_unwritable_trace_path_keeps_the_results_and_says_why(tmp_path):
    out = _seed_softmax(tmp_path, {"PYPTO_TRACE": "/nonexistent_dir_pypto/trace.json"})
    assert "RIGHT True" in out
    assert ("WARNING RuntimeWarning PYPTO_TRACE: cannot open '/nonexistent_dir_pypto/trace.json' for writing: "
            "No such file or directory") in out


def test_a_fifo_as_trace_path_does_not_block(tmp_path):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    out = _seed_softmax(tmp_path, {"PYPTO_TRACE": str(fifo)})
    assert "RIGHT True" in out
    assert f"WARNING RuntimeWarning PYPTO_TRACE: '{fifo}' is not a regular file; the trace was not written" in out

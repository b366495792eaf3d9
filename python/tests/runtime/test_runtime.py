"""Issue 2, point 5: the task runtime seen from Python."""

import threading

import pytest

from pypto import _C


def test_dependencies_follow_regions():
    rt = _C.testing.Runtime(2)
    log = []
    lock = threading.Lock()

    def task(name):
        def fn(i):
            with lock:
                log.append(name)
        return fn

    stats = rt.run_tasks([
        dict(name="w", fn=task("w"), inputs=[], outputs=[(0, [0, 0], [4, 4])]),
        dict(name="r", fn=task("r"), inputs=[(0, [2, 0], [2, 4])], outputs=[(1, [0], [4])]),
        dict(name="other", fn=task("other"), inputs=[], outputs=[(0, [4, 0], [4, 4])]),
    ])
    assert stats["tasks"] == 3
    assert stats["edges"] == 1  # r after w; the disjoint write needs no edge
    assert log.index("w") < log.index("r")


def test_exception_in_task_reaches_python_and_runtime_stays_usable():
    rt = _C.testing.Runtime(2)

    def boom(i):
        raise ValueError("kernel exploded")

    with pytest.raises(RuntimeError, match=r"bad_kernel.*kernel exploded"):
        rt.run_tasks([dict(name="bad_kernel", fn=boom, inputs=[], outputs=[(0, [0], [8])])])
    ran = []
    rt.run_tasks([dict(name="ok", fn=lambda i: ran.append(i), inputs=[], outputs=[(0, [0], [8])])])
    assert ran == [0]


def test_num_threads_environment(monkeypatch):
    assert _C.testing.Runtime(3).num_workers == 3
    assert _C.runtime.default_num_workers() >= 1


def test_pypto_num_threads_sets_the_default_pool():
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "from pypto import _C; print(_C.runtime.default_num_workers())"],
                         env=dict(os.environ, PYPTO_NUM_THREADS="3"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


def test_advise_huge_pages_is_safe_on_any_range():
    import numpy as np

    small = np.zeros(1024, np.float32)
    assert _C.runtime.advise_huge_pages(small.ctypes.data, small.nbytes) is False
    assert _C.runtime.advise_huge_pages(0, 1 << 30) is False
    big = np.empty(3 << 20, np.float32)  # 12 MiB: at least one aligned 2 MiB page inside
    advised = _C.runtime.advise_huge_pages(big.ctypes.data + 4, big.nbytes - 4)
    assert isinstance(advised, bool)
    big.fill(2.0)
    assert float(big.sum()) == 2.0 * big.size

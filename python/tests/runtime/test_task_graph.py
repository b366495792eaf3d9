"""Task graphs without running kernels (recording mode), Chrome traces, the task
window, and randomised region graphs checked against sequential execution."""

import itertools
import json
import os
import random
import subprocess
import sys
import threading

import numpy as np
import pytest

import pypto
from pypto import _C
from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

F32 = ElementType.F32


# --------------------------------------------------------------------------- programs


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pto"))
from test_builder import _softmax_module as _seed_softmax  # noqa: E402  (the seed's softmax, built once)


def _softmax_buffers(num_tiles, rows=8, cols=8):
    n = num_tiles * rows
    x = np.random.default_rng(n).standard_normal((n, cols)).astype(np.float32)
    z = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    return [x, z(n, cols), z(n, 1), z(n, cols), z(n, cols), z(n, 1)]


@pytest.fixture(scope="module")
def seed_program():
    return pypto.pto.compile(_seed_softmax())


@pytest.fixture(scope="module")
def chain_program():
    """Unfused elementwise ops over 64x64 with 16x16 tiles: several tasks per op,
    each depending on the task of the previous op on the same tile."""

    @pypto.frontend.jit(pass_options={"fusion": False})
    def chain(x):
        pypto.set_vec_tile_shapes(16, 16)
        y = pypto.add(x, 1.0)
        z = pypto.mul(y, 2.0)
        return pypto.exp(pypto.sub(z, x))

    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    return pypto.compile(chain, x), x


def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# --------------------------------------------------------------------------- 1. task graph


def test_seed_softmax_task_graph_is_recorded_without_running(seed_program):
    args = _softmax_buffers(2)
    g = seed_program.task_graph(*args, 2)
    assert isinstance(g, pypto.TaskGraph)
    assert g.num_tasks == 10 and g.num_edges == 10
    names = ["rowmax", "rowexpandsub", "elem_exp", "rowsum", "rowexpanddiv"]
    assert [t[1] for t in g.tasks] == names * 2
    assert [t[0] for t in g.tasks] == list(range(10))
    per_tile = [(0, 1), (1, 2), (2, 3), (2, 4), (3, 4)]
    assert g.edges == per_tile + [(p + 5, s + 5) for p, s in per_tile]
    fanin = {t[0]: t[3] for t in g.tasks}
    fanout = {t[0]: t[4] for t in g.tasks}
    assert fanin == {0: 0, 1: 1, 2: 1, 3: 1, 4: 2, 5: 0, 6: 1, 7: 1, 8: 1, 9: 2}
    assert fanout[2] == [3, 4] and fanout[4] == [] and fanout[7] == [8, 9]
    assert all(t[2] > 0 for t in g.tasks)  # buffer bytes of the InCore functions
    # Nothing ran: the output and the temporaries are untouched.
    assert not args[1].any() and not args[2].any()
    # The same program then runs normally and the graph's size matches the run.
    seed_program(*args, 2)
    np.testing.assert_allclose(args[1], _np_softmax(args[0]), rtol=1e-5, atol=1e-6)
    assert seed_program.stats()["tasks"] == g.num_tasks


def test_dump_format_follows_the_seed(seed_program, tmp_path):
    g = seed_program.task_graph(*_softmax_buffers(2), 2)
    text = str(g)
    lines = text.splitlines()
    assert lines[:9] == ["=" * 80, "PTO RUNTIME DUMP", "=" * 80, "", "SUMMARY",
                         "  Total tasks scheduled:  10", "  Ready queue size:      2", "", "TASK TABLE"]
    kb = g.tasks[0][2] / 1024
    assert lines[9] == f"  Task 0: rowmax          [READY]  fanin=0  buf={kb:.1f}KB  fanout=[1]"
    kb = g.tasks[2][2] / 1024
    assert lines[11] == f"  Task 2: elem_exp        [WAIT]   fanin=1  buf={kb:.1f}KB  fanout=[3,4]"
    assert lines[13].startswith("  Task 4: rowexpanddiv    [WAIT]   fanin=2  ") and lines[13].endswith("fanout=[]")
    i = lines.index("DEPENDENCY GRAPH")
    assert lines[i + 1:i + 4] == ["  Task 0 -> Task 1", "  Task 1 -> Task 2", "  Task 2 -> Task 3"]
    assert len(lines) == i + 1 + g.num_edges
    path = tmp_path / "graph.txt"
    g.save(path)
    assert path.read_text() == text


def test_dot_is_left_to_right_with_one_rank_per_level(seed_program):
    g = seed_program.task_graph(*_softmax_buffers(2), 2)
    dot = g.to_dot()
    assert dot.startswith("digraph") and "rankdir=LR;" in dot
    assert g.levels() == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 0, 6: 1, 7: 2, 8: 3, 9: 4}
    for level in range(5):
        assert "{rank=same; " + f"t{level}; t{level + 5};" + "}" in dot
    kb = g.tasks[2][2] / 1024
    assert f't2 [label="elem_exp\\n{kb:.1f} KB"];' in dot
    assert "t2 -> t4;" in dot and dot.count("->") == g.num_edges


def test_jit_task_graph_matches_the_real_run(chain_program):
    compiled, x = chain_program
    g = compiled.task_graph(x)
    assert g.num_tasks == compiled.stats()["tasks"] > 4
    assert all(t[1] for t in g.tasks)
    # Every task of a later op depends on a task of an earlier op; the first op's tasks are sources.
    sources = [t for t in g.tasks if t[3] == 0]
    assert 0 < len(sources) < g.num_tasks
    assert max(g.levels().values()) >= 2
    assert all(p < s for p, s in g.edges)
    out = compiled(x)
    np.testing.assert_allclose(out, np.exp((x + 1.0) * 2.0 - x), rtol=1e-5)
    assert compiled._last_tasks == g.num_tasks


def test_run_tasks_recording_runs_nothing_and_keeps_all_edges():
    rt = _C.testing.Runtime(2)
    ran = []
    tasks = [dict(name=f"t{i}", fn=ran.append, inputs=[(0, [0], [4])], outputs=[(0, [0], [4])]) for i in range(50)]
    recs = rt.record_tasks(tasks)
    assert ran == []
    g = pypto.TaskGraph(recs)
    assert g.num_tasks == 50 and g.edges == [(i, i + 1) for i in range(49)]
    assert rt.run_tasks(tasks)["tasks"] == 50 and ran == list(range(50))


def test_visualize_task_graph_without_graphviz(seed_program, tmp_path, monkeypatch):
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    out = tmp_path / "graph.svg"
    with pytest.raises(RuntimeError, match=r"Graphviz 'dot' is not installed; install graphviz "
                                           r"\(apt-get install graphviz\) or use TaskGraph.to_dot\(\)"):
        pypto.visualize_task_graph(seed_program, *_softmax_buffers(2), 2, path=out)
    # The DOT text is still written next to the requested file.
    assert (tmp_path / "graph.dot").read_text().startswith("digraph")
    assert not out.exists()
    g = pypto.visualize_task_graph(seed_program, *_softmax_buffers(1), 1, path=tmp_path / "only.dot")
    assert g.num_tasks == 5 and (tmp_path / "only.dot").exists()
    with pytest.raises(ValueError, match="cannot render"):
        pypto.visualize_task_graph(seed_program, *_softmax_buffers(1), 1, path=tmp_path / "g.bmp")


def test_visualize_task_graph_renders_svg(seed_program, tmp_path):
    out = tmp_path / "graph.svg"  # graphviz is a test dependency (README)
    g = pypto.visualize_task_graph(seed_program, *_softmax_buffers(2), 2, path=out)
    text = out.read_text()
    assert text.startswith("<?xml") or "<svg" in text
    assert g.num_tasks == 10


# --------------------------------------------------------------------------- 2. Chrome trace


def _check_trace(path, num_tasks, num_threads, names=None):
    """num_threads counts every thread that runs tasks: tid 0 is the orchestrating thread."""
    with open(path) as f:
        doc = json.load(f)
    assert doc["displayTimeUnit"] == "ns"
    events = doc["traceEvents"]
    threads = {e["tid"]: e for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(threads) == list(range(num_threads))
    assert threads[0]["args"]["name"] == "orchestrator"
    for tid in range(1, num_threads):
        assert threads[tid]["args"]["name"] == f"worker {tid}"
        assert threads[tid]["args"]["idle_us"] >= 0
    complete = [e for e in events if e["ph"] == "X"]
    orch = [e for e in complete if e["name"] == "orchestration"]
    assert len(orch) == 1 and orch[0]["tid"] == 0 and orch[0]["dur"] >= 0
    tasks = [e for e in complete if e.get("cat") == "task"]
    assert len(tasks) == num_tasks
    assert sorted(e["args"]["task"] for e in tasks) == list(range(num_tasks))
    ts = [e["ts"] for e in tasks]
    assert ts == sorted(ts)
    for e in tasks:
        assert isinstance(e["ts"], float) and e["ts"] >= 0 and e["dur"] >= 0
        assert e["tid"] in threads
    if names is not None:
        assert sorted(e["name"] for e in tasks) == sorted(names)
    return doc


def test_profile_of_a_jit_program_writes_a_trace_and_returns_outputs(chain_program, tmp_path):
    compiled, x = chain_program
    path = tmp_path / "trace.json"
    out = compiled.profile(x, path=str(path))
    np.testing.assert_allclose(out, np.exp((x + 1.0) * 2.0 - x), rtol=1e-5)
    g = compiled.task_graph(x)
    _check_trace(path, g.num_tasks, _C.runtime.default_num_workers(), names=[t[1] for t in g.tasks])


def test_profile_of_a_pto_program(seed_program, tmp_path):
    args = _softmax_buffers(3)
    path = tmp_path / "pto_trace.json"
    assert seed_program.profile(*args, 3, path=path) is None
    np.testing.assert_allclose(args[1], _np_softmax(args[0]), rtol=1e-5, atol=1e-6)
    _check_trace(path, 15, _C.runtime.default_num_workers(),
                 names=["rowmax", "rowexpandsub", "elem_exp", "rowsum", "rowexpanddiv"] * 3)


def test_pypto_trace_environment_variable_is_read_at_each_run(seed_program, tmp_path, monkeypatch):
    path = tmp_path / "env_trace.json"
    monkeypatch.setenv("PYPTO_TRACE", str(path))
    seed_program(*_softmax_buffers(2), 2)
    _check_trace(path, 10, _C.runtime.default_num_workers())
    path.unlink()
    monkeypatch.delenv("PYPTO_TRACE")
    seed_program(*_softmax_buffers(2), 2)
    assert not path.exists()


@pytest.mark.parametrize("workers", [1, 4])
def test_trace_of_run_tasks_names_every_worker(tmp_path, workers):
    import time

    rt = _C.testing.Runtime(workers)
    path = tmp_path / "rt_trace.json"
    tasks = [dict(name=f"k{i % 3}", fn=lambda i: time.sleep(0.001), inputs=[], outputs=[(i % 5, [0], [4])])
             for i in range(40)]
    rt.run_tasks(tasks, trace_path=str(path))
    _check_trace(path, 40, workers, names=[t["name"] for t in tasks])


def test_trace_to_an_unwritable_path_is_an_error():
    rt = _C.testing.Runtime(2)
    with pytest.raises(OSError, match="cannot open '/nonexistent_dir_pypto/trace.json' for writing"):
        rt.run_tasks([dict(name="a", fn=lambda i: None, outputs=[(0, [0], [1])])],
                     trace_path="/nonexistent_dir_pypto/trace.json")
    assert rt.run_tasks([dict(name="a", fn=lambda i: None, outputs=[(0, [0], [1])])])["tasks"] == 1


# --------------------------------------------------------------------------- 3. window


@pytest.fixture
def restore_window():
    before = pypto.get_task_window()
    yield
    pypto.set_task_window(before)


def test_task_window_does_not_change_results(chain_program, seed_program, restore_window):
    compiled, x = chain_program
    assert pypto.get_task_window() == 16384
    expected = compiled(x)
    args = _softmax_buffers(6)
    seed_program(*args, 6)
    for n in (1, 4):
        pypto.set_task_window(n)
        assert pypto.get_task_window() == n
        np.testing.assert_array_equal(compiled(x), expected)
        again = _softmax_buffers(6)
        seed_program(*again, 6)
        np.testing.assert_array_equal(again[1], args[1])


def test_task_window_is_validated(restore_window):
    for bad in (0, -3):
        with pytest.raises(ValueError, match="positive int"):
            pypto.set_task_window(bad)
    for bad in (2.5, "4", True):
        with pytest.raises(TypeError, match="positive int"):
            pypto.set_task_window(bad)
    rt = _C.testing.Runtime(2)
    with pytest.raises(ValueError, match="the task window must be from 1 to 4194304 tasks, found 0"):
        rt.task_window = 0


@pytest.mark.parametrize("window", [1, 2, 4])
def test_run_tasks_with_a_small_window_matches_sequential(window):
    rt = _C.testing.Runtime(4)
    rt.task_window = window
    assert rt.task_window == window
    value = [1]

    def step(i):
        value[0] = (value[0] * 31 + i) % (1 << 61)

    tasks = [dict(name="s", fn=step, inputs=[(0, [0], [1])], outputs=[(0, [0], [1])]) for _ in range(200)]
    tasks += [dict(name="free", fn=lambda i: None, outputs=[(1 + i, [0], [1])]) for i in range(50)]
    rt.run_tasks(tasks)
    expected = 1
    for i in range(200):
        expected = (expected * 31 + i) % (1 << 61)
    assert value[0] == expected


def test_pypto_task_window_environment_variable():
    code = "import pypto; print(pypto.get_task_window())"
    env = dict(os.environ, PYPTO_TASK_WINDOW="7")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "7"
    env["PYPTO_TASK_WINDOW"] = "zero"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0  # an invalid value is an error naming it, not the default
    assert "PYPTO_TASK_WINDOW must be an integer from 1 to 4194304, found 'zero'" in out.stderr


# --------------------------------------------------------------------------- 4. randomised region graphs

_MOD = 1_000_003
_SHAPES = {0: (6,), 1: (5, 6), 2: (3, 4, 4), 3: (8, 8)}


def _random_box(rng, shape):
    offs, exts = [], []
    for n in shape:
        a = rng.randrange(n)
        b = rng.randrange(a + 1, n + 1)
        offs.append(a)
        exts.append(b - a)
    return offs, exts


def _random_graph(seed, num_tasks=60):
    """Tasks as (reads, writes), each a list of (buffer, offsets, extents)."""
    rng = random.Random(seed)
    graph = []
    for _ in range(num_tasks):
        reads = [(b, *_random_box(rng, _SHAPES[b])) for b in rng.sample(sorted(_SHAPES), rng.randrange(0, 3))]
        writes = [(b, *_random_box(rng, _SHAPES[b])) for b in rng.sample(sorted(_SHAPES), rng.randrange(1, 3))]
        graph.append((reads, writes))
    return graph


def _index(offs, exts):
    return tuple(slice(o, o + e) for o, e in zip(offs, exts))


def _apply(model, i, reads, writes):
    """Task i of the model: a value from its reads (and the regions it overwrites), written to its writes."""
    acc = i + 1
    for b, offs, exts in reads + writes:
        acc = (acc * 7 + int(model[b][_index(offs, exts)].sum())) % _MOD
    for k, (b, offs, exts) in enumerate(writes):
        view = model[b][_index(offs, exts)]
        view[...] = (view * 3 + acc + k) % _MOD


def _fresh_model():
    return {b: np.arange(int(np.prod(s)), dtype=np.int64).reshape(s) % 17 for b, s in _SHAPES.items()}


def _overlap(r1, r2):
    (b1, o1, e1), (b2, o2, e2) = r1, r2
    return b1 == b2 and all(max(a, c) < min(a + x, c + y) for a, x, c, y in zip(o1, e1, o2, e2))


def _conflict(t1, t2):
    (r1, w1), (r2, w2) = t1, t2
    return any(_overlap(a, b) for a in w1 for b in r2 + w2) or any(_overlap(a, b) for a in r1 for b in w2)


def _specs(graph, model, log, lock):
    def make(i):
        reads, writes = graph[i]

        def fn(index):
            assert index == i
            with lock:
                log.append(i)
            _apply(model, i, reads, writes)
        return fn

    return [dict(name=f"t{i}", fn=make(i), inputs=[(b, o, e) for b, o, e in r], outputs=[(b, o, e) for b, o, e in w])
            for i, (r, w) in enumerate(graph)]


@pytest.mark.parametrize("seed", range(6))
def test_random_region_graphs_match_sequential_execution(seed):
    graph = _random_graph(seed)
    expected = _fresh_model()
    for i, (r, w) in enumerate(graph):
        _apply(expected, i, r, w)
    conflicts = [(i, j) for i, j in itertools.combinations(range(len(graph)), 2) if _conflict(graph[i], graph[j])]
    assert conflicts

    # Recording: every edge joins two tasks with overlapping regions (one of them written),
    # and the edges imply every conflicting order.
    recs = _C.testing.Runtime(2).record_tasks(_specs(graph, _fresh_model(), [], threading.Lock()))
    g = pypto.TaskGraph(recs)
    assert g.num_tasks == len(graph)
    for p, s in g.edges:
        assert p < s and _conflict(graph[p], graph[s]), (p, s)
    reach = {i: set() for i in range(len(graph))}
    for i in reversed(range(len(graph))):
        for s in g.tasks[i][4]:
            reach[i] |= {s} | reach[s]
    for i, j in conflicts:
        assert j in reach[i], (i, j)

    for workers in (1, 2, 4, 8):
        model = _fresh_model()
        log = []
        rt = _C.testing.Runtime(workers)
        stats = rt.run_tasks(_specs(graph, model, log, threading.Lock()))
        assert stats["tasks"] == len(graph)
        assert sorted(log) == list(range(len(graph)))
        pos = {t: k for k, t in enumerate(log)}
        for i, j in conflicts:
            assert pos[i] < pos[j], (workers, i, j)
        for b in _SHAPES:
            np.testing.assert_array_equal(model[b], expected[b], err_msg=f"workers={workers} buffer={b}")


def test_disjoint_regions_never_get_an_edge():
    # Checkerboard of 2x2 blocks written and read by separate tasks: no two tasks share an element.
    tasks = []
    for r, c in itertools.product(range(4), range(4)):
        tasks.append(dict(name="w", fn=lambda i: None, outputs=[(0, [2 * r, 2 * c], [2, 2])]))
    for r, c in itertools.product(range(4), range(4)):
        tasks.append(dict(name="r", fn=lambda i: None, inputs=[(1, [2 * r, 2 * c], [2, 2])],
                          outputs=[(2, [r, c, 0], [1, 1, 3])]))
    g = pypto.TaskGraph(_C.testing.Runtime(2).record_tasks(tasks))
    assert g.num_tasks == 32 and g.num_edges == 0


@pytest.mark.parametrize("workers", [1, 8])
def test_exception_in_a_random_graph_reaches_python_and_the_runtime_recovers(workers):
    graph = _random_graph(99, num_tasks=40)
    rt = _C.testing.Runtime(workers)
    specs = _specs(graph, _fresh_model(), [], threading.Lock())

    def boom(i):
        raise KeyError("task twenty broke")

    specs[20] = dict(specs[20], name="broken", fn=boom)
    with pytest.raises(RuntimeError, match=r"task 20 \(broken\) failed: .*task twenty broke"):
        rt.run_tasks(specs)
    model, log = _fresh_model(), []
    rt.run_tasks(_specs(graph, model, log, threading.Lock()))
    expected = _fresh_model()
    for i, (r, w) in enumerate(graph):
        _apply(expected, i, r, w)
    for b in _SHAPES:
        np.testing.assert_array_equal(model[b], expected[b])

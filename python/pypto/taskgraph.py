"""Task graphs recorded without running kernels: text dump, Graphviz DOT and rendering.

``compiled.task_graph(*args)`` (a jit ``Compiled`` or a ``PTOProgram``) runs the
orchestration in the runtime's recording mode: tasks are allocated and their
dependencies computed exactly as in a real run, but no kernel runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable

_RULE = "=" * 80
_RENDER_FORMATS = {".svg": "svg", ".pdf": "pdf", ".png": "png"}


class TaskGraph:
    """The task graph of one orchestration run.

    ``tasks``: list of ``(id, kernel name, buffer_bytes, fanin, fanout)`` in id
    order (``fanout`` is the sorted list of successor ids); ``edges``: list of
    ``(pred, succ)``; ``str(graph)`` is the PTO runtime dump text."""

    def __init__(self, records: Iterable[tuple]):
        recs = sorted(((int(i), str(n), int(b), sorted(int(p) for p in preds)) for i, n, b, preds in records),
                      key=lambda r: r[0])
        fanout: dict[int, list[int]] = {r[0]: [] for r in recs}
        edges = []
        for tid, _, _, preds in recs:
            for p in preds:
                edges.append((p, tid))
                fanout.setdefault(p, []).append(tid)
        edges.sort()
        self.tasks: list[tuple[int, str, int, int, list[int]]] = [
            (tid, name, nbytes, len(preds), sorted(fanout[tid])) for tid, name, nbytes, preds in recs]
        self.edges: list[tuple[int, int]] = edges

    @property
    def num_tasks(self) -> int:
        return len(self.tasks)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def levels(self) -> dict[int, int]:
        """Per task id, the length of the longest path from a source (sources are level 0)."""
        level = {t[0]: 0 for t in self.tasks}
        fanin = {t[0]: t[3] for t in self.tasks}
        succ = {t[0]: t[4] for t in self.tasks}
        ready = [t for t, n in fanin.items() if n == 0]
        while ready:
            t = ready.pop()
            for s in succ[t]:
                level[s] = max(level[s], level[t] + 1)
                fanin[s] -= 1
                if fanin[s] == 0:
                    ready.append(s)
        return level

    def __str__(self) -> str:
        ready = sum(1 for t in self.tasks if t[3] == 0)
        lines = [_RULE, "PTO RUNTIME DUMP", _RULE, "", "SUMMARY",
                 f"  Total tasks scheduled:  {self.num_tasks}",
                 f"  Ready queue size:      {ready}", "", "TASK TABLE"]
        for tid, name, nbytes, fanin, fanout in self.tasks:
            state = "[READY]" if fanin == 0 else "[WAIT]"
            lines.append(f"  Task {tid}: {name:<15} {state:<8} fanin={fanin}  buf={nbytes / 1024:.1f}KB  "
                         f"fanout=[{','.join(str(s) for s in fanout)}]")
        lines += ["", "DEPENDENCY GRAPH"]
        lines += [f"  Task {p} -> Task {s}" for p, s in self.edges]
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"<pypto.TaskGraph {self.num_tasks} tasks, {self.num_edges} edges>"

    def save(self, path: str | os.PathLike) -> None:
        """Writes the text dump to ``path``."""
        Path(path).write_text(str(self))

    def to_dot(self) -> str:
        """Graphviz DOT text: left to right, one ``rank=same`` group per level
        (longest path from a source), labels "name\\nbuf KB"."""
        out = ["digraph task_graph {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];']
        for tid, name, nbytes, _, _ in self.tasks:
            out.append(f'  t{tid} [label="{_dot_escape(name)}\\n{nbytes / 1024:.1f} KB"];')
        by_level: dict[int, list[int]] = {}
        for tid, lv in self.levels().items():
            by_level.setdefault(lv, []).append(tid)
        for lv in sorted(by_level):
            out.append("  {rank=same; " + " ".join(f"t{t};" for t in sorted(by_level[lv])) + "}")
        for p, s in self.edges:
            out.append(f"  t{p} -> t{s};")
        out.append("}")
        return "\n".join(out) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def visualize_task_graph(compiled: Any, *args, path: str | os.PathLike = "graph.svg", **kwargs) -> TaskGraph:
    """Records the task graph of ``compiled(*args)`` (a jit ``Compiled`` or a
    ``PTOProgram``), writes its DOT text next to ``path`` (suffix ``.dot``) and
    renders it with Graphviz's ``dot`` into ``path`` (format from the suffix:
    .svg, .pdf or .png; a ``.dot`` path only writes the DOT). Returns the graph."""
    if not hasattr(compiled, "task_graph"):
        raise TypeError(f"visualize_task_graph: expected a compiled program (pypto.compile or pypto.pto.compile), "
                        f"found {type(compiled).__name__}")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix != ".dot" and suffix not in _RENDER_FORMATS:
        raise ValueError(f"visualize_task_graph: cannot render to '{path.name}'; use a .svg, .pdf, .png or .dot path")
    graph = compiled.task_graph(*args, **kwargs)
    dot_path = path.with_suffix(".dot")
    dot_path.write_text(graph.to_dot())
    if suffix == ".dot":
        return graph
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz 'dot' is not installed; install graphviz (apt-get install graphviz) "
                           "or use TaskGraph.to_dot()")
    proc = subprocess.run([exe, f"-T{_RENDER_FORMATS[suffix]}", str(dot_path), "-o", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"Graphviz 'dot' failed with status {proc.returncode}: {proc.stderr.strip()}")
    return graph


def set_task_window(n: int) -> None:
    """Bounds the number of submitted but unfinished tasks of the process-wide
    runtime (default 16384, or ``PYPTO_TASK_WINDOW``); when the window is full the
    orchestrating thread runs tasks until half of it is free."""
    from pypto import _C

    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"pypto.set_task_window: n must be a positive int, found {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"pypto.set_task_window: n must be a positive int, found {n}")
    _C.runtime.set_task_window(n)


def get_task_window() -> int:
    """The task window of the process-wide runtime."""
    from pypto import _C

    return int(_C.runtime.task_window())

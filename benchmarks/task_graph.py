"""Task-graph benchmark of the runtime on the LLaMA-7B layer orchestration
(models/llama/layer.py, adaptive 64-row tiles) with empty kernels:

  python benchmarks/task_graph.py [--quick] [--runs N] [--json OUT]

For each sequence length (1K-16K, and 128K unless --quick) it prints the task
count, the build-only time (the orchestration submits every task in the
runtime's recording mode: dependencies are resolved, no kernel runs), the
build+execute time with 1 and 2 workers, tasks per millisecond, the peak RSS
of the process and the runtime's bytes per task record. Each configuration
runs in a fresh process (PYPTO_NUM_THREADS=1 or 2); times are medians of
--runs runs (default 5).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = [1024, 2048, 4096, 8192, 16384]
BIG = 131072


def child(seq: int, runs: int) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "models", "llama"))
    import layer as L  # noqa: E402

    import pypto  # noqa: E402

    model = L.LlamaLayer(64, 128, empty_kernels=True)
    args = model.shapes_only(seq)
    model.program(**args)  # warm up: code loaded, pages of the first run mapped
    execute = []
    for _ in range(runs):
        t0 = time.perf_counter()
        model.program(**args)
        execute.append(time.perf_counter() - t0)
    tasks = model.program.stats()["tasks"]
    build = []
    if hasattr(model.program, "build_only"):
        for _ in range(runs):
            t0 = time.perf_counter()
            model.program.build_only(**args)
            build.append(time.perf_counter() - t0)
    rt = pypto._C.runtime
    return {
        "seq": seq, "tasks": tasks,
        "execute_s": statistics.median(execute),
        "build_s": statistics.median(build) if build else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "task_record_bytes": rt.task_record_bytes() if hasattr(rt, "task_record_bytes") else None,
    }


def run_child(seq: int, workers: int, runs: int) -> dict:
    env = dict(os.environ, PYPTO_NUM_THREADS=str(workers))
    out = subprocess.run([sys.executable, __file__, "--child", str(seq), "--runs", str(runs)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="skip 128K")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.runs)))
        return
    rows = []
    print(f"{'seq':>7} {'tasks':>11} {'build ms':>9} {'build t/ms':>10} {'1w ms':>9} {'2w ms':>9} "
          f"{'2w t/ms':>8} {'2w us/t':>8} {'RSS MB':>7} {'B/task':>7}")
    for seq in SIZES + ([] if a.quick else [BIG]):
        one, two = run_child(seq, 1, a.runs), run_child(seq, 2, a.runs)
        n = two["tasks"]
        build = two["build_s"]
        row = {"seq": seq, "tasks": n, "build_ms": build * 1e3 if build else None,
               "build_tasks_per_ms": n / (build * 1e3) if build else None,
               "execute_1w_ms": one["execute_s"] * 1e3, "execute_2w_ms": two["execute_s"] * 1e3,
               "execute_2w_tasks_per_ms": n / (two["execute_s"] * 1e3),
               "execute_2w_us_per_task": two["execute_s"] / n * 1e6,
               "peak_rss_mb": max(one["peak_rss_mb"], two["peak_rss_mb"]),
               "task_record_bytes": two["task_record_bytes"]}
        rows.append(row)

        def f(v, fmt):
            return format(v, fmt) if v is not None else "-"

        print(f"{seq:>7} {n:>11,} {f(row['build_ms'], '9.1f')} {f(row['build_tasks_per_ms'], '10.0f')} "
              f"{row['execute_1w_ms']:>9.1f} {row['execute_2w_ms']:>9.1f} {row['execute_2w_tasks_per_ms']:>8.0f} "
              f"{row['execute_2w_us_per_task']:>8.2f} {row['peak_rss_mb']:>7.0f} {f(row['task_record_bytes'], '>7')}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"machine_cores": os.cpu_count(), "runs": a.runs, "results": rows}, fh, indent=2)


if __name__ == "__main__":
    main()

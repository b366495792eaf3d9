"""Task-graph benchmark of the runtime on the LLaMA-7B layer orchestration
(models/llama/layer.py, adaptive 64-row tiles) with empty kernels:

  python benchmarks/task_graph.py [--quick] [--runs N] [--json OUT]

For each sequence length (1K-16K, and 128K unless --quick) it prints the task
count; the build-only time (the orchestration submits every task and the
runtime resolves its dependencies; nothing is scheduled or kept) and its rate
in tasks/ms, repeated on the same tensors (the runtime then keeps the boxes
of the run before and only forgets their tasks) and cold (tensors alternate
between two sets, so every box is new); the build+execute time with 1 and 2 threads (PYPTO_NUM_THREADS;
the calling thread is one of them) and its cost per task; the peak RSS of the
process; and the bytes per task (task-record bytes the run allocated divided
by the task count). Times are medians of at least --runs runs (default 5;
short graphs repeat until their runs add up to a quarter of a second, since a
1K build lasts about 60 microseconds and one preemption of a 5-run sample
would move its median) measured inside the runtime (RunStats.build_ns / total_ns, so Python's call overhead is
excluded; the end-to-end call time is in the JSON output). Each thread count
runs in a fresh process.
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
# Short graphs repeat until their measured runs add up to this many seconds (at most MAX_RUNS runs).
MIN_MEASURED_S = 0.25
MAX_RUNS = 2001


def child(seq: int, runs: int) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "models", "llama"))
    import layer as L  # noqa: E402

    import pypto  # noqa: E402

    stats_of = pypto._C.runtime.last_run_stats
    model = L.LlamaLayer(64, 128, empty_kernels=True)
    args = model.shapes_only(seq)
    model.program(**args)  # warm up: code loaded, pages of the first run mapped
    execute, call = [], []
    while len(execute) < runs or (sum(execute) < MIN_MEASURED_S and len(execute) < MAX_RUNS):
        t0 = time.perf_counter()
        model.program(**args)
        call.append(time.perf_counter() - t0)
        execute.append(stats_of()["total_ns"] * 1e-9)
    run_stats = stats_of()
    # Peak RSS of building and executing (the build-only runs below keep every reader of a box, since
    # nothing finishes, so they are measured separately).
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    build = []
    while len(build) < runs or (sum(build) < MIN_MEASURED_S and len(build) < MAX_RUNS):
        model.program.build_only(**args)
        build.append(stats_of()["build_ns"] * 1e-9)
    # Cold builds: two sets of tensors in turn, so that no build finds the boxes of the one before
    # (the runtime keeps them only for a run on the same tensors).
    other = {k: v.copy() if hasattr(v, "copy") else v for k, v in args.items()}
    cold = []
    while len(cold) < runs or (sum(cold) < MIN_MEASURED_S / 2 and len(cold) < MAX_RUNS):
        model.program.build_only(**(other if len(cold) % 2 == 0 else args))
        cold.append(stats_of()["build_ns"] * 1e-9)
    return {
        "seq": seq, "tasks": run_stats["tasks"], "edges": run_stats["edges"],
        "execute_s": statistics.median(execute), "call_s": statistics.median(call),
        "build_s": statistics.median(build), "cold_build_s": statistics.median(cold),
        "task_bytes": run_stats["task_bytes"], "build_runs": len(build), "execute_runs": len(execute), "peak_live_tasks": run_stats["peak_live_tasks"],
        "peak_rss_mb": rss_mb, "build_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_child(seq: int, workers: int, runs: int) -> dict:
    # NumPy's BLAS threads would spin beside the runtime's; nothing here calls BLAS.
    env = dict(os.environ, PYPTO_NUM_THREADS=str(workers), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
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
    print(f"{'seq':>7} {'tasks':>11} {'build ms':>9} {'build t/ms':>10} {'cold t/ms':>9} {'1w ms':>9} {'2w ms':>9} "
          f"{'2w us/t':>8} {'RSS MB':>7} {'B/task':>7} {'live':>6}")
    for seq in SIZES + ([] if a.quick else [BIG]):
        one, two = run_child(seq, 1, a.runs), run_child(seq, 2, a.runs)
        n = two["tasks"]
        row = {"seq": seq, "tasks": n, "edges": two["edges"], "build_ms": two["build_s"] * 1e3,
               "build_tasks_per_ms": n / (two["build_s"] * 1e3),
               "cold_build_ms": two["cold_build_s"] * 1e3, "cold_build_tasks_per_ms": n / (two["cold_build_s"] * 1e3),
               "execute_1w_ms": one["execute_s"] * 1e3, "execute_2w_ms": two["execute_s"] * 1e3,
               "call_1w_ms": one["call_s"] * 1e3, "call_2w_ms": two["call_s"] * 1e3,
               "execute_2w_us_per_task": two["execute_s"] / n * 1e6,
               "peak_rss_mb": max(one["peak_rss_mb"], two["peak_rss_mb"]),
               "build_peak_rss_mb": two["build_peak_rss_mb"],
               "bytes_per_task": two["task_bytes"] / n, "peak_live_tasks": two["peak_live_tasks"],
               "build_runs": two["build_runs"], "execute_runs_1w": one["execute_runs"], "execute_runs_2w": two["execute_runs"]}
        rows.append(row)
        print(f"{seq:>7} {n:>11,} {row['build_ms']:>9.1f} {row['build_tasks_per_ms']:>10.0f} {row['cold_build_tasks_per_ms']:>9.0f} "
              f"{row['execute_1w_ms']:>9.1f} {row['execute_2w_ms']:>9.1f} {row['execute_2w_us_per_task']:>8.3f} "
              f"{row['peak_rss_mb']:>7.0f} {row['bytes_per_task']:>7.0f} {row['peak_live_tasks']:>6}", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"machine_cores": os.cpu_count(), "runs": a.runs, "results": rows}, fh, indent=2)


if __name__ == "__main__":
    main()

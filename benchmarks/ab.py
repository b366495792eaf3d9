"""Two builds of pypto side by side: runs benchmarks/run.py --json against each build in turn
(A, B, A, B, ...), then prints per kernel the median pypto time of each build and B/A, plus the
cached-call latency. A build is a directory that holds a `pypto` package with its `_C*.so` (an
installed site-packages, or a copy of python/pypto with the built extension beside it).

    python benchmarks/ab.py A_DIR B_DIR [--rounds N] [--quick] [--repeats N]

The rounds alternate so that drift of a noisy machine falls on both builds alike; torch eager's
time on the same kernel in the same process is printed as the noise reference (its B/A should
be about 1).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(build: str, args, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=build + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, os.path.join(HERE, "run.py"), "--json", out]
    if args.quick:
        cmd.append("--quick")
    if args.repeats:
        cmd += ["--repeats", str(args.repeats)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def times(report: dict) -> dict:
    """{kernel: {impl: median ms}}."""
    return {k["name"]: {r["impl"]: r["median_ms"] for r in k["rows"] if r["median_ms"]} for k in report["kernels"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="directory holding build A's pypto package")
    parser.add_argument("b", help="directory holding build B's pypto package")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each build, alternating (default 2)")
    parser.add_argument("--quick", action="store_true", help="run.py --quick")
    parser.add_argument("--repeats", type=int, help="run.py --repeats")
    args = parser.parse_args()
    for d in (args.a, args.b):
        if not os.path.isdir(os.path.join(d, "pypto")):
            sys.exit(f"{d} holds no pypto package")

    runs = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for tag, build in (("A", args.a), ("B", args.b)):
                print(f"round {r + 1}/{args.rounds}: build {tag} ({build})", file=sys.stderr, flush=True)
                runs[tag].append(run_once(build, args, os.path.join(tmp, f"{tag}{r}.json")))

    machine = runs["B"][0]["machine"]
    print(f"A: {args.a}")
    print(f"B: {args.b}")
    print(f"machine: {machine['cpu']}, {machine['cores']} cores; {args.rounds} alternating runs of run.py"
          f"{' --quick' if args.quick else ''} per build; medians over the runs")
    print(f"{'kernel':34s} {'pypto A ms':>11s} {'pypto B ms':>11s} {'B/A':>6s}   {'eager B/A':>9s}")
    kernels = times(runs["A"][0]).keys()
    ratios = []
    for name in kernels:
        def med(tag, impl):
            vals = [times(rep).get(name, {}).get(impl) for rep in runs[tag]]
            vals = [v for v in vals if v]
            return statistics.median(vals) if vals else None
        pa, pb, ea, eb = med("A", "pypto"), med("B", "pypto"), med("A", "eager"), med("B", "eager")
        if not (pa and pb):
            continue
        ratios.append(pb / pa)
        eager = f"{eb / ea:9.3f}" if ea and eb else f"{'-':>9s}"
        print(f"{name:34s} {pa:11.3f} {pb:11.3f} {pb / pa:6.3f}   {eager}")
    if ratios:
        print(f"geometric mean of pypto B/A: {statistics.geometric_mean(ratios):.3f}")
    ca = statistics.median(rep["latency"]["cached_call_us"] for rep in runs["A"])
    cb = statistics.median(rep["latency"]["cached_call_us"] for rep in runs["B"])
    print(f"cached call (tiny softmax): A {ca:.1f} us, B {cb:.1f} us, B/A {cb / ca:.3f}")


if __name__ == "__main__":
    main()

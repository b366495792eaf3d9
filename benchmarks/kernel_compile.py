"""Host-compile time of generated kernels, with the tile library's copies inline and out of line.

    python benchmarks/kernel_compile.py CACHE_DIR [--limit N]

Takes the generated sources in a kernel cache (for example the one a test run filled: the test
suite's conftest prints nothing, but `PYPTO_CACHE_DIR=DIR python -m pytest ...` fills DIR) that were
built for the native target, and compiles each one twice, side by side: once as a source on its
own (the copies inline, as `_C.compiler_flags` builds it) and once as pypto builds it (the copies
called through the table, `-DPTO_OUT_OF_LINE_COPIES`). Both use a precompiled prelude built here
for their flags, as pypto's own compiles do, so the figures are the kernel's code alone. Prints
the CPU seconds (user + system of the compiler processes) of each.
"""

import argparse
import glob
import os
import resource
import subprocess
import sys
import tempfile

from pypto import _C

PRELUDE_END = "#endif  // PYPTO_TILE_OPS_H_\n"


def cpu_seconds(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache_dir")
    ap.add_argument("--limit", type=int, default=60, help="kernels to compile (default 60)")
    args = ap.parse_args()
    cxx = os.environ.get("CXX", "g++").split()
    base = _C.compiler_flags("native")
    variants = {"inline copies": base, "out-of-line copies": base + ["-DPTO_OUT_OF_LINE_COPIES"]}
    sources = sorted(p for p in glob.glob(os.path.join(args.cache_dir, "*", "*.cc")) if ".pch." not in p)
    totals = {name: 0.0 for name in variants}
    headers: dict[tuple[str, str], str] = {}
    count = 0
    with tempfile.TemporaryDirectory() as work:
        for path in sources:
            if count == args.limit:
                break
            text = open(path).read()
            first = text.index("\n") + 1
            if "CPU target native" not in text[first:first + 200] or PRELUDE_END not in text:
                continue
            end = text.index(PRELUDE_END) + len(PRELUDE_END)
            prelude = text[first:end]
            for name, flags in variants.items():
                key = (prelude, name)
                if key not in headers:
                    header = os.path.join(work, f"prelude_{len(headers)}.h")
                    with open(header, "w") as f:
                        f.write(prelude)
                    subprocess.run([*cxx, *[x for x in flags if x != "-shared"], "-x", "c++-header", header, "-o",
                                    header + ".gch"], check=True)
                    headers[key] = header
                kernel = os.path.join(work, "kernel.cc")
                with open(kernel, "w") as f:
                    f.write(text[:first] + f'#include "{headers[key]}"\n' + text[end:])
                totals[name] += cpu_seconds([*cxx, *flags, "-o", os.path.join(work, "kernel.so"), kernel])
            count += 1
    if count == 0:
        print(f"no native-target kernel sources in {args.cache_dir}", file=sys.stderr)
        return 1
    for name, total in totals.items():
        print(f"{name:20s} {total:7.1f} CPU-s for {count} kernels, {total / count:.3f} s each")
    inline, outlined = totals.values()
    print(f"ratio inline / out-of-line: {inline / outlined:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

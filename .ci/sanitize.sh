#!/usr/bin/env bash
# CI: AddressSanitizer and UndefinedBehaviorSanitizer (issue 17).
#
# Builds the core, the C++ tests and the Python extension with
# PYPTO_SANITIZE=address,undefined into build-san, runs every C++ test with
# ctest (leak detection on), then a fast subset of the Python tests against the
# sanitized extension: python/pypto is copied into a temporary directory next
# to build-san's _C*.so and put first on PYTHONPATH (nothing is installed), the
# compiler's libasan is preloaded into python, and a private kernel cache makes
# every generated kernel compile with the same sanitizer flags.
# A sanitizer report fails the test that triggers it; the script runs both
# suites and exits non-zero if either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-san
PY=$(command -v python)

# Dependencies (all there after the README's test set-up).
pkgs="g++ libfmt-dev libgtest-dev"
command -v cmake >/dev/null || pkgs="$pkgs cmake"
installed=$(dpkg-query -W -f='${db:Status-Abbrev}\n' $pkgs 2>/dev/null | grep -c '^ii' || true)
if [ "$installed" -ne "$(echo $pkgs | wc -w)" ]; then
  apt-get update && apt-get install -y $pkgs
fi
"$PY" -c "import numpy, pybind11, pytest, torch" 2>/dev/null || pip install torch==2.13.0 pytest pybind11

# -O0 with line tables only (-g1: file and line in reports). The sanitizers
# find the same errors at -O0 as at -O1 (their documentation recommends -O1
# for speed, not for coverage), and GCC builds the instrumented code about
# twice as fast at -O0: the build is most of this step's time, the instrumented
# tests are thinned (cpp_tests/sanitized.h). At RelWithDebInfo's -O2 -g the
# instrumented [[gnu::flatten]] task_submit_desc makes csrc/runtime/runtime.cc
# alone take GCC about nine CPU minutes.
echo "== sanitized build (build-san)"
start=$SECONDS
cmake -S . -B "$BUILD" -DPYPTO_SANITIZE=address,undefined -DPYPTO_BUILD_TESTS=ON -DPYPTO_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -g1 -DNDEBUG" \
  -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$PY"
cmake --build "$BUILD" -j2
echo "== build: $((SECONDS - start)) s"

# Every error is fatal to its process, with its own exit status: ASan stops at
# the first error (halt_on_error), UBSan too (the code is built with
# -fno-sanitize-recover=undefined; halt_on_error covers anything built without).
# An allocation too large to satisfy returns null, as it does without ASan (the
# runtime turns that into std::bad_alloc and Python's MemoryError, which tests
# check), instead of an ASan report.
ASAN_COMMON=halt_on_error=1:exitcode=99:allocator_may_return_null=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=98
status=0

echo "== C++ tests under ASan+UBSan (leak detection on)"
start=$SECONDS
ASAN_OPTIONS=$ASAN_COMMON:detect_leaks=1 ctest --test-dir "$BUILD" --output-on-failure -j2 || status=1
echo "== C++ tests: $((SECONDS - start)) s"

echo "== Python tests under ASan+UBSan"
start=$SECONDS
TMP=$(mktemp -d /tmp/pypto-san.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp -r python/pypto "$TMP/pypto"
rm -f "$TMP"/pypto/_C*.so
cp "$BUILD"/_C*.so "$TMP/pypto/"
CXX_USED=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
# python is not linked with the sanitizers, so libasan is preloaded (it has to
# be the first library of the process). libstdc++ too: python loads it only
# with the extension, after libasan has looked for the __cxa_throw it wraps,
# and the first C++ exception would stop the process ("CHECK failed:
# asan_interceptors.cpp ... real___cxa_throw").
PRELOAD=
for lib in libasan.so libstdc++.so; do
  path=$("$CXX_USED" -print-file-name=$lib)
  [ -e "$path" ] || { echo "$CXX_USED has no $lib ($path)" >&2; exit 1; }
  PRELOAD="$PRELOAD${PRELOAD:+ }$path"
done
# Kernels are compiled by the compiler of this build (its libasan is the one
# loaded), without the preload, which only slows the compiler down.
mkdir "$TMP/bin"
printf '#!/bin/sh\nunset LD_PRELOAD\nexec %s "$@"\n' "$CXX_USED" > "$TMP/bin/cxx"
chmod +x "$TMP/bin/cxx"
export CXX=$TMP/bin/cxx
export PYTHONPATH=$TMP${PYTHONPATH:+:$PYTHONPATH}
export PYPTO_CACHE_DIR=$TMP/kernel-cache
# python's own allocations at exit are not ours to report: no leak detection.
# The tests' python subprocesses inherit all of this.
sanpy() { LD_PRELOAD=$PRELOAD ASAN_OPTIONS=$ASAN_COMMON:detect_leaks=0 "$PY" "$@"; }

# The tests must import the sanitized extension, and its kernels must get the sanitizer flags.
sanpy - "$TMP" <<'EOF'
import sys
import pypto
from pypto import _C
tmp = sys.argv[1]
assert pypto.__file__.startswith(tmp + "/pypto/"), f"pypto comes from {pypto.__file__}, not {tmp}/pypto"
assert _C.__file__.startswith(tmp + "/pypto/"), f"pypto._C comes from {_C.__file__}, not {tmp}/pypto"
flags = _C.compiler_flags()
assert "-fsanitize=address,undefined" in flags, flags
print("sanitized pypto:", _C.__file__)
print("kernel flags:", " ".join(flags))
EOF

# A subset that covers the paths through C++ in a few minutes: the README's
# softmax end to end, the pto builder and .pto round trip, the runtime, the
# frontend's errors, the disk cache (a second process loading a kernel).
# Left out: the variants of the same paths that cost most under the sanitizers (each test that
# starts another sanitized python costs 10-30 s; the .pto round trips of the matmul and convolution
# kernels 45-100 s each, their products being covered by test_matmul_and_accumulate_over_k and the
# implicit-gemm convolution below; the whole step must leave .ci/run inside its
# 45-minute budget on a 2-core machine). Also left out: the test of the installed precompiled
# prelude (this sanitized extension is not installed, so it has no pch/ folder beside it).
# -v names each test before it runs: a sanitizer report ends the process there,
# and --capture=sys leaves file descriptor 2 alone so that the report is shown.
T=python/tests
sanpy -m pytest -v -p no:cacheprovider --capture=sys --durations=15 \
  $T/test_softmax_e2e.py $T/pto/test_builder.py $T/pto/test_roundtrip.py $T/runtime \
  $T/frontend/test_errors.py $T/codegen/test_cache.py \
  "$T/frontend/test_conv.py::test_stride_one_convs_are_an_implicit_gemm[x_shape0-w_shape0-paddings0-dilations0-dtype0]" \
  --deselect $T/test_softmax_e2e.py::test_jit_alias_and_operators \
  --deselect $T/pto/test_builder.py::test_adaptive_tiles_use_the_variants_and_halve_the_tasks \
  --deselect $T/pto/test_builder.py::test_matmul_l0_blocks_give_the_same_product \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[branch]" \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[dynamic]" \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[layer_norm]" \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[views]" \
  --deselect "$T/pto/test_roundtrip.py::test_cli_parse_writes_builder_code_that_rebuilds_the_module[random]" \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[random]" \
  --deselect $T/codegen/test_cache.py::test_second_process_does_not_run_the_compiler \
  --deselect $T/codegen/test_cache.py::test_damaged_cache_entry_is_rebuilt \
  --deselect "$T/codegen/test_cache.py::test_a_truncated_library_is_rebuilt_not_loaded[page]" \
  --deselect "$T/codegen/test_cache.py::test_a_truncated_library_is_rebuilt_not_loaded[tenth]" \
  --deselect $T/codegen/test_cache.py::test_a_planted_library_is_not_loaded \
  --deselect $T/codegen/test_cache.py::test_the_cache_directory_is_private_and_a_shared_one_is_not_used \
  --deselect "$T/codegen/test_cache.py::test_a_truncated_library_is_rebuilt_not_loaded[half]" \
  --deselect $T/codegen/test_cache.py::test_the_background_precompile_survives_fork_and_a_removed_cache \
  --deselect $T/codegen/test_cache.py::test_a_kernel_compiled_after_the_precompile_includes_it \
  --deselect $T/codegen/test_cache.py::test_an_abi_mismatch_is_repaired_within_the_process \
  --deselect $T/codegen/test_cache.py::test_the_install_precompiles_the_native_prelude_and_a_cold_cache_uses_it \
  --deselect $T/pto/test_builder.py::test_binary_expansion_runs_blocks_and_a_residual \
  --deselect "$T/pto/test_roundtrip.py::test_cli_parse_writes_builder_code_that_rebuilds_the_module[views]" \
  --deselect "$T/pto/test_roundtrip.py::test_cli_parse_writes_builder_code_that_rebuilds_the_module[branch]" \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[conv]" \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[strided_conv]" \
  --deselect "$T/pto/test_roundtrip.py::test_jit_pto_parses_back_compiles_and_matches[matmul]" \
  --deselect "$T/pto/test_roundtrip.py::test_cli_parse_writes_builder_code_that_rebuilds_the_module[strided_conv]" \
  || status=1

# The kernels the run built are sanitized (each needs libasan).
n=0
for so in $(find "$PYPTO_CACHE_DIR" -name '*.so'); do
  readelf -d "$so" | grep -q 'NEEDED.*libasan' || { echo "kernel $so is not sanitized" >&2; exit 1; }
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no kernel was built into $PYPTO_CACHE_DIR" >&2; exit 1; }
echo "== Python tests: $((SECONDS - start)) s ($n sanitized kernels built)"
exit $status

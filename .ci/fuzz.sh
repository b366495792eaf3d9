#!/usr/bin/env bash
# CI: the .pto fuzzer (issue 17, python/tests/fuzz/pto_fuzz.py) at the CI budget: a fixed seed, 2,000 mutants
# of real kernels, at most 100 host compiles, a private kernel cache. Fails on any bad outcome (crash, hang,
# non-pypto exception, ...). About 3.5 minutes on 2 cores; --time-budget stops starting new cases after 270 s.
# Failing mutants are kept in $FUZZ_OUT (default: a new directory under /tmp, printed at the end).
# Run it after installing pypto (as .ci/run does).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d -t pto-fuzz-ci-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export PYPTO_CACHE_DIR="$tmp/cache"
out="${FUZZ_OUT:-$(mktemp -d -t pto-fuzz-findings-XXXXXX)}"
status=0
python python/tests/fuzz/pto_fuzz.py --seed "${FUZZ_SEED:-1}" --cases 2000 --max-compiles 100 --timeout 20 \
    --time-budget 270 --out "$out" || status=$?
if [ "$status" -ne 0 ]; then
    echo "failing mutants: $out (replay one with: python python/tests/fuzz/pto_fuzz.py --replay FILE.json)" >&2
fi
exit "$status"

#!/usr/bin/env bash
# test.sh — the README's test command: set up, build with warnings as errors
# and AddressSanitizer + UndefinedBehaviorSanitizer, run every ctest test but
# the slow label. Extra arguments go to ctest (e.g. -L unit, -R tokenizer).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-test}"
BUILD_TYPE=RelWithDebInfo "$ROOT/scripts/build.sh" -DSPECBED_WERROR=ON -DSPECBED_SANITIZE=ON
cd "$BUILD_DIR"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One OpenMP thread: the tests are about correctness, and on a loaded 2-core
# machine OpenMP barriers waiting for a descheduled thread made the model tests
# 10-20x slower. test_kernels sets its own thread counts to prove that results
# do not depend on them.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# The slow label (full depth × batch sweeps) runs in Release: scripts/test_slow.sh.
ctest --output-on-failure --timeout 900 -LE slow "$@"

#!/usr/bin/env bash
# test.sh — the README's test command: set up, build with warnings as errors
# and AddressSanitizer + UndefinedBehaviorSanitizer, run every ctest test.
# Extra arguments go to ctest (e.g. -L unit, -R tokenizer).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-test}"
BUILD_TYPE=RelWithDebInfo "$ROOT/scripts/build.sh" -DSPECBED_WERROR=ON -DSPECBED_SANITIZE=ON
cd "$BUILD_DIR"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
ctest --output-on-failure --timeout 900 "$@"

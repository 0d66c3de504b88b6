#!/usr/bin/env bash
# test.sh — the README's test command: set up, build with warnings as errors
# and AddressSanitizer + UndefinedBehaviorSanitizer, run every ctest test but
# the slow label, as many at once as there are cores. Extra arguments go to
# ctest (e.g. -L unit, -R tokenizer, -j1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-test}"
# The CUDA backend goes into this build only where a GPU is visible for
# test_cuda to run on (SPECBED_TEST_CUDA=ON|OFF overrides): elsewhere
# test_cuda can only skip, and nvcc compiling kernels/*.cu for two
# architectures was 22 of the build's 234 CPU-seconds on the 2-core
# machine (4 Dec). scripts/build.sh still compiles them wherever nvcc is, and CI
# compiles them with warnings as errors (.ci/run).
cuda="${SPECBED_TEST_CUDA:-OFF}"
if [ -z "${SPECBED_TEST_CUDA:-}" ] && command -v nvidia-smi >/dev/null 2>&1 &&
   nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  cuda=ON
fi
BUILD_TYPE=RelWithDebInfo "$ROOT/scripts/build.sh" -DSPECBED_WERROR=ON -DSPECBED_SANITIZE=ON -DSPECBED_CUDA="$cuda"
cd "$BUILD_DIR"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One OpenMP thread: the tests are about correctness, and on a loaded 2-core
# machine OpenMP barriers waiting for a descheduled thread made the model tests
# 10-20x slower. test_kernels sets its own thread counts to prove that results
# do not depend on them.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# One test per core (CTEST_PARALLEL_LEVEL overrides), counted with the OpenMP
# variables unset: GNU nproc prints no more than OMP_NUM_THREADS or
# OMP_THREAD_LIMIT, so after the export above it printed 1 and ctest ran the
# whole suite one test at a time (issue 42). The tests that time
# themselves against deadlines run alone (RUN_SERIAL), the 2-rank MPI tests
# hold two cores (PROCESSORS 2), and the ones that start servers and load
# them never overlap each other (RESOURCE_LOCK): tests/CMakeLists.txt.
# The slow label (full depth × batch sweeps, long fuzz runs) runs in
# Release: scripts/studies/test_slow.sh.
ctest --output-on-failure --timeout 900 -LE slow -j "${CTEST_PARALLEL_LEVEL:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}" "$@"

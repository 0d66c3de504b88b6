#!/usr/bin/env bash
# run.sh — build (once) and run one libFuzzer harness for a bounded time.
# usage: run.sh ROOT BUILD_ROOT NAME SECONDS
# The fuzz build lives in BUILD_ROOT/fuzz (clang, SPECBED_FUZZ=ON); new
# inputs go to a scratch corpus there, never into the committed seeds;
# a crash leaves its reproducer in BUILD_ROOT/fuzz/NAME-crash-* and fails.
# Exit 77 (skipped) only when clang's libFuzzer runtime is not installed
# (scripts/setup.sh installs it).
set -euo pipefail
ROOT="$1"; B="$2/fuzz"; NAME="$3"; SECS="$4"
CC="${FUZZ_CC:-clang}"
command -v "$CC" >/dev/null || { echo "fuzz: $CC not found"; exit 77; }
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' > "$2/fuzz_probe.c"
"$CC" -fsanitize=fuzzer "$2/fuzz_probe.c" -o "$2/fuzz_probe" 2>/dev/null || { echo "fuzz: $CC has no libFuzzer runtime"; exit 77; }
# one configure/build at a time (ctest may start several harnesses at once)
exec 9>"$2/fuzz.lock"
flock 9
if [ ! -f "$B/CMakeCache.txt" ]; then
  # no CUDA: no harness reaches the device code, and nvcc compiling it for
  # two architectures was most of this build's time
  cmake -S "$ROOT" -B "$B" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECBED_FUZZ=ON \
      -DSPECBED_CUDA=OFF >/dev/null
fi
cmake --build "$B" --target "fuzz_$NAME" -j"$(nproc)" >/dev/null
flock -u 9
work="$B/corpus-$NAME"
mkdir -p "$work"
cd "$B"
# -rss_limit_mb: a loader that sizes allocations from hostile input fails here
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
  "$B/tests/fuzz/fuzz_$NAME" "$work" "$ROOT/tests/fuzz/corpus/$NAME" -max_total_time="$SECS" -timeout=10 \
  -rss_limit_mb=2048 -artifact_prefix="$B/$NAME-" -print_final_stats=1 2>"$B/$NAME.log" || {
  tail -40 "$B/$NAME.log"; echo "fuzz_$NAME: FAILED (reproducer in $B/$NAME-*)"; exit 1; }
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$B/$NAME.log" | sed "s/^/fuzz_$NAME: /"
echo "fuzz_$NAME: ok"

#!/usr/bin/env bash
# bench_canary_faults.sh — the README's canary command, as written but for a
# shorter load (--duration 8), on the bundled tiny model: it passes on a clean
# server and fails on each injected fault (serve --inject-fault collision,
# flat, window, nondet), each caught by a check that names it. Then
# --calibrate from the clean run gives thresholds inside their ranges, and a
# calibration whose clean level leaves no room says DISABLED. Skipped (77)
# without models/tiny.
# usage: bench_canary_faults.sh SPECBED ROOT WORKDIR   (ctest passes these)
set -euo pipefail
BIN="$1"; ROOT="$2"; WORK="$3/bench_canary_faults"
[ -f "$ROOT/models/tiny/config.json" ] || { echo "bench_canary_faults: no models/tiny; skipped"; exit 77; }
rm -rf "$WORK"; mkdir -p "$WORK"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fail() { echo "bench_canary_faults: FAIL: $*" >&2; exit 1; }
cd "$ROOT"

# run NAME FAULT-ARGS: the documented command; sets rc
run() {
  set +e
  timeout --kill-after=10 150 "$BIN" canary --duration 8 --out "$WORK/$1" \
      --launch "$BIN serve --model models/tiny --drafter mtp --port {port} $2" >"$WORK/$1.txt" 2>&1
  rc=$?
  set -e
}

run clean ""
[ "$rc" = 0 ] || fail "clean server: canary exited $rc (want 0): $(grep -h 'FAIL\|canary ' "$WORK/clean.txt" | head -8)"
grep -q '"verdict":[[:space:]]*"pass"' "$WORK/clean/canary.json" || fail "clean verdict is not pass"

# each fault, and the check that must catch it (bench/RECORD.md: the incident each reproduces).
# collision corrupts a qualifying verify step with probability p (default 0.25):
# p=1 here, so that how many steps it corrupts in 8 s does not depend on how fast
# the machine (or a sanitizer build) runs; the fault is the same.
for fc in "collision,p=1:spec_mismatch" "flat:context_free" "window:copy" "nondet:nondeterminism"; do
  fs=${fc%%:*}; f=${fs%%,*}; check=${fc#*:}
  run "$f" "--inject-fault $fs"
  [ "$rc" = 1 ] || fail "--inject-fault $f: canary exited $rc (want 1): $(tail -5 "$WORK/$f.txt")"
  grep -q "FAIL because $check" "$WORK/$f.txt" || fail "--inject-fault $f: not caught by $check: $(grep -h 'FAIL' "$WORK/$f.txt")"
done

# calibration from the clean run: every threshold inside its range
"$BIN" canary --calibrate "$WORK/clean" >"$WORK/cal.txt" 2>&1 || fail "calibrate exited $?: $(cat "$WORK/cal.txt")"
grep -q "DISABLED" "$WORK/cal.txt" && fail "a check is disabled by the clean run's own calibration: $(cat "$WORK/cal.txt")"
loop=$(sed -n 's/^trigram loop: flag > \([0-9.]*\).*/\1/p' "$WORK/cal.txt")
[ -n "$loop" ] && awk -v t="$loop" 'BEGIN { exit !(t < 1) }' || fail "trigram loop threshold '$loop' not inside [0, 1): $(cat "$WORK/cal.txt")"
# a plain load's outputs have no reference to excuse the model's own loops:
# where its clean level leaves no room below 1, the check is said to be off
cp -r "$WORK/clean/load" "$WORK/plain_load"   # a canary's own load/ is read through its canary.json
"$BIN" canary --calibrate "$WORK/plain_load" >"$WORK/cal_load.txt" 2>&1 || fail "calibrate from a load dir exited $?: $(cat "$WORK/cal_load.txt")"
if grep -q "^trigram loop: flag" "$WORK/cal_load.txt"; then
  t=$(sed -n 's/^trigram loop: flag > \([0-9.]*\).*/\1/p' "$WORK/cal_load.txt")
  awk -v t="$t" 'BEGIN { exit !(t < 1) }' || fail "a loop threshold at or beyond 1 not reported as disabled: $(cat "$WORK/cal_load.txt")"
else
  grep -q "^trigram loop: DISABLED" "$WORK/cal_load.txt" || fail "no loop line: $(cat "$WORK/cal_load.txt")"
fi
echo "bench_canary_faults: ok"

#!/usr/bin/env bash
# bench_sweep_fail.sh — a sweep decides only from cells that were measured
# and succeeded (issue 37). Three sweeps that go wrong, each small:
#   1. the speculation-off launch fails (serve refuses --depth 0): the sweep
#      exits 1 and counts the failed launch; the report makes no decision for
#      the series and names depth 0 and the launch error;
#   2. a server that answers every completion with an error (serve
#      --max-seq-len 4: each prompt is too long): exit 1, the summary counts
#      the runs that completed none, the report decides nothing from them;
#      its depth-0 launch is the one derived from --launch (no --launch-off),
#      which must start;
#   3. a template without {port} is refused at once (exit 2), not after the
#      boot timeout.
# usage: bench_sweep_fail.sh SPECBED ROOT WORKDIR   (ctest passes these)
set -euo pipefail
BIN="$1"; ROOT="$2"; WORK="$3/bench_sweep_fail"
M="$ROOT/tests/fixtures/qwen3-tied"
[ -d "$M" ] || { echo "bench_sweep_fail: skipped: no $M"; exit 77; }
rm -rf "$WORK"; mkdir -p "$WORK"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fail() { echo "bench_sweep_fail: FAIL: $*" >&2; exit 1; }
cd "$ROOT"
W=tests/fixtures/workloads/mixed.jsonl
COMMON=(--workloads "$W" --concurrency 1 --repeats 1 --num-prompts 4 --max-tokens 8 --no-canary --interval 0.5 --boot-timeout 60)

# 1. the off arm cannot launch
set +e
timeout --kill-after=15 200 "$BIN" sweep \
    --launch "$BIN serve --model $M --drafter ngram --depth {depth} --port {port}" \
    --launch-off "$BIN serve --model $M --depth 0 --port {port}" \
    --depths 0,2 "${COMMON[@]}" --out "$WORK/s1" >"$WORK/s1.txt" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "sweep 1 (off launch fails) exited $rc, want 1: $(tail -5 "$WORK/s1.txt")"
grep -q "1 launch(es) failed" "$WORK/s1.txt" || fail "sweep 1's summary does not count the failed launch: $(tail -3 "$WORK/s1.txt")"
timeout 120 "$BIN" report "$WORK/s1" >"$WORK/r1.txt" 2>&1 || fail "report 1 exited $?: $(tail -5 "$WORK/r1.txt")"
grep -q "speculation off" "$WORK/r1.txt" && grep -q "c=1 *speculation off" "$WORK/r1.txt" && fail "report 1 decided 'speculation off' without a depth-0 cell"
grep -q "no decision" "$WORK/r1.txt" || fail "report 1 printed a decision: $(cat "$WORK/r1.txt")"
R1="$WORK/s1/report/report.md"
grep -q '^| default | mixed | 1 | \*\*no decision\*\*' "$R1" || fail "report.md 1 has no 'no decision' row"
grep -q "^## Missing or failed cells" "$R1" || fail "report.md 1 does not list the missing cells"
grep -Eq "depth 0 \(speculation off\): 1 of 1 launch\(es\) failed" "$R1" || fail "report.md 1 does not say why depth 0 is missing"
grep -q '"recommended_depth":[[:space:]]*null' "$WORK/s1/report/recommendation.json" || fail "recommendation.json 1 recommends a depth"

# 2. every request fails; depth 0 launches from the derived template
set +e
timeout --kill-after=15 200 "$BIN" sweep \
    --launch "$BIN serve --model $M --max-seq-len 4 --drafter ngram --depth {depth} --port {port}" \
    --depths 0,1 "${COMMON[@]}" --out "$WORK/s2" >"$WORK/s2.txt" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "sweep 2 (every request fails) exited $rc, want 1: $(tail -5 "$WORK/s2.txt")"
grep -q "0 launch(es) failed" "$WORK/s2.txt" || fail "sweep 2: a launch failed (the derived off launch?): $(grep -i fail "$WORK/s2.txt" | head -5)"
grep -q "2 run(s) failed (0 could not run, 0 with failed requests, 2 completed none)" "$WORK/s2.txt" \
    || fail "sweep 2's summary does not count the failed runs: $(tail -3 "$WORK/s2.txt")"
grep -q '"launch_off_derived":[[:space:]]*"[^"]*serve --model [^"]*--max-seq-len 4 --port {port}"' "$WORK/s2/sweep.json" \
    || fail "sweep.json 2 lacks the derived off launch"
timeout 120 "$BIN" report "$WORK/s2" >"$WORK/r2.txt" 2>&1 || fail "report 2 exited $?: $(tail -5 "$WORK/r2.txt")"
grep -q "no decision" "$WORK/r2.txt" || fail "report 2 decided from runs that completed nothing: $(cat "$WORK/r2.txt")"
grep -q "completed none" "$WORK/s2/report/report.md" || fail "report.md 2 does not say the runs completed none"

# 3. no {port}: refused before anything starts
t0=$(date +%s)
set +e
timeout 60 "$BIN" sweep --launch "$BIN serve --model $M --drafter ngram --depth {depth} --port 8123" \
    --depths 1 "${COMMON[@]}" --out "$WORK/s3" >"$WORK/s3.txt" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "sweep 3 (no {port}) exited $rc, want 2"
[ $(( $(date +%s) - t0 )) -lt 10 ] || fail "sweep 3 took over 10 s to refuse a template without {port}"
grep -q "{port}" "$WORK/s3.txt" || fail "sweep 3's message does not name {port}: $(cat "$WORK/s3.txt")"
echo "bench_sweep_fail: ok"

#!/usr/bin/env bash
# bench_canary.sh — the canary end to end against real `specbed serve`
# processes on loopback: it passes on a clean server (thresholds calibrated
# from a first clean run, since the random test model loops and cannot copy
# a passphrase), fails with evidence on a fault-injected cold launch, and
# scans SGLang logs / interval CSVs offline. Also a plain `specbed load`.
# usage: bench_canary.sh SPECBED ROOT WORKDIR   (ctest passes these)
set -euo pipefail
BIN="$1"; ROOT="$2"; WORK="$3/bench_canary"
M="$ROOT/tests/fixtures/qwen3-tied"
rm -rf "$WORK"; mkdir -p "$WORK"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
SERVER=""
cleanup() { if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi; }
trap cleanup EXIT
fail() { echo "bench_canary: FAIL: $*" >&2; exit 1; }
T() { timeout --kill-after=10 "$@"; }   # every step is bounded
# GET URL/health answered 200 (bash /dev/tcp: no curl binary needed)
health() {
  local hp=${1#http://}; local h=${hp%%:*} p=${hp##*:}
  (exec 3<>"/dev/tcp/$h/$p" && printf 'GET /health HTTP/1.0\r\nHost: %s\r\n\r\n' "$h" >&3 &&
   IFS= read -r -t 3 line <&3 && [[ "$line" == *" 200"* ]]) 2>/dev/null
}

WL=code; [ -f "$ROOT/workloads/code.jsonl" ] || WL="$ROOT/tests/fixtures/workloads/mixed.jsonl"
: >"$WORK/clean_server.log"   # exists before the background job opens it (the loop reads it at once)
"$BIN" serve --model "$M" --drafter draft --draft-model "$M" --depth 4 --port 0 >"$WORK/clean_server.log" 2>&1 &
SERVER=$!
URL=""
for _ in $(seq 1 150); do   # --port 0: the server prints the port it bound
  URL=$(sed -n 's|.*listening on \(http://[0-9.]*:[0-9]*\).*|\1|p' "$WORK/clean_server.log" | head -1 || true)
  [ -n "$URL" ] && health "$URL" && break
  sleep 0.2
done
[ -n "$URL" ] && health "$URL" || fail "clean server did not become healthy: $(tail -3 "$WORK/clean_server.log")"
cd "$ROOT"

# load: outputs and a sane summary
T 60 "$BIN" load --url "$URL" --workload "$WL" --num-prompts 8 --concurrency 4 --max-tokens 16 --interval 0.5 \
    --out "$WORK/load" --quiet >"$WORK/load.txt" 2>&1 || fail "load exited $? ($(tail -3 "$WORK/load.txt"))"
for f in requests.csv intervals.csv summary.json outputs.jsonl; do [ -s "$WORK/load/$f" ] || fail "load: no $f"; done
grep -Eq '^completed +8$' "$WORK/load.txt" || fail "load: counts not printed as integers: $(grep '^completed' "$WORK/load.txt")"
grep -q '"completed":[[:space:]]*8' "$WORK/load/summary.json" || fail "load: not 8 completed: $(cat "$WORK/load/summary.json")"
grep -q '"specbed_metrics_source":[[:space:]]*"specbed"' "$WORK/load/summary.json" || fail "load: metrics source not detected"
grep -q '"spec_decode_per_position_acceptance_rates"' "$WORK/load/summary.json" || fail "load: no per-position rates (vLLM's key)"
grep -q '"specbed_metrics_scrapes_failed":[[:space:]]*0' "$WORK/load/summary.json" || fail "load: scrapes failed against a healthy server"
grep -Eq '"spec_decode_acceptance_length":[[:space:]]*[2-5]([.,]|$)' "$WORK/load/summary.json" || fail "load: no accept length"

# --help lists each option once, with the default the command applies
for cmd in canary load; do
  dups=$("$BIN" $cmd --help | grep -o '^  --[a-z-]*' | sort | uniq -d | tr '\n' ' ')
  [ -z "$dups" ] || fail "$cmd --help lists more than once: $dups"
done
"$BIN" canary --help | grep -Eq -- '^  --interval S .*\(default 2\)' || fail "canary --help: --interval default is not 2"
"$BIN" canary --help | grep -Eq -- '^  --max-tokens N .*\(default: 64\)' || fail "canary --help: --max-tokens default is not 64"
"$BIN" load --help | grep -Eq -- '^  --interval S .*\(default 5\)' || fail "load --help: --interval default is not 5"

# first clean canary: its scores are the clean level for --calibrate
set +e
T 120 "$BIN" canary --url "$URL" --workload "$WL" --duration 5 --out "$WORK/c1" >"$WORK/c1.txt" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "first canary could not run (exit $rc): $(tail -5 "$WORK/c1.txt")"
[ -s "$WORK/c1/canary.json" ] || fail "first canary wrote no canary.json"

# calibrated canary on the clean server passes
set +e
T 120 "$BIN" canary --calibrate "$WORK/c1" --url "$URL" --workload "$WL" --duration 5 --out "$WORK/c2" >"$WORK/c2.txt" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || fail "calibrated canary on a clean server exited $rc: $(tail -15 "$WORK/c2.txt")"
grep -q "calibrated from" "$WORK/c2.txt" || fail "calibration not printed"
grep -q '"verdict":[[:space:]]*"pass"' "$WORK/c2/canary.json" || fail "clean canary verdict is not pass"
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""

# fault-injected cold launch fails, with evidence
set +e
T 150 "$BIN" canary --calibrate "$WORK/c1" --workload "$WL" --duration 5 --out "$WORK/c3" \
    --launch "$BIN serve --model $M --drafter draft --draft-model $M --depth 4 --port {port} --inject-fault" \
    >"$WORK/c3.txt" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "canary on a fault-injected server exited $rc (want 1): $(tail -15 "$WORK/c3.txt")"
grep -q '"verdict":[[:space:]]*"fail"' "$WORK/c3/canary.json" || fail "fault canary verdict is not fail"
grep -q "differs from the spec off reference\|accept length" "$WORK/c3/evidence.txt" || fail "no evidence: $(head "$WORK/c3/evidence.txt")"
# the launched server is gone: nothing answers on its port any more
FURL=$(sed -n 's/.*"base_url":[[:space:]]*"\([^"]*\)".*/\1/p' "$WORK/c3/canary.json")
[ -n "$FURL" ] || fail "no base_url in the fault canary.json"
health "$FURL" && fail "the launched server still answers at $FURL"

# offline scans
set +e
"$BIN" canary --sglang-log "$ROOT/tests/fixtures/metrics/sglang_new.log" >"$WORK/scan.txt" 2>&1; rc=$?
set -e
[ "$rc" = 1 ] || fail "offline SGLang scan exited $rc (want 1)"
grep -q "^line 4: accept len 1.92" "$WORK/scan.txt" && grep -q "^line 6: accept len 2.00" "$WORK/scan.txt" \
    || fail "offline scan did not report lines 4 and 6: $(cat "$WORK/scan.txt")"
grep -q "2 of 7 interval" "$WORK/scan.txt" || fail "offline scan count: $(tail -1 "$WORK/scan.txt")"
"$BIN" canary --sglang-log - --threshold 1.5 <"$ROOT/tests/fixtures/metrics/sglang_old.log" >"$WORK/scan2.txt" 2>&1 \
    || fail "stdin scan at 1.5 should pass: $(cat "$WORK/scan2.txt")"
"$BIN" canary --intervals "$WORK/c2/load/intervals.csv" --threshold 1.5 >/dev/null 2>&1 || fail "clean interval CSV flagged"
set +e
"$BIN" canary --intervals "$WORK/c2/load/intervals.csv" --threshold 10 >/dev/null 2>&1; rc=$?
set -e
[ "$rc" = 1 ] || fail "interval CSV scan at threshold 10 exited $rc (want 1)"
set +e
"$BIN" canary --url http://127.0.0.1:9 --duration 1 --out "$WORK/c4" >/dev/null 2>&1; rc=$?
set -e
[ "$rc" = 2 ] || fail "canary against no server exited $rc (want 2)"
[ ! -e "$WORK/c4" ] || fail "a canary that could not run left $WORK/c4 behind: $(ls -la "$WORK/c4")"
# a launch template without {port} is refused at once (it used to wait the whole
# boot timeout for a server on a port specbed never told it), and nothing is left
set +e
T 10 "$BIN" canary --launch "$BIN serve --model $ROOT/models/tiny --port 1" --out "$WORK/c5" >"$WORK/c5.txt" 2>&1; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "{port}" "$WORK/c5.txt" || fail "canary --launch without {port} exited $rc: $(cat "$WORK/c5.txt")"
[ ! -e "$WORK/c5" ] || fail "a canary refused for its template left $WORK/c5 behind"
# input limits are checked before anything is read: a device is refused at once
set +e
T 10 "$BIN" canary --intervals /dev/zero >"$WORK/zero.txt" 2>&1; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "not a regular file" "$WORK/zero.txt" || fail "canary --intervals /dev/zero exited $rc: $(cat "$WORK/zero.txt")"
set +e
T 10 "$BIN" load --url http://127.0.0.1:9 --workload /dev/zero >"$WORK/zero2.txt" 2>&1; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "not a regular file" "$WORK/zero2.txt" || fail "load --workload /dev/zero exited $rc: $(cat "$WORK/zero2.txt")"
echo "bench_canary: ok"

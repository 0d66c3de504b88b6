#!/usr/bin/env bash
# bench_canary_speclog.sh — the canary's offline scan of specbed's own
# decode-batch log judges only intervals in which something drafted. specbed
# serve omits "accept len: X, accept rate: Y, " from a Decode batch line when
# no request drafted in that interval (as SGLang prints no accept len for a
# server that does not speculate), and spec-off requests do not count toward
# accept len; bench/load/metrics_sglang.c reads such a line as accept length NaN,
# which the verdict does not judge (bench/canary/canary_verdict.h).
#   1. a spec-off server: `specbed canary --sglang-log` on its log flags
#      nothing, judges nothing, and says so: "not judged: the SGLang log
#      gives no accept length", verdict inconclusive, exit 3 (no silent pass);
#   2. a weak drafter (the untied fixture drafting for the tied one: accept
#      length near 1) with spec-off ("spec_depth": 0) requests alone, then
#      spec-on alone, then both at once: every flagged line is a line with an
#      accept length, the judged count is the number of such lines, and the
#      lines without one are never flagged.
# usage: bench_canary_speclog.sh SPECBED ROOT WORKDIR   (ctest passes these)
set -euo pipefail
BIN="$1"; ROOT="$2"; WORK="$3/bench_canary_speclog"
M="$ROOT/tests/fixtures/qwen3-tied"; D="$ROOT/tests/fixtures/qwen3-untied"
rm -rf "$WORK"; mkdir -p "$WORK"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
SERVER=""
cleanup() { if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi; }
trap cleanup EXIT
fail() { echo "bench_canary_speclog: FAIL: $*" >&2; exit 1; }
T() { timeout --kill-after=10 "$@"; }   # every step is bounded
# GET URL/health answered 200 (bash /dev/tcp: no curl binary needed)
health() {
  local hp=${1#http://}; local h=${hp%%:*} p=${hp##*:}
  (exec 3<>"/dev/tcp/$h/$p" && printf 'GET /health HTTP/1.0\r\nHost: %s\r\n\r\n' "$h" >&3 &&
   IFS= read -r -t 3 line <&3 && [[ "$line" == *" 200"* ]]) 2>/dev/null
}
# start LOG ARGS…: a server on a free port (--port 0 prints the one it bound); sets SERVER and URL
start() {
  local log="$1"; shift
  : >"$log"   # exists before the background job opens it (the loop reads it at once)
  "$BIN" serve --model "$M" --port 0 --decode-log-interval 5 "$@" 2>"$log" >/dev/null &
  SERVER=$!
  URL=""
  for _ in $(seq 1 150); do
    URL=$(sed -n 's|.*listening on \(http://[0-9.]*:[0-9]*\).*|\1|p' "$log" | head -1 || true)
    [ -n "$URL" ] && health "$URL" && return 0
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.2
  done
  fail "server ($*) did not become healthy: $(tail -3 "$log")"
}
stop() { kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""; }
# load NAME ARGS…: a few short greedy streaming requests
load() {
  local name="$1"; shift
  T 60 "$BIN" load --url "$URL" --workload "$WL" --num-prompts 4 --concurrency 2 --max-tokens 16 --interval 0.5 \
      --out "$WORK/$name" --quiet "$@" >"$WORK/$name.txt" 2>&1 || fail "load $name exited $?: $(tail -3 "$WORK/$name.txt")"
}
# scan LOG OUT: the offline canary; sets RC
scan() {
  set +e
  T 30 "$BIN" canary --sglang-log "$1" >"$2" 2>&1; RC=$?
  set -e
}
# decode-batch lines of LOG: with / without an accept length, under load (#running-req > 0)
n_lines() { grep -c "Decode batch" "$1" || true; }
n_spec() { grep "Decode batch" "$1" | grep -Ec '#running-req: [1-9][0-9]*,.*accept len: ' || true; }
n_nospec() { grep "Decode batch" "$1" | grep -vc 'accept len: ' || true; }

cd "$ROOT"
WL=code; [ -f "$ROOT/workloads/code.jsonl" ] || WL="$ROOT/tests/fixtures/workloads/mixed.jsonl"

# 1. speculation off: no line has an accept length; nothing judged, nothing flagged
start "$WORK/off.log"
load off
stop
A="$WORK/off.log"
[ "$(n_lines "$A")" -gt 0 ] || fail "spec-off server logged no Decode batch line: $(tail -3 "$A")"
[ "$(n_nospec "$A")" = "$(n_lines "$A")" ] || fail "a spec-off server's line has an accept length: $(grep -m1 'accept len' "$A")"
scan "$A" "$WORK/off_scan.txt"
[ "$RC" = 3 ] || fail "scan of the spec-off log exited $RC (want 3, inconclusive): $(cat "$WORK/off_scan.txt")"
grep -q "^canary: INCONCLUSIVE: accept length: not judged: the SGLang log gives no accept length" "$WORK/off_scan.txt" \
    || fail "spec-off scan did not say why it judged nothing: $(cat "$WORK/off_scan.txt")"
grep -q "^canary: 0 of $(n_lines "$A") interval(s) at or below accept length 2.000; 0 judged" "$WORK/off_scan.txt" \
    || fail "spec-off scan: $(cat "$WORK/off_scan.txt")"
grep -q "^line " "$WORK/off_scan.txt" && fail "spec-off scan flagged a line: $(cat "$WORK/off_scan.txt")"

# 2. a weak drafter, spec-off requests alone, spec-on alone, then both at once
start "$WORK/mixed.log" --drafter draft --draft-model "$D" --depth 2
load m_off --spec-depth 0
load m_on --num-prompts 2
T 60 "$BIN" load --url "$URL" --workload "$WL" --num-prompts 4 --concurrency 2 --max-tokens 16 --interval 0.5 \
    --out "$WORK/m_both_off" --quiet --spec-depth 0 >"$WORK/m_both_off.txt" 2>&1 &
BG=$!
load m_both_on --num-prompts 2 --seed 1
wait "$BG" || fail "load m_both_off exited $?: $(tail -3 "$WORK/m_both_off.txt")"
stop
B="$WORK/mixed.log"
grep -q '"spec_decode_acceptance_length"' "$WORK/m_on/summary.json" || fail "the spec-on load saw no accept length"
[ "$(n_spec "$B")" -gt 0 ] || fail "the drafting server logged no line with an accept length"
[ "$(n_nospec "$B")" -gt 0 ] || fail "the spec-off requests alone logged no line without an accept length"
scan "$B" "$WORK/mixed_scan.txt"
nflag=$(grep -c "^line " "$WORK/mixed_scan.txt" || true)
if [ "$nflag" -gt 0 ]; then [ "$RC" = 1 ] || fail "mixed scan flagged $nflag line(s) but exited $RC (want 1)"
else [ "$RC" = 0 ] || fail "mixed scan flagged nothing but exited $RC: $(cat "$WORK/mixed_scan.txt")"; fi
# every flagged line drafted: its log line carries an accept length
for ln in $(sed -n 's/^line \([0-9]*\):.*/\1/p' "$WORK/mixed_scan.txt"); do
  sed -n "${ln}p" "$B" | grep -q "Decode batch.*accept len: " || fail "flagged log line $ln did not draft: $(sed -n "${ln}p" "$B")"
done
grep -q "^canary: $nflag of $(n_lines "$B") interval(s) at or below accept length 2.000; $(n_spec "$B") judged" \
    "$WORK/mixed_scan.txt" || fail "mixed scan: judged count is not the lines with an accept length ($(n_spec "$B")): $(tail -1 "$WORK/mixed_scan.txt")"
echo "bench_canary_speclog: ok ($(n_lines "$A") spec-off lines, none judged; $(n_lines "$B") mixed lines, $(n_spec "$B") judged, $nflag flagged)"

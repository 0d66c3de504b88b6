#!/usr/bin/env bash
# Trickling and reconnecting clients cannot lock anyone out, and stalled
# uploads hold bounded memory (tests/server_trickle.py, issue 38 items 1-2),
# against the real binary with short deadlines so the test stays fast:
#   - 600 connections trickling their headers (one byte a second, under the
#     idle timeout) from the probes' own address: /health answers >= 19 of
#     20 probes within 1 s, a completion succeeds, and every trickler is
#     closed by the total header deadline (an idle timer never fired);
#   - 512 clients (the default table) that reconnect as soon as they are
#     closed: the same;
#   - body tricklers are closed by the total body deadline;
#   - with the table full of fresh connections (nothing to evict yet),
#     /health and /metrics answer on the reserve and a completion succeeds;
#   - 100 unauthenticated uploads that stall at 3 of 4 MiB: RSS grows by
#     less than the body memory bound (64 MiB) + 60 MiB.
# args: SPECBED_BIN ROOT BUILD_DIR
set -euo pipefail
BIN=$1 ROOT=$2
TMP=$(mktemp -d)
M="$ROOT/tests/fixtures/qwen3-tied"
PY="$ROOT/tests/server_trickle.py"
HDR=4 BODY=5 MEM=64
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  [ -f "$TMP/err" ] && tail -n 20 "$TMP/err"
  exit 1
}

start() {
  rm -f "$TMP/err"
  "$BIN" serve --model "$M" --port 0 --decode-log-interval 0 "$@" 2>"$TMP/err" &
  PID=$!
  BASE=""
  for _ in $(seq 1 300); do
    BASE=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/err" 2>/dev/null | sed 's/listening on //' || true)
    [ -n "$BASE" ] && break
    kill -0 "$PID" 2>/dev/null || fail "server exited at startup"
    sleep 0.1
  done
  [ -n "$BASE" ] || fail "no 'listening on' line"
}

stop() {
  kill -TERM "$PID"
  for _ in $(seq 1 300); do
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$PID" 2>/dev/null && fail "server still running 30 s after SIGTERM"
  set +e
  wait "$PID"
  rc=$?
  set -e
  PID=""
  [ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
}

"$BIN" serve --help >"$TMP/help"
grep -q -- "--header-timeout" "$TMP/help" || fail "--help does not list --header-timeout"

start --header-timeout "$HDR" --body-timeout "$BODY" --max-body-memory "$MEM"
for mode in flood reconnect; do
  timeout 60 python3 "$PY" "$mode" "$BASE" "$PID" "$HDR" || fail "$mode"
done
timeout 30 python3 "$PY" body "$BASE" "$PID" "$BODY" || fail "body"
timeout 90 python3 "$PY" memory "$BASE" "$PID" "$MEM" || fail "memory"
curl -sf --max-time 5 "$BASE/health" >/dev/null || fail "/health after the floods"
grep -q "past the $HDR s header deadline" "$TMP/err" || fail "no log line about closed connections"
stop
start --max-connections 4 --reserve-connections 4
timeout 60 python3 "$PY" reserve "$BASE" "$PID" 4 || fail "reserve"
stop
echo "server_trickle: ok"

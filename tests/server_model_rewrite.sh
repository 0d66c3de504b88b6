#!/usr/bin/env bash
# The served checkpoint rewritten in place while serving (issue 38 item 5):
# `cp` of a different model over model.safetensors (same inode, truncated
# and rewritten), then the file truncated to nothing. The weights were an
# mmap of the file, so the next request died of SIGBUS (or, had the sizes
# matched, would have been served from the new bytes). They are read into
# the process's own memory at load: the server answers, with the same greedy
# output as before the rewrite, and /health stays 200.
# args: SPECBED_BIN ROOT BUILD_DIR
set -euo pipefail
BIN=$1 ROOT=$2
TMP=$(mktemp -d)
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
M="$TMP/model"
cp -r "$ROOT/tests/fixtures/qwen3-tied" "$M"
OTHER="$ROOT/tests/fixtures/qwen3-untied/model.safetensors"
cmp -s "$M/model.safetensors" "$OTHER" && fail "the two fixtures are the same file"

"$BIN" serve --model "$M" --port 0 --decode-log-interval 0 2>"$TMP/err" &
PID=$!
BASE=""
for _ in $(seq 1 300); do
  BASE=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/err" 2>/dev/null | sed 's/listening on //' || true)
  [ -n "$BASE" ] && break
  kill -0 "$PID" 2>/dev/null || fail "server exited at startup"
  sleep 0.1
done
[ -n "$BASE" ] || fail "no 'listening on' line"

REQ='{"prompt":"hello world","max_tokens":16,"temperature":0,"ignore_eos":true}'
text() { curl -sf --max-time 60 "$BASE/v1/completions" -d "$REQ" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'; }
before=$(text) || fail "completion before the rewrite"
inode=$(stat -c %i "$M/model.safetensors")
cp "$OTHER" "$M/model.safetensors"          # in place: same inode, truncated, rewritten
[ "$(stat -c %i "$M/model.safetensors")" = "$inode" ] || fail "cp did not rewrite in place"
after=$(text) || { kill -0 "$PID" 2>/dev/null || fail "the server died after the model file was rewritten"; fail "completion after the rewrite"; }
[ "$after" = "$before" ] || fail "output changed after the rewrite: '$before' -> '$after'"
: >"$M/model.safetensors"                   # and truncated to nothing
again=$(text) || { kill -0 "$PID" 2>/dev/null || fail "the server died after the model file was truncated"; fail "completion after truncation"; }
[ "$again" = "$before" ] || fail "output changed after truncation"
curl -sf --max-time 5 "$BASE/health" >/dev/null || fail "/health after the rewrites"
kill -TERM "$PID"
set +e
wait "$PID"
rc=$?
set -e
PID=""
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
echo "server_model_rewrite: ok (the same greedy output after cp over the model and after truncating it)"

#!/usr/bin/env bash
# `mpirun -np 2 specbed serve --tp 2` (tensor parallelism on loopback): the
# API answers as with one process, speculation on and off give the same
# greedy text, a client that disconnects mid-stream leaves no KV page held
# on any rank, SIGTERM to rank 0 drains and every rank exits 0, and a rank
# that dies ends the job with mpirun's report instead of a hang.
# args: SPECBED_BIN ROOT BUILD_DIR. Exit 77 without mpirun.
set -euo pipefail
BIN=$1 ROOT=$2
command -v mpirun >/dev/null || { echo "server_tp: skipped: no mpirun (scripts/setup.sh installs openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's own allocations held at exit are suppressed by library; that
# needs whole stacks and its plugins still loaded (see tests/CMakeLists.txt)
export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan_mpi.supp:fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1
TMP=$(mktemp -d)
M="$ROOT/tests/fixtures/qwen3-tied-mtp"
MPIPID="" CURL=""
cleanup() {
  [ -n "$CURL" ] && kill "$CURL" 2>/dev/null || true
  if [ -n "$MPIPID" ]; then pkill -9 -P "$MPIPID" 2>/dev/null || true; kill -9 "$MPIPID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  [ -f "$TMP/err" ] && tail -n 30 "$TMP/err"
  exit 1
}

# rank_pid R: the pid of rank R among mpirun's children
rank_pid() {
  local p
  for p in $(pgrep -P "$MPIPID"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}

start() {
  rm -f "$TMP/err"
  mpirun -np 2 --oversubscribe "$BIN" serve --model "$M" --port 0 --tp 2 "$@" 2>"$TMP/err" >/dev/null &
  MPIPID=$!
  BASE=""
  for _ in $(seq 1 600); do
    BASE=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/err" 2>/dev/null | sed 's/listening on //' || true)
    [ -n "$BASE" ] && break
    kill -0 "$MPIPID" 2>/dev/null || fail "server exited at startup"
    sleep 0.1
  done
  [ -n "$BASE" ] || fail "no 'listening on' line"
  grep -q "tp 2)" "$TMP/err" || fail "startup line does not say tp 2"
}

# wait_exit SECONDS: mpirun's exit status once it ends (fails on a hang)
wait_exit() {
  for _ in $(seq 1 $(($1 * 10))); do
    kill -0 "$MPIPID" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$MPIPID" 2>/dev/null && fail "the job still runs $1 s later"
  set +e
  wait "$MPIPID"
  rc=$?
  set -e
  MPIPID=""
}

text() { sed -n 's/.*"text":"\([^"]*\)".*/\1/p'; }
# get URL [CURL_ARGS...]: the whole reply in $TMP/r (never `curl | grep -q`:
# grep stops reading at its match and curl then fails on the closed pipe)
get() { local u=$1; shift; curl -sfN "$@" "$u" >"$TMP/r"; }

start --drafter mtp --depth 3
grep -q "mtp: tensor parallel over 2 ranks" "$TMP/err" || fail "the MTP drafter does not say it is sharded over 2 ranks"
# --- the API, as with one process
get "$BASE/v1/models" && grep -q '"id":"qwen3-tied-mtp"' "$TMP/r" || fail "/v1/models"
REQ='{"prompt":"hello world","max_tokens":40,"temperature":0,"ignore_eos":true'
on=$(curl -sf "$BASE/v1/completions" -d "$REQ}" | text)
off=$(curl -sf "$BASE/v1/completions" -d "$REQ,\"spec_depth\":0}" | text)
[ -n "$on" ] || fail "empty completion"
[ "$on" = "$off" ] || fail "spec on/off differ under TP=2: '$on' vs '$off'"
get "$BASE/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0}' &&
  grep -q '"role":"assistant"' "$TMP/r" || fail "chat completion"
get "$BASE/v1/completions" -d "${REQ/40/16},\"stream\":true}" && grep -q '^data: \[DONE\]' "$TMP/r" || fail "stream"
get "$BASE/metrics" && grep -q '^specbed:spec_decode_num_accepted_tokens_total [1-9]' "$TMP/r" || fail "nothing accepted"

# --- a client that disconnects mid-stream frees its pages on every rank
curl -sN "$BASE/v1/completions" \
  -d '{"prompt":"hello","max_tokens":900,"temperature":0,"ignore_eos":true,"stream":true}' >"$TMP/stream" &
CURL=$!
for _ in $(seq 1 200); do [ -s "$TMP/stream" ] && break; sleep 0.05; done
[ -s "$TMP/stream" ] || fail "stream never started"
kill "$CURL"; wait "$CURL" 2>/dev/null || true; CURL=""
freed=""
for _ in $(seq 1 100); do
  curl -sf "$BASE/metrics" >"$TMP/m" || fail "/metrics"
  if grep -q '^specbed:num_requests_running 0$' "$TMP/m" &&
     [ "$(grep -c '^specbed:kv_cache_pages_used_by_rank{rank="[01]"} 0$' "$TMP/m")" = 2 ]; then freed=1; break; fi
  sleep 0.1
done
[ -n "$freed" ] || fail "pages still held after the disconnect: $(grep by_rank "$TMP/m")"

# --- SIGTERM to rank 0 (the HTTP server) drains a running stream; every rank exits 0
curl -sN "$BASE/v1/completions" \
  -d '{"prompt":"hello","max_tokens":300,"temperature":0,"ignore_eos":true,"stream":true}' >"$TMP/stream2" &
CURL=$!
for _ in $(seq 1 200); do [ -s "$TMP/stream2" ] && break; sleep 0.05; done
R0=$(rank_pid 0)
[ -n "$R0" ] || fail "rank 0 not found"
kill -TERM "$R0"
wait_exit 60
[ "$rc" = 0 ] || fail "mpirun exit status $rc after SIGTERM to rank 0"
wait "$CURL" || true; CURL=""
grep -q '"finish_reason":"length"' "$TMP/stream2" || fail "SIGTERM did not let the running stream finish"
grep -q "specbed serve: stopped" "$TMP/err" || fail "no 'stopped' line"

# --- a rank that dies ends the job, with the rank named, not a hang
start
R1=$(rank_pid 1)
[ -n "$R1" ] || fail "rank 1 not found"
kill -9 "$R1"
curl -s -m 20 "$BASE/v1/completions" -d "$REQ}" >/dev/null 2>&1 || true
wait_exit 30
[ "$rc" != 0 ] || fail "the job exited 0 after rank 1 was killed"
grep -q "rank 1" "$TMP/err" || fail "mpirun did not name the dead rank"
echo "server_tp: ok"

#!/usr/bin/env bash
# The official `openai` Python package against a live `specbed serve`:
# completions, chat, streaming, logprobs, errors (tests/server_openai.py).
# The package goes into a venv in the build directory (made once, reused);
# if PyPI cannot be reached the test is skipped (exit 77), not failed.
# args: SPECBED_BIN ROOT BUILD_DIR
set -euo pipefail
BIN=$1 ROOT=$2 BUILD=$3
OPENAI_PKG="openai==3.57.0"
VENV="$BUILD/openai-venv"
TMP=$(mktemp -d)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

if ! "$VENV/bin/python" -c "import openai" 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" || { echo "SKIP: python3 -m venv failed"; exit 77; }
  timeout 300 "$VENV/bin/pip" install -q "$OPENAI_PKG" || { echo "SKIP: cannot install $OPENAI_PKG (no PyPI?)"; exit 77; }
fi

M="$ROOT/tests/fixtures/qwen3-tied"
KEY=sk-openai-test
"$BIN" serve --model "$M" --drafter draft --draft-model "$M" --depth 4 --port 0 --api-key "$KEY" 2>"$TMP/err" &
PID=$!
BASE=""
for _ in $(seq 1 300); do
  BASE=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/err" | sed 's/listening on //' || true)
  [ -n "$BASE" ] && break
  kill -0 "$PID" 2>/dev/null || { echo "FAIL: server exited"; cat "$TMP/err"; exit 1; }
  sleep 0.1
done
[ -n "$BASE" ] || { echo "FAIL: server did not start"; cat "$TMP/err"; exit 1; }

set +e
timeout 180 "$VENV/bin/python" "$ROOT/tests/server_openai.py" "$BASE" "$KEY"
rc=$?
set -e
kill -TERM "$PID"
set +e
wait "$PID"
src=$?
set -e
PID=""
[ "$rc" = 0 ] || { echo "FAIL: server_openai.py exit $rc"; tail -n 20 "$TMP/err"; exit 1; }
[ "$src" = 0 ] || { echo "FAIL: server exit $src after SIGTERM"; tail -n 20 "$TMP/err"; exit 1; }
echo "server_openai: ok"

#!/usr/bin/env bash
# soak.sh — start `specbed serve` on the bundled models with a drafter and
# run scripts/studies/soak.py against it (default 30 minutes, 32 clients, plus the
# trickling, stalled and reconnecting connections soak.py adds); the
# samples go to results/soak.csv. Not part of CI.
# usage: scripts/studies/soak.sh [MINUTES] [CLIENTS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
B="${BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" --target specbed -j"$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" >/dev/null
BIN="$B/specbed"
LOG="$ROOT/results/soak-server.log"
mkdir -p "$ROOT/results"
"$BIN" serve --model "$ROOT/models/tiny" --drafter draft --draft-model "$ROOT/models/tiny-draft" --depth 4 \
  --port 0 --max-running 16 --decode-log-interval 200 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  URL=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$LOG" | sed 's/listening on //' || true)
  [ -n "$URL" ] && break
  sleep 0.1
done
[ -n "$URL" ] || { echo "soak: the server did not start"; cat "$LOG"; exit 1; }
python3 "$ROOT/scripts/studies/soak.py" --url "$URL" --pid "$PID" --minutes "${1:-30}" --clients "${2:-32}" \
  --out "$ROOT/results/soak.csv"

#!/usr/bin/env bash
# Greedy and seeded sampled generation are identical across fresh processes.
# args: SPECBED_BIN ROOT BUILD_DIR
set -euo pipefail
BIN=$1 ROOT=$2 TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
M="$ROOT/tests/fixtures/qwen3-tied"
for args in "--temperature 0" "--temperature 0.9 --top-p 0.9 --seed 7"; do
  # shellcheck disable=SC2086
  for run in 1 2; do
    "$BIN" generate --model "$M" --prompt "int main(void) {" --max-tokens 48 --ignore-eos $args \
      --stats-json "$TMP/$run.json" > "$TMP/$run.txt" 2>/dev/null
  done
  grep -A100000 completion_ids "$TMP/1.json" > "$TMP/1.ids"
  grep -A100000 completion_ids "$TMP/2.json" > "$TMP/2.ids"
  [ "$(tr , "\n" < "$TMP/1.ids" | wc -l)" -ge 40 ] || { echo "FAIL: no ids for $args"; exit 1; }
  cmp "$TMP/1.ids" "$TMP/2.ids" || { echo "FAIL: processes differ for $args"; exit 1; }
  cmp "$TMP/1.txt" "$TMP/2.txt" || { echo "FAIL: text differs for $args"; exit 1; }
done
echo "cli_determinism: ok"

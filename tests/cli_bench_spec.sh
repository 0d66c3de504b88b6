#!/usr/bin/env bash
# bench_spec's table and CSV say what they hold: no header without values,
# a speedup that is the row's tokens/s over the row's own speculation-off
# tokens/s (both printed), and '-' (CSV: empty) at positions no draft
# reached rather than an acceptance of 0.00. The ngram drafter with
# --ngram-max 2 drafts at most 2 tokens (its cap is ceil(1 x match length)),
# so at depth 4 positions 3 and 4 are never drafted.
# args: SPECBED_BIN ROOT BUILD_DIR
set -uo pipefail
BIN=$1 ROOT=$2 TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BENCH="$(dirname "$BIN")/bench_spec"
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$BENCH" ] || fail "$BENCH is not built (cmake --build ... --target bench_spec)"
cd "$ROOT"
OMP_NUM_THREADS=1 timeout 120 "$BENCH" --model tests/fixtures/qwen3-tied --drafters ngram --ngram-max 2 \
  --workloads code --num-prompts 2 --max-tokens 24 --depths 2-4 --out "$TMP/spec.csv" >"$TMP/out" 2>"$TMP/err" ||
  fail "bench_spec exited $?: $(tail -5 "$TMP/err")"

grep -q "predicted survival\]" "$TMP/out" && fail "a [predicted survival] header without a confidence head: $(cat "$TMP/out")"
grep -q "off tok/s" "$TMP/out" || fail "no off tok/s column: $(cat "$TMP/out")"
rows=$(grep -cE '^ngram +fixed +[0-9]' "$TMP/out")
[ "$rows" = 3 ] || fail "want 3 ngram rows (depths 2-4), got $rows: $(cat "$TMP/out")"
# drafter schedule depth acc.len acc.rate tokens/s off-tok/s speedup unver. pos...
awk '$1 == "ngram" && $2 == "fixed" {
       s = $8; sub(/x$/, "", s)
       if (($6 / $7) - s > 0.006 || s - ($6 / $7) > 0.006) { print "speedup " $8 " is not " $6 " / " $7; bad = 1 }
       if ($3 == 4 && !($10 ~ /^[0-9.]+$/ && $12 == "-" && $13 == "-" && NF == 13)) { print "depth 4 positions: " $0; bad = 1 }
     }
     END { exit bad }' "$TMP/out" || fail "table: $(cat "$TMP/out")"

head -1 "$TMP/spec.csv" | grep -q '"tokens_per_s","off_tokens_per_s","speedup"' || fail "CSV header: $(head -1 "$TMP/spec.csv")"
# fields: 8 tokens/s, 9 off, 10 speedup, 13-16 pos1-4, 17-20 pred_survival1-4
awk -F, 'NR > 1 {
           if ((($8 / $9) - $10) ^ 2 > 1e-6) { print "speedup " $10 " is not " $8 " / " $9; bad = 1 }
           if ($4 == 4 && !($13 ~ /^[0-9.]+$/ && $15 == "\"\"" && $16 == "\"\"")) { print "depth 4 positions: " $0; bad = 1 }
           for (i = 17; i <= 20; i++) if ($i != "\"\"") { print "pred_survival without a confidence head: " $0; bad = 1 }
         }
         END { exit bad }' "$TMP/spec.csv" || fail "CSV: $(cat "$TMP/spec.csv")"
echo "cli_bench_spec: ok"

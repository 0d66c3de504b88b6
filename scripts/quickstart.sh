#!/usr/bin/env bash
# quickstart.sh — the README's main command: set up, build into build/, then
# a code-vs-prose draft-depth sweep of the bundled models served by
# `specbed serve` (canary on every cold launch, load per workload ×
# concurrency), then the report (gnuplot figures + report.md). Prints where
# the report is and the recommended depth per drafter, workload and
# concurrency. Budget: under 10 minutes on 2 cores.
#
# Knobs (environment): DRAFTERS (default: every drafter whose weights are
# present: ngram, draft, mtp, dspark), DEPTHS (0-7), CONCURRENCY (1,4),
# NUM_PROMPTS (8 per run), MAX_TOKENS (64), CANARY_S (3), OUT
# (results/quickstart).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh"
BIN="${BUILD_DIR:-$ROOT/build}/specbed"
MODEL="$ROOT/models/tiny"
if [ ! -f "$MODEL/config.json" ]; then
  # Until the bundled model lands, the random test fixture stands in.
  MODEL="$ROOT/tests/fixtures/qwen3-tied"
  echo "quickstart: models/tiny not present; using the random fixture $MODEL" >&2
fi

# The drafters that can run here. A drafter's extra serve arguments go in
# through {drafter_args}.
ARGS=()
avail=(ngram)
if [ -f "$ROOT/models/tiny-draft/config.json" ]; then
  avail+=(draft); ARGS+=(--drafter-args "draft=--draft-model $ROOT/models/tiny-draft")
elif [ "$MODEL" = "$ROOT/tests/fixtures/qwen3-tied" ]; then
  avail+=(draft); ARGS+=(--drafter-args "draft=--draft-model $MODEL")   # the fixture drafts for itself
fi
if grep -Eq '"num_nextn_predict_layers"[[:space:]]*:[[:space:]]*[1-9]' "$MODEL/config.json"; then avail+=(mtp); fi
if [ -f "$ROOT/models/tiny-dspark/config.json" ]; then
  avail+=(dspark); ARGS+=(--drafter-args "dspark=--draft-model $ROOT/models/tiny-dspark")
  ARGS+=(--drafter-config "$ROOT/models/tiny-dspark/config.json")   # the block size it would impose
fi
DRAFTERS="${DRAFTERS:-${avail[*]}}"
# One OpenMP thread per server: the load generator needs the other core, and
# on a shared 2-core machine a 2-thread server stalls at every barrier whose
# second thread is descheduled (runs 20-50x slower; bench/README.md).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
DEPTHS="${DEPTHS:-0-7}"
CONCURRENCY="${CONCURRENCY:-1,4}"
OUT="${OUT:-$ROOT/results/quickstart}"
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
echo "quickstart: sweeping depths $DEPTHS for drafters '$DRAFTERS' on code and prose, concurrency $CONCURRENCY" >&2
cd "$ROOT"
set +e
"$BIN" sweep \
  --launch "$BIN serve --model $MODEL --drafter {drafter} {drafter_args} --depth {depth} --port {port}" \
  --launch-off "$BIN serve --model $MODEL --port {port}" \
  --drafters "$(echo "$DRAFTERS" | tr ' ' ',')" "${ARGS[@]}" \
  --depths "$DEPTHS" --workloads code,prose --concurrency "$CONCURRENCY" \
  --num-prompts "${NUM_PROMPTS:-8}" --max-tokens "${MAX_TOKENS:-64}" --canary-duration "${CANARY_S:-3}" \
  --interval 1 --out "$OUT"
rc=$?
set -e
[ -s "$OUT/runs.csv" ] || { echo "quickstart: the sweep recorded no runs (exit $rc)" >&2; exit 1; }
"$BIN" report "$OUT"
echo "quickstart: report in $OUT/report/report.md (figures beside it)" >&2

#!/usr/bin/env bash
# quickstart.sh — the README's main command: set up, build into build/ (or
# $BUILD_DIR), then
#   1. a greedy code-vs-prose draft-depth sweep of the bundled models served
#      by `specbed serve`: a cost table per drafter measured in-process
#      (`specbed profile`, --profile-cmd), a canary pass over cold launches,
#      then REPEATS repeats that each visit every (drafter, depth) arm in a
#      shuffled order (warm-up excluded), within BUDGET seconds (the sweep
#      cuts prompts, then repeats, to fit, and says so);
#   2. a sampled arm: the draft-model drafter at temperature 0.8 (rejection
#      sampling), fewer depths, the same repeats;
#   3. the reports: 95% intervals, the decision per cell (a depth only when
#      its gain over speculation off excludes 1), predicted vs measured.
# Prints progress with the time left, where the reports are, and the
# decision per drafter, workload and concurrency. Exits 1 when a sweep had a
# failed launch or run (the reports still come, naming those cells). Budget: under 10 minutes on
# 2 cores (build included when it is incremental).
#
# Knobs (environment): DRAFTERS (default: every drafter whose weights are
# present: ngram, draft, mtp, dspark), DEPTHS (0,1,2,3,5,7), CONCURRENCY (1,4),
# REPEATS (5), BUDGET (seconds for the greedy sweep, 430), MAX_TOKENS (96),
# NUM_PROMPTS (default 4 x concurrency, at least 8), CANARY_S (2),
# ORDER_SEED (1), SAMPLED (1; 0 skips the sampled arm), OUT (results/quickstart),
# MODEL (models/tiny; e.g. models/tiny-moe with DRAFTERS=ngram,draft,mtp: the
# bundled DSpark drafter reads the dense target's taps).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
T_START=$(date +%s)
"$ROOT/scripts/build.sh"
BIN="${BUILD_DIR:-$ROOT/build}/specbed"
MODEL="${MODEL:-$ROOT/models/tiny}"
if [ ! -f "$MODEL/config.json" ]; then
  # Until the bundled model lands, the random test fixture stands in.
  MODEL="$ROOT/tests/fixtures/qwen3-tied"
  echo "quickstart: models/tiny not present; using the random fixture $MODEL" >&2
fi

# The drafters that can run here. A drafter's extra serve arguments go in
# through {drafter_args} (the same for `specbed profile`).
ARGS=()
BLOCK=()
avail=(ngram)
DRAFT_MODEL=""
if [ -f "$ROOT/models/tiny-draft/config.json" ]; then
  avail+=(draft); DRAFT_MODEL="$ROOT/models/tiny-draft"
elif [ "$MODEL" = "$ROOT/tests/fixtures/qwen3-tied" ]; then
  avail+=(draft); DRAFT_MODEL="$MODEL"   # the fixture drafts for itself
fi
[ -n "$DRAFT_MODEL" ] && ARGS+=(--drafter-args "draft=--draft-model $DRAFT_MODEL")
if grep -Eq '"num_nextn_predict_layers"[[:space:]]*:[[:space:]]*[1-9]' "$MODEL/config.json"; then avail+=(mtp); fi
if [ -f "$ROOT/models/tiny-dspark/config.json" ]; then
  # its tap of the target's final layer was trained after the final norm (models/README.md)
  avail+=(dspark); ARGS+=(--drafter-args "dspark=--draft-model $ROOT/models/tiny-dspark")
  BLOCK=(--drafter-config "$ROOT/models/tiny-dspark/config.json")   # the block size it would impose
  ARGS+=("${BLOCK[@]}")
fi
DRAFTERS="${DRAFTERS:-${avail[*]}}"
# One OpenMP thread per server: the load generator needs the other core, and
# on a shared 2-core machine a 2-thread server stalls at every barrier whose
# second thread is descheduled (runs 20-50x slower; bench/README.md).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
DEPTHS="${DEPTHS:-0,1,2,3,5,7}"
CONCURRENCY="${CONCURRENCY:-1,4}"
REPEATS="${REPEATS:-5}"
BUDGET="${BUDGET:-430}"
OUT="${OUT:-$ROOT/results/quickstart}"
rm -rf "$OUT" "$OUT-sampled"
mkdir -p "$(dirname "$OUT")"
cd "$ROOT"
LAUNCH="$BIN serve --model $MODEL --drafter {drafter} {drafter_args} --depth {depth} --port {port}"
# Speculation off (depth 0): sweep derives it from LAUNCH by dropping the
# drafter and depth flags (serve refuses --depth 0); it prints the command.
# real text (code): an MoE verify step reads the experts its rows route to (profile refuses hashed ids there)
PROFILE="$BIN profile --model $MODEL --drafter {drafter} {drafter_args} --out {out} --max-rows 256 --reps 9 --text code"
NP=()
[ -n "${NUM_PROMPTS:-}" ] && NP=(--num-prompts "$NUM_PROMPTS")
echo "quickstart: load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "quickstart: greedy sweep: depths $DEPTHS, drafters '$DRAFTERS', code and prose, concurrency $CONCURRENCY," \
     "$REPEATS repeats, budget ${BUDGET}s" >&2
set +e
"$BIN" sweep --launch "$LAUNCH" --profile-cmd "$PROFILE" \
  --drafters "$(echo "$DRAFTERS" | tr ' ' ',')" "${ARGS[@]}" \
  --depths "$DEPTHS" --workloads code,prose --concurrency "$CONCURRENCY" \
  --repeats "$REPEATS" --order-seed "${ORDER_SEED:-1}" --budget "$BUDGET" "${NP[@]}" \
  --max-tokens "${MAX_TOKENS:-96}" --canary-duration "${CANARY_S:-2}" --interval 1 --out "$OUT"
rc=$?
set -e
[ -s "$OUT/runs.csv" ] || { echo "quickstart: the sweep recorded no runs (exit $rc)" >&2; exit 1; }
# the sweep exits 1 when a launch or a run failed; the report names those cells and decides none of them
[ "$rc" = 0 ] || echo "quickstart: WARNING: the greedy sweep exited $rc (a launch or a run failed: its summary line" \
  "above says which); the report leaves those cells out" >&2

if [ "${SAMPLED:-1}" = 1 ] && [ -n "$DRAFT_MODEL" ]; then
  echo "quickstart: sampled arm: draft drafter, temperature 0.8, depths 0,1,3, $REPEATS repeats" \
       "(elapsed $(( $(date +%s) - T_START )) s)" >&2
  set +e
  "$BIN" sweep --launch "$LAUNCH" --profile-cmd "$PROFILE" \
    --drafters draft --drafter-args "draft=--draft-model $DRAFT_MODEL" "${BLOCK[@]}" \
    --depths 0,1,3 --workloads code,prose --concurrency 1 --repeats "$REPEATS" --order-seed "${ORDER_SEED:-1}" \
    --temperature 0.8 --seed 7 --budget 100 --max-tokens "${MAX_TOKENS:-96}" --canary-duration "${CANARY_S:-2}" \
    --interval 1 --out "$OUT-sampled"
  rc2=$?
  set -e
  [ "$rc2" = 0 ] || echo "quickstart: WARNING: the sampled sweep exited $rc2 (see its summary line above)" >&2
  [ "$rc" = 0 ] && rc=$rc2
fi

"$BIN" report "$OUT"
[ -s "$OUT-sampled/runs.csv" ] && "$BIN" report "$OUT-sampled"
echo "quickstart: load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(( $(date +%s) - T_START )) s in all" >&2
echo "quickstart: report in $OUT/report/report.md (figures beside it)" >&2
[ -s "$OUT-sampled/report/report.md" ] && echo "quickstart: sampled arm: $OUT-sampled/report/report.md" >&2
exit "$rc"

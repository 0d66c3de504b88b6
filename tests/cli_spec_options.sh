#!/usr/bin/env bash
# Speculation options that the chosen drafter or verify schedule would
# ignore are usage errors (exit 2, a message naming the option) in every
# command that takes them — generate, serve, profile, bench_spec — before
# anything loads; the combinations that are read still run. One check
# (spec/spec_cli.c) makes the decision for all four.
# args: SPECBED_BIN ROOT BUILD_DIR
set -uo pipefail
BIN=$1 ROOT=$2 TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BENCH="$(dirname "$BIN")/bench_spec"
FIX="$ROOT/tests/fixtures/qwen3-tied"
DSF="$ROOT/tests/fixtures/dspark-tiny-final"   # taps the fixture target's final layer
fail=0
[ -x "$BENCH" ] || { echo "FAIL: $BENCH is not built (cmake --build ... --target bench_spec)"; exit 1; }

# expect EXIT_CODE PATTERN -- PROGRAM args...
expect() {
  local want=$1 pat=$2; shift 3
  OMP_NUM_THREADS=1 timeout 60 "$@" > "$TMP/out" 2> "$TMP/err"
  local rc=$?
  if [ "$rc" != "$want" ] || { [ -n "$pat" ] && ! grep -q -- "$pat" "$TMP/err"; } ||
     grep -q -E "Sanitizer|runtime error" "$TMP/err"; then
    echo "FAIL: ${*#"$ROOT"/} -> rc $rc (want $want, stderr matching '$pat'), stderr:"; sed 's/^/    /' "$TMP/err"
    fail=1
  fi
}

G=("$BIN" generate --model "$FIX" --prompt x --max-tokens 4)
S=("$BIN" serve --model "$FIX" --port 0)
P=("$BIN" profile --model "$FIX" --out "$TMP/cost.json" --max-rows 2 --reps 1 --history 8)
B=("$BENCH" --model "$FIX" --num-prompts 1 --max-tokens 4 --workloads code)

for cmd in G S; do
  declare -n C=$cmd
  expect 2 "\-\-depth needs a drafter" -- "${C[@]}" --depth 3
  expect 2 "\-\-depth needs a drafter" -- "${C[@]}" --drafter none --depth 3
  expect 2 "\-\-p-min is read only by the threshold" -- "${C[@]}" --drafter ngram --p-min 0.3
  expect 2 "\-\-p-min is read only by the threshold" -- "${C[@]}" --drafter ngram --verify-schedule adaptive --p-min 0.3
  expect 2 "\-\-adaptive-alpha is read only by the adaptive" -- "${C[@]}" --drafter ngram --adaptive-alpha 0.5
  expect 2 "\-\-cost-table is read only by the confidence and adaptive" -- "${C[@]}" --drafter ngram \
    --verify-schedule threshold --cost-table "$TMP/none.json"
  expect 2 "other than fixed needs a drafter" -- "${C[@]}" --verify-schedule threshold
  expect 2 "\-\-draft-model is read only by the draft drafter and dspark; with drafter 'ngram'" -- \
    "${C[@]}" --drafter ngram --draft-model "$FIX"
  expect 2 "\-\-draft-model is read only by the draft drafter and dspark; with drafter 'mtp'" -- \
    "${C[@]}" --drafter mtp --draft-model "$FIX"
  expect 2 "\-\-draft-model is read only" -- "${C[@]}" --draft-model "$FIX"
  expect 2 "the draft drafter needs \-\-draft-model" -- "${C[@]}" --drafter draft
  expect 2 "the dspark drafter needs \-\-draft-model" -- "${C[@]}" --drafter dspark
  expect 2 "ngram-\* options are read only by the ngram drafter" -- "${C[@]}" --drafter draft --draft-model "$FIX" \
    --ngram-max 2
  expect 2 "unknown drafter 'nope'" -- "${C[@]}" --drafter nope
  expect 2 "\-\-dspark-final-tap is read only by the dspark drafter; with drafter 'ngram'" -- "${C[@]}" \
    --drafter ngram --dspark-final-tap raw
  expect 2 "\-\-dspark-final-tap must be raw|normed" -- "${C[@]}" --drafter dspark --draft-model "$DSF" \
    --dspark-final-tap both
  unset -n C
done
expect 2 "\-\-draft-model is read only by the draft drafter and dspark; with drafter 'ngram'" -- \
  "${P[@]}" --drafter ngram --draft-model "$FIX"
expect 2 "\-\-draft-model is read only" -- "${P[@]}" --draft-model "$FIX"
expect 2 "the draft drafter needs \-\-draft-model" -- "${P[@]}" --drafter draft
expect 2 "\-\-dspark-final-tap is read only by the dspark drafter" -- "${P[@]}" --drafter draft --draft-model "$FIX" \
  --dspark-final-tap normed
# bench_spec: lists of drafters and schedules; --dspark-model is dspark's checkpoint
expect 2 "\-\-draft-model is read only by the draft drafter (dspark's checkpoint is \-\-dspark-model)" -- \
  "${B[@]}" --drafters ngram,mtp --draft-model "$FIX"
expect 2 "\-\-dspark-model is read only by the dspark drafter" -- "${B[@]}" --drafters ngram --dspark-model "$FIX"
expect 2 "the draft drafter needs \-\-draft-model" -- "${B[@]}" --drafters ngram,draft
expect 2 "ngram-\* options are read only" -- "${B[@]}" --drafters mtp --ngram-spec-factor 2
expect 2 "\-\-cost-table is read only" -- "${B[@]}" --drafters ngram --schedules fixed,threshold \
  --cost-table "$TMP/none.json"
expect 2 "\-\-depths needs a drafter" -- "${B[@]}" --drafters none --depths 1-2
expect 2 "unknown verify schedule 'bogus'" -- "${B[@]}" --drafters ngram --schedules fixed,bogus
expect 2 "\-\-dspark-final-tap is read only by the dspark drafter" -- "${B[@]}" --drafters ngram,mtp \
  --dspark-final-tap raw
# a final-layer tap: refused without --dspark-final-tap (DeepSpec's reason), drafted with it
expect 1 "assert_no_final_target_layer" -- "${G[@]}" --drafter dspark --draft-model "$DSF" --depth 3
expect 1 "would be ignored" -- "${G[@]}" --drafter dspark --draft-model "$ROOT/tests/fixtures/dspark-tiny" \
  --dspark-final-tap raw --depth 3

# what is read still runs
cd "$ROOT"
expect 0 "accept length" -- "${G[@]}" --drafter ngram --depth 2 --verify-schedule threshold --p-min 0.3 --ngram-max 2
expect 0 "" -- "${P[@]}" --drafter draft --draft-model "$FIX"
expect 0 "" -- "${B[@]}" --drafters ngram,none --depths 1 --schedules fixed,threshold
expect 0 "accept length" -- "${G[@]}" --drafter dspark --draft-model "$DSF" --dspark-final-tap raw --depth 3
expect 0 "" -- "${B[@]}" --drafters dspark --dspark-model "$DSF" --dspark-final-tap normed --depths 2

[ $fail = 0 ] && echo "cli_spec_options: ok"
exit $fail

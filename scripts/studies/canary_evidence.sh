#!/usr/bin/env bash
# canary_evidence.sh — the canary's first validation benchmark, one fault
# profile only; scripts/studies/canary_power.sh supersedes it (every fault kind,
# false alarms, time from /health, the collision power curve; bench/RECORD.md
# "Canary power"). Kept for a quick check:
# N cold launches of `specbed serve --inject-fault` (the default fault
# profile) and N clean cold launches, each checked by `specbed canary
# --launch` with thresholds calibrated from one clean run first. Prints, per
# launch, the verdict, the time of the first flag and which check raised it,
# and the loaded intervals judged; then the totals. Not a test: it prints
# numbers (and keeps every run's evidence under OUT).
# usage: scripts/studies/canary_evidence.sh [N=20] [DURATION_S=6]
#   env: BIN (default build/specbed), MODEL (tests/fixtures/qwen3-tied),
#        DEPTH (4), OUT (results/canary-evidence)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
N="${1:-20}"; DUR="${2:-6}"
BIN="${BIN:-$ROOT/build/specbed}"
MODEL="${MODEL:-$ROOT/tests/fixtures/qwen3-tied}"
DEPTH="${DEPTH:-4}"
OUT="${OUT:-$ROOT/results/canary-evidence}"
DRAFT="${DRAFT_ARGS:---drafter draft --draft-model $MODEL}"
rm -rf "$OUT"; mkdir -p "$OUT"
cd "$ROOT"
SERVE="$BIN serve --model $MODEL $DRAFT --depth $DEPTH --port {port}"

# calibration: one clean cold launch with the field's defaults
"$BIN" canary --launch "$SERVE" --duration "$DUR" --out "$OUT/calib" >"$OUT/calib.txt" 2>&1
echo "calibration run: $(grep '^canary \(pass\|FAIL\)' "$OUT/calib.txt")"
"$BIN" canary --calibrate "$OUT/calib" | sed 's/^/  /'

field() {   # field FILE KEY → the number (or null) after "KEY":
  sed -n "s/.*\"$2\":[[:space:]]*\\([^,]*\\),*\$/\\1/p" "$1" | head -1
}
run_set() {   # run_set NAME EXTRA_SERVE_ARGS
  local name="$1" extra="$2" fails=0 latency="" judged=0 clean=0 falarm=0
  for i in $(seq 1 "$N"); do
    local d="$OUT/$name-$i"
    "$BIN" canary --calibrate "$OUT/calib" --launch "$SERVE $extra" --duration "$DUR" --out "$d" >"$d.txt" 2>&1
    local rc=$?
    local j="$d/canary.json"
    [ -s "$j" ] || { echo "$name $i: could not run (exit $rc)"; continue; }
    local ff fi fc ji ci first
    ff=$(field "$j" first_flag_s); fi=$(field "$j" first_interval_flag_s); fc=$(field "$j" first_content_flag_s)
    ji=$(field "$j" judged_intervals); ci=$(field "$j" clean_intervals)
    first=$(grep -m1 '^- [^n]' "$d/evidence.txt" | cut -c3-90)
    printf '%s %2d: exit %d  first flag %-8s (interval %-8s content %-8s) intervals judged %s, clean before a flag %s  %s\n' \
      "$name" "$i" "$rc" "$ff" "$fi" "$fc" "$ji" "$ci" "$first"
    judged=$((judged + ji)); clean=$((clean + ci))
    if [ "$rc" = 1 ]; then fails=$((fails + 1)); latency="$latency $ff"; fi
    if [ "$name" = clean ] && [ "$rc" != 0 ]; then falarm=$((falarm + 1)); fi
  done
  echo "$name: $fails of $N launches failed the canary; intervals judged $judged, clean before any flag $clean"
  [ -n "$latency" ] && echo "$name: first-flag times (s):$latency"
}
run_set fault "--inject-fault"
run_set clean ""

#!/usr/bin/env bash
# canary_power.sh — the canary's proven power (bench/RECORD.md, "Canary
# power"): for each server fault kind (spec/fault.h), cold launches with the
# fault and clean cold launches, each judged by `specbed canary --launch`;
# detection rate, false alarms, seconds from the first /health 200 to the
# first flag, the check that fired first; then the collision power curve
# (detection and the lowest judged interval accept length against p at
# depths 3, 5 and 7) and the interval signature alone (content checks off)
# at the incident's rate; then the main table again on the bundled trained
# models (models/tiny drafted by models/tiny-draft). Not a test: it prints
# tables (Markdown) and keeps every launch's evidence under OUT.
#
# usage: scripts/studies/canary_power.sh [N=20] [NP=5] [DURATION_S=6]
#   N   launches per fault kind and clean (main table, depth 5)
#   NP  launches per (depth, p) cell of the power curve
#   NT  launches per fault kind and clean on models/tiny (env, default 10; 0 skips)
#   env: BIN (build/specbed), MODEL (tests/fixtures/qwen3-tied: the target
#        drafting for itself, so every clean draft is accepted), OUT
#        (results/canary-power), PS (power-curve p values), P_INCIDENT (the
#        p whose corrupted-request share is nearest the incident's 39/1000 at
#        depth 5; measured here, see the power table), NI (interval-only
#        launches, 20)
#        KINDS (main-table kinds, default "collision flat nondet window batch
#        clean"; batch = collision,scope=batch: the whole decode batch of the
#        step hit, as a kernel-wide transient collision would),
#        TINY_KINDS (the bundled-model kinds, default "collision flat nondet
#        window clean": window needs a target that copies, which models/tiny
#        does since its copy stage),
#        TABLES_ONLY=1: launch nothing, print the tables and redraw the figure
#        from an existing OUT/launches.csv
# Needs jq; gnuplot for the figure (scripts/studies/canary_power_plot.sh; skipped without it).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
N="${1:-20}"; NP="${2:-5}"; DUR="${3:-6}"
BIN="${BIN:-$ROOT/build/specbed}"
MODEL="${MODEL:-$ROOT/tests/fixtures/qwen3-tied}"
OUT="${OUT:-$ROOT/results/canary-power}"
PS="${PS:-0.01 0.015 0.03 0.1 0.3 1}"
P_INCIDENT="${P_INCIDENT:-0.015}"
NI="${NI:-20}"
NT="${NT:-10}"
KINDS="${KINDS:-collision flat nondet window batch clean}"
TINY_KINDS="${TINY_KINDS:-collision flat nondet window clean}"
TINY="$ROOT/models/tiny"; TINY_DRAFT="$ROOT/models/tiny-draft"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
command -v jq >/dev/null || { echo "canary_power: needs jq" >&2; exit 2; }
cd "$ROOT"
T0=$(date +%s)
CSV="$OUT/launches.csv"
TM="$MODEL"; TD="$MODEL"; CAL=calib   # target, draft and calibration prefix of the launches being made
if [ -z "${TABLES_ONLY:-}" ]; then
rm -rf "$OUT"; mkdir -p "$OUT"
echo "# canary power: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uptime | sed 's/^ *//')" | tee "$OUT/tables.md"
echo "# BIN=$BIN MODEL=$MODEL N=$N NP=$NP DURATION=$DUR PS='$PS' P_INCIDENT=$P_INCIDENT NI=$NI NT=$NT" | tee -a "$OUT/tables.md"
serve() { echo "$BIN serve --model $TM --drafter draft --draft-model $TD --depth $1 --port {port}"; }

# Calibration: one clean cold launch per depth, the field's defaults, then
# --calibrate reads it (the random fixture loops and cannot copy, so those
# checks calibrate themselves out; spec on/off stays at "any mismatch").
calibrate() {   # calibrate DEPTH: one clean launch of the current target/draft into $OUT/$CAL-dDEPTH
  local d="$1"
  "$BIN" canary --launch "$(serve "$d")" --duration "$DUR" --out "$OUT/$CAL-d$d" >"$OUT/$CAL-d$d.txt" 2>&1
  "$BIN" canary --calibrate "$OUT/$CAL-d$d" >"$OUT/$CAL-d$d.thr" 2>&1
  echo "# $CAL depth $d: $(grep 'accept length:' "$OUT/$CAL-d$d.thr" | head -1)" | tee -a "$OUT/tables.md"
}
for d in 3 5 7; do calibrate "$d"; done

echo "set,kind,depth,p,i,exit,verdict,first_check,first_flag_since_health_s,first_interval_flag_s,accept_len_min,threshold,judged,flagged,spec_pairs,spec_mismatch_frac,health_s" >"$CSV"
# one SET KIND DEPTH P I FAULT_SPEC EXTRA_CANARY_ARGS: one cold launch, one CSV row
one() {
  local set="$1" kind="$2" d="$3" p="$4" i="$5" spec="$6" extra="$7"
  local dir="$OUT/$set/$kind-d$d-p$p-$i" fault=""
  [ -n "$spec" ] && fault="--inject-fault $spec"
  mkdir -p "$OUT/$set"
  # shellcheck disable=SC2086
  "$BIN" canary --calibrate "$OUT/$CAL-d$d" --launch "$(serve "$d") $fault" --duration "$DUR" --out "$dir" $extra \
      >"$dir.txt" 2>&1
  local rc=$? j="$dir/canary.json"
  if [ ! -s "$j" ]; then echo "$set,$kind,$d,$p,$i,$rc,error,,,,,,,,,," >>"$CSV"; return; fi
  jq -r --arg set "$set" --arg kind "$kind" --arg d "$d" --arg p "$p" --arg i "$i" --arg rc "$rc" '
    def n: if . == null then "" else tostring end;
    . as $r | ((([$r.reasons[] | select(.first_s != null)] | sort_by(.first_s) | .[0].check) // $r.reasons[0].check) // "") as $first |
    [$set, $kind, $d, $p, $i, $rc, .verdict, $first, (.first_flag_since_health_s | n),
     (.first_interval_flag_s | n), (.observed.accept_len_min | n), (.thresholds.accept_len | n),
     (.judged_intervals | n), (.flagged_intervals | length | n), (.observed.n_spec | n),
     (.observed.spec_mismatch_frac | n), (.health_since_launch_s | n)] | join(",")' "$j" >>"$CSV"
}

# 1. main table, depth 5: each fault kind's default profile, and clean
main_one() {   # main_one KIND I
  case "$1" in
    collision) one main collision 5 0.25 "$2" "collision" "" ;;
    batch) one main batch 5 0.25 "$2" "collision,scope=batch" "" ;;
    clean) one main clean 5 - "$2" "" "" ;;
    *) one main "$1" 5 - "$2" "$1" "" ;;
  esac
}
for i in $(seq 1 "$N"); do for k in $KINDS; do main_one "$k" "$i"; done; done
# 2. collision power curve: p × depth
for d in 3 5 7; do for p in $PS; do for i in $(seq 1 "$NP"); do
  one power collision "$d" "$p" "$i" "collision,p=$p" ""
done; done; done
# 3. the interval signature alone at the incident's rate, depth 5
for i in $(seq 1 "$NI"); do
  one ivonly collision 5 "$P_INCIDENT" "$i" "collision,p=$P_INCIDENT" "--no-content-checks"
done
# 4. the main table on the bundled trained models (not self-drafting: a
# clean draft is not always accepted, so the threshold sits lower)
if [ "$NT" -gt 0 ] && [ -d "$TINY" ] && [ -d "$TINY_DRAFT" ]; then
  TM="$TINY"; TD="$TINY_DRAFT"; CAL=calib-tiny
  calibrate 5
  for i in $(seq 1 "$NT"); do for k in $TINY_KINDS; do
    case "$k" in
      collision) one tiny collision 5 0.25 "$i" "collision" "" ;;
      clean) one tiny clean 5 - "$i" "" "" ;;
      *) one tiny "$k" 5 - "$i" "$k" "" ;;
    esac
  done; done
fi
T1=$(date +%s)
echo "Wall time $((T1 - T0)) s; $(uptime | sed 's/^ *//')" | tee -a "$OUT/tables.md"
fi   # TABLES_ONLY

# main_table SET TITLE: one row per fault kind of the launches of SET
main_table() {
echo
echo "| $2 | launches | canary failed | exit 3 (inconclusive) | first flag after first /health 200, s (min / median / max) | check that fired first | interval signature fired (launches; intervals judged) | lowest judged interval accept length per launch (min / max) | threshold |"
echo "|---|---|---|---|---|---|---|---|---|"
for k in collision batch flat nondet window clean; do
  awk -F, -v s="$1" -v k="$k" '$1==s && $2==k' "$CSV" | sort -t, -k9,9g | awk -F, -v k="$k" '
    { n++; if ($6==1) { f++; if ($9!="") t[++nt]=$9; ch[$8]++ } if ($6==3) inc++; if ($14>0) iv++; jd+=$13;
      if ($11!="") { na++; if (lo=="" || $11+0<lo+0) lo=$11; if (hi=="" || $11+0>hi+0) hi=$11 } thr=$12 }
    END {
      if (!n) exit;
      med = nt ? t[int((nt+1)/2)] : "";
      s = ""; for (c in ch) s = s (s?", ":"") c " " ch[c];
      printf "| %s | %d | **%d of %d** | %d | %s | %s | %d of %d (%d judged) | %s / %s | %s |\n", (k=="clean"?"none (clean)":k=="batch"?"`collision,scope=batch`":"`" k "`"), n, f, n, inc,
        nt ? sprintf("%.2f / %.2f / %.2f", t[1], med, t[nt]) : "—", s ? s : "—", iv, n, jd, na ? sprintf("%.3f", lo) : "—",
        na ? sprintf("%.3f", hi) : "—", thr == "" ? "—" : sprintf("%.3f", thr) }'
done
}

# ---- tables ----
{
main_table main "fault (fixture, depth 5)"
echo
echo "Collision power curve (fault \`collision,p=P\`, $NP launches per cell, canary with every check; the interval columns are the same runs' interval check, which does not depend on the content checks)"
echo
echo "| depth | p | corrupted requests per 1,000 (measured: load completions ≠ spec-off reference) | canary detected | interval signature fired | lowest judged interval accept length (min over launches) | threshold (calibrated) | clean accept length (calibration minimum) |"
echo "|---|---|---|---|---|---|---|---|"
for d in 3 5 7; do
  cmin=$(jq -r '.observed.accept_len_min' "$OUT/calib-d$d/canary.json")
  for p in $PS; do
    awk -F, -v d="$d" -v p="$p" -v cmin="$cmin" '$1=="power" && $3==d && $4==p {
        n++; if ($6==1) f++; if ($14>0) iv++; if ($16!="") { sh+=$16; ns++ }
        if ($11!="" && (lo=="" || $11+0<lo+0)) lo=$11; thr=$12 }
      END { printf "| %s | %s | %.0f | %d of %d | %d of %d | %s | %.3f | %.3f |\n", d, p, ns ? 1000*sh/ns : 0, f, n, iv, n,
              lo==""?"—":sprintf("%.3f", lo), thr, cmin }' "$CSV"
  done
done
echo
echo "Interval signature alone (\`--no-content-checks\`), depth 5, \`collision,p=$P_INCIDENT\`:"
echo
awk -F, '$1=="ivonly" { n++; if ($6==1) f++; if ($6==3) inc++; if ($6==0) ps++;
    if ($11!="") { if (lo=="" || $11+0<lo+0) lo=$11; if (hi=="" || $11+0>hi+0) hi=$11 } thr=$12 }
  END { printf "%d of %d launches failed (interval flagged), %d passed, %d inconclusive; lowest judged interval accept length per launch %.3f … %.3f against threshold %.3f.\n", f, n, ps, inc, lo, hi, thr }' "$CSV"
if [ "$NT" -gt 0 ]; then
  echo
  echo "The bundled trained models (models/tiny drafted by models/tiny-draft, depth 5, thresholds from one clean launch; $(grep 'accept length:' "$OUT/calib-tiny-d5.thr" | head -1)):"
  main_table tiny "fault (models/tiny, depth 5)"
fi
} | tee "$OUT/tables-summary.md"

# ---- figure ----
"$ROOT/scripts/studies/canary_power_plot.sh" "$OUT" "$P_INCIDENT" || echo "canary_power: no figure" >&2
echo "every launch: $CSV; evidence under $OUT/{main,power,ivonly}/"

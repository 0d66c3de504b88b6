#!/usr/bin/env bash
# bench_simulate.sh — `specbed simulate` through the binary: the outputs a
# grid writes (simulate.csv rows, simulate.json decisions and the load where
# speculation stops paying, the markdown on stdout), byte-identical reruns
# for one seed, phased and per-replica loads, --compare on a small sweep
# directory, and bad input refused with exit 2 and a message naming it.
# usage: bench_simulate.sh SPECBED ROOT WORKDIR   (ctest passes these)
set -euo pipefail
BIN="$1"; ROOT="$2"; WORK="$3/bench_simulate"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "bench_simulate: FAIL: $*" >&2; exit 1; }
if ! "$BIN" simulate --help >"$WORK/help.txt" 2>&1; then
  echo "bench_simulate: skipped: this specbed has no simulate command ($(head -1 "$WORK/help.txt"))" >&2
  exit 77
fi
grep -q "usage: specbed simulate" "$WORK/help.txt" || fail "--help prints no usage"
cd "$ROOT"

cat >"$WORK/accept.json" <<'EOF'
{"code": [0.8, 0.62, 0.5, 0.4], "prose": {"rates": [0.6, 0.35], "proposal_rate": 0.9}}
EOF
# a GPU-like verify cost: 8 rows cost 1.2x one row
cat >"$WORK/cost.json" <<'EOF'
{"rows": [1, 8, 64, 512], "seconds_per_step": [0.020, 0.024, 0.040, 0.210], "draft_seconds_per_token": 0.0005}
EOF

run() { timeout 120 "$BIN" simulate "$@"; }
run --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --depths 0-2 --replicas 1,2 \
    --concurrency 1,4 --requests 60 --repeats 3 --slo-tpot-ms 15 --out "$WORK/a" >"$WORK/a.txt" 2>"$WORK/a.err" ||
  fail "simulate exited $?: $(tail -5 "$WORK/a.err")"
[ -s "$WORK/a/simulate.csv" ] && [ -s "$WORK/a/simulate.json" ] && [ -s "$WORK/a/simulate.md" ] || fail "missing outputs"
rows=$(($(wc -l <"$WORK/a/simulate.csv") - 1))
[ "$rows" = 24 ] || fail "simulate.csv has $rows rows, want 2 workloads x 2 replicas x 2 loads x 3 depths = 24"
head -1 "$WORK/a/simulate.csv" | grep -q '"output_throughput","output_throughput_ci95_lo"' || fail "CSV header lacks vLLM names with intervals"
for k in mean_ttft_ms p99_ttft_ms mean_tpot_ms p99_itl_ms mean_e2el_ms request_goodput specbed_acceptance_length; do
  head -1 "$WORK/a/simulate.csv" | grep -q "\"$k\"" || fail "CSV header lacks $k"
done
grep -q '"decisions"' "$WORK/a/simulate.json" && grep -q '"recommended_depth"' "$WORK/a/simulate.json" ||
  fail "simulate.json has no decisions"
grep -q '"speculation_stops_paying"' "$WORK/a/simulate.json" || fail "simulate.json lacks speculation_stops_paying"
grep -Eq '"objective":[[:space:]]*"request_goodput"' "$WORK/a/simulate.json" || fail "an SLO should make goodput the objective"
grep -q '^| replicas | load | depth |' "$WORK/a.txt" && grep -q '^### Decision per load' "$WORK/a.txt" ||
  fail "stdout has no markdown tables"
grep -Eq 'speculation (stops paying at|pays at every load simulated)' "$WORK/a.txt" || fail "stdout does not say where speculation stops paying"

# an open-loop rate without an SLO is judged by latency, and the output says so (issue 37): there every
# depth that keeps up serves the offered load, so by output throughput depth 0 was "within the best" at
# every load and speculation "paid at: none" while the table showed TPOT falling. The decision must be
# the table's own best (lowest mean TPOT) and numbers are printed without exponents.
run --accept "$WORK/accept.json" --workloads code --cost-table "$WORK/cost.json" --depths 0-3 --rate 1,2 \
    --duration 60 --repeats 3 --out "$WORK/o" >"$WORK/o.txt" 2>"$WORK/o.err" || fail "open loop exited $?: $(tail -3 "$WORK/o.err")"
grep -Eq '"objective":[[:space:]]*"mean_tpot_ms"' "$WORK/o/simulate.json" || fail "open loop without an SLO is not judged by mean TPOT"
grep -q 'Objective mean_tpot_ms: the default under an open-loop rate without an SLO' "$WORK/o.txt" ||
  fail "the decisions do not say which objective they used and why"
grep -q 'it pays at: r=1, r=2' "$WORK/o.txt" || fail "speculation does not pay where TPOT falls: $(grep 'pays' "$WORK/o.txt")"
python3 - "$WORK/o/simulate.csv" "$WORK/o/simulate.json" <<'PY' || fail "a decision does not match the table's lowest mean TPOT"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for d in json.load(open(sys.argv[2]))["decisions"]:
    cells = [r for r in rows if r["load"] == d["load"] and int(r["replicas"]) == d["replicas"]]
    best = min(cells, key=lambda r: float(r["mean_tpot_ms"]))
    assert int(best["depth"]) == d["best_depth"], (d, best["depth"])
    assert d["best_depth"] > 0, d
PY
grep -Eq '[0-9]e[+-][0-9]' "$WORK/o.txt" && fail "a table number is printed with an exponent: $(grep -E '[0-9]e[+-][0-9]' "$WORK/o.txt" | head -2)"

# --token-overhead-ms: at depth 0 a decode step commits one token per request, so 2 ms per token
# adds exactly 2 ms to every step and to the mean TPOT (one client, nothing else in the batch);
# the config records it
for t in 0 2; do
  run --accept "$WORK/accept.json" --workloads code --cost-table "$WORK/cost.json" --depths 0 --concurrency 1 \
      --requests 10 --repeats 1 --token-overhead-ms $t --quiet --out "$WORK/tok$t" >/dev/null 2>"$WORK/tok.err" ||
    fail "--token-overhead-ms $t exited $?: $(tail -3 "$WORK/tok.err")"
done
python3 - "$WORK/tok0/simulate.csv" "$WORK/tok2/simulate.csv" <<'PY' || fail "--token-overhead-ms 2 did not add 2 ms to the mean TPOT"
import csv, sys
a, b = (float(next(csv.DictReader(open(f)))["mean_tpot_ms"]) for f in sys.argv[1:3])
assert abs(b - a - 2.0) < 1e-6, (a, b)
PY
grep -Eq '"token_overhead_ms":[[:space:]]*2' "$WORK/tok2/simulate.json" || fail "simulate.json lacks token_overhead_ms"

# one seed, one answer
run --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --depths 0-2 --replicas 1,2 \
    --concurrency 1,4 --requests 60 --repeats 3 --slo-tpot-ms 15 --out "$WORK/b" >/dev/null 2>&1 || fail "rerun failed"
cmp -s "$WORK/a/simulate.csv" "$WORK/b/simulate.csv" || fail "the same seed gave different numbers"
run --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --depths 0-2 --replicas 1,2 \
    --concurrency 1,4 --requests 60 --repeats 3 --slo-tpot-ms 15 --seed 9 --out "$WORK/c" >/dev/null 2>&1 || fail "seed 9 failed"
! cmp -s "$WORK/a/simulate.csv" "$WORK/c/simulate.csv" || fail "another seed gave the same numbers"

# phased bursty traffic, loads per replica, least-loaded
run --accept "$WORK/accept.json" --workloads code --cost-table "$WORK/cost.json" --depths 0,3 --replicas 1,4 \
    --phases "2:rate=5,2:rate=20" --profile "3s@r2" --per-replica --burstiness 0.5 --balance least-loaded \
    --repeats 2 --quiet --out "$WORK/p" >"$WORK/p.txt" 2>"$WORK/p.err" || fail "phased run exited $?: $(tail -3 "$WORK/p.err")"
rows=$(($(wc -l <"$WORK/p/simulate.csv") - 1))
[ "$rows" = 8 ] || fail "phased simulate.csv has $rows rows, want 1 x 2 x 2 x 2 = 8"
grep -q '2s@r5,2s@r20/replica' "$WORK/p/simulate.csv" || fail "phased load label missing"
grep -q '^| drafter | workload | replicas | load | best depth' "$WORK/p.txt" || fail "--quiet should still print the decisions"

# --compare against a small sweep directory (runs.csv only: lengths from the workload file)
W=code; [ -f workloads/code.jsonl ] || W="$ROOT/tests/fixtures/workloads/mixed.jsonl"
mkdir -p "$WORK/sweep"
cat >"$WORK/sweep/runs.csv" <<EOF
drafter,depth,workload,concurrency,repeat,dir,completed,output_throughput,request_throughput,total_output_tokens,mean_ttft_ms,mean_tpot_ms,mean_e2el_ms,spec_decode_acceptance_length,spec_decode_acceptance_rate,pos_0,pos_1
none,0,$W,1,0,none-d0/x,8,900,14,512,15,1.0,80,,,,
ngram,2,$W,1,0,ngram-d2/x,8,1200,18,512,15,0.7,60,2.1,55,0.62,0.48
EOF
run --sweep "$WORK/sweep" --cost-table "$WORK/cost.json" --compare --repeats 3 --out "$WORK/cmp" >"$WORK/cmp.txt" 2>&1 ||
  fail "--compare exited $?: $(tail -3 "$WORK/cmp.txt")"
grep -q 'within 10%' "$WORK/cmp.txt" && [ -s "$WORK/cmp/compare.csv" ] && [ -s "$WORK/cmp/compare.md" ] || fail "--compare wrote no comparison"
[ "$(($(wc -l <"$WORK/cmp/compare.csv") - 1))" = 2 ] || fail "compare.csv should have 2 cells"
# --step-overhead-ms auto: the host time per step calibrated on the depth-0 cell makes its simulated
# TPOT the measured 1.0 ms (TPOT is linear in the overhead there: one step per token)
printf '{"rows": [1, 8, 64, 512], "seconds_per_step": [0.0002, 0.0004, 0.002, 0.012]}' >"$WORK/fast.json"
run --sweep "$WORK/sweep" --cost-table "$WORK/fast.json" --compare --step-overhead-ms auto --repeats 3 \
    --out "$WORK/cmp2" >"$WORK/cmp2.txt" 2>&1 || fail "--step-overhead-ms auto exited $?: $(tail -3 "$WORK/cmp2.txt")"
grep -q 'host overhead, per workload, fitted to its depth-0 cells' "$WORK/cmp2/compare.md" || fail "auto overhead not reported"
awk -F, '$1 == "\"none\"" { t = $9 } END { exit !(t > 0.97 && t < 1.03) }' "$WORK/cmp2/compare.csv" ||
  fail "depth-0 simulated TPOT with auto overhead is not the measured 1.0 ms: $(grep none "$WORK/cmp2/compare.csv")"
grep -q 'within 10% or inside the measured 95% interval' "$WORK/cmp2/compare.md" || fail "interval agreement not reported"
head -1 "$WORK/cmp2/compare.csv" | grep -q 'measured_mean_tpot_ms_ci95_lo' || fail "compare.csv lacks the measured intervals"
# --request-overhead-ms auto: the server's time before a request's first step, calibrated on the
# depth-0 cell at the lowest concurrency, makes its simulated TTFT the measured 15 ms
run --sweep "$WORK/sweep" --cost-table "$WORK/fast.json" --compare --step-overhead-ms auto --request-overhead-ms auto \
    --repeats 3 --out "$WORK/cmp3" >"$WORK/cmp3.txt" 2>&1 || fail "--request-overhead-ms auto exited $?: $(tail -3 "$WORK/cmp3.txt")"
grep -q 'server time per request before its first step, per workload' "$WORK/cmp3/compare.md" || fail "request overhead not reported"
awk -F, '$1 == "\"none\"" { t = $12 } END { exit !(t > 14.9 && t < 15.1) }' "$WORK/cmp3/compare.csv" ||
  fail "depth-0 simulated TTFT with auto request overhead is not the measured 15 ms: $(grep none "$WORK/cmp3/compare.csv")"
# --think-ms auto: 8 requests in 0.8 s (10 req/s) of 50 ms each at concurrency 1 are 8 waits and 7
# pauses: 0.8 s = 8 x 50 ms + 7 x 57.1 ms (not 1/10 s - 50 ms = 50 ms)
mkdir -p "$WORK/sweep4"
sed 's/,8,900,14,512,15,1.0,80,/,8,900,10,512,15,1.0,50,/' "$WORK/sweep/runs.csv" >"$WORK/sweep4/runs.csv"
run --sweep "$WORK/sweep4" --cost-table "$WORK/fast.json" --compare --think-ms auto --repeats 3 --out "$WORK/cmp4" \
    >"$WORK/cmp4.txt" 2>&1 || fail "--think-ms auto exited $?: $(tail -3 "$WORK/cmp4.txt")"
grep -q 'c=1: 57.1 ms' "$WORK/cmp4/compare.md" || fail "client pause not 57.1 ms: $(grep 'think' "$WORK/cmp4/compare.md")"
# runs.csv in the sweep's shuffled visit order, with a depth-3 run that completed nothing (its counters
# still moved): --compare lists the cells sorted (speculation off first, then by depth), leaves the failed
# cell out and says why; the acceptance comes from the deepest depth that measured something (2), not 3
mkdir -p "$WORK/sweep5"
cat >"$WORK/sweep5/runs.csv" <<EOF
drafter,depth,workload,concurrency,repeat,dir,completed,failed,output_throughput,request_throughput,total_output_tokens,mean_ttft_ms,mean_tpot_ms,mean_e2el_ms,spec_decode_acceptance_length,spec_decode_acceptance_rate,pos_0,pos_1,pos_2
ngram,2,$W,1,0,ngram-d2/x,8,0,1200,18,512,15,0.7,60,2.1,55,0.62,0.48,
ngram,3,$W,1,0,ngram-d3/x,0,8,0,0,0,,,,3.7,90,0.95,0.9,0.85
none,0,$W,1,0,none-d0/x,8,0,900,14,512,15,1.0,80,,,,,
ngram,1,$W,1,0,ngram-d1/x,8,0,1000,16,512,15,0.8,70,1.6,60,0.6,,
EOF
run --sweep "$WORK/sweep5" --cost-table "$WORK/cost.json" --compare --repeats 2 --out "$WORK/cmp5" >"$WORK/cmp5.txt" 2>&1 ||
  fail "--compare on sweep5 exited $?: $(tail -3 "$WORK/cmp5.txt")"
[ "$(cut -d, -f1,2 "$WORK/cmp5/compare.csv" | tail -n +2 | tr '\n' ' ')" = '"none",0 "ngram",1 "ngram",2 ' ] ||
  fail "compare.csv rows are not in a sorted order: $(cut -d, -f1,2 "$WORK/cmp5/compare.csv" | tr '\n' ' ')"
grep -q 'ngram depth 3, .*c=1: left out, every run failed (repeat 0: 8 of 8 requests failed)' "$WORK/cmp5/compare.md" ||
  fail "compare.md does not say the failed cell is left out and why"
run --sweep "$WORK/sweep5" --cost-table "$WORK/cost.json" --depths 0-3 --rate 1 --duration 10 --repeats 1 --quiet \
    --out "$WORK/s5" >"$WORK/s5.txt" 2>&1 || fail "--sweep sweep5 exited $?: $(tail -3 "$WORK/s5.txt")"
grep -q 'ngram on [^ ]* at depth 2 ' "$WORK/s5/simulate.json" ||
  fail "acceptance not from the deepest successful depth: $(grep -o '"source":[^,]*' "$WORK/s5/simulate.json" | head -2)"

run --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --step-overhead-ms auto --depths 0 --rate 1 \
    --duration 5 --quiet --out "$WORK/bad" >/dev/null 2>"$WORK/bad.err" && fail "--step-overhead-ms auto without --compare accepted"
grep -q 'auto is for --compare' "$WORK/bad.err" || fail "auto overhead refusal unclear: $(cat "$WORK/bad.err")"
run --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --request-overhead-ms auto --depths 0 --rate 1 \
    --duration 5 --quiet --out "$WORK/bad" >/dev/null 2>"$WORK/bad.err" && fail "--request-overhead-ms auto without --compare accepted"
grep -q 'request-overhead-ms auto is for --compare' "$WORK/bad.err" || fail "auto request overhead refusal unclear: $(cat "$WORK/bad.err")"
# and the sweep as an acceptance source
run --sweep "$WORK/sweep" --cost-table "$WORK/cost.json" --depths 0-2 --rate 1 --duration 20 --repeats 2 --quiet \
    --out "$WORK/s" >/dev/null 2>"$WORK/s.err" || fail "--sweep as acceptance failed: $(tail -3 "$WORK/s.err")"
grep -Eq '"drafter":[[:space:]]*"ngram"' "$WORK/s/simulate.json" || fail "sweep acceptance lost its drafter"

# bad input: exit 2 and a message naming it
bad() {   # bad EXPECTED_TEXT ARGS...
  local want="$1"; shift
  set +e; timeout 30 "$BIN" simulate "$@" >"$WORK/bad.out" 2>"$WORK/bad.err"; local rc=$?; set -e
  [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2"
  grep -q -- "$want" "$WORK/bad.err" || fail "'$*': message lacks '$want': $(cat "$WORK/bad.err")"
}
echo '{"code": [0.4, 0.7]}' >"$WORK/rising.json"
bad "unconditional" --accept "$WORK/rising.json" --cost-table "$WORK/cost.json" --concurrency 1
bad "cost-table" --accept "$WORK/accept.json" --concurrency 1
bad "unknown option" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --concurrency 1 --frobnicate
bad "row-budget" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --concurrency 1 --max-running 32 --row-budget 8
bad "phases" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --phases "60:speed=3"
bad "one kind of load" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --concurrency 1 --rate 2
bad "give the load" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json"
bad "no acceptance rates for workload" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --concurrency 1 --workloads nope
bad "missing.json" --accept "$WORK/missing.json" --cost-table "$WORK/cost.json" --concurrency 1
bad "--depths" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --concurrency 1 --depths 0-40

# Experts on host: a mixture-of-experts table's routing curve prices each
# step's bus reads (distinct experts × sparse layers × expert bytes ÷ GB/s).
# With a flat device curve speculation wins; with every extra row of the one
# sequence reading 4 more 10 MB experts per layer across a 10 GB/s bus it
# does not: depth 0.
cat >"$WORK/moe.json" <<'EOF'
{"rows": [1, 2, 3, 4], "seconds_per_step": [0.001, 0.001, 0.001, 0.001], "draft_seconds_per_token": 0,
 "by_sequences": [{"sequences": 1, "rows": [1, 2, 3, 4], "seconds_per_step": [0.001, 0.001, 0.001, 0.001]}],
 "moe": {"experts": 16, "top_k": 4, "sparse_layers": 4, "expert_bytes": 1e7, "text": "test",
         "rows": [1, 2, 3, 4], "distinct_experts_per_layer": [4, 8, 12, 16]}}
EOF
for bus in none 10; do
  extra=(); [ "$bus" = none ] || extra=(--experts-on-host "$bus")
  run --accept "$WORK/accept.json" --workloads code --cost-table "$WORK/moe.json" --depths 0-2 --concurrency 1 \
    --duration 20 --repeats 1 --quiet "${extra[@]}" --out "$WORK/moe-$bus" 2>"$WORK/moe-$bus.err"
  python3 - "$WORK/moe-$bus/simulate.json" "$bus" <<'EOF' || fail "experts on host ($bus)"
import json, sys
d = json.load(open(sys.argv[1]))["decisions"][0]
want_off = sys.argv[2] != "none"
assert (d["best_depth"] == 0) == want_off, (sys.argv[2], d)
EOF
done
grep -q "experts on host at 10 GB/s" "$WORK/moe-10.err" || fail "no experts-on-host line: $(cat "$WORK/moe-10.err")"
bad "routing curve" --accept "$WORK/accept.json" --cost-table "$WORK/cost.json" --concurrency 1 --experts-on-host 10
echo "bench_simulate: ok"

#!/usr/bin/env bash
# bench_sweep.sh — a depth sweep at tiny scale end to end: `specbed sweep`
# relaunches `specbed serve` per depth (a canary pass on cold launches, then
# 2 repeats visiting the arms in shuffled orders, load per workload ×
# concurrency), then `specbed report` renders it. Checks the run count, the
# recorded orders, that the report holds valid PNG and SVG files (magic
# bytes / XML root), report.md with the decision table and intervals, and
# recommendation.json. The speculation-off launch is the one the sweep derives
# from --launch (no --launch-off: serve refuses --depth 0, so the drafter and
# depth flags must go); sweep.json and report.md name the machine; a sweep
# without DSpark gets no block-size column.
# usage: bench_sweep.sh SPECBED ROOT WORKDIR   (ctest passes these)
set -euo pipefail
BIN="$1"; ROOT="$2"; WORK="$3/bench_sweep"
M="$ROOT/tests/fixtures/qwen3-tied"
rm -rf "$WORK"; mkdir -p "$WORK"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fail() { echo "bench_sweep: FAIL: $*" >&2; exit 1; }
cd "$ROOT"
W1=code W2=prose
[ -f workloads/code.jsonl ] && [ -f workloads/prose.jsonl ] || { W1=tests/fixtures/workloads/mixed.jsonl; W2=$W1; }

# The sweep stops every server it launched (and kills them on SIGTERM from
# timeout); the hard bound keeps a hung server from holding the test.
timeout --kill-after=15 240 "$BIN" sweep \
    --launch "$BIN serve --model $M --drafter {drafter} --draft-model $M --depth {depth} --port {port}" \
    --drafters draft --depths 0,1,3 --workloads "$W1,$W2" --concurrency 1,4 \
    --repeats 2 --order-seed 5 --num-prompts 8 --max-tokens 24 --canary-duration 2 --interval 0.5 --out "$WORK/sweep" \
    >"$WORK/sweep.txt" 2>&1 || fail "sweep exited $?: $(tail -20 "$WORK/sweep.txt")"
[ -s "$WORK/sweep/runs.csv" ] && [ -s "$WORK/sweep/sweep.json" ] || fail "sweep wrote no runs.csv / sweep.json"
nruns=$(($(wc -l <"$WORK/sweep/runs.csv") - 1))
[ "$nruns" = 24 ] || fail "runs.csv has $nruns runs, want 3 depths × 2 workloads × 2 concurrencies × 2 repeats = 24"
grep -q '"verdict"' "$WORK/sweep/sweep.json" || fail "no canary verdicts in sweep.json"
grep -q '"order_seed":[[:space:]]*5' "$WORK/sweep/sweep.json" || fail "sweep.json does not record the order seed"
grep -q '"orders"' "$WORK/sweep/sweep.json" || fail "sweep.json does not record the arm orders"
grep -q '"loadavg_start"' "$WORK/sweep/sweep.json" || fail "sweep.json does not record the load average"
grep -q '"launch_off_derived":[[:space:]]*"[^"]*serve --model [^"]* --port {port}"' "$WORK/sweep/sweep.json" \
    || fail "sweep.json has no derived speculation-off launch"
grep -q '"launch_off_removed":[[:space:]]*"--drafter {drafter} --draft-model [^"]* --depth {depth}"' "$WORK/sweep/sweep.json" \
    || fail "sweep.json does not say which flags the off launch lost"
for k in cpu_model simd cpus omp_num_threads gpu server_kernels; do
  grep -q "\"$k\"" "$WORK/sweep/sweep.json" || fail "sweep.json's machine lacks $k"
done
grep -q 'decode_throughput' "$WORK/sweep/runs.csv" || fail "runs.csv has no decode_throughput column"

timeout 120 "$BIN" report "$WORK/sweep" >"$WORK/report.txt" 2>&1 || fail "report exited $?: $(tail -20 "$WORK/report.txt")"
R="$WORK/sweep/report"
grep -q "recommended depths" "$WORK/report.txt" || fail "report printed no recommendation"
for fig in decision_gain_vs_depth decode_throughput_vs_depth e2e_throughput_vs_depth accept_length_vs_depth \
           ttft_vs_depth itl_vs_depth per_position_acceptance predicted_vs_measured timeline_draft_d1 timeline_draft_d3; do
  [ -s "$R/$fig.png" ] || fail "no $fig.png"
  [ "$(head -c 8 "$R/$fig.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$fig.png is not a PNG"
  [ -s "$R/$fig.svg" ] || fail "no $fig.svg"
  head -c 400 "$R/$fig.svg" | grep -q "<?xml" || fail "$fig.svg has no XML declaration"
  grep -q "<svg" "$R/$fig.svg" && tail -c 64 "$R/$fig.svg" | grep -q "</svg>" || fail "$fig.svg has no <svg> root"
done
grep -q "^## Recommendation" "$R/report.md" || fail "report.md has no recommendation section"
grep -Eq '^\| draft \| [a-z.]+ \| [14] \| \*\*(depth [0-9]+|speculation off)\*\* \|' "$R/report.md" || fail "report.md has no recommendation row"
grep -Eq '[0-9]\.[0-9]{3}× \[[0-9.]+, [0-9.]+\]' "$R/report.md" || fail "report.md has no gain with an interval"
grep -q "^## Measured noise" "$R/report.md" || fail "report.md does not state the measured noise"
grep -q '"gain_ci95"' "$R/recommendation.json" || fail "recommendation.json has no gain intervals"
grep -q "^Speculation off (depth 0) launched as \`[^\`]*serve --model [^\`]* --port {port}\` (derived" "$R/report.md" ||
  fail "report.md does not say how speculation off was launched"
grep -q "^Machine: .*SIMD .*CPUs.*server kernels [a-z0-9]* x[0-9]*; GPU " "$R/report.md" || fail "report.md does not name the machine"
grep -q "block-size depth" "$R/report.md" && fail "report.md has DSpark's block-size column in a sweep without DSpark"
grep -q '"measured_best_depth"' "$R/recommendation.json" || fail "recommendation.json has no measured best depth"
grep -q '"predicted_best_depth"' "$R/recommendation.json" || fail "recommendation.json has no predicted best depth"
echo "bench_sweep: ok ($nruns runs)"

#!/usr/bin/env bash
# moe_verify_cost.sh — what a verify step of r rows costs at batch 1 on a
# mixture of experts against the dense model of equal active size (issue 41):
# bench_engine on qwen3-moe-small and qwen3-moe-small-dense
# (scripts/device/make_shape_model.py, random weights, written once into
# SHAPES_DIR), histories and rows from a workload's text (--text), alternated
# for ROUNDS rounds. Prints min and median of the forward ms at batch 1 ×
# 1..8 rows, the 8-row ÷ 1-row ratio per model, and the MoE's distinct
# experts per layer and weight MB per step. Run it on an idle machine (it
# prints `uptime` first and last).
# usage: scripts/studies/moe_verify_cost.sh [BUILD_DIR] [SHAPES_DIR] [ROUNDS] [WORKLOAD] [THREADS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
B="${1:-$ROOT/build}" S="${2:-$ROOT/scratch/shapes}" ROUNDS="${3:-3}" W="${4:-code}" T="${5:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}"
PY="$ROOT/.venv/bin/python"; [ -x "$PY" ] || PY=python3
for m in qwen3-moe-small qwen3-moe-small-dense; do
  [ -s "$S/$m/model.safetensors" ] || "$PY" "$ROOT/scripts/device/make_shape_model.py" "$m" "$S/$m"
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
uptime
one() {   # one MODEL ROUND: appends "model metric value" lines
  local out="$TMP/$1.$2.csv"
  OMP_NUM_THREADS=$T "$B/bench_engine" --model "$S/$1" --reps 5 --ctx 256 --max-rows 8 --max-batch 16 --curve-batches 1 \
    --text "$W" --out "$out" >/dev/null
  awk -F, -v m="$1" '{ gsub(/"/, "") } $2 == 1 && ($1 == "forward_ms" || $1 == "moe_distinct_experts_per_layer" ||
    $1 == "weight_mb_per_step") { print m, $1 "_r" $3, $4 }' "$out" >>"$TMP/all"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then one qwen3-moe-small "$r"; one qwen3-moe-small-dense "$r"
  else one qwen3-moe-small-dense "$r"; one qwen3-moe-small "$r"; fi
done
"$PY" - "$TMP/all" "$ROUNDS" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m, k, x = line.split()
    v[m, k].append(float(x))
print("batch 1, %s rounds, ms per forward: min / median" % sys.argv[2])
for m in ("qwen3-moe-small-dense", "qwen3-moe-small"):
    row = ["%6.1f/%6.1f" % (min(v[m, "forward_ms_r%d" % r]), statistics.median(v[m, "forward_ms_r%d" % r]))
           for r in range(1, 9)]
    ratio = statistics.median(v[m, "forward_ms_r8"]) / statistics.median(v[m, "forward_ms_r1"])
    print("%-22s %s  8/1 rows (medians) %.2fx" % (m, " ".join(row), ratio))
    if (m, "moe_distinct_experts_per_layer_r1") in v:
        print("%-22s experts/layer %s" % ("", " ".join("%5.1f" % v[m, "moe_distinct_experts_per_layer_r%d" % r][0]
                                                       for r in range(1, 9))))
        print("%-22s MB/step       %s" % ("", " ".join("%5.0f" % v[m, "weight_mb_per_step_r%d" % r][0]
                                                       for r in range(1, 9))))
PY
uptime

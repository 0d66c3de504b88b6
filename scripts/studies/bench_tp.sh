#!/usr/bin/env bash
# bench_tp.sh — tensor parallelism on this machine: bench_engine with one
# rank of N threads vs N ranks of one thread (mpirun), alternated for ROUNDS
# rounds; prints min and median of prefill tokens/s, single-stream decode
# tokens/s and the forward cost (ms) at batch 1 × 1 row, batch 1 × 8 rows and
# batch 16 × 8 rows. Run it on an idle machine (it prints `uptime` first).
# usage: scripts/studies/bench_tp.sh [BUILD_DIR] [MODEL] [ROUNDS] [N]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
B="${1:-$ROOT/build}" M="${2:-$ROOT/models/tiny}" ROUNDS="${3:-5}" N="${4:-2}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
uptime
one() {   # one ARM ROUND: runs bench_engine, appends "arm metric value" lines
  local out="$TMP/$1.$2.csv"
  if [ "$1" = tp1 ]; then
    OMP_NUM_THREADS=$N "$B/bench_engine" --model "$M" --reps 5 --out "$out" >/dev/null
  else
    mpirun -np "$N" --bind-to core "$B/bench_engine" --model "$M" --reps 5 --tp "$N" --out "$out" >/dev/null
  fi
  awk -F, -v arm="$1" '{ gsub(/"/, "") }
    $1=="prefill_tokens_per_s" || $1=="decode_tokens_per_s" { print arm, $1, $4 }
    $1=="forward_ms" && (($2==1 && ($3==1 || $3==8)) || ($2==16 && $3==8)) { print arm, "ms_b" $2 "_r" $3, $4 }
  ' "$out" >>"$TMP/all"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then one tp1 "$r"; one tp"$N" "$r"; else one tp"$N" "$r"; one tp1 "$r"; fi
done
printf "%-22s %-6s %10s %10s\n" metric arm min median
for m in prefill_tokens_per_s decode_tokens_per_s ms_b1_r1 ms_b1_r8 ms_b16_r8; do
  for a in tp1 tp"$N"; do
    awk -v a="$a" -v m="$m" '$1==a && $2==m { print $3 }' "$TMP/all" | sort -g |
      awk -v a="$a" -v m="$m" '{ v[NR]=$1 } END { printf "%-22s %-6s %10.3f %10.3f\n", m, a, v[1], (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2) }'
  done
done
echo "(tp1 = 1 process, OMP_NUM_THREADS=$N; tp$N = mpirun -np $N, 1 thread per rank, bound to cores; $ROUNDS rounds alternated)"

#!/usr/bin/env bash
# bench_engine on a mixture-of-experts model: a step reads the experts its
# rows route to, so it measures on real text (--text; hashed ids are refused
# by name, not silently used) and reports, per batch and rows per sequence,
# the distinct experts read per sparse layer and the weight bytes that makes:
# one row reads exactly its k experts, more rows never fewer and never more
# than k per row or than exist, and the bytes follow the experts.
# args: SPECBED_BIN ROOT BUILD_DIR
set -uo pipefail
BIN=$1 ROOT=$2 TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
BENCH="$(dirname "$BIN")/bench_engine"
[ -x "$BENCH" ] || fail "$BENCH is not built (cmake --build ... --target bench_engine)"
MOE="$ROOT/tests/fixtures/qwen3-moe-tiny"
ARGS=(--model "$MOE" --reps 2 --ctx 32 --max-rows 6 --prefill 16)

OMP_NUM_THREADS=1 "$BENCH" "${ARGS[@]}" --out "$TMP/hashed.csv" >/dev/null 2>"$TMP/err"
rc=$?
[ "$rc" = 2 ] || fail "bench_engine on an MoE model without --text exited $rc"
grep -q -- "--text" "$TMP/err" || fail "the refusal does not name --text: $(cat "$TMP/err")"
ls "$TMP" | grep -q csv && fail "the refused run left a CSV behind: $(ls "$TMP")"

OMP_NUM_THREADS=1 "$BENCH" "${ARGS[@]}" --text "$ROOT/workloads/prose.jsonl" --out "$TMP/moe.csv" >"$TMP/out" \
  2>"$TMP/err" || fail "bench_engine --text exited $?: $(tail -3 "$TMP/err")"
grep -q "distinct experts read per sparse layer" "$TMP/out" || fail "no experts table: $(cat "$TMP/out")"
python3 - "$TMP/moe.csv" "$MOE/config.json" <<'PY' || exit 1
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cfg = json.load(open(sys.argv[2]))
E, k = cfg["num_experts"], cfg["num_experts_per_tok"]
ex = {(int(r["batch"]), int(r["rows_per_seq"])): float(r["value"]) for r in rows
      if r["metric"] == "moe_distinct_experts_per_layer"}
mb = {(int(r["batch"]), int(r["rows_per_seq"])): float(r["value"]) for r in rows if r["metric"] == "weight_mb_per_step"}
assert set(ex) == set(mb) == {(b, r) for b in (1, 4, 16) for r in range(1, 7)}, sorted(ex)
assert ex[1, 1] == k, ex[1, 1]
for b in (1, 4, 16):
    seq = [ex[b, r] for r in range(1, 7)]
    assert all(y >= x for x, y in zip(seq, seq[1:])), (b, seq)
    assert all(k <= x <= min(E, k * b * r) for r, x in zip(range(1, 7), seq)), (b, seq)
    # bytes: shared + distinct × sparse layers × expert bytes, so they rise exactly with the experts
    per = [mb[b, r] for r in range(1, 7)]
    assert all((y > x) == (ey > e) for x, y, e, ey in zip(per, per[1:], seq, seq[1:])), (b, per, seq)
assert ex[16, 1] >= ex[1, 1] and ex[1, 6] > k, ex
PY
echo "cli_bench_engine_moe: ok"

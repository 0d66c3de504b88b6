#!/usr/bin/env bash
# `specbed profile` writes a cost table that the readers accept: the main
# curve, one curve per sequence count (1, 2, 4, 8: the same rows cost less in
# fewer sequences), one row's lm_head cost (when timer noise leaves one),
# and the drafter's cost split into
# per step and per drafted token; timings are positive and each curve is
# non-decreasing; bad flags are refused by name and no half-written table is
# left behind.
# args: SPECBED_BIN ROOT BUILD_DIR
set -uo pipefail
BIN=$1 ROOT=$2 TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FIX="$ROOT/tests/fixtures/qwen3-tied"
fail() { echo "FAIL: $*"; exit 1; }

OMP_NUM_THREADS=1 "$BIN" profile --model "$FIX" --drafter ngram --max-rows 24 --reps 3 --out "$TMP/cost.json" \
  >"$TMP/out" 2>"$TMP/err" || fail "profile exited $?: $(tail -3 "$TMP/err")"
grep -q "drafter ngram: .* ms per drafting step + .* ms per drafted token" "$TMP/out" ||
  fail "no drafter line: $(cat "$TMP/out")"
python3 - "$TMP/cost.json" <<'EOF' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
def mono(rows, secs, what):
    assert len(rows) == len(secs) >= 1, what
    assert all(s > 0 for s in secs), what + ": a non-positive time"
    assert all(b >= a for a, b in zip(secs, secs[1:])), what + ": not non-decreasing"
    assert all(b > a for a, b in zip(rows, rows[1:])), what + ": rows not ascending"
mono(j["rows"], j["seconds_per_step"], "main curve")
assert j["rows"][0] == 1 and j["rows"][-1] <= 24, j["rows"]
seqs = [c["sequences"] for c in j["by_sequences"]]
assert seqs == [1, 2, 4, 8], seqs
for c in j["by_sequences"]:
    mono(c["rows"], c["seconds_per_step"], "%d sequences" % c["sequences"])
    assert c["rows"][0] >= c["sequences"], "fewer rows than sequences"
# one row's lm_head: a difference of two timings, so on this tiny fixture (a
# small vocabulary) timer noise can make it 0 and the key absent; when there,
# less than a whole 1-row step
lm = j.get("logits_seconds_per_row", 0)
assert 0 <= lm < j["seconds_per_step"][0], "lm_head per row %g against a 1-row step %g" % (lm, j["seconds_per_step"][0])
# attention per context token: the same chunk after `history` tokens vs as a
# fresh prompt; a difference too, so absent when noise made it ≤ 0; when there,
# less than a whole row's cost per token of history
cx = j.get("context_seconds_per_row_token", 0)
assert 0 <= cx < j["seconds_per_step"][0] / j["history"], "context cost %g per row-token" % cx
assert j["draft_seconds_per_token"] >= 0 and j.get("draft_seconds_per_step", 0) >= 0
# the drafter per drafting batch: 1, 2, 4, 8 sequences (the fixture engine holds 8), costs >= 0,
# batch 1 the same figures as the top-level ones
db = j["draft_by_sequences"]
assert [e["sequences"] for e in db] == [1, 2, 4, 8], db
assert all(e["seconds_per_step"] >= 0 and e["seconds_per_token"] >= 0 for e in db), db
assert db[0]["seconds_per_token"] == j["draft_seconds_per_token"], db
assert j.get("draft_seconds_per_prompt_token", 0) >= 0
assert j["tp"] == 1 and j["threads"] == 1 and j["history"] > 0
EOF
# the table it wrote is one the simulator and the report read
echo '{"code": [0.8, 0.6]}' >"$TMP/accept.json"
"$BIN" simulate --accept "$TMP/accept.json" --cost-table "$TMP/cost.json" --depths 0,2 --rate 5 --duration 2 \
  --repeats 1 --quiet --out "$TMP/sim" >/dev/null 2>"$TMP/sim.err" ||
  fail "the simulator refused the table: $(cat "$TMP/sim.err")"
[ -s "$TMP/sim/simulate.csv" ] || fail "the simulator wrote no results"

# bad flags: exit 2 with the flag named, no table written
bad() {  # bad FLAG VALUE: a non-zero exit whose message names the flag or value, and no table
  "$BIN" profile --model "$FIX" "$1" "$2" --out "$TMP/bad.json" >/dev/null 2>"$TMP/bad.err"
  rc=$?
  [ "$rc" != 0 ] || fail "profile $1 $2 exited 0"
  [ -e "$TMP/bad.json" ] && fail "profile $1 $2 left a table behind"
  grep -q -- "$3" "$TMP/bad.err" || fail "profile $1 $2: message does not name '$3': $(cat "$TMP/bad.err")"
}
bad --max-rows 0 "max-rows"
bad --reps x "reps"
bad --drafter nosuch "nosuch"
bad --text nosuch-workload "nosuch-workload"

# A mixture-of-experts target: a verify step reads the experts its rows route
# to, so the table is measured on real text (hashed ids are refused, not
# silently used) and carries the routing curve of one sequence's consecutive
# rows: one row reads exactly its k experts, more rows never fewer, never
# more than k per row or than exist.
MOE="$ROOT/tests/fixtures/qwen3-moe-tiny"
OMP_NUM_THREADS=1 "$BIN" profile --model "$MOE" --max-rows 16 --history 48 --reps 2 --out "$TMP/moe.json" \
  >/dev/null 2>"$TMP/moe.err" && fail "an MoE profile without --text exited 0"
grep -q -- "--text" "$TMP/moe.err" || fail "the MoE refusal does not name --text: $(cat "$TMP/moe.err")"
[ -e "$TMP/moe.json" ] && fail "the refused MoE profile left a table behind"
OMP_NUM_THREADS=1 "$BIN" profile --model "$MOE" --max-rows 16 --history 48 --reps 2 --text "$ROOT/workloads/code.jsonl" \
  --out "$TMP/moe.json" >"$TMP/moe.out" 2>"$TMP/moe.err" || fail "MoE profile exited $?: $(tail -3 "$TMP/moe.err")"
grep -q "experts/layer" "$TMP/moe.out" || fail "no experts column: $(cat "$TMP/moe.out")"
python3 - "$TMP/moe.json" "$MOE/config.json" <<'EOF' || exit 1
import json, sys
j, cfg = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
m = j["moe"]
E, k = cfg["num_experts"], cfg["num_experts_per_tok"]
assert m["experts"] == E and m["top_k"] == k and m["text"].endswith("code.jsonl"), m
sparse = sum(1 for l in range(cfg["num_hidden_layers"]) if l not in cfg.get("mlp_only_layers", [])
             and (l + 1) % cfg.get("decoder_sparse_step", 1) == 0)
assert m["sparse_layers"] == sparse, (m["sparse_layers"], sparse)
import os, struct   # one expert's gate + up + down, at the checkpoint's dtype
d = os.path.dirname(sys.argv[2])
name = next(n for n in json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"].items()
            if n[0].endswith("mlp.experts.0.down_proj.weight"))
with open(os.path.join(d, name[1]), "rb") as f:
    w = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))[name[0]]
size = {"F32": 4, "BF16": 2, "F16": 2}[w["dtype"]]
assert m["expert_bytes"] == 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"] * size, (m, w)
r, d = m["rows"], m["distinct_experts_per_layer"]
assert r[0] == 1 and d[0] == k, (r, d)
assert all(b >= a for a, b in zip(d, d[1:])), d
assert all(x <= min(E, k * n) for n, x in zip(r, d)), (r, d)
assert d[-1] > k, "16 rows of text read no more experts than one: %s" % d
EOF
echo "cli_profile: ok"

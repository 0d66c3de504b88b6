#!/usr/bin/env bash
# interop_llamacpp.sh — specbed's client tools against a live llama.cpp
# llama-server (label interop). llama-server and the GGUFs are built by
# scripts/compare/llamacpp_server.sh into the cache folder (nothing of llama.cpp is in
# the repo); without them this test exits 77 (skipped), never passes.
#
# It starts `llama-server -m tiny -md tiny-draft` (draft-model speculation,
# 4 drafts per step, greedy, /metrics on), waits for /health, then:
#  1. load: `specbed load` (metrics source auto-detected, must be llamacpp),
#     6 code prompts at concurrency 2, 48 tokens; its accept length must equal
#     1 + Δaccepted ÷ Δdrafts from llama-server's own counters
#     (llamacpp:spec_decode_num_accepted_tokens_total /
#     llamacpp:spec_decode_num_drafts_total, verification steps), scraped here
#     with curl before and after; so must its draft/accepted counts and its
#     per-position rates; the counters must have moved;
#  2. greedy text: for one code and one prose prompt, llama-server's
#     /completion (temperature 0, n_predict 32, speculation on) must equal
#     `specbed generate --model models/tiny --max-tokens 32` (no speculation),
#     after checking that both tokenized the prompt to the same number of
#     tokens (llama-server /tokenize vs specbed's --stats-json prompt_tokens);
#  3. canary: `specbed canary --url` must run to a verdict (exit 0 pass,
#     1 fail, 3 inconclusive; 2 "could not run" or a signal is a failure of
#     this test) and llama-server must still be up; the verdict and its
#     observations are printed, not judged (the tiny model loops on greedy
#     code and cannot copy the passphrase, so it fails on those; the
#     spec-on/off check needs specbed's per-request spec_depth and the flat
#     probe needs echo logprobs, neither of which llama-server has, so those
#     two are not made).
# Bounded to 110 s; kills what it started. Outputs are kept in
# BUILD_DIR/interop_llamacpp/ (server.log, load/, canary/, greedy/).
# args: SPECBED_BIN ROOT BUILD_DIR
set -euo pipefail
BIN=$1 ROOT=$2 BUILD=${3:-}
BUDGET=110
PY=/usr/bin/python3
# shellcheck disable=SC2034  # read by llamacpp_common.sh
LC_ROOT="$ROOT" LC_TAG=interop_llamacpp
# shellcheck source=scripts/compare/llamacpp_common.sh
source "$ROOT/scripts/compare/llamacpp_common.sh"
lc_paths
TGT_GGUF="$LC_GGUF_DIR/tiny-bf16.gguf"
DFT_GGUF="$LC_GGUF_DIR/tiny-draft-bf16.gguf"

skip() { echo "SKIP: $*"; echo "  (build them with scripts/compare/llamacpp_server.sh; cache $LC_CACHE)"; exit 77; }
[ -x "$LC_SERVER" ] || skip "no built llama-server at $LC_SERVER"
[ -f "$TGT_GGUF" ] || skip "no target GGUF at $TGT_GGUF"
[ -f "$DFT_GGUF" ] || skip "no draft GGUF at $DFT_GGUF"
for f in "$ROOT"/models/tiny/*.safetensors "$ROOT"/models/tiny/tokenizer.json; do
  [ "$f" -nt "$TGT_GGUF" ] && skip "$TGT_GGUF is older than $f (stale conversion)"
done
for f in "$ROOT"/models/tiny-draft/*.safetensors; do
  [ "$f" -nt "$DFT_GGUF" ] && skip "$DFT_GGUF is older than $f (stale conversion)"
done
command -v curl >/dev/null || skip "no curl"
[ -x "$PY" ] || skip "no $PY"

if [ -n "$BUILD" ] && [ -d "$BUILD" ]; then
  OUT="$BUILD/interop_llamacpp"; rm -rf "$OUT"; mkdir -p "$OUT"
else
  OUT=$(mktemp -d)
fi
SPID=""
cleanup() {
  if [ -n "$SPID" ]; then
    kill "$SPID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SPID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  if [ -f "$OUT/server.log" ]; then echo "--- last lines of $OUT/server.log"; tail -n 15 "$OUT/server.log"; fi
  exit 1
}
left() {   # seconds left of the budget (at least 1)
  local l=$((BUDGET - SECONDS)); [ "$l" -ge 1 ] || fail "over the ${BUDGET} s budget"; echo "$l"
}
bounded() {   # bounded SECONDS CMD...: at most SECONDS, and never past the budget
  local s="$1"; shift
  local l; l=$(left); [ "$s" -le "$l" ] || s="$l"
  timeout -k 5 "$s" "$@"
}

# ---- llama-server -----------------------------------------------------------------
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
# -c is the total context, split over -np slots (1024 each = n_ctx_train);
# one thread each for target and draft (the test shares a small machine).
SERVER_ARGS=(-m "$TGT_GGUF" -md "$DFT_GGUF" --spec-type draft-simple
  --spec-draft-n-max 4 --spec-draft-n-min 0
  --host 127.0.0.1 --port "$PORT" --metrics --no-webui
  -c 4096 -np 4 --temp 0 -t 1 -tb 1 -td 1 -tbd 1)
echo "llama-server: $LC_SERVER ${SERVER_ARGS[*]}"
"$LC_SERVER" "${SERVER_ARGS[@]}" > "$OUT/server.log" 2>&1 &
SPID=$!
up=0
for _ in $(seq 1 300); do
  kill -0 "$SPID" 2>/dev/null || fail "llama-server exited at startup"
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true)" = 200 ]; then up=1; break; fi
  sleep 0.1
done
[ "$up" = 1 ] || fail "llama-server not healthy after 30 s"
grep -q "draft" "$OUT/server.log" || fail "llama-server's log does not mention the draft model"
echo "llama-server up at $URL after ${SECONDS} s"

scrape() { curl -sf --max-time 10 "$URL/metrics" > "$1" || fail "GET /metrics failed"; }

# ---- 1. load: accept length vs llama-server's own counters ---------------------------
scrape "$OUT/metrics.before"
set +e
bounded 60 "$BIN" load --url "$URL" --workload "$ROOT/workloads/code.jsonl" --concurrency 2 \
  --num-prompts 6 --max-tokens 48 --interval 1 --quiet --out "$OUT/load" > "$OUT/load.out" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$OUT/load.out"; fail "specbed load exited $rc"; }
scrape "$OUT/metrics.after"
"$PY" - "$OUT/metrics.before" "$OUT/metrics.after" "$OUT/load/summary.json" <<'EOF' || fail "load vs llama-server counters (above)"
import json, re, sys
def counters(path):
    out = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'^(llamacpp:[a-z_]+)(\{position="(\d+)"\})? (\S+)$', line.strip())
        if m:
            key = (m.group(1), int(m.group(3))) if m.group(3) else m.group(1)
            out[key] = float(m.group(4))
    return out
a, b = counters(sys.argv[1]), counters(sys.argv[2])
s = json.load(open(sys.argv[3]))
P = "llamacpp:spec_decode_"
def d(name):
    if name not in b:
        sys.exit(f"llama-server /metrics has no {name}")
    return b[name] - a.get(name, 0.0)
drafts, tokens, acc = d(P + "num_drafts_total"), d(P + "num_draft_tokens_total"), d(P + "num_accepted_tokens_total")
bad = []
if s.get("specbed_metrics_source") != "llamacpp":
    bad.append(f"metrics source auto-detected as {s.get('specbed_metrics_source')!r}, not 'llamacpp'")
if s.get("completed") != 6 or s.get("failed") != 0:
    bad.append(f"completed {s.get('completed')}, failed {s.get('failed')} (want 6, 0)")
if not drafts > 0:
    bad.append(f"llama-server's spec counters did not move (Δdrafts {drafts})")
want = 1.0 + acc / drafts if drafts > 0 else float("nan")
got = s.get("spec_decode_acceptance_length")
print(f"  llama-server counters: Δdrafts (verification steps) {drafts:.0f}, Δdraft tokens {tokens:.0f}, "
      f"Δaccepted {acc:.0f} -> accept length 1 + {acc:.0f}/{drafts:.0f} = {want:.4f}")
print(f"  specbed load summary:  spec_decode_acceptance_length {got}, drafts {s.get('spec_decode_num_drafts')}, "
      f"draft tokens {s.get('spec_decode_draft_tokens')}, accepted {s.get('spec_decode_accepted_tokens')}, "
      f"definition {s.get('specbed_acceptance_length_definition')!r}, basis {s.get('specbed_interval_basis')!r}")
if got is None or abs(got - want) > 1e-3:
    bad.append(f"accept length {got} != {want:.4f} from the server's counters")
for k, v in (("spec_decode_num_drafts", drafts), ("spec_decode_draft_tokens", tokens),
             ("spec_decode_accepted_tokens", acc)):
    if s.get(k) is None or abs(s[k] - v) > 1e-6:
        bad.append(f"{k} {s.get(k)} != Δ{v:.0f} from the server's counters")
rate = s.get("spec_decode_acceptance_rate")   # percent, as vLLM
if tokens > 0 and (rate is None or abs(rate - 100.0 * acc / tokens) > 1e-3):
    bad.append(f"spec_decode_acceptance_rate {rate} != {100.0 * acc / tokens:.4f} %")
pos = s.get("spec_decode_per_position_acceptance_rates") or []
shown = []
for i, r in enumerate(pos):
    if r is None:
        continue
    k = (P + "num_accepted_tokens_per_pos_total", i)
    w = (b.get(k, 0.0) - a.get(k, 0.0)) / drafts
    shown.append(f"{i}: {r:.4f}/{w:.4f}")
    if abs(r - w) > 1e-3:
        bad.append(f"per-position rate {i}: {r} != {w:.4f}")
print(f"  per-position acceptance (load / server counters): {', '.join(shown) or 'none reported'}")
if bad:
    print("  " + "\n  ".join(bad))
    sys.exit(1)
EOF
echo "ok 1 - specbed load accept length = 1 + Δaccepted/Δdrafts of llama-server's /metrics"

# ---- 2. greedy text: llama-server (speculating) vs specbed generate (not) -------------
mkdir -p "$OUT/greedy"
"$PY" - "$ROOT/workloads" "$OUT/greedy" <<'EOF'
import json, os, sys
wl, out = sys.argv[1], sys.argv[2]
for n, name in enumerate(("code", "prose")):
    with open(os.path.join(wl, name + ".jsonl"), encoding="utf-8") as f:
        row = json.loads(next(l for l in f if l.strip()))
    p = row.get("prompt") or row["turns"][0]
    open(os.path.join(out, f"{name}.prompt"), "w", encoding="utf-8").write(p)
    json.dump({"prompt": p, "n_predict": 32, "temperature": 0, "cache_prompt": False, "return_tokens": True},
              open(os.path.join(out, f"{name}.req.json"), "w"))
    json.dump({"content": p}, open(os.path.join(out, f"{name}.tok.json"), "w"))
EOF
same=0
for name in code prose; do
  g="$OUT/greedy/$name"
  curl -sf --max-time "$(left)" "$URL/completion" -H 'Content-Type: application/json' \
    --data-binary @"$g.req.json" > "$g.llama.json" || fail "POST /completion ($name) failed"
  curl -sf --max-time "$(left)" "$URL/tokenize" -H 'Content-Type: application/json' \
    --data-binary @"$g.tok.json" > "$g.llama.tok.json" || fail "POST /tokenize ($name) failed"
  OMP_NUM_THREADS=1 bounded 30 "$BIN" generate --model "$ROOT/models/tiny" --prompt-file "$g.prompt" \
    --max-tokens 32 --stats-json "$g.specbed.json" > "$g.specbed.out" 2> "$g.specbed.err" \
    || { cat "$g.specbed.err"; fail "specbed generate ($name) failed"; }
  if "$PY" - "$g" "$name" <<'EOF'; then same=$((same + 1)); else fail "greedy text differs ($name, above)"; fi
import json, sys
g, name = sys.argv[1], sys.argv[2]
l = json.load(open(g + ".llama.json"))
ltok = json.load(open(g + ".llama.tok.json"))["tokens"]
st = json.load(open(g + ".specbed.json"))
s = open(g + ".specbed.out", encoding="utf-8").read()
if s.endswith("\n"):
    s = s[:-1]                      # specbed generate ends its output with one newline of its own
t = l["content"]
print(f"  {name}: prompt tokens llama-server {len(ltok)} / specbed {st['prompt_tokens']}; "
      f"generated llama-server {l.get('tokens_predicted')} / specbed {st['completion_tokens']}; "
      f"llama-server drafted {l.get('timings', {}).get('draft_n', '?')}, accepted {l.get('timings', {}).get('draft_n_accepted', '?')}")
print(f"    llama-server: {t!r}")
print(f"    specbed:      {s!r}")
if len(ltok) != st["prompt_tokens"]:
    sys.exit(f"  {name}: the engines tokenized the prompt differently")
if t != s:
    n = 0
    while n < min(len(t), len(s)) and t[n] == s[n]:
        n += 1
    sys.exit(f"  {name}: first difference at char {n}")
EOF
done
echo "ok 2 - greedy text identical on $same of 2 prompts (llama-server with its draft model vs specbed generate)"

# ---- 3. canary against the running llama-server ---------------------------------------
set +e
bounded 60 "$BIN" canary --url "$URL" --duration 6 --probes 4 --out "$OUT/canary" > "$OUT/canary.out" 2>&1
crc=$?
set -e
echo "  specbed canary exit $crc; its verdict and notes:"
grep -E '^canary(:)? (FAIL|PASS|INCONCLUSIVE|note:|first flag)|because' "$OUT/canary.out" | sed 's/^/    /' || true
if [ -f "$OUT/canary/canary.json" ]; then
  "$PY" - "$OUT/canary/canary.json" <<'EOF' || true
import json, sys
c = json.load(open(sys.argv[1]))
o, t = c.get("observed") or {}, c.get("thresholds") or {}
print(f"  canary.json: verdict {c.get('verdict')!r}, not_made {c.get('not_made')}, metrics {c.get('metrics_source')!r}, "
      f"reference {c.get('reference')!r}, requests {c.get('requests_ok')}/{c.get('requests')} ok")
print("  what it saw (recorded, not judged here; n 0 = the check was not made):")
print(f"    intervals judged {c.get('judged_intervals')}, clean {c.get('clean_intervals')}, "
      f"lowest accept length {o.get('accept_len_min')} (threshold {t.get('accept_len')})")
print(f"    same text as the quiet reference run: n {o.get('n_det')}, differing share {o.get('nondet_frac')}")
print(f"    spec-on vs spec-off: n {o.get('n_spec')}; flat-distribution probe: n {o.get('n_flat')}")
print(f"    texts {o.get('n_texts')}: bad-character share {o.get('bad_frac')}, spray max {o.get('spray_max')}, "
      f"loop max {o.get('loop_max')} (threshold {t.get('loop')}); passphrase copies failing "
      f"{o.get('copy_fail_frac')} of n {o.get('n_copy')}")
EOF
fi
case "$crc" in
  0|1|3) ;;
  *) fail "specbed canary exit $crc against llama-server (0, 1 or 3 wanted: a verdict)" ;;
esac
[ -f "$OUT/canary/canary.json" ] || fail "specbed canary wrote no canary.json"
kill -0 "$SPID" 2>/dev/null || fail "llama-server died during the canary"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true)" = 200 ] || fail "llama-server unhealthy after the canary"
echo "ok 3 - specbed canary ran to a verdict (exit $crc) against llama-server, which is still up"
echo "PASS interop_llamacpp in ${SECONDS} s (outputs in $OUT)"

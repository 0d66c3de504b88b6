#!/usr/bin/env bash
# sidebyside_llamacpp.sh — specbed vs llama.cpp on the same model and machine:
# paired prefill, decode and verify-cost figures, min and median over rounds
# that alternate the two programs. Not part of CI; nothing of llama.cpp is
# committed: it is fetched and built in a cache folder outside the repo.
#
# Usage: scripts/compare/sidebyside_llamacpp.sh [--threads 1,2] [--rounds 5] [--reps 7]
#          [--model models/tiny] [--out DIR] [--no-greedy] [--setup-only]
#
# What it does (each step is skipped when its output is already there):
#  1. a venv (/usr/bin/python3 -m venv --system-site-packages) in the cache
#     with what llama.cpp's converter needs (torch, transformers, numpy ...),
#     from PyPI;
#  2. the llama-cpp-python sdist (pip download --no-binary), whose
#     vendor/llama.cpp is unpacked to CACHE/src; llama-bench and llama-simple
#     built with cmake (Release, GGML_NATIVE=ON) in CACHE/build, niced, -j1
#     unless JOBS says otherwise; scripts/compare/llamacpp_verify_probe.c compiled
#     against that build;
#  3. MODEL converted to a bf16 GGUF with llama.cpp's own convert_hf_to_gguf.py
#     through scripts/compare/llamacpp_convert.py (unknown pre-tokenizer hash → qwen2,
#     tensors of layers >= num_hidden_layers — the MTP module — dropped; both
#     patched in memory at run time, llama.cpp's files are not edited);
#  4. specbed built into build/ (Release, as scripts/build.sh, niced);
#  5. optional greedy check: a few workload prompts through
#     `specbed generate` and `llama-simple` (both greedy), text compared;
#  6. ROUNDS rounds; in each, for each thread count, specbed then llama.cpp
#     (odd rounds) or llama.cpp then specbed (even rounds):
#       specbed:   bench_engine --ctx 256 (prefill 256, forward of k rows at
#                  history 256, batch 1) and REPS runs of `specbed generate`,
#                  129 tokens after a 256-token prompt (128 decode steps at
#                  depth 256);
#       llama.cpp: llama-bench -p 256 (pp256), llama-bench -n 128 -d 256
#                  (tg128 at depth 256) and -p 1,2,4,8 -d 256, and the probe
#                  (k rows at history 256 with logits for every row);
#     then a table: best (fastest round) / median per program, and the ratio
#     of medians as speed (> 1 = specbed faster).
#
# Environment: SPECBED_CPU_PATH (specbed's SIMD path, e.g. avx512bf16 to
# compare like with like: llama.cpp feeds bf16 weights to the BF16 dot
# products where the CPU has them; the table's header names the path),
# SPECBED_CACHE (default ~/.cache/specbed; the llama.cpp things go
# in SPECBED_CACHE/llama.cpp-VERSION), LLAMA_CPP_PYTHON_VERSION (0.3.36),
# BUILD_DIR (specbed build folder, default build/), JOBS (build jobs, 1),
# NICE (prefix for build steps, default "nice -n 19").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

THREADS=1,2
ROUNDS=5
REPS=7
MODEL="$ROOT/models/tiny"
OUT=""
GREEDY=1
SETUP_ONLY=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --model) MODEL="$(cd "$2" && pwd)"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --no-greedy) GREEDY=0; shift ;;
    --setup-only) SETUP_ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "sidebyside: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 1 ]] || { echo "sidebyside: --rounds N, N >= 1" >&2; exit 2; }
[[ "$REPS" =~ ^[0-9]+$ && "$REPS" -ge 1 ]] || { echo "sidebyside: --reps N, N >= 1" >&2; exit 2; }
[[ "$THREADS" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "sidebyside: --threads T[,T...]" >&2; exit 2; }
[ "$ROUNDS" -ge 5 ] || echo "sidebyside: note: fewer than 5 rounds; min/median are weak" >&2

# shellcheck disable=SC2034  # read by llamacpp_common.sh
LC_ROOT="$ROOT" LC_TAG=sidebyside
# shellcheck source=scripts/compare/llamacpp_common.sh
source "$ROOT/scripts/compare/llamacpp_common.sh"   # cache layout, venv, sdist, configure, build, convert
lc_paths
VERSION="$LC_VERSION" CACHE="$LC_CACHE" JOBS="$LC_JOBS" SYS_PY="$LC_SYS_PY"
NICE_CMD=("${LC_NICE[@]}")
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
CTX=256          # history / prompt length for every measurement
GEN=128          # decode steps
ROWS="1,2,4,8"   # verify rows measured
NAME="$(basename "$MODEL")"
GGUF="$LC_GGUF_DIR/$NAME-bf16.gguf"   # what lc_convert writes
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT:-$ROOT/results/sidebyside-llamacpp/$STAMP}"
mkdir -p "$CACHE" "$OUT/raw"
LOG="$OUT/setup.log"
: > "$LOG"
LC_LOG="$LOG"
say() { lc_say "$@"; }
run_logged() { lc_run_logged "$@"; }

# ---- 0. host tools ------------------------------------------------------------
if [ ! -f "$MODEL/config.json" ] || [ ! -f "$MODEL/tokenizer.json" ]; then say "no HF model at $MODEL"; exit 2; fi
"$ROOT/scripts/setup.sh"   # specbed's apt packages (cmake, compilers, libs, python3-venv)
[ -x "$SYS_PY" ] || { say "needs $SYS_PY (Debian's python3)"; exit 2; }
command -v c++ >/dev/null || { say "needs a C++ compiler (build-essential)"; exit 2; }

# ---- 1.-2. converter venv, llama.cpp from the llama-cpp-python sdist (llamacpp_common.sh) ----
lc_venv
lc_source
LCOMMIT="$LC_COMMIT" SRC="$LC_SRC" LBUILD="$LC_BUILD"
# shellcheck disable=SC2119  # no extra options: sidebyside needs none
lc_configure          # only when CACHE/build has no CMakeCache.txt; keeps llamacpp_server.sh's options
say "building llama-bench and llama-simple (-j$JOBS; the first build takes a while)"
lc_build llama-bench llama-simple   # flock on CACHE/.build.lock: one build at a time in CACHE/build
LBIN="$LBUILD/bin"
PROBE="$CACHE/probe/llamacpp_verify_probe"
if [ ! -x "$PROBE" ] || [ "$ROOT/scripts/compare/llamacpp_verify_probe.c" -nt "$PROBE" ] || [ "$LBIN/libllama.so" -nt "$PROBE" ]; then
  mkdir -p "$CACHE/probe"
  run_logged probe "${NICE_CMD[@]}" cc -O2 -Wall -o "$PROBE" "$ROOT/scripts/compare/llamacpp_verify_probe.c" \
    -I "$SRC/include" -I "$SRC/ggml/include" -L "$LBIN" -lllama -lggml -lggml-base -Wl,-rpath,"$LBIN"
fi

# ---- 3. GGUF ------------------------------------------------------------------------
lc_convert "$MODEL"   # scripts/compare/llamacpp_convert.py, when GGUF is missing or older than its inputs

# ---- 4. specbed ---------------------------------------------------------------------
say "building specbed into $BUILD_DIR (Release, -j$JOBS)"
run_logged cmake-specbed cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
run_logged build-specbed "${NICE_CMD[@]}" cmake --build "$BUILD_DIR" --target specbed bench_engine -j"$JOBS"
SPECBED="$BUILD_DIR/specbed"
BENCH_ENGINE="$BUILD_DIR/bench_engine"
"$BENCH_ENGINE" --help > "$OUT/bench_engine_help.txt" 2>&1 || true   # its options at run time
grep -q -- "--ctx" "$OUT/bench_engine_help.txt" || { say "bench_engine has no --ctx any more:"; cat "$OUT/bench_engine_help.txt" >&2; exit 1; }
if [ "$SETUP_ONLY" = 1 ]; then
  say "setup done: $LBIN/llama-bench, $PROBE, $GGUF, $BENCH_ENGINE"
  exit 0
fi

# ---- 5. greedy tokens, both engines --------------------------------------------------
GREEDY_LINE="greedy check skipped (--no-greedy)"
if [ "$GREEDY" = 1 ]; then
  say "greedy check: 64 tokens of a few workload prompts, specbed generate vs llama-simple"
  mkdir -p "$OUT/greedy"
  "$SYS_PY" - "$ROOT/workloads" "$OUT/greedy" <<'EOF'
import json, os, sys
wl, out = sys.argv[1], sys.argv[2]
n = 0
for name in ("code", "prose", "structured"):
    path = os.path.join(wl, name + ".jsonl")
    if not os.path.exists(path):
        continue
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(l) for l in f if l.strip()][:2]
    for r in rows:
        p = r.get("prompt") or (r.get("turns") or [""])[0]
        if not p:
            continue
        with open(os.path.join(out, f"p{n}.prompt"), "w", encoding="utf-8") as g:
            g.write(p)
        n += 1
EOF
  for pf in "$OUT"/greedy/p*.prompt; do
    b="${pf%.prompt}"
    OMP_NUM_THREADS=1 "$SPECBED" generate --model "$MODEL" --prompt-file "$pf" --max-tokens 64 \
      > "$b.specbed.out" 2> "$b.specbed.err" || { say "specbed generate failed on $pf"; cat "$b.specbed.err" >&2; }
    prompt="$(cat "$pf"; printf x)"; prompt="${prompt%x}"   # keep trailing newlines
    "$LBIN/llama-simple" -m "$GGUF" -n 64 "$prompt" > "$b.llama.out" 2> "$b.llama.err" \
      || { say "llama-simple failed on $pf"; tail -5 "$b.llama.err" >&2; }
  done
  GREEDY_LINE="$("$SYS_PY" - "$OUT/greedy" <<'EOF'
import glob, os, sys
d = sys.argv[1]
same = total = 0
notes = []
for pf in sorted(glob.glob(os.path.join(d, "p*.prompt"))):
    b = pf[:-len(".prompt")]
    total += 1
    p = open(pf, encoding="utf-8", errors="replace").read()
    s = open(b + ".specbed.out", encoding="utf-8", errors="replace").read()
    l = open(b + ".llama.out", encoding="utf-8", errors="replace").read()
    # llama-simple prints the prompt (detokenized), then the continuation;
    # both programs end with one newline of their own
    if not l.startswith(p):
        notes.append(f"{os.path.basename(b)}: llama-simple did not echo the prompt verbatim")
        continue
    l = l[len(p):]
    if s == l:
        same += 1
        continue
    n = 0
    while n < min(len(s), len(l)) and s[n] == l[n]:
        n += 1
    notes.append(f"{os.path.basename(b)}: first difference at char {n} of {len(s)}/{len(l)}")
print(f"greedy continuations identical on {same} of {total} prompts (64 tokens, specbed generate vs llama-simple)"
      + ("; " + "; ".join(notes) if notes else ""))
EOF
)"
  say "$GREEDY_LINE"
fi

# ---- 6. rounds --------------------------------------------------------------------------
DECODE_PROMPT="$(printf ' the%.0s' $(seq 1 "$CTX"))"   # 256 tokens with this tokenizer (checked below)
CSV="$OUT/rounds.csv"
echo "round,threads,program,measure,value,unit" > "$CSV"
IFS=, read -r -a TLIST <<< "$THREADS"

run_specbed() {   # round threads
  local r="$1" t="$2" raw="$OUT/raw/r$1-t$2-specbed"
  OMP_NUM_THREADS="$t" "$BENCH_ENGINE" --model "$MODEL" --ctx "$CTX" --reps "$REPS" --out "$raw.engine.csv" \
    > "$raw.engine.txt" 2>&1 || { say "bench_engine failed:"; tail -5 "$raw.engine.txt" >&2; exit 1; }
  local i
  for i in $(seq 1 "$REPS"); do   # REPS fresh processes, as llama-bench's -r REPS samples
    OMP_NUM_THREADS="$t" "$SPECBED" generate --model "$MODEL" --prompt "$DECODE_PROMPT" --max-tokens $((GEN + 1)) \
      --ignore-eos --stats-json "$raw.decode$i.json" > /dev/null 2> "$raw.decode.err" \
      || { say "specbed generate failed:"; tail -5 "$raw.decode.err" >&2; exit 1; }
  done
  "$SYS_PY" - "$r" "$t" "$raw" "$CTX" "$GEN" "$ROWS" "$REPS" >> "$CSV" <<'EOF'
import csv, json, statistics, sys
r, t, raw, ctx, gen, rows, reps = sys.argv[1:8]
rows = [int(x) for x in rows.split(",")]
vals = {}
for row in csv.DictReader(open(raw + ".engine.csv")):
    vals[(row["metric"], row["batch"], row["rows_per_seq"])] = float(row["value"])
print(f"{r},{t},specbed,prefill,{vals[('prefill_tokens_per_s', '1', '1')]:.3f},tokens/s")
tps = []
for i in range(1, int(reps) + 1):
    st = json.load(open(f"{raw}.decode{i}.json"))
    if st["prompt_tokens"] != int(ctx) or st["completion_tokens"] != int(gen) + 1:
        sys.exit(f"specbed decode run: {st['prompt_tokens']} prompt / {st['completion_tokens']} tokens, "
                 f"wanted {ctx} / {int(gen) + 1}")
    tps.append(st["decode_tokens_per_s"])
print(f"{r},{t},specbed,decode,{statistics.median(tps):.3f},tokens/s")
for k in rows:
    print(f"{r},{t},specbed,verify{k},{vals[('forward_ms', '1', str(k))]:.4f},ms")
EOF
}

run_llama() {   # round threads
  local r="$1" t="$2" raw="$OUT/raw/r$1-t$2-llama"
  # pp256 at depth 0; then tg128 and pp1,2,4,8 at depth 256 (depth filled untimed)
  OMP_NUM_THREADS="$t" "$LBIN/llama-bench" -m "$GGUF" -p "$CTX" -n 0 -fa 0 -t "$t" -r "$REPS" -o json \
    > "$raw.pp.json" 2> "$raw.pp.err" || { say "llama-bench failed:"; tail -5 "$raw.pp.err" >&2; exit 1; }
  OMP_NUM_THREADS="$t" "$LBIN/llama-bench" -m "$GGUF" -p "$ROWS" -n "$GEN" -d "$CTX" -fa 0 -t "$t" -r "$REPS" -o json \
    > "$raw.depth.json" 2> "$raw.depth.err" || { say "llama-bench -d failed:"; tail -5 "$raw.depth.err" >&2; exit 1; }
  OMP_NUM_THREADS="$t" "$PROBE" "$GGUF" --threads "$t" --ctx "$CTX" --reps "$REPS" --rows "$ROWS" \
    > "$raw.probe.txt" 2> "$raw.probe.err" || { say "probe failed:"; tail -5 "$raw.probe.err" >&2; exit 1; }
  "$SYS_PY" - "$r" "$t" "$raw" "$CTX" "$GEN" >> "$CSV" <<'EOF'
import json, statistics, sys
r, t, raw, ctx, gen = sys.argv[1:6]
ctx, gen = int(ctx), int(gen)
def tests(path):
    return json.load(open(path))
for x in tests(raw + ".pp.json"):
    if x["n_prompt"] == ctx and x["n_gen"] == 0 and x.get("n_depth", 0) == 0:
        s = statistics.median(x["samples_ns"]) * 1e-9
        print(f"{r},{t},llama.cpp,prefill,{ctx / s:.3f},tokens/s")
for x in tests(raw + ".depth.json"):
    if x.get("n_depth") != ctx:
        sys.exit("llama-bench ignored -d (no n_depth in its output)")
    s = statistics.median(x["samples_ns"]) * 1e-9
    if x["n_gen"] == gen and x["n_prompt"] == 0:
        print(f"{r},{t},llama.cpp,decode,{gen / s:.3f},tokens/s")
    elif x["n_gen"] == 0:
        print(f"{r},{t},llama.cpp,bench_pp{x['n_prompt']},{s * 1e3:.4f},ms")
for line in open(raw + ".probe.txt"):
    f = line.split()
    if f[0] == "prefill_tps":
        print(f"{r},{t},llama.cpp,probe_prefill,{float(f[2]):.3f},tokens/s")
    elif f[0] == "verify_ms":
        print(f"{r},{t},llama.cpp,verify{f[1]},{float(f[2]):.4f},ms")
EOF
}

UPTIME_START="$(uptime)"
say "measuring: $ROUNDS rounds × threads {$THREADS}, $REPS reps per figure; $UPTIME_START"
for r in $(seq 1 "$ROUNDS"); do
  for t in "${TLIST[@]}"; do
    if [ $((r % 2)) = 1 ]; then run_specbed "$r" "$t"; run_llama "$r" "$t"
    else run_llama "$r" "$t"; run_specbed "$r" "$t"; fi
  done
  say "round $r of $ROUNDS done"
done
UPTIME_END="$(uptime)"

# ---- 7. table -----------------------------------------------------------------------------
{
  echo "command: scripts/compare/sidebyside_llamacpp.sh --threads $THREADS --rounds $ROUNDS --reps $REPS --model $MODEL"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "llama.cpp: vendor/llama.cpp of llama-cpp-python $VERSION (commit ${LCOMMIT:-unknown}), CPU backend, GGML_NATIVE=ON; GGUF $GGUF (bf16)"
  # the SIMD path (SPECBED_CPU_PATH=avx512bf16 selects the bf16 dot products)
  echo "specbed: $("$SPECBED" --version | sed 's/.*kernels: //')${SPECBED_CPU_PATH:+ (SPECBED_CPU_PATH=$SPECBED_CPU_PATH)}"
  echo "uptime at start: $UPTIME_START"
  echo "uptime at end:   $UPTIME_END"
  echo "$GREEDY_LINE"
  echo
  "$SYS_PY" - "$CSV" "$CTX" "$GEN" "$ROWS" <<'EOF'
import csv, statistics, sys
path, ctx, gen, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
data = {}
for row in csv.DictReader(open(path)):
    data.setdefault((row["threads"], row["program"], row["measure"]), []).append(float(row["value"]))
threads = sorted({k[0] for k in data}, key=int)
rounds = max(len(v) for v in data.values())
def fmt(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"
def cell(vals, unit):
    if not vals:
        return "—", None
    best = max(vals) if unit == "tokens/s" else min(vals)
    med = statistics.median(vals)
    return f"{fmt(best)} / {fmt(med)}", med
measures = [("prefill", f"prefill {ctx} tokens (tokens/s)", "tokens/s", "prefill"),
            ("decode", f"decode {gen} tokens at depth {ctx} (tokens/s)", "tokens/s", "decode")]
measures += [(f"verify{k}", f"verify {k} row{'s' if k != '1' else ''} at depth {ctx} (ms/step)", "ms", f"verify{k}")
             for k in rows]
print(f"Best (fastest of {rounds} rounds) / median; each round's figure is itself the median of its reps.")
print("ratio = speed of specbed ÷ speed of llama.cpp, from the medians (> 1: specbed faster).")
print()
print("| threads | measure | specbed best / median | llama.cpp best / median | ratio |")
print("|---:|---|---:|---:|---:|")
for t in threads:
    for key, label, unit, lkey in measures:
        s, sm = cell(data.get((t, "specbed", key), []), unit)
        l, lm = cell(data.get((t, "llama.cpp", lkey), []), unit)
        ratio = "—"
        if sm and lm:
            x = sm / lm if unit == "tokens/s" else lm / sm
            ratio = f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"
        print(f"| {t} | {label} | {s} | {l} | {ratio} |")
print()
print(f"llama.cpp cross-checks (same rounds): the probe's prefill vs llama-bench pp{ctx}, and llama-bench")
print(f"pp k at depth {ctx} (one llama_decode of k tokens, logits for the LAST row only) vs the probe's verify")
print("(logits for every row, as a verify step needs).")
print()
print("| threads | measure | llama-bench best / median | probe best / median |")
print("|---:|---|---:|---:|")
for t in threads:
    a, _ = cell(data.get((t, "llama.cpp", "prefill"), []), "tokens/s")
    b, _ = cell(data.get((t, "llama.cpp", "probe_prefill"), []), "tokens/s")
    print(f"| {t} | prefill {ctx} (tokens/s) | {a} | {b} |")
    for k in rows:
        a, _ = cell(data.get((t, "llama.cpp", f"bench_pp{k}"), []), "ms")
        b, _ = cell(data.get((t, "llama.cpp", f"verify{k}"), []), "ms")
        print(f"| {t} | {k} row{'s' if k != '1' else ''} at depth {ctx} (ms) | {a} | {b} |")
EOF
} | tee "$OUT/summary.md"
say "raw outputs and rounds.csv in $OUT"

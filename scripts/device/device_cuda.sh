#!/usr/bin/env bash
# device_cuda.sh — the CUDA backend's checks and numbers on a GPU machine,
# in one run (under 8 minutes on an H200; every step has its own timeout,
# and the whole run a deadline, DEVICE_CUDA_BUDGET_S, default 450 s: the
# later steps are skipped when it comes):
#   1. builds build-gpu/ (Release, sm_90 only: the machine's chip, -j16) —
#      specbed, bench_engine, bench_spec and test_cuda;
#   2. makes the shape models (scripts/device/make_shape_model.py: Qwen3-0.6B's
#      and Qwen3-8B's bodies, random bf16 weights, the bundled tokenizer);
#   3. test_cuda (every kernel against the CPU, batch invariance, fixture
#      logits, spec on = spec off under CUDA);
#   4. greedy text: `specbed generate` on the 0.6B shape, CPU vs CUDA (and
#      CUDA without graphs and without programmatic dependent launch), and
#      speculation on (ngram) = off on CUDA, in the invariant and the tensor
#      matmul modes (the tensor mode's text vs the CPU's is reported, not
#      required: its own rounding may flip a near tie);
#   5. bench_engine --device cuda on the 0.6B and 8B shapes: prefill,
#      decode, the verify cost curve (rows 1–16 at batch 1, 4, 16), batched
#      decode at 16 and 64 sequences, the device's copy bandwidth and the
#      decode bound (weight bytes ÷ that bandwidth); on 0.6B also in cuBLAS
#      mode, without PDL and without graphs; both shapes in the tensor
#      matmul mode (SPECBED_CUDA_MATMUL=tensor); bench_engine on models/tiny and
#      on models/tiny-moe (experts on the device, then in host memory);
#      bench_spec --device cuda on the bundled models (every drafter,
#      depths 1–4, code);
#   6. HF transformers on the 0.6B shape, same weights and GPU (eager and
#      static cache + torch.compile), greedy text compared and tok/s, when
#      the deadline leaves room;
#   7. compute-sanitizer memcheck and racecheck on short bench_engine runs
#      (models/tiny), and Nsight Compute's per-kernel time over one 0.6B
#      decode step.
# Prints one table last. Artefacts in $OUT when it is set (the device tool
# brings them back: summary.txt and logs.tar.gz), else in
# results/device-cuda/<UTC time>/. Exit status: 0 when every check passed.
#
# The device machine cannot install packages, and it may lack the
# project's Debian libraries (cJSON, PCRE2, libmicrohttpd, libcurl,
# libcsv). So, first, HERE on the project's machine:
#   scripts/device/device_cuda.sh --prepare        # copies their headers and libraries into .devsys/
# then one call of the device tool:
#   run(command="scripts/device/device_cuda.sh", carry=[".devsys"], timeout_s=520)
# On the device machine .devsys/ is used only when pkg-config does not find
# the libraries there (it is a Debian 12 build: it needs glibc ≥ 2.36).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEVSYS="$ROOT/.devsys"
MODULES=(libcjson libpcre2-8 libmicrohttpd libcurl)

prepare() {
  set -e
  local lib=/usr/lib/x86_64-linux-gnu
  rm -rf "$DEVSYS"
  mkdir -p "$DEVSYS/include" "$DEVSYS/lib/pkgconfig" "$DEVSYS/bin"
  grep -qx '/.devsys/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.devsys/' >> "$ROOT/.git/info/exclude"
  # headers, as the code includes them (<cjson/cJSON.h>, <curl/curl.h>, <csv.h>, ...)
  local pkg f
  for pkg in libcjson-dev libcsv-dev libpcre2-dev libmicrohttpd-dev libcurl4-openssl-dev; do
    dpkg -L "$pkg" | while read -r f; do
      [ -f "$f" ] || continue
      case "$f" in
        /usr/include/x86_64-linux-gnu/*) rel=${f#/usr/include/x86_64-linux-gnu/} ;;
        /usr/include/*) rel=${f#/usr/include/} ;;
        *) continue ;;
      esac
      mkdir -p "$DEVSYS/include/$(dirname "$rel")"
      cp "$f" "$DEVSYS/include/$rel"
    done
  done
  # libraries: each one's real file under its soname, the link-time name,
  # and everything they load that is not part of the C/C++ runtime
  local name real soname dep
  for name in cjson csv pcre2-8 microhttpd curl; do
    real=$(readlink -f "$lib/lib$name.so")
    soname=$(objdump -p "$real" | awk '/SONAME/ {print $2}')
    cp "$real" "$DEVSYS/lib/$soname"
    ln -sf "$soname" "$DEVSYS/lib/lib$name.so"
    ldd "$real" | awk '/=> \// {print $1, $3}' | while read -r dep path; do
      case "$dep" in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libnss_*|libutil.so.*|libanl.so.*|libgcc_s.so.*|libstdc++.so.*|ld-linux*) ;;   # the C/C++ runtime: the machine's own
        *) [ -e "$DEVSYS/lib/$dep" ] || cp "$(readlink -f "$path")" "$DEVSYS/lib/$dep" ;;
      esac
    done
  done
  # pkg-config files of our own (the packages' name private requirements
  # such as gnutls.pc that would not be there)
  local mod ver cflags libname
  for mod in "${MODULES[@]}"; do
    ver=$(pkg-config --modversion "$mod")
    cflags='-I${pcfiledir}/../../include'
    case "$mod" in
      libcjson) libname=cjson; cflags="$cflags"' -I${pcfiledir}/../../include/cjson' ;;
      libpcre2-8) libname=pcre2-8 ;;
      libmicrohttpd) libname=microhttpd ;;
      libcurl) libname=curl ;;
    esac
    printf 'Name: %s\nDescription: %s (copied by device_cuda.sh --prepare)\nVersion: %s\nCflags: %s\nLibs: -L${pcfiledir}/.. -l%s\n' \
      "$mod" "$mod" "$ver" "$cflags" "$libname" > "$DEVSYS/lib/pkgconfig/$mod.pc"
  done
  # pkg-config itself, in case the device machine has none
  cp "$(readlink -f /usr/bin/pkg-config)" "$DEVSYS/bin/pkgconf.bin"
  cp "$(readlink -f "$lib/libpkgconf.so.3")" "$DEVSYS/lib/libpkgconf.so.3"
  cat > "$DEVSYS/bin/pkg-config" <<'WRAP'
#!/bin/sh
d=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/bin/pkgconf.bin" "$@"
WRAP
  chmod +x "$DEVSYS/bin/pkg-config"
  echo "device_cuda: prepared $DEVSYS ($(du -sh "$DEVSYS" | cut -f1)); carry it: carry=[\".devsys\"]"
}

if [ "${1:-}" = "--prepare" ]; then prepare; exit $?; fi
if [ $# -gt 0 ]; then echo "usage: scripts/device/device_cuda.sh [--prepare]" >&2; exit 2; fi

T0=$(date +%s)
if [ -n "${OUT:-}" ]; then R="$OUT/run"; else R="$ROOT/results/device-cuda/$(date -u +%Y%m%dT%H%M%SZ)"; fi
mkdir -p "$R"
SUMMARY="$R/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
FAILED=0
DEADLINE=$(( T0 + ${DEVICE_CUDA_BUDGET_S:-450} ))
left() { echo $(( DEADLINE - $(date +%s) )); }
step() {   # name, timeout seconds, log file, command...  (stdout and stderr appended to the log)
  local name=$1 secs=$2 log=$3; shift 3
  local t=$(date +%s)
  [ $secs -le $(( DEADLINE - t )) ] || secs=$(( DEADLINE - t ))
  if [ $secs -le 0 ]; then say "$(printf '%-46s %s' "$name" "SKIPPED (out of time)")"; FAILED=1; return 1; fi
  echo "== $name ($(date -u +%T))" >> "$log"
  timeout -k 5 "$secs" "$@" >> "$log" 2>&1
  local rc=$?
  local verdict=ok
  if [ $rc -eq 77 ]; then verdict="SKIPPED (exit 77: no GPU?)"; FAILED=1
  elif [ $rc -ne 0 ]; then verdict="FAILED (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))"; FAILED=1; fi
  say "$(printf '%-46s %-28s %4ss' "$name" "$verdict" $(( $(date +%s) - t )))"
  return $rc
}
finish() {
  if [ -n "${OUT:-}" ]; then   # at most 8 files come back: the summary and one tarball
    cp "$SUMMARY" "$OUT/summary.txt"
    tar -C "$R" -czf "$OUT/logs.tar.gz" . 2>/dev/null
    rm -rf "$R"
  fi
}
trap finish EXIT

say "device_cuda: $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$SUMMARY"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
say "nvcc: $("$NVCC" --version 2>&1 | tail -1)"

# ---- build -------------------------------------------------------------------
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=90
            -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
RUN_ENV=(env -u SPECBED_CUDA_MATMUL -u SPECBED_CUDA_GRAPHS -u SPECBED_CUDA_PDL)
# DEVICE_CUDA_DEVSYS=1 uses .devsys/ even where the libraries are installed (to try it out here)
if [ "${DEVICE_CUDA_DEVSYS:-0}" = 1 ] || ! pkg-config --exists "${MODULES[@]}" 2>/dev/null || [ ! -e /usr/include/csv.h ]; then
  if [ ! -d "$DEVSYS" ]; then
    say "the project's libraries are missing here and .devsys/ was not carried: run scripts/device/device_cuda.sh --prepare first"
    exit 1
  fi
  say "libraries: from .devsys/ (the project's machine's copies)"
  PC="$(command -v pkg-config || echo "$DEVSYS/bin/pkg-config")"
  export PKG_CONFIG_LIBDIR="$DEVSYS/lib/pkgconfig"
  CMAKE_ARGS+=(-DPKG_CONFIG_EXECUTABLE="$PC" -DCSV_LIB="$DEVSYS/lib/libcsv.so"
               -DCMAKE_C_FLAGS="-isystem $DEVSYS/include"
               -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$DEVSYS/lib -Wl,-rpath,$DEVSYS/lib")
  RUN_ENV+=(LD_LIBRARY_PATH="$DEVSYS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
else
  say "libraries: this machine's"
fi
B="$ROOT/build-gpu"
rm -f "$B/CMakeCache.txt"   # the library choice above, not a cached one from an earlier run
BLOG="$R/build.log"
step "configure" 60 "$BLOG" cmake -S "$ROOT" -B "$B" "${CMAKE_ARGS[@]}" || { tail -30 "$BLOG"; exit 1; }
# the shape models are written while the build runs (numpy on the CPU, disk)
M06="$ROOT/build-gpu-models/qwen3-0.6b" M8="$ROOT/build-gpu-models/qwen3-8b"
MLOG="$R/models.log"
( timeout 150 python3 "$ROOT/scripts/device/make_shape_model.py" qwen3-0.6b "$M06" >> "$MLOG" 2>&1 &&
  timeout 150 python3 "$ROOT/scripts/device/make_shape_model.py" qwen3-8b "$M8" >> "$MLOG" 2>&1; echo "rc=$?" >> "$MLOG" ) &
MODELS_PID=$!
step "build (specbed, bench_engine, bench_spec, test_cuda)" 200 "$BLOG" \
  cmake --build "$B" -j16 --target specbed bench_engine bench_spec test_cuda || { tail -40 "$BLOG"; exit 1; }

# ---- gpu tests -------------------------------------------------------------------
TLOG="$R/test_cuda.log"
step "test_cuda" 150 "$TLOG" "${RUN_ENV[@]}" "$B/tests/test_cuda"
grep -E '^(matmul|cublas|rms|rope|attention|fixture|greedy|stream|tensor)|CHECK failed' "$TLOG" | head -40

wait $MODELS_PID
if grep -q "rc=0" "$MLOG"; then say "shape models: $(grep -c make_shape_model: "$MLOG") written ($(du -sh "$ROOT/build-gpu-models" | cut -f1))"
else say "shape models: FAILED (see models.log)"; FAILED=1; tail -5 "$MLOG"; fi

# ---- greedy text: CPU vs CUDA on the 0.6B shape; spec on = off on CUDA -------------------
GLOG="$R/generate.log"
GEN=(--model "$M06" --prompt "def parse(" --max-tokens 48)
# device:graphs:pdl:drafter:matmul mode
for run in cpu:1:1:off:invariant cuda:1:1:off:invariant cuda:0:1:off:invariant cuda:1:0:off:invariant \
           cuda:1:1:ngram:invariant cuda:1:1:off:tensor cuda:1:1:ngram:tensor; do
  IFS=: read -r dev g pdl dr mm <<< "$run"
  extra=()
  [ "$dr" = off ] || extra=(--drafter "$dr" --depth 4)
  sfx=""; [ "$mm" = invariant ] || sfx="_$mm"
  step "generate 0.6b --device $dev (graphs $g, pdl $pdl, $dr, $mm)" 60 "$GLOG" sh -c '"$@" > "$0"' \
    "$R/gen_${dev}_${g}${pdl}_$dr$sfx.txt" "${RUN_ENV[@]}" SPECBED_CUDA_GRAPHS=$g SPECBED_CUDA_PDL=${pdl/1/} \
    SPECBED_CUDA_MATMUL=$mm "$B/specbed" generate "${GEN[@]}" --device $dev "${extra[@]}"
done
REF="$R/gen_cpu_11_off.txt"
grep -E "^(== generate|prompt .* tokens)" "$GLOG" | paste - - | sed 's/^== //; s/ ([0-9:]*)//' | tee -a "$SUMMARY"
for f in cuda_11_off cuda_01_off cuda_10_off cuda_11_ngram; do
  if [ -s "$REF" ] && cmp -s "$REF" "$R/gen_$f.txt"; then say "generate 0.6b: $f text = CPU text (48 tokens, greedy)"
  else say "generate 0.6b: $f text DIFFERS from the CPU's, or is missing (see gen_*.txt)"; FAILED=1; fi
done
# the tensor mode: spec on = off is required (its order is batch-invariant); = CPU is reported
TC="$R/gen_cuda_11_off_tensor.txt"
if [ -s "$TC" ] && cmp -s "$TC" "$R/gen_cuda_11_ngram_tensor.txt"; then say "generate 0.6b: tensor mode, ngram text = spec-off text"
else say "generate 0.6b: tensor mode, ngram text DIFFERS from spec-off, or is missing"; FAILED=1; fi
if [ -s "$REF" ] && cmp -s "$REF" "$TC"; then say "generate 0.6b: tensor mode text = CPU text (48 tokens, greedy)"
else say "generate 0.6b: tensor mode text differs from the CPU's (reported, not required: its own rounding)"; fi

# ---- bench_engine -------------------------------------------------------------------
BENCH="$R/bench.log"
step "bench_engine cuda 0.6b (invariant)" 90 "$BENCH" "${RUN_ENV[@]}" "$B/bench_engine" --model "$M06" --device cuda \
  --ctx 256 --prefill 2048 --max-rows 16 --max-batch 64 --reps 5 --out "$R/e06_inv.csv"
step "bench_engine cuda 8b (invariant)" 120 "$BENCH" "${RUN_ENV[@]}" "$B/bench_engine" --model "$M8" --device cuda \
  --ctx 256 --prefill 512 --max-rows 16 --max-batch 64 --reps 3 --out "$R/e8_inv.csv"
# the tensor-core matmul (cuda_matmul_tc.cu): the default only once these say so
step "bench_engine cuda 0.6b (tensor)" 90 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_MATMUL=tensor "$B/bench_engine" \
  --model "$M06" --device cuda --ctx 256 --prefill 2048 --max-rows 16 --max-batch 64 --reps 5 --out "$R/e06_tc.csv"
step "bench_engine cuda 8b (tensor)" 120 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_MATMUL=tensor "$B/bench_engine" \
  --model "$M8" --device cuda --ctx 256 --prefill 512 --max-rows 16 --max-batch 64 --reps 3 --out "$R/e8_tc.csv"
# ---- per-kernel times (Nsight Compute) ---------------------------------------------------
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
NLOG="$R/ncu.csv"
# one decode step of the 0.6B shape, graphs off: generate prefills (one forward), then each token is a step;
# ~315 kernels a step since the held calls (11 a layer): skip the prefill and the first step, count one
if [ "$(left)" -gt 40 ]; then
  nsecs=$(( $(left) - 10 )); [ $nsecs -le 60 ] || nsecs=60
  step "ncu: per-kernel time, one 0.6b decode step" $nsecs "$R/ncu.log" "${RUN_ENV[@]}" SPECBED_CUDA_GRAPHS=0 \
    "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --launch-skip 650 \
    --launch-count 320 --log-file "$NLOG" "$B/specbed" generate --model "$M06" --prompt "def" --max-tokens 6 --device cuda
  python3 - "$NLOG" <<'PY' | tee -a "$SUMMARY"
import csv, sys, collections
t, n = collections.defaultdict(float), collections.Counter()
try:
    rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
    h = rows[0]; ki, vi = h.index("Kernel Name"), h.index("Metric Value")
    for r in rows[1:]:
        k = r[ki].split("(")[0].split("<")[0]; t[k] += float(r[vi].replace(",", "")); n[k] += 1
    tot = sum(t.values())
    print(f"ncu: {sum(n.values())} kernels, {tot/1e3:.1f} us of GPU time in all (about one decode step)")
    for k, v in sorted(t.items(), key=lambda kv: -kv[1]):
        print(f"ncu:   {k:24s} {n[k]:4d} launches {v/1e3:9.1f} us  {v/n[k]/1e3:7.2f} us each")
except Exception as e:
    print("ncu: no per-kernel table:", e)
PY
fi


step "bench_engine cuda 0.6b (invariant, no PDL)" 45 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_PDL=0 "$B/bench_engine" \
  --model "$M06" --device cuda --ctx 256 --max-rows 8 --reps 5 --out "$R/e06_nopdl.csv"
step "bench_engine cuda 0.6b (cublas)" 45 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_MATMUL=cublas "$B/bench_engine" \
  --model "$M06" --device cuda --ctx 256 --prefill 2048 --max-rows 8 --reps 5 --out "$R/e06_cublas.csv"
step "bench_engine cuda 0.6b (invariant, no graphs)" 45 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_GRAPHS=0 "$B/bench_engine" \
  --model "$M06" --device cuda --ctx 256 --max-rows 8 --reps 5 --out "$R/e06_nographs.csv"
step "bench_engine cuda tiny (invariant)" 30 "$BENCH" "${RUN_ENV[@]}" "$B/bench_engine" --model "$ROOT/models/tiny" \
  --device cuda --max-rows 16 --reps 5 --out "$R/etiny_inv.csv"
# the MoE lab model (issue 41): experts on the device, then in host memory across the bus
for where in device host; do
  extra=(); [ $where = host ] && extra=(--experts-on-host)
  step "bench_engine cuda tiny-moe (code, experts on $where)" 30 "$BENCH" "${RUN_ENV[@]}" "$B/bench_engine" \
    --model "$ROOT/models/tiny-moe" --device cuda --text code --max-rows 8 --reps 5 "${extra[@]}" \
    --out "$R/etinymoe_$where.csv"
done

# ---- bench_spec: every drafter on CUDA (invariant: greedy spec-on = spec-off) -------------
SPEC="$R/bench_spec.log"
step "bench_spec cuda (tiny models, code, depths 1-4)" 75 "$SPEC" "${RUN_ENV[@]}" "$B/bench_spec" \
  --model "$ROOT/models/tiny" --draft-model "$ROOT/models/tiny-draft" --dspark-model "$ROOT/models/tiny-dspark" \
  --drafters ngram,draft,mtp,dspark --workloads code --num-prompts 4 --max-tokens 80 --depths 1-4 --device cuda \
  --out "$R/spec_cuda.csv"
grep -iE "speed|mismatch|x " "$SPEC" | tail -25

# ---- sanitizer and per-kernel times ------------------------------------------------------
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo compute-sanitizer)
SLOG="$R/sanitizer.log"
step "compute-sanitizer memcheck (bench_engine tiny)" 60 "$SLOG" "${RUN_ENV[@]}" "$CS" --tool memcheck --error-exitcode 3 \
  "$B/bench_engine" --model "$ROOT/models/tiny" --device cuda --reps 1 --ctx 32 --max-rows 2
grep -E "ERROR SUMMARY" "$SLOG" | tail -1 | sed 's/^/memcheck: /' | tee -a "$SUMMARY"
RLOG="$R/racecheck.log"
if [ "$(left)" -gt 90 ]; then   # shared-memory races (the norm's buffer, the matmul's transpose), CUDA graphs off
  # (bench_engine under racecheck outran 50 s on the second H200 run: a short generate instead, with the
  # ngram drafter at depth 8 so that 9-row verify forwards take the matmul's tiled path too)
  step "compute-sanitizer racecheck (generate tiny)" 50 "$RLOG" "${RUN_ENV[@]}" SPECBED_CUDA_GRAPHS=0 "$CS" \
    --tool racecheck --error-exitcode 3 "$B/specbed" generate --model "$ROOT/models/tiny" --prompt "def parse(" \
    --max-tokens 12 --drafter ngram --depth 8 --device cuda
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$RLOG" | tail -1 | sed 's/^/racecheck: /' | tee -a "$SUMMARY"
fi
# ---- HF transformers on the same weights and GPU ----------------------------------------
HLOG="$R/hf.log"
if [ "$(left)" -gt 60 ]; then
  hsecs=$(( $(left) - 5 )); [ $hsecs -le 120 ] || hsecs=120
  step "hf transformers 0.6b (eager fp32, static cache bf16)" $hsecs "$HLOG" "${RUN_ENV[@]}" \
    PYTHONUNBUFFERED=1 python3 - "$M06" "$REF" <<'PY'
import sys, time, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
d, ref = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(d)
prompt = "def parse("
ids = tok(prompt, return_tensors="pt").input_ids.cuda()
want = open(ref).read().strip()
# static cache: transformers compiles the forward itself for a static cache
# (its generation compile_config); no torch.compile of our own (the first run's
# reduce-overhead wrapper broke on the cache's in-place update)
for mode, dt in (("eager fp32", torch.float32), ("static cache bf16", torch.bfloat16)):
    m = AutoModelForCausalLM.from_pretrained(d, dtype=dt).cuda().eval()
    kw = dict(max_new_tokens=48, min_new_tokens=48, do_sample=False)
    if "static" in mode:
        kw["cache_implementation"] = "static"
    for rep in range(3):   # the first (and second, for compile) warm up
        torch.cuda.synchronize(); t = time.time()
        out = m.generate(ids, **kw)
        torch.cuda.synchronize(); dt_s = time.time() - t
    n = out.shape[1] - ids.shape[1]
    text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()
    print(f"hf {mode}: {n / dt_s:.1f} tok/s ({n} tokens, batch 1, prompt {ids.shape[1]} tokens), "
          f"text = specbed CPU text: {text == want}")
    del m; torch.cuda.empty_cache()
PY
  grep "^hf " "$HLOG" | tee -a "$SUMMARY"
else
  say "hf transformers: skipped (deadline)"
fi

# ---- the table -----------------------------------------------------------------------------
echo
grep -E "^(model|prefill|forward|batch|[0-9]+ |single|batched|memory|weights|host|CUDA)" "$BENCH" | head -80
echo
say ""
say "$(printf '%-22s %9s %9s %8s %8s %7s %9s %9s %9s %9s %7s %8s %7s' measure decode bound '%bound' 'GB/s' 'v8/v1' 'v16/v1' prefill 'b16 tok/s' 'b64 tok/s' 'b16/b1' 'host us' replay)"
for f in e06_inv e8_inv e06_tc e8_tc e06_nopdl e06_nographs e06_cublas etiny_inv etinymoe_device etinymoe_host; do
  [ -f "$R/$f.csv" ] || continue
  c=$(tr -d '"' < "$R/$f.csv")
  g() { awk -F, -v m="$1" -v b="$2" -v r="$3" '$1==m && $2==b && $3==r {print $4}' <<< "$c"; }
  d=$(g decode_tokens_per_s 1 1) roof=$(g roofline_tokens_per_s 1 1) bw=$(g copy_gb_per_s 1 1) p=$(g prefill_tokens_per_s 1 1)
  r1=$(g forward_ms 1 1) r8=$(g forward_ms 1 8) r16=$(g forward_ms 1 16)
  b16=$(g batched_decode_tokens_per_s 16 1) b64=$(g batched_decode_tokens_per_s 64 1)
  hu=$(g host_us_per_decode 1 1) rp=$(g graph_replays_per_decode 1 1)
  say "$(awk -v f="$f" -v d="${d:-0}" -v roof="${roof:-0}" -v bw="${bw:-0}" -v p="${p:-0}" -v r1="${r1:-0}" -v r8="${r8:-0}" \
      -v r16="${r16:-0}" -v b16="${b16:-0}" -v b64="${b64:-0}" -v hu="${hu:-0}" -v rp="${rp:-0}" 'BEGIN {
      printf "%-22s %9.1f %9.1f %7.1f%% %8.0f %7.2f %9.2f %9.0f %9.0f %9.0f %7.2f %8.1f %7.2f",
        f, d, roof, (roof > 0 ? 100 * d / roof : 0), bw, (r1 > 0 ? r8 / r1 : 0), (r1 > 0 ? r16 / r1 : 0), p, b16, b64,
        (d > 0 ? b16 / d : 0), hu, rp }')"
done
say "(decode, bound, prefill, bN: tokens/s; bound = device copy GB/s / weight bytes per token; vN/v1: verify N rows / 1 row at batch 1;"
say " host us: the host's own time per decode step beside its waits for the GPU; replay: decode steps replayed from a recording, per step)"
say "results: $(( $(date +%s) - T0 )) s in all"
[ $FAILED -eq 0 ] && say "device_cuda: every step passed" || say "device_cuda: SOME STEPS FAILED"
exit $FAILED

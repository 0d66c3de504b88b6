#!/usr/bin/env bash
# device_cuda.sh — the CUDA backend's checks and numbers on a GPU machine,
# in one run (budget: under 8 minutes on an H200; each step has a timeout):
#   1. builds build-gpu/ (Release, sm_90 only: the machine's chip) — specbed,
#      bench_engine and the tests with the ctest label gpu;
#   2. runs the gpu tests (tests/test_cuda.c: every kernel against the CPU,
#      batch invariance, fixture logits, spec on = spec off under CUDA);
#   3. `specbed generate --device cuda` with the MTP drafter, with CUDA
#      graphs (the default) and without (SPECBED_CUDA_GRAPHS=0), each
#      compared with the CPU's greedy output;
#   4. bench_engine on models/tiny: the CPU, then --device cuda in both
#      matmul modes (invariant, cublas), and invariant without graphs (the
#      measured per-step floor with and without them): prefill and decode
#      tokens/s, host waits and graph launches per decode step, and the
#      verify cost curve for rows 1–16 at batch 1, 4 and 16 (the 8-row /
#      1-row ratio printed);
#   5. bench_spec --device cuda (invariant): every drafter at depths 1–8 on
#      code and prose, speed-up vs speculation off paired in one run, greedy
#      output checked against speculation off.
# Logs and CSV go to $OUT when it is set (the device tool brings them back),
# else to results/device-cuda/<UTC time>/. Exit status: 0 when every step
# passed.
#
# The device machine cannot install packages, and it may lack the
# project's Debian libraries (cJSON, PCRE2, libmicrohttpd, libcurl,
# libcsv). So, first, HERE on the project's machine:
#   scripts/device_cuda.sh --prepare        # copies their headers and libraries into .devsys/
# then one call of the device tool:
#   run(command="scripts/device_cuda.sh", carry=[".devsys"], timeout_s=540)
# On the device machine .devsys/ is used only when pkg-config does not find
# the libraries there (it is a Debian 12 build: it needs glibc ≥ 2.36).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
if [ $# -gt 0 ]; then echo "usage: scripts/device_cuda.sh [--prepare]" >&2; exit 2; fi

T0=$(date +%s)
if [ -n "${OUT:-}" ]; then R="$OUT"; else R="$ROOT/results/device-cuda/$(date -u +%Y%m%dT%H%M%SZ)"; fi
mkdir -p "$R"
SUMMARY="$R/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
FAILED=0
DEADLINE=$(( T0 + ${DEVICE_CUDA_BUDGET_S:-460} ))   # the whole run stays under 8 minutes
step() {   # name, timeout seconds, log file, command...  (stdout and stderr appended to the log)
  local name=$1 secs=$2 log=$3; shift 3
  local t=$(date +%s)
  [ $secs -le $(( DEADLINE - t )) ] || secs=$(( DEADLINE - t ))
  if [ $secs -le 0 ]; then say "$(printf '%-42s %s' "$name" "SKIPPED (out of time)")"; FAILED=1; return 1; fi
  timeout "$secs" "$@" >> "$log" 2>&1
  local rc=$?
  local verdict=ok
  if [ $rc -eq 77 ]; then verdict="SKIPPED (exit 77: no GPU?)"; FAILED=1
  elif [ $rc -ne 0 ]; then verdict="FAILED (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))"; FAILED=1; fi
  say "$(printf '%-42s %-28s %4ss' "$name" "$verdict" $(( $(date +%s) - t )))"
  return $rc
}

say "device_cuda: $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$SUMMARY"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
say "nvcc: $("$NVCC" --version 2>&1 | tail -1)"
say "cmake: $(cmake --version 2>&1 | head -1)"

# ---- build -------------------------------------------------------------------
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=90
            -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
RUN_ENV=(env -u SPECBED_CUDA_MATMUL)
# DEVICE_CUDA_DEVSYS=1 uses .devsys/ even where the libraries are installed (to try it out here)
if [ "${DEVICE_CUDA_DEVSYS:-0}" = 1 ] || ! pkg-config --exists "${MODULES[@]}" 2>/dev/null || [ ! -e /usr/include/csv.h ]; then
  if [ ! -d "$DEVSYS" ]; then
    say "the project's libraries are missing here and .devsys/ was not carried: run scripts/device_cuda.sh --prepare first"
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
step "configure" 90 "$BLOG" cmake -S "$ROOT" -B "$B" "${CMAKE_ARGS[@]}" || { say "see $BLOG"; tail -30 "$BLOG"; exit 1; }
step "build (specbed, bench_engine, gpu tests)" 240 "$BLOG" \
  cmake --build "$B" -j"$(nproc)" --target specbed bench_engine bench_spec test_cuda || { tail -40 "$BLOG"; exit 1; }
CUOBJDUMP=$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")
[ -x "$CUOBJDUMP" ] && "$CUOBJDUMP" --list-elf "$B/specbed" 2>&1 | sed 's/^/cuda code in specbed: /' | tee -a "$SUMMARY"

# ---- gpu tests -------------------------------------------------------------------
TLOG="$R/test_cuda.log"
(cd "$B" && ctest -N -L gpu) >> "$TLOG" 2>&1
# the tests run directly (ctest's own libraries need not mix with .devsys/'s)
step "ctest label gpu: test_cuda" 180 "$TLOG" "${RUN_ENV[@]}" "$B/tests/test_cuda"
grep -E '^(CUDA|CPU|matmul|cublas|rms|rope|attention|fixture|greedy|cuda |test_cuda)|CHECK failed' "$TLOG" | head -40

# ---- generate: CUDA vs CPU, greedy, with speculation --------------------------------
GLOG="$R/generate.txt"
GEN=(--model "$ROOT/models/tiny" --prompt "def parse(" --max-tokens 48 --drafter mtp --depth 3)
: > "$GLOG"
for run in cpu:1 cuda:1 cuda:0; do   # device:graphs
  dev=${run%:*} g=${run#*:}
  echo "== --device $dev, SPECBED_CUDA_GRAPHS=$g: stderr" >> "$GLOG"
  step "generate --device $dev (mtp, graphs $g)" 60 "$GLOG" sh -c '"$@" > "$0"' "$R/gen_$dev$g.txt" \
    "${RUN_ENV[@]}" SPECBED_CUDA_GRAPHS=$g "$B/specbed" generate "${GEN[@]}" --device $dev
done
for f in cpu1 cuda1 cuda0; do { echo "== $f: text"; cat "$R/gen_$f.txt" 2>/dev/null; } >> "$GLOG"; done
for f in cuda1 cuda0; do
  if [ -s "$R/gen_cpu1.txt" ] && cmp -s "$R/gen_cpu1.txt" "$R/gen_$f.txt"; then
    say "generate: CUDA text = CPU text (greedy, mtp depth 3, graphs ${f#cuda})"
  else
    say "generate: CUDA text (graphs ${f#cuda}) DIFFERS from the CPU's, or is missing (see generate.txt)"; FAILED=1
  fi
done
rm -f "$R"/gen_*.txt

# ---- bench_engine: CPU, CUDA invariant, CUDA cuBLAS -----------------------------------
BENCH="$R/bench.txt"
EB=(--model "$ROOT/models/tiny" --max-rows 16 --reps 5)
step "bench_engine cpu" 60 "$BENCH" "${RUN_ENV[@]}" "$B/bench_engine" "${EB[@]}" --out "$R/engine_cpu.csv"
step "bench_engine cuda (invariant)" 90 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_MATMUL=invariant \
  "$B/bench_engine" "${EB[@]}" --device cuda --out "$R/engine_cuda_invariant.csv"
step "bench_engine cuda (cublas)" 90 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_MATMUL=cublas \
  "$B/bench_engine" "${EB[@]}" --device cuda --out "$R/engine_cuda_cublas.csv"
step "bench_engine cuda (invariant, no graphs)" 90 "$BENCH" "${RUN_ENV[@]}" SPECBED_CUDA_MATMUL=invariant \
  SPECBED_CUDA_GRAPHS=0 "$B/bench_engine" "${EB[@]}" --device cuda --out "$R/engine_cuda_invariant_nographs.csv"

# ---- bench_spec: every drafter × depth on CUDA (invariant: greedy spec-on = spec-off) ----
SPEC="$R/bench_spec.txt"
step "bench_spec cuda (invariant)" 150 "$SPEC" "${RUN_ENV[@]}" SPECBED_CUDA_MATMUL=invariant \
  "$B/bench_spec" --model "$ROOT/models/tiny" --draft-model "$ROOT/models/tiny-draft" \
  --dspark-model "$ROOT/models/tiny-dspark" --drafters ngram,draft,mtp,dspark --workloads code,prose \
  --num-prompts 4 --max-tokens 80 --depths 1-8 --device cuda --out "$R/spec_cuda_invariant.csv"

echo
cat "$BENCH"
echo
cat "$SPEC" 2>/dev/null
echo
for f in engine_cpu engine_cuda_invariant engine_cuda_cublas engine_cuda_invariant_nographs; do
  [ -f "$R/$f.csv" ] || continue
  c=$(tr -d '"' < "$R/$f.csv")
  p=$(awk -F, '$1=="prefill_tokens_per_s" {print $4}' <<< "$c")
  d=$(awk -F, '$1=="decode_tokens_per_s" {print $4}' <<< "$c")
  w=$(awk -F, '$1=="device_waits_per_decode" {print $4}' <<< "$c")
  gl=$(awk -F, '$1=="graph_launches_per_decode" {print $4}' <<< "$c")
  r1=$(awk -F, '$1=="forward_ms" && $2==1 && $3==1 {print $4}' <<< "$c")
  r8=$(awk -F, '$1=="forward_ms" && $2==1 && $3==8 {print $4}' <<< "$c")
  ratio=$(awk -v a="${r8:-0}" -v b="${r1:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
  say "$(printf '%-31s prefill %10.1f tok/s   decode %9.1f tok/s   verify 8 rows / 1 row (batch 1) %s   waits/step %s   graphs/step %s' \
    "$f" "${p:-0}" "${d:-0}" "$ratio" "${w:-?}" "${gl:-?}")"
done
say "results in $R ($(( $(date +%s) - T0 )) s in all)"
[ $FAILED -eq 0 ] && say "device_cuda: every step passed" || say "device_cuda: SOME STEPS FAILED"
exit $FAILED

#!/usr/bin/env bash
# run.sh — build tests/test_cuda.c against the CUDA backend compiled for the
# CPU emulator (emu.h) instead of a GPU, and run it. The kernels' indexing,
# barriers and shuffles, the staging of host arguments, the weight registry,
# the matmul modes and the engine on the fixtures (dense and MoE) all
# execute, test_cuda in stream order (launches queued until the host waits,
# so a result read before a synchronise fails) with CUDA graphs (captured,
# launched, updated in place: emu.h); bench_engine once with graphs and
# once without, and on the MoE lab model in the tensor matmul mode. The GPU's own arithmetic, races
# between its threads and speed do not (emu.h says what it cannot show).
# x86-64 with AVX2 (the reference CPU path); no CUDA toolkit needed.
# Usage: tests/cuda_emu/run.sh [BUILD_DIR]   (default build-cuda-emu)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# the fiber switch is x86-64 assembly; the CPU reference path is AVX2's
if [ "$(uname -m)" != x86_64 ] || ! grep -qw avx2 /proc/cpuinfo || ! command -v g++ >/dev/null; then
  echo "test_cuda_emu: skipped: needs x86-64 with AVX2 and g++"; exit 77
fi
B="${1:-$ROOT/build-cuda-emu}"
mkdir -p "$B"
CFLAGS=(-O2 -g -std=c17 -D_GNU_SOURCE -Wall -Wextra -ffp-contract=off -fopenmp
        -I"$ROOT/common" -I"$ROOT/kernels" -I"$ROOT/engine" -I"$ROOT/spec" -I"$ROOT/tests"
        $(pkg-config --cflags libcjson libpcre2-8) -DSPECBED_ROOT="\"$ROOT\"")
CXXFLAGS=(-O2 -g -std=c++17 -Wall -Wextra -Wno-unknown-pragmas -ffp-contract=off -mf16c -x c++
          -I"$ROOT/tests/cuda_emu/include" -I"$ROOT/kernels" -I"$ROOT/common")
objs=()
compile_c() {   # src obj extra-flags...
  local src=$1 obj=$2; shift 2
  if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ "$ROOT/kernels/backend.h" -nt "$obj" ] ||
     [ "$ROOT/tests/cuda_check.h" -nt "$obj" ]; then
    gcc "${CFLAGS[@]}" "$@" -c "$src" -o "$obj"
  fi
  objs+=("$obj")
}
for dir in common kernels engine spec; do
  for src in "$ROOT/$dir"/*.c; do
    name=$(basename "$src" .c)
    extra=()
    case "$name" in
      cpu_matmul_avx2) extra=(-mavx2 -mfma -mf16c) ;;
      cpu_matmul_avx512) extra=(-mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mavx2 -mfma -mf16c) ;;
      device) extra=(-DSPECBED_HAVE_CUDA) ;;
    esac
    compile_c "$src" "$B/$dir-$name.o" "${extra[@]}"
  done
done
for t in test_cuda cuda_check_attention cuda_check_moe cuda_check_tensor lossless test_util; do
  compile_c "$ROOT/tests/$t.c" "$B/tests-$t.o"
done
for src in "$ROOT"/kernels/*.cu "$ROOT/tests/cuda_emu/emu.cpp"; do
  obj="$B/emu-$(basename "$src").o"
  if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ "$ROOT/kernels/cuda_internal.cuh" -nt "$obj" ] || \
     [ "$ROOT/kernels/cuda_matmul.cuh" -nt "$obj" ] || \
     [ "$ROOT/tests/cuda_emu/emu.h" -nt "$obj" ]; then
    g++ "${CXXFLAGS[@]}" -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
LIBS=($(pkg-config --libs libcjson libpcre2-8) -lcsv -lm -ldl -lpthread)
g++ -fopenmp -o "$B/test_cuda_emu" "${objs[@]}" "${LIBS[@]}"
# bench_engine on the emulator too: the device script's command line, end to end
lib_objs=()
for o in "${objs[@]}"; do case "$o" in *tests-*) ;; *) lib_objs+=("$o") ;; esac; done
objs=()
for t in bench_engine cli_tp cli_device workload_tokens; do compile_c "$ROOT/tools/$t.c" "$B/tools-$t.o" -I"$ROOT/bench/load"; done
# --text reads a workload through bench/load's parser (tools/workload_tokens.c)
for t in workload input_file; do compile_c "$ROOT/bench/load/$t.c" "$B/bench-load-$t.o"; done
g++ -fopenmp -o "$B/bench_engine_emu" "${objs[@]}" "${lib_objs[@]}" "${LIBS[@]}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
echo "built $B/test_cuda_emu and $B/bench_engine_emu; running (the CUDA backend on the CPU emulator)"
# in stream order (emu.h): a result read before the host waited for it fails
SPECBED_EMU_DEFER=1 "$B/test_cuda_emu"
"$B/bench_engine_emu" --model "$ROOT/models/tiny" --device cuda --reps 1 --ctx 32 --max-rows 3
# the second without CUDA graphs: the plain stream-order path end to end too
SPECBED_CUDA_GRAPHS=0 SPECBED_CUDA_MATMUL=cublas "$B/bench_engine_emu" --model "$ROOT/models/tiny" --device cuda --reps 1 --ctx 32 --max-rows 2
# a mixture-of-experts target (the routing read on the host after a wait per
# sparse layer, the experts grouped on the device), on real text, with the
# tensor-core matmul (bf16 weights: every projection and expert) (~2 min)
SPECBED_CUDA_MATMUL=tensor "$B/bench_engine_emu" --model "$ROOT/models/tiny-moe" --device cuda --reps 1 --ctx 32 --max-rows 2 --curve-batches 1,4 \
  --text code

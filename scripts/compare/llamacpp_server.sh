#!/usr/bin/env bash
# llamacpp_server.sh — a live llama.cpp peer for the interop test
# (tests/interop_llamacpp.sh, ctest -L interop): builds llama.cpp's
# llama-server and converts the bundled target and draft model to GGUF, all
# in the cache folder outside the repo. Nothing of llama.cpp is committed.
#
# Usage: scripts/compare/llamacpp_server.sh [--target models/tiny] [--draft models/tiny-draft]
#
# Steps (each skipped when its output is already there; shared with
# scripts/compare/sidebyside_llamacpp.sh through scripts/compare/llamacpp_common.sh):
#  1. the converter's venv in the cache (torch, transformers, ... from PyPI);
#  2. the llama-cpp-python sdist from PyPI (pip download --no-binary), its
#     vendor/llama.cpp unpacked to CACHE/src;
#  3. CACHE/build (re)configured with -DLLAMA_BUILD_SERVER=ON
#     -DLLAMA_USE_PREBUILT_UI=OFF (no web UI: nothing is downloaded at build
#     time), then the llama-server target built (Release, GGML_NATIVE=ON,
#     under NICE, -jJOBS); the build's wall time is printed;
#  4. the target and the draft model converted to bf16 GGUF by
#     scripts/compare/llamacpp_convert.py (llama.cpp's convert_hf_to_gguf.py with the
#     unknown pre-tokenizer hash mapped to qwen2 and the MTP tensors dropped,
#     patched in memory; the draft model has no MTP tensors, same tokenizer);
#  5. prints the paths, one `name: path` line each, on stdout.
#
# Environment: SPECBED_CACHE (default ~/.cache/specbed; things go in
# SPECBED_CACHE/llama.cpp-VERSION), LLAMA_CPP_PYTHON_VERSION (0.3.36), JOBS
# (build jobs, default 1), NICE (prefix for build steps, default "nice -n 19").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET="$ROOT/models/tiny"
DRAFT="$ROOT/models/tiny-draft"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --target) TARGET="$(cd "$2" && pwd)"; shift 2 ;;
    --draft) DRAFT="$(cd "$2" && pwd)"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "llamacpp_server: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for m in "$TARGET" "$DRAFT"; do
  if [ ! -f "$m/config.json" ] || [ ! -f "$m/tokenizer.json" ]; then echo "llamacpp_server: no HF model at $m" >&2; exit 2; fi
done
cmp -s "$TARGET/tokenizer.json" "$DRAFT/tokenizer.json" \
  || echo "llamacpp_server: note: $TARGET and $DRAFT have different tokenizer.json files" >&2

# shellcheck disable=SC2034  # read by llamacpp_common.sh
LC_ROOT="$ROOT" LC_TAG=llamacpp_server
# shellcheck source=scripts/compare/llamacpp_common.sh
source "$ROOT/scripts/compare/llamacpp_common.sh"
lc_paths
mkdir -p "$LC_CACHE"
LC_LOG="$LC_CACHE/server-setup.log"
: > "$LC_LOG"

"$ROOT/scripts/setup.sh"   # specbed's apt packages (cmake, compilers, libs, python3-venv)
command -v c++ >/dev/null || { lc_say "needs a C++ compiler (build-essential)"; exit 2; }

lc_venv
lc_source
lc_configure -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF

had_server=0; [ -x "$LC_SERVER" ] && had_server=1
had_libs=0; [ -f "$LC_BIN/libllama.so" ] && [ -f "$LC_BIN/libllama-common.so" ] && had_libs=1
[ "$had_server" = 1 ] || lc_say "building llama-server (-j$LC_JOBS, ${LC_NICE[*]}; a first build takes minutes; log $LC_LOG)"
t0=$(date +%s)
lc_build llama-server
t1=$(date +%s)
BUILD_S=$((t1 - t0))
KIND=full
if [ "$had_server" = 1 ]; then KIND="incremental: llama-server was already built"
elif [ "$had_libs" = 1 ]; then KIND="partial: ggml, libllama and llama-common were already built (e.g. by sidebyside_llamacpp.sh)"
fi
lc_say "llama-server build: ${BUILD_S} s, $KIND; -j$LC_JOBS, ${LC_NICE[*]}, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$had_server" = 1 ] || echo "$(date -u '+%Y-%m-%dT%H:%M:%SZ') llama-server build ${BUILD_S} s, $KIND; -j$LC_JOBS, ${LC_NICE[*]}, $(nproc) cores" \
  >> "$LC_CACHE/server-build-times.txt"
[ -x "$LC_SERVER" ] || { lc_say "no $LC_SERVER after the build"; exit 1; }
"$LC_SERVER" --version > "$LC_CACHE/llama-server.version" 2>&1 || true

lc_convert "$TARGET"; TARGET_GGUF="$LC_GGUF"
lc_convert "$DRAFT";  DRAFT_GGUF="$LC_GGUF"

echo "llama-server: $LC_SERVER"
echo "target-gguf: $TARGET_GGUF"
echo "draft-gguf: $DRAFT_GGUF"
echo "llama.cpp: vendor/llama.cpp of llama-cpp-python $LC_VERSION (commit ${LC_COMMIT:-unknown})"
echo "build-seconds: $BUILD_S ($KIND)"

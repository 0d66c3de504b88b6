# shellcheck shell=bash
# shellcheck disable=SC2034  # the LC_ variables are for the scripts that source this
# llamacpp_common.sh — sourced (never run) by the scripts that fetch, build and
# use llama.cpp outside the repository: scripts/compare/llamacpp_server.sh and
# tests/interop_llamacpp.sh (and, once it sources this too,
# scripts/compare/sidebyside_llamacpp.sh, whose steps 1-3 these functions are).
# Nothing of llama.cpp is committed: everything lives in the cache folder.
#
#   source scripts/compare/llamacpp_common.sh
#   lc_paths                  # the variables below; no side effects (tests use only this)
#   lc_venv                   # converter venv in the cache (torch, transformers, ...)
#   lc_source                 # llama-cpp-python sdist -> vendor/llama.cpp in LC_SRC
#   lc_configure [-DOPT=V..]  # cmake configure of LC_BUILD (Release, GGML_NATIVE=ON);
#                             # given options that the cache lacks re-run the configure
#   lc_build TARGET...        # niced cmake --build -jJOBS, under the cache's build lock
#   lc_convert MODEL_DIR      # MODEL_DIR -> LC_GGUF_DIR/NAME-bf16.gguf (if out of date);
#                             # sets LC_GGUF to the path
#
# Environment: SPECBED_CACHE (default ~/.cache/specbed; llama.cpp things go in
# SPECBED_CACHE/llama.cpp-VERSION), LLAMA_CPP_PYTHON_VERSION (0.3.36), JOBS
# (build jobs, 1), NICE (prefix for build steps, default "nice -n 19").
# Callers set LC_LOG (log file, default /dev/null) and LC_TAG (message prefix).

lc_paths() {
  LC_ROOT="${LC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
  LC_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
  LC_CACHE="${SPECBED_CACHE:-$HOME/.cache/specbed}/llama.cpp-$LC_VERSION"
  LC_SDIST="$LC_CACHE/sdist/llama_cpp_python-$LC_VERSION.tar.gz"
  LC_SRC="$LC_CACHE/src"
  LC_BUILD="$LC_CACHE/build"
  LC_BIN="$LC_BUILD/bin"
  LC_VENV="$LC_CACHE/venv"
  LC_GGUF_DIR="$LC_CACHE/gguf"
  LC_SERVER="$LC_BIN/llama-server"
  LC_JOBS="${JOBS:-1}"
  read -r -a LC_NICE <<< "${NICE:-nice -n 19}"
  LC_SYS_PY=/usr/bin/python3
  LC_LOG="${LC_LOG:-/dev/null}"
  LC_TAG="${LC_TAG:-llamacpp}"
  # torch >= 2.1 (the converter maps float8 dtypes at import; Debian 12's 1.13 is
  # too old), transformers for AutoTokenizer/AutoConfig; same pins as
  # scripts/requirements.txt. gguf comes from llama.cpp's own gguf-py;
  # sentencepiece is imported (then unused) by the Qwen2/3 vocab path.
  LC_PY_REQS="torch==2.9.1 transformers==4.57.1 tokenizers==0.22.2 safetensors==0.8.0 numpy==2.4.6 sentencepiece==0.2.3 tqdm requests pyyaml"
}

lc_say() { echo "$LC_TAG: $*" >&2; }

lc_run_logged() {   # lc_run_logged WHAT CMD... : output to LC_LOG, its tail on failure
  local what="$1"; shift
  echo "== $what: $*" >> "$LC_LOG"
  if ! "$@" >> "$LC_LOG" 2>&1; then
    lc_say "$what failed; last lines of $LC_LOG:"; tail -25 "$LC_LOG" >&2; exit 1
  fi
}

lc_venv() {
  mkdir -p "$LC_CACHE"
  [ -x "$LC_SYS_PY" ] || { lc_say "needs $LC_SYS_PY (Debian's python3)"; exit 2; }
  if [ ! -x "$LC_VENV/bin/python" ]; then
    lc_say "creating $LC_VENV"
    lc_run_logged venv "$LC_SYS_PY" -m venv --system-site-packages "$LC_VENV"
  fi
  if [ "$(cat "$LC_VENV/.specbed-reqs" 2>/dev/null)" != "$LC_PY_REQS" ]; then
    lc_say "installing the converter's Python packages into $LC_VENV (torch is large; once)"
    # shellcheck disable=SC2086
    lc_run_logged pip "${LC_NICE[@]}" "$LC_VENV/bin/pip" install -q $LC_PY_REQS
    echo "$LC_PY_REQS" > "$LC_VENV/.specbed-reqs"
  fi
}

lc_source() {   # needs lc_venv (pip downloads the sdist)
  if [ ! -f "$LC_SDIST" ]; then
    lc_say "downloading the llama-cpp-python $LC_VERSION sdist into $LC_CACHE/sdist"
    mkdir -p "$LC_CACHE/sdist"
    lc_run_logged sdist "$LC_VENV/bin/pip" download -q --no-deps --no-binary :all: \
      "llama-cpp-python==$LC_VERSION" -d "$LC_CACHE/sdist"
  fi
  if [ ! -f "$LC_SRC/convert_hf_to_gguf.py" ] || [ ! -f "$LC_SRC/CMakeLists.txt" ]; then
    lc_say "unpacking vendor/llama.cpp into $LC_SRC"
    rm -rf "$LC_SRC.tmp"; mkdir -p "$LC_SRC.tmp"
    lc_run_logged unpack tar xzf "$LC_SDIST" -C "$LC_SRC.tmp" --strip-components=3 \
      "llama_cpp_python-$LC_VERSION/vendor/llama.cpp"
    rm -rf "$LC_SRC"; mv "$LC_SRC.tmp" "$LC_SRC"
  fi
  if [ ! -s "$LC_CACHE/llama.cpp.commit" ]; then   # the submodule's HEAD, as the sdist recorded it
    tar xzf "$LC_SDIST" -O "llama_cpp_python-$LC_VERSION/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null \
      | head -c 12 > "$LC_CACHE/llama.cpp.commit" || true
  fi
  LC_COMMIT="$(cat "$LC_CACHE/llama.cpp.commit" 2>/dev/null || true)"
}

# The options every configure of LC_BUILD starts from (sidebyside's). The
# server script adds -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF; a
# later configure with only these leaves those cached values alone.
LC_BASE_OPTS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF
  -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF)

lc_configure() {   # lc_configure [-DNAME=VALUE ...]: extra options over LC_BASE_OPTS
  local opt name want have need=0
  if [ ! -f "$LC_BUILD/CMakeCache.txt" ]; then
    need=1
  else
    for opt in "$@"; do
      name="${opt#-D}"; want="${name#*=}"; name="${name%%=*}"
      have="$(sed -n "s/^$name:[A-Z]*=//p" "$LC_BUILD/CMakeCache.txt" | head -1)"
      [ "$have" = "$want" ] || need=1
    done
  fi
  [ "$need" = 1 ] || return 0
  lc_say "configuring llama.cpp in $LC_BUILD${*:+ ($*)}"
  if [ -f "$LC_BUILD/CMakeCache.txt" ]; then   # keep what is cached, add the options
    lc_run_logged cmake-llama "${LC_NICE[@]}" cmake -S "$LC_SRC" -B "$LC_BUILD" "$@"
  else
    lc_run_logged cmake-llama "${LC_NICE[@]}" cmake -S "$LC_SRC" -B "$LC_BUILD" "${LC_BASE_OPTS[@]}" "$@"
  fi
}

lc_build() {   # lc_build TARGET...: one build at a time in LC_BUILD (flock on the cache)
  mkdir -p "$LC_CACHE"
  if command -v flock >/dev/null; then
    (
      flock -w 3600 9 || { lc_say "another build holds $LC_CACHE/.build.lock"; exit 1; }
      lc_run_logged build-llama "${LC_NICE[@]}" cmake --build "$LC_BUILD" --target "$@" -j"$LC_JOBS"
    ) 9> "$LC_CACHE/.build.lock"
  else
    lc_run_logged build-llama "${LC_NICE[@]}" cmake --build "$LC_BUILD" --target "$@" -j"$LC_JOBS"
  fi
}

lc_convert() {   # lc_convert MODEL_DIR: bf16 GGUF through scripts/compare/llamacpp_convert.py
  local model="$1" name f need=0 convert="$LC_ROOT/scripts/compare/llamacpp_convert.py"
  name="$(basename "$model")"
  LC_GGUF="$LC_GGUF_DIR/$name-bf16.gguf"
  [ -f "$LC_GGUF" ] || need=1
  for f in "$model"/config.json "$model"/tokenizer.json "$model"/*.safetensors "$convert"; do
    [ -f "$LC_GGUF" ] && [ "$f" -nt "$LC_GGUF" ] && need=1
  done
  [ "$need" = 1 ] || return 0
  lc_say "converting $model to $LC_GGUF (bf16, llama.cpp's convert_hf_to_gguf.py)"
  mkdir -p "$LC_GGUF_DIR"
  lc_run_logged convert "${LC_NICE[@]}" "$LC_VENV/bin/python" "$convert" "$LC_SRC" "$model" \
    --outtype bf16 --outfile "$LC_GGUF.tmp"
  mv "$LC_GGUF.tmp" "$LC_GGUF"
}

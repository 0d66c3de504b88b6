#!/usr/bin/env bash
# build.sh — configure and build specbed into build/ (or $BUILD_DIR).
# Extra arguments go to cmake's configure step (e.g. -DSPECBED_SANITIZE=ON).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >/dev/null
# every core: GNU nproc would answer no more than an OMP_NUM_THREADS the caller set
cmake --build "$BUILD_DIR" -j"$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"

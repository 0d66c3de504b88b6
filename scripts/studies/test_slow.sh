#!/usr/bin/env bash
# test_slow.sh — the slow label: the full depth × batch lossless sweeps on
# the bundled models (test_*_full), in a Release build (build-slow/), where
# they take a few minutes instead of the better part of an hour under ASan.
# Extra arguments go to ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-slow}"
BUILD_TYPE=Release "$ROOT/scripts/build.sh" -DSPECBED_WERROR=ON
cd "$BUILD_DIR"
ctest --output-on-failure -L slow "$@"

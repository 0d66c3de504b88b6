#!/usr/bin/env bash
# setup.sh — everything a fresh Debian 12 machine needs to build specbed.
# Sourced by quickstart.sh and test.sh. As root it installs missing apt
# packages; otherwise it prints the exact sudo line and stops.
# Usage: scripts/setup.sh [--python]   (--python also makes .venv for scripts/)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

APT_PKGS=(build-essential cmake pkg-config
  libcjson-dev libcsv-dev libpcre2-dev libomp-dev
  libmicrohttpd-dev libcurl4-openssl-dev gnuplot-nox
  prometheus curl python3-venv clang libclang-rt-14-dev
  libopenmpi-dev openmpi-bin)

missing_pkgs() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

ensure_apt() {
  local missing
  missing=$(missing_pkgs "$@")
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing: $missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # shellcheck disable=SC2086
    apt-get install -y -qq $missing >&2
  else
    echo "setup: missing packages; run:" >&2
    echo "  sudo apt-get install -y $(echo $missing)" >&2
    exit 2
  fi
}

ensure_apt "${APT_PKGS[@]}"

if [ "${1:-}" = "--python" ]; then
  # The venv uses the python on PATH; torch and HF libraries come from PyPI.
  if [ ! -x "$ROOT/.venv/bin/python" ]; then
    python3 -m venv "$ROOT/.venv"
  fi
  "$ROOT/.venv/bin/pip" install -q -r "$ROOT/scripts/requirements.txt"
fi

#!/usr/bin/env bash
# deepspec_eval.sh — DeepSpec's own DSpark evaluator, unpatched, on a DSpark
# checkpoint of the bundled target (default: models/tiny-dspark), its drafts
# and acceptances compared with specbed's (scripts/compare/deepspec_eval.py says how).
# Not part of CI; nothing of DeepSpec is committed or fetched here: its code
# is the checkout given by path.
#
# Usage: scripts/compare/deepspec_eval.sh DEEPSPEC_DIR [--draft DIR] [--num-prompts N]
#          [--max-tokens N] [--workloads code,prose] [--specbed-args "..."]
#   DEEPSPEC_DIR  a DeepSpec checkout (the folder holding deepspec/ and eval.py)
#
# What it does:
#  1. a venv in scratch/deepspec-venv for DeepSpec's Python side: its own
#     transformers (DeepSpec pins 5.10.2: its Gemma4 import needs 5.x; the
#     project venv has 4.57.1) and prettytable from PyPI, the project venv's
#     packages (torch, safetensors, ...) seen through a .pth file; made once;
#  2. specbed built into build/ (scripts/build.sh) unless SPECBED_BIN names one;
#  3. scripts/compare/deepspec_eval.py: DeepSpec loads the checkpoint (its
#     assert_no_final_target_layer refuses a final-layer tap: exit 3 with
#     DeepSpec's message) and drafts greedily on the workload prompts; specbed
#     generates on the same prompts at depth = block_size; tokens, drafts and
#     accepted tokens per position must be equal. Exit 0 = every prompt agrees.
# Environment: SPECBED_BIN (default build/specbed), SPECBED_THREADS (torch
# threads, default 2), OMP_NUM_THREADS (specbed, default 1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -ge 1 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
DS="$(cd "$1" && pwd)"; shift
[ -f "$DS/deepspec/eval/dspark/evaluator.py" ] || {
  echo "deepspec_eval.sh: $DS is not a DeepSpec checkout (no deepspec/eval/dspark/evaluator.py)" >&2; exit 2; }

[ -x "$ROOT/.venv/bin/python" ] || "$ROOT/scripts/setup.sh" --python
VENV="$ROOT/scratch/deepspec-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import transformers, prettytable, torch' 2>/dev/null; then
  python3 -m venv "$VENV"
  site=$("$ROOT/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" > "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/specbed-venv.pth"
  "$VENV/bin/pip" install -q transformers==5.10.2 prettytable
fi

BIN="${SPECBED_BIN:-$ROOT/build/specbed}"
[ -x "$BIN" ] || nice -n 10 "$ROOT/scripts/build.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
exec "$VENV/bin/python" "$ROOT/scripts/compare/deepspec_eval.py" --deepspec "$DS" --specbed "$BIN" "$@"

#!/usr/bin/env bash
# quickstart.sh — the README's main command: set up, build into build/, and
# run specbed on the bundled model. (Later issues turn this into the
# code-vs-prose depth sweep with a report.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh"
MODEL="$ROOT/models/tiny"
if [ ! -f "$MODEL/config.json" ]; then
  # Until the bundled model lands, the random test fixture stands in.
  MODEL="$ROOT/tests/fixtures/qwen3-tied"
  echo "quickstart: models/tiny not present; using the random fixture $MODEL" >&2
fi
mkdir -p "$ROOT/results"
"$ROOT/build/specbed" generate --model "$MODEL" \
  --prompt "def fibonacci(n):" --max-tokens 64 \
  --stats-json "$ROOT/results/quickstart-generate.json"
echo "quickstart: stats in results/quickstart-generate.json" >&2

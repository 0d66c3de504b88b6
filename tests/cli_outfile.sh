#!/usr/bin/env bash
# A result file that cannot be written fails at once, before the work, with
# a message naming the destination: profile --out, generate --stats-json,
# bench_spec --out. The proof of "before": each command is also given a
# model that does not exist, which it would load first; the message must be
# about the destination. A writable destination still gets the whole file,
# and the check leaves nothing behind in its directory.
# args: SPECBED_BIN ROOT BUILD_DIR
set -uo pipefail
BIN=$1 ROOT=$2 TMP=$(mktemp -d)
trap 'chmod -R u+w "$TMP"; rm -rf "$TMP"' EXIT
BENCH="$(dirname "$BIN")/bench_spec"
FIX="$ROOT/tests/fixtures/qwen3-tied"
fail=0
[ -x "$BENCH" ] || { echo "FAIL: $BENCH is not built (cmake --build ... --target bench_spec)"; exit 1; }

expect() {  # PATTERN -- PROGRAM ARGS...: exit 1, stderr matches PATTERN
  local pat=$1; shift 2
  OMP_NUM_THREADS=1 timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ "$rc" != 1 ] || ! grep -qF -- "$pat" "$TMP/err" || grep -q -E "Sanitizer|runtime error" "$TMP/err"; then
    echo "FAIL: $* -> rc $rc (want 1, stderr containing '$pat'), stderr:"; sed 's/^/    /' "$TMP/err"; fail=1
  fi
}

NO="$TMP/nomodel"
mkdir "$TMP/ro" && chmod a-w "$TMP/ro"
mkdir "$TMP/isdir"
for dest in nodir ro isdir; do
  case $dest in
    nodir) f="$TMP/nodir/x.json"; why="cannot write: the directory '$TMP/nodir' does not exist" ;;
    ro)    f="$TMP/ro/x.json";    why="cannot write in '$TMP/ro'" ;;
    isdir) f="$TMP/isdir";        why="is a directory" ;;
  esac
  # root ignores permissions: the read-only case proves nothing there
  if [ $dest = ro ] && [ "$(id -u)" = 0 ]; then continue; fi
  expect "specbed profile: --out $f: $why" -- "$BIN" profile --model "$NO" --out "$f"
  expect "specbed generate: --stats-json $f: $why" -- "$BIN" generate --model "$NO" --prompt x --stats-json "$f"
  expect "bench_spec: --out $f: $why" -- "$BENCH" --model "$NO" --drafters ngram --out "$f"
done

# writable: the whole file, and no probe left beside it
mkdir "$TMP/ok"
OMP_NUM_THREADS=1 "$BIN" generate --model "$FIX" --prompt x --max-tokens 4 --stats-json "$TMP/ok/s.json" \
  >/dev/null 2>"$TMP/err" || { echo "FAIL: generate with a writable --stats-json: $(cat "$TMP/err")"; fail=1; }
grep -q '"completion_ids"' "$TMP/ok/s.json" 2>/dev/null || { echo "FAIL: no statistics written"; fail=1; }
[ "$(ls "$TMP/ok")" = s.json ] || { echo "FAIL: files left beside the result: $(ls "$TMP/ok")"; fail=1; }

[ $fail = 0 ] && echo "cli_outfile: ok"
exit $fail

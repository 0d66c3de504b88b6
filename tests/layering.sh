#!/usr/bin/env bash
# layering.sh — the folders are the layers (DESIGN §2):
#   common → kernels → engine → spec → serve → tools;  bench → common only,
#   and inside bench/ one folder per tool, as the tools use each other:
#   bench/load → bench/canary → bench/sweep → bench/report → bench/sim
#   (CMakeLists.txt links the same edges, so a folder sees only the headers
#   of the folders it links).
# Fails if a file includes a header from a folder its layer may not see, if
# a header name exists in two folders (an include would be ambiguous), if
# a folder's *_internal.h is included from outside that folder, or if a
# source file lies outside the layers (bench/*.c would escape every rule).
# Then proves it can fail: the same check on a scratch copy with one upward
# include added must report it, once across the top layers and once inside
# bench/.
# usage: layering.sh BIN ROOT BUILD_DIR   (ctest's convention; BIN unused)
set -euo pipefail
ROOT="$2"
WORK="$3/layering"

allowed() {   # allowed LAYER -> the folders LAYER may include from
  case "$1" in
    common) echo "common" ;;
    kernels) echo "kernels common" ;;
    engine) echo "engine kernels common" ;;
    spec) echo "spec engine kernels common" ;;
    serve) echo "serve spec engine kernels common" ;;
    bench/load) echo "bench/load common" ;;
    bench/canary) echo "bench/canary bench/load common" ;;
    bench/sweep) echo "bench/sweep bench/canary bench/load common" ;;
    bench/report) echo "bench/report bench/sweep bench/load common" ;;
    bench/sim) echo "bench/sim bench/report bench/sweep bench/load common" ;;
    tools) echo "tools $BENCH serve spec engine kernels common" ;;
  esac
}
BENCH="bench/load bench/canary bench/sweep bench/report bench/sim"
LAYERS="common kernels engine spec serve $BENCH tools"

check() {   # check TREE -> prints violations, returns 1 if any
  local tree="$1" bad=0
  declare -A owner=()
  local d h
  for d in $LAYERS; do
    [ -d "$tree/$d" ] || { echo "missing folder $d/"; bad=1; continue; }
    for h in "$tree/$d"/*.h; do
      [ -e "$h" ] || continue
      h=$(basename "$h")
      if [ -n "${owner[$h]:-}" ]; then echo "$h exists in both ${owner[$h]}/ and $d/"; bad=1; fi
      owner[$h]=$d
    done
  done
  local f inc from ok a top
  for top in $(for d in $LAYERS; do echo "${d%%/*}"; done | sort -u); do
    while read -r f; do
      d=$(dirname "${f#"$tree"/}")
      [[ " $LAYERS " == *" $d "* ]] || { echo "${f#"$tree"/} is in no layer (folders: $LAYERS)"; bad=1; }
    done < <(find "$tree/$top" -name '*.[ch]')
  done
  for d in $LAYERS; do
    for f in "$tree/$d"/*.[ch]; do
      [ -e "$f" ] || continue
      while read -r inc; do
        from="${owner[$inc]:-}"
        [ -z "$from" ] && continue        # a system or library header
        if [[ "$inc" == *_internal.h && "$from" != "$d" ]]; then
          echo "$d/$(basename "$f") includes $from/$inc, which is internal to $from/"; bad=1; continue
        fi
        ok=0
        for a in $(allowed "$d"); do [ "$a" = "$from" ] && ok=1; done
        if [ $ok = 0 ]; then echo "$d/$(basename "$f") includes $from/$inc: $d/ may use only $(allowed "$d")"; bad=1; fi
      done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
  done
  return $bad
}

if ! check "$ROOT"; then echo "layering: FAILED"; exit 1; fi
echo "layering: every include respects the layers"

# The check must be able to fail: one upward include in a scratch copy.
rm -rf "$WORK"; mkdir -p "$WORK"
for d in $LAYERS; do mkdir -p "$WORK/$d"; cp "$ROOT/$d"/*.[ch] "$WORK/$d"/; done
echo '#include "server.h"' >> "$WORK/engine/forward.c"
if out=$(check "$WORK"); then echo "layering: an engine/ file including serve/server.h was not caught"; exit 1; fi
grep -q "engine/forward.c includes serve/server.h" <<<"$out" || { echo "layering: wrong report: $out"; exit 1; }
# inside bench/: the load generator reaching up into the canary
cp "$ROOT/engine/forward.c" "$WORK/engine/forward.c"
echo '#include "canary.h"' >> "$WORK/bench/load/load.c"
if out=$(check "$WORK"); then echo "layering: a bench/load/ file including bench/canary/canary.h was not caught"; exit 1; fi
grep -q "bench/load/load.c includes bench/canary/canary.h" <<<"$out" || { echo "layering: wrong report: $out"; exit 1; }
cp "$ROOT/bench/load/load.c" "$WORK/bench/load/load.c"
# and a source file left in bench/ itself, outside every tool's folder
echo 'int stray;' > "$WORK/bench/stray.c"
if out=$(check "$WORK"); then echo "layering: bench/stray.c, in no layer, was not caught"; exit 1; fi
grep -q "bench/stray.c is in no layer" <<<"$out" || { echo "layering: wrong report: $out"; exit 1; }
rm -rf "$WORK"
echo "layering: an injected upward include (engine/ -> serve/, bench/load/ -> bench/canary/) and a file outside the layers are caught"

#!/usr/bin/env bash
# cycles.sh — no two source files call each other, directly or around a
# circle: the calls between files form layers too, as the folders do
# (layering.sh). A circle is one module split across files, which a reader
# cannot take in one file at a time (issue 42: bench/canary/canary.c and
# canary_probes.c; engine/draft_stack.c, forward.c and tp.c; the CUDA
# backend's stream layer and its compute files). Reads the
# symbols each object defines and uses (nm) in the libraries given; a file
# that uses a symbol another defines depends on it. Then proves it can
# fail: a listing with a two-file circle must be reported.
# usage: cycles.sh BUILD_DIR LIB.a...   (the libraries to read)
set -euo pipefail
WORK="$1/cycles"
shift

# find_cycles < `nm -A` listing -> one line per circle, exit 1 if any
find_cycles() {
  awk '
    $2 ~ /^[TDBRVW]$/ { node = $1; sub(/:[0-9a-f]*$/, "", node); def[$3] = node; next }
    $2 == "U"         { node = $1; sub(/:$/, "", node); n_use++; user[n_use] = node; used[n_use] = $3 }
    function dfs(v,    i, w, k, line) {
      color[v] = 1; stk[++depth] = v
      for (i = 1; i <= deg[v]; i++) {
        w = nbr[v, i]
        if (color[w] == 1) {
          line = ""
          for (k = depth; stk[k] != w; k--) ;
          for (; k <= depth; k++) line = line stk[k] " -(" via[stk[k], k < depth ? stk[k + 1] : w] ")-> "
          print "circle: " line w
          found = 1
        } else if (!color[w]) dfs(w)
      }
      depth--; color[v] = 2
    }
    END {
      for (i = 1; i <= n_use; i++) {
        a = user[i]; b = def[used[i]]
        if (b == "" || b == a) continue
        if (!((a, b) in via)) { nbr[a, ++deg[a]] = b; via[a, b] = used[i]; nodes[a] = 1 }
      }
      for (v in nodes) if (!color[v]) dfs(v)
      exit found
    }'
}

# Every object of the libraries, the CUDA backend's (kernels/cuda_*.cu,
# objects *.cu.o) included when the build has it: its files call one way,
# cuda_backend.cu -> cuda_matmul.cu, cuda_ops.cu -> cuda_mem.cu (the held
# calls are flushed through a registered callback), and kb_dtype_size is a
# leaf (dtype.c), so a CUDA build is checked whole. Its symbols are C++
# names, mangled in nm's listing (one word, as the awk above needs) and
# demangled in the report where c++filt is.
listing() {
  for lib in "$@"; do (cd "$(dirname "$lib")" && nm -A "$(basename "$lib")"); done
}
demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }

for lib in "$@"; do [ -f "$lib" ] || { echo "cycles: $lib is not built"; exit 1; }; done
if ! out=$(listing "$@" | find_cycles); then
  demangle <<<"$out"; echo "cycles: FAILED (each circle: file -(a symbol it uses)-> the file defining it)"; exit 1
fi
n_cu=$(listing "$@" | awk '{ split($1, f, ":"); if (f[2] ~ /\.cu\.o$/) print f[2] }' | sort -u | wc -l)
echo "cycles: no file calls back into a file that calls it ($# libraries, $n_cu CUDA objects among them)"

# The check must be able to fail: a listing in which a.c and b.c call each other.
mkdir -p "$WORK"
cat > "$WORK/circle.nm" <<'EOF'
liba.a:a.c.o:0000000000000000 T a_run
liba.a:a.c.o:                 U b_help
liba.a:b.c.o:0000000000000000 T b_help
liba.a:b.c.o:                 U a_run
liba.a:c.c.o:                 U a_run
EOF
if out=$(find_cycles < "$WORK/circle.nm"); then echo "cycles: a two-file circle was not caught"; exit 1; fi
grep -Eq "liba.a:(a.c.o -\(b_help\)-> liba.a:b.c.o -\(a_run\)-> liba.a:a.c.o|b.c.o -\(a_run\)-> liba.a:a.c.o -\(b_help\)-> liba.a:b.c.o)" <<<"$out" ||
  { echo "cycles: wrong report: $out"; exit 1; }
rm -rf "$WORK"
echo "cycles: an injected two-file circle is caught"

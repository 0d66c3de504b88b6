#!/usr/bin/env bash
# canary_power_plot.sh — the figure of scripts/studies/canary_power.sh from its
# launches.csv (so it can be redrawn without relaunching anything):
#   left   detection rate against the measured corrupted-request rate (load
#          completions ≠ spec-off reference, per 1,000), for the whole canary
#          and for the interval signature alone, depths 3, 5, 7; the
#          incident's ~39 per 1,000 marked
#   right  the lowest judged interval accept length against p, with each
#          depth's calibrated threshold; the p nearest the incident's rate
#          at depth 5 marked
# usage: scripts/studies/canary_power_plot.sh OUT [P_INCIDENT=0.015]   (writes OUT/power.png and OUT/power.svg)
set -euo pipefail
OUT="$1"; PI="${2:-0.015}"
CSV="$OUT/launches.csv"
[ -s "$CSV" ] || { echo "canary_power_plot: no $CSV" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "canary_power_plot: gnuplot not found; no figure" >&2; exit 0; }
for d in 3 5 7; do
  # p, canary detection, interval-signature rate, corrupted per 1,000, lowest accept length, threshold
  awk -F, -v d="$d" '$1=="power" && $3==d { k=$4; if (!(k in n)) order[++no]=k; n[k]++; if ($6==1) f[k]++; if ($14>0) iv[k]++;
        if ($16!="") { sh[k]+=$16; ns[k]++ } if ($11!="" && (!(k in lo) || $11+0<lo[k]+0)) lo[k]=$11; thr[k]=$12 }
      END { for (i=1; i<=no; i++) { k=order[i]; printf "%s %.4f %.4f %.1f %s %s\n", k, f[k]/n[k], iv[k]/n[k],
              ns[k] ? 1000*sh[k]/ns[k] : 0, (k in lo) ? lo[k] : "nan", thr[k] } }' "$CSV" | sort -g >"$OUT/power-d$d.dat"
done
for fmt in png svg; do
  if [ "$fmt" = png ]; then term="pngcairo size 1100,440 font ',10'"; else term="svg size 1100,440 font 'sans,10'"; fi
  gnuplot <<EOF
set terminal $term
set output "$OUT/power.$fmt"
set termoption noenhanced
set multiplot layout 1,2 title "collision fault, tests/fixtures/qwen3-tied drafting for itself: canary power"
set logscale x; set grid
set xlabel "corrupted requests per 1,000 (measured)"; set ylabel "detection rate (launches)"; set yrange [-0.05:1.1]
set arrow 1 from 39, graph 0 to 39, graph 1 nohead dt 2 lc rgb "black"
set label 1 "incident: ~39 / 1,000" at 39, graph 0.5 rotate by 90 offset -1,0
set key at graph 0.98, graph 0.75 right
plot "$OUT/power-d3.dat" u 4:2 w lp lc 1 pt 7 t "canary, depth 3", \
     "$OUT/power-d5.dat" u 4:2 w lp lc 2 pt 7 t "canary, depth 5", \
     "$OUT/power-d7.dat" u 4:2 w lp lc 3 pt 7 t "canary, depth 7", \
     "$OUT/power-d3.dat" u 4:3 w lp lc 1 pt 6 dt 2 t "interval signature, depth 3", \
     "$OUT/power-d5.dat" u 4:3 w lp lc 2 pt 6 dt 2 t "interval signature, depth 5", \
     "$OUT/power-d7.dat" u 4:3 w lp lc 3 pt 6 dt 2 t "interval signature, depth 7"
unset arrow 1; unset label 1
set xlabel "fault probability p per eligible verify step"; set ylabel "lowest judged interval accept length"; set yrange [1:*]
set arrow 2 from $PI, graph 0 to $PI, graph 1 nohead dt 2 lc rgb "black"
set label 2 "incident's rate, depth 5 (p=$PI)" at $PI, graph 0.3 rotate by 90 offset -1,0
set key default; set key inside bottom left Left reverse samplen 2 box opaque
plot "$OUT/power-d3.dat" u 1:5 w lp lc 1 pt 7 t "depth 3", "$OUT/power-d3.dat" u 1:6 w l lc 1 lw 2 dt 3 t "threshold, depth 3", \
     "$OUT/power-d5.dat" u 1:5 w lp lc 2 pt 7 t "depth 5", "$OUT/power-d5.dat" u 1:6 w l lc 2 lw 2 dt 3 t "threshold, depth 5", \
     "$OUT/power-d7.dat" u 1:5 w lp lc 3 pt 7 t "depth 7", "$OUT/power-d7.dat" u 1:6 w l lc 3 lw 2 dt 3 t "threshold, depth 7"
unset multiplot
EOF
done
echo "figure: $OUT/power.png, $OUT/power.svg"

# cli_plot.sh - the plot scripts behind `bench moe --png` and `bench allreduce --png`, sourced
# by tests/cli.sh (uses its $T, expect_rc and expect_out): each draws a PNG from a committed
# bench JSON. The benchmarks themselves need GPUs; their --png only runs these scripts on the
# JSON they wrote. Skipped, with a line saying so, where python3 has no matplotlib.
_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
expect_out "bench moe --png without --json is refused" "needs --json|this build has no CUDA" "$T" bench moe --png /tmp/x.png
if python3 -c "import matplotlib" 2>/dev/null; then
  for _c in "plot_moe.py:r248/status.json:png_first" "plot_allreduce.py:final5/allreduce_h200x2.json:json_first"; do
    IFS=: read -r _s _j _o <<< "$_c"
    _png=/tmp/cli_plot.$$.png
    rm -f "$_png"
    if [ "$_o" = png_first ]; then python3 "$_src/bench/$_s" "$_png" "$_src/bench/results/$_j" >/dev/null 2>&1
    else python3 "$_src/bench/$_s" "$_src/bench/results/$_j" "$_png" >/dev/null 2>&1; fi
    if [ "$(head -c 8 "$_png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
      ok "$_s draws a PNG from bench/results/$_j"
    else
      bad "$_s draws a PNG from bench/results/$_j"
    fi
    rm -f "$_png"
  done
else
  echo "skip - plot_moe.py / plot_allreduce.py: python3 has no matplotlib"
fi

#!/usr/bin/env bash
# run_r251_h200.sh - one GPU, into $OUT/r251: the independent NumPy layer (tests/indep/moe_ref.py,
# fp64, from the specification) against the CUDA backend of round 45's library at the two ends
# of the issue's token range, 1 and 16384 tokens (TP 1; 1 token also TP 2, both ranks on the one
# GPU, TPMOE_CUDA_SHARE_GPU=1: checked, not timed), which r200 / r203 / r250 did not run. On an
# H200 it first runs r249 (r248's GPU tests and the issue's table, into $OUT/r249) and then also
# r250's 1000 / 8193-token cases, so that the H200 has its own check of the current library.
# It also times TP rank 0's share of a TP 2 layer, fused and unfused, at 1-8 tokens (`--shard 2`,
# two passes), and runs `bench moe --json --png` once (the mini preset, 1 and 64 tokens) to show the plot
# step on the GPU build (plot.log says if the machine's python3 has no matplotlib).
# Binaries: prebuilt/bin.txz, compact Release builds of 781defe's sources: the CUDA library's
# sources as baa3ea9's (r248's binaries); since then the CPU expert lanes (same bits), bench moe
# --png and a freed buffer in `tpmoe moe --input`.
# Order (a short lease keeps what finished; each step packs): the shard timing, the plot, the
# independent checks, each preset's paths (`bench moe --check 1`), targets_moe.py.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r251_h200.sh
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
cases="1:1:60 1:2:60 16384:1:300"
case "$card" in *H200*) (bash bench/runs/run_r249_h200.sh); cases="$cases 1000:1:120 8193:1:200" ;; esac
NAME=r251
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
python3 -c "import numpy; print('numpy', numpy.__version__)" 2>&1 | tee "$R/numpy.txt"
# TP rank 0's share of a TP 2 layer alone (no all-reduce), fused and unfused, 1-8 tokens: where the
# TP 2 block's 1.1x target stands on the current library (r216 ran it on round 36), two passes
for pass in a b; do
  timeout 90 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 --shard 2 --fuse-shared both \
    --tokens 1,2,4,8 --json "$R/tp2_$pass.json" > "$R/tp2_$pass.log" 2>&1
  printf "== shard 2 pass %s rc=%d (%s): " $pass $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s | ", $1, $2, $15}' "$R/tp2_$pass.log"; echo
done
pack
timeout 60 "$B/tpmoe" bench moe --preset m3-mini --tokens 1,64 --fuse-shared both --gemm-hold 0 \
  --json "$R/plot.json" --png "$R/plot.png" > "$R/plot.log" 2>&1
echo "== bench moe --png rc=$? ($(ls "$R"/plot.png 2>/dev/null || echo no png)); $(grep -i plot "$R/plot.log" | head -2)"
pack
for c in $cases; do
  IFS=: read -r tok tp tl <<< "$c"
  TPMOE_CUDA_SHARE_GPU=$((tp > 1)) timeout $tl python3 tests/indep/moe_ref.py --tool "$B/tpmoe" --backend cuda \
    --tp $tp --full --tokens $tok --workdir /tmp/indep_$tok > "$R/indep_cuda_t${tok}_tp$tp.log" 2>&1
  echo "== indep cuda T=$tok TP $tp rc=$? ($(el))"; grep -E "^FAIL" "$R/indep_cuda_t${tok}_tp$tp.log" | head -5
  tail -1 "$R/indep_cuda_t${tok}_tp$tp.log"
  pack
done
for pr in m3-mini deepseek-v3-mini gpt-oss-mini; do
  timeout 60 "$B/tpmoe" bench moe --preset $pr --fuse-shared 1 --check 1 --tokens 1,16384 > "$R/modes_$pr.log" 2>&1
  echo "== modes $pr rc=$?: $(sed -n '/^tokens/,$p' "$R/modes_$pr.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $4, $5, $7}')"
  pack
done
[ -f "$OUT/r249/status.json" ] && python3 bench/targets_moe.py "$OUT/r249/status.json" > "$R/targets_r249.log" 2>&1
[ -f "$R/targets_r249.log" ] && tail -1 "$R/targets_r249.log"
pack
echo "== r251 done ($(el))"

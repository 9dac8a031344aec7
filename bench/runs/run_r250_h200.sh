#!/usr/bin/env bash
# run_r250_h200.sh - one GPU, into $OUT/r250: the independent NumPy layer (tests/indep/moe_ref.py,
# fp64, written from the specification) against the CUDA backend of round 45's library at sizes
# that run the own prefill GEMM's persistent forms (3 below 4096 tokens, the 2-CTA clusters (2)
# from 4096; the split plan from 8193), where rounds 33-45 changed the code since r200 / r203 ran
# this check: 11, 200, 1000, 4097 and 8193 tokens, every preset, seed and fusion at TP 1, and at
# 11 and 1000 tokens at TP 2 (both ranks on the one GPU, TPMOE_CUDA_SHARE_GPU=1: checked, not timed). Each
# preset's paths at those sizes (columns plan, gemm, route) come from `bench moe --check 1`.
# On an H200 it first runs r249 (r248's GPU tests and the issue's table, into $OUT/r249).
# Binaries: prebuilt/bin.txz as r248's (compact Release builds of baa3ea9).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r250_h200.sh
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$card" in *H200*) (bash bench/runs/run_r249_h200.sh) ;; esac
NAME=r250
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
python3 -c "import numpy; print('numpy', numpy.__version__)" 2>&1 | tee "$R/numpy.txt"
for pr in m3-mini deepseek-v3-mini gpt-oss-mini; do
  timeout 60 "$B/tpmoe" bench moe --preset $pr --fuse-shared 1 --check 1 --tokens 11,200,1000,4097,8193 > "$R/modes_$pr.log" 2>&1
  echo "== modes $pr rc=$?: $(sed -n '/^tokens/,$p' "$R/modes_$pr.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $4, $5, $7}')"
done
pack
for c in 4097:1:200 1000:1:120 1000:2:150 8193:1:240 200:1:90 11:1:90 11:2:90; do
  IFS=: read -r tok tp tl <<< "$c"
  TPMOE_CUDA_SHARE_GPU=$((tp > 1)) timeout $tl python3 tests/indep/moe_ref.py --tool "$B/tpmoe" --backend cuda \
    --tp $tp --full --tokens $tok --workdir /tmp/indep_$tok > "$R/indep_cuda_t${tok}_tp$tp.log" 2>&1
  echo "== indep cuda T=$tok TP $tp rc=$? ($(el))"; grep -E "^FAIL" "$R/indep_cuda_t${tok}_tp$tp.log" | head -5
  tail -1 "$R/indep_cuda_t${tok}_tp$tp.log"
  pack
done
echo "== r250 done ($(el))"

#!/usr/bin/env bash
# run_r200_h200.sh - one GPU (H200 asked; an H100 may come):
#   0. on an H200 only: r199's script (r197's and r198's H200 figures) into $OUT/r197 and $OUT/r199;
#   1. on any card, into $OUT/r200: the independent NumPy layer (tests/indep/moe_ref.py, written
#      from the spec, not from tpmoe's code) against `tpmoe moe --backend cuda` on this tree,
#      mini presets, TP 1, every weight source (--full), at token counts that take each routing
#      form of today's defaults: 5 (mode 1, one tile), 11 (mode 1, wide), 20 (mode 1, 8-token
#      tiles and the bitmap permutation), 37 and 200 (mode 3, pipelined loads; 200: four token
#      tiles), 300 (mode 2, the router GEMM). final20_indep ran 5 / 37 / 300 on the tree of
#      round 14, before routing rounds 26-32.
# Binaries: prebuilt/bin.txz (compact builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r200_h200.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash bench/runs/run_r199_h200.sh
fi
NAME=r200
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
python3 -c "import numpy; print('numpy', numpy.__version__)" 2>&1 | tee "$R/numpy.txt"
for tok in 5 11 20 37 200 300; do
  timeout 200 python3 tests/indep/moe_ref.py --tool "$B/tpmoe" --backend cuda --tp 1 --full --tokens $tok \
    --workdir /tmp/indep_$tok > "$R/indep_cuda_t$tok.log" 2>&1
  echo "== indep cuda T=$tok rc=$? ($(el))"; grep -E "^FAIL" "$R/indep_cuda_t$tok.log" | head -5; tail -1 "$R/indep_cuda_t$tok.log"
done
for pr in m3-mini deepseek-v3-mini gpt-oss-mini; do # the routing mode of each size (column route)
  timeout 100 "$B/tpmoe" bench moe --preset $pr --fuse-shared 1 --check 1 --tokens 5,11,20,37,200,300 > "$R/modes_$pr.log" 2>&1
  echo "== modes $pr rc=$?: $(sed -n '/^tokens/,$p' "$R/modes_$pr.log" | awk 'NR > 1 {printf "%s:%s ", $1, $7}')"
done
pack
echo "== r200 done ($(el))"

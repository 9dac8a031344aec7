#!/usr/bin/env bash
# run_final20_indep_h200.sh - the independent NumPy layer (tests/indep/moe_ref.py) against
# `tpmoe moe --backend cuda` again, into $OUT/final20_indep, after final20_moe's run showed the
# CUDA backend outside the CPU backend's bounds (2.2-3.9e-3 with a shared expert; the script now
# holds it to its own documented rounding, 5e-3). Mini presets, TP 1, 5 / 37 / 300 tokens.
# Binaries (prebuilt/bin.txz): final20_moe's (tpmoe of the final tree).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final20_indep_h200.sh
NAME=final20_indep
. bench/device_env.sh
for tok in 5 37 300; do
  timeout 200 python3 tests/indep/moe_ref.py --tool "$B/tpmoe" --backend cuda --tp 1 --full --tokens $tok \
    --workdir /tmp/indep_$tok > "$R/indep_cuda_t$tok.log" 2>&1
  echo "== indep cuda T=$tok rc=$? ($(el))"; grep -E "^FAIL|^  " "$R/indep_cuda_t$tok.log" | head -5; tail -1 "$R/indep_cuda_t$tok.log"
done
pack
echo "== total $(el)"

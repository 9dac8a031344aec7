#!/usr/bin/env bash
# run_r11_h200x2.sh - round 11 on one device call: tpmoe's own wgmma/TMA
# grouped GEMM for the prefill experts (prefill_gemm 3) against cuBLAS over 4
# streams, and the shared MLP beside the routing (shared_overlap) at 1-8
# tokens, then every gpu_moe test. Binaries (tpmoe, gpu_moe) carried in
# prebuilt/bin.txz. Run from the repository root:
#   OUT=/some/dir bash bench/runs/run_r11_h200x2.sh
NAME=${NAME:-r11}
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
for g in wgmma streams; do
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens ${PF_TOKENS:-128,1024,8192} --fuse-shared 1 --check 2 \
    --prefill-gemm $g --reps 10 --json "$R/moe_prefill_$g.json" > "$R/bench_moe_prefill_$g.log" 2>&1
  echo "== bench moe prefill $g rc=$? ($(el))"
  grep -E "^[0-9]|error|FAIL" "$R/bench_moe_prefill_$g.log" | cut -c1-220
done
for ov in 1 0; do
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,4,8 --fuse-shared both --check 2 --shared-overlap $ov \
    --json "$R/moe_decode_ov$ov.json" > "$R/bench_moe_decode_ov$ov.log" 2>&1
  echo "== bench moe decode overlap $ov rc=$? ($(el))"
  grep -E "^[0-9]|error|FAIL" "$R/bench_moe_decode_ov$ov.log" | cut -c1-220
done
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|prefill gemm 3" "$R/gpu_moe.log" | head -30
pack
echo "== total $(el)"

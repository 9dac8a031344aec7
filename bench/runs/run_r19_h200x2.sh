#!/usr/bin/env bash
# run_r19_h200x2.sh - round 19: the decode down projection with warp-sized work
# items (k_down5, --down-kernel 2) against k_down2 (block items, 0), 1-8 tokens,
# twice each in alternation; every gpu_moe test. Binaries (tpmoe, gpu_moe) in
# prebuilt/bin.txz.   OUT=/some/dir bash bench/runs/run_r19_h200x2.sh
NAME=${NAME:-r19}
. bench/device_env.sh
for pass in a b; do
  for dk in 0 2; do
    timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --check 2 --down-kernel $dk \
      --reps 40 --json "$R/moe_decode_dk${dk}_$pass.json" > "$R/bench_moe_decode_dk${dk}_$pass.log" 2>&1
    echo "== bench moe decode down kernel $dk pass $pass rc=$? ($(el))"
    grep -E "^[0-9]|error|FAIL" "$R/bench_moe_decode_dk${dk}_$pass.log" | cut -c1-220
  done
done
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -10
grep -c "k_down4, k_down5) == set 0" "$R/gpu_moe.log"
pack
echo "== total $(el)"

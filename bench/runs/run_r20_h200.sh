#!/usr/bin/env bash
# run_r20_h200.sh - round 20: the combine loads its routing data before
# griddepcontrol.wait (tpmoe) against the previous tree's binary (tpmoe_before,
# commit c537994's code), decode 1-8 tokens, alternating, then every gpu_moe
# test. Binaries in prebuilt/bin.txz.   OUT=/some/dir bash bench/runs/run_r20_h200.sh
NAME=${NAME:-r20}
. bench/device_env.sh
for pass in a b; do
  for bin in tpmoe_before tpmoe; do
    timeout 100 "$B/$bin" bench moe --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --check 2 \
      --reps 40 --json "$R/moe_decode_${bin}_$pass.json" > "$R/bench_moe_decode_${bin}_$pass.log" 2>&1
    echo "== bench moe decode $bin pass $pass rc=$? ($(el))"
    grep -E "^[0-9]|error|FAIL" "$R/bench_moe_decode_${bin}_$pass.log" | cut -c1-220
  done
done
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -10
pack
echo "== total $(el)"

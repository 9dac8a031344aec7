#!/usr/bin/env bash
# run_r38_h200.sh - the routing's block-done tickets as a barrier and one acq_rel atomic
# (route_fence 0) against every thread fencing around them (1), one H200: gpu_moe on the new
# default; the layer at 1-128 tokens with both, two passes in alternation.
#   NAME=r38 OUT=/some/dir bash bench/runs/run_r38_h200.sh
NAME=${NAME:-r38}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -6
pack
for pass in a b; do
  for f in 0 1; do
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,16,64,128 --fuse-shared 1 --check 1 --reps 30 \
      --route-fence $f --json "$R/fence${f}_$pass.json" > "$R/fence${f}_$pass.log" 2>&1
    echo "== route_fence $f $pass rc=$? ($(el))"
    grep -E "^[0-9]" "$R/fence${f}_$pass.log" | awk '{print $1, $11, $15, $18, $20}' | tr '\n' ';'; echo
  done
done
pack
echo "== total $(el)"

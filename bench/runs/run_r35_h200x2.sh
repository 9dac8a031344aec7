#!/usr/bin/env bash
# run_r35_h200x2.sh - on 2 x H200: the fused layer's EP split plan (the shared expert dense on
# EP rank 0 at 4-8 tokens, as the unfused layer) and the routing launch built for 2 / 4 tokens:
# gpu_moe, gpu_moe_api; EP 2 fused and unfused at 1-8 tokens; TP 1 at 1-8 tokens against the
# previous build (prebuilt/tpmoe_before), two passes in alternation.
#   NAME=r35 OUT=/some/dir bash bench/runs/run_r35_h200x2.sh
NAME=${NAME:-r35}
. bench/device_env.sh
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -6
done
pack
for bin in tpmoe tpmoe_before; do
  timeout 90 "$B/$bin" bench moe --preset m3 --tokens 1,4,8 --tp 1 --ep 2 --fuse-shared both --check 1 \
    --json "$R/ep2_$bin.json" > "$R/ep2_$bin.log" 2>&1
  echo "== ep2 $bin rc=$? ($(el))"
  grep -E "^[0-9]" "$R/ep2_$bin.log" | awk '{print $1, $2, $4, $10, $11, $12, $15, $19, $20}'
done
pack
for pass in a b; do
  for bin in tpmoe tpmoe_before; do
    timeout 60 "$B/$bin" bench moe --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --check 1 --reps 30 \
      --json "$R/tp1_${bin}_$pass.json" > "$R/tp1_${bin}_$pass.log" 2>&1
    echo "== tp1 $bin $pass rc=$? ($(el))"
    grep -E "^[0-9]" "$R/tp1_${bin}_$pass.log" | awk '{print $1, $10, $11, $12, $15, $19}' | tr '\n' ';'; echo
  done
done
pack
echo "== total $(el)"

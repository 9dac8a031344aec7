#!/usr/bin/env bash
# run_r151_h200.sh - one H200, into $OUT/r151: the MoE command on the final library of
# the session (the prefill's early shared gate_up items on below 4096 tokens), three passes
# (pass 1 -> moe_m3_tp1.json):
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe of the commit that adds this script (GPU tests: r150).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r151_h200.sh
NAME=r151
. bench/device_env.sh
for p in 1 2 3; do
  j=$R/moe_m3_tp1.json; [ $p -gt 1 ] && j=$R/moe_m3_tp1_pass$p.json
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$j" > "$R/bench_moe_tp1_p$p.log" 2>&1
  echo "== bench moe m3 tp1 pass $p rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s: %s %s x%s %s | ", $1, $2, $4, $15, $18, $NF}' "$R/bench_moe_tp1_p$p.log"; echo
  pack
done
echo "== total $(el)"

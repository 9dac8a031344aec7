#!/usr/bin/env bash
# run_r154b_h200.sh - one H200, into $OUT/r154b: r154 again, with the gate_up launch triggering its
# dependents at its start instead of after its last take (the prefill's down launch chained to
# gate_up, tuning.prefill_down_early).
#   gpu_moe_paths (prefill_early_equals_plain with the chained down, eager and in a graph);
#   three passes interleaved, fused and unfused:
#     tpmoe bench moe --preset m3 --tokens 64,128,512,1024,2048,4096,8192 --fuse-shared both --check 2
#       --prefill-down-early 1 | --prefill-down-early 0
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_paths of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r154b_h200.sh
NAME=r154b
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|T=4500 the early" "$1" | head -12; }
for t in gpu_moe_paths; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
bm() { # name extra...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 64,128,512,1024,2048,4096,8192 --fuse-shared both \
    --check 2 --json "$R/$n.json" "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s: %s %s | ", $1, $2, $15, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "chain_p$p" --prefill-down-early 1
  bm "plain_p$p" --prefill-down-early 0
  pack
done
echo "== total $(el)"

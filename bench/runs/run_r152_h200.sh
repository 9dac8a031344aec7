#!/usr/bin/env bash
# run_r152_h200.sh - one H200, into $OUT/r152: the prefill GEMM with the wgmma sides swapped
# (prefill_cluster 4, moe_cuda_gemm_swap_sm90a.cu) against the default forms.
#   gpu_moe_paths (prefill_gemm_modes: form 4 bit for bit against the other forms), gpu_moe;
#   three passes interleaved, fused layer:
#     tpmoe bench moe --preset m3 --tokens 512,1024,2048,4096,8192,16384 --fuse-shared 1 --check 2
#       [--prefill-cluster 4] [--shared-plan slot]
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r152_h200.sh
NAME=r152
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|prefill gemm 1[12]" "$1" | head -24; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
bm() { # name extra...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 512,1024,2048,4096,8192,16384 --fuse-shared 1 \
    --check 2 --json "$R/$n.json" "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s: %s %s %s | ", $1, $4, $15, $19, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "def_p$p"
  bm "swap_p$p" --prefill-cluster 4
  bm "swapslot_p$p" --prefill-cluster 4 --shared-plan slot
  pack
done
echo "== total $(el)"

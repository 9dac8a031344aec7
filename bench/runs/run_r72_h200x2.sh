#!/usr/bin/env bash
# run_r72_h200x2.sh - the release check of round 12's tree (run_final14_h200x2.sh:
# every GPU test, the TP 2 MoE CLI check, the whole all-reduce table on the
# default set 10) and, in the same call, the world-2 codec pipeline with each
# step's loads issued together (tpmoe_e1: a variant of commit 151f853's
# cuda_twoshot_ll.cu whose run2 loaded A's input, B's input and payload and
# C's payload of a step before any of its arithmetic; measured slower and not
# kept, docs/allreduce_cuda_rounds.md round 12; linked ahead of the same libtpmoe.a)
# against the release build, codecs at 8 / 32 / 96 MB, two passes in turn.
# Binaries (prebuilt/bin.txz): tpmoe, tpmoe_e1, gpu_allreduce, gpu_comm_api, gpu_moe, gpu_moe_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r72_h200x2.sh
bash bench/runs/run_final14_h200x2.sh
NAME=r72
. bench/device_env.sh
for pass in 1 2; do
  for bin in tpmoe tpmoe_e1; do
    timeout 100 "$B/$bin" bench allreduce --tp 2 --dtype bf16 --codecs int8,int6,int4,int4_h,int6_h \
      --sizes 8M,32M,96M --json "$R/ab_${bin}_$pass.json" > "$R/ab_${bin}_$pass.log" 2>&1
    echo "== $bin pass $pass rc=$? ($(el))"
    grep -E "^ +[0-9]+ int" "$R/ab_${bin}_$pass.log" | awk -v b=$bin '{print b, $1, $2, $4}'
  done
done | tee "$R/ab.txt"
pack
echo "== total $(el)"

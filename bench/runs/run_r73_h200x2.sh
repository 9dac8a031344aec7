#!/usr/bin/env bash
# run_r73_h200x2.sh - the warp-specialized two-shot (set 10's exact kernel from
# 16 MB) releasing its flags once per two columns instead of every column
# (a variant of commit 0e7a0de's cuda_twoshot_ws.cu, TPM_WS_PAIR: roles A and
# B push two columns, then one role barrier and both flags' st.release.sys;
# measured slower and not kept, so its source is not in the tree), on 2 x H200:
# gpu_allreduce with that object (bitwise checks, the 24 MB ws launches with a
# ragged tail and odd column counts), then exact bf16 at 8-128 MB against the
# release build, three passes in turn.
# Binaries (prebuilt/ws.txz): tpmoe (release), tpmoe_pair and gpu_allreduce_pair
# (the same library with the TPM_WS_PAIR=1 object linked ahead of libtpmoe.a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r73_h200x2.sh
NAME=${NAME:-r73}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
TPMOE_TOOL=$B/tpmoe_pair timeout 150 "$B/gpu_allreduce_pair" > "$R/gpu_allreduce_pair.log" 2>&1
echo "== gpu_allreduce (pair) rc=$? ($(el))"; ok "$R/gpu_allreduce_pair.log"
for pass in 1 2 3; do
  for bin in tpmoe tpmoe_pair; do
    timeout 100 "$B/$bin" bench allreduce --tp 2 --dtype bf16 --codecs none \
      --sizes 8M,16M,32M,64M,96M,128M --json "$R/ab_${bin}_$pass.json" > "$R/ab_${bin}_$pass.log" 2>&1
    echo "== $bin pass $pass rc=$? ($(el))"
    grep -E "^ +[0-9]+ none" "$R/ab_${bin}_$pass.log" | awk -v b=$bin '{print b, $1, $3, $4}'
  done
done | tee "$R/ab.txt"
pack
echo "== total $(el)"

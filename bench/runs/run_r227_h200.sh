#!/usr/bin/env bash
# run_r227_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r227: round 38's second
# step, cut to what the session's last device minutes hold. r226's probe had HEAD's kernel 10-27%
# faster without its epilogue; two fixes, each in its own wg_probe binary (bench/micro/wg_probe.cu
# with -DWG_SRC):
#   staged: the epilogue staged through shared memory (16 KB per consumer warpgroup) and stored
#           by the threads in 16-byte row pieces; the registers split by setmaxnreg (56 / 224);
#   tma:    the same staging in the output maps' 128-byte-swizzled boxes, full 64-row blocks
#           stored by TMA (cp.async.bulk.tensor, bulk groups) while the warpgroup goes on;
# against head (HEAD's kernel) and noepi (no epilogue, timing only). Order: head, tma, staged,
# noepi, then head, tma, staged again. Every binary prints a fingerprint of the output rows per
# layout and form (poisoned before): head, tma and staged must agree.
# Binaries: prebuilt/bin.txz (wg_probe_{head,tma,staged,noepi}, stripped).
NAME=r227
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv > "$R/smi.txt" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 250 > "$R/clocks.csv" 2>&1 &
SMI=$!
pr() {
  timeout 60 "$B/wg_probe_$1" --json "$R/probe_$1_$2.json" > "$R/probe_$1_$2.log" 2>&1
  echo "== probe $1 $2 rc=$? ($(el))"; grep -v "^device\|^layout" "$R/probe_$1_$2.log" | awk '{printf "%s/%s:%s:%s ", $1, $2, $7, substr($11, 1, 6)} END {print ""}'
  pack
}
for v in head tma staged noepi; do pr $v a; done
for v in head tma staged; do pr $v b; done
kill $SMI 2>/dev/null
pack
echo "== r227 done ($(el))"

#!/usr/bin/env bash
# run_r247_h200.sh - one GPU (an H100 or H200): with WITH_R246 set, first r246 (into $OUT/r246),
# then, into $OUT/r247, the prefill GEMM's A half skipped (the change committed as 324be90 after
# this run: a row tile of at most 64 valid rows loads only its first 64 A rows; CL odd items:
# rank 1's multicast half is not sent):
#   1. the patched build's GPU tests (gpu_moe_paths, gpu_moe, gpu_moe_api; not with SKIP_TESTS);
#   2. wg_probe, HEAD's kernel against the patched one (if packed), 200 calls per layout and form, in turn
#      (new ah new ah): m3rr, m3r4k, even, thin (form 2), m3r1k (form 3); the fingerprints
#      must be equal;
#   3. the fused layer at 1024, 4096 and 8192 tokens, in turn (new ah new ah):
#      tpmoe[_ah] bench moe --preset m3 --tokens 1024,4096,8192 --fuse-shared 1 --check 2
# Binaries: prebuilt/bin.txz (stripped): r246's (tpmoe, gpu_act, gpu_moe, gpu_moe_paths,
# gpu_moe_api: compact Release builds of 75fdd1e) and tpmoe_ah, gpu_moe_ah, gpu_moe_paths_ah,
# gpu_moe_api_ah (the same build + the change), wg_new / wg_ah (bench/micro/wg_probe.cu with
# HEAD's / the patched moe_cuda_gemm_sm90a.cu, against build-crel/libtpmoe.a).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r247_h200.sh
[ -n "${WITH_R246:-}" ] && OUT=${OUT:-out} bash bench/runs/run_r246_h200.sh
NAME=r247
. bench/device_env.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>&1 &
S=$!
[ -z "${SKIP_TESTS:-}" ] && for t in gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 150 "$B/${t}_ah" > "$R/${t}_ah.log" 2>&1
  echo "== ${t}_ah rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/${t}_ah.log" | head -5
done
pack
[ -x "$B/wg_ah" ] && for lf in m3rr:2 m3r4k:2 even:2 thin:2 m3r1k:3; do
  l=${lf%:*}; f=${lf#*:}
  for p in 1 2; do
    for v in new ah; do
      n=probe_${l}_${v}_$p
      timeout 60 "$B/wg_$v" --layout $l --form $f --reps 200 --json "$R/$n.json" > "$R/$n.log" 2>&1
      printf "== %-22s rc=%d (%s): " $n $? "$(el)"; awk '$1=="'$l'"{print $5, $7, $8, $11}' "$R/$n.log"
    done
  done
  pack
done
for p in a b; do
  for v in "" _ah; do
    n=layer${v:-_new}_$p
    timeout 60 "$B/tpmoe$v" bench moe --preset m3 --tokens 1024,4096,8192 --fuse-shared 1 --check 2 \
      --json "$R/$n.json" > "$R/$n.log" 2>&1
    printf "== %-14s rc=%d (%s): " $n $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s | ", $1, $15, $18, $19, $20}' "$R/$n.log"; echo
    pack
  done
done
kill $S 2>/dev/null
pack
echo "== r247 done ($(el))"

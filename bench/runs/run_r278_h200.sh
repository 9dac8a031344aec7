#!/usr/bin/env bash
# run_r278_h200.sh - one GPU, into $OUT/r278: round 51's fp32 router fragments in routing mode 3
# (--route-tc-loads pipef32: wrf's fp32 words split into hi / mid / lo in registers, two thirds of
# wr3f's bytes) against the default pipelined loads from wr3f (pipe), and pipef32 with four register
# stages instead of three (tpmoe_p4: built with -DTPM_TC_PIPE3=4), and pipef32 on 8 clusters
# (--route-tc-clusters 8: fewer partials per token, more chunks per CTA), fused layer, three passes
# in rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 25,32,48,64,96,128,160,192,256 --route-tc-loads pipe|pipef32 [--route-tc-clusters 8]
# then gpu_moe (the fp32 loads' bits against the others; poll_sum re-applied) and gpu_moe_paths,
# then the trace build's routing steps at 32, 128 and 256 tokens with pipe and pipef32.
# Binaries: prebuilt/bin.txz (compact Release tpmoe and tpmoe_p4, the GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r278_h200.sh
NAME=r278
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=25,32,48,64,96,128,160,192,256
for pass in a b c; do
  case $pass in a) order="pipe f32 f32p4 f32c8" ;; b) order="f32 f32c8 pipe f32p4" ;; c) order="f32p4 f32c8 f32 pipe" ;; esac
  for v in $order; do
    bin=$B/tpmoe; ld="pipef32"
    [ $v = pipe ] && ld=pipe
    [ $v = f32p4 ] && bin=$B/tpmoe_p4
    [ $v = f32c8 ] && ld="pipef32 --route-tc-clusters 8"
    tag=${pass}_$v
    timeout 90 "$bin" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK --route-tc-loads $ld \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for t in gpu_moe gpu_moe_paths; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
for ld in pipe pipef32; do
  tag=trace_$ld
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 32,128,256 --route-tc-loads $ld --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block|first / last block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
echo "== r278 done ($(el))"

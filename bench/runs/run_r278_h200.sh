#!/usr/bin/env bash
# run_r278_h200.sh - one GPU, into $OUT/r278: round 51's changes to the routing, fused layer, three
# passes in rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 1,8,16,25,32,64,128,256 --route-tc-loads pipe|pipef32 [--route-poll 15]
# Variants:
#   old     tpmoe_rel (built with -DTPM_TC_ARRIVE_RELEASE=1: the end's cluster arrive with release
#           semantics, a MEMBAR.ALL.GPU after the partials' stores; and before select_token_sig4),
#           --route-tc-loads pipe: r277's routing
#   pipe    tpmoe (the arrive relaxed; the M3 selection select_token_sig4: 1-24 tokens differ from
#           old by it alone), --route-tc-loads pipe
#   f32     tpmoe, --route-tc-loads pipef32 (wrf's fp32 words split into hi / mid / lo in
#           registers: two thirds of wr3f's bytes)
#   push    tpmoe, --route-tc-loads pipef32 --route-poll 15 (the partial tiles pushed into the
#           summing rank's shared memory with st.async: no release fence, barrier or remote reads)
# then route_tail (bench/micro: select_token, now select_token_sig4 for M3's shape, against
# select_token_pl bit for bit on random, tied, NaN, infinite, very negative, denormal logits; their
# cycles), gpu_moe (the new forms' bits against the others; poll_sum re-applied), gpu_moe_paths,
# gpu_act and gpu_moe_api,
# then the trace build's routing steps at 32, 128 and 256 tokens with pipe and push.
# Binaries: prebuilt/bin.txz (compact Release tpmoe, tpmoe_rel, the GPU tests, tpmoe_trace,
# route_tail).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r278_h200.sh
NAME=r278
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=1,8,16,25,32,64,128,256
for pass in a b c; do
  case $pass in
    a) order="old pipe f32 push" ;;
    b) order="push old f32 pipe" ;;
    c) order="f32 push pipe old" ;;
  esac
  for v in $order; do
    bin=$B/tpmoe; ld="pipef32"
    case $v in
      old) bin=$B/tpmoe_rel; ld=pipe ;;
      pipe) ld=pipe ;;
      push) ld="pipef32 --route-poll 15" ;;
    esac
    tag=${pass}_$v
    timeout 90 "$bin" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK --route-tc-loads $ld \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
timeout 60 "$B/route_tail" > "$R/route_tail.log" 2>&1
echo "== route_tail rc=$? ($(el))"; grep -E "cycles.*select|differ|equal" "$R/route_tail.log" | grep -v " 0 of " | head -12
for t in gpu_moe gpu_moe_paths gpu_act gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
for v in pipe push; do
  case $v in pipe) ld=pipe ;; push) ld="pipef32 --route-poll 15" ;; esac
  tag=trace_$v
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 32,128,256 --route-tc-loads $ld --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block|first / last block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
echo "== r278 done ($(el))"

#!/usr/bin/env bash
# run_r207_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r207: r206's peers again
# (the second pass), cuBLAS's kernels of the 'ideal' bound named by torch.profiler, and tpmoe's
# layer with its own wgmma prefill GEMM against its cuBLAS prefill over 4 streams (eager: that
# path reads the per-expert sizes back) at 1024 and 8192 tokens, both sides of the peers.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r207_h200.sh
NAME=r207
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$R/smi_trace.csv" 2>&1 &
SMI=$!
ph() { echo "$(date +%s.%N) $1" >> "$R/phases.txt"; echo "== $1 ($(el))"; }
TK=1,8,32,128,1024,8192
bm() { # name args...
  local n=$1; shift
  timeout 100 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --check 1 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  echo "rc=$?"; sed -n '/^tokens/,$p' "$R/$n.log" | awk '{print $1, $4, $5, $10, $12, $13, $15, $18}'
}
ph tpmoe_a; bm tpmoe_a --tokens $TK; pack
ph gemm_a;  bm gemm_streams_a --tokens 1024,8192 --prefill-gemm streams; pack
ph peers_grouped_mm
timeout 90 python3 bench/peers/moe_peers.py --tokens $TK --peers grouped_mm --json "$R/peers_grouped_mm.json" > "$R/peers_grouped_mm.log" 2>&1
echo "rc=$?"; tail -8 "$R/peers_grouped_mm.log"; pack
ph peers_triton
timeout 240 python3 bench/peers/moe_peers.py --tokens $TK --peers triton,ideal --sweep-budget-s 40 --profile-ideal --json "$R/peers_triton.json" > "$R/peers_triton.log" 2>&1
echo "rc=$?"; grep -v "^#   sweep" "$R/peers_triton.log" | tail -24; pack
ph gemm_b;  bm gemm_streams_b --tokens 1024,8192 --prefill-gemm streams
ph tpmoe_b; bm tpmoe_b --tokens $TK
ph end
kill $SMI 2>/dev/null
pack
echo "== r207 done ($(el))"

#!/usr/bin/env bash
# run_r209_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r209: r208 again (an H200 asked for the machine); r206 again (tpmoe's
# layer, the command; the torch._grouped_mm peer; the Triton fused-MoE peer, best of a
# sweep, now 10 configs at prefill sizes; the cuBLAS bound with its kernels named; tpmoe again),
# each peer row now with its glue timed alone (routing + sort/align [+ gather]: what precedes
# its first GEMM). nvidia-smi samples power and clocks every 200 ms (smi_trace.csv, phases.txt).
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r209_h200.sh
NAME=r209
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$R/smi_trace.csv" 2>&1 &
SMI=$!
ph() { echo "$(date +%s.%N) $1" >> "$R/phases.txt"; echo "== $1 ($(el))"; }
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))' 2>&1 | tee "$R/versions.txt"
TK=1,8,32,128,1024,8192
ph tpmoe_a
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens $TK --fuse-shared both --check 2 --json "$R/tpmoe_a.json" > "$R/tpmoe_a.log" 2>&1
echo "rc=$?"; sed -n '/^tokens/,$p' "$R/tpmoe_a.log" | awk '{print $1, $2, $15, $17, $18, $20}'
pack
ph peers_grouped_mm
timeout 90 python3 bench/peers/moe_peers.py --tokens $TK --peers grouped_mm --json "$R/peers_grouped_mm.json" > "$R/peers_grouped_mm.log" 2>&1
echo "rc=$?"; grep -v "^#   sweep" "$R/peers_grouped_mm.log" | tail -12
pack
ph peers_triton
timeout 240 python3 bench/peers/moe_peers.py --tokens $TK --peers triton,ideal --sweep-budget-s 45 --profile-ideal --json "$R/peers_triton.json" > "$R/peers_triton.log" 2>&1
echo "rc=$?"; grep -v "^#   sweep" "$R/peers_triton.log" | tail -14
pack
ph tpmoe_b
timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens $TK --fuse-shared 1 --check 1 --json "$R/tpmoe_b.json" > "$R/tpmoe_b.log" 2>&1
echo "rc=$?"; sed -n '/^tokens/,$p' "$R/tpmoe_b.log" | awk '{print $1, $2, $15, $17, $18, $20}'
ph end
kill $SMI 2>/dev/null
pack
echo "== r209 done ($(el))"

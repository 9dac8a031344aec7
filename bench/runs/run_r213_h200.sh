#!/usr/bin/env bash
# run_r213_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r213: the decode layer's
# timeline at 4-8 tokens (r209: the Triton peer's GEMMs at 1.02x of the HBM floor at 8 tokens, tpmoe
# at 1.07x): which stream is short, k_gate_up2's or k_down2's? `bench moe --trace 30` of a
# -DTPMOE_MOE_TRACE=ON build (build-trace: %globaltimer marks in the decode kernels), fused, the
# default plans (slot at 4, split+ at 5-8) and the slot plan at 8, then the default build's table.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree), prebuilt/trace.txz (tpmoe of the
# trace build, compact Release, stripped).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && tar xJf prebuilt/trace.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r213_h200.sh
NAME=r213
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
M="$B/trace/tpmoe bench moe --preset m3 --check 1 --reps 40 --trace 30 --fuse-shared 1"
timeout 90 $M --tokens 4,5,6,8 > "$R/trace_default.log" 2>&1
echo "== default rc=$? ($(el))"; grep -E "^#  |^# T=|^[0-9]+ " "$R/trace_default.log" | cut -c1-170
timeout 60 $M --tokens 8 --shared-plan slot > "$R/trace_slot8.log" 2>&1
echo "== slot8 rc=$? ($(el))"; grep -E "^#  |^# T=|^[0-9]+ " "$R/trace_slot8.log" | cut -c1-170
pack
timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --fuse-shared 1 --tokens 4,5,6,8 --json "$R/plain.json" > "$R/plain.log" 2>&1
echo "== plain rc=$? ($(el))"; sed -n '/^tokens/,$p' "$R/plain.log" | awk '{print $1, $4, $11, $12, $13, $15, $16, $18}'
pack
echo "== r213 done ($(el))"

#!/usr/bin/env bash
# run_r226_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r226: round 38's first
# step, bench/micro/wg_probe on the own prefill GEMM at M3's shapes: one dense expert of 40960
# rows against the 8192-token layer's layouts (uniform, random, routed alone, shared alone, 8
# experts) with the same kernels, and cuBLAS on the dense GEMMs. Three binaries, each in both
# passes: wg_probe (HEAD's kernel, one ring of 4 x 48 KB), wg_probe_ring (b769d8b's two rings with
# 4 A + 5 weight stages, the variant round 37 did not measure) and wg_probe_noepi (HEAD's kernel
# without its epilogue: no activation, no stores; timing only). The SM clock and power are
# sampled beside them.
# Binaries: prebuilt/bin.txz (wg_probe, wg_probe_ring, wg_probe_noepi; see the top of bench/micro/wg_probe.cu).
NAME=r226
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 250 > "$R/clocks.csv" 2>&1 &
SMI=$!
for pass in a b; do
  for b in wg_probe wg_probe_ring wg_probe_noepi; do
    timeout 240 "$B/$b" --json "$R/${b}_$pass.json" > "$R/${b}_$pass.log" 2>&1
    echo "== $b $pass rc=$? ($(el))"; cat "$R/${b}_$pass.log"
    pack
  done
done
kill $SMI 2>/dev/null
pack
echo "== r226 done ($(el))"

#!/usr/bin/env bash
# run_r122_h200.sh - one H200, into $OUT/r122: r121's one failure after the EP fix, TP 2 x EP 2 at
# 256 tokens (world 4 sharing the GPU): rank 1's routing phase took 7.5 s by its events, the other
# ranks' all-reduces waited that long, and the output held NaN (no error). Which kernels are resident
# then? The case again with cuda-gdb attached after 7 s (as r117), then TP 4 and EP 2 at 256 tokens.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree (symbols kept).
# Run from the repository root:  OUT=/some/dir bash bench/run_r122_h200.sh
NAME=r122
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=15000
CG=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1)
case_() { # name, then tpmoe moe's arguments
  local n=$1; shift
  stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --check --iters 2 "$@" > "$R/$n.log" 2>&1 &
  local pid=$! i
  for i in $(seq 14); do sleep 0.5; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null && [ -n "$CG" ]; then
    timeout 90 "$CG" -batch -p $pid -ex "info cuda kernels" -ex "thread apply all bt 40" > "$R/$n.gdb" 2>&1
    echo "   (attached at $(el))"
  fi
  timeout 60 tail --pid=$pid -f /dev/null; wait $pid
  echo "== $n rc=$? ($(el))"; grep -E "ranks agree|: ok|rror|timeout|gave up" "$R/$n.log" | head -3
  [ -f "$R/$n.gdb" ] && grep -E "^\s+(Kernel|[0-9]+ +[0-9]+ )|^#[0-9]+ .* in (tpm_|k_|cu|cublas|rank_main|pthread|std::)|^Thread " "$R/$n.gdb" | head -60
}
case_ tp2ep2_t256 --preset m3-mini --tp 2 --ep 2 --tokens 256
case_ tp4_t256 --preset m3-mini --tp 4 --tokens 256
case_ ep2_t256 --preset m3-mini --ep 2 --tokens 256
pack
echo "== total $(el)"

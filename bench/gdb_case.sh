# gdb_case.sh - sourced by the bench/runs/run_r1*_h200.sh scripts that look inside a stuck `tpmoe moe`
# (after device_env.sh: $B, $R, el). case_ NAME ARGS... runs `tpmoe moe --backend cuda --check
# --iters 2 ARGS` in the background into $R/NAME.log; if it is still running after 7 s, cuda-gdb
# attaches and writes the resident kernels and every host thread's stack (GDB_BT frames, default
# 30) to $R/NAME.gdb, then lets it go on to its own timeout; prints the result lines and the
# stacks' frames of interest.
CG=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1)
echo "cuda-gdb: ${CG:-none}"
case_() { # name, then tpmoe moe's arguments
  local n=$1; shift
  stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --check --iters 2 "$@" > "$R/$n.log" 2>&1 &
  local pid=$! i
  for i in $(seq 14); do sleep 0.5; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null && [ -n "$CG" ]; then
    timeout 90 "$CG" -batch -p $pid -ex "info cuda kernels" -ex "thread apply all bt ${GDB_BT:-30}" > "$R/$n.gdb" 2>&1
    echo "   (attached at $(el))"
  fi
  timeout 60 tail --pid=$pid -f /dev/null; wait $pid
  echo "== $n rc=$? ($(el))"; grep -E "ranks agree|: ok|rror|timeout|gave up" "$R/$n.log" | head -3
  [ -f "$R/$n.gdb" ] && grep -E "^\s+(Kernel|[0-9]+ +[0-9]+ )|^#[0-9]+ .* in (tpm_|k_|cu|cublas|rank_main|pthread|std::)|^Thread " "$R/$n.gdb" | head -60
}

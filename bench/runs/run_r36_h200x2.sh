#!/usr/bin/env bash
# run_r36_h200x2.sh - decode set 2 with the per-expert wait (k_down2 items wait for their own
# expert's gate_up tiles, tuning expert_wait 1) against the grid-wide wait (0), 2 x H200:
# gpu_moe (the new variants bit for bit against set 0, eager and in graphs), gpu_moe_api; the
# fused and unfused layer at 1-8 tokens, TP 1 and TP 2, both settings in alternation, two passes.
#   NAME=r36 OUT=/some/dir bash bench/runs/run_r36_h200x2.sh
NAME=${NAME:-r36}
. bench/device_env.sh
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -6
done
pack
for pass in a b; do
  for ew in 0 1; do
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --fuse-shared both --check 1 --reps 30 \
      --expert-wait $ew --json "$R/tp1_ew${ew}_$pass.json" > "$R/tp1_ew${ew}_$pass.log" 2>&1
    echo "== tp1 expert_wait $ew $pass rc=$? ($(el))"
    grep -E "^[0-9]" "$R/tp1_ew${ew}_$pass.log" | awk '{print $1 "/" $2, $12, $15, $18}' | tr '\n' ';'; echo
  done
done
pack
for pass in a b; do
  for ew in 0 1; do
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both --check 1 --reps 30 \
      --expert-wait $ew --json "$R/tp2_ew${ew}_$pass.json" > "$R/tp2_ew${ew}_$pass.log" 2>&1
    echo "== tp2 expert_wait $ew $pass rc=$? ($(el))"
    grep -E "^[0-9]" "$R/tp2_ew${ew}_$pass.log" | awk '{print $1 "/" $2, $12, $15, $18}' | tr '\n' ';'; echo
  done
done
pack
echo "== total $(el)"

#!/usr/bin/env bash
# run_r22_h200.sh - round 22: the routing rewrite (redux.sync top-k, the
# direct one-tile permutation, 8 / 16 / 32 router experts per logits block,
# k_select's per-block bitmap words + parallel prefixes + separate row
# scatter). GPU tests first, then the routing phase per block size, its phases
# by difference (--route-stop), the whole layer against the previous tree's
# binary (tpmoe_before, commit 5fe3d75's build;
# f27d42c after it only removed a dead branch of the prefill kernel) alternating, and large T.
# Binaries in prebuilt/bin.txz.   NAME=r22 OUT=/some/dir bash bench/runs/run_r22_h200.sh
NAME=${NAME:-r22}
. bench/device_env.sh
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > " "$R/$t.log" | head -8
done
pack
mb() { # name, binary, args...
  local n=$1 bin=$2; shift 2
  timeout 60 "$B/$bin" bench moe --preset m3 --fuse-shared 1 --check 1 --json "$R/$n.json" "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  grep -E "harness|error" "$R/$n.log" | cut -c1-100
  grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $3, $7, $10, $11, $12, $13, $15, $16, $18, $20}'
}
for re in 32 16 8; do mb route_re$re tpmoe --tokens 1,2,4,8,16,32 --route-experts $re --reps 40; done
pack
for st in 1 2 3; do mb stop${st} tpmoe --tokens 1,8 --route-stop $st --reps 40; done
pack
for pass in a b; do
  for bin in tpmoe_before tpmoe; do mb layer_${bin}_$pass $bin --tokens 1,2,4,8 --reps 40; done
done
pack
for bin in tpmoe_before tpmoe; do mb large_${bin} $bin --tokens 64,128,256,1024,8192 --reps 10; done
pack
echo "== total $(el)"

#!/usr/bin/env bash
# run_r173_h200.sh - one H200, into $OUT/r173: gpt-oss at 9-24 tokens, mode 1 (the default since
# a11510b) and mode 3 (--route-tc 9:128) alternating, three times each: r172 had the whole layer
# 18-25% slower with mode 1, in the experts phase (timed apart from the routing), where r171's
# mode-1 run was not.
# Binaries (prebuilt/bin.txz): those of r171 (a11510b).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r173_h200.sh
NAME=r173
. bench/device_env.sh
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 150 "$B/tpmoe" bench moe --tokens $tk --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $13}')"
}
for pass in a b c; do
  bm oss_m1_$pass 9,16,24 --preset gpt-oss --check 1
  bm oss_m3_$pass 9,16,24 --preset gpt-oss --check 1 --route-tc 9:128
done
pack
echo "== total $(el)"

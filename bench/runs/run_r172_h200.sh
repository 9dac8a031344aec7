#!/usr/bin/env bash
# run_r172_h200.sh - one H200, into $OUT/r172: round 27's mode 1 up to 24 tokens (measured on m3,
# r170) on deepseek-v3 and gpt-oss: the default against --route-tc 9:128 (mode 3 from 9, as before);
# and m3's routing at 9-256 tokens with the defaults (r171's sweep asked for 19 sizes: the bench
# takes 16).
# Binaries (prebuilt/bin.txz): those of r171 (a11510b).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r172_h200.sh
NAME=r172
. bench/device_env.sh
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 150 "$B/tpmoe" bench moe --tokens $tk --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
TK=9,12,16,20,24
bm dsv3_m1 $TK --preset deepseek-v3 --fuse-shared 1 --check 1
bm dsv3_m3 $TK --preset deepseek-v3 --fuse-shared 1 --check 1 --route-tc 9:128
bm oss_m1 $TK --preset gpt-oss --check 1
bm oss_m3 $TK --preset gpt-oss --check 1 --route-tc 9:128
bm m3_big 9,12,16,20,24,25,32,64,128,129,256 --preset m3 --fuse-shared 1 --check 1
pack
echo "== total $(el)"

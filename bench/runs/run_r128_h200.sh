#!/usr/bin/env bash
# run_r128_h200.sh - one H200, into $OUT/r128: r127 had TP 8's rank-local layer (--shard 8,
# inter 384 per rank) faster with one gate/up row pair per warp of k_gate_up2 than with the
# default two at 2 and 4 tokens (56.5 / 85.4 against 58.4 / 91.2 us) and slower at 8 (161.7
# against 153.8). Both settings at 1-8 tokens for the TP 4 and TP 8 shares, two alternating
# passes, to decide whether the setting should follow the rank's expert size.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r128_h200.sh
NAME=r128
. bench/device_env.sh
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 --check 1 --fuse-shared 1 "$@" \
    > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-12s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s ", $1, $15}')"
}
for s in 4 8; do
  for pass in a b; do
    bm s${s}_gup1_$pass --shard $s --gate-up-pairs 1
    bm s${s}_gup2_$pass --shard $s --gate-up-pairs 2
  done
done
pack
echo "== total $(el)"

#!/usr/bin/env bash
# run_r127_h200.sh - one H200, into $OUT/r127: the decode kernels' shape knobs on the TP 2 and
# TP 8 ranks' expert sizes (bench moe --shard 2 / 8: inter 1536 / 384 per rank). r125 had TP 2's
# rank-local layer at 1.30-1.35x of its floor at 1 token and 1.17-1.23x at 5-8 tokens, against
# TP 1's 1.10-1.12x. The defaults were chosen at TP 1 (rounds 4-13): does another shape stream
# the smaller experts faster? The fused layer at 1, 2, 4 and 8 tokens, one knob changed per pass;
# the defaults run first and last.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r127_h200.sh
NAME=r127
. bench/device_env.sh
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --gemm-hold 0 --check 1 --fuse-shared 1 "$@" \
    > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-26s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s ", $1, $15}')"
}
for s in 2 8; do
  bm s${s}_default_a --shard $s
  bm s${s}_gup1 --shard $s --gate-up-pairs 1
  bm s${s}_gup2 --shard $s --gate-up-pairs 2
  for k in 0 1 2 3 4; do bm s${s}_down$k --shard $s --down-kernel $k; done
  bm s${s}_pipe0 --shard $s --gate-up-pipe 0
  bm s${s}_pipe1 --shard $s --gate-up-pipe 1
  bm s${s}_dk0 --shard $s --decode-kernel 0
  bm s${s}_dk1 --shard $s --decode-kernel 1
  bm s${s}_wait0 --shard $s --expert-wait 0
  bm s${s}_wait1 --shard $s --expert-wait 1
  bm s${s}_default_b --shard $s
  echo "== shard $s done ($(el))"
done
pack
echo "== total $(el)"

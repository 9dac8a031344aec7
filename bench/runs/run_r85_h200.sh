#!/usr/bin/env bash
# run_r85_h200.sh - one H200, into $OUT/r85: why the fused layer trails the
# unfused one at 4-8 tokens (final16: 8 tokens 825.0 vs 815.4 us, both running
# the shared expert as dense cuBLAS GEMMs beside the routing): m3, TP 1, 4 and 8
# tokens, fused and unfused, the shared plan auto (split) / slot, the shared
# MLP beside the routing or after it, in alternation, three passes.
# Binaries (prebuilt/bin.txz): tpmoe of the final16_moe commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r85_h200.sh
NAME=r85
. bench/device_env.sh
for pass in 1 2 3; do
  for v in auto:1 auto:0 slot:1; do
    pl=${v%%:*}; ov=${v##*:}
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 4,8 --fuse-shared both --shared-plan $pl --shared-overlap $ov \
      --check 1 --json "$R/${pl}_ov${ov}_p$pass.json" > "$R/${pl}_ov${ov}_p$pass.log" 2>&1
    echo "== plan=$pl overlap=$ov pass $pass rc=$? ($(el))"
    sed -n '/^[0-9]/p' "$R/${pl}_ov${ov}_p$pass.log" | awk '{print $1, $2, $4, $10, $12, $13, $15}'
  done
done
pack
echo "== total $(el)"

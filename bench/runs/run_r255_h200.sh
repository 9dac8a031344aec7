#!/usr/bin/env bash
# run_r255_h200.sh - one GPU, into $OUT/r255: r252's sweep for the shares of TP 8 and TP 4 layers
# (`--shard 8`, `--shard 4`, rank 0) at 1 and 2 tokens, fused layer only: each decode setting the
# tool exposes, one at a time against round 47's defaults (which open and close the sweep), two
# passes. The question: does any other setting beat the defaults on a rank of TP > 2, as
# `--route-experts 16` did on TP 2 (r252)?
# Binaries: prebuilt/bin.txz, r254's (compact Release builds of 654fcea).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r255_h200.sh
NAME=r255
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for pass in a b; do
  for sh in 8 4; do
    i=0
    for v in "default" "--down-kernel 0" "--down-kernel 1" "--down-kernel 3" "--down-kernel 4" \
             "--gate-up-pairs 1" "--gate-up-pipe 0" "--expert-wait 0" "--shared-plan split" "--pdl 0" \
             "--route-experts 8" "--route-experts 32" "--decode-kernel 0" "default"; do
      i=$((i + 1))
      a=$v; [ "$v" = default ] && a=
      tag=$(printf "%s_s%d_%02d" $pass $sh $i)
      timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 --shard $sh --fuse-shared 1 \
        --tokens 1,2 $a --json "$R/sw_$tag.json" > "$R/sw_$tag.log" 2>&1
      rc=$?
      printf "== %s %-20s rc=%d (%s): " "$tag" "$v" $rc "$(el)"
      awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s %s %s | ", $1, $2, $4, $6, $15}' "$R/sw_$tag.log"; echo
    done
    pack
  done
done
echo "== r255 done ($(el))"

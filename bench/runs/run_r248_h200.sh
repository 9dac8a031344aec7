#!/usr/bin/env bash
# run_r248_h200.sh - one GPU (an H200 asked; an H100 may come), into $OUT/r248: r246's steps for
# round 45's build (a row tile of at most 64 valid rows loads only its first 64 A rows; round 44's
# defaults): gpu_act, gpu_moe_paths, gpu_moe, gpu_moe_api, then
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#   tpmoe bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (stripped): tpmoe, gpu_act, gpu_moe, gpu_moe_paths, gpu_moe_api,
# compact Release builds (build-crel) of baa3ea9 (the library of 324be90, round 45).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r248_h200.sh
NAME=r248 exec bash bench/runs/run_r246_h200.sh

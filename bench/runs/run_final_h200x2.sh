#!/usr/bin/env bash
# run_final_h200x2.sh - the release check of the merged tree on 2 x H200 in one
# device call: every GPU test, the CUDA MoE through the public API and CLI,
# and both benchmarks. Everything lands in $OUT/final/ and $OUT/final.tgz.
#
# The binaries are built on the development machine (no GPU there) and carried:
#   cmake -S . -B build-prebuilt -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-prebuilt --target tpmoe_cli gpu_allreduce gpu_comm_api gpu_moe gpu_moe_api
#   mkdir -p prebuilt && cp build-prebuilt/tpmoe build-prebuilt/tests/gpu_* prebuilt/
# (to carry them: strip, then  tar cf - ... | xz -9e > prebuilt/bin.txz : the 64 MB
# dictionary of -9e shares the statically linked library across the binaries,
# 16 MB instead of 63 MB with tar cJf)
# They have the source path /work/main compiled in (golden vectors, the rpath
# of the carried .deps), so the script links that path to the checkout.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final_h200x2.sh
# (NAME, CODECS, SIZES, MOE_TOKENS, MOE_TP2 override the defaults below; ROUTE_AB=1 times the
# routing of prebuilt/tpmoe against prebuilt/tpmoe_before (a previous build) at ROUTE_TOKENS;
# AR_BENCH=0 skips the all-reduce benchmark; MOE_EP2=0 the EP 2 MoE benchmark; MOE_CMP=1 adds the prefill path
# with cuBLAS over 4 streams at 128 / 1024 / 8192 tokens for comparison;
# PART=ar runs the all-reduce half (tests gpu_allreduce gpu_comm_api, the CLI
# check, bench allreduce), PART=moe the MoE half (gpu_moe gpu_moe_api, bench
# moe), so each half's binaries fit one device call; default: both.)
NAME=${NAME:-final}
. bench/device_env.sh
nvidia-smi topo -m > "$R/topo.txt" 2>&1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv > "$R/smi.txt" 2>&1

PART=${PART:-all}
case $PART in
  ar) TESTS="gpu_allreduce gpu_comm_api" ;;
  moe) TESTS="gpu_moe gpu_moe_api" ;;
  *) TESTS="gpu_allreduce gpu_comm_api gpu_moe gpu_moe_api" ;;
esac

# MARK: GPU tests (each prints its cmocka summary)
for t in $TESTS; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack

if [ "$PART" != moe ]; then
# MARK: the CUDA MoE through the CLI (TP 2, the quick all-reduce), checked against fp64
timeout 60 "$B/tpmoe" moe --preset m3-mini --tokens 64 --backend cuda --tp 2 --check \
  > "$R/moe_cuda_cli.log" 2>&1
echo "== tpmoe moe --backend cuda --tp 2 rc=$? ($(el))"; tail -4 "$R/moe_cuda_cli.log"
pack

# MARK: all-reduce benchmark (tpmoe vs NCCL, CUDA graphs, medians)
if [ "${AR_BENCH:-1}" = 1 ]; then
SIZES=${SIZES:-4K,12K,64K,256K,768K,2M,8M,32M,96M,128M}
CODECS=${CODECS:-none,int8,int6,int4,fp8,int4_h,int6_h}
timeout 120 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 \
  --codecs "$CODECS" --sizes "$SIZES" \
  --json "$R/allreduce_h200x2.json" --png "$R/allreduce_h200x2.png" > "$R/bench_allreduce.log" 2>&1
echo "== bench allreduce rc=$? ($(el))"
pack
fi
fi

if [ "$PART" != ar ]; then
# MARK: MoE benchmark (m3, one GPU and TP 2, fused and unfused; read flush =
# the default; the write flush at 1 and 8 tokens for comparison with rounds 1-4)
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens "${MOE_TOKENS:-1,8,32,1024,8192}" --fuse-shared both \
  --check 2 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe tp1 rc=$? ($(el))"
pack
if [ "${MOE_CMP:-0}" = 1 ]; then
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 128,1024,8192 --fuse-shared 1 --prefill-gemm streams \
    --check 2 --json "$R/moe_m3_tp1_streams.json" > "$R/bench_moe_tp1_streams.log" 2>&1
  echo "== bench moe tp1 prefill streams rc=$? ($(el))"
  pack
fi
if [ "${MOE_TP2:-1}" = 1 ]; then
  timeout 45 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both \
    --check 1 --json "$R/moe_m3_tp2.json" > "$R/bench_moe_tp2.log" 2>&1
  echo "== bench moe tp2 rc=$? ($(el))"
  pack
fi
if [ "${MOE_EP2:-1}" = 1 ]; then
  # expert parallelism over the two GPUs (each GPU half the routed experts, whole)
  timeout 90 "$B/tpmoe" bench moe --preset m3 --tokens "${MOE_EP_TOKENS:-1,8,128,1024,8192}" --tp 1 --ep 2 \
    --fuse-shared both --check 1 --json "$R/moe_m3_ep2.json" > "$R/bench_moe_ep2.log" 2>&1
  echo "== bench moe ep2 rc=$? ($(el))"
  pack
fi
if [ "${ROUTE_AB:-0}" = 1 ] && [ -x "$B/tpmoe_before" ]; then
  # routing A/B: this tree against the previous build (prebuilt/tpmoe_before), fused layer,
  # two passes in alternation
  for pass in a b; do
    for bin in tpmoe tpmoe_before; do
      timeout 60 "$B/$bin" bench moe --preset m3 --tokens "${ROUTE_TOKENS:-1,2,4,8,16,32,64,128,256}" --fuse-shared 1 \
        --check 1 --reps 20 --json "$R/route_${bin}_$pass.json" > "$R/route_${bin}_$pass.log" 2>&1
      echo "== routing $bin pass $pass rc=$? ($(el))"
      grep -E "^[0-9]" "$R/route_${bin}_$pass.log" | awk '{print $1, $7, $10, $11, $15}' | tr '\n' ';'; echo
    done
  done
  pack
fi
timeout 40 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --fuse-shared both --flush write \
  --check 1 --json "$R/moe_m3_tp1_writeflush.json" > "$R/bench_moe_tp1_writeflush.log" 2>&1
echo "== bench moe tp1 write flush rc=$? ($(el))"
python3 bench/plot_moe.py "$R/moe_m3_h200.png" "$R"/moe_m3_tp1.json "$R"/moe_m3_tp2.json > "$R/plot_moe.log" 2>&1
pack
fi
echo "== total $(el)"
[ ! -f "$R/bench_allreduce.log" ] || cut -c1-160 "$R/bench_allreduce.log"
[ ! -f "$R/bench_moe_tp1.log" ] || sed -n '/^# harness/,$p' "$R/bench_moe_tp1.log" | cut -c1-200
[ ! -f "$R/bench_moe_tp1_streams.log" ] || sed -n '/^tokens/,$p' "$R/bench_moe_tp1_streams.log" | cut -c1-200
[ ! -f "$R/bench_moe_tp2.log" ] || sed -n '/^tokens/,$p' "$R/bench_moe_tp2.log" | cut -c1-200
[ ! -f "$R/bench_moe_ep2.log" ] || sed -n '/^tokens/,$p' "$R/bench_moe_ep2.log" | cut -c1-200
[ ! -f "$R/bench_moe_tp1_writeflush.log" ] || sed -n '/^tokens/,$p' "$R/bench_moe_tp1_writeflush.log" | cut -c1-200

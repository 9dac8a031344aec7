#!/usr/bin/env bash
# run_h200x2.sh - one device call: GPU tests and the benchmark, everything
# (logs, JSON, PNG) in one tarball $OUT/allreduce_run.tgz. From the
# repository root on the 2 x H200 machine:
#   OUT=/some/dir DEPS=/path/to/.deps bash bench/runs/run_h200x2.sh [bench]
# Uses binaries carried in prebuilt/ (built on the development machine with
# -DCMAKE_CUDA_ARCHITECTURES=90) when they start there, else builds.
# VARIANTS (default "1 0"): kernel variants (TPMOE_CUDA_AR_VARIANT, see
# src/comm/cuda_sync.h) benchmarked one after the other in separate
# processes, allreduce_h200x2_v<V>.json each; the GPU tests run with the
# first. VARLIST (e.g. "2,1,3"): instead, one bench process times every
# variant of the list at every point (bench --variants; outputs checked
# bitwise against the first), allreduce_h200x2_vars.json; the GPU tests run
# with the first of VARIANTS. T_TEST / T_BENCH / T_BENCH0: time limits in seconds (the first
# variant's bench, the others').
set -u
OUT=${OUT:-out}; DEPS=${DEPS:-$PWD/.deps}; R=$OUT/run
mkdir -p "$R"
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
SIZES=${SIZES:-4K,12K,64K,768K,2M,8M,32M,96M}
CODECS=${CODECS:-none,int8,int4,int4_h}
SIZES0=${SIZES0:-4K,12K,768K,2M,32M}; CODECS0=${CODECS0:-$CODECS}
VARIANTS=${VARIANTS:-1 0}
T_TEST=${T_TEST:-30}; T_BENCH=${T_BENCH:-35}; T_BENCH0=${T_BENCH0:-22}
nvidia-smi topo -m > "$R/topo.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$R/smi.txt" 2>&1
BIN=prebuilt
if ! "$BIN/tpmoe" bench allreduce --help > /dev/null 2>&1; then
  BIN=build
  { cmake -S . -B build -DTPMOE_DEPS_ROOT="$DEPS" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DJANSSON_LIBRARY="$DEPS/usr/lib/x86_64-linux-gnu/libjansson.so" \
    && cmake --build build -j 32 --target tpmoe_cli gpu_allreduce && cp build/tests/gpu_allreduce build/; } \
    > "$R/build.log" 2>&1 || { tail -30 "$R/build.log"; tar czf "$OUT/allreduce_run.tgz" -C "$OUT" run; exit 1; }
fi
echo "== binaries: $BIN"
first=${VARIANTS%% *}
if [ "${1:-}" != bench ]; then
  TPMOE_CUDA_AR_VARIANT=$first timeout "$T_TEST" "$BIN/gpu_allreduce" > "$R/gpu_test_v$first.log" 2>&1
  echo "gpu_allreduce (variant $first) rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED|graph:|skipped" "$R/gpu_test_v$first.log" | head -20
fi
if [ -n "${VARLIST:-}" ]; then  # one bench process timing every variant of VARLIST (e.g. 2,1,3)
  TPMOE_CUDA_AR_VARIANT=$first timeout "$T_BENCH" stdbuf -oL "$BIN/tpmoe" bench allreduce --tp 2 --dtype bf16 \
    --codecs "$CODECS" --sizes "$SIZES" --variants "$VARLIST" --json "$R/allreduce_h200x2_vars.json" > "$R/bench_vars.log" 2>&1
  echo "bench variants $VARLIST rc=$?"
  tar czf "$OUT/allreduce_run.tgz" -C "$OUT" run
  cut -c1-160 "$R/bench_vars.log"
  exit 0
fi
for v in $VARIANTS; do
  if [ "$v" = "$first" ]; then s=$SIZES; c=$CODECS; t=$T_BENCH; else s=$SIZES0; c=$CODECS0; t=$T_BENCH0; fi
  TPMOE_CUDA_AR_VARIANT=$v timeout "$t" stdbuf -oL "$BIN/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs "$c" \
    --sizes "$s" --json "$R/allreduce_h200x2_v$v.json" > "$R/bench_v$v.log" 2>&1
  echo "bench variant $v rc=$?"
done
tar czf "$OUT/allreduce_run.tgz" -C "$OUT" run
for v in $VARIANTS; do echo "== variant $v"; cut -c1-110 "$R/bench_v$v.log"; done

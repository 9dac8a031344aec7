# device_env.sh - the common preamble of the bench/runs/run_*_h200x2.sh device
# scripts (sourced, not run): the output folder $R = $OUT/$NAME (NAME set by
# the script before sourcing), the checkout linked at /work/main (the carried
# binaries have that source path compiled in: golden vectors, the rpath of
# the carried .deps), the carried Debian libraries, NVLink multicast off,
# $B = the carried binaries, pack (tar the results for the reply) and el
# (seconds since the start).
set -u
OUT=${OUT:-out}
R=$OUT/$NAME
mkdir -p "$R"
ROOT=$PWD
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
export LD_LIBRARY_PATH=$ROOT/.deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/prebuilt
t0=$(date +%s)
pack() { tar czf "$OUT/$NAME.tgz" -C "$OUT" "$NAME"; }
el() { echo "$(( $(date +%s) - t0 )) s"; }

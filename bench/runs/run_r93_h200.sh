#!/usr/bin/env bash
# run_r93_h200.sh - round 13, one H200, into $OUT/r93: is the routing's
# per-step cost (~2 us per ticket / selection / permutation step, r91) the
# cold instruction cache? Routing modes 1 (1-8 tokens) and 3 (16-256) with
# and without route_warm (every block runs the selection and permutation code
# once, no output, while its first logits loads are in flight), the phase
# stops 1..3 and the whole launch, m3 TP 1 fused; warm on / off alternate.
# Binaries (prebuilt/bin.txz): tpmoe of the route_warm commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r93_h200.sh
NAME=r93
. bench/device_env.sh
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --reps 40"
TK=1,2,4,8,16,32,64,128
rt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s/%s ", $1, $11, $7}'; echo; }
for pass in 1 2; do
  for w in 0 1; do
    timeout 90 $M --tokens $TK --route-warm $w --check 2 > "$R/all_w${w}_p$pass.log" 2>&1
    echo "== whole warm $w pass $pass rc=$? ($(el))"; rt "$R/all_w${w}_p$pass.log"
    grep -E "^[0-9]+ " "$R/all_w${w}_p$pass.log" | awk '$20 != 0 {print "SEL MISMATCH", $0}'
  done
done
for st in 1 2 3; do
  for w in 0 1; do
    timeout 90 $M --tokens $TK --route-warm $w --route-stop $st --check 0 > "$R/stop${st}_w$w.log" 2>&1
    echo "== stop $st warm $w rc=$? ($(el))"; rt "$R/stop${st}_w$w.log"
  done
done
for w in 0 1; do
  for st in 1 2 3 0; do
    timeout 60 $M --tokens 256 --route-tc 9:256 --route-warm $w --route-stop $st --check 0 > "$R/tc256_s${st}_w$w.log" 2>&1
    echo "== tc256 stop $st warm $w rc=$? ($(el))"; rt "$R/tc256_s${st}_w$w.log"
  done
done
pack
echo "== total $(el)"

# cli_targets.sh - bench/targets_moe.py (the CUDA MoE issue's targets held to `bench moe --json`
# files), sourced by tests/cli.sh (uses its expect_rc / expect_out). It judges a committed run
# (r248: known to meet 1-1024 tokens and miss 8192 tokens and routing from 32), a copy of it
# edited to meet every target, a `--shard 2` run (r251: TP rank 0's share, its layer ratios shown,
# not judged) and a file that is not a bench moe run.
_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_tg="$_src/bench/targets_moe.py"
_r248="$_src/bench/results/r248/status.json"
expect_rc "targets_moe.py: r248 misses targets (exit 1)" 1 python3 "$_tg" "$_r248"
expect_out "targets_moe.py: r248's 1-token layer meets 1.15x" "^   met    layer +1 tokens \(fused\).*1\.059x" python3 "$_tg" "$_r248"
expect_out "targets_moe.py: r248's 8192-token layer misses 1.4x" "^   MISSED layer +8192 tokens .*1\.594x" python3 "$_tg" "$_r248"
expect_out "targets_moe.py: r248 counts 15 met, 5 missed" "^15 met, 5 missed$" python3 "$_tg" "$_r248"
_r251="$_src/bench/results/r251/tp2_a.json"
expect_out "targets_moe.py: a --shard 2 run's layer ratios are not judged" "^   -      layer +1 tokens \(fused\).*\(a share: not judged\)" python3 "$_tg" "$_r251"
expect_out "targets_moe.py: r251's share at 4 tokens: 1.1x below the floor" "^   -      TP 2 share at 4 tokens: .*needs fused <= 292\.5 us; its floor 293\.5 us: below the floor" python3 "$_tg" "$_r251"
expect_out "targets_moe.py: r251's share counts 12 met, 1 missed" "^12 met, 1 missed$" python3 "$_tg" "$_r251"
_ok=/tmp/cli_targets.$$.json
python3 - "$_r248" "$_ok" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    r["route_net_us"] = min(r["route_net_us"], 7.5)
    r["total_us"] = r["floor_us"] * (1.1 if r["fused"] else 1.25)
json.dump(d, open(sys.argv[2], "w"))
PY
expect_rc "targets_moe.py: a run that meets every target exits 0" 0 python3 "$_tg" "$_ok"
expect_out "targets_moe.py: ... and counts 0 missed" "^20 met, 0 missed$" python3 "$_tg" "$_ok"
echo '{"bench": "allreduce", "results": []}' > "$_ok"
expect_rc "targets_moe.py: a file that is not a bench moe run exits 2" 2 python3 "$_tg" "$_ok"
rm -f "$_ok"

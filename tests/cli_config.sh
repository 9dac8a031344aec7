# cli_config.sh - sourced by cli.sh: `tpmoe config` checks.
expect_rc  "config --help" 0 "$T" config --help
expect_out "config m3 tp2: fused on" "fuse shared +=.*on" "$T" config --preset m3 --tp 2
expect_out "config m3 tp2 ep2: fused off, with the reason" "fuse shared +=.*off.*expert parallelism 2" "$T" config --preset m3 --tp 2 --ep 2
expect_out "config prints the dispatch table" "oneshot|one-shot" "$T" config --preset m3 --tp 2
expect_rc  "invalid TPMOE_QUICK_REDUCE_QUANTIZATION exits 2" 2 env TPMOE_QUICK_REDUCE_QUANTIZATION=INT5 "$T" config --preset m3 --tp 2
expect_out "... and names the variable" "TPMOE_QUICK_REDUCE_QUANTIZATION" env TPMOE_QUICK_REDUCE_QUANTIZATION=INT5 "$T" config --preset m3 --tp 2
expect_out "env codec shows its source" "codec += int8 +\(env" env TPMOE_QUICK_REDUCE_QUANTIZATION=int8 "$T" config --preset m3 --tp 2
expect_rc  "unknown preset exits 2" 2 "$T" config --preset m9
expect_rc  "tp 9 exits 2" 2 "$T" config --tp 9
expect_rc  "tp 4 x ep 4 exits 2" 2 "$T" config --tp 4 --ep 4

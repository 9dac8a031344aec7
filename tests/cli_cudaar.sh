# cli_cudaar.sh - CLI checks of `tpmoe bench allreduce`, sourced by tests/cli.sh
# (uses its $T, expect_rc and expect_out). Safe on any machine: no check runs
# the benchmark itself.
expect_rc "bench allreduce --help succeeds" 0 "$T" bench allreduce --help
expect_out "bench allreduce --help names --codecs" "--codecs" "$T" bench allreduce --help

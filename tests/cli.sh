#!/usr/bin/env bash
# cli.sh - checks of the `tpmoe` tool's exit codes and messages.
# Usage: cli.sh path/to/tpmoe. Prints "N passed, N failed".
set -u
T=${1:?usage: cli.sh path/to/tpmoe}
pass=0; fail=0
ok()   { pass=$((pass+1)); echo "ok   - $1"; }
bad()  { fail=$((fail+1)); echo "FAIL - $1"; }
# expect_rc NAME RC CMD...: the command exits with RC
expect_rc() {
  local name=$1 want=$2; shift 2
  "$@" >/tmp/cli_out.$$ 2>&1; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$name"; else bad "$name (rc $rc, want $want)"; sed 's/^/    /' /tmp/cli_out.$$ | head -20; fi
}
# expect_out NAME REGEX CMD...: the command's output matches REGEX
expect_out() {
  local name=$1 re=$2; shift 2
  "$@" >/tmp/cli_out.$$ 2>&1
  if grep -Eq -- "$re" /tmp/cli_out.$$; then ok "$name"; else bad "$name (no /$re/)"; sed 's/^/    /' /tmp/cli_out.$$ | head -20; fi
}

expect_rc "no arguments is a usage error" 2 "$T"
expect_rc "--help succeeds" 0 "$T" --help
expect_rc "unknown command is a usage error" 2 "$T" frobnicate

# Each command's checks live in tests/cli_<name>.sh, sourced here.
for f in "$(dirname "$0")"/cli_*.sh; do
  [ -f "$f" ] && . "$f"
done

rm -f /tmp/cli_out.$$
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

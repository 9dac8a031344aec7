#!/usr/bin/env bash
# install_check.sh - installs the build into a temporary prefix and builds a
# consumer against it twice: with pkg-config and with find_package(tpmoe).
# Also checks that the shared library exports only tpm_ symbols.
# Usage: install_check.sh BUILD_DIR [CFLAGS]
set -u
B=${1:?usage: install_check.sh BUILD_DIR [CFLAGS]}
XF=${2:-}  # e.g. -fsanitize=address,undefined when the build is sanitized
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { if eval "$2" >"$T/log" 2>&1; then pass=$((pass+1)); echo "ok   - $1"; else fail=$((fail+1)); echo "FAIL - $1"; sed 's/^/    /' "$T/log" | tail -20; fi; }

check "cmake --install" "cmake --install '$B' --prefix '$T/p'"
cat >"$T/main.c" <<'EOC'
#include <tpmoe.h>
#include <stdio.h>
int main(void) {
    tpm_config cfg = TPM_CONFIG_INIT;
    tpm_resolved_config r;
    if (tpm_config_resolve(&cfg, &r, NULL, 0) != TPM_OK) return 1;
    printf("%s %s\n", tpm_status_string(TPM_OK), tpm_codec_name(r.codec));
    return 0;
}
EOC
lib=$(ls -d "$T"/p/lib* | head -1)
check "pkg-config consumer" "PKG_CONFIG_PATH='$lib/pkgconfig' cc \$XF '$T/main.c' -o '$T/a' \$(PKG_CONFIG_PATH='$lib/pkgconfig' pkg-config --cflags --libs tpmoe) && LD_LIBRARY_PATH='$lib' '$T/a' | grep -q 'ok none'"
mkdir -p "$T/cm"
cat >"$T/cm/CMakeLists.txt" <<EOC
cmake_minimum_required(VERSION 3.24)
project(consumer C)
find_package(tpmoe REQUIRED)
add_executable(c ../main.c)
target_link_libraries(c PRIVATE tpmoe::tpmoe)
EOC
check "find_package(tpmoe) consumer" "cmake -S '$T/cm' -B '$T/cm/b' -DCMAKE_PREFIX_PATH='$T/p' -DCMAKE_C_FLAGS='$XF' -DCMAKE_EXE_LINKER_FLAGS='$XF' && cmake --build '$T/cm/b' && LD_LIBRARY_PATH='$lib' '$T/cm/b/c' | grep -q 'ok none'"
so=$(ls "$lib"/libtpmoe.so 2>/dev/null)
check "only tpm_ symbols exported" "[ -n '$so' ] && ! nm -D --defined-only '$so' | awk '{print \$3}' | grep -v '^tpm_' | grep -v '^\$' | grep -q ."
check "internal tpm_ helpers stay hidden" "! nm -D --defined-only '$so' | awk '{print \$3}' | grep -qx 'tpm_err'"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the build tree to a temporary prefix and builds a plugin out of
# tree against it, as a third party would: once with pkg-config and cc,
# once with a CMake project and find_package(InfinityBusPlugin). Each result
# must export only ib_plugin_entry and must load and run through the real
# loader and dispatch (plugin_try). The installed example plugins are run
# too.
#
#   test_install.sh BUILD_DIR SOURCE_DIR PLUGIN_TRY
set -eu
build=$1
src=$2
try=$3
umask 022

work=$(mktemp -d -t ib-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
prefix=$work/prefix

say() { printf '%s\n' "test_install: $*"; }
die() { printf '%s\n' "test_install: FAIL: $*" >&2; exit 1; }

exports_only_entry() {
    syms=$(nm -D --defined-only "$1" | awk '{print $NF}' | sort | tr '\n' ' ')
    [ "$syms" = "ib_plugin_entry " ] || die "$1 exports: $syms"
}

# Only the plugin components: the rest of the product (the ibus binary) is
# not needed to build a plugin, and may not be built in this tree.
for component in plugin-dev plugins; do
    cmake --install "$build" --prefix "$prefix" --component "$component" \
        >>"$work/install.log" 2>&1 ||
        { cat "$work/install.log" >&2; die "cmake --install --component $component"; }
done

header=$prefix/include/infinity_bus/plugin.h
[ -f "$header" ] || die "no header at $header"
pc=$(find "$prefix" -name infinity-bus-plugin.pc | head -n 1)
[ -n "$pc" ] || die "no infinity-bus-plugin.pc under the prefix"
config=$(find "$prefix" -name InfinityBusPluginConfig.cmake | head -n 1)
[ -n "$config" ] || die "no InfinityBusPluginConfig.cmake under the prefix"

# pkg-config, from a directory that holds nothing of the source tree.
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
cflags=$(pkg-config --cflags infinity-bus-plugin)
libs=$(pkg-config --libs infinity-bus-plugin)
[ -z "$libs" ] || die "pkg-config --libs should be empty, got: $libs"
abi=$(sed -n 's/^#define IB_ABI_MAJOR \([0-9]*\).*/\1/p; s/^#define IB_ABI_MINOR \([0-9]*\).*/\1/p' \
    "$header" | tr '\n' '.' | sed 's/\.$//')
[ "$(pkg-config --modversion infinity-bus-plugin)" = "$abi" ] ||
    die "pkg-config version $(pkg-config --modversion infinity-bus-plugin), ABI $abi"
say "pkg-config --cflags: $cflags (ABI $abi)"
mkdir "$work/pc"
cp "$src/tests/plugins/out_of_tree/hello.c" "$work/pc/"
# shellcheck disable=SC2086 # cflags is a word list
(cd "$work/pc" && cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden \
    $cflags -o hello.so hello.c) || die "cc against the installed header"
exports_only_entry "$work/pc/hello.so"
"$try" "$work/pc/hello.so" greeting.sent hello ok "" "greeting" || die "pkg-config plugin run"
"$try" "$work/pc/hello.so" greeting.sent bye rejected || die "pkg-config plugin reject"

# CMake package.
cp -R "$src/tests/plugins/out_of_tree" "$work/cm-src"
cmake -S "$work/cm-src" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$work/cm.log" 2>&1 ||
    { cat "$work/cm.log" >&2; die "find_package(InfinityBusPlugin)"; }
cmake --build "$work/cm" >>"$work/cm.log" 2>&1 || { cat "$work/cm.log" >&2; die "cmake build"; }
exports_only_entry "$work/cm/hello.so"
"$try" "$work/cm/hello.so" greeting.sent hello ok "" "greeting" || die "cmake plugin run"

# An ABI the package cannot offer is refused.
sed 's/find_package(InfinityBusPlugin 1.0 REQUIRED)/find_package(InfinityBusPlugin 2.0 REQUIRED)/' \
    "$src/tests/plugins/out_of_tree/CMakeLists.txt" >"$work/cm-src/CMakeLists.txt"
if cmake -S "$work/cm-src" -B "$work/cm2" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cm2.log" 2>&1; then
    die "find_package(InfinityBusPlugin 2.0) accepted ABI $abi"
fi

# The installed example plugins.
plugins=$(find "$prefix" -type d -path '*/infinity-bus/plugins' | head -n 1)
[ -n "$plugins" ] || die "no infinity-bus/plugins directory under the prefix"
for p in audit flaky relay ledger http; do
    [ -f "$plugins/$p.so" ] || die "no $p.so in $plugins"
done
"$try" "$plugins/audit.so" order.paid x ok "file=$work/audit.log" || die "installed audit.so"
grep -Eq '^try/audit/audit [0-9a-f]{32} order.paid$' "$work/audit.log" ||
    die "audit line: $(cat "$work/audit.log")"
"$try" "$plugins/flaky.so" order.paid x retry "fraction=1" || die "installed flaky.so"
"$try" "$plugins/relay.so" order.created x ok "to=order.copied" || die "installed relay.so"
say "ok"

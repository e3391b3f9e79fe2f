#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every plugin given exports exactly one dynamic symbol, ib_plugin_entry:
# hidden visibility keeps plugin internals from colliding with the host's
# or another plugin's symbols.
#
#   test_exports.sh PLUGIN.so...
set -eu
for so in "$@"; do
    syms=$(nm -D --defined-only "$so" | awk '{print $NF}' | sort | tr '\n' ' ')
    if [ "$syms" != "ib_plugin_entry " ]; then
        printf 'test_exports: FAIL: %s exports: %s\n' "$so" "$syms" >&2
        exit 1
    fi
    printf 'test_exports: %s exports ib_plugin_entry only\n' "$so"
done

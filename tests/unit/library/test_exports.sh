#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# libinfinity-bus exports what its version script says and nothing else:
#   - its soname is libinfinity-bus.so.<major>;
#   - every exported symbol starts with ib_;
#   - the public nodes (INFINITY_BUS_0 and the INFINITY_BUS_0.N that
#     inherit it) are exactly the functions declared in the installed
#     headers (a public function missing from the script would be private
#     by accident, an extra one a promise nobody wrote down);
#   - everything else is in INFINITY_BUS_PRIVATE (ibus's own internals).
#
#   test_exports.sh LIBRARY.so INCLUDE_DIR
set -eu
so=$1
inc=$2
die() { printf 'test_exports: FAIL: %s\n' "$*" >&2; exit 1; }

soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case $soname in
libinfinity-bus.so.[0-9]*) ;;
*) die "soname is '$soname'" ;;
esac

syms=$(nm -D --defined-only "$so" | awk '{print $NF}')
# the version nodes themselves are absolute symbols named after the node
bad=$(printf '%s\n' "$syms" | grep -v '^ib_' | grep -v '^INFINITY_BUS_[A-Z0-9_.]*$' || true)
[ -z "$bad" ] || die "exports without the ib_ prefix: $(printf '%s ' "$bad")"
other=$(printf '%s\n' "$syms" | grep '^ib_' |
    grep -v -e '@@INFINITY_BUS_0\(\.[0-9][0-9]*\)\{0,1\}$' -e '@@INFINITY_BUS_PRIVATE$' || true)
[ -z "$other" ] || die "exports outside the public and private nodes: $(printf '%s ' "$other")"

public=$(printf '%s\n' "$syms" | sed -n 's/@@INFINITY_BUS_0\(\.[0-9][0-9]*\)\{0,1\}$//p' | sort)
declared=$(cat "$inc"/infinity_bus/status.h "$inc"/infinity_bus/recorder.h \
    "$inc"/infinity_bus/idempotency.h | tr -s ' \n' '  ' |
    grep -oE '[a-z_0-9]+ \**(ib_[a-z0-9_]+)\(' | grep -v 'typedef' |
    sed -E 's/.*(ib_[a-z0-9_]+)\($/\1/' | sort -u)
[ "$public" = "$declared" ] || {
    printf 'exported as INFINITY_BUS_0(.N):\n%s\ndeclared in the headers:\n%s\n' "$public" "$declared" >&2
    die "the public node and the headers differ"
}
printf 'test_exports: %s (%s): %s public symbols, %s private, nothing else\n' "$so" "$soname" \
    "$(printf '%s\n' "$public" | wc -l)" \
    "$(printf '%s\n' "$syms" | grep -c '@@INFINITY_BUS_PRIVATE$')"

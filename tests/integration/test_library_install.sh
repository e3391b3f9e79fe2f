#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# libinfinity-bus as a third party uses it: installs this build to a
# temporary prefix, builds the example consumer (idempotency/examples) out
# of tree against that prefix alone, once with find_package(InfinityBus)
# and once with pkg-config, and runs it against a real nats-server:
#   - events published with duplicates are each handled exactly once;
#   - a second run over the same events republished handles nothing;
#   - the example, and the installed ibus, load the installed
#     libinfinity-bus.so.0, not the build tree's.
# nats-server is stopped by its PID whatever happens.
#
#   test_library_install.sh BUILD_DIR SOURCE_DIR NATS_SERVER [EXTRA_CFLAGS]
# EXTRA_CFLAGS go to both example builds (the sanitizer flags of an
# IB_SANITIZE build, whose library needs its runtime in the program).
set -eu
build=$1
src=$2
nats_server=$3
extra_cflags=${4:-}
umask 022

work=$(mktemp -d -t ib-library-install.XXXXXX)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
prefix=$work/prefix

say() { printf '%s\n' "test_library_install: $*"; }
die() {
    printf '%s\n' "test_library_install: FAIL: $*" >&2
    exit 1
}

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; die "cmake --install"; }
lib=$(find "$prefix" -name 'libinfinity-bus.so.0' | head -n 1)
[ -n "$lib" ] || die "no libinfinity-bus.so.0 under the prefix"
libdir=$(dirname "$lib")
for h in idempotency recorder status version; do
    [ -f "$prefix/include/infinity_bus/$h.h" ] || die "no infinity_bus/$h.h installed"
done

# loads_installed EXE: the dynamic loader picks the installed library.
loads_installed() {
    found=$(ldd "$1" | sed -n 's/^[[:space:]]*libinfinity-bus\.so\.0 => \([^ ]*\).*/\1/p')
    [ "$(readlink -f "$found")" = "$(readlink -f "$lib")" ] ||
        die "$1 loads libinfinity-bus.so.0 from '$found', not $lib"
}
loads_installed "$prefix/bin/ibus"
"$prefix/bin/ibus" version >/dev/null || die "the installed ibus does not run"

# CMake package, from a copy of the example that knows nothing else.
cp -R "$src/idempotency/examples" "$work/ex-src"
cmake -S "$work/ex-src" -B "$work/ex" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $extra_cflags" >"$work/ex.log" 2>&1 ||
    { cat "$work/ex.log" >&2; die "find_package(InfinityBus)"; }
cmake --build "$work/ex" >>"$work/ex.log" 2>&1 || { cat "$work/ex.log" >&2; die "cmake build"; }
consumer=$work/ex/nats_consumer
loads_installed "$consumer"

# pkg-config: links and runs with the library path given at run time.
PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_PATH
[ "$(pkg-config --modversion infinity-bus)" = "$(sed -n 's/^#define IB_VERSION "\(.*\)"/\1/p' \
    "$prefix/include/infinity_bus/version.h")" ] || die "pkg-config version differs from IB_VERSION"
# shellcheck disable=SC2046,SC2086 # word lists
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror $extra_cflags -o "$work/pc_consumer" \
    "$src/idempotency/examples/nats_consumer.c" $(pkg-config --cflags --libs infinity-bus libnats) ||
    die "cc with pkg-config infinity-bus"
LD_LIBRARY_PATH=$libdir ldd "$work/pc_consumer" | grep "$lib" >/dev/null ||
    die "the pkg-config build does not load $lib"
say "built the example with find_package(InfinityBus) and with pkg-config"

# A real nats-server on a free loopback port.
mkdir "$work/js" "$work/ports"
"$nats_server" -js -a 127.0.0.1 -p -1 -sd "$work/js" --ports_file_dir "$work/ports" \
    >"$work/nats.log" 2>&1 &
server_pid=$!
port=""
tries=0
while [ -z "$port" ]; do
    tries=$((tries + 1))
    [ "$tries" -le 250 ] || { cat "$work/nats.log" >&2; die "nats-server wrote no ports file"; }
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/nats.log" >&2; die "nats-server exited"; }
    sleep 0.02
    port=$(cat "$work/ports"/*.ports 2>/dev/null |
        sed -n 's/.*"nats:\/\/127\.0\.0\.1:\([0-9]*\)".*/\1/p' | head -n 1)
done
url=nats://127.0.0.1:$port
say "nats-server pid $server_pid at $url"

recorder=sqlite:$work/processed.db
run_consumer() { # OUTPUT_FILE
    "$consumer" -i 1500 "$url" "$recorder" >"$1" 2>"$1.err" ||
        { cat "$1" "$1.err" >&2; die "nats_consumer exited non-zero"; }
}

# First run: creates the stream and the durable consumer; nothing to do.
run_consumer "$work/run0.out"
grep -q '^summary: handled 0, ' "$work/run0.out" || die "run 0: $(cat "$work/run0.out")"

# Eight events; three of them published three times (producer retries).
ids=""
for n in 1 2 3 4 5 6 7 8; do
    ids="$ids $(printf '%08d-0000-4000-8000-%012d' "$n" "$n")"
done
set --
for id in $ids; do
    set -- "$@" "$id order $id"
done
for id in $(echo "$ids" | cut -d' ' -f3,6,8); do
    set -- "$@" "$id order $id (retry)" "$id order $id (replay)"
done
publish() {
    "$prefix/bin/ibus" publish --nats-url "$url" --subject orders.created --raw --quiet "$@" \
        >"$work/publish.log" 2>&1 || { cat "$work/publish.log" >&2; die "ibus publish"; }
}
publish "$@"

run_consumer "$work/run1.out"
handled=$(grep -c '^handled ' "$work/run1.out" || true)
unique=$(grep '^handled ' "$work/run1.out" | cut -d' ' -f2 | sort -u | wc -l)
if [ "$handled" -ne 8 ] || [ "$unique" -ne 8 ]; then
    cat "$work/run1.out" >&2
    die "run 1 handled $handled events ($unique ids), want 8"
fi
grep -q '^summary: handled 8, duplicates 6, ' "$work/run1.out" ||
    die "run 1: $(tail -n 1 "$work/run1.out")"
for id in $ids; do
    want=$(echo "$id" | tr -d '-')
    grep -q "^handled $want " "$work/run1.out" || die "run 1 never handled $id"
done
say "run 1: $(tail -n 1 "$work/run1.out")"

# The same events again (a replay): all duplicates, nothing handled.
publish "$@"
run_consumer "$work/run2.out"
grep -q '^summary: handled 0, duplicates 14, ' "$work/run2.out" ||
    { cat "$work/run2.out" >&2; die "run 2: $(tail -n 1 "$work/run2.out")"; }
say "run 2: $(tail -n 1 "$work/run2.out")"

# The pkg-config build sees the same recorder: nothing left to handle.
publish "$@"
LD_LIBRARY_PATH=$libdir "$work/pc_consumer" -i 1500 "$url" "$recorder" >"$work/run3.out" ||
    die "pkg-config consumer exited non-zero"
grep -q '^summary: handled 0, duplicates 14, ' "$work/run3.out" ||
    die "run 3: $(tail -n 1 "$work/run3.out")"
say "ok"

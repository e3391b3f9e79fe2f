#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The README as a newcomer follows it (issues 25, 33): from a copy of the
# source tree, the "Install" commands exactly as written (blocks marked
# <!-- docs-test: NAME --> in README.md, and the library's in
# docs/library.md), to a temporary prefix; then
#   - every installed path follows that prefix: the unit, the example
#     settings and the manual page;
#   - the first-run --check (--plugin audit: the installed plugin
#     directory, found from the installed ibus; no file created), the
#     plugin example (billing.c built with pkg-config from the prefix) and
#     the library example (consumer.c) run as written and print what the
#     docs say; the docs and the example receivers are installed;
#   - a run with --create and the default retention handles a publish
#     --key (a uuid8 id, accepted by default), and a prune at the default
#     stream MaxAge (7d) is accepted, against a real nats-server (started
#     on a free loopback port, stopped by its PID).
#
#   test_readme_install.sh SOURCE_DIR NATS_SERVER
set -eu
src=$1
nats_server=$2
umask 022

work=$(mktemp -d -t ib-readme.XXXXXX)
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

say() { printf '%s\n' "test_readme_install: $*"; }
die() {
    printf '%s\n' "test_readme_install: FAIL: $*" >&2
    exit 1
}

# block NAME: the code block after <!-- docs-test: NAME --> in the README
# or a page of docs/.
block() {
    for page in "$src/README.md" "$src"/docs/*.md; do
        awk -v want="<!-- docs-test: $1 -->" '
            $0 == want { armed = 1; next }
            armed && /^```/ { if (inside) exit; inside = 1; next }
            inside { print }' "$page"
    done
}
for b in install first-run billing.c plugin consumer.c library; do
    [ -n "$(block "$b")" ] || die "README.md has no docs-test block '$b'"
done

# A fresh copy of the sources, without any build tree or repository.
mkdir "$work/src" "$work/use"
tar -C "$src" --exclude='./build*' --exclude='./.git' -cf - . | tar -C "$work/src" -xf -
PREFIX=$work/prefix
export PREFIX

# The README's blocks in one shell, as a reader types them: the install
# from the top of the source tree, the rest in a directory of their own.
{
    echo 'set -eu'
    echo 'cd "$1"'
    block install
    echo 'cd "$2"'
    block first-run
    block plugin
    block library
} >"$work/readme.sh"
block billing.c >"$work/use/billing.c"
block consumer.c >"$work/use/consumer.c"
env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH sh "$work/readme.sh" "$work/src" "$work/use" \
    >"$work/readme.out" 2>"$work/readme.err" ||
    { tail -n 40 "$work/readme.out" "$work/readme.err" >&2; die "the README's commands failed"; }
out=$work/readme.out
grep -q "^ibus " "$out" || die "ibus version printed nothing"

# Every installed path follows the prefix.
unit=$PREFIX/lib/systemd/system/ibus@.service
env_example=$PREFIX/etc/infinity-bus/ibus.env.example
man=$PREFIX/share/man/man1/ibus.1
grep -qx "ExecStart=$PREFIX/bin/ibus run" "$unit" || die "unit ExecStart: $(grep ExecStart= "$unit")"
grep -qx "ExecStartPre=$PREFIX/bin/ibus run --check" "$unit" || die "unit has no ExecStartPre --check"
grep -qx "Documentation=file://$PREFIX/share/doc/infinity-bus/README.md" "$unit" ||
    die "unit Documentation: $(grep Documentation= "$unit")"
grep -q "^IB_PLUGIN=$PREFIX/lib/infinity-bus/plugins/audit.so" "$env_example" ||
    die "ibus.env.example: $(grep IB_PLUGIN= "$env_example")"
roff_plugins=$(printf '%s' "$PREFIX/lib/infinity-bus/plugins" | sed 's/-/\\\\-/g')
grep -q "$roff_plugins/\*\.so" "$man" || die "the manual page does not name $PREFIX's plugins"
if grep -v '^#' "$unit" "$env_example" | grep -q /usr/local || grep -q /usr/local "$man"; then
    die "an installed file still names /usr/local"
fi
[ -f "$PREFIX/lib/infinity-bus/plugins/audit.so" ] || die "no audit.so in the plugin directory"
for f in receiver.py receiver.js; do
    [ -f "$PREFIX/share/doc/infinity-bus/examples/http/$f" ] || die "the example $f is not installed"
done
say "installed to the prefix; the unit, ibus.env.example and ibus.1 name it"

# What the README says the examples print.
grep -q "^handler audit/audit types=order.created,order.paid,payment.settled consumer=ibus/audit/audit$" \
    "$out" || die "first-run --check: $(cat "$out")"
grep -q "^handler billing/charge types=order.paid consumer=billing/billing/charge$" "$out" ||
    die "plugin --check: $(cat "$out")"
[ "$(grep -c '^invoice for ' "$out")" -eq 2 ] || die "library example: $(grep invoice "$out")"
grep -q "^invoice for evt_1NbV3Q2eZvKYlo2C$" "$out" || die "library example: no derived key"
[ ! -e "$work/use/processed.db" ] || die "--check created the marker file"
[ ! -e "$work/use/audit.log" ] || die "--check created the audit plugin's file"
for f in README.md copyright docs/contract.md docs/operations.md docs/troubleshooting.md; do
    [ -f "$PREFIX/share/doc/infinity-bus/$f" ] || die "share/doc/infinity-bus/$f is not installed"
done
say "first run, plugin and library examples print what the README says"

# The README's run, publish --key and prune, against a real server.
mkdir "$work/js" "$work/ports"
"$nats_server" -js -a 127.0.0.1 -p -1 -sd "$work/js" --ports_file_dir "$work/ports" \
    >"$work/nats.log" 2>&1 &
server_pid=$!
port=""
tries=0
while [ -z "$port" ]; do
    tries=$((tries + 1))
    [ "$tries" -le 250 ] || die "nats-server wrote no ports file"
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/nats.log" >&2; die "nats-server exited"; }
    sleep 0.02
    port=$(cat "$work/ports"/*.ports 2>/dev/null |
        sed -n 's/.*"nats:\/\/127\.0\.0\.1:\([0-9]*\)".*/\1/p' | head -n 1)
done
url=nats://127.0.0.1:$port
ibus=$PREFIX/bin/ibus
cd "$work/use"
"$ibus" run --nats-url "$url" --stream ORDERS --stream-subjects 'orders.>' \
    --durable billing --create --recorder sqlite:processed.db \
    --plugin ./billing.so --idle-exit 3s --summary-file summary.jsonl \
    --log-format text >run.out 2>run.err &
run_pid=$!
tries=0
until grep -q " running " run.err; do
    tries=$((tries + 1))
    [ "$tries" -le 500 ] || { kill "$run_pid"; cat run.err >&2; die "ibus run did not start"; }
    kill -0 "$run_pid" 2>/dev/null || { cat run.err >&2; die "ibus run exited"; }
    sleep 0.02
done
"$ibus" publish --nats-url "$url" --prefix orders --type order.paid --key evt_1NbV3Q2eZvKYlo2C \
    '{"total":42}' '{"total":42}' >publish.out 2>&1 || { cat publish.out >&2; die "publish --key"; }
grep -q "^published=2 unique=1 duplicates=1 failed=0 stored=2$" publish.out || die "$(cat publish.out)"
wait "$run_pid" || { cat run.err >&2; die "ibus run exited $?"; }
grep -q '"handled":1,"duplicates":1,' summary.jsonl || die "summary: $(cat summary.jsonl)"
"$ibus" markers --nats-url "$url" --recorder sqlite:processed.db \
    --older-than 7d --stream ORDERS --durable billing prune >prune.out 2>&1 ||
    { cat prune.out >&2; die "the README's prune example"; }
grep -qx "pruned=0" prune.out || die "prune: $(cat prune.out)"
grep -q "retention follows the stream's MaxAge" run.err || die "no automatic retention: $(cat run.err)"
say "run with --create's defaults, publish --key and prune at 7d work"
say "ok"

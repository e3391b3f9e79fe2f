#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages as an operator gets them:
#   1. configures a separate tree with prefix /usr, builds it and runs
#      `cpack -G DEB`;
#   2. checks each package's control fields (Depends from dpkg-shlibdeps,
#      exact internal versions) and file list (no /usr/local, no build path);
#   3. `apt-get install`s the three, then: the system user ibus, `ibus
#      version` as that user, a short consume as that user against a real
#      nats-server with the packaged audit plugin, pkg-config and out-of-tree
#      builds against the -dev package, `man ibus`, systemd-analyze on the
#      installed unit;
#   4. `apt-get purge`s them and checks nothing of theirs is left.
# Needs root, apt-get, dpkg-dev, file and nats-server; exits 77 (skip)
# without them, or when the packages, /usr/bin/ibus, /var/lib/infinity-bus
# or /etc/infinity-bus are already there (the test would clobber or purge
# them). Whatever happens, the packages it installed are purged, the user
# it created is removed and nats-server is stopped by its PID.
#
#   test_deb.sh SOURCE_DIR TREE_DIR CPACK
# TREE_DIR keeps the package build tree between runs (a rerun rebuilds only
# what changed). IB_PACKAGE_JOBS sets the build's parallelism (default 2).
set -euo pipefail
src=$1
tree=$2
cpack=$3
umask 022

SKIP=77
packages=(infinity-bus libinfinity-bus0 libinfinity-bus-dev)
say() { printf 'test_deb: %s\n' "$*"; }
die() {
    printf 'test_deb: FAIL: %s\n' "$*" >&2
    exit 1
}
skip() {
    say "SKIP: $*"
    exit $SKIP
}

# --- may this run here? -------------------------------------------------
[ "$(id -u)" -eq 0 ] || skip "needs root: it installs and purges packages"
for tool in apt-get dpkg-deb dpkg-shlibdeps dpkg-architecture file runuser nats-server \
    python3 pkg-config cc; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed (scripts/deps.sh)"
done
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep ' installed$' >/dev/null; }
for p in "${packages[@]}"; do
    ! installed "$p" || skip "$p is already installed; this test would purge it"
done
for path in /usr/bin/ibus /var/lib/infinity-bus /etc/infinity-bus; do
    [ ! -e "$path" ] || skip "$path exists; the packages would overwrite or purge it"
done
had_user=0
had_group=0
getent passwd ibus >/dev/null && had_user=1
getent group ibus >/dev/null && had_group=1

work=$(mktemp -d -t ib-deb.XXXXXX)
chmod 0755 "$work" # the packaged user reaches its own directory inside
we_installed=0
nats_pid=""
cleanup() {
    local status=$?
    if [ -n "$nats_pid" ]; then
        kill "$nats_pid" 2>/dev/null || true
        wait "$nats_pid" 2>/dev/null || true
    fi
    if [ "$we_installed" -eq 1 ]; then
        local left=()
        for p in "${packages[@]}"; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'not-installed' >/dev/null ||
                left+=("$p")
        done
        if [ ${#left[@]} -gt 0 ]; then
            say "cleanup: purging ${left[*]}"
            dpkg --purge "${left[@]}" >/dev/null 2>&1 || true
        fi
    fi
    if [ "$had_user" -eq 0 ] && getent passwd ibus >/dev/null; then
        userdel ibus 2>/dev/null || true
    fi
    if [ "$had_group" -eq 0 ] && getent group ibus >/dev/null; then
        groupdel ibus 2>/dev/null || true
    fi
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT
trap 'exit 1' INT TERM

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$multiarch
plugins=$libdir/infinity-bus/plugins

# --- 1. build -----------------------------------------------------------
build=$tree/build
debs=$tree/debs
mkdir -p "$tree"
log=$tree/build.log
say "building the packages in $tree"
if ! { cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX=/usr -DBUILD_TESTING=OFF -DIB_BUILD_BENCH=OFF &&
    cmake --build "$build" -j "${IB_PACKAGE_JOBS:-2}" &&
    rm -rf "$debs" && (cd "$build" && "$cpack" -G DEB -B "$debs"); } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "configure, build or cpack (log: $log)"
fi
version=$(sed -n 's/^#define IB_VERSION "\(.*\)"/\1/p' "$build/generated/infinity_bus/version.h")
debver=$version-1
deb() { echo "$debs/$1_${debver}_$(dpkg --print-architecture).deb"; }
for p in "${packages[@]}"; do
    [ -f "$(deb "$p")" ] || die "cpack made no $(basename "$(deb "$p")"): $(ls "$debs")"
done
say "built ${packages[*]} $debver"

# --- 2. control fields and file lists -----------------------------------
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
needs() { # package dependency-regex...
    local p=$1 dep
    shift
    for dep in "$@"; do
        field "$p" Depends | tr ',' '\n' | grep -Eq "^ ?$dep" ||
            die "$p: Depends lacks $dep: $(field "$p" Depends)"
    done
}
exact="libinfinity-bus0 \\(= ${debver//./\\.}\\)"
needs infinity-bus "$exact" 'libnats' 'libsqlite3' 'libprotobuf-c' 'libmicrohttpd' \
    'libjansson' 'libssl' 'libcurl4'
needs libinfinity-bus0 'libnats' 'libsqlite3' 'libprotobuf-c' 'libc6'
needs libinfinity-bus-dev "$exact"
for p in "${packages[@]}"; do
    [ -z "$(field "$p" Homepage)" ] || die "$p has a Homepage field"
    [ -n "$(field "$p" Maintainer)" ] || die "$p has no Maintainer"
    [ "$(field "$p" Version)" = "$debver" ] || die "$p: Version $(field "$p" Version)"
done
[ "$(field infinity-bus Section)" = net ] || die "infinity-bus: Section $(field infinity-bus Section)"
say "control fields: Depends from dpkg-shlibdeps plus the exact libinfinity-bus0"

# files PACKAGE: the package's files and links, one path a line, sorted.
files() { dpkg-deb -c "$(deb "$1")" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./|/|' | sort; }
# The man page is expected once the build installs one (ibus(1), component ibus).
man_page=$(files infinity-bus | grep '^/usr/share/man/man1/ibus\.1' || true)
if grep -rqs --include=cmake_install.cmake 'man/man1' "$build"; then
    [ -n "$man_page" ] || die "the build installs a man page, but infinity-bus has none"
fi
expect_files() { # package path...
    local p=$1
    shift
    printf '%s\n' "$@" | sort >"$work/want"
    files "$p" >"$work/got"
    diff -u "$work/want" "$work/got" >&2 || die "$p: file list differs (- expected, + packaged)"
}
expect_files infinity-bus /usr/bin/ibus /etc/infinity-bus/ibus.env.example \
    "$plugins"/{audit,flaky,http,ledger,relay}.so /usr/lib/systemd/system/ibus@.service \
    /usr/lib/sysusers.d/infinity-bus.conf /usr/share/doc/infinity-bus/{README.md,copyright} \
    /usr/share/doc/infinity-bus/examples/http/receiver.{py,js} \
    $(cd "$src/docs" && ls -- *.md | sed 's|^|/usr/share/doc/infinity-bus/docs/|') \
    ${man_page:+"$man_page"}
expect_files libinfinity-bus0 "$libdir/libinfinity-bus.so.0" "$libdir/libinfinity-bus.so.$version" \
    /usr/share/doc/libinfinity-bus0/copyright
cmake_files=$(files libinfinity-bus-dev | grep "^$libdir/cmake/" || true)
for f in InfinityBus/InfinityBusConfig.cmake InfinityBus/InfinityBusConfigVersion.cmake \
    InfinityBus/InfinityBusTargets.cmake InfinityBusPlugin/InfinityBusPluginConfig.cmake \
    InfinityBusPlugin/InfinityBusPluginConfigVersion.cmake \
    InfinityBusPlugin/InfinityBusPluginTargets.cmake; do
    grep -qx "$libdir/cmake/$f" <<<"$cmake_files" || die "libinfinity-bus-dev has no $f"
done
# shellcheck disable=SC2086 # one path a line
expect_files libinfinity-bus-dev /usr/include/infinity_bus/{idempotency,plugin,recorder,status,version}.h \
    "$libdir/libinfinity-bus.so" "$libdir"/pkgconfig/{infinity-bus,infinity-bus-plugin}.pc \
    /usr/share/doc/libinfinity-bus-dev/copyright $cmake_files
[ "$(dpkg-deb -I "$(deb infinity-bus)" conffiles)" = /etc/infinity-bus/ibus.env.example ] ||
    die "infinity-bus: /etc/infinity-bus/ibus.env.example is not a conffile"

# Nothing may point at /usr/local or into this machine's trees.
mkdir "$work/x"
for p in "${packages[@]}"; do
    dpkg-deb -x "$(deb "$p")" "$work/x"
    dpkg-deb -c "$(deb "$p")" | grep -E '/usr/local|'"$src|$tree" >&2 &&
        die "$p: dpkg-deb -c shows /usr/local or a build path"
done
bad=$(grep -rlF -e "$src" -e "$tree" "$work/x" || true)
[ -z "$bad" ] || die "build paths inside: $bad"
# (comments may tell how a hand install differs; settings may not)
bad=$(grep -rv '^[[:space:]]*#' "$work/x/etc" "$work/x/usr/lib/systemd" | grep -F /usr/local || true)
[ -z "$bad" ] || die "/usr/local in a setting: $bad"
unit=$work/x/usr/lib/systemd/system/ibus@.service
grep -qx 'ExecStart=/usr/bin/ibus run' "$unit" || die "the unit's ExecStart is not /usr/bin/ibus run"
grep -qx 'DynamicUser=no' "$unit" || die "the unit does not run as the static user"
say "file lists as expected${man_page:+ (with $man_page)}; no /usr/local, no build path"

# --- 3. install and use -------------------------------------------------
apt_get() { apt-get -y -q -o DPkg::Lock::Timeout=300 "$@"; }
we_installed=1
DEBIAN_FRONTEND=noninteractive apt_get install --no-install-recommends \
    "$(deb infinity-bus)" "$(deb libinfinity-bus0)" "$(deb libinfinity-bus-dev)" \
    >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; die "apt-get install"; }
say "apt-get install: ${packages[*]}"

# The system user: its own group, the state directory as home, no shell.
IFS=: read -r _ _ uid gid _ home shell <<<"$(getent passwd ibus)" || die "no user ibus"
sys_uid_max=$(awk '$1 == "SYS_UID_MAX" { print $2 }' /etc/login.defs 2>/dev/null)
[ "$uid" -le "${sys_uid_max:-999}" ] || die "ibus has uid $uid: not a system user"
[ "$(getent group ibus | cut -d: -f3)" = "$gid" ] || die "ibus's primary group is not ibus"
[ "$home" = /var/lib/infinity-bus ] || die "ibus's home is $home"
case $shell in */nologin | /bin/false) ;; *) die "ibus has the login shell $shell" ;; esac
[ "$(stat -c '%U:%G %a' /var/lib/infinity-bus)" = "ibus:ibus 700" ] ||
    die "/var/lib/infinity-bus: $(stat -c '%U:%G %a' /var/lib/infinity-bus)"
say "user: $(id ibus), home $home, shell $shell"

as_ibus() { (cd "$udir" && runuser -u ibus -- "$@"); }
udir=$work/ibus
install -d -o ibus -g ibus -m 0700 "$udir"
out=$(as_ibus ibus version) || die "ibus version as ibus"
case $out in "ibus $version"*) ;; *) die "ibus version says: $out" ;; esac
lib=$(ldd /usr/bin/ibus | sed -n 's/^[[:space:]]*libinfinity-bus\.so\.0 => \([^ ]*\).*/\1/p')
[ "$(readlink -f "$lib")" = "$(readlink -f "$libdir/libinfinity-bus.so.0")" ] ||
    die "/usr/bin/ibus loads libinfinity-bus.so.0 from '$lib'"
! ldd /usr/bin/ibus "$plugins"/*.so | grep 'not found' >/dev/null || die "unresolved libraries"
say "ibus version as ibus: ${out%%$'\n'*}"

# A short consume as the packaged user: a real nats-server on a free
# loopback port, the packaged audit plugin, a SQLite recorder in a directory
# the user owns.
mkdir "$work/js" "$work/ports"
nats-server -js -a 127.0.0.1 -p -1 -sd "$work/js" --ports_file_dir "$work/ports" \
    >"$work/nats.log" 2>&1 &
nats_pid=$!
port=""
for _ in $(seq 250); do
    port=$(sed -n 's/.*"nats:\/\/127\.0\.0\.1:\([0-9]*\)".*/\1/p' "$work/ports"/*.ports \
        2>/dev/null | head -n 1 || true)
    [ -z "$port" ] || break
    kill -0 "$nats_pid" 2>/dev/null || break
    sleep 0.02
done
[ -n "$port" ] || { cat "$work/nats.log" >&2; die "nats-server did not start"; }
url=nats://127.0.0.1:$port
consume() { # run number: the packaged ibus, as ibus, until idle
    as_ibus ibus run --nats-url "$url" --create --stream PKGTEST --stream-subjects 'pkgtest.>' \
        --durable pkgtest --plugin "$plugins/audit.so" \
        --plugin-config "audit=file=$udir/audit.log" --recorder "sqlite:$udir/processed.db" \
        --idle-exit 2s --summary-file "$udir/summary.json" --log-format text \
        >"$work/run$1.log" 2>&1 || { cat "$work/run$1.log" >&2; die "ibus run $1 failed"; }
}
consume 1 # creates the stream and the consumer
published=$(as_ibus ibus publish --nats-url "$url" --prefix pkgtest --type order.created \
    --count 40 --duplicates 0.25 --seed 5 --ids-file "$udir/ids") || die "ibus publish"
consume 2
# The last summary line, checked field by field (a JSON parser, so the
# check holds whatever the spacing).
python3 - "$udir/summary.json" "$udir/ids" "$udir/audit.log" "$published" <<'PY' ||
import json, sys
summary = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ids = set(open(sys.argv[2]).read().split())
audited = [line.split()[1] for line in open(sys.argv[3]) if line.strip()]
stats = dict(kv.split("=", 1) for kv in sys.argv[4].split() if "=" in kv)
dups = int(stats["published"]) - len(ids)
want = {"exit": 0, "handled": len(ids), "duplicates": dups, "dead_lettered": 0, "rejected": 0}
bad = {k: summary.get(k) for k, v in want.items() if summary.get(k) != v}
if bad or dups == 0 or sorted(audited) != sorted(ids):
    sys.exit(f"summary {summary}, want {want}; audited {len(audited)} lines for {len(ids)} ids")
print(f"test_deb: consumed as ibus: {len(ids)} events handled once, {dups} duplicates dropped")
PY
    die "the consume as ibus"
[ "$(stat -c %U "$udir/processed.db")" = ibus ] || die "processed.db is not owned by ibus"

# Building against the -dev package: pkg-config, find_package, a plugin.
[ "$(pkg-config --modversion infinity-bus)" = "$version" ] ||
    die "pkg-config --modversion infinity-bus: $(pkg-config --modversion infinity-bus)"
abi=$(sed -n 's/^#define IB_ABI_MAJOR \([0-9]*\).*/\1/p; s/^#define IB_ABI_MINOR \([0-9]*\).*/\1/p' \
    /usr/include/infinity_bus/plugin.h | paste -sd.)
[ "$(pkg-config --modversion infinity-bus-plugin)" = "$abi" ] ||
    die "pkg-config --modversion infinity-bus-plugin: want the ABI $abi"
# shellcheck disable=SC2046 # word lists
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -o "$work/pc_consumer" \
    "$src/idempotency/examples/nats_consumer.c" $(pkg-config --cflags --libs infinity-bus libnats) ||
    die "cc with pkg-config infinity-bus"
cp -R "$src/idempotency/examples" "$work/ex-src"
cp -R "$src/tests/plugins/out_of_tree" "$work/plugin-src"
for p in ex plugin; do
    { cmake -S "$work/$p-src" -B "$work/$p" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" &&
        cmake --build "$work/$p"; } >"$work/$p.log" 2>&1 ||
        { cat "$work/$p.log" >&2; die "out-of-tree build of $p against the installed package"; }
done
for exe in "$work/pc_consumer" "$work/ex/nats_consumer"; do
    ldd "$exe" | grep "libinfinity-bus\.so\.0 => [^ ]*$multiarch/libinfinity-bus\.so\.0" >/dev/null ||
        die "$exe does not load the packaged library"
done
[ "$(nm -D --defined-only "$work/plugin/hello.so" | awk '{ print $NF }')" = ib_plugin_entry ] ||
    die "the out-of-tree plugin exports more than ib_plugin_entry"
say "pkg-config $version (plugin ABI $abi), find_package and an out-of-tree plugin build"

# man ibus. Minimal images drop /usr/share/man with a dpkg path-exclude:
# say so instead of failing, or passing, silently.
if [ -z "$man_page" ]; then
    say "NOTE: this tree installs no man page; man ibus not checked"
elif [ ! -e "$man_page" ]; then
    excl=$(grep -rls '^path-exclude.*/usr/share/man' /etc/dpkg/dpkg.cfg.d/ || true)
    [ -n "$excl" ] || die "$man_page is in the package but not installed"
    say "NOTE: man ibus not checked: dpkg drops man pages here (path-exclude in $excl)"
elif ! command -v man >/dev/null 2>&1; then
    say "NOTE: man ibus not checked: man is not installed (Debian: man-db)"
else
    MANWIDTH=80 man -P cat ibus >"$work/man.txt" 2>&1 || { cat "$work/man.txt" >&2; die "man ibus"; }
    grep -q 'ibus run' "$work/man.txt" || die "man ibus shows no 'ibus run'"
    say "man ibus: $(wc -l <"$work/man.txt") lines"
fi

# The installed unit as systemd reads it.
if command -v systemd-analyze >/dev/null 2>&1; then
    out=$(systemd-analyze verify --man=no ibus@pkgtest.service 2>&1) || true
    [ -z "$out" ] || die "systemd-analyze verify ibus@pkgtest.service: $out"
    exposure=$(systemd-analyze security --offline=yes ibus@pkgtest.service 2>&1 |
        grep -o 'exposure level[^:]*: [0-9.]*' || true)
    say "systemd-analyze verify: the installed unit is accepted; $exposure"
else
    say "NOTE: systemd-analyze is not installed (Debian: systemd); unit not verified"
fi

# --- 4. purge -----------------------------------------------------------
for p in "${packages[@]}"; do dpkg -L "$p"; done | sort -u >"$work/owned"
DEBIAN_FRONTEND=noninteractive apt_get purge "${packages[@]}" >"$work/purge.log" 2>&1 ||
    { cat "$work/purge.log" >&2; die "apt-get purge"; }
we_installed=0
for p in "${packages[@]}"; do
    ! installed "$p" || die "$p is still installed after the purge"
done
left=()
while read -r path; do
    # shared directories (/usr, /usr/lib, ...) stay; ours must go
    if [ -e "$path" ] || [ -L "$path" ]; then
        if [ ! -d "$path" ] || [[ $path == *infinity* ]] || [[ $path == *ibus* ]]; then
            left+=("$path")
        fi
    fi
done <"$work/owned"
for path in /var/lib/infinity-bus /etc/infinity-bus; do
    [ ! -e "$path" ] || left+=("$path")
done
[ ${#left[@]} -eq 0 ] || die "left after the purge: ${left[*]}"
! ldconfig -p | grep libinfinity-bus >/dev/null || die "ldconfig still lists libinfinity-bus"
if command -v systemctl >/dev/null 2>&1; then
    systemctl cat ibus@pkgtest.service >/dev/null 2>&1 && die "the unit is still known to systemd"
fi
say "apt-get purge: $(wc -l <"$work/owned") paths checked, nothing left, the unit is gone"
say "ok"

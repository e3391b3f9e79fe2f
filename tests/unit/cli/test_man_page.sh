#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ibus(1) as a reader gets it.
#
#   test_man_page.sh page IBUS PAGE SOURCE_DIR
#     - PAGE (the build's ibus.1) is what `IBUS help --man` writes now;
#     - groff (-ww) and man (--warnings) render it without a warning;
#     - `man -l` shows NAME and one COMMANDS entry per command of `ibus help`;
#     - for every command, every option, action, variable and default its
#       --help prints is in that command's entry, and every variable is in
#       ENVIRONMENT: --help is parsed, so an option the page lacks fails here;
#     - every IB_* name the product's C sources spell out (variables read
#       outside the option tables) is in ENVIRONMENT.
#   test_man_page.sh install BUILD_DIR PAGE
#     - `cmake --install` into a temporary prefix, whole and as component
#       ibus, puts PAGE at share/man/man1/ibus.1.
set -eu
mode=$1
shift
work=$(mktemp -d -t ib-man-page.XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM

die() {
    printf '%s\n' "test_man_page: FAIL: $*" >&2
    exit 1
}

# section NAME < RENDERED: the lines of one section (.SH), heading left out.
section() {
    awk -v want="$1" '/^[A-Z][A-Z ]*$/ { on = ($0 == want); next } on'
}

# command_entry CMD < RENDERED: the lines of CMD's entry (.SS) in COMMANDS.
command_entry() {
    section COMMANDS | awk -v want="   ibus $1" '/^   [^ ]/ { on = ($0 == want); next } on'
}

# has_line FILE WORD: a line of FILE starts (after its indent) with WORD,
# alone or followed by a space: how a .TP tag renders.
has_line() {
    grep -Eq "^ +$(printf '%s' "$2" | sed 's/[][\.*^$|+?(){}]/\\&/g')( |\$)" "$1"
}

# entries PATTERN < HELP: "TAG<tab>TEXT" for each --help line "  TAG  TEXT"
# whose TAG (a word, then maybe its metavar) matches PATTERN; TEXT without
# the " (repeatable)" the page says its own way.
entries() {
    sed -n "s/^  \($1\( [^ ][^ ]*\)\{0,1\}\)  *\(.*\)\$/\1\t\3/p" | sed 's/ (repeatable)$//'
}

# joined < ENTRY: each .TP tag (indent 7) on one line with its paragraph
# (indent 14), spaces squeezed: " TAG TEXT...".
joined() {
    awk '/^              [^ ]/ && tag != "" { print tag " " $0; tag = ""; next }
         tag != "" { print tag; tag = "" }
         /^       [^ ]/ { tag = $0; next }
         { print }
         END { if (tag != "") print tag }' | tr -s ' '
}

# check_entries WHAT CMD ENTRY < "TAG<tab>TEXT" lines: ENTRY has TAG as a
# tag with TEXT as its paragraph.
check_entries() {
    n=0
    joined <"$3" >"$3.joined"
    while IFS=$(printf '\t') read -r tag text; do
        grep -Fq -- " $tag $text" "$3.joined" ||
            die "ibus $2: $1 '$tag' ($text) is in --help, not on the page"
        n=$((n + 1))
    done
    echo "ibus $2: $n ${1}s on the page"
}

check_command() { # CMD RENDERED
    cmd=$1
    rendered=$2
    "$ibus" "$cmd" --help >"$work/help.$cmd" 2>&1 || die "ibus $cmd --help exited non-zero"
    command_entry "$cmd" <"$rendered" >"$work/entry.$cmd"
    [ -s "$work/entry.$cmd" ] || die "no COMMANDS entry 'ibus $cmd'"
    section ENVIRONMENT <"$rendered" >"$work/env"
    entries '--[a-z0-9][a-z0-9-]*' <"$work/help.$cmd" | check_entries option "$cmd" "$work/entry.$cmd"
    sed -n '/^actions:$/,/^$/p' "$work/help.$cmd" | entries '[a-z][a-z]*' |
        check_entries action "$cmd" "$work/entry.$cmd"
    # "[IB_NAME]" or "[IB_NAME; default VALUE]"
    sed -n 's/^ *\[\(IB_[A-Z0-9_]*\)\(; default \(.*\)\)\{0,1\}\]$/\1 \3/p' "$work/help.$cmd" |
        while read -r var def; do
            grep -Eq "Environment: ${var}[;.]" "$work/entry.$cmd" ||
                die "ibus $cmd: $var is in --help, not in its entry"
            [ -z "$def" ] || grep -Fq "$var; default: $def" "$work/entry.$cmd" ||
                die "ibus $cmd: --help gives $var the default '$def', the page does not"
            has_line "$work/env" "$var" || die "$var is not in ENVIRONMENT"
        done
}

check_page() {
    ibus=$1
    page=$2
    src=$3
    "$ibus" help --man >"$work/ibus.1" || die "ibus help --man exited non-zero"
    cmp -s "$work/ibus.1" "$page" || die "$page is not what 'ibus help --man' writes"

    groff -man -Tutf8 -ww -z "$page" 2>"$work/groff.err" || die "groff failed"
    [ ! -s "$work/groff.err" ] || { cat "$work/groff.err" >&2; die "groff warns"; }
    MANWIDTH=80 man --warnings -P cat -l "$page" >"$work/man.txt" 2>"$work/man.err" ||
        die "man -l failed: $(cat "$work/man.err")"
    [ ! -s "$work/man.err" ] || { cat "$work/man.err" >&2; die "man --warnings warns"; }
    grep -q '^NAME$' "$work/man.txt" || die "man -l shows no NAME"
    grep -q '^ *ibus - ' "$work/man.txt" || die "NAME is not 'ibus - ...'"

    # Wide lines, no fonts: one tag or heading per line, plain ASCII.
    groff -man -Tascii -P-cbou -rLL=2000n "$page" >"$work/page.txt" 2>/dev/null
    cmds=$("$ibus" help | sed -n '/^commands:$/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
    [ -n "$cmds" ] || die "'ibus help' lists no commands"
    for cmd in $cmds; do
        grep -q "^   ibus $cmd\$" "$work/man.txt" || die "man -l shows no entry 'ibus $cmd'"
        section SYNOPSIS <"$work/page.txt" | grep -q "^ *ibus $cmd\\b" ||
            die "SYNOPSIS lacks ibus $cmd"
        check_command "$cmd" "$work/page.txt"
    done

    # Variables the sources name outside the tables, e.g. the loader's
    # IB_PLUGIN_CONFIG_<NAME>; "IB_" alone is the tables' own prefix.
    section ENVIRONMENT <"$work/page.txt" >"$work/env"
    find "$src/core" "$src/recorders" "$src/plugin" "$src/idempotency" -name '*.c' \
        ! -path '*/examples/*' -exec grep -ho '"IB_[A-Z0-9_]*' {} + | tr -d '"' | sort -u |
        while read -r var; do
            [ "$var" != IB_ ] || continue
            grep -Eq "^ +$var" "$work/env" || die "$var is read by the sources, not in ENVIRONMENT"
        done
    echo "ok: $(grep -c '^   ibus ' "$work/man.txt") commands, no warnings"
}

check_install() {
    build=$1
    page=$2
    cmake --install "$build" --prefix "$work/all" >"$work/install.log" 2>&1 ||
        { cat "$work/install.log" >&2; die "cmake --install"; }
    # the same page, except that it names the plugin directory of the
    # prefix it was installed to (cmake/IbInstallPrefix.cmake)
    [ -f "$work/all/share/man/man1/ibus.1" ] ||
        die "cmake --install did not put the page at share/man/man1/ibus.1"
    grep -v 'infinity\\-bus/plugins' "$work/all/share/man/man1/ibus.1" >"$work/installed.1"
    grep -v 'infinity\\-bus/plugins' "$page" >"$work/built.1"
    cmp -s "$work/installed.1" "$work/built.1" ||
        die "the installed page differs from the built one beyond the plugin directory"
    want=$(printf '%s' "$work/all/lib/infinity-bus/plugins/" | sed 's/-/\\-/g')
    grep -qF "$want" "$work/all/share/man/man1/ibus.1" ||
        die "the installed page does not name the prefix's plugin directory"
    cmake --install "$build" --prefix "$work/ibus" --component ibus >"$work/install.log" 2>&1 ||
        { cat "$work/install.log" >&2; die "cmake --install --component ibus"; }
    [ -f "$work/ibus/share/man/man1/ibus.1" ] || die "component ibus lacks share/man/man1/ibus.1"
    echo "ok: installed at share/man/man1/ibus.1"
}

case $mode in
page) check_page "$@" ;;
install) check_install "$@" ;;
*) die "unknown mode '$mode'" ;;
esac

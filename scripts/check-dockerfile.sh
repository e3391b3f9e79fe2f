#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks a Dockerfile against the image rules of infinity-bus
# (deploy/README.md, "The image"):
#   pinned-base     every FROM names an earlier stage, scratch, a digest, or an
#                   exact version tag (X.Y... or a YYYYMMDD date stamp); never a
#                   moving tag, no tag at all, or an ARG-substituted image
#   no-latest       the word "latest" appears in no image reference
#   non-root-user   the final stage ends with USER <uid>[:<gid>], numeric and not 0
#                   (numeric so Kubernetes can verify runAsNonRoot)
#   no-secrets      no ENV or ARG whose name looks like a credential
#                   (PASSWORD, PASSWD, TOKEN, SECRET, KEY, CREDENTIAL) carries a value
#   no-remote-add   no ADD of a URL or git repository (unverified downloads)
#   exec-entrypoint the final stage has ENTRYPOINT in exec (JSON) form, so
#                   SIGTERM reaches ibus rather than a shell
#   multi-stage     at least two stages (build tools stay out of the runtime)
#
# usage: scripts/check-dockerfile.sh [Dockerfile]   (default deploy/Dockerfile)
# Prints one "FAIL <file>:<line>: <rule>: <detail>" per problem; exit 1 if any.
set -euo pipefail

file=${1:-"$(dirname "$0")/../deploy/Dockerfile"}
if [[ ! -r $file ]]; then
    echo "check-dockerfile: cannot read $file" >&2
    exit 2
fi

fails=0
fail() { # line rule detail
    echo "FAIL $file:$1: $2: $3"
    fails=$((fails + 1))
}

# Logical instructions: comments dropped, backslash continuations joined,
# each printed as "<first line number><TAB><instruction text>".
mapfile -t instructions < <(awk '
    function flush() { if (buf != "") print start "\t" buf; buf = "" }
    /^[[:space:]]*#/ && buf == "" { next }
    /^[[:space:]]*$/ && buf == "" { next }
    {
        line = $0
        if (buf == "") start = NR
        sub(/^[[:space:]]+/, "", line)
        if (line ~ /\\[[:space:]]*$/) { sub(/\\[[:space:]]*$/, "", line); buf = buf line " "; next }
        buf = buf line
        flush()
    }
    END { flush() }' "$file")

stages=()         # stage names (lower case) seen so far
stage_count=0
last_user="" last_user_line=0
entrypoint="" entrypoint_line=0

is_pinned_tag() { # tag
    [[ $1 =~ (^|[^0-9])[0-9]+\.[0-9]+ ]] || [[ $1 =~ (^|[^0-9])(19|20)[0-9]{6}($|[^0-9]) ]]
}

for entry in "${instructions[@]}"; do
    lineno=${entry%%$'\t'*}
    text=${entry#*$'\t'}
    read -r keyword rest <<<"$text" || true
    keyword=${keyword^^}
    case $keyword in
    FROM)
        stage_count=$((stage_count + 1))
        last_user="" last_user_line=0 entrypoint="" entrypoint_line=0
        read -r -a words <<<"$rest"
        image="" alias=""
        for ((i = 0; i < ${#words[@]}; i++)); do
            w=${words[i]}
            [[ $w == --* ]] && continue
            if [[ -z $image ]]; then
                image=$w
            elif [[ ${w^^} == AS ]] && ((i + 1 < ${#words[@]})); then
                alias=${words[i + 1],,}
                break
            fi
        done
        # an earlier stage of this file is not an image to pin
        known_stage=0
        for s in "${stages[@]}"; do
            [[ $s == "${image,,}" ]] && known_stage=1
        done
        [[ -n $alias ]] && stages+=("$alias")
        ((known_stage)) && continue
        if [[ $image == *'$'* ]]; then
            fail "$lineno" pinned-base "base image '$image' comes from an ARG; write the pinned image literally"
            continue
        fi
        if [[ ${image,,} == scratch ]]; then
            continue
        fi
        if [[ ${image,,} == *latest* ]]; then
            fail "$lineno" no-latest "base image '$image' uses latest"
            continue
        fi
        if [[ $image == *@sha256:* ]]; then
            continue
        fi
        last=${image##*/}
        if [[ $last != *:* ]]; then
            fail "$lineno" pinned-base "base image '$image' has no tag (that means latest)"
        elif ! is_pinned_tag "${last#*:}"; then
            fail "$lineno" pinned-base "base image '$image' has a moving tag; use an exact version (e.g. 12.8-slim) or a digest"
        fi
        ;;
    COPY)
        if [[ ${rest,,} =~ --from=([^[:space:]]+) ]] && [[ ${BASH_REMATCH[1]} == *latest* ]]; then
            fail "$lineno" no-latest "COPY --from an image tagged latest"
        fi
        ;;
    ADD)
        if [[ $rest =~ (https?|ftp)://|git@|\.git([[:space:]]|$) ]]; then
            fail "$lineno" no-remote-add "ADD fetches a remote source; download in a RUN step and verify a checksum, or COPY"
        fi
        ;;
    ENV | ARG)
        # ENV may be "K=V K2=V2" or the legacy "K V"; ARG is "K[=V]"
        if [[ $keyword == ENV && $rest != *=* ]]; then
            pairs=("${rest%% *}=${rest#* }")
        else
            read -r -a pairs <<<"$rest"
        fi
        for p in "${pairs[@]}"; do
            name=${p%%=*}
            value=""
            [[ $p == *=* ]] && value=${p#*=}
            value=${value//\"/}
            if [[ ${name^^} =~ (PASSWORD|PASSWD|TOKEN|SECRET|KEY|CREDENTIAL) ]] && [[ -n $value ]]; then
                fail "$lineno" no-secrets "$keyword $name carries a value; pass credentials at run time (Kubernetes Secret, EnvironmentFile)"
            fi
        done
        ;;
    USER)
        last_user=${rest%% *}
        last_user_line=$lineno
        ;;
    ENTRYPOINT)
        entrypoint=$rest
        entrypoint_line=$lineno
        ;;
    esac
done

if ((stage_count == 0)); then
    fail 1 pinned-base "no FROM instruction"
elif ((stage_count < 2)); then
    fail 1 multi-stage "one stage only: build in a separate stage and copy the result"
fi
if [[ -z $last_user ]]; then
    fail "${instructions[-1]%%$'\t'*}" non-root-user "the final stage sets no USER, so it runs as root"
else
    uid=${last_user%%:*}
    if [[ $uid == root ]] || [[ $uid =~ ^0+$ ]]; then
        fail "$last_user_line" non-root-user "USER $last_user is root"
    elif [[ ! $uid =~ ^[0-9]+$ ]]; then
        fail "$last_user_line" non-root-user "USER $last_user is not numeric; Kubernetes cannot verify runAsNonRoot for a name"
    fi
fi
if [[ -z $entrypoint ]]; then
    fail "${instructions[-1]%%$'\t'*}" exec-entrypoint "the final stage has no ENTRYPOINT"
elif [[ $entrypoint != \[* ]]; then
    fail "$entrypoint_line" exec-entrypoint "ENTRYPOINT in shell form: a shell would receive SIGTERM, not ibus"
fi

if ((fails > 0)); then
    echo "check-dockerfile: $file: $fails rule(s) broken"
    exit 1
fi
echo "check-dockerfile: $file: all rules hold"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# usage: expect-failure.sh RULE COMMAND...
# Passes when COMMAND exits 1 and reports a failure of RULE ("...: RULE: ..."):
# proves a checker rejects what it must, for the reason it must. A COMMAND
# that skips (exit 77: a tool it needs is missing) skips this too.
set -uo pipefail
rule=$1
shift
out=$("$@" 2>&1)
rc=$?
echo "$out"
if [[ $rc -eq 77 ]]; then
    echo "expect-failure: '$*' skipped (exit 77): nothing to prove"
    exit 77
fi
if [[ $rc -ne 1 ]]; then
    echo "expect-failure: '$*' exited $rc, expected 1"
    exit 1
fi
if ! grep -q ": $rule: " <<<"$out"; then
    echo "expect-failure: '$*' failed, but not with rule $rule"
    exit 1
fi
echo "expect-failure: rejected with rule $rule, as it must be"

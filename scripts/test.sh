#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds infinity-bus and runs every test: unit, fuzz (replay), deploy
# checks, valgrind runs and integration tests in a normal build, then unit,
# fuzz and integration tests again in an ASan+UBSan build. Installs missing
# packages first. Both builds treat warnings as errors (IB_WERROR, off by
# default so a newer compiler's new warning does not break a user's build).
# Prints ctest's summaries and a closing total.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh || exit 1

jobs=$(nproc 2>/dev/null || echo 2)
total_pass=0
total_fail=0
total_skip=0

# run_ctest BUILD_DIR ARGS...: runs ctest, adds its counts to the totals.
run_ctest() {
  local dir=$1
  shift
  local log
  log=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure "$@" 2>&1 | tee "$log"
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)
  if [ -n "$line" ]; then
    local failed all
    failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
    all=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
    # ctest counts a skipped test (exit 77: a tool is missing) as not
    # failed; it is counted here apart, with its reason in the log above.
    local skipped
    skipped=$(grep -c '(Skipped)$' "$log" || true)
    total_pass=$((total_pass + all - failed - skipped))
    total_fail=$((total_fail + failed))
    total_skip=$((total_skip + skipped))
  elif ! grep -q 'No tests were found' "$log"; then
    total_fail=$((total_fail + 1))
  fi
  rm -f "$log"
}

build() {
  local dir=$1
  shift
  local log
  log=$(mktemp)
  if ! cmake -S . -B "$dir" "$@" >"$log" 2>&1 || ! cmake --build "$dir" -j "$jobs" >>"$log" 2>&1; then
    tail -n 60 "$log"
    rm -f "$log"
    return 1
  fi
  grep -E 'warning:' "$log" || true
  rm -f "$log"
}

echo "== normal build (RelWithDebInfo, -Wall -Wextra -Werror)"
if build build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIB_WERROR=ON; then
  echo "== unit, fuzz, deploy and valgrind tests"
  # rootfs (the image run in a chroot) needs root and a Debian mirror: by hand,
  # ctest -L rootfs (deploy/README.md, "The image")
  run_ctest build -LE "integration|chaos|rootfs|package" -j "$jobs"
  echo "== integration tests (real nats-server, real ibus processes)"
  run_ctest build -L integration -j "$jobs"
  # installs and purges the .deb packages: root only, skipped otherwise
  echo "== Debian package (cpack, apt-get install, a consume as ibus, apt-get purge)"
  run_ctest build -L package
else
  echo "build failed"
  total_fail=$((total_fail + 1))
fi

echo "== ASan+UBSan build"
if build build-asan -DCMAKE_BUILD_TYPE=Debug -DIB_SANITIZE=ON -DIB_WERROR=ON -DIB_VALGRIND=OFF \
  -DIB_BUILD_BENCH=OFF; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_ctest build-asan -L 'unit|fuzz' -j "$jobs"
  run_ctest build-asan -L integration -j "$jobs"
else
  echo "ASan build failed"
  total_fail=$((total_fail + 1))
fi

echo
echo "all: ${total_pass} passed, ${total_fail} failed, ${total_skip} skipped"
[ "$total_fail" -eq 0 ]

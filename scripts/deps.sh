#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what building, testing and the demo need on Debian 12, and only
# what is missing. Needs root (or sudo) when something must be installed.
set -euo pipefail

# What building, installing and running need: the README's by-hand
# apt-get line names exactly these (the docs test checks it).
build_packages=(
  build-essential cmake pkg-config
  libnats-dev libprotobuf-c-dev protobuf-c-compiler libsqlite3-dev
  libmicrohttpd-dev libjansson-dev libssl-dev libcurl4-openssl-dev
  nats-server
)
# What the tests, the demo and the checks add.
test_packages=(
  libcmocka-dev sqlite3 openssl curl valgrind clang-format
  yamllint python3 python3-yaml
  dpkg-dev file groff-base man-db
)
packages=("${build_packages[@]}" "${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
# The deploy checks render the Kubernetes overlays with kubectl 1.21 or
# newer where the machine has one; Debian 12's kubernetes-client (1.20) is
# too old to render them, so none is installed and those checks skip.
# systemd-analyze checks the unit file; containers often lack systemd.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# prometheus brings promtool (rule checks and rule unit tests) and the server
# the live-Prometheus integration test starts on loopback by itself.
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)

if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  # Debian's prometheus package starts a system-wide Prometheus and enables
  # it for boot; the tests start their own. While installing, a policy-rc.d
  # refuses every service start (one already there, as in container images,
  # is kept), and afterwards the service is disabled for boot.
  policy=/usr/sbin/policy-rc.d
  if [[ " ${missing[*]} " == *" prometheus "* && ! -e $policy ]]; then
    printf '#!/bin/sh\n# deps.sh: no service starts while installing\nexit 101\n' |
      $sudo tee "$policy" >/dev/null
    $sudo chmod 0755 "$policy"
    trap '$sudo rm -f "$policy"' EXIT
  fi
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  if [[ " ${missing[*]} " == *" prometheus "* ]]; then
    if command -v systemctl >/dev/null 2>&1; then
      $sudo systemctl disable prometheus.service >/dev/null 2>&1 || true
    fi
    $sudo update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
fi

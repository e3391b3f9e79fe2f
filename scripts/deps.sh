#!/usr/bin/env bash
# Installs what building, testing and the demo need on Debian 12, and only
# what is missing. Needs root (or sudo) when something must be installed.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libnats-dev libprotobuf-c-dev protobuf-c-compiler libsqlite3-dev
  libcmocka-dev libmicrohttpd-dev libjansson-dev libssl-dev
  nats-server sqlite3 openssl curl valgrind clang-format
  yamllint python3 python3-yaml
  dpkg-dev file groff-base man-db
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# kubectl renders the Kubernetes overlays in the deploy checks; Debian's
# kubernetes-client provides one where the machine has none.
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)

if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks of deploy/ that need no cluster, no container engine and no network.
#
#   check-deploy.sh render OVERLAY     kubectl kustomize the overlay and check
#                                      every workload rule on the output
#   check-deploy.sh selftest OVERLAY   same output, then prove each rule catches
#                                      a deliberate breakage
#   check-deploy.sh yamllint           yamllint --strict over deploy/
#   check-deploy.sh systemd [PLUGINDIR] systemd-analyze verify + security score
#                                      of deploy/systemd/ibus@.service; with
#                                      PLUGINDIR, also that its plugins load
#                                      under MemoryDenyWriteExecute
#   check-deploy.sh promtool-check     promtool check rules deploy/prometheus/
#   check-deploy.sh promtool-test      promtool test rules (unit tests of every
#                                      alert) and the alerts' completeness
#   check-deploy.sh grafana            the dashboard model deploy/grafana/ibus.json
#   check-deploy.sh operator OVERLAY   the overlay with the prometheus-operator
#                                      component: ServiceMonitor and PrometheusRule
#   check-deploy.sh settings OVERLAY IBUS PLUGINDIR [--set NAME=VALUE]...
#                                      ibus run --check accepts the settings the
#                                      overlay gives its container
#   check-deploy.sh all [PLUGINDIR]    everything above, every overlay
#
# Tools: kubectl (its built-in kustomize; the step is skipped with exit 77 when
# kubectl is absent), yamllint and python3 with PyYAML (Debian: yamllint,
# python3-yaml), systemd-analyze (Debian: systemd), readelf (binutils),
# promtool (Debian: prometheus; its steps are skipped with exit 77 without it).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
overlays=(single-pod single-pod-pvc sharded fleet fleet-kv)
SKIP=77

need() { # tool package
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "check-deploy: $1 is not installed (Debian package: $2)" >&2
        exit 1
    fi
}

# Skips (exit 77) unless a kubectl that can render the overlays is there:
# 1.21 or newer, whose built-in kustomize takes directories as resources
# and inline patches. Debian 12's kubernetes-client is 1.20 (kustomize
# 2.0.3), too old; the message names what to install.
need_kustomize() { # overlay
    if ! command -v kubectl >/dev/null 2>&1; then
        echo "check-deploy: SKIP: kubectl is not installed, cannot render $1" \
            "(install kubectl 1.21 or newer)"
        exit $SKIP
    fi
    local minor
    minor=$(kubectl version --client -o json 2>/dev/null |
        python3 -c 'import json, re, sys; print(re.sub(r"\D", "", json.load(sys.stdin)["clientVersion"]["minor"]) or 0)' \
            2>/dev/null || echo 0)
    if [[ ${minor:-0} -lt 21 ]]; then
        echo "check-deploy: SKIP: kubectl 1.${minor:-?} embeds a kustomize too old for the overlays," \
            "cannot render $1 (install kubectl 1.21 or newer; Debian 12's kubernetes-client is 1.20)"
        exit $SKIP
    fi
}

render() { # overlay -> file
    need_kustomize "$1"
    local dir=$here/deploy/k8s/overlays/$1
    [[ -d $dir ]] || { echo "check-deploy: no overlay $1" >&2; exit 2; }
    kubectl kustomize "$dir" >"$2"
    echo "check-deploy: kubectl kustomize $1: $(grep -c '^kind:' "$2") objects"
}

check_overlay() { # overlay [--self-test]
    local out
    out=$(mktemp)
    trap 'rm -f "$out"' RETURN
    render "$1" "$out"
    need python3 python3
    python3 "$here/tests/deploy/check_manifests.py" ${2:-} --topology "$1" "$out"
}

check_yamllint() {
    need yamllint yamllint
    yamllint --strict -c "$here/deploy/.yamllint" "$here/deploy"
    echo "check-deploy: yamllint: deploy/ is clean"
}

# systemd-analyze resolves ExecStart= and the unit's dependencies on this
# machine; a private root with a stub binary and the stock units makes the
# check independent of whether ibus is installed here.
check_systemd() { # [plugindir]
    need systemd-analyze systemd
    local root unit=ibus@check.service out
    root=$(mktemp -d)
    trap 'rm -rf "$root"' RETURN
    mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd"
    printf '#!/bin/sh\nexit 0\n' >"$root/usr/local/bin/ibus"
    chmod 0755 "$root/usr/local/bin/ibus"
    cp -a /lib/systemd/system "$root/usr/lib/systemd/"
    cp "$here/deploy/systemd/ibus@.service" "$root/etc/systemd/system/"
    # verify exits 0 on "ignoring" warnings: any output at all is a failure
    out=$(systemd-analyze verify --man=no --root="$root" "$unit" 2>&1) || true
    if [[ -n $out ]]; then
        echo "$out"
        echo "check-deploy: systemd-analyze verify: ibus@.service has problems" >&2
        return 1
    fi
    echo "check-deploy: systemd-analyze verify: ibus@.service accepted"
    # exposure is 0..10, threshold 0..100: keep the unit at 2.0 or better
    if ! systemd-analyze security --offline=yes --root="$root" --threshold=20 "$unit" >/dev/null 2>&1; then
        systemd-analyze security --offline=yes --root="$root" "$unit" 2>&1 | tail -n 25
        echo "check-deploy: systemd-analyze security: exposure above 2.0" >&2
        return 1
    fi
    echo "check-deploy: systemd-analyze security: $(systemd-analyze security --offline=yes \
        --root="$root" "$unit" 2>&1 | grep -o 'exposure level.*' || true)"
    if [[ -n ${1:-} ]]; then
        check_wx "$1"
    fi
}

# MemoryDenyWriteExecute=yes refuses text relocations and executable stacks:
# the plugins we ship (and build the same way as third-party ones) have
# neither.
check_wx() { # plugindir
    need readelf binutils
    local n=0 bad=0 f
    for f in "$1"/*.so; do
        [[ -e $f ]] || continue
        n=$((n + 1))
        if readelf -dW "$f" | grep TEXTREL >/dev/null; then
            echo "FAIL $f: has text relocations (breaks under MemoryDenyWriteExecute)"
            bad=1
        fi
        if readelf -lW "$f" | awk '$1 == "GNU_STACK" && $7 ~ /E/ { found = 1 } END { exit !found }'; then
            echo "FAIL $f: asks for an executable stack (breaks under MemoryDenyWriteExecute)"
            bad=1
        fi
    done
    if ((n == 0)); then
        echo "check-deploy: no plugins under $1: W^X check needs a build; skipped that part"
    else
        echo "check-deploy: $n plugin(s) checked for W^X compatibility"
    fi
    return $bad
}

need_promtool() {
    if ! command -v promtool >/dev/null 2>&1; then
        echo "check-deploy: SKIP: promtool is not installed (Debian: prometheus)"
        exit $SKIP
    fi
}

check_promtool() { # check|test
    need_promtool
    # promtool resolves rule_files relative to the tests file: run it there
    (cd "$here/deploy/prometheus" && if [[ $1 == check ]]; then
        promtool check rules ibus-rules.yaml
    else
        promtool test rules ibus-rules.test.yaml
    fi)
    if [[ $1 == test ]]; then
        need python3 python3
        python3 "$here/tests/deploy/check_observability.py" rules "$here"
    fi
}

# The component is added to a copy of the overlay, as an operator's own
# overlay would add it. The single-pod overlays serve one metrics port per
# container; their copy adds the endpoints deploy/README.md tells operators
# to add, and the check then demands that every port is scraped.
check_operator() { # overlay
    local dir out rel
    need_kustomize "$1"
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' RETURN
    # kustomize refuses absolute paths to bases: name them relative to the copy
    rel=$(realpath --relative-to="$dir" "$here")
    cat >"$dir/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: infinity-bus
resources:
  - $rel/deploy/k8s/overlays/$1
components:
  - $rel/deploy/k8s/components/prometheus-operator
EOF
    if [[ $1 == single-pod* ]]; then
        cat >>"$dir/kustomization.yaml" <<EOF
patches:
  - target: {kind: ServiceMonitor, name: ibus}
    patch: |-
      - {op: add, path: /spec/endpoints/-, value: {port: metrics-1, path: /metrics, interval: 30s}}
      - {op: add, path: /spec/endpoints/-, value: {port: metrics-2, path: /metrics, interval: 30s}}
EOF
    fi
    out=$dir/rendered.yaml
    kubectl kustomize "$dir" >"$out"
    need python3 python3
    python3 "$here/tests/deploy/check_observability.py" operator "$here" "$out"
    # the component must not break any workload rule either
    python3 "$here/tests/deploy/check_manifests.py" --topology "$1" "$out"
}

# The overlay's settings as the kubelet gives them to the container, read
# by this build's `ibus run --check` (no server is contacted).
check_settings() { # overlay ibus plugindir [--set NAME=VALUE]...
    local out
    out=$(mktemp)
    trap 'rm -f "$out"' RETURN
    render "$1" "$out"
    need python3 python3
    python3 "$here/tests/deploy/overlay_settings.py" "$out" "${@:2}"
}

cmd=${1:-all}
case $cmd in
render) check_overlay "${2:?overlay}" ;;
selftest) check_overlay "${2:?overlay}" --self-test ;;
yamllint) check_yamllint ;;
systemd) check_systemd "${2:-}" ;;
promtool-check) check_promtool check ;;
promtool-test) check_promtool test ;;
grafana)
    need python3 python3
    python3 "$here/tests/deploy/check_observability.py" dashboard "$here"
    ;;
operator) check_operator "${2:?overlay}" ;;
settings) check_settings "${2:?overlay}" "${3:?ibus}" "${4:?plugin dir}" "${@:5}" ;;
all)
    check_yamllint
    for o in "${overlays[@]}"; do
        check_overlay "$o"
        check_overlay "$o" --self-test >/dev/null
        check_operator "$o"
    done
    if command -v promtool >/dev/null 2>&1; then
        check_promtool check
        check_promtool test
    fi
    python3 "$here/tests/deploy/check_observability.py" dashboard "$here"
    "$here/scripts/check-dockerfile.sh" "$here/deploy/Dockerfile"
    check_systemd "${2:-}"
    ;;
*)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac

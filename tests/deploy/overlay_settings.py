#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that `ibus run` accepts the settings a rendered overlay gives its
first container (deploy/README.md, "Running the checks").

usage: overlay_settings.py FILE IBUS PLUGIN_DIR [--set NAME=VALUE]...

FILE is the output of `kubectl kustomize deploy/k8s/overlays/NAME`. The
container's environment is built as the kubelet builds it (the ConfigMap
through envFrom, then its own env, $(VAR) expanded; a pod-index field is
0; Secrets are left out), the image's paths are moved to this machine
(/plugins to PLUGIN_DIR, /data and /scratch to a temporary directory), and
`ibus run --check` must exit 0: it reads every option and the plugins and
contacts no server. A setting ibus refuses (a recorder beside
--partitions, a bad duration) fails here, with ibus's message and the
line "FAIL <overlay's workload>: ibus-run-check: ...". --set changes a
setting first (the self-test: a setting ibus must refuse).

Needs PyYAML (Debian: python3-yaml).
"""

import os
import re
import subprocess
import sys
import tempfile

import yaml

IMAGE_DIRS = ("/data", "/scratch")


def container_env(docs):
    """The first workload's first container's IB_* environment."""
    work = next(d for d in docs if d.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"))
    c = work["spec"]["template"]["spec"]["containers"][0]
    env = {}
    for src in c.get("envFrom") or []:
        name = (src.get("configMapRef") or {}).get("name")
        cm = next((d for d in docs if d.get("kind") == "ConfigMap"
                   and d["metadata"]["name"] == name), None)
        env.update({k: str(v) for k, v in ((cm or {}).get("data") or {}).items()})
    for e in c.get("env") or []:
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), ""),
                                    str(e["value"]))
        elif "pod-index" in str((e.get("valueFrom") or {}).get("fieldRef", {})):
            env[e["name"]] = "0"
    return {k: v for k, v in env.items() if k.startswith("IB_") or k == "SQLITE_TMPDIR"}


def workload_name(docs):
    w = next(d for d in docs if d.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"))
    return "%s/%s" % (w["kind"], w["metadata"]["name"])


def to_machine(env, plugin_dir, tmp):
    """The image's paths moved to this machine."""
    out = {}
    for k, v in env.items():
        v = v.replace("/plugins/", plugin_dir.rstrip("/") + "/")
        for d in IMAGE_DIRS:
            v = v.replace(d + "/", os.path.join(tmp, d.lstrip("/")) + "/")
        out[k] = v
    for d in IMAGE_DIRS:
        os.makedirs(os.path.join(tmp, d.lstrip("/")), exist_ok=True)
    out["SQLITE_TMPDIR"] = tmp
    return out


def main(argv):
    args, sets = [], {}
    it = iter(argv[1:])
    for a in it:
        if a == "--set":
            k, _, v = next(it, "").partition("=")
            sets[k] = v
        else:
            args.append(a)
    if len(args) != 3:
        sys.stderr.write(__doc__)
        return 2
    ibus, plugin_dir = os.path.abspath(args[1]), os.path.abspath(args[2])
    with open(args[0], encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]
    with tempfile.TemporaryDirectory() as tmp:
        env = to_machine(dict(container_env(docs), **sets), plugin_dir, tmp)
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        r = subprocess.run([ibus, "run", "--check"], env=env, cwd=tmp,
                           capture_output=True, text=True, timeout=60)
    shown = " ".join("%s=%s" % kv for kv in sorted(env.items()) if kv[0].startswith("IB_"))
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        print("FAIL %s: ibus-run-check: ibus run --check refused the settings (exit %d): %s"
              % (workload_name(docs), r.returncode, shown))
        return 1
    print("overlay_settings: ibus run --check accepts %d settings" % len(
        [k for k in env if k.startswith("IB_")]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

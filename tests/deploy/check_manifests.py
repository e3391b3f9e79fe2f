#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks rendered Kubernetes manifests of infinity-bus against the rules
every workload must keep (deploy/README.md, "What every workload keeps").

usage: check_manifests.py --topology NAME [--nats-dir DIR] [--self-test] FILE|-

FILE is the output of `kubectl kustomize deploy/k8s/overlays/NAME`. A
partitioned consumer's NATS permissions are checked against the block in
DIR (default: deploy/nats/ of this tree), filled in with the workload's
settings. Every
broken rule is printed as
    FAIL <Kind>/<name>[ container <c>]: <rule>: <detail>
and the exit status is 1. With --self-test the file must pass, and then a
list of deliberate breakages is applied one at a time: each must be caught
by the rule it breaks, proving the checker is not vacuous.

Needs PyYAML (Debian: python3-yaml). Standard library otherwise.
"""

import copy
import os
import re
import sys

try:
    import yaml
except ImportError:
    sys.stderr.write("check_manifests: PyYAML is missing (Debian: apt-get install python3-yaml)\n")
    sys.exit(2)

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
# ibus run's own defaults, used when neither the ConfigMap nor env sets one
DEFAULTS = {"IB_RECORDER": "sqlite:processed.db", "IB_DRAIN_TIMEOUT": "25s"}
SECRET_VALUE_VARS = ("IB_TOKEN", "IB_PASSWORD", "IB_USER")
SECRET_FILE_VARS = ("IB_CREDS", "IB_NKEY", "IB_TLS_CA", "IB_TLS_CERT", "IB_TLS_KEY")
SECRETISH_KEY = re.compile(r"(PASSWORD|TOKEN|SECRET|PRIVATE)", re.I)


def parse_duration_s(text):
    """ibus duration syntax: 250ms, 30s, 5m, 2h, 1d; a bare number is seconds."""
    m = re.fullmatch(r"\s*(\d+)(ms|s|m|h|d)?\s*", str(text))
    if not m:
        return None
    n = int(m.group(1))
    return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[m.group(2)]


def kv_options(recorder):
    """The query options of a kv:BUCKET?k=v&... recorder URI, as a dict."""
    query = recorder.split("?", 1)[1] if "?" in recorder else ""
    return dict(p.split("=", 1) for p in query.split("&") if "=" in p)


NATS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "nats")
PARTITIONED_BLOCK = "worker-partitioned.conf"
# ibus run's --partitions limit (core/partition.h, IB_PARTITIONS_MAX)
PARTITIONS_MAX = 4096
# How often a partitioned process renews its leases: every third of one.
RENEW_SHARE = 1.0 / 3
# IbusPartitionWithoutOwner fires after 5 minutes without an owner: a dead
# pod's partitions must be taken again well before, after one lease.
LEASE_MAX_S = 120


def subject_matches(pattern, subject):
    """NATS subject matching: '*' is one whole token, '>' one or more at the end."""
    pt, st = pattern.split("."), subject.split(".")
    for i, tok in enumerate(pt):
        if tok == ">":
            return len(st) > i
        if i >= len(st) or (tok != "*" and tok != st[i]):
            return False
    return len(pt) == len(st)


def render_block(text, fill, partitions):
    """A deploy/nats block filled in as its comment says: each line holding
    @P@ once per partition, then every placeholder replaced."""
    out = []
    for line in text.splitlines():
        if "@P@" in line:
            out += [line.replace("@P@", str(p)) for p in range(partitions)]
        else:
            out.append(line)
    text = "\n".join(out)
    for k, v in fill.items():
        text = text.replace(k, v)
    return text


def block_allows(text):
    """The publish and subscribe allow lists of a block (comments dropped)."""
    body = re.sub(r"#[^\n]*", "", text[text.index("\n{"):] if not text.startswith("{") else text)
    lists = {}
    for kind in ("publish", "subscribe"):
        m = re.search(kind + r"\s*:\s*{\s*allow\s*:\s*\[(.*?)\]", body, re.S)
        lists[kind] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return lists


def partitioned_needs(stream, durable, base, n, dead_letter):
    """What a partitioned worker publishes to (plugin/host/host_partitions.c
    and the parts it calls), one sample subject for each thing, and what it
    must not be able to do. Names: durables <durable>_p<P> on
    <base>.<P>.*, the bucket ibus_fleet_<durable>, the marker log
    IBUS_MARKERS_<durable> on ibus.markers.<durable>.<P>."""
    kv, log = "KV_ibus_fleet_" + durable, "IBUS_MARKERS_" + durable
    need = ["$JS.API.STREAM.INFO." + stream, "$JS.API.STREAM.INFO.DLQ_%s" % durable,
            dead_letter,
            "$JS.API.STREAM.INFO." + kv, "$JS.API.STREAM.MSG.GET." + kv,
            "$JS.API.DIRECT.GET.%s.$KV.ibus_fleet_%s.p.0.2" % (kv, durable),
            "$JS.API.CONSUMER.CREATE." + kv, "$JS.API.CONSUMER.DELETE.%s.eph1" % kv,
            "$JS.FC.%s.eph1.1" % kv, "$KV.ibus_fleet_%s.m.member1" % durable,
            "$JS.API.STREAM.INFO." + log, "$JS.API.STREAM.MSG.GET." + log,
            "$JS.API.CONSUMER.CREATE." + log, "$JS.API.CONSUMER.DELETE.%s.eph1" % log,
            "$JS.FC.%s.eph1.1" % log]
    for p in range(n):
        d = "%s_p%d" % (durable, p)
        need += ["$JS.API.CONSUMER.INFO.%s.%s" % (stream, d),
                 "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s" % (stream, d),
                 "$JS.API.CONSUMER.DELETE.%s.%s" % (stream, d),
                 "$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (stream, d),
                 "$JS.ACK.%s.%s.1.7.3.1700000000000000000.0" % (stream, d),
                 "$KV.ibus_fleet_%s.p.%d.1" % (durable, p),
                 "ibus.markers.%s.%d" % (durable, p),
                 "%s.%d.account-17" % (base, p)]
    other = durable + "_other"
    refuse = ["$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (stream, other),
              "$JS.ACK.%s.%s.1.7.3.1700000000000000000.0" % (stream, other),
              "$JS.API.CONSUMER.DELETE.%s.%s" % (stream, other),
              "$JS.API.CONSUMER.INFO.%s.%s_p%d" % (stream, durable, n),
              "$JS.API.STREAM.PURGE." + stream, "$JS.API.STREAM.DELETE." + stream,
              "$JS.API.STREAM.CREATE." + stream, "$JS.API.STREAM.DELETE." + log,
              "$JS.API.STREAM.PURGE." + kv, "$KV.other_bucket.p.0.1",
              "ibus.markers.%s.%d.x" % (other, 0), base + ".not-a-partition",
              "unrelated.subject"]
    return need, refuse


def redelivery_horizon_s(env):
    """The longest time from an event's first delivery to its last possible
    redelivery, from the settings ibus run creates the consumer with: each of
    the max_deliver - 1 gaps is at most one ack wait (the longest BackOff step
    when one is given) plus the longest nak delay. None if one does not parse."""
    def setting(name, default):
        v = env.get(name, default)
        return v if isinstance(v, str) else None
    try:
        max_deliver = int(setting("IB_MAX_DELIVER", "5"))
    except (TypeError, ValueError):
        return None
    waits = [parse_duration_s(setting("IB_ACK_WAIT", "30s"))]
    backoff = setting("IB_BACKOFF", "")
    if backoff:
        waits += [parse_duration_s(b) for b in backoff.split(",")]
    nak = parse_duration_s(setting("IB_RETRY_MAX_DELAY", "1m"))
    if None in waits or nak is None:
        return None
    return max(max_deliver - 1, 0) * (max(waits) + nak)


class Checker:
    def __init__(self, docs, topology, blocks=None):
        self.docs = [d for d in docs if isinstance(d, dict)]
        self.topology = topology
        self.blocks = blocks if blocks is not None else {}  # deploy/nats file -> text
        self.failures = []

    # ---- helpers ----

    def fail(self, obj, rule, detail, container=None):
        where = "%s/%s" % (obj.get("kind"), obj.get("metadata", {}).get("name"))
        if container is not None:
            where += " container %s" % container.get("name")
        self.failures.append((rule, "FAIL %s: %s: %s" % (where, rule, detail)))

    def objects(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def find(self, kind, name):
        for d in self.objects(kind):
            if d.get("metadata", {}).get("name") == name:
                return d
        return None

    def effective_env(self, pod, c):
        """Name -> value (str) or ('valueFrom', spec), as the kubelet builds it:
        envFrom first, then env entries win."""
        env = {}
        for src in c.get("envFrom") or []:
            ref = src.get("configMapRef")
            if ref:
                cm = self.find("ConfigMap", ref.get("name"))
                if cm:
                    for k, v in (cm.get("data") or {}).items():
                        env[(src.get("prefix") or "") + k] = str(v)
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = str(e["value"])
            elif "valueFrom" in e:
                env[e["name"]] = ("valueFrom", e["valueFrom"])
        return env

    @staticmethod
    def sctx(pod, c, key):
        """Container securityContext value, falling back to the pod's."""
        v = (c.get("securityContext") or {}).get(key)
        if v is None:
            v = (pod.get("securityContext") or {}).get(key)
        return v

    @staticmethod
    def volume_kind(pod, name, workload):
        for v in pod.get("volumes") or []:
            if v.get("name") == name:
                for k in ("emptyDir", "persistentVolumeClaim", "secret", "projected", "configMap",
                          "hostPath", "ephemeral", "downwardAPI", "csi", "nfs"):
                    if k in v:
                        return k, v
                return "other", v
        for t in (workload.get("spec") or {}).get("volumeClaimTemplates") or []:
            if t.get("metadata", {}).get("name") == name:
                return "volumeClaimTemplate", t
        return None, None

    def secret_sourced(self, pod, name, workload):
        kind, v = self.volume_kind(pod, name, workload)
        if kind == "secret":
            return True
        if kind == "projected":
            srcs = v["projected"].get("sources") or []
            return bool(srcs) and all("secret" in s for s in srcs)
        return False

    @staticmethod
    def mount_for(c, path):
        """The volumeMount that holds `path` (longest matching mountPath)."""
        best = None
        for m in c.get("volumeMounts") or []:
            mp = m.get("mountPath", "").rstrip("/") or "/"
            if path == mp or path.startswith(mp + "/"):
                if best is None or len(mp) > len(best.get("mountPath", "")):
                    best = m
        return best

    @staticmethod
    def port_number(c, port):
        if isinstance(port, int):
            return port
        for p in c.get("ports") or []:
            if p.get("name") == port:
                return p.get("containerPort")
        return None

    @staticmethod
    def pod_of(w):
        return ((w.get("spec") or {}).get("template") or {}).get("spec") or {}

    def recorder_of(self, pod, c):
        """The recorder URI; "" for a partitioned consumer, whose markers
        live in its marker log (check_partitions refuses IB_RECORDER)."""
        if self.partitions_of(pod, c):
            return ""
        r = self.effective_env(pod, c).get("IB_RECORDER", DEFAULTS["IB_RECORDER"])
        return r if isinstance(r, str) else ""

    def partitions_of(self, pod, c):
        """IB_PARTITIONS as an int (0: not partitioned, -1: unreadable)."""
        v = self.effective_env(pod, c).get("IB_PARTITIONS", "0")
        if not isinstance(v, str):
            return -1
        try:
            return int(v)
        except ValueError:
            return -1

    @staticmethod
    def sqlite_path(recorder):
        if not recorder.lower().startswith("sqlite:"):
            return None
        path = recorder[len("sqlite:"):].split("?", 1)[0]
        return None if path == ":memory:" else path

    # ---- rules ----

    def check_workload(self, w):
        pod = self.pod_of(w)
        spec = w.get("spec") or {}
        containers = pod.get("containers") or []
        if not containers:
            self.fail(w, "containers", "no containers")
            return

        if pod.get("enableServiceLinks") is not False:
            self.fail(w, "no-service-links", "enableServiceLinks must be false")

        sa_name = pod.get("serviceAccountName") or "default"
        sa = self.find("ServiceAccount", sa_name)
        pod_auto = pod.get("automountServiceAccountToken")
        sa_auto = sa.get("automountServiceAccountToken") if sa else None
        if pod_auto is not False and not (pod_auto is None and sa_auto is False):
            self.fail(w, "no-sa-token",
                      "automountServiceAccountToken must be false (pod or ServiceAccount %s)"
                      % sa_name)

        grace = pod.get("terminationGracePeriodSeconds", 30)
        for c in containers:
            env = self.effective_env(pod, c)
            drain = parse_duration_s(env.get("IB_DRAIN_TIMEOUT", DEFAULTS["IB_DRAIN_TIMEOUT"]))
            if drain is None:
                self.fail(w, "grace-above-drain", "IB_DRAIN_TIMEOUT is not a duration", c)
            elif not grace > drain:
                self.fail(w, "grace-above-drain",
                          "terminationGracePeriodSeconds %s must exceed IB_DRAIN_TIMEOUT %ss"
                          % (grace, drain), c)

        for c in containers + (pod.get("initContainers") or []):
            self.check_container_security(w, pod, c)
        for c in containers:
            self.check_container_runtime(w, pod, c)
            self.check_retention(w, pod, c)
            if self.partitions_of(pod, c):
                self.check_partitions(w, pod, c, grace)
        self.check_sqlite_placement(w, pod, spec, containers)

    def check_container_security(self, w, pod, c):
        if self.sctx(pod, c, "runAsNonRoot") is not True:
            self.fail(w, "run-as-non-root", "runAsNonRoot must be true", c)
        if self.sctx(pod, c, "runAsUser") == 0:
            self.fail(w, "run-as-non-root", "runAsUser must not be 0", c)
        sc = c.get("securityContext") or {}
        if sc.get("readOnlyRootFilesystem") is not True:
            self.fail(w, "read-only-root", "readOnlyRootFilesystem must be true", c)
        if sc.get("allowPrivilegeEscalation") is not False:
            self.fail(w, "no-privilege-escalation", "allowPrivilegeEscalation must be false", c)
        if sc.get("privileged"):
            self.fail(w, "no-privilege-escalation", "privileged must not be set", c)
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            self.fail(w, "drop-all-capabilities", "capabilities.drop must contain ALL", c)
        if caps.get("add"):
            self.fail(w, "drop-all-capabilities", "capabilities.add must be empty", c)
        prof = self.sctx(pod, c, "seccompProfile") or {}
        if prof.get("type") != "RuntimeDefault":
            self.fail(w, "seccomp-runtime-default", "seccompProfile.type must be RuntimeDefault", c)
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            for r in ("cpu", "memory"):
                if not (res.get(part) or {}).get(r):
                    self.fail(w, "resources", "resources.%s.%s is missing" % (part, r), c)
        image = c.get("image", "")
        name_part = image.split("@", 1)[0]
        tag = name_part.rsplit(":", 1)[1] if ":" in name_part.rsplit("/", 1)[-1] else None
        if "@sha256:" not in image and (tag is None or tag == "latest"):
            self.fail(w, "pinned-image", "image %r needs an exact tag or digest" % image, c)

    def check_container_runtime(self, w, pod, c):
        env = self.effective_env(pod, c)

        # settings come from the ConfigMap
        refs = [s["configMapRef"].get("name") for s in c.get("envFrom") or []
                if "configMapRef" in s]
        if not refs:
            self.fail(w, "settings-from-configmap", "no envFrom configMapRef", c)
        for r in refs:
            if self.find("ConfigMap", r) is None:
                self.fail(w, "settings-from-configmap", "ConfigMap %r is not in the output" % r, c)

        # probes: /healthz and /readyz on the port IB_HTTP serves
        http = env.get("IB_HTTP")
        http_port = None
        if isinstance(http, str) and ":" in http:
            try:
                http_port = int(http.rsplit(":", 1)[1])
            except ValueError:
                pass
        if http_port is None:
            self.fail(w, "probe-port", "IB_HTTP must be HOST:PORT, got %r" % (http,), c)
        for probe, path, rule in (("livenessProbe", "/healthz", "liveness-healthz"),
                                  ("readinessProbe", "/readyz", "readiness-readyz")):
            get = (c.get(probe) or {}).get("httpGet")
            if not get or get.get("path") != path:
                self.fail(w, rule, "%s must be httpGet %s" % (probe, path), c)
                continue
            port = self.port_number(c, get.get("port"))
            if http_port is not None and port != http_port:
                self.fail(w, "probe-port", "%s port %s is not the IB_HTTP port %s"
                          % (probe, get.get("port"), http_port), c)

        # credentials only from Secrets
        for k in SECRET_VALUE_VARS:
            v = env.get(k)
            if isinstance(v, str):
                self.fail(w, "secrets-for-credentials",
                          "%s is a literal (env or ConfigMap); use a secretKeyRef" % k, c)
            elif isinstance(v, tuple) and "secretKeyRef" not in v[1]:
                self.fail(w, "secrets-for-credentials", "%s must come from a secretKeyRef" % k, c)
        for k in SECRET_FILE_VARS:
            v = env.get(k)
            if isinstance(v, str) and v:
                m = self.mount_for(c, v)
                if m is None or not self.secret_sourced(pod, m.get("name"), w):
                    self.fail(w, "secrets-for-credentials",
                              "%s=%s is not on a Secret-backed volume" % (k, v), c)
        if not any(self.secret_sourced(pod, m.get("name"), w) for m in c.get("volumeMounts") or []):
            self.fail(w, "secrets-for-credentials",
                      "no Secret-backed volume for NATS credentials/TLS is mounted", c)

        # the database and its -wal/-shm files need a writable volume
        path = self.sqlite_path(self.recorder_of(pod, c))
        if path is not None:
            if not path.startswith("/"):
                self.fail(w, "db-writable-volume",
                          "sqlite path %r is relative: it would land on the read-only root" % path,
                          c)
            else:
                d = os.path.dirname(path)
                m = self.mount_for(c, d)
                kind, _ = self.volume_kind(pod, m.get("name"), w) if m else (None, None)
                if m is None or m.get("readOnly") or kind not in (
                        "emptyDir", "persistentVolumeClaim", "volumeClaimTemplate", "ephemeral"):
                    self.fail(w, "db-writable-volume",
                              "directory %s of %s (and its -wal/-shm) is not on a writable "
                              "emptyDir/PVC mount" % (d, path), c)

    def check_sqlite_placement(self, w, pod, spec, containers):
        """One SQLite file must never be reachable from two nodes."""
        uses_sqlite = [c for c in containers if self.sqlite_path(self.recorder_of(pod, c))]
        if not uses_sqlite:
            return
        kind = w.get("kind")
        replicas = spec.get("replicas", 1)
        for c in uses_sqlite:
            path = self.sqlite_path(self.recorder_of(pod, c))
            m = self.mount_for(c, os.path.dirname(path)) if path.startswith("/") else None
            if m is None:
                continue
            vkind, v = self.volume_kind(pod, m.get("name"), w)
            if vkind == "persistentVolumeClaim":
                claim = self.find("PersistentVolumeClaim", v["persistentVolumeClaim"].get("claimName"))
                modes = (claim or {}).get("spec", {}).get("accessModes") or []
                if claim is None or any(x in ("ReadWriteMany", "ReadOnlyMany") for x in modes):
                    self.fail(w, "sqlite-single-node",
                              "claim for %s must be in the output and ReadWriteOnce" % path, c)
                if kind != "Deployment" or replicas != 1:
                    self.fail(w, "sqlite-single-node",
                              "a shared claim holding %s needs a single-replica Deployment" % path, c)
            if vkind == "volumeClaimTemplate":
                modes = (v.get("spec") or {}).get("accessModes") or []
                if any(x in ("ReadWriteMany", "ReadOnlyMany") for x in modes):
                    self.fail(w, "sqlite-single-node", "volumeClaimTemplate must be ReadWriteOnce", c)
        if kind == "Deployment":
            if replicas != 1:
                self.fail(w, "sqlite-single-node",
                          "a Deployment on a sqlite: recorder must have replicas 1 (has %s)"
                          % replicas)
            if (spec.get("strategy") or {}).get("type") != "Recreate":
                self.fail(w, "sqlite-single-node",
                          "a Deployment on a sqlite: recorder must use strategy Recreate")
        elif kind == "DaemonSet":
            self.fail(w, "sqlite-single-node", "a DaemonSet cannot own one SQLite file per shard")

    def check_services(self, workloads):
        for svc in self.objects("Service"):
            sel = (svc.get("spec") or {}).get("selector") or {}
            pods = [w for w in workloads
                    if sel and all(((w["spec"]["template"].get("metadata") or {}).get("labels") or {})
                                   .get(k) == v for k, v in sel.items())]
            if not pods:
                self.fail(svc, "service-targets", "selects no workload")
                continue
            for p in svc["spec"].get("ports") or []:
                tp = p.get("targetPort", p.get("port"))
                for w in pods:
                    cs = self.pod_of(w).get("containers") or []
                    if not any(self.port_number(c, tp) for c in cs):
                        self.fail(svc, "service-targets",
                                  "targetPort %r is not a port of %s/%s"
                                  % (tp, w["kind"], w["metadata"]["name"]))

    def check_configmaps(self):
        for cm in self.objects("ConfigMap"):
            for k in (cm.get("data") or {}):
                if SECRETISH_KEY.search(k):
                    self.fail(cm, "secrets-for-credentials", "key %s belongs in a Secret" % k)

    def check_topology(self, workloads):
        t = self.topology
        kinds = sorted(w["kind"] for w in workloads)
        if t in ("single-pod", "single-pod-pvc"):
            if kinds != ["Deployment"]:
                self.fail({"kind": "Overlay", "metadata": {"name": t}}, "topology",
                          "expected one Deployment, got %s" % kinds)
                return
            w = workloads[0]
            pod = self.pod_of(w)
            cs = pod.get("containers") or []
            if len(cs) < 2:
                self.fail(w, "topology", "single-pod runs several subscriber containers")
            envs = [self.effective_env(pod, c) for c in cs]
            for key in ("IB_RECORDER", "IB_DURABLE"):
                if len({str(e.get(key)) for e in envs}) != 1:
                    self.fail(w, "topology", "all containers must share %s" % key)
            if len({str(e.get("IB_HTTP")) for e in envs}) != len(cs):
                self.fail(w, "topology", "each container needs its own IB_HTTP port")
            mounts = {(self.mount_for(c, os.path.dirname(self.sqlite_path(self.recorder_of(pod, c))
                                                         or "/x/y")) or {}).get("name") for c in cs}
            if len(mounts) != 1 or None in mounts:
                self.fail(w, "topology", "all containers must mount the one database volume")
            if t == "single-pod-pvc":
                m = next(iter(mounts)) if mounts else None
                if self.volume_kind(pod, m, w)[0] != "persistentVolumeClaim":
                    self.fail(w, "topology", "single-pod-pvc keeps the database on a claim")
        elif t == "sharded":
            if kinds != ["StatefulSet"]:
                self.fail({"kind": "Overlay", "metadata": {"name": t}}, "topology",
                          "expected one StatefulSet, got %s" % kinds)
                return
            w = workloads[0]
            pod = self.pod_of(w)
            for c in pod.get("containers") or []:
                env = self.effective_env(pod, c)
                shard = env.get("IB_SHARD")
                ok = (isinstance(shard, tuple) and "pod-index" in str(
                    shard[1].get("fieldRef", {}).get("fieldPath", "")))
                if not ok:
                    self.fail(w, "topology", "IB_SHARD must come from the pod-index label", c)
                for key in ("IB_DURABLE", "IB_SUBJECT"):
                    if "$(IB_SHARD)" not in str(env.get(key)):
                        self.fail(w, "topology", "%s must be derived from $(IB_SHARD)" % key, c)
                path = self.sqlite_path(self.recorder_of(pod, c))
                m = self.mount_for(c, os.path.dirname(path)) if path else None
                if not m or self.volume_kind(pod, m.get("name"), w)[0] != "volumeClaimTemplate":
                    self.fail(w, "topology", "each shard's database needs its own claim", c)
        elif t == "fleet":
            if len(workloads) != 1 or kinds[0] not in ("Deployment", "StatefulSet"):
                self.fail({"kind": "Overlay", "metadata": {"name": t}}, "topology",
                          "expected one Deployment or StatefulSet, got %s" % kinds)
                return
            w = workloads[0]
            pod = self.pod_of(w)
            replicas = w["spec"].get("replicas") or 1
            if replicas < 2:
                self.fail(w, "topology", "a fleet runs several replicas")
            seen = set()
            for c in pod.get("containers") or []:
                n = self.partitions_of(pod, c)
                if n == 0:
                    self.fail(w, "topology", "a fleet is a partitioned consumer: set "
                              "IB_PARTITIONS (the fleet-kv overlay is the kv: one)", c)
                    continue
                env = self.effective_env(pod, c)
                seen.add(tuple(str(env.get(k)) for k in ("IB_PARTITIONS", "IB_SUBJECT",
                                                          "IB_DURABLE", "IB_STREAM")))
                if n > 0 and replicas > n:
                    self.fail(w, "partitions", "%d replicas for %d partitions: the replicas "
                              "beyond IB_PARTITIONS own nothing" % (replicas, n), c)
                if 1 <= n <= PARTITIONS_MAX:
                    self.check_partition_permissions(w, pod, c)
            if len(seen) > 1:
                self.fail(w, "partitions", "every process of the consumer needs the same "
                          "IB_PARTITIONS, IB_SUBJECT, IB_DURABLE and IB_STREAM")
            self.check_no_shared_volume(w, pod, "partitions")
        elif t == "fleet-kv":
            if kinds != ["Deployment"]:
                self.fail({"kind": "Overlay", "metadata": {"name": t}}, "topology",
                          "expected one Deployment, got %s" % kinds)
                return
            w = workloads[0]
            if (w["spec"].get("replicas") or 1) < 2:
                self.fail(w, "topology", "a fleet runs several replicas")
            pod = self.pod_of(w)
            for c in pod.get("containers") or []:
                if not self.recorder_of(pod, c).startswith("kv:"):
                    self.fail(w, "topology", "fleet-kv shares markers through the kv: recorder",
                              c)
                else:
                    self.check_kv_bucket(w, pod, c)
            self.check_no_shared_volume(w, pod, "kv-bucket")

    def check_retention(self, w, pod, c):
        """Nothing fills the volume by surprise: the stream keeps messages a
        bounded time (IB_STREAM_MAX_AGE, what --create gives it), and the
        markers go when their messages can no longer come back: a SQLite or
        memory recorder prunes (IB_RETENTION auto, or a duration no shorter
        than the MaxAge); a kv: bucket's TTL is no shorter than the MaxAge."""
        env = self.effective_env(pod, c)
        age = parse_duration_s(env.get("IB_STREAM_MAX_AGE", ""))
        if not age:
            self.fail(w, "retention", "IB_STREAM_MAX_AGE=%r must be a duration above 0, so the "
                      "stream and the markers that follow it are bounded"
                      % env.get("IB_STREAM_MAX_AGE"), c)
            return
        if self.partitions_of(pod, c):
            return  # the marker log is made with the stream's MaxAge
        recorder = self.recorder_of(pod, c)
        if recorder.startswith("kv:"):
            ttl = parse_duration_s(kv_options(recorder).get("ttl", ""))
            if ttl is None or ttl == 0 or ttl < age:
                self.fail(w, "retention", "the bucket's ttl=%s must be at least "
                          "IB_STREAM_MAX_AGE=%s: a marker must outlive every message the "
                          "stream still holds" % (kv_options(recorder).get("ttl"),
                                                  env.get("IB_STREAM_MAX_AGE")), c)
            return
        retention = env.get("IB_RETENTION")
        kept = parse_duration_s(retention) if retention not in (None, "auto") else None
        if retention != "auto" and (not kept or kept < age):
            self.fail(w, "retention", "IB_RETENTION=%r must be auto or a duration of at least "
                      "IB_STREAM_MAX_AGE=%s, so old markers are pruned and none too early"
                      % (retention, env.get("IB_STREAM_MAX_AGE")), c)

    def check_kv_bucket(self, w, pod, c):
        """A fleet's bucket is replicated and keeps markers past the
        redelivery horizon that the ConfigMap's settings imply."""
        env = self.effective_env(pod, c)
        opts = kv_options(self.recorder_of(pod, c))
        try:
            replicas = int(opts.get("replicas", "1"))
        except ValueError:
            replicas = 0
        if replicas < 3:
            self.fail(w, "kv-bucket", "replicas=%s: a fleet's markers need a replicated bucket "
                      "(3 or more), or one node's loss loses them" % opts.get("replicas", "1"), c)
        horizon = redelivery_horizon_s(env)
        min_ttl = parse_duration_s(opts["min_ttl"]) if "min_ttl" in opts else None
        if horizon is None:
            self.fail(w, "kv-bucket", "IB_ACK_WAIT/IB_MAX_DELIVER/IB_RETRY_MAX_DELAY/IB_BACKOFF "
                      "do not parse: cannot tell the redelivery horizon", c)
        elif min_ttl is None or min_ttl < horizon:
            self.fail(w, "kv-bucket", "min_ttl=%s must be given and cover the redelivery horizon "
                      "of %ss, so ibus refuses a bucket that forgets markers too early"
                      % (opts.get("min_ttl"), horizon), c)
        ttl = parse_duration_s(opts["ttl"]) if "ttl" in opts else None
        if ttl is None or (ttl != 0 and min_ttl is not None and ttl < min_ttl):
            self.fail(w, "kv-bucket", "ttl=%s must be given and at least min_ttl=%s"
                      % (opts.get("ttl"), opts.get("min_ttl")), c)

    def check_no_shared_volume(self, w, pod, rule):
        """Fleet replicas keep nothing on disk that another replica needs:
        no claims, no host or network file systems."""
        for v in pod.get("volumes") or []:
            kind, _ = self.volume_kind(pod, v.get("name"), w)
            if kind in ("persistentVolumeClaim", "hostPath", "nfs", "csi", "ephemeral", "other"):
                self.fail(w, rule, "volume %s is a %s: fleet replicas share no files"
                          % (v.get("name"), kind))
        if (w.get("spec") or {}).get("volumeClaimTemplates"):
            self.fail(w, rule, "a fleet has no volumeClaimTemplates")

    def check_partitions(self, w, pod, c, grace):
        """A partitioned consumer (ibus run --partitions N): the same N,
        base subject and durable in every process (none taken from the pod),
        no recorder, a stream of partition subjects only, and a lease that
        outlasts the drain and is short enough to fail over."""
        env = self.effective_env(pod, c)
        for key in ("IB_PARTITIONS", "IB_SUBJECT", "IB_DURABLE", "IB_PARTITION_LEASE"):
            if isinstance(env.get(key), tuple):
                self.fail(w, "partitions", "%s comes from the pod (valueFrom): every process "
                          "of the consumer needs the same value" % key, c)
        n = self.partitions_of(pod, c)
        if not 1 <= n <= PARTITIONS_MAX:
            self.fail(w, "partitions", "IB_PARTITIONS=%r must be 1 to %d"
                      % (env.get("IB_PARTITIONS"), PARTITIONS_MAX), c)
        if "IB_RECORDER" in env:
            self.fail(w, "partitions", "IB_RECORDER is set (%r): a partitioned consumer keeps "
                      "its markers in its marker log and ibus run refuses a recorder"
                      % (env["IB_RECORDER"],), c)
        base = env.get("IB_SUBJECT")
        if not isinstance(base, str) or not base or re.search(r"[*> ]", base):
            self.fail(w, "partitions", "IB_SUBJECT=%r must be the base of the partition "
                      "subjects, without wildcards" % (base,), c)
        elif str(env.get("IB_CREATE", "false")).lower() in ("true", "1", "yes"):
            for subj in str(env.get("IB_STREAM_SUBJECTS", "")).split(","):
                if not subj.strip().startswith(base + "."):
                    self.fail(w, "partitions", "IB_STREAM_SUBJECTS %r: the stream of a "
                              "partitioned consumer takes only %s.<partition>.<key>; anything "
                              "else is dead-lettered" % (subj.strip(), base), c)
        lease = parse_duration_s(env.get("IB_PARTITION_LEASE", "15s"))
        drain = parse_duration_s(env.get("IB_DRAIN_TIMEOUT", DEFAULTS["IB_DRAIN_TIMEOUT"]))
        if lease is None or not 3 <= lease <= LEASE_MAX_S:
            self.fail(w, "partitions", "IB_PARTITION_LEASE=%r must be 3s to %ds: a dead pod's "
                      "partitions wait one lease for a new owner"
                      % (env.get("IB_PARTITION_LEASE"), LEASE_MAX_S), c)
        elif drain is not None and drain > lease * (1 - RENEW_SHARE) - 1:
            self.fail(w, "partitions", "IB_DRAIN_TIMEOUT %ss must end before the leases renewed "
                      "last run out (%ss: two thirds of IB_PARTITION_LEASE %ss, less a second), "
                      "or another pod may run the last calls again"
                      % (drain, lease * (1 - RENEW_SHARE) - 1, lease), c)

    def check_partition_permissions(self, w, pod, c):
        """deploy/nats/worker-partitioned.conf, filled in with this
        workload's settings, allows every subject the partitioned worker
        uses, each of its lines is needed, and it allows nothing of another
        durable, stream or bucket."""
        text = self.blocks.get(PARTITIONED_BLOCK)
        if text is None:
            self.fail(w, "nats-permissions", "deploy/nats/%s is missing" % PARTITIONED_BLOCK, c)
            return
        env = self.effective_env(pod, c)
        stream, durable = str(env.get("IB_STREAM")), str(env.get("IB_DURABLE"))
        base, n = str(env.get("IB_SUBJECT")), max(self.partitions_of(pod, c), 1)
        dead = env.get("IB_DEAD_LETTER") or "ibus.dlq." + durable
        fill = {"@STREAM@": stream, "@DURABLE@": durable, "@BASE@": base,
                "@DEAD_LETTER@": str(dead)}
        try:
            allows = block_allows(render_block(text, fill, n))
        except ValueError:
            self.fail(w, "nats-permissions", "%s has no block" % PARTITIONED_BLOCK, c)
            return
        need, refuse = partitioned_needs(stream, durable, base, n, str(dead))
        pub = allows["publish"]
        # literal lines by set, wildcard ones by matching: N may be 4,096
        literal = {a for a in pub if "*" not in a.split(".") and ">" not in a.split(".")}
        wild = [a for a in pub if a not in literal]

        def allowed(subj):
            return subj in literal or any(subject_matches(a, subj) for a in wild)

        for subj in need:
            if not allowed(subj):
                self.fail(w, "nats-permissions", "%s does not allow publishing to %s"
                          % (PARTITIONED_BLOCK, subj), c)
        needed = set(need)
        for a in pub:
            used = a in needed if a in literal else any(subject_matches(a, x) for x in need)
            if "@" in a or not used:
                self.fail(w, "nats-permissions", "%s allows %s, which the partitioned worker "
                          "never uses" % (PARTITIONED_BLOCK, a), c)
        for subj in refuse:
            if allowed(subj):
                self.fail(w, "nats-permissions", "%s allows publishing to %s"
                          % (PARTITIONED_BLOCK, subj), c)
        if allows["subscribe"] != ["_INBOX.>"]:
            self.fail(w, "nats-permissions", "%s subscribes to %s; only the replies "
                      "(_INBOX.>) are needed" % (PARTITIONED_BLOCK, allows["subscribe"]), c)

    def run(self):
        workloads = [d for d in self.docs if d.get("kind") in WORKLOAD_KINDS]
        if not workloads:
            self.failures.append(("workloads", "FAIL: no workload in the rendered output"))
            return self.failures
        for w in workloads:
            self.check_workload(w)
        self.check_services(workloads)
        self.check_configmaps()
        self.check_topology(workloads)
        return self.failures


# ---- self-test: each breakage must be caught by its rule ----

def _workload(docs):
    return next(d for d in docs if d.get("kind") in WORKLOAD_KINDS)


def _pod(docs):
    return _workload(docs)["spec"]["template"]["spec"]


def _c0(docs):
    return _pod(docs)["containers"][0]


def _cm(docs):
    return next(d for d in docs if d.get("kind") == "ConfigMap")


def _set_env(c, name, value):
    c["env"] = [e for e in c.get("env") or [] if e["name"] != name] + [{"name": name, "value": value}]


def _drop_mount(c, name):
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != name]


def _db_mount_name(docs):
    c = _c0(docs)
    return next((m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/data"), None)


MUTATIONS = [
    ("liveness-healthz", "no liveness probe", lambda d: _c0(d).pop("livenessProbe")),
    ("readiness-readyz", "readiness on /healthz",
     lambda d: _c0(d)["readinessProbe"]["httpGet"].update(path="/healthz")),
    ("probe-port", "probe on another port",
     lambda d: _c0(d)["livenessProbe"]["httpGet"].update(port=9999)),
    ("grace-above-drain", "grace below the drain deadline",
     lambda d: _pod(d).update(terminationGracePeriodSeconds=10)),
    ("grace-above-drain", "drain deadline raised above the grace period",
     lambda d: _cm(d)["data"].update(IB_DRAIN_TIMEOUT="2m")),
    ("run-as-non-root", "runAsNonRoot removed",
     lambda d: (_pod(d)["securityContext"].pop("runAsNonRoot"),
                _c0(d)["securityContext"].pop("runAsNonRoot"))),
    ("run-as-non-root", "runAsUser 0", lambda d: _c0(d)["securityContext"].update(runAsUser=0)),
    ("read-only-root", "writable root filesystem",
     lambda d: _c0(d)["securityContext"].update(readOnlyRootFilesystem=False)),
    ("no-privilege-escalation", "privilege escalation allowed",
     lambda d: _c0(d)["securityContext"].update(allowPrivilegeEscalation=True)),
    ("drop-all-capabilities", "capabilities kept",
     lambda d: _c0(d)["securityContext"]["capabilities"].update(drop=[])),
    ("drop-all-capabilities", "capability added",
     lambda d: _c0(d)["securityContext"]["capabilities"].update(add=["NET_ADMIN"])),
    ("seccomp-runtime-default", "seccomp unconfined",
     lambda d: (_pod(d)["securityContext"].update(seccompProfile={"type": "Unconfined"}),
                _c0(d)["securityContext"].update(seccompProfile={"type": "Unconfined"}))),
    ("resources", "no limits", lambda d: _c0(d)["resources"].pop("limits")),
    ("resources", "no memory request", lambda d: _c0(d)["resources"]["requests"].pop("memory")),
    ("no-service-links", "service links on", lambda d: _pod(d).update(enableServiceLinks=True)),
    ("no-sa-token", "token mounted", lambda d: _pod(d).update(automountServiceAccountToken=True)),
    ("secrets-for-credentials", "password as a literal",
     lambda d: _set_env(_c0(d), "IB_PASSWORD", "hunter2")),
    ("secrets-for-credentials", "token in the ConfigMap",
     lambda d: _cm(d)["data"].update(IB_TOKEN="s3cr3t")),
    ("secrets-for-credentials", "creds file outside a Secret volume",
     lambda d: _set_env(_c0(d), "IB_CREDS", "/tmp/user.creds")),
    ("secrets-for-credentials", "no Secret volume mounted",
     lambda d: _drop_mount(_c0(d), "nats-secrets")),
    ("settings-from-configmap", "no envFrom", lambda d: _c0(d).pop("envFrom")),
    ("settings-from-configmap", "ConfigMap name without its hash",
     lambda d: _c0(d)["envFrom"][0]["configMapRef"].update(name="ibus-config")),
    ("pinned-image", "latest tag", lambda d: _c0(d).update(image="infinity-bus/ibus:latest")),
    ("pinned-image", "no tag", lambda d: _c0(d).update(image="infinity-bus/ibus")),
    ("retention", "a stream kept for ever",
     lambda d: _cm(d)["data"].update(IB_STREAM_MAX_AGE="0")),
    ("service-targets", "Service port names nothing",
     lambda d: next(x for x in d if x.get("kind") == "Service")["spec"]["ports"][0]
     .update(targetPort="nope")),
]

SQLITE_MUTATIONS = [
    ("retention", "markers never pruned", lambda d: _cm(d)["data"].update(IB_RETENTION="0")),
    ("retention", "markers pruned before MaxAge",
     lambda d: _cm(d)["data"].update(IB_RETENTION="1d")),
    ("db-writable-volume", "database volume not mounted",
     lambda d: _drop_mount(_c0(d), _db_mount_name(d))),
    ("db-writable-volume", "relative database path",
     lambda d: _set_env(_c0(d), "IB_RECORDER", "sqlite:processed.db")),
    ("db-writable-volume", "database mount read-only",
     lambda d: next(m for m in _c0(d)["volumeMounts"] if m["mountPath"] == "/data")
     .update(readOnly=True)),
]

TOPOLOGY_MUTATIONS = {
    "single-pod": [
        ("sqlite-single-node", "two replicas share nothing but think they do",
         lambda d: _workload(d)["spec"].update(replicas=2)),
        ("sqlite-single-node", "rolling update",
         lambda d: _workload(d)["spec"].update(strategy={"type": "RollingUpdate"})),
        ("topology", "one container only",
         lambda d: _pod(d).update(containers=_pod(d)["containers"][:1])),
        ("topology", "containers on different durables",
         lambda d: _set_env(_pod(d)["containers"][1], "IB_DURABLE", "other")),
    ],
    "single-pod-pvc": [
        ("sqlite-single-node", "claim shared across nodes",
         lambda d: next(x for x in d if x.get("kind") == "PersistentVolumeClaim")["spec"]
         .update(accessModes=["ReadWriteMany"])),
        ("sqlite-single-node", "two replicas on one claim",
         lambda d: _workload(d)["spec"].update(replicas=2)),
    ],
    "sharded": [
        ("topology", "fixed durable", lambda d: _set_env(_c0(d), "IB_DURABLE", "ibus")),
        ("topology", "shard from nowhere", lambda d: _set_env(_c0(d), "IB_SHARD", "0")),
        ("topology", "database on a shared pod volume",
         lambda d: (_pod(d)["volumes"].append({"name": "data", "emptyDir": {}}),
                    _workload(d)["spec"].pop("volumeClaimTemplates"))),
        ("sqlite-single-node", "claims shared across nodes",
         lambda d: _workload(d)["spec"]["volumeClaimTemplates"][0]["spec"]
         .update(accessModes=["ReadWriteMany"])),
    ],
    "fleet": [
        ("topology", "a fleet of one", lambda d: _workload(d)["spec"].update(replicas=1)),
        ("topology", "a fleet that is not partitioned",
         lambda d: _cm(d)["data"].pop("IB_PARTITIONS")),
        ("partitions", "a recorder beside the partitions",
         lambda d: _cm(d)["data"].update(IB_RECORDER="sqlite:/scratch/x.db")),
        ("partitions", "more replicas than partitions",
         lambda d: _workload(d)["spec"].update(replicas=17)),
        ("partitions", "N beyond the limit", lambda d: _cm(d)["data"].update(IB_PARTITIONS="5000")),
        ("partitions", "N taken from the pod",
         lambda d: _c0(d).setdefault("env", []).append(
             {"name": "IB_PARTITIONS",
              "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['pod-index']"}}})),
        ("partitions", "a durable per pod",
         lambda d: _c0(d).setdefault("env", []).append(
             {"name": "IB_DURABLE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})),
        ("partitions", "two containers on different N",
         lambda d: _pod(d)["containers"].append(
             dict(copy.deepcopy(_c0(d)), name="second",
                  env=(_c0(d).get("env") or []) + [{"name": "IB_PARTITIONS", "value": "8"}]))),
        ("partitions", "a base subject with a wildcard",
         lambda d: _cm(d)["data"].update(IB_SUBJECT="events.p.>")),
        ("partitions", "a stream that takes more than the partition subjects",
         lambda d: _cm(d)["data"].update(IB_STREAM_SUBJECTS="events.>")),
        ("partitions", "a drain that outlives the lease",
         lambda d: _cm(d)["data"].update(IB_PARTITION_LEASE="15s")),
        ("partitions", "a lease of 10 minutes",
         lambda d: _cm(d)["data"].update(IB_PARTITION_LEASE="10m")),
        ("partitions", "a lease of a second",
         lambda d: _cm(d)["data"].update(IB_PARTITION_LEASE="1s")),
        ("partitions", "a claim shared by the replicas",
         lambda d: _pod(d)["volumes"].append(
             {"name": "markers", "persistentVolumeClaim": {"claimName": "markers"}})),
        ("retention", "a marker log kept for ever",
         lambda d: _cm(d)["data"].update(IB_STREAM_MAX_AGE="0")),
    ],
    "fleet-kv": [
        ("sqlite-single-node", "a fleet on one SQLite file",
         lambda d: (_cm(d)["data"].update(IB_RECORDER="sqlite:/scratch/x.db"))),
        ("topology", "a fleet of one", lambda d: _workload(d)["spec"].update(replicas=1)),
        ("topology", "a fleet on the memory recorder",
         lambda d: _cm(d)["data"].update(IB_RECORDER="memory:")),
        ("kv-bucket", "a bucket of one replica",
         lambda d: _cm(d)["data"].update(IB_RECORDER="kv:m?replicas=1&ttl=1d&min_ttl=6m")),
        ("kv-bucket", "no min_ttl",
         lambda d: _cm(d)["data"].update(IB_RECORDER="kv:m?replicas=3&ttl=1d")),
        ("kv-bucket", "no ttl",
         lambda d: _cm(d)["data"].update(IB_RECORDER="kv:m?replicas=3&min_ttl=6m")),
        ("kv-bucket", "ttl below min_ttl",
         lambda d: _cm(d)["data"].update(IB_RECORDER="kv:m?replicas=3&ttl=5m&min_ttl=6m")),
        ("kv-bucket", "ack wait raised past min_ttl",
         lambda d: _cm(d)["data"].update(IB_ACK_WAIT="5m")),
        ("kv-bucket", "a long BackOff step",
         lambda d: _cm(d)["data"].update(IB_BACKOFF="10s,10m")),
        ("kv-bucket", "more deliveries than min_ttl covers",
         lambda d: _cm(d)["data"].update(IB_MAX_DELIVER="20")),
        ("retention", "a stream that outlives the bucket's markers",
         lambda d: _cm(d)["data"].update(IB_STREAM_MAX_AGE="7d")),
        ("kv-bucket", "a claim shared by the replicas",
         lambda d: _pod(d)["volumes"].append(
             {"name": "markers", "persistentVolumeClaim": {"claimName": "markers"}})),
    ],
}


def _drop_line(needle):
    return lambda text: "\n".join(ln for ln in text.splitlines() if needle not in ln)


PERMISSION_MUTATIONS = [
    ("nats-permissions", "no rewind (durable delete)", _drop_line("CONSUMER.DELETE.@STREAM@")),
    ("nats-permissions", "no forwards", _drop_line('"@BASE@.*.*"')),
    ("nats-permissions", "no marker log appends", _drop_line('"ibus.markers.@DURABLE@.*"')),
    ("nats-permissions", "no lease writes", _drop_line('"$KV.ibus_fleet_@DURABLE@.>"')),
    ("nats-permissions", "no lost-race read", _drop_line("DIRECT.GET")),
    ("nats-permissions", "acks of every durable",
     lambda t: t.replace('"$JS.ACK.@STREAM@.@DURABLE@_p@P@.>"', '"$JS.ACK.@STREAM@.*.>"')),
    ("nats-permissions", "a line nothing uses",
     lambda t: t.replace('"@DEAD_LETTER@",', '"@DEAD_LETTER@",\n      "$JS.API.STREAM.NAMES",')),
    ("nats-permissions", "events of any subject",
     lambda t: t.replace('"@BASE@.*.*"', '">"')),
    ("nats-permissions", "subscribe to everything",
     lambda t: t.replace('allow: ["_INBOX.>"]', 'allow: [">"]')),
]


def self_test(docs, topology, blocks):
    base = Checker(copy.deepcopy(docs), topology, blocks).run()
    if base:
        print("\n".join(m for _, m in base))
        print("self-test: the unmodified manifests must pass first")
        return 1
    cases = list(MUTATIONS) + list(TOPOLOGY_MUTATIONS.get(topology, []))
    if topology not in ("fleet", "fleet-kv"):
        cases += SQLITE_MUTATIONS
    cases = [(r, w, m, None) for r, w, m in cases]
    if topology == "fleet":
        cases += [(r, w, None, m) for r, w, m in PERMISSION_MUTATIONS]
    bad = 0
    for rule, what, mutate, mutate_block in cases:
        d, b = copy.deepcopy(docs), dict(blocks)
        if mutate is not None:
            mutate(d)
        else:
            b[PARTITIONED_BLOCK] = mutate_block(b[PARTITIONED_BLOCK])
        found = Checker(d, topology, b).run()
        if not any(r == rule for r, _ in found):
            bad += 1
            print("self-test: %r was not caught by rule %s (got: %s)"
                  % (what, rule, [r for r, _ in found] or "nothing"))
        else:
            print("self-test ok: %-24s catches %s" % (rule, what))
    print("self-test: %d of %d breakages caught" % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


def main(argv):
    args = list(argv[1:])
    topology, selftest, nats_dir = None, False, NATS_DIR
    if "--nats-dir" in args:
        i = args.index("--nats-dir")
        nats_dir = args[i + 1]
        del args[i:i + 2]
    if "--self-test" in args:
        args.remove("--self-test")
        selftest = True
    if "--topology" in args:
        i = args.index("--topology")
        topology = args[i + 1]
        del args[i:i + 2]
    if topology not in ("single-pod", "single-pod-pvc", "sharded", "fleet", "fleet-kv") or \
            len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    text = sys.stdin.read() if args[0] == "-" else open(args[0], encoding="utf-8").read()
    docs = list(yaml.safe_load_all(text))
    blocks = {}
    path = os.path.join(nats_dir, PARTITIONED_BLOCK)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            blocks[PARTITIONED_BLOCK] = f.read()
    if selftest:
        return self_test(docs, topology, blocks)
    failures = Checker(docs, topology, blocks).run()
    for _, msg in failures:
        print(msg)
    n = len([d for d in docs if isinstance(d, dict) and d.get("kind") in WORKLOAD_KINDS])
    print("%s: %d workload(s), %s" % (topology, n,
                                      "%d rule(s) broken" % len(failures) if failures else "all rules hold"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

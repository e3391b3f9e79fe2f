#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The alert rules and the dashboard against a real Prometheus (issue 14).

Starts, all on loopback and on free ports: a nats-server with JetStream, an
`ibus run --create --http` with the audit example plugin and the scripted
test plugin, and a Prometheus that scrapes it every second and evaluates
deploy/prometheus/ibus-rules.yaml every second. Publishes a short workload
with duplicates, a handler retry, a REJECT and an undecodable message (two
dead letters), then asks Prometheus' HTTP API until
  - every expression of the rules and of deploy/grafana/ibus.json returns
    data (dashboard variables substituted as Grafana would; an alert
    expression with a comparison is also evaluated with the comparison made
    `bool`, so its series must exist even while it does not fire; absent(X)
    must find X),
  - every dashboard variable query finds values,
  - and IbusDeadLetters is firing in /api/v1/alerts.
Every process is stopped by its PID, also on failure.

usage: it_prometheus.py --source DIR --ibus EXE --plugin-audit SO
                        --plugin-scripted SO --nats-server EXE
Exit 77 (skip) when prometheus is not installed (Debian: prometheus).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import yaml
except ImportError:
    sys.stderr.write("it_prometheus: PyYAML is missing (Debian: python3-yaml)\n")
    sys.exit(2)

SKIP = 77
DEADLINE_S = 40
# $__rate_interval for a 1 s scrape interval: Grafana uses four of them
RATE_INTERVAL = "4s"


def log(msg):
    print(f"it_prometheus: {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """Children started by this test, stopped by PID in reverse order."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start(self, name, argv):
        out = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.tmp)
        out.close()
        self.procs.append((name, p))
        log(f"started {name} (pid {p.pid})")
        return p

    def stop_all(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()
            log(f"stopped {name} (pid {p.pid}, status {p.returncode})")

    def show_logs(self):
        for name, _ in self.procs:
            with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
                tail = f.read()[-3000:]
            sys.stdout.write(f"--- {name}.log (tail)\n{tail}\n")


def wait_until(what, probe, timeout, procs=()):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for name, p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode} while waiting for {what}")
        if probe():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def tcp_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class Prom:
    """The few calls of Prometheus' HTTP API this test needs."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}/api/v1/"

    def get(self, path, **params):
        url = self.base + path + "?" + urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr):
        return self.get("query", query=expr)["result"]

    def label_values(self, label, match):
        return self.get(f"label/{label}/values", **{"match[]": match})


def with_bool(expr):
    """The expression with every comparison outside label matchers and
    strings made a `bool` comparison: 0/1 per series instead of a filter."""
    out, i, depth, quote = [], 0, 0, None
    while i < len(expr):
        c = expr[i]
        if quote:
            out.append(c)
            if c == "\\":
                out.append(expr[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            out.append(c)
        elif c in "{}":
            depth += 1 if c == "{" else -1
            out.append(c)
        elif depth == 0 and c in "=!<>" and (expr[i:i + 2] in ("==", "!=", ">=", "<=")
                                            or (c in "<>" and expr[i:i + 2] != c + "=")):
            op = expr[i:i + 2] if expr[i:i + 2] in ("==", "!=", ">=", "<=") else c
            out.append(op + " bool")
            i += len(op)
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def rule_checks(rules):
    """(label, expression, must return data) for every alert."""
    checks = []
    for group in rules["groups"]:
        for r in group["rules"]:
            name, expr = r.get("alert") or r.get("record"), r["expr"].strip()
            m = re.fullmatch(r"absent\((.*)\)", expr, re.S)
            if m:
                checks.append((f"{name}: the series absent() watches", m.group(1), True))
                continue
            boolean = with_bool(expr)
            if boolean != expr:
                checks.append((f"{name} (bool)", boolean, True))
            checks.append((name, expr, name == "IbusDeadLetters" or boolean == expr))
    return checks


def substitute(expr, values):
    for name, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    return expr


def dashboard_checks(dash, prom, base_values):
    """Every variable query and every panel target, per consumer for the
    repeated row, as (label, expression, must return data)."""
    checks = []
    consumers = prom.label_values("consumer", 'ibus_consumer_runs_total{job="ibus"}')
    if not consumers:
        return [("variable consumer", "ibus_consumer_runs_total", True)], []
    values = dict(base_values, consumer=consumers[0])
    for v in dash["templating"]["list"]:
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q or "")
        if m:
            checks.append((f"variable {v['name']}", substitute(m.group(1), values), True))
    panels = [p for top in dash["panels"] for p in [top] + top.get("panels", [])]
    for p in panels:
        for t in p.get("targets", []):
            for c in consumers if "$consumer" in t["expr"] else consumers[:1]:
                expr = substitute(t["expr"], dict(values, consumer=c))
                checks.append((f"panel {p['title']!r} {t['refId']}", expr, True))
    return checks, consumers


def missing_data(prom, checks):
    """Labels of the checks whose expression returns no data yet."""
    missing = []
    for label, expr, need_data in checks:
        result = prom.query(expr)
        if need_data and not result:
            missing.append(f"{label}: {expr}")
    return missing


def dead_letter_alert_firing(prom):
    alerts = prom.get("alerts")["alerts"]
    return any(a["labels"].get("alertname") == "IbusDeadLetters" and a["state"] == "firing"
               for a in alerts)


def start_nats(procs, args, tmp):
    port = free_port()
    p = procs.start("nats-server", [args.nats_server, "-js", "-a", "127.0.0.1", "-p", str(port),
                                    "-sd", os.path.join(tmp, "js")])
    wait_until("nats-server", lambda: tcp_open(port), 10, [("nats-server", p)])
    return f"nats://127.0.0.1:{port}"


def start_ibus(procs, args, tmp, nats_url):
    port = free_port()
    p = procs.start("ibus-run", [
        args.ibus, "run", "--nats-url", nats_url, "--create", "--stream", "EVENTS",
        "--durable", "ibus", "--plugin", args.plugin_audit, "--plugin", args.plugin_scripted,
        "--plugin-config", "audit=file=" + os.path.join(tmp, "audit.log"),
        "--plugin-config", "scripted=file=" + os.path.join(tmp, "scripted.log"),
        "--recorder", "sqlite:" + os.path.join(tmp, "processed.db"),
        "--retry-delay", "100ms", "--http", f"127.0.0.1:{port}", "--log-format", "json"])
    wait_until("ibus /readyz", lambda: http_ok(f"http://127.0.0.1:{port}/readyz"), 15,
               [("ibus run", p)])
    return f"127.0.0.1:{port}"


def start_prometheus(procs, args, tmp, target):
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [os.path.join(args.source, "deploy/prometheus/ibus-rules.yaml")],
        "scrape_configs": [{"job_name": "ibus", "static_configs": [{"targets": [target]}]}],
    }
    path = os.path.join(tmp, "prometheus.yml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    p = procs.start("prometheus", [
        args.prometheus, "--config.file", path, "--storage.tsdb.path", os.path.join(tmp, "tsdb"),
        "--web.listen-address", f"127.0.0.1:{port}"])
    wait_until("prometheus ready", lambda: http_ok(f"http://127.0.0.1:{port}/-/ready"), 20,
               [("prometheus", p)])
    return Prom(port)


def publish(args, nats_url, *extra):
    argv = [args.ibus, "publish", "--nats-url", nats_url, "--quiet", *extra]
    subprocess.run(argv, check=True, timeout=30)


def workload(args, nats_url):
    # audit: 30 events, 30 % of them published twice (duplicates dropped)
    publish(args, nats_url, "--type", "order.created", "--count", "30", "--duplicates", "0.3")
    # scripted: OK, a RETRY then OK, a REJECT (dead letter "rejected")
    publish(args, nats_url, "--type", "test.scripted", "ok", "retry:1", "reject")
    # not a protobuf Event: dead letter "decode" (or "invalid-id")
    publish(args, nats_url, "--raw", "--subject", "events.garbage", "not an event")


def run(args, tmp, procs):
    nats_url = start_nats(procs, args, tmp)
    target = start_ibus(procs, args, tmp, nats_url)
    prom = start_prometheus(procs, args, tmp, target)
    wait_until("the first scrape", lambda: prom.query('up{job="ibus"} == 1'), 15, procs.procs)
    workload(args, nats_url)
    with open(os.path.join(args.source, "deploy/prometheus/ibus-rules.yaml")) as f:
        rules = yaml.safe_load(f)
    with open(os.path.join(args.source, "deploy/grafana/ibus.json")) as f:
        dash = json.load(f)
    base = {"job": "ibus", "instance": target, "__rate_interval": RATE_INTERVAL,
            "datasource": "prometheus"}
    end = time.monotonic() + DEADLINE_S
    while True:
        dchecks, consumers = dashboard_checks(dash, prom, base)
        checks = rule_checks(rules) + dchecks
        missing = missing_data(prom, checks)
        firing = dead_letter_alert_firing(prom)
        if not missing and firing:
            break
        if time.monotonic() > end:
            for m in missing:
                print(f"FAIL no data: {m}")
            if not firing:
                print("FAIL IbusDeadLetters is not firing in /api/v1/alerts")
            return 1
        time.sleep(1)
    log(f"{len(checks)} expressions return data ({len(consumers)} consumer identities: "
        f"{', '.join(consumers)}); IbusDeadLetters is firing")
    return 0


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--source", "--ibus", "--plugin-audit", "--plugin-scripted", "--nats-server"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--prometheus", default=shutil.which("prometheus"))
    args = ap.parse_args()
    # the children run in the temporary directory
    for name in ("source", "ibus", "plugin_audit", "plugin_scripted", "nats_server"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    if not args.prometheus:
        print("it_prometheus: SKIP: prometheus is not installed (Debian: prometheus)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="it_prometheus.")
    procs = Processes(tmp)
    status = 1
    try:
        status = run(args, tmp, procs)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"FAIL {e}")
    finally:
        procs.stop_all()
        if status != 0:
            procs.show_logs()
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

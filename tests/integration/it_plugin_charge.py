#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The example plugin with config and state, built out of tree (issue 45,
item 6): plugin/examples/charge.c copied alone into an empty directory and
compiled with cc against this build's plugin header installed to a
temporary prefix (pkg-config infinity-bus-plugin), as a plugin author
builds one. Then, with this build's ibus:

  check      `ibus run --check` loads it and lists its handler; init ran in
             checking mode (the request log is not created) and fini ran
             (its line: 0 requests);
  config     each bad configuration is exit 2 with init's own message
             ("plugin <file>: init failed: <reason>");
  consume    against a nats-server on loopback: 20 orders (5 of them
             published twice) and one whose payload is no amount. Each
             order is one request line with its event id as the
             idempotency key, the bad one is dead-lettered, and on SIGTERM
             fini logs the count from the plugin's state (20).
Every process is stopped by its PID, also on failure; loopback only.

usage: it_plugin_charge.py --source DIR --build DIR --ibus EXE --nats-server EXE
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_harness import Procs, ready, run_steps, wait_for  # noqa: E402
from it_netutil import free_port  # noqa: E402

ENDPOINT = "https://payments.example/v1/charges"


def log(msg):
    print(f"it_plugin_charge: {msg}", flush=True)


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args
        self.requests = os.path.join(tmp, "charges.log")
        self.plugin = os.path.join(tmp, "oot", "charge.so")

    def config(self, extra=""):
        return f"charge=endpoint={ENDPOINT},file={self.requests}{extra}"

    def check(self, config):
        env = {k: v for k, v in os.environ.items() if not k.startswith("IB_")}
        return subprocess.run([self.args.ibus, "run", "--check", "--plugin", self.plugin,
                               "--plugin-config", config, "--recorder", "memory:",
                               "--log-format", "text"], capture_output=True, text=True,
                              timeout=60, env=env)


def out_of_tree(run):
    prefix = os.path.join(run.tmp, "prefix")
    r = subprocess.run(["cmake", "--install", run.args.build, "--prefix", prefix,
                        "--component", "plugin-dev"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    pcs = [os.path.join(d, f) for d, _, fs in os.walk(prefix) for f in fs
           if f == "infinity-bus-plugin.pc"]
    assert pcs, "no infinity-bus-plugin.pc under the prefix"
    src = os.path.join(run.tmp, "oot")
    os.makedirs(src)
    shutil.copy(os.path.join(run.args.source, "plugin", "examples", "charge.c"), src)
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
    cflags = subprocess.run(["pkg-config", "--cflags", "infinity-bus-plugin"], env=env,
                            capture_output=True, text=True, check=True).stdout.split()
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                        "-fvisibility=hidden", "-Wl,-z,defs", *cflags, "-o", "charge.so",
                        "charge.c"], cwd=src, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    syms = subprocess.run(["nm", "-D", "--defined-only", run.plugin], capture_output=True,
                          text=True, check=True).stdout.split()
    assert syms[-1:] == ["ib_plugin_entry"] and len(syms) == 3, syms
    log(f"built out of tree with {' '.join(cflags)}; exports ib_plugin_entry only")


def check(run):
    r = run.check(run.config())
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "handler charge/charge types=order.created consumer=ibus/charge/charge" in out, out
    assert f"fini: 0 charge request(s) sent to {ENDPOINT}" in out, out
    assert not os.path.exists(run.requests), "--check created the request log"
    log("ibus run --check loads it; init in checking mode created nothing; fini ran")


def bad_configs(run):
    cases = [
        (f"charge=file={run.requests}", "config needs endpoint="),
        (f"charge=endpoint=ftp://pay.example,file={run.requests}",
         "endpoint=ftp://pay.example: not an http:// or https:// URL"),
        (run.config(",currency=euro"), "currency=euro: not three capital letters"),
        (run.config(",retries=3"), 'config item "retries=3": unknown key'),
        (f"charge=endpoint={ENDPOINT},file={run.tmp}/no/such/dir/x.log",
         "/no/such/dir/x.log: cannot be created in"),
    ]
    for config, reason in cases:
        r = run.check(config)
        out = r.stdout + r.stderr
        assert r.returncode == 2, (config, r.returncode, out)
        assert f"plugin {run.plugin}: init failed: " in out and reason in out, (config, out)
    log(f"{len(cases)} bad configurations: exit 2, each with init's message")


def consume(run):
    ids = [uuid.uuid4().hex for _ in range(20)]
    bad = uuid.uuid4().hex
    events = os.path.join(run.tmp, "events.jsonl")
    with open(events, "w") as f:
        for i, eid in enumerate(ids + ids[:5]):
            f.write(json.dumps({"type": "order.created", "payload": str(100 + i % 20),
                                "id": eid}) + "\n")
        f.write(json.dumps({"type": "order.created", "payload": "12.50", "id": bad}) + "\n")
    port = free_port()
    p = run.spawn([run.args.ibus, "run", "--nats-url", run.url, "--create", "--durable", "ibus",
                   "--plugin", run.plugin, "--plugin-config", run.config(), "--recorder",
                   "sqlite:" + os.path.join(run.tmp, "processed.db"), "--http",
                   f"127.0.0.1:{port}", "--log-format", "text"], "ibus")
    wait_for("ibus run ready (stream and durable made)", lambda: ready(port), 30)
    with open(events) as stdin:
        r = subprocess.run([run.args.ibus, "publish", "--nats-url", run.url, "--prefix",
                            "events"], stdin=stdin, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr

    def lines():
        if not os.path.exists(run.requests):
            return []
        with open(run.requests) as f:
            return f.read().splitlines()
    def host_log():
        with open(os.path.join(run.tmp, "ibus.log"), errors="replace") as f:
            return f.read()
    wait_for("20 requests", lambda: len(lines()) >= 20, 60)
    wait_for("the rejected order", lambda: "payload is no amount in cents" in host_log(), 30)
    assert run.stop(p) == 0, "ibus run did not exit 0 on SIGTERM"
    got = lines()
    want = [f"POST {ENDPOINT} idempotency-key={eid} amount={100 + i} currency=EUR"
            for i, eid in enumerate(ids)]
    assert sorted(got) == sorted(want), "\n".join(got)
    text = host_log()
    assert f"event {bad}: payload is no amount in cents" in text, text[-3000:]
    assert f"fini: 20 charge request(s) sent to {ENDPOINT}" in text, text[-3000:]
    log("20 orders (5 published twice): one request each, keyed by the event id; the bad "
        "amount rejected; fini counted 20")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--nats-server", required=True)
    args = ap.parse_args()
    args.ibus = os.path.abspath(args.ibus)
    for tool in ("cc", "pkg-config", "nm"):
        if shutil.which(tool) is None:
            log(f"SKIP: no {tool}")
            return 77
    run = Run(args, tempfile.mkdtemp(prefix="ib-plugin-charge-"))
    return run_steps("it_plugin_charge", run, [out_of_tree, check, bad_configs, consume])


if __name__ == "__main__":
    sys.exit(main())

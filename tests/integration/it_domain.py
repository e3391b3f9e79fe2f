#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A JetStream domain across a leaf node (issue 45, item 6): every command
and the kv: recorder reach a JetStream that is not the one of the server
they connect to.

Two nats-servers on free loopback ports, each with JetStream: a hub
(domain "hub") and a leaf node (domain "edge") connected to it through its
leafnodes port. The stream DOM and the bucket "marks" live on the leaf, as
on an edge site; every ibus command connects to the hub only.

  options  --js-domain with a '.', --js-domain with --js-api-prefix, a
           kv: URI with both domain= and api_prefix=: exit 2, each named;
  edge     ibus publish --js-domain edge stores in DOM; ibus run
           --js-domain edge --create makes its consumer and dead-letter
           stream on the leaf and marks every event in the leaf's bucket
           (kv:marks, inherited domain); ibus status, ibus markers lookup
           and ibus dlq list with --js-domain edge (and IB_JS_DOMAIN, and
           --js-api-prefix '$JS.edge.API', and kv:marks?domain=edge) answer;
           the hub has no such stream, consumer or bucket;
  without  the same commands without the option ask the hub's own
           JetStream and fail clearly: the stream or the bucket does not
           exist, exit 2.
Every process is stopped by its PID, also on failure; loopback only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_natsproto import Client  # noqa: E402
from it_harness import Procs, run_steps, wait_for  # noqa: E402
from it_netutil import free_port, tcp_open  # noqa: E402

EDGE = ["--js-domain", "edge"]
BUCKET_STREAM = {
    "name": "KV_marks", "subjects": ["$KV.marks.>"], "retention": "limits",
    "max_consumers": -1, "max_msgs": -1, "max_bytes": -1, "max_age": 0,
    "max_msgs_per_subject": 1, "max_msg_size": -1, "storage": "file", "discard": "new",
    "num_replicas": 1, "duplicate_window": 120000000000, "deny_delete": True,
    "allow_rollup_hdrs": True, "allow_direct": True,
}


def log(msg):
    print(f"it_domain: {msg}", flush=True)


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args
        self.ids = os.path.join(tmp, "dom.ids")

    def server(self, name, text):
        path = os.path.join(self.tmp, name + ".conf")
        with open(path, "w") as f:
            f.write(text)
        self.spawn([self.args.nats_server, "-c", path], name)

    def start_nats(self, nats_server):
        """The hub, then the leaf; waits until the hub reaches the leaf's
        JetStream through the leafnode connection."""
        self.port, leafnodes, self.leaf_port = free_port(), free_port(), free_port()
        self.server("hub", f"""listen: 127.0.0.1:{self.port}
jetstream {{ store_dir: "{self.tmp}/hub-js", domain: hub }}
leafnodes {{ listen: 127.0.0.1:{leafnodes} }}
""")
        wait_for("the hub", lambda: tcp_open(self.port) and tcp_open(leafnodes), 10)
        self.server("leaf", f"""listen: 127.0.0.1:{self.leaf_port}
jetstream {{ store_dir: "{self.tmp}/leaf-js", domain: edge }}
leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{leafnodes}" }} ] }}
""")
        self.url = f"nats://127.0.0.1:{self.port}"
        wait_for("the leaf's JetStream seen from the hub", self.edge_answers, 30)

    def edge_answers(self):
        c = Client(self.port)
        try:
            _, data = c.request("$JS.edge.API.INFO", timeout=1.0)
            return data.startswith(b"{") and b'"domain":"edge"' in data
        except (TimeoutError, OSError):
            return False
        finally:
            c.close()

    def ibus(self, *argv, env=None):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("IB_")}
        full_env.update(env or {})
        return subprocess.run([self.args.ibus, *argv], capture_output=True, text=True,
                              timeout=120, cwd=self.tmp, env=full_env)

    def run_host(self, *extra):
        """ibus run against the hub until idle; its exit status and log."""
        p = self.spawn([self.args.ibus, "run", "--nats-url", self.url, "--stream", "DOM",
                        "--durable", "d", "--plugin", self.args.plugin_scripted,
                        "--recorder", "kv:marks", "--idle-exit", "2s", "--log-format", "text",
                        *extra], "ibus-run")
        code = p.wait(timeout=120)
        with open(os.path.join(self.tmp, "ibus-run.log"), errors="replace") as f:
            return code, f.read()

    def status(self, *extra, env=None):
        return self.ibus("status", "--nats-url", self.url, "--stream", "DOM", "--durable", "d",
                         *extra, env=env)


def api(port, what, body=None):
    c = Client(port)
    try:
        return c.js(what, body)
    finally:
        c.close()


def options(run):
    for argv, want in (
            (["status", "--js-domain", "a.b"], "--js-domain 'a.b': holds '.'"),
            (["publish", "--js-domain", "edge", "--js-api-prefix", "$JS.edge.API", "--type",
              "t", "x"], "--js-domain and --js-api-prefix exclude each other"),
            (["markers", "--js-api-prefix", "$JS.*.API", "list"], "--js-api-prefix"),
            (["markers", "--recorder", "kv:marks?domain=edge&api_prefix=x", "list"],
             "domain and api_prefix exclude each other")):
        r = run.ibus(*argv[:1], "--nats-url", run.url, *argv[1:])
        assert r.returncode == 2 and want in r.stderr, (argv, r.returncode, r.stderr)
    log("options: a dotted domain, domain with prefix (flags or URI) are exit 2, named")


def edge(run):
    # the edge site's own stream and bucket, made on the leaf itself
    r = api(run.leaf_port, "STREAM.CREATE.DOM", {"name": "DOM", "subjects": ["dom.>"],
                                                 "storage": "file", "num_replicas": 1})
    assert "error" not in r, r
    r = api(run.leaf_port, "STREAM.CREATE.KV_marks", BUCKET_STREAM)
    assert "error" not in r, r

    r = run.ibus("publish", "--nats-url", run.url, *EDGE, "--prefix", "dom", "--type",
                 "test.scripted", "--ids-file", run.ids, "ok", "ok", "ok")
    assert r.returncode == 0 and "stored=3" in r.stdout, (r.stdout, r.stderr)
    code, text = run.run_host(*EDGE, "--create")
    assert code == 0 and "handled=6" in text, text
    info = api(run.leaf_port, "CONSUMER.INFO.DOM.d")
    assert info.get("num_ack_pending", 1) == 0 and info["delivered"]["stream_seq"] == 3, info
    assert "error" not in api(run.leaf_port, "STREAM.INFO.DLQ_d")
    marks = api(run.leaf_port, "STREAM.INFO.KV_marks")
    assert marks["state"]["messages"] >= 6, marks
    for what in ("STREAM.INFO.DOM", "STREAM.INFO.KV_marks", "STREAM.INFO.DLQ_d"):
        assert api(run.port, what)["error"]["code"] == 404, what
    log("edge: publish, run --create and the markers all land on the leaf, none on the hub")

    r = run.status(*EDGE, "--recorder", "kv:marks", "--json")
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    rep = json.loads(r.stdout)
    assert rep["stream"]["messages"] == 3 and rep["dead_letters"]["stream"] == "DLQ_d", rep
    got = {i["consumer"]: i["markers"] for i in rep["markers"]["identities"]}
    assert got == {"d/scripted/scripted": 3, "d/scripted/second": 3}, got
    for extra, env in ((["--recorder", "kv:marks"], {"IB_JS_DOMAIN": "edge"}),
                       (["--js-api-prefix", "$JS.edge.API", "--recorder", "kv:marks"], None)):
        r = run.status(*extra, env=env)
        assert r.returncode == 0 and "healthy" in r.stdout, (extra, r.stdout, r.stderr)

    with open(run.ids) as f:
        eid = f.read().split()[0]
    who = ["--consumer", "d/scripted/scripted", "lookup", eid]
    for argv in ([*EDGE, "--recorder", "kv:marks"], ["--recorder", "kv:marks?domain=edge"]):
        r = run.ibus("markers", "--nats-url", run.url, *argv, *who)
        assert r.returncode == 0 and f"processed: d/scripted/scripted {eid}" in r.stdout, (
            argv, r.returncode, r.stdout, r.stderr)
    r = run.ibus("dlq", "list", "--nats-url", run.url, *EDGE, "--durable", "d")
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    log("edge: status (flag, IB_JS_DOMAIN, --js-api-prefix), markers lookup (flag and "
        "domain=) and dlq list answer from the hub")


def without(run):
    r = run.status("--recorder", "kv:marks")
    assert r.returncode == 2 and "stream DOM does not exist" in r.stderr, (r.returncode,
                                                                           r.stderr)
    r = run.ibus("markers", "--nats-url", run.url, "--recorder", "kv:marks", "list")
    assert r.returncode == 2 and "the bucket does not exist" in r.stderr, (r.returncode,
                                                                         r.stderr)
    code, text = run.run_host()
    assert code == 2 and "the bucket does not exist" in text, (code, text)
    log("without: status, markers and run ask the hub's JetStream and say what is missing")


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--ibus", "--plugin-scripted", "--nats-server"):
        ap.add_argument(opt, required=True)
    args = ap.parse_args()
    args.ibus = os.path.abspath(args.ibus)
    args.plugin_scripted = os.path.abspath(args.plugin_scripted)
    run = Run(args, tempfile.mkdtemp(prefix="ib-domain-"))
    return run_steps("it_domain", run, [options, edge, without])


if __name__ == "__main__":
    sys.exit(main())

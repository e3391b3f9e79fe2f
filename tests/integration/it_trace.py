#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""W3C Trace Context end to end (issue 34), against a real nats-server.

One `ibus run` with three plugins on one stream: `http` (POSTs
order.created, order.relayed and ledger.posted to a receiver here that
records every request's headers), `relay` (a C handler that publishes
order.relayed through the bus proxy for each order.created) and `ledger` (a
transactional C handler that publishes ledger.posted through the outbox).
Events arrive with a traceparent given to `ibus publish --traceparent`, in
the Event's own headers, in both, malformed, or not at all, and the test
checks:
  - the same trace id on the http request of the event, on the event relay
    published (its NATS and Event headers), on that event's own http
    request, on the ledger's outbox event and its request;
  - a new span id at every hop, the span of a delivery being the one its
    log lines name (span_id) and the one the http request carries;
  - trace_id and span_id on the log lines about an event: the host's
    "handler failure", the plugin's own failure line, "dead-lettered";
  - the dead letter's Ibus-Trace-Id and Ibus-Span-Id;
  - a malformed traceparent dropped (the Event's used instead, or none),
    the event handled all the same;
  - with --trace-start, a fresh trace for events that carry none.
Every process is stopped by its PID, also on failure; loopback only.
"""

import argparse
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_natsproto import Client, event_bytes, event_headers, pb_fields  # noqa: E402
from it_harness import Procs, ready, run_steps, wait_for  # noqa: E402
from it_netutil import free_port  # noqa: E402

TP_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def log(msg):
    print(f"it_trace: {msg}", flush=True)


def new_tp():
    """A traceparent of the test's own: (value, trace id, span id)."""
    t, s = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    return f"00-{t}-{s}-01", t, s


def split_tp(value):
    m = TP_RE.match(value or "")
    assert m, f"not a version 00 traceparent: {value!r}"
    return m.group(1), m.group(2)


class Receiver:
    """Records (headers, body) per Idempotency-Key; answers 503 to the first
    request of an event whose JSON payload says "503", 422 to "422"."""

    def __init__(self):
        self.mu = threading.Lock()
        self.posts = {}

    def count(self, key):
        with self.mu:
            return len(self.posts.get(key, []))

    def get(self, key, n=0):
        with self.mu:
            return self.posts[key][n]

    def handler(self):
        rcv = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = self.headers.get("Idempotency-Key", "")
                with rcv.mu:
                    rcv.posts.setdefault(key, []).append((dict(self.headers), body))
                    n = len(rcv.posts[key])
                case = ""
                try:
                    payload = json.loads(body).get("payload")
                    case = payload.get("case", "") if isinstance(payload, dict) else ""
                except ValueError:
                    pass
                code = 503 if case == "503" and n == 1 else 422 if case == "422" else 204
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return H


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args

    def ibus(self, *a, check=True):
        r = subprocess.run([self.args.ibus, *a], capture_output=True, text=True, timeout=60,
                           cwd=self.tmp)
        if check:
            assert r.returncode == 0, f"ibus {a[0]}: {r.returncode} {r.stderr}"
        return r

    def log_records(self, name):
        out = []
        with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
            for line in f:
                if line.startswith("{"):
                    out.append(json.loads(line))
        return out


def start_receiver(rcv):
    """An HTTP server for `rcv` on a free loopback port, in a thread."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), rcv.handler())
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def publish_cli_checks(run):
    """ibus publish refuses a malformed --traceparent or --tracestate (exit 2,
    nothing sent); 'new' starts a trace and prints it."""
    bad = run.ibus("publish", "--nats-url", run.url, "--type", "t", "--traceparent",
                   "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "x", check=False)
    assert bad.returncode == 2 and "is not a W3C traceparent" in bad.stderr, bad
    tp, _, _ = new_tp()
    bad = run.ibus("publish", "--nats-url", run.url, "--type", "t", "--traceparent", tp,
                   "--tracestate", "a=1,a=2", "x", check=False)
    assert bad.returncode == 2 and "is not a W3C tracestate" in bad.stderr, bad
    bad = run.ibus("publish", "--nats-url", run.url, "--type", "t", "--tracestate", "a=1", "x",
                   check=False)
    assert bad.returncode == 2 and "--tracestate needs --traceparent" in bad.stderr, bad


def main_run(run):
    rcv = Receiver()
    httpd = start_receiver(rcv)
    mport = free_port()
    a = run.args
    host = run.spawn([a.ibus, "run", "--nats-url", run.url, "--create", "--durable", "tr",
                      "--stream", "TR", "--stream-subjects", "tr.>", "--publish-prefix", "tr",
                      "--plugin", a.plugin_http, "--plugin-config",
                      f"http=url=http://127.0.0.1:{httpd.server_address[1]}/e,timeout=5s,"
                      "types=order.created order.relayed ledger.posted",
                      "--plugin", a.plugin_relay, "--plugin", a.plugin_ledger,
                      "--recorder", "sqlite:" + os.path.join(run.tmp, "tr.db"),
                      "--retry-delay", "100ms", "--retry-max-delay", "1s", "--max-deliver", "3",
                      "--log-format", "json", "--http", f"127.0.0.1:{mport}"], "ibus-tr")
    wait_for("ibus run to be ready", lambda: ready(mport))
    publish_cli_checks(run)

    # E1: ibus publish --traceparent --tracestate, relayed
    e1 = uuid.uuid4().hex
    tp1, t1, p1 = new_tp()
    out = run.ibus("publish", "--nats-url", run.url, "--prefix", "tr", "--type", "order.created",
                   "--id", e1, "--traceparent", tp1, "--tracestate", "it=1", '{"case":"ok"}')
    assert f"traceparent={tp1}" in out.stdout, out.stdout
    # E2: only in the Event's headers; the receiver answers 503 first
    e2 = uuid.uuid4().hex
    tp2, t2, p2 = new_tp()
    nc = Client(run.port)
    nc.publish("tr.order.created", event_bytes(e2, "order.created", b'{"case":"503"}',
                                               [("traceparent", tp2)]))
    nc.flush()
    wait_for("the 503 and its retry", lambda: rcv.count(e2) >= 2)
    # E3: NATS header; the receiver answers 422: dead-lettered
    e3 = uuid.uuid4().hex
    tp3, t3, _ = new_tp()
    nc.publish("tr.order.created", event_bytes(e3, "order.created", b'{"case":"422"}'),
               [("traceparent", tp3)])
    # E4: a malformed NATS traceparent, a valid Event one: the Event's
    e4 = uuid.uuid4().hex
    tp4, t4, _ = new_tp()
    nc.publish("tr.order.created", event_bytes(e4, "order.created", b'{"case":"ok"}',
                                               [("traceparent", tp4)]),
               [("traceparent", tp4.upper()), ("tracestate", "x=1")])
    # E5: nothing usable anywhere: handled without a trace
    e5 = uuid.uuid4().hex
    nc.publish("tr.order.created", event_bytes(e5, "order.created", b'{"case":"ok"}',
                                               [("tracestate", "orphan=1")]),
               [("traceparent", "00-" + "0" * 32 + "-00f067aa0ba902b7-01")])
    nc.flush()
    # L1: the ledger's transactional handler publishes through the outbox
    l1 = uuid.uuid4().hex
    tp6, t6, p6 = new_tp()
    run.ibus("publish", "--nats-url", run.url, "--prefix", "tr", "--type", "ledger.entry", "--id",
             l1, "--traceparent", tp6, "acct-1 5")

    wait_for("the relayed and posted events",
             lambda: all(relayed(nc, k) for k in (e1, e2, e4, e5)) and posted(nc))
    r1, led = relayed(nc, e1), posted(nc)
    keys = (e1, e3, e4, e5, r1["id"], led["id"]) + tuple(relayed(nc, k)["id"] for k in (e2, e4, e5))
    wait_for("every request", lambda: all(rcv.count(k) >= 1 for k in keys))
    wait_for("the dead letter", lambda: dead_letter(nc, e3) is not None)
    assert run.stop(host) == 0, "ibus run did not exit 0"
    httpd.shutdown()
    records = run.log_records("ibus-tr")

    # E1 -> its request, the relayed event, the relayed event's request
    h1 = rcv.get(e1)[0]
    t, s1 = split_tp(h1["traceparent"])
    assert t == t1 and s1 != p1, (h1["traceparent"], tp1)
    assert h1["tracestate"] == "it=1", h1
    nats_h, ev_h = r1["nats"], r1["event"]
    assert nats_h["traceparent"] == [h1["traceparent"]], nats_h
    assert nats_h["tracestate"] == ["it=1"], nats_h
    assert ev_h["traceparent"] == h1["traceparent"], ev_h
    hr = rcv.get(r1["id"])[0]
    t, s2 = split_tp(hr["traceparent"])
    assert t == t1 and s2 not in (p1, s1), (hr["traceparent"], h1["traceparent"])
    log(f"E1: trace {t1} on its request (span {s1}), the relayed event and its request "
        f"(span {s2}); tracestate carried")

    # E2: the Event's header; two deliveries, two spans, each logged
    first, second = rcv.get(e2, 0)[0]["traceparent"], rcv.get(e2, 1)[0]["traceparent"]
    (ta, sa), (tb, sb) = split_tp(first), split_tp(second)
    assert ta == tb == t2 and len({sa, sb, p2}) == 3, (first, second, tp2)
    assert "tracestate" not in rcv.get(e2)[0], rcv.get(e2)[0]
    fails = [r for r in records if r.get("msg") == "handler failure" and r.get("event_id") == e2]
    assert fails and fails[0].get("trace_id") == t2 and fails[0].get("span_id") == sa, fails
    plugin = [r for r in records if r.get("component") == "http" and e2 in r.get("msg", "")]
    assert plugin and plugin[0].get("trace_id") == t2 and plugin[0].get("span_id") == sa, plugin
    log(f"E2: trace {t2} from the Event's header; spans {sa} then {sb}; 'handler failure' and "
        "the plugin's own line name the first")

    # E3: the dead letter and its log line
    h3 = rcv.get(e3)[0]
    t, s3 = split_tp(h3["traceparent"])
    assert t == t3, (h3, tp3)
    dl = dead_letter(nc, e3)
    assert dl["Ibus-Trace-Id"] == [t3] and dl["Ibus-Span-Id"] == [s3], dl
    assert dl["traceparent"] == [tp3], dl  # the original's own header, kept
    dls = [r for r in records if r.get("msg") == "dead-lettered" and r.get("event_id") == e3]
    assert dls and dls[0].get("trace_id") == t3 and dls[0].get("span_id") == s3, dls
    listed = run.ibus("dlq", "--nats-url", run.url, "--durable", "tr", "list", "--json").stdout
    entry = [json.loads(ln) for ln in listed.splitlines() if e3 in ln][0]
    assert entry["trace_id"] == t3 and entry["span_id"] == s3, entry
    log(f"E3: dead letter with Ibus-Trace-Id {t3}, Ibus-Span-Id {s3}, as its log line")

    # E4, E5: malformed values dropped, never failing the event
    t, _ = split_tp(rcv.get(e4)[0]["traceparent"])
    assert t == t4, rcv.get(e4)[0]
    h5 = rcv.get(e5)[0]
    assert "traceparent" not in h5 and "tracestate" not in h5, h5
    assert not [r for r in records if r.get("event_id") == e5 and r.get("level") != "info"]
    log("E4: an upper-case NATS traceparent dropped, the Event's used; E5: nothing valid, "
        "handled without a trace")

    # L1: the outbox event continues the trace
    assert "traceparent" not in led["nats"], led  # the outbox keeps the Event's bytes only
    t, s6 = split_tp(led["event"]["traceparent"])
    assert t == t6 and s6 != p6, (led, tp6)
    t, s7 = split_tp(rcv.get(led["id"])[0]["traceparent"])
    assert t == t6 and s7 not in (p6, s6)
    log(f"ledger: the outbox's ledger.posted carries trace {t6} (span {s6}), and so does its "
        "request")
    nc.close()


def start_run(run):
    """--trace-start: a fresh trace for what carries none, and none made up
    for what carries one."""
    rcv = Receiver()
    httpd = start_receiver(rcv)
    mport = free_port()
    a = run.args
    host = run.spawn([a.ibus, "run", "--nats-url", run.url, "--create", "--durable", "ts",
                      "--stream", "TS", "--stream-subjects", "ts.>", "--plugin", a.plugin_http,
                      "--plugin-config", f"http=url=http://127.0.0.1:{httpd.server_address[1]}/",
                      "--recorder", "memory:", "--trace-start", "--log-format", "json",
                      "--http", f"127.0.0.1:{mport}"], "ibus-ts")
    wait_for("ibus run to be ready", lambda: ready(mport))
    ids = [uuid.uuid4().hex for _ in range(3)]
    tp, t, _ = new_tp()
    nc = Client(run.port)
    nc.publish("ts.x", event_bytes(ids[0], "x"))
    nc.publish("ts.x", event_bytes(ids[1], "x"), [("traceparent", "garbage")])
    nc.publish("ts.x", event_bytes(ids[2], "x"), [("traceparent", tp)])
    nc.flush()
    nc.close()
    wait_for("the three requests", lambda: all(rcv.count(i) >= 1 for i in ids))
    assert run.stop(host) == 0
    httpd.shutdown()
    fresh = [split_tp(rcv.get(i)[0]["traceparent"]) for i in ids]
    assert fresh[0][0] != fresh[1][0] and t not in (fresh[0][0], fresh[1][0]), fresh
    assert rcv.get(ids[0])[0]["traceparent"].endswith("-03"), "a fresh trace is sampled"
    assert fresh[2][0] == t, (fresh[2], tp)
    log("--trace-start: fresh traces for an event without one and one with a malformed one; "
        "a valid one continued")


def stream_events(nc, stream):
    """Every message of `stream`: dicts of its NATS headers, and its Event's
    id, type and headers."""
    info = nc.js(f"STREAM.INFO.{stream}")
    out = []
    for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
        m = nc.stream_msg(stream, seq)
        if m is None:
            continue
        _, hdrs, data = m
        fields = dict((f, v) for f, v in pb_fields(data) if f in (1, 2))
        out.append({"nats": hdrs, "id": fields.get(1, b"").decode(),
                    "type": fields.get(2, b"").decode(), "event": event_headers(data)})
    return out


def relayed(nc, origin):
    """The order.relayed event relay published for event `origin`, or None."""
    for e in stream_events(nc, "TR"):
        if e["type"] == "order.relayed" and e["event"].get("relayed-from") == origin:
            return e
    return None


def posted(nc):
    """The ledger.posted event the ledger staged, or None."""
    for e in stream_events(nc, "TR"):
        if e["type"] == "ledger.posted":
            return e
    return None


def dead_letter(nc, eid):
    info = nc.js("STREAM.INFO.DLQ_tr")
    if "state" not in info:
        return None
    for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
        m = nc.stream_msg("DLQ_tr", seq)
        if m is not None and m[1].get("Ibus-Event-Id") == [eid]:
            return m[1]
    return None


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--ibus", "--plugin-http", "--plugin-relay", "--plugin-ledger", "--nats-server"):
        ap.add_argument(opt, required=True)
    args = ap.parse_args()
    for k in ("ibus", "plugin_http", "plugin_relay", "plugin_ledger"):
        setattr(args, k, os.path.abspath(getattr(args, k)))
    tmp = tempfile.mkdtemp(prefix="ib-trace-")
    return run_steps("it_trace", Run(args, tmp), [main_run, start_run])

if __name__ == "__main__":
    sys.exit(main())

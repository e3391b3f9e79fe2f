#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The http plugin against a real HTTP server this test starts (issue 26).

One nats-server and Python's http.server on loopback; `ibus run` with the
http plugin. Three runs:
  main   JSON bodies, header= and header_file=, where the server answers by
         the case the event's payload names:
           ok           a duplicate (same id published twice) is POSTed once
           503          503 on the first POST, 200 after: retried
           retry_after  503 with Retry-After: 2 first: the second POST comes
                        at least 1.5 s later, although --retry-delay is 100ms
           422          dead-lettered "rejected", Ibus-Error holding the
                        status and the body's first bytes
           timeout      the first answer comes after the plugin's timeout=1s:
                        retried
         and /metrics counts the requests by code;
  tls    HTTPS with a test CA made here by the openssl CLI, format=protobuf;
  down   a port nobody listens on: retried, never rejected, until the
         attempts run out (dead letter "max-deliver", not "rejected").
Every process is stopped by its PID, also on failure; loopback only.
"""

import argparse
import http.server
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_netutil import free_port, tcp_open  # noqa: E402
from it_procs import show_logs, spawn, start_nats, stop_all, wait_for  # noqa: E402

SECRET = "Bearer it-http-" + uuid.uuid4().hex


def log(msg):
    print(f"it_http: {msg}", flush=True)


def pb_fields(data):
    """The top-level fields of a protobuf message: {number: [values]}."""
    out, i = {}, 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.setdefault(field, []).append(varint())
        elif wire == 2:
            n = varint()
            out.setdefault(field, []).append(data[i:i + n])
            i += n
        else:
            raise ValueError(f"wire type {wire}")
    return out


class Receiver:
    """What the server saw, shared with its handler threads."""

    def __init__(self):
        self.mu = threading.Lock()
        self.posts = {}  # key -> [(monotonic time, headers, body)]
        self.errors = []

    def record(self, key, headers, body):
        with self.mu:
            self.posts.setdefault(key, []).append((time.monotonic(), headers, body))
            return len(self.posts[key])

    def count(self, key):
        with self.mu:
            return len(self.posts.get(key, []))


def make_handler(rcv, fmt, durable):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the plugin reuses connections

        def log_message(self, *a):
            pass

        def answer(self, code, body=b"", extra=()):
            self.send_response(code)
            for k, v in extra:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            try:
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the timeout case: the plugin gave up before the answer

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            key = self.headers.get("Idempotency-Key", "")
            case = self.check(key, body)
            n = rcv.record(key, dict(self.headers), body)
            if case == "503" and n == 1:
                return self.answer(503, b"busy")
            if case == "retry_after" and n == 1:
                return self.answer(503, b"later", [("Retry-After", "2")])
            if case == "422":
                return self.answer(422, b"unprocessable: field amount is missing\r\nmore")
            if case == "timeout" and n == 1:
                time.sleep(2.5)
            return self.answer(204)

        def check(self, key, body):
            """The request's headers and body agree with each other; the case."""
            h = self.headers
            try:
                if fmt == "protobuf":
                    assert h["Content-Type"] == "application/x-protobuf", h["Content-Type"]
                    f = pb_fields(body)
                    ev = {"id": f[1][0].decode(), "type": f[2][0].decode()}
                    case = "ok"
                else:
                    assert h["Content-Type"] == "application/json", h["Content-Type"]
                    ev = json.loads(body)
                    assert ev["payload_encoding"] == "json", ev
                    assert ev["source"] == "it-http", ev
                    case = ev["payload"]["case"]
                assert ev["id"] == key, (ev["id"], key)
                assert h["Ibus-Event-Type"] == ev["type"]
                assert h["Ibus-Consumer"] == durable + "/http/http", h["Ibus-Consumer"]
                assert int(h["Ibus-Delivery-Count"]) >= 1
                assert h["Authorization"] == SECRET, "header_file= not sent"
                assert h["X-Team"] == "payments", "header= not sent"
                return case
            except (AssertionError, KeyError, ValueError) as e:
                rcv.errors.append(f"{key}: {e!r}")
                return "ok"

    return Handler


class Server:
    def __init__(self, rcv, fmt, durable, context=None):
        self.port = free_port()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port),
                                                     make_handler(rcv, fmt, durable))
        self.httpd.daemon_threads = True
        if context is not None:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def make_ca(tmp):
    """A test CA and a server certificate for 127.0.0.1 it signed."""
    def ssl_cmd(*a):
        subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=60)
    ca_key, ca, key, csr, crt = (os.path.join(tmp, n) for n in
                                 ("ca.key", "ca.pem", "srv.key", "srv.csr", "srv.pem"))
    ext = os.path.join(tmp, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    ssl_cmd("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
            "-days", "1", "-subj", "/CN=it-http test CA")
    ssl_cmd("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", "/CN=127.0.0.1")
    ssl_cmd("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", crt, "-days", "1", "-extfile", ext)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    return ca, ctx


class Run:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.procs = args, tmp, []
        self.header_file = os.path.join(tmp, "headers")
        with open(self.header_file, "w") as f:
            f.write("# the receiver's token\nAuthorization: " + SECRET + "\n")
        os.chmod(self.header_file, 0o600)

    def spawn(self, argv, name):
        return spawn(self.procs, self.tmp, argv, name)

    def start_nats(self):
        self.url = start_nats(self.procs, self.tmp, self.args.nats_server)

    def ibus(self, durable, config, extra=()):
        return [self.args.ibus, "run", "--nats-url", self.url, "--create", "--durable", durable,
                "--stream", "EV_" + durable, "--stream-subjects", durable + ".>",
                "--plugin", self.args.plugin_http, "--plugin-config", "http=" + config,
                "--recorder", "sqlite:" + os.path.join(self.tmp, durable + ".db"),
                "--retry-delay", "100ms", "--retry-max-delay", "5s", "--ack-wait", "10s",
                "--concurrency", "2", "--log-format", "json", *extra]

    def publish(self, prefix, events):
        path = os.path.join(self.tmp, prefix + ".jsonl")
        with open(path, "w") as f:
            for e in events:
                f.write(json.dumps(e) + "\n")
        with open(path) as stdin:
            r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.url, "--prefix",
                                prefix, "--source", "it-http"], stdin=stdin,
                               capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"publish failed: {r.stderr}"

    def publish_raw(self, subject, data):
        """Publishes `data` as it is (ibus publish --raw); no NUL byte in it."""
        r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.url, "--raw",
                            "--subject", subject, data], capture_output=True, timeout=60)
        assert r.returncode == 0, f"publish --raw failed: {r.stderr!r}"

    def marker(self, durable, consumer, eid):
        """ibus markers lookup: 0 marked, 3 not marked (ibus run stopped)."""
        return subprocess.run([self.args.ibus, "markers", "--recorder",
                               "sqlite:" + os.path.join(self.tmp, durable + ".db"), "--consumer",
                               consumer, "lookup", eid], capture_output=True,
                              timeout=60).returncode

    def dlq(self, durable):
        r = subprocess.run([self.args.ibus, "dlq", "--nats-url", self.url, "--durable", durable,
                            "list", "--json"], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:  # no --json: fall back to the table
            r = subprocess.run([self.args.ibus, "dlq", "--nats-url", self.url, "--durable",
                                durable, "list"], capture_output=True, text=True, timeout=60)
        return r.stdout

    def stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode



def ready(port):
    """/readyz answers 200: connected, stream and consumer in place."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def metric(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def main_run(run):
    rcv = Receiver()
    srv = Server(rcv, "json", "main")
    ids = {c: uuid.uuid4().hex for c in ("ok", "503", "retry_after", "422", "timeout")}
    events = [{"type": "order.created", "id": i, "payload": json.dumps({"case": c})}
              for c, i in ids.items()]
    events.append(events[0])  # the duplicate
    unlisted = uuid.uuid4().hex  # a type types= leaves out: not this handler's
    events.append({"type": "order.shipped", "id": unlisted, "payload": json.dumps({"case": "ok"})})
    mport = free_port()
    cfg = (f"url=http://127.0.0.1:{srv.port}/events,timeout=1s,header=X-Team:payments,"
           f"header_file={run.header_file},types=order.created order.paid")
    # the stream and consumer exist before the events, so nothing is missed
    host = run.spawn(run.ibus("main", cfg, ["--http", f"127.0.0.1:{mport}"]), "ibus-main")
    wait_for("ibus run to be ready", lambda: ready(mport))
    run.publish("main", events)
    wait_for("every case", lambda: rcv.errors or rcv.count(ids["ok"]) >= 1 and rcv.count(ids["503"]) >= 2
             and rcv.count(ids["retry_after"]) >= 2 and rcv.count(ids["422"]) >= 1
             and rcv.count(ids["timeout"]) >= 2, timeout=60)
    time.sleep(1.5)  # the duplicate and any extra retry land meanwhile
    wait_for("the unlisted type to be acked",
             lambda: metric(scrape(mport), "ibus_events_unhandled_total") >= 1)
    text = scrape(mport)
    dl = run.dlq("main")
    assert run.stop(host) == 0, "ibus run did not exit 0 on SIGTERM"
    srv.stop()

    assert not rcv.errors, rcv.errors
    assert rcv.count(ids["ok"]) == 1, f"duplicate POSTed {rcv.count(ids['ok'])} times"
    assert rcv.count(ids["503"]) == 2, rcv.count(ids["503"])
    assert rcv.count(ids["timeout"]) == 2, rcv.count(ids["timeout"])
    assert rcv.count(ids["422"]) == 1, "a rejected event was POSTed again"
    # types=: the unlisted type was never POSTed, has no marker under the
    # handler's identity and is not counted as handled by it
    assert rcv.count(unlisted) == 0, "an event of an unlisted type was POSTed"
    assert run.marker("main", "main/http/http", unlisted) == 3, "unlisted type marked"
    assert run.marker("main", "main/http/http", ids["ok"]) == 0, "handled event not marked"
    assert metric(text, "ibus_events_unhandled_total") == 1, "unlisted type not unhandled"
    assert metric(text, 'ibus_consumer_runs_total{consumer="main/http/http",'
                        'result="handled"}') == 4, "handled count includes other types"
    p = rcv.posts[ids["retry_after"]]
    gap = p[1][0] - p[0][0]
    log(f"Retry-After: 2 -> second POST after {gap:.2f}s (--retry-delay 100ms)")
    assert gap >= 1.5, f"Retry-After not honoured: {gap:.2f}s"
    assert p[1][1]["Ibus-Delivery-Count"] == "2", p[1][1]
    assert ids["422"] in dl and "rejected" in dl, dl
    assert "HTTP 422: unprocessable: field amount is missing" in dl, dl
    assert metric(text, 'ibus_http_requests_total{consumer="main/http/http",code="503"}') == 2
    assert metric(text, 'ibus_http_requests_total{consumer="main/http/http",code="204"}') >= 4
    assert metric(text, 'ibus_http_requests_total{consumer="main/http/http",code="422"}') == 1
    assert metric(text, 'ibus_http_requests_total{consumer="main/http/http",code="timeout"}') == 1
    assert metric(text, 'ibus_http_request_seconds_count{consumer="main/http/http"}') >= 8
    log("main: duplicate once, 503 and timeout retried, Retry-After honoured, 422 "
        "dead-lettered with its status, metrics by code, a type types= leaves out neither "
        "POSTed nor marked nor counted as handled")


def pb_string(field, value):
    """One length-delimited protobuf field (value shorter than 128 bytes)."""
    assert 0 < len(value) < 128
    return bytes([field << 3 | 2, len(value)]) + value


def raw_event(eid):
    """An Event whose bytes a re-encoder would change: type before id, and a
    field number (15) the host does not know, in the middle."""
    return (pb_string(2, b"order.paid") + pb_string(15, b"from a newer producer")
            + pb_string(1, eid.encode()) + pb_string(3, b"raw payload")
            + pb_string(5, b"it-http"))


def tls_run(run):
    ca, ctx = make_ca(run.tmp)
    rcv = Receiver()
    srv = Server(rcv, "protobuf", "tls", ctx)
    ids = [uuid.uuid4().hex for _ in range(3)]
    cfg = (f"url=https://127.0.0.1:{srv.port}/events,ca={ca},format=protobuf,"
           f"header=X-Team:payments,header_file={run.header_file}")
    mport = free_port()
    host = run.spawn(run.ibus("tls", cfg, ["--idle-exit", "5s", "--http", f"127.0.0.1:{mport}"]),
                     "ibus-tls")
    wait_for("ibus run to be ready", lambda: ready(mport))
    run.publish("tls", [{"type": "order.paid", "id": i, "payload": "\u00ff binary"}
                        for i in ids])
    raw_id = uuid.uuid4().hex
    run.publish_raw("tls.raw", raw_event(raw_id))
    ids.append(raw_id)
    wait_for("the TLS posts", lambda: all(rcv.count(i) >= 1 for i in ids))
    assert host.wait(timeout=60) == 0, "ibus run (tls) did not exit 0"
    srv.stop()
    assert not rcv.errors, rcv.errors
    assert all(rcv.count(i) == 1 for i in ids), {i: rcv.count(i) for i in ids}
    f = pb_fields(rcv.posts[ids[0]][0][2])
    assert f[3][0] == "\u00ff binary".encode(), f  # the payload's bytes, untouched
    assert f[5][0] == b"it-http", f
    got = rcv.posts[raw_id][0][2]
    assert got == raw_event(raw_id), f"not the published bytes: {got!r}"
    log("tls: HTTPS with a test CA, protobuf bodies (the published bytes, an unknown field "
        "kept), header file sent")


def down_run(run):
    port = free_port()  # nothing listens there
    ids = [uuid.uuid4().hex for _ in range(2)]
    mport = free_port()
    cfg = f"url=http://127.0.0.1:{port}/events,header_file={run.header_file}"
    host = run.spawn(run.ibus("down", cfg, ["--max-deliver", "3", "--http",
                                            f"127.0.0.1:{mport}"]), "ibus-down")
    wait_for("ibus run to be ready", lambda: ready(mport))
    run.publish("down", [{"type": "order.created", "id": i, "payload": "x"} for i in ids])
    wait_for("the dead letters", lambda: all(i in run.dlq("down") for i in ids), timeout=60)
    text = scrape(mport)
    dl = run.dlq("down")
    assert run.stop(host) == 0
    assert "max-deliver" in dl and "rejected" not in dl, dl
    errors = metric(text, 'ibus_http_requests_total{consumer="down/http/http",code="error"}')
    assert errors == 3 * len(ids), f"{errors} connection errors, expected {3 * len(ids)}"
    log("down: connection errors retried until the 3 attempts ran out, never rejected")


def examples_run(run):
    """The example receivers of plugin/examples/http/ get every event once."""
    here = os.path.dirname(os.path.abspath(__file__))
    examples = os.path.join(here, "..", "..", "plugin", "examples", "http")
    receivers = [["python3", os.path.join(examples, "receiver.py")]]
    if shutil.which("node") is not None:
        receivers.append(["node", os.path.join(examples, "receiver.js")])
    for n, argv in enumerate(receivers):
        port, durable = free_port(), f"ex{n}"
        out = open(os.path.join(run.tmp, f"receiver{n}.log"), "wb")
        rp = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "PORT": str(port)})
        out.close()
        run.procs.append(rp)
        wait_for("the example receiver", lambda: tcp_open(port))
        ids = [uuid.uuid4().hex for _ in range(3)]
        mport = free_port()
        host = run.spawn(run.ibus(durable, f"url=http://127.0.0.1:{port}/",
                                  ["--http", f"127.0.0.1:{mport}"]), f"ibus-{durable}")
        wait_for("ibus run to be ready", lambda: ready(mport))
        events = [{"type": "order.created", "id": i, "payload": json.dumps({"n": i})}
                  for i in ids]
        run.publish(durable, events + events[:1])  # one duplicate
        path = os.path.join(run.tmp, f"receiver{n}.log")

        def lines():
            with open(path) as f:
                # the receiver's own lines: the key first (not the access log)
                return [w[0] for w in (ln.split() for ln in f) if w and len(w[0]) == 32]
        wait_for("the receiver's lines", lambda: set(ids) <= set(lines()))
        time.sleep(0.5)
        assert run.stop(host) == 0
        rp.kill()
        rp.wait()
        assert sorted(lines()) == sorted(ids), (argv[0], lines())
        log(f"{argv[0]} example receiver: every event once, by its key")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin-http", required=True)
    ap.add_argument("--nats-server", required=True)
    args = ap.parse_args()
    args.ibus, args.plugin_http = os.path.abspath(args.ibus), os.path.abspath(args.plugin_http)
    if shutil.which("openssl") is None:
        print("it_http: no openssl CLI for the test CA")
        return 77
    tmp = tempfile.mkdtemp(prefix="ib-http-")
    run = Run(args, tmp)
    try:
        run.start_nats()
        main_run(run)
        tls_run(run)
        down_run(run)
        examples_run(run)
    except BaseException:
        show_logs(run.tmp, 3000)
        raise
    finally:
        stop_all(run.procs)
    shutil.rmtree(tmp, ignore_errors=True)
    print("it_http: 4 passed, 0 failed")  # main, tls, down, examples
    return 0


if __name__ == "__main__":
    sys.exit(main())

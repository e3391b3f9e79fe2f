#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An outage is not poison (issue 31): real nats-server, real `ibus run`,
a receiver this test starts and stops on loopback. One case per run:

  outage  the http plugin POSTs to a receiver that goes down for much
          longer than the whole retry budget the options give (--max-deliver
          3, --retry-delay 100ms, --retry-max-delay 400ms: under a second),
          while events keep arriving. The circuit opens; nothing is
          dead-lettered; the requests and deliveries during the outage stay
          within what one probe a second allows (--circuit-probe-max 1s);
          /readyz names the open circuit; once the receiver is back every
          event is POSTed once, soon after the return.
  poison  the same with one event the receiver always answers 500: it is
          dead-lettered "max-deliver" with "last: HTTP 500 ..." in
          Ibus-Error; no other event is.
  defaults  (label chaos) every setting at its default: the receiver is down
          for IB_OUTAGE_SECONDS (600: ten minutes) while events keep arriving
          (a backlog, then ten every five seconds); nothing dead-lettered,
          every event once, and the figures (requests, deliveries, how soon
          draining starts) printed for the report.
  hang    the scripted C plugin's handler never returns (hang:1) under
          --handler-timeout 1s: the call is logged and counted, /healthz
          answers 503 naming it, systemd's watchdog pings ($NOTIFY_SOCKET,
          which this test listens on) stop; SIGTERM then ends the process
          at the drain deadline (exit 1), and after a restart the event is
          handled once.

  recorder  the marker file's disk is full (the chaos test's LD_PRELOAD
          shim fails its writes with ENOSPC) for RECORDER_DOWN_S while
          events keep arriving (issue 43): the log says so once, then at
          most one reminder per period, not a line per message or batch;
          ibus_recorder_errors_total counts every failed call; once the
          disk has room the recovery is logged and every event handled.

Time is compressed with options, never by changing defaults. Every process
is stopped by its PID, also on failure.
"""

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_netutil import free_port  # noqa: E402
from it_procs import show_logs, spawn, start_nats, stop_all, wait_for  # noqa: E402

PROBE_MAX_S = 1.0
BATCH = 8


def log(msg):
    print(f"it_outage: {msg}", flush=True)


class Receiver:
    """An HTTP endpoint that can be stopped and started again on its port;
    it answers 204, or 500 for the keys in `poison`, and keeps every POST."""

    def __init__(self, port, poison=()):
        self.port, self.poison = port, set(poison)
        self.mu = threading.Lock()
        self.posts = []  # (monotonic time, key, status)
        self.httpd = None
        self.conns = set()  # open keep-alive connections, cut by stop()

    def start(self):
        rcv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with rcv.mu:
                    rcv.conns.add(self.connection)

            def finish(self):
                with rcv.mu:
                    rcv.conns.discard(self.connection)
                super().finish()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = self.headers.get("Idempotency-Key", "")
                code = 500 if key in rcv.poison else 204
                with rcv.mu:
                    rcv.posts.append((time.monotonic(), key, code))
                body = b"boom" if code == 500 else b""
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        """Down for real: no new connection is accepted, and the plugin's
        keep-alive connections are cut."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.httpd = None
        with self.mu:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def ok_count(self, key):
        with self.mu:
            return sum(1 for _, k, c in self.posts if k == key and c == 204)

    def first_ok_after(self, t):
        with self.mu:
            times = [at for at, _, c in self.posts if c == 204 and at >= t]
        return min(times) if times else None


class Env:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.procs = args, tmp, []

    def spawn(self, argv, name, env=None):
        return spawn(self.procs, self.tmp, argv, name, env)

    def start_nats(self):
        self.url = start_nats(self.procs, self.tmp, self.args.nats_server)

    def ibus_run(self, durable, plugin, config, extra=()):
        return [self.args.ibus, "run", "--nats-url", self.url, "--create", "--durable", durable,
                "--stream", "EV_" + durable, "--stream-subjects", durable + ".>",
                "--plugin", plugin, "--plugin-config", config,
                "--recorder", "sqlite:" + os.path.join(self.tmp, durable + ".db"),
                "--log-format", "json", *extra]

    def publish(self, prefix, events):
        path = os.path.join(self.tmp, prefix + f"-{uuid.uuid4().hex[:6]}.jsonl")
        with open(path, "w") as f:
            for e in events:
                f.write(json.dumps(e) + "\n")
        with open(path) as stdin:
            r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.url, "--prefix",
                                prefix], stdin=stdin, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"publish failed: {r.stderr}"

    def dlq(self, durable):
        r = subprocess.run([self.args.ibus, "dlq", "--nats-url", self.url, "--durable", durable,
                            "list", "--json"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]



def get(port, path):
    """(status, body) of GET 127.0.0.1:port/path; (0, "") when it cannot."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def metric(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def stop(p, expect):
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError("ibus run did not stop on SIGTERM")
    assert rc == expect, f"ibus run exited {rc}, expected {expect}"


def events(n, poison=()):
    out = [{"type": "order.created", "id": uuid.uuid4().hex, "payload": json.dumps({"n": i})}
           for i in range(n)]
    out.extend({"type": "order.created", "id": k, "payload": "{}"} for k in poison)
    return out


def log_records(env, name):
    with open(os.path.join(env.tmp, name + ".log"), errors="replace") as f:
        for line in f:
            try:
                yield json.loads(line)
            except ValueError:
                continue


def outage(env, with_poison):
    durable = "poison" if with_poison else "outage"
    consumer = durable + "/http/http"
    poison = [uuid.uuid4().hex] if with_poison else []
    rcv = Receiver(free_port(), poison)
    rcv.start()
    mport = free_port()
    host = env.spawn(env.ibus_run(durable, env.args.plugin_http,
                                  f"http=url=http://127.0.0.1:{rcv.port}/,timeout=2s",
                                  ["--http", f"127.0.0.1:{mport}", "--max-deliver", "3",
                                   "--retry-delay", "100ms", "--retry-max-delay", "400ms",
                                   "--circuit-probe-max", "1s", "--batch", str(BATCH),
                                   "--concurrency", "2", "--ack-wait", "10s"]), "ibus-" + durable)
    wait_for("ibus run ready", lambda: get(mport, "/readyz")[0] == 200)
    before = events(20)
    env.publish(durable, before)
    wait_for("the first events", lambda: all(rcv.ok_count(e["id"]) == 1 for e in before))

    rcv.stop()
    during = events(30, poison)
    env.publish(durable, during)
    wait_for("the circuit to open", lambda: metric(
        get(mport, "/metrics")[1], f'ibus_circuit_state{{consumer="{consumer}"}}') == 2)
    status, why = get(mport, "/readyz")
    assert status == 503 and f"circuit open for {consumer}" in why, (status, why)
    text_a, t_a = get(mport, "/metrics")[1], time.monotonic()
    time.sleep(6.5)  # the outage: past six probes, and many times the whole retry budget
    text_b, t_b = get(mport, "/metrics")[1], time.monotonic()
    rcv.start()
    back = time.monotonic()

    ok_events = [e for e in before + during if e["id"] not in poison]
    wait_for("every event once the receiver is back",
             lambda: all(rcv.ok_count(e["id"]) >= 1 for e in ok_events), 60)
    if poison:
        wait_for("the poison event's dead letter", lambda: len(env.dlq(durable)) >= 1, 60)
    time.sleep(1.5)  # a repeat would land meanwhile
    final = get(mport, "/metrics")[1]
    dead = env.dlq(durable)
    stop(host, 0)

    drain = rcv.first_ok_after(back) - back
    if os.environ.get("IT_OUTAGE_DEBUG"):
        for at, k, c in rcv.posts:
            print(f"  post {at - back:+.3f} {k[:8]} {c}")
        for r in log_records(env, "ibus-" + durable):
            if "circuit" in r.get("msg", ""):
                print("  ", r)
    errors = (metric(text_b, f'ibus_http_requests_total{{consumer="{consumer}",code="error"}}') -
              metric(text_a, f'ibus_http_requests_total{{consumer="{consumer}",code="error"}}'))
    received = (metric(text_b, "ibus_events_received_total") -
                metric(text_a, "ibus_events_received_total"))
    window = t_b - t_a
    probes = int(window / PROBE_MAX_S) + 2
    log(f"{durable}: {window:.1f}s of outage watched: {errors:.0f} requests, {received:.0f} "
        f"deliveries (bound {probes} probes, {(probes + 3) * BATCH} deliveries); draining began "
        f"{drain:.3f}s after the return; dead letters {len(dead)}")
    repeats = {e["id"]: rcv.ok_count(e["id"]) for e in ok_events if rcv.ok_count(e["id"]) != 1}
    assert not repeats, f"events POSTed other than once: {repeats}"
    assert errors <= probes, f"{errors:.0f} requests in {window:.1f}s: more than one probe a second"
    assert received <= (probes + 3) * BATCH, f"{received} deliveries in {window:.1f}s"
    assert drain < 20, f"draining began {drain:.1f}s after the return"
    assert metric(final, f'ibus_circuit_transitions_total{{consumer="{consumer}",to="open"}}') >= 1
    assert metric(final, f'ibus_circuit_transitions_total{{consumer="{consumer}",to="closed"}}') >= 1
    assert metric(final, f'ibus_circuit_waits_total{{consumer="{consumer}"}}') > 0
    assert metric(final, f'ibus_circuit_state{{consumer="{consumer}"}}') == 0
    opened = [r for r in log_records(env, "ibus-" + durable)
              if r.get("msg", "").startswith("circuit open:")]
    assert opened and "last: Couldn't connect to server" in opened[0].get("detail", ""), opened
    if not poison:
        assert dead == [], f"dead-lettered during an outage: {dead}"
        assert metric(final, 'ibus_dead_lettered_total{reason="max-deliver"}') == 0
        return
    assert len(dead) == 1, dead
    d = dead[0]
    assert d["id"] == poison[0] and d["reason"] == "max-deliver", d
    assert d["error"].startswith("max-deliver after 3 attempts; last: HTTP 500 Internal Server "
                                 "Error"), d["error"]
    log(f"poison: dead-lettered alone, Ibus-Error: {d['error']}")


def defaults(env):
    """Ten minutes down with every setting at its default."""
    durable, consumer = "defaults", "defaults/http/http"
    seconds = float(os.environ.get("IB_OUTAGE_SECONDS", "600"))
    rcv = Receiver(free_port())
    rcv.start()
    mport = free_port()
    host = env.spawn(env.ibus_run(durable, env.args.plugin_http,
                                  f"http=url=http://127.0.0.1:{rcv.port}/",
                                  ["--http", f"127.0.0.1:{mport}"]), "ibus-" + durable)
    wait_for("ibus run ready", lambda: get(mport, "/readyz")[0] == 200)
    sent = events(200)
    env.publish(durable, sent)
    wait_for("the first events", lambda: all(rcv.ok_count(e["id"]) == 1 for e in sent), 60)
    rcv.stop()
    t0, text_a, opened_at = time.monotonic(), None, None
    while time.monotonic() - t0 < seconds:
        batch = events(10)
        env.publish(durable, batch)
        sent.extend(batch)
        for _ in range(10):  # five seconds, watching for the circuit
            text = get(mport, "/metrics")[1]
            if text_a is None and metric(text, f'ibus_circuit_state{{consumer="{consumer}"}}') > 0:
                text_a, opened_at = text, time.monotonic() - t0
            time.sleep(0.5)
    text_b, down = get(mport, "/metrics")[1], time.monotonic() - t0
    rcv.start()
    back = time.monotonic()
    wait_for("every event once the receiver is back",
             lambda: all(rcv.ok_count(e["id"]) >= 1 for e in sent), 600)
    drained = time.monotonic() - back
    time.sleep(2)
    final, dead = get(mport, "/metrics")[1], env.dlq(durable)
    stop(host, 0)
    assert text_a is not None, "the circuit never opened"
    errors = (metric(text_b, f'ibus_http_requests_total{{consumer="{consumer}",code="error"}}') -
              metric(text_a, f'ibus_http_requests_total{{consumer="{consumer}",code="error"}}'))
    received = (metric(text_b, "ibus_events_received_total") -
                metric(text_a, "ibus_events_received_total"))
    repeats = sum(1 for e in sent if rcv.ok_count(e["id"]) != 1)
    start = rcv.first_ok_after(back) - back
    opened = metric(final, f'ibus_circuit_transitions_total{{consumer="{consumer}",to="open"}}')
    log(f"defaults: {len(sent)} events, receiver down {down:.0f}s (circuit open after "
        f"{opened_at:.1f}s), {errors:.0f} requests and {received:.0f} deliveries while open, "
        f"draining began {start:.2f}s after the return and ended {drained:.1f}s after it; "
        f"dead letters {len(dead)}, events not POSTed once {repeats}, transitions to open "
        f"{opened:.0f}")
    assert dead == [] and repeats == 0, (dead, repeats)
    assert errors <= (down - opened_at) / 5 + 5, f"{errors} requests in {down - opened_at:.0f}s"


RECORDER_DOWN_S = 12.0


def about_recorder(r):
    """Whether a log record speaks of the recorder: its state, its errors,
    or a handler not run because of it."""
    return "recorder" in r.get("msg", "") or r.get("reason") == "recorder-failed"


def ok_calls(env):
    """The event ids the scripted plugin answered OK for, by both handlers."""
    seen = {}
    path = os.path.join(env.tmp, "calls.log")
    if os.path.exists(path):
        with open(path) as f:
            for w in (ln.split() for ln in f):
                if len(w) >= 5 and w[4] == "ok":
                    seen.setdefault(w[1], set()).add(w[0])
    return {k for k, v in seen.items() if len(v) == 2}


def recorder(env):
    """A full disk under the marker file while events keep arriving."""
    durable = "recdown"
    flag = os.path.join(env.tmp, "disk-full")
    db = os.path.join(env.tmp, durable + ".db")
    mport = free_port()
    # the shim goes first, and an ASan build is told to accept that
    pre = os.environ.get("LD_PRELOAD", "")
    asan = os.environ.get("ASAN_OPTIONS", "")
    shim = {"LD_PRELOAD": env.args.enospc_shim + (":" + pre if pre else ""),
            "ASAN_OPTIONS": asan + (":" if asan else "") + "verify_asan_link_order=0",
            "IB_SHIM_DB": db, "IB_SHIM_FLAG": flag}
    host = env.spawn(env.ibus_run(durable, env.args.plugin_scripted,
                                  "scripted=file=" + os.path.join(env.tmp, "calls.log"),
                                  ["--http", f"127.0.0.1:{mport}", "--retry-delay", "50ms",
                                   "--retry-max-delay", "100ms", "--ack-wait", "10s"]),
                     "ibus-" + durable, shim)
    wait_for("ibus run ready", lambda: get(mport, "/readyz")[0] == 200)
    sent = [{"type": "test.scripted", "id": uuid.uuid4().hex, "payload": "ok"} for _ in range(20)]
    env.publish(durable, sent)
    wait_for("the first events", lambda: all(e["id"] in ok_calls(env) for e in sent), 60)
    errors_a = metric(get(mport, "/metrics")[1], "ibus_recorder_errors_total")

    open(flag, "w").close()  # the disk is full from now on
    t0 = time.monotonic()
    while time.monotonic() - t0 < RECORDER_DOWN_S:
        batch = [{"type": "test.scripted", "id": uuid.uuid4().hex, "payload": "ok"}
                 for _ in range(200)]
        env.publish(durable, batch)
        sent.extend(batch)
        time.sleep(0.5)
    text = get(mport, "/metrics")[1]
    assert get(mport, "/readyz")[0] == 503, "ready while the recorder fails"
    assert metric(text, "ibus_recorder_up") == 0, "ibus_recorder_up is not 0 during the outage"
    errors_b = metric(text, "ibus_recorder_errors_total")
    os.unlink(flag)  # room again
    wait_for("every event once the disk has room",
             lambda: all(e["id"] in ok_calls(env) for e in sent), 120)
    wait_for("ready again", lambda: get(mport, "/readyz")[0] == 200, 30)
    stop(host, 0)

    records = list(log_records(env, "ibus-" + durable))
    down = [i for i, r in enumerate(records) if r.get("msg", "").startswith("recorder failing")]
    back = [i for i, r in enumerate(records) if r.get("msg", "").startswith("recorder works again")]
    assert down and back and back[0] > down[0], "the outage and the recovery are not both logged"
    during = [r for r in records[down[0]:back[0] + 1] if about_recorder(r)]
    still = [r for r in during if r.get("msg", "").startswith("recorder still failing")]
    per_s = len(during) / RECORDER_DOWN_S
    log(f"recorder: {RECORDER_DOWN_S:.0f}s of full disk, {len(sent)} events: {len(during)} log "
        f"lines about the recorder ({per_s:.1f}/s), {len(still)} reminders, "
        f"ibus_recorder_errors_total +{errors_b - errors_a:.0f}")
    # the change down, the change back, and at most one line a second between
    assert len(during) <= RECORDER_DOWN_S + 2 + 2, \
        f"{len(during)} lines about the recorder in {RECORDER_DOWN_S:.0f}s of outage: " \
        f"{[r.get('msg') for r in during[:5]]}..."
    assert len(down) == 1 and len(back) == 1, (len(down), len(back))
    assert still, "no reminder that the recorder still fails"
    assert all(int(r["failed_calls"]) > 0 for r in still), still
    reported = 1 + sum(int(r["failed_calls"]) for r in still)
    assert errors_b - errors_a >= reported, (errors_b - errors_a, reported)


def notify_socket(tmp):
    path = os.path.join(tmp, "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.1)
    return s, path


def pings(sock, seconds):
    """WATCHDOG=1 datagrams received within `seconds`."""
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            n += sock.recv(64) == b"WATCHDOG=1"
        except socket.timeout:
            pass
    return n


def calls(env, consumer, eid):
    """The verdicts the scripted plugin wrote for (consumer, eid), in order."""
    path = os.path.join(env.tmp, "calls.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [w[4] for w in (ln.split() for ln in f) if w[:2] == [consumer, eid]]


def hang(env):
    durable, consumer = "hang", "hang/scripted/scripted"
    sock, path = notify_socket(env.tmp)
    mport = free_port()
    argv = env.ibus_run(durable, env.args.plugin_scripted,
                        "scripted=file=" + os.path.join(env.tmp, "calls.log"),
                        ["--http", f"127.0.0.1:{mport}", "--handler-timeout", "1s",
                         "--ack-wait", "4s", "--drain-timeout", "2s"])
    watchdog = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"}
    host = env.spawn(argv, "ibus-hang", watchdog)
    wait_for("ibus run ready", lambda: get(mport, "/readyz")[0] == 200)
    assert pings(sock, 1.0) >= 2, "no watchdog pings while healthy"
    eid = uuid.uuid4().hex
    env.publish(durable, [{"type": "test.scripted", "id": eid, "payload": "hang:1"}])
    wait_for("/healthz to fail", lambda: get(mport, "/healthz")[0] == 503, 60)
    status, body = get(mport, "/healthz")
    assert consumer in body and eid in body and "--handler-timeout 1s" in body, body
    text = get(mport, "/metrics")[1]
    assert metric(text, f'ibus_handler_timeouts_total{{consumer="{consumer}"}}') == 1, text
    assert metric(text, "ibus_handlers_overdue") == 1
    assert get(mport, "/readyz")[0] == 200, "a stuck handler is a liveness matter"
    pings(sock, 0.5)  # what was on its way
    assert pings(sock, 1.5) == 0, "watchdog pings went on while a handler call was stuck"
    overdue = [r for r in log_records(env, "ibus-hang")
               if r.get("msg", "").startswith("handler call overdue")]
    assert overdue and overdue[0]["event_id"] == eid and overdue[0]["consumer"] == consumer
    stop(host, 1)  # the stuck call outlives the drain deadline: exit 1, not acked

    host = env.spawn(argv, "ibus-hang", watchdog)
    wait_for("the event after the restart", lambda: "ok" in calls(env, consumer, eid), 60)
    time.sleep(1)
    assert get(mport, "/healthz")[0] == 200
    stop(host, 0)
    sock.close()
    assert calls(env, consumer, eid) == ["hang", "ok"], calls(env, consumer, eid)
    r = subprocess.run([env.args.ibus, "markers", "--recorder",
                        "sqlite:" + os.path.join(env.tmp, "hang.db"), "--consumer", consumer,
                        "lookup", eid], capture_output=True, timeout=60)
    assert r.returncode == 0, "not marked after the restart"
    log("hang: /healthz 503 naming the call, counted, watchdog quiet; handled once after a "
        "restart")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("outage", "poison", "hang", "defaults", "recorder"),
                    required=True)
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin-http", required=True)
    ap.add_argument("--plugin-scripted", required=True)
    ap.add_argument("--nats-server", required=True)
    ap.add_argument("--enospc-shim", help="the chaos test's shim (case recorder)")
    args = ap.parse_args()
    for k in ("ibus", "plugin_http", "plugin_scripted", "enospc_shim"):
        if getattr(args, k) is not None:
            setattr(args, k, os.path.abspath(getattr(args, k)))
    tmp = tempfile.mkdtemp(prefix="ib-outage-")
    env = Env(args, tmp)
    try:
        env.start_nats()
        if args.case == "hang":
            hang(env)
        elif args.case == "defaults":
            defaults(env)
        elif args.case == "recorder":
            recorder(env)
        else:
            outage(env, args.case == "poison")
    except BaseException:
        show_logs(env.tmp)
        if os.environ.get("IT_OUTAGE_KEEP"):
            print(f"kept {tmp}")
            for p in env.procs:
                if p.poll() is None:
                    print("still running", p.pid, p.args[:2])
            time.sleep(float(os.environ["IT_OUTAGE_KEEP"]))
        raise
    finally:
        stop_all(env.procs)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"it_outage {args.case}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

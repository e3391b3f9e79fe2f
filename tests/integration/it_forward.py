#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`ibus forward` (issue 47, item 2) against a real nats-server on a free
loopback port: the events of a stream that is not partitioned moved to
partition subjects once.

  once     N events on orders.in (keyed by their id: uuid4, ids derived
           from a business key, one written dashed and in upper case in
           the subject) and on orders.in.<account> (keyed by the account,
           --key-token 3), some published twice, one that is not an
           Event, one with an invalid id, one whose key token is too long.
           The forwarder kills itself (SIGKILL) once a forward was stored
           and before the source message's ack, and is started again:
           the partition stream then holds each valid source message
           exactly once (its Nats-Msg-Id ibus-fwd-ORDERS_IN-<seq>, each
           sequence once), with the source bytes (and a producer's own
           header, not its Nats-Msg-Id), on the subject
           orders.p.<FNV-1a(key) mod 8>.<key> computed here; the repeated
           forward was dropped as already stored; the three bad ones are
           in the dead-letter stream with their reasons; the source
           durable has nothing left; and `ibus run --partitions 8`
           on the target handles every event once.
  stop     SIGTERM under a backlog of 5000: exit 0 and the summary line,
           and a second run that exits when idle for less than AckWait
           forwards the rest (what the first had pulled was handed back
           at once): 5000 forwards, each once.
  kill     kill -9 from outside under a backlog of 5000, and a restart:
           every source message acked, 5000 forwards.
  refusals exit 2 with the reason: no stream captures the partition
           subjects; a stream captures only some; the partition subjects
           are in the stream forwarded and the durable reads them; and
           the same stream accepted with a --filter that leaves them out,
           with a warning that its duplicate window is too short.
Every process is stopped by its PID, also on failure; loopback only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from contextlib import closing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_harness import Procs, fnv1a, run_steps, wait_for  # noqa: E402
from it_natsproto import Client, event_bytes, pb_fields  # noqa: E402

N = 8
BASE = "orders.p"
NAMESPACE = "6ba7b8109dad11d180b400c04fd430c8"
STOP_BACKLOG = 5000


def log(msg):
    print(f"it_forward: {msg}", flush=True)


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args

    def client(self):
        return Client(self.port)

    def stream(self, name, subjects, dup_ns=120 * 10**9):
        with closing(self.client()) as c:
            r = c.js(f"STREAM.CREATE.{name}", {"name": name, "subjects": subjects,
                                                "storage": "file", "duplicate_window": dup_ns})
        assert "error" not in r, r

    def forward(self, *argv, env=None, timeout=120):
        full = [self.args.ibus, "forward", "--nats-url", self.url, "--log-format", "json", *argv]
        return subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=self.tmp,
                              env=env)

    def count(self, stream):
        with closing(self.client()) as c:
            return c.js(f"STREAM.INFO.{stream}")["state"]["messages"]

    def messages(self, stream):
        """Every message of `stream`: [(seq, subject, headers, data)]."""
        out = []
        with closing(self.client()) as c:
            last = c.js(f"STREAM.INFO.{stream}")["state"]["last_seq"]
            for seq in range(1, last + 1):
                m = c.stream_msg(stream, seq)
                if m is not None:
                    out.append((seq,) + m)
        return out


def records(stderr):
    out = []
    for ln in stderr.splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            pass
    return out


def stopped(stderr):
    got = [r for r in records(stderr) if r.get("msg") == "stopped"]
    assert len(got) == 1, f"one summary line expected:\n{stderr[-3000:]}"
    return got[0]


def source_events(run):
    """Publishes the source messages; returns [(subject, bytes, key or None)]
    in publish order, key None for what must be dead-lettered."""
    sent = []
    for i in range(120):  # keyed by their ids
        eid = uuid.uuid4().hex
        sent.append(("orders.in", event_bytes(eid, "order.created", f"id {i}".encode()), eid))
    for i in range(120):  # keyed by an account named in the subject
        acct = f"account-{i % 12}"
        eid = uuid.uuid4().hex
        sent.append((f"orders.in.{acct}", event_bytes(eid, "order.created", f"a {i}".encode()),
                     acct))
    dashed = uuid.uuid4()  # the id spelled another way in the subject
    sent.append((f"orders.in.{str(dashed).upper()}", event_bytes(dashed.hex, "order.created", b"d"),
                 dashed.hex))
    for i in range(0, 240, 8):  # a producer's retries: the same event again
        sent.append(sent[i])
    sent.append(("orders.in", b"\xff\xffnot an event", None))
    sent.append(("orders.in", event_bytes("not-a-uuid", "order.created", b"x"), None))
    sent.append(("orders.in." + "k" * 200, event_bytes(uuid.uuid4().hex, "order.created", b"x"),
                 None))
    with closing(run.client()) as c:
        for subject, data, key in sent:
            # the producer's own headers travel with the forward, its
            # Nats-Msg-Id does not (the forward has its own)
            headers = [("X-Tenant", "t1"), ("Nats-Msg-Id", "own-" + key)] if key == dashed.hex \
                else None
            c.publish(subject, data, headers=headers)
        c.flush()
    return sent


def keyed_by_business_key(run):
    """Events whose ids `ibus publish --key` derived, on orders.in: keyed by
    that id. Returns [(subject, bytes, id)] as they were stored."""
    lines = "".join(json.dumps({"type": "order.paid", "key": f"invoice-{i}",
                                "payload": {"n": i}}) + "\n" for i in range(20))
    ids = os.path.join(run.tmp, "ids.txt")
    r = subprocess.run([run.args.ibus, "publish", "--nats-url", run.url, "--subject",
                        "orders.in", "--key-namespace", NAMESPACE, "--ids-file", ids, "--quiet"],
                       input=lines, capture_output=True, text=True, cwd=run.tmp)
    assert r.returncode == 0, r.stderr
    with open(ids) as f:
        return [ln.split()[0] for ln in f if ln.strip()]


def step_once(run):
    run.stream("ORDERS_IN", ["orders.in", "orders.in.*"])
    run.stream("ORDERS", [BASE + ".*.*"])
    sent = source_events(run)
    derived = keyed_by_business_key(run)
    src = run.messages("ORDERS_IN")
    assert len(src) == len(sent) + len(derived), f"{len(src)} source messages"
    want = {}  # source seq -> (subject, data)
    for (seq, subject, _, data), i in zip(src, range(len(src))):
        key = sent[i][2] if i < len(sent) else derived[i - len(sent)].replace("-", "")
        if i >= len(sent):
            assert len(key) == 32, key
        if key is not None:
            want[seq] = (f"{BASE}.{fnv1a(key.encode()) % N}.{key}", data)
    bad = len(src) - len(want)
    log(f"{len(src)} source messages: {len(want)} to forward, {bad} to dead-letter")

    common = ["--stream", "ORDERS_IN", "--durable", "fwd", "--subject", BASE, "--partitions",
              str(N), "--key-token", "3", "--batch", "16", "--idle-exit", "5s"]
    env = dict(os.environ, IB_TEST_FORWARD_KILL_AFTER="100")
    r = run.forward("--create", "--ack-wait", "2s", *common, env=env)
    assert r.returncode == -9, f"exit {r.returncode}, expected the kill:\n{r.stderr[-3000:]}"
    got = run.messages("ORDERS")
    assert len(got) == 100, f"{len(got)} forwards stored before the kill"
    r = run.forward(*common)
    assert r.returncode == 0, r.stderr[-3000:]
    s = stopped(r.stderr)
    log(f"after the restart: {s}")
    assert s["already_stored"] >= 1, "the forward stored before the kill was not repeated"
    assert s["dead_lettered"] == bad and s["failed"] == 0, s

    got = run.messages("ORDERS")
    ids = {}
    for seq, subject, headers, data in got:
        mid = headers.get("Nats-Msg-Id", [""])[0]
        assert mid.startswith("ibus-fwd-ORDERS_IN-"), mid
        src_seq = int(mid.rsplit("-", 1)[1])
        assert src_seq not in ids, f"source message {src_seq} forwarded twice"
        ids[src_seq] = (subject, data)
    assert set(ids) == set(want), f"missing {sorted(set(want) - set(ids))[:10]}, " \
                                  f"extra {sorted(set(ids) - set(want))[:10]}"
    for seq, (subject, data) in want.items():
        assert ids[seq][0] == subject, f"source {seq}: on {ids[seq][0]}, expected {subject}"
        assert ids[seq][1] == data, f"source {seq}: bytes changed"
    tenants = [h for _, _, h, _ in got if h.get("X-Tenant") == ["t1"]]
    assert len(tenants) == 1, f"{len(tenants)} forwards carry the producer's header"
    log(f"{len(got)} forwards: each valid source message once, on its key's partition")

    dl = run.messages("DLQ_fwd")
    reasons = sorted(h.get("Ibus-Reason", ["?"])[0] for _, _, h, _ in dl)
    assert reasons == ["decode", "decode", "invalid-id"], reasons
    with closing(run.client()) as c:
        info = c.js("CONSUMER.INFO.ORDERS_IN.fwd")
    assert info["num_pending"] == 0 and info["num_ack_pending"] == 0, info
    log(f"dead letters: {reasons}; the durable has nothing left")
    step_consume(run, want_ids(want))


def want_ids(want):
    """The event ids of the forwarded messages (each once)."""
    out = set()
    for _, data in want.values():
        out.add(dict(pb_fields(data))[1].decode().replace("-", "").lower())
    return out


def step_consume(run, ids):
    """ibus run --partitions on the target handles every event once."""
    audit = os.path.join(run.tmp, "audit.log")
    p = run.spawn([run.args.ibus, "run", "--nats-url", run.url, "--stream", "ORDERS",
                   "--subject", BASE, "--durable", "orders", "--partitions", str(N), "--create",
                   "--stream-subjects", BASE + ".*.*", "--plugin", run.args.plugin,
                   "--plugin-config", f"flaky=fraction=0,sleep=0,file={audit}",
                   "--idle-exit", "3s", "--log-format", "json"], "ibus-run")
    assert p.wait(timeout=180) == 0, "ibus run did not stop cleanly"
    with open(audit) as f:
        handled = [ln.split()[1].replace("-", "") for ln in f if ln.strip()]
    assert len(handled) == len(set(handled)), "an event was handled twice"
    assert set(handled) == ids, f"{len(set(handled))} handled of {len(ids)}"
    log(f"ibus run --partitions {N}: {len(handled)} events handled, each once")


def step_stop(run):
    """SIGTERM under a backlog: exit 0 with the summary line; what it had
    pulled and not started is handed back at once, so a second run that
    exits when idle for less than AckWait forwards the rest, each once."""
    run.stream("STOP_IN", ["stop.in"])
    run.stream("STOP", ["stop.p.*.*"])
    with closing(run.client()) as c:
        for i in range(STOP_BACKLOG):
            c.publish("stop.in", event_bytes(uuid.uuid4().hex, "order.created", b"s"))
        c.flush()
    argv = [run.args.ibus, "forward", "--nats-url", run.url, "--log-format", "json", "--stream",
            "STOP_IN", "--durable", "st", "--create", "--subject", "stop.p", "--partitions", "4",
            "--batch", "1"]
    p = run.spawn(argv, "forward-stop")
    wait_for("forwards under way", lambda: run.count("STOP") > 0, 30)
    assert run.stop(p) == 0, "ibus forward did not stop cleanly on SIGTERM"
    with open(os.path.join(run.tmp, "forward-stop.log")) as f:
        s = stopped(f.read())
    log(f"SIGTERM after {s['forwarded']} of {STOP_BACKLOG} forwards: {s}")
    r = run.forward(*argv[6:], "--idle-exit", "3s")
    assert r.returncode == 0, r.stderr[-3000:]
    # every source message acked (each only once its forward was stored),
    # and as many forwards as source messages: each once
    with closing(run.client()) as c:
        info = c.js("CONSUMER.INFO.STOP_IN.st")
    assert info["num_pending"] == 0 and info["num_ack_pending"] == 0, info
    assert run.count("STOP") == STOP_BACKLOG, f"{run.count('STOP')} forwards"
    log(f"the rest forwarded by the next run: {STOP_BACKLOG}, each once")


def step_kill(run):
    """kill -9 from outside at some moment under a backlog, then a restart
    once AckWait can pass: every source message acked, one forward each."""
    run.stream("KILL_IN", ["kill.in"])
    run.stream("KILL", ["kill.p.*.*"])
    with closing(run.client()) as c:
        for i in range(STOP_BACKLOG):
            c.publish("kill.in", event_bytes(uuid.uuid4().hex, "order.created", b"k"))
        c.flush()
    argv = ["--stream", "KILL_IN", "--durable", "k", "--create", "--ack-wait", "2s", "--subject",
            "kill.p", "--partitions", "4", "--batch", "1"]
    p = run.spawn([run.args.ibus, "forward", "--nats-url", run.url, *argv], "forward-kill")
    wait_for("forwards under way", lambda: run.count("KILL") > 0, 30)
    p.kill()
    p.wait()
    before = run.count("KILL")
    r = run.forward(*argv, "--idle-exit", "5s")
    assert r.returncode == 0, r.stderr[-3000:]
    s = stopped(r.stderr)
    with closing(run.client()) as c:
        info = c.js("CONSUMER.INFO.KILL_IN.k")
    assert info["num_pending"] == 0 and info["num_ack_pending"] == 0, info
    assert run.count("KILL") == STOP_BACKLOG, f"{run.count('KILL')} forwards"
    log(f"kill -9 after {before} forwards; the restart: {s['forwarded']} forwarded, "
        f"{s['already_stored']} already stored; {STOP_BACKLOG} forwards, each once")


def step_refusals(run):
    common = ["--durable", "r", "--create", "--partitions", "4", "--idle-exit", "1s"]
    r = run.forward("--stream", "ORDERS_IN", "--subject", "nowhere", *common)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "no stream captures the partition subjects nowhere.*.*" in r.stderr, r.stderr[-2000:]
    # the same from the environment (IB_<OPTION>), as every option
    r = run.forward("--stream", "ORDERS_IN", *common, env=dict(os.environ, IB_SUBJECT="elsewhere"))
    assert r.returncode == 2, r.stderr[-2000:]
    assert "no stream captures the partition subjects elsewhere.*.*" in r.stderr, r.stderr[-2000:]

    run.stream("PART", ["part.0.*", "part.1.*"])
    r = run.forward("--stream", "ORDERS_IN", "--subject", "part", *common)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "stream PART captures some of the partition subjects" in r.stderr, r.stderr[-2000:]

    run.stream("LOOP", ["loop.>"], dup_ns=10**9)
    r = run.forward("--stream", "LOOP", "--subject", "loop.p", *common)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "it would forward its own forwards" in r.stderr, r.stderr[-2000:]
    r = run.forward("--stream", "LOOP", "--subject", "loop.p", "--durable", "r2", "--create",
                    "--filter", "loop.in.*", "--partitions", "4", "--idle-exit", "1s")
    assert r.returncode == 0, r.stderr[-2000:]
    assert any(x.get("msg", "").startswith("the target's duplicate window is shorter")
               for x in records(r.stderr)), r.stderr[-2000:]

    r = run.forward("--stream", "ORDERS_IN", "--subject", BASE)
    assert r.returncode == 2 and "give --stream" in r.stderr, r.stderr
    log("refused: no target, a partial target, a loop; a filtered loop runs, warned")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--nats-server", required=True)
    args = ap.parse_args()
    run = Run(args, tempfile.mkdtemp(prefix="it_forward."))
    return run_steps("it_forward", run, [step_once, step_stop, step_kill, step_refusals])


if __name__ == "__main__":
    sys.exit(main())

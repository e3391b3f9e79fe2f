#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ibus status and ibus markers lookup for a partitioned consumer (issue 47,
item 6) against a real nats-server.

Two `ibus run --partitions 16` processes of durable `orders` (the flaky
plugin, always succeeding, one audit line per call) handle events that
`ibus publish --partitions` put on partition subjects. Asserts that:
  shared    `ibus status --partitions --json` lists every partition with an
            owner among the live members (both processes' tokens), lag 0
            once all is handled, exit 0; the text says so too;
  one dies  after kill -9 of one process and its lease's end, the other
            owns every partition and the dead one is no member any more;
  all die   with the second killed too and events published after, once
            the leases end status exits 1 with partition-without-owner
            naming exactly the partitions those events fell in, each
            partition's lag is the number of them it holds (pending, from
            the server) and the lags add up to what was published;
  lookup    with no process running, `ibus markers --partitions lookup`
            says processed (exit 0) for a handled id, not processed (exit
            3) for an unknown id and for one published after the kills,
            finds an event published under a business key with
            --partition-key, writes nothing to the marker log, and refuses
            forget and prune (exit 2); a durable without a marker log is
            exit 2 and no stream is made for it;
  IB_*      status takes IB_PARTITIONS and IB_SUBJECT as ibus run does;
  back      a new process takes every partition and handles the backlog:
            status exit 0 again with lag 0.
Every process is stopped by its PID; loopback only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_natsproto import Client  # noqa: E402
from it_harness import Procs, fnv1a, run_steps, wait_for  # noqa: E402

N = 16
BASE = "orders.p"
LEASE = "3s"
CONSUMER = "orders/flaky/flaky"


def log(msg):
    print(f"it_status_partitions: {msg}", flush=True)


def partition_of(key):
    return fnv1a(key.encode()) % N


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args
        self.audit = os.path.join(tmp, "audit.log")
        self.hosts = {}
        self.handled_before = []  # ids published while the processes ran
        self.after = []  # ids published once every process was killed
        self.keyed = None  # (id, business key) of an event published under a key

    def env(self, extra=None):
        e = {k: v for k, v in os.environ.items() if not k.startswith("IB_")}
        e.update(extra or {})
        return e

    def ibus(self, *argv, env=None):
        return subprocess.run([self.args.ibus, *argv], cwd=self.tmp, capture_output=True,
                              text=True, timeout=60, env=self.env(env))

    def start(self, name):
        self.hosts[name] = self.spawn([
            self.args.ibus, "run", "--nats-url", self.url, "--create", "--stream", "ORDERS",
            "--stream-subjects", BASE + ".>", "--subject", BASE, "--durable", "orders",
            "--partitions", str(N), "--partition-lease", LEASE, "--plugin", self.args.plugin,
            "--plugin-config", f"flaky=fraction=0,file={self.audit}", "--log-format", "json"],
            name)

    def token(self, name):
        """The member token `name` announces, from its log."""
        with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
            for ln in f:
                try:
                    r = json.loads(ln)
                except ValueError:
                    continue
                if r.get("msg") == "partitioned consumer":
                    return r["member"]
        return None

    def handled(self):
        if not os.path.exists(self.audit):
            return set()
        with open(self.audit) as f:
            return {ln.split()[1].replace("-", "") for ln in f if ln.strip()}

    def publish(self, events):
        """Publishes JSON lines with ibus publish --partitions: each to
        <BASE>.<partition>.<key>."""
        path = os.path.join(self.tmp, "events.jsonl")
        with open(path, "w") as f:
            for e in events:
                f.write(json.dumps(e) + "\n")
        with open(path) as f:
            r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.url, "--subject",
                                BASE, "--partitions", str(N), "--quiet"], stdin=f, cwd=self.tmp,
                               capture_output=True, text=True, timeout=60, env=self.env())
        assert r.returncode == 0, r.stderr

    def status(self, *extra, env=None, flags=True):
        argv = ["status", "--nats-url", self.url, "--stream", "ORDERS", "--durable", "orders"]
        if flags:
            argv += ["--partitions", str(N), "--subject", BASE, "--partition-lease", LEASE]
        return self.ibus(*argv, *extra, env=env)

    def status_json(self, env=None, flags=True):
        r = self.status("--json", env=env, flags=flags)
        assert r.returncode in (0, 1), (r.returncode, r.stdout, r.stderr)
        return r.returncode, json.loads(r.stdout)

    def lookup(self, *extra, durable="orders"):
        return self.ibus("markers", "--nats-url", self.url, "--partitions", str(N), "--durable",
                         durable, "--consumer", CONSUMER, *extra)

    def log_messages(self):
        """How many records the marker log holds."""
        nc = Client(self.port)
        try:
            info = nc.js("STREAM.INFO.IBUS_MARKERS_orders")
        finally:
            nc.close()
        return info["state"]["messages"]


def new_events(n, key=None):
    out = []
    for _ in range(n):
        e = {"type": "order.created", "id": uuid.uuid4().hex, "payload": {"n": 1}}
        if key is not None:
            e["partition_key"] = key
        out.append(e)
    return out


def step_shared(run):
    run.start("a")
    run.start("b")
    events = new_events(30)
    # a business key whose partition is not its event's id's
    key = next(k for k in (f"acct-{i}" for i in range(100))
               if partition_of(k) != partition_of(events[0]["id"]))
    keyed = new_events(1, key)
    run.keyed = (keyed[0]["id"], key)
    run.publish(events + keyed)
    run.handled_before = [e["id"] for e in events]
    want = {e["id"] for e in events + keyed}
    wait_for("every event handled", lambda: want <= run.handled(), 60)
    tokens = {run.token("a"), run.token("b")}
    assert None not in tokens, tokens

    def settled():
        code, j = run.status_json()
        p = j["partitioned"]
        if code != 0 or set(p["members"]) != tokens or p["lag"] != 0:
            return None
        if any(x["owner"] not in tokens or not x["owner_live"] for x in p["partitions"]):
            return None
        return j
    j = wait_for("both processes own partitions and nothing waits", settled, 30)
    p = j["partitioned"]
    assert j["healthy"] is True and j["attention"] == [], j["attention"]
    assert p["n"] == N and p["durable"] == "orders" and p["subject"] == BASE
    assert p["bucket"] == "ibus_fleet_orders" and p["marker_log"] == "IBUS_MARKERS_orders"
    assert [x["partition"] for x in p["partitions"]] == list(range(N))
    for x in p["partitions"]:
        assert x["lease"] == "held" and x["lease_left_ms"] > 0, x
        assert x["durable"] == f"orders_p{x['partition']}" and x["durable_exists"], x
        assert x["filter"] == f"{BASE}.{x['partition']}.*", x
        assert x["lag"] == x["pending"] + x["ack_pending"] == 0, x
    owners = {x["owner"] for x in p["partitions"]}
    assert owners == tokens, f"each process owns some partitions: {owners} of {tokens}"
    text = run.status()
    assert text.returncode == 0, text.stdout + text.stderr
    assert "partitioned consumer orders on stream ORDERS: healthy" in text.stdout, text.stdout
    assert "2 live members" in text.stdout, text.stdout
    # the same from IB_* variables, as ibus run reads them
    code, j2 = run.status_json(env={"IB_PARTITIONS": str(N), "IB_SUBJECT": BASE,
                                    "IB_PARTITION_LEASE": LEASE}, flags=False)
    assert code == 0 and j2["partitioned"]["n"] == N, j2
    log(f"shared: {len(want)} events handled, owners {sorted(owners)}")


def step_one_dies(run):
    a_token = run.token("a")
    b_token = run.token("b")
    run.hosts["a"].kill()
    run.hosts["a"].wait()

    def b_owns_all():
        code, j = run.status_json()
        p = j["partitioned"]
        ok = code == 0 and p["members"] == [b_token] and p["lag"] == 0 and all(
            x["owner"] == b_token and x["owner_live"] for x in p["partitions"])
        return j if ok else None
    j = wait_for("the survivor owns every partition", b_owns_all, 30)
    assert a_token not in j["partitioned"]["members"]
    log("one dies: the survivor owns every partition")


def step_all_die(run):
    run.hosts["b"].kill()
    run.hosts["b"].wait()
    events = new_events(12)
    run.publish(events)
    run.after = [e["id"] for e in events]
    want = {}
    for e in events:
        want[partition_of(e["id"])] = want.get(partition_of(e["id"]), 0) + 1

    def orphaned():
        code, j = run.status_json()
        return j if code == 1 and all(
            x["owner"] is None for x in j["partitioned"]["partitions"]) else None
    j = wait_for("the leases of the killed processes end", orphaned, 30)
    p = j["partitioned"]
    assert p["members"] == [], p["members"]
    lags = {x["partition"]: x["lag"] for x in p["partitions"] if x["lag"] > 0}
    assert lags == want, f"lag per partition {lags}, published {want}"
    assert p["lag"] == sum(want.values()) == len(events), p["lag"]
    for x in p["partitions"]:
        assert x["lease"] == "ended" and x["owner_live"] is False, x
        # a pull request of the killed process may have taken a message
        # out of pending into ack pending: the lag counts both
        assert x["pending"] + x["ack_pending"] == want.get(x["partition"], 0), x
    codes = [f["code"] for f in j["attention"]]
    assert codes == ["partition-without-owner"], j["attention"]
    msg = j["attention"][0]["message"]
    named = "partitions " + ", ".join(str(k) for k in sorted(want)) + " of orders"
    assert named in msg, (named, msg)
    assert f"{len(events)} messages wait" in msg, msg
    text = run.status()
    assert text.returncode == 1, text.stdout + text.stderr
    assert "attention needed" in text.stdout and "partition-without-owner" in text.stdout
    assert "0 live members" in text.stdout, text.stdout
    log(f"all die: exit 1 naming partitions {sorted(want)}, lag {p['lag']}")


def step_lookup(run):
    before = run.log_messages()
    handled = run.handled_before[0]
    r = run.lookup("lookup", handled)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.startswith(f"processed: {CONSUMER} {handled} in partition "
                               f"{partition_of(handled)}"), r.stdout
    # the dashed spelling is the same event
    dashed = str(uuid.UUID(handled))
    assert run.lookup("lookup", dashed).returncode == 0
    unknown = uuid.uuid4().hex
    r = run.lookup("lookup", unknown)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.startswith(f"not processed: {CONSUMER} {unknown} in partition "
                               f"{partition_of(unknown)}"), r.stdout
    assert r.stdout.rstrip().endswith("attempts=0"), r.stdout
    r = run.lookup("lookup", run.after[0])
    assert r.returncode == 3 and r.stdout.startswith("not processed:"), r.stdout
    # under its business key the event is in the key's partition, not its id's
    kid, key = run.keyed
    r = run.lookup("--partition-key", key, "lookup", kid)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert f"in partition {partition_of(key)}" in r.stdout, r.stdout
    r = run.lookup("lookup", kid)
    assert r.returncode == 3 and f"in partition {partition_of(kid)}" in r.stdout, r.stdout
    for action in (["forget", handled], ["prune", "--older-than", "1d", "--force"]):
        r = run.lookup(*action)
        assert r.returncode == 2, (action, r.returncode, r.stdout, r.stderr)
        assert "not for a partitioned consumer" in r.stderr, r.stderr
    assert run.log_messages() == before, "a lookup wrote to the marker log"
    r = run.lookup("lookup", handled, durable="nosuch")
    assert r.returncode == 2 and "does not exist" in r.stderr, (r.returncode, r.stderr)
    nc = Client(run.port)
    try:
        info = nc.js("STREAM.INFO.IBUS_MARKERS_nosuch")
    finally:
        nc.close()
    assert info.get("error", {}).get("code") == 404, info
    log(f"lookup: processed, not processed, by key, refusals; the log kept {before} records")


def step_back(run):
    run.start("c")
    want = set(run.after)
    wait_for("the backlog handled", lambda: want <= run.handled(), 60)

    def healthy():
        code, j = run.status_json()
        return j if code == 0 and j["partitioned"]["lag"] == 0 else None
    j = wait_for("status healthy again", healthy, 30)
    c = run.token("c")
    assert all(x["owner"] == c for x in j["partitioned"]["partitions"])
    assert run.lookup("lookup", run.after[0]).returncode == 0
    assert run.stop(run.hosts["c"]) == 0
    log("back: a new process took every partition and the backlog")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--nats-server", required=True)
    args = ap.parse_args()
    run = Run(args, tempfile.mkdtemp(prefix="it_status_partitions."))
    return run_steps("it_status_partitions", run,
                     [step_shared, step_one_dies, step_all_die, step_lookup, step_back])


if __name__ == "__main__":
    sys.exit(main())

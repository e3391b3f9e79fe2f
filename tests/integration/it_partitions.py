#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A partitioned consumer end to end (issue 47): `ibus run --partitions`.

One nats-server; events published by `ibus publish --partitions` with
duplicates, some under business keys, numbered per key; three `ibus run`
processes of one partitioned durable with the flaky plugin as a slow,
always successful handler (2 ms a call, one audit line per call). Asserts that:
  - the partitions are shared out (each process takes some, and they sum
    to N), and each process's first event comes soon after its start;
  - every event ran exactly once and no duplicate ran, the markers
    coming from the partition log;
  - a process killed with kill -9 under a backlog gives its partitions up
    when its lease ends, and its events are handled by the others: none
    lost, repeats at most one batch per kill;
  - a process that joins takes partitions, and one stopped with SIGTERM
    hands them over at once;
  - events of one key ran in the order they were published, across the
    kill and the handovers;
  - a message on a partition subject whose key hashes elsewhere is
    forwarded to its partition and handled there once;
  - a second consumer configured for another N is refused at start, naming
    both numbers;
  - a partition whose marker log holds a record that does not decode is
    not taken, with an error naming it, while the others are.
Every process is stopped by its PID; loopback only.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_harness import Procs, fnv1a, wait_for  # noqa: E402

N = 8
BASE = "orders.p"
BATCH = 64


def log(msg):
    print(f"it_partitions: {msg}", flush=True)


class Run:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.procs = Procs(tmp)
        self.audit = os.path.join(tmp, "audit.log")
        self.hosts = {}

    def ibus(self, *argv, check=True, **kw):
        return subprocess.run([self.args.ibus, *argv], cwd=self.tmp, check=check,
                              capture_output=True, text=True, **kw)

    def start(self, name, lease="3s"):
        p = self.procs.spawn([
            self.args.ibus, "run", "--nats-url", self.procs.url, "--create",
            "--stream", "ORDERS", "--stream-subjects", BASE + ".>", "--subject", BASE,
            "--durable", "orders", "--partitions", str(N), "--partition-lease", lease,
            "--plugin", self.args.plugin,
            "--plugin-config", f"flaky=fraction=0,sleep=2,file={self.audit}",
            "--batch", str(BATCH), "--max-deliver", "5", "--log-format", "json",
            "--summary-file", os.path.join(self.tmp, "summary.jsonl")], name)
        self.hosts[name] = p
        return p

    def lines(self):
        if not os.path.exists(self.audit):
            return []
        with open(self.audit) as f:
            return [ln.split() for ln in f if ln.strip()]

    def handled_ids(self):
        return [parts[1] for parts in self.lines()]

    def log_records(self, name):
        out = []
        with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
            for ln in f:
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    pass
        return out

    def owned(self, name):
        """Partitions `name` took minus those it gave up, from its log."""
        got = set()
        for r in self.log_records(name):
            if r.get("msg") == "partition taken":
                got.add(r["partition"])
            elif r.get("msg") in ("partition handed over",
                                  "lost a partition's lease to another process; stopped "
                                  "handling it"):
                got.discard(r["partition"])
        return got

    def publish_jsonl(self, lines):
        path = os.path.join(self.tmp, "events.jsonl")
        with open(path, "w") as f:
            for ln in lines:
                f.write(json.dumps(ln) + "\n")
        with open(path) as f:
            r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.procs.url,
                                "--subject", BASE, "--partitions", str(N), "--quiet"],
                               stdin=f, cwd=self.tmp, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def keyed_events(rng, keys, per_key, first_n=0):
    """Numbered events per key, interleaved at random; each id a uuid4."""
    import uuid
    order = [k for k in keys for _ in range(per_key)]
    rng.shuffle(order)
    count = {k: first_n for k in keys}
    out = []
    for k in order:
        count[k] += 1
        out.append({"type": "order.created", "id": str(uuid.uuid4()), "partition_key": k,
                    "payload": {"key": k, "n": count[k]}})
    return out


def check_order(run, events):
    """Events of one key ran in the order they were published."""
    seq = {e["id"]: (e["partition_key"], e["payload"]["n"]) for e in events}
    last, bad = {}, 0
    for i in run.handled_ids():
        if i.replace("-", "") not in seq and i not in seq:
            continue
        k, n = seq.get(i) or seq[i.replace("-", "")]
        if n < last.get(k, 0):
            bad += 1
        last[k] = max(last.get(k, 0), n)
    return bad


def norm(i):
    return i.replace("-", "").lower()


def scenario(run, rng):
    procs = run.procs
    procs.start_nats(run.args.nats_server)
    # a first process creates the stream and takes every partition
    a = run.start("a")
    wait_for("a owns every partition", lambda: len(run.owned("a")) == N, 30)

    keys = [f"account-{i}" for i in range(40)]
    events = keyed_events(rng, keys, 25)  # 1,000 events, 25 per key
    dups = [dict(e) for e in rng.sample(events, 200)]  # a producer's retries
    run.publish_jsonl(events + dups)
    want = {norm(e["id"]) for e in events}
    wait_for("the first 1,000 handled", lambda: want <= {norm(i) for i in run.handled_ids()}, 60)
    time.sleep(1.0)
    ids = [norm(i) for i in run.handled_ids()]
    assert len(ids) == len(set(ids)) == 1000, f"{len(ids)} calls for {len(set(ids))} events"
    log("1,000 events and 200 duplicates: 1,000 calls")

    # two processes join: the partitions are shared out
    b, c = run.start("b"), run.start("c")
    # rendezvous hashing may leave a process of three without any of 8
    # partitions (about 4 % each): the joiners together take some
    wait_for("the partitions shared out", lambda: len(run.owned("a")) < N and
             sum(len(run.owned(n)) for n in "abc") == N, 30)
    shares = {n: sorted(run.owned(n)) for n in "abc"}
    log(f"shares after joining: {shares}")

    # a backlog, then kill -9 of one owner while it works
    more = keyed_events(rng, keys, 100, first_n=25)  # 4,000 more
    before = len(run.handled_ids())
    run.publish_jsonl(more)
    wait_for("the backlog under way", lambda: len(run.handled_ids()) >= before + 300, 30)
    victim = max("abc", key=lambda n: len(run.owned(n)))
    others = [n for n in "abc" if n != victim]
    run.hosts[victim].send_signal(signal.SIGKILL)
    run.hosts[victim].wait()
    killed_at = time.monotonic()
    left = before + 4000 - len(run.handled_ids())
    log(f"killed {victim} (owned {sorted(run.owned(victim))}) with {left} events left")
    assert left > 0, "the kill came after the backlog: it tests nothing"
    wait_for("the victim's partitions taken over",
             lambda: sum(len(run.owned(n)) for n in others) == N, 30)
    log(f"its partitions taken over {time.monotonic() - killed_at:.1f} s after the kill "
        f"(lease 3 s)")
    want |= {norm(e["id"]) for e in more}
    wait_for("every event handled after the kill",
             lambda: want <= {norm(i) for i in run.handled_ids()}, 120)
    took = time.monotonic() - killed_at
    ids = [norm(i) for i in run.handled_ids()]
    repeats = len(ids) - len(set(ids))
    log(f"after the kill: {len(set(ids))} events, {repeats} repeated calls, "
        f"all handled {took:.1f} s after it")
    assert set(ids) == want, "lost events"
    assert repeats <= BATCH, f"{repeats} repeats for one kill"

    # the victim comes back, one process leaves by SIGTERM
    run.start("v2")
    wait_for("the victim's successor in the fleet",
             lambda: sum(len(run.owned(n)) for n in others + ["v2"]) == N, 30)
    leaver, stays = others[0], [others[1], "v2"]
    assert procs.stop(run.hosts[leaver]) == 0
    wait_for("the leaver's partitions taken", lambda: sum(len(run.owned(n)) for n in stays) == N,
             30)
    last = keyed_events(rng, keys, 10, first_n=125)
    run.publish_jsonl(last)
    want |= {norm(e["id"]) for e in last}
    wait_for("the last events", lambda: want <= {norm(i) for i in run.handled_ids()}, 60)

    bad = check_order(run, events + more + last)
    log(f"events out of their key's order: {bad}")
    assert bad == 0

    # a misplaced message: a key published on another partition's subject
    import uuid
    key = "account-misplaced"
    right = fnv1a(key.encode()) % N
    wrong = (right + 1) % N
    eid = str(uuid.uuid4())
    r = subprocess.run([run.args.ibus, "publish", "--nats-url", procs.url,
                        "--subject", f"{BASE}.{wrong}.{key}", "--type", "order.created",
                        "--id", eid, "--quiet", '{"n":1}'], cwd=run.tmp, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    wait_for("the misplaced event handled", lambda: norm(eid) in
             {norm(i) for i in run.handled_ids()}, 30)
    time.sleep(1.0)
    assert [norm(i) for i in run.handled_ids()].count(norm(eid)) == 1

    # another N is refused, naming both numbers
    r = run.ibus("run", "--nats-url", procs.url, "--stream", "ORDERS", "--subject", BASE,
                 "--durable", "orders", "--partitions", "16", "--plugin", run.args.plugin,
                 "--plugin-config", f"flaky=fraction=0,file={run.audit}", "--idle-exit", "2s",
                 check=False, timeout=60)
    assert r.returncode != 0
    assert "16" in r.stderr and str(N) in r.stderr, r.stderr

    for n in stays:
        assert procs.stop(run.hosts[n]) == 0

    # a record of partition 0's marker log that does not decode: the
    # partition is not taken (its markers cannot all be read), the others are
    r = run.ibus("publish", "--nats-url", procs.url, "--raw", "--subject",
                 "ibus.markers.orders.0", "--quiet", "not a record", check=False)
    assert r.returncode == 0, r.stderr
    run.start("d", lease="15s")  # the default: members read every second, leases renewed every 5 s
    wait_for("d takes the readable partitions", lambda: len(run.owned("d")) == N - 1, 30)
    wait_for("d names the partition it cannot take", lambda: any(
        rec.get("msg", "").startswith("cannot take a partition") and rec.get("partition") == 0
        for rec in run.log_records("d")), 30)
    assert 0 not in run.owned("d")
    time.sleep(3.5)  # three more ticks between two renewals: each partition taken once
    taken = [r["partition"] for r in run.log_records("d") if r.get("msg") == "partition taken"]
    assert sorted(taken) == list(range(1, N)), f"partitions taken again: {sorted(taken)}"
    assert procs.stop(run.hosts["d"]) == 0
    refresh(run, rng)


def refresh(run, rng):
    """A marker log whose records live 4 s: each partition is read again
    from it once they are gone, so its markers leave the owner's memory
    (a long-lived owner's table would otherwise grow with every marker)."""
    audit = os.path.join(run.tmp, "aged-calls.txt")
    p = run.procs.spawn([
        run.args.ibus, "run", "--nats-url", run.procs.url, "--create", "--stream", "AGED",
        "--stream-subjects", "aged.p.>", "--subject", "aged.p", "--durable", "aged",
        "--partitions", str(N), "--partition-lease", "3s", "--stream-max-age", "4s",
        "--plugin", run.args.plugin, "--plugin-config", f"flaky=fraction=0,file={audit}",
        "--log-format", "json"], "aged")
    wait_for("aged owns every partition", lambda: len(run.owned("aged")) == N, 30)
    events = keyed_events(rng, [f"k-{i}" for i in range(16)], 2)
    path = os.path.join(run.tmp, "aged.jsonl")
    with open(path, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    with open(path) as f:
        r = subprocess.run([run.args.ibus, "publish", "--nats-url", run.procs.url, "--subject",
                            "aged.p", "--partitions", str(N), "--quiet"], stdin=f, cwd=run.tmp,
                           capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    def handled():
        with open(audit) as f:
            return [ln.split()[1] for ln in f if ln.strip()]
    wait_for("the aged events handled", lambda: os.path.exists(audit) and
             {norm(e["id"]) for e in events} <= {norm(i) for i in handled()}, 30)
    before = [r for r in run.log_records("aged") if r.get("msg") == "partition taken"]
    assert all(r["markers"] == 0 for r in before)

    def read_again():
        """Partitions taken again after a refresh, with their markers."""
        recs, out, refreshed = run.log_records("aged"), [], set()
        for r in recs:
            if r.get("msg", "").startswith("partition read again"):
                refreshed.add(r["partition"])
            elif r.get("msg") == "partition taken" and r["partition"] in refreshed:
                out.append(r)
        return out
    again = wait_for("partitions read again after their records expired",
                     lambda: len({r["partition"] for r in read_again()}) == N and read_again(), 40)
    # the records of the first events are gone: their markers too
    assert all(r["markers"] == 0 for r in again), again
    # and the owner goes on: a new event is handled once
    r = run.ibus("publish", "--nats-url", run.procs.url, "--subject", "aged.p", "--partitions",
                 str(N), "--type", "order.created", "--quiet", "{}", check=False)
    assert r.returncode == 0, r.stderr
    wait_for("a new event after the refresh", lambda: len(handled()) == len(events) + 1, 30)
    assert run.procs.stop(p) == 0
    log(f"records of 4 s: every partition read again, {len(again)} takes, markers 0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--nats-server", required=True)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="it_partitions.")
    run = Run(args, tmp)
    ok = False
    try:
        scenario(run, random.Random(args.seed))
        ok = True
    finally:
        run.procs.stop_all()
        if not ok:
            run.procs.show_logs()
    log("ok")


if __name__ == "__main__":
    main()

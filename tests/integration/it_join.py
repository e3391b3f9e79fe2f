#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Processes that join a busy marker file take part (issue 21).

One nats-server, a backlog of events, one `ibus run` on a SQLite file; once
it is busy, more processes start on the same durable and file, the way a
user scales out. Asserts that:
  - every joiner handles events, and its first one soon after its start
    (the exit summary's first_handled_ms; the bound is loose so a loaded
    machine passes, the figure is printed);
  - every process exits 0 on --idle-exit once the backlog is gone;
  - every event ran exactly once (the audit plugin's side-effect log);
  - the WAL stayed bounded (sampled while they run).
With --churn (the chaos label) processes are also stopped every few seconds,
by SIGTERM and by kill -9, and started again, over a seeded schedule; lost
events must be 0 and repeated effects at most one batch per kill -9.
Every process is stopped by its PID, also on failure; loopback only.
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
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_netutil import free_port, tcp_open  # noqa: E402

WAL_BOUND = 96 * 1024 * 1024  # the RESTART bound (64 MiB) + transactions, with room


def log(msg):
    print(f"it_join: {msg}", flush=True)




class Host:
    def __init__(self, name, proc):
        self.name, self.proc, self.started = name, proc, time.monotonic()


class Run:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.db = os.path.join(tmp, "m.db")
        self.audit = os.path.join(tmp, "audit.log")
        self.summary = os.path.join(tmp, "summary.jsonl")
        self.others = []
        self.hosts = []
        self.count = 0
        self.wal_peak = 0

    def spawn(self, argv, name):
        out = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.tmp)
        out.close()
        return p

    def start_server(self):
        port = free_port()
        self.others.append(self.spawn([self.args.nats_server, "-js", "-a", "127.0.0.1", "-p",
                                       str(port), "-sd", os.path.join(self.tmp, "js")], "nats"))
        end = time.monotonic() + 10
        while not tcp_open(port):
            assert time.monotonic() < end, "nats-server did not start"
            time.sleep(0.1)
        self.url = f"nats://127.0.0.1:{port}"

    def ibus(self, idle):
        return [self.args.ibus, "run", "--nats-url", self.url, "--create", "--durable", "ibus",
                "--plugin", self.args.plugin_audit, "--plugin-config", "audit=file=" + self.audit,
                "--recorder", "sqlite:" + self.db, "--idle-exit", idle, "--ack-wait", "5s",
                "--log-format", "json", "--summary-file", self.summary]

    def start_host(self, idle="3s"):
        self.count += 1
        h = Host(f"ibus-{self.count}", self.spawn(self.ibus(idle), f"ibus-{self.count}"))
        self.hosts.append(h)
        return h

    def publish(self, ids):
        # the stream and the durable exist before the backlog arrives
        subprocess.run(self.ibus("1s")[:-2] + ["--recorder", "memory:"], capture_output=True,
                       timeout=60)
        path = os.path.join(self.tmp, "events.jsonl")
        with open(path, "w") as f:
            for i in ids:
                f.write(json.dumps({"type": "order.created", "payload": "x" * 100, "id": i}))
                f.write("\n")
        with open(path) as stdin:
            r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.url, "--prefix",
                                "events"], stdin=stdin, capture_output=True, text=True,
                               timeout=300)
        assert r.returncode == 0, f"publish failed: {r.stderr}"

    def handled(self):
        if not os.path.exists(self.audit):
            return []
        with open(self.audit) as f:
            return [line.split()[1] for line in f if line.strip()]

    def sample_wal(self):
        try:
            self.wal_peak = max(self.wal_peak, os.path.getsize(self.db + "-wal"))
        except OSError:
            pass

    def summaries(self):
        if not os.path.exists(self.summary):
            return []
        with open(self.summary) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop_all(self):
        for p in [h.proc for h in self.hosts] + self.others:
            if p.poll() is None:
                p.kill()
                p.wait()

    def show_logs(self):
        for h in self.hosts[-4:]:
            with open(os.path.join(self.tmp, h.name + ".log"), errors="replace") as f:
                sys.stdout.write(f"--- {h.name}.log (tail)\n{f.read()[-2000:]}\n")


def wait_exits(run, hosts, timeout):
    end = time.monotonic() + timeout
    while any(h.proc.poll() is None for h in hosts):
        run.sample_wal()
        assert time.monotonic() < end, (
            "still running after the backlog: " +
            ", ".join(h.name for h in hosts if h.proc.poll() is None))
        time.sleep(0.2)


def join(run, ids, joiners):
    first = run.start_host()
    while len(run.handled()) < len(ids) // 10:
        assert first.proc.poll() is None, f"{first.name} exited with {first.proc.returncode}"
        run.sample_wal()
        time.sleep(0.05)
    for _ in range(joiners):
        run.start_host()
    wait_exits(run, run.hosts, run.args.timeout)


def churn(run, ids, rng):
    """Keeps 3 to 5 processes, stopping one every 1-3 s (a third by kill -9)."""
    kills = 0
    for _ in range(3):
        run.start_host(idle="4s")
    end = time.monotonic() + run.args.timeout
    while len(set(run.handled())) < len(ids):
        assert time.monotonic() < end, f"handled {len(set(run.handled()))} of {len(ids)}"
        time.sleep(rng.uniform(1.0, 3.0))
        run.sample_wal()
        alive = [h for h in run.hosts if h.proc.poll() is None]
        if len(alive) > 3 or (alive and rng.random() < 0.7):
            victim = rng.choice(alive)
            if rng.random() < 0.35:
                victim.proc.kill()
                kills += 1
            else:
                victim.proc.send_signal(signal.SIGTERM)
            victim.proc.wait()
        if len([h for h in run.hosts if h.proc.poll() is None]) < 5:
            run.start_host(idle="4s")
    wait_exits(run, run.hosts, 120)
    return kills


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin-audit", required=True)
    ap.add_argument("--nats-server", required=True)
    ap.add_argument("--events", type=int, default=60000)
    ap.add_argument("--joiners", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--first-bound-ms", type=int, default=5000)
    ap.add_argument("--churn", action="store_true")
    ap.add_argument("--seeds", default="1")
    args = ap.parse_args()
    args.ibus, args.plugin_audit = os.path.abspath(args.ibus), os.path.abspath(args.plugin_audit)
    failed = 0
    for seed in [int(s) for s in args.seeds.split(",")]:
        tmp = tempfile.mkdtemp(prefix="ib-join-")
        run = Run(args, tmp)
        rng = random.Random(seed)
        try:
            run.start_server()
            ids = [uuid.UUID(int=rng.getrandbits(128), version=4).hex for _ in range(args.events)]
            run.publish(ids)
            t0 = time.monotonic()
            kills = churn(run, ids, rng) if args.churn else (join(run, ids, args.joiners) or 0)
            check(run, ids, kills, seed, time.monotonic() - t0)
            subprocess.run(["rm", "-rf", tmp])
        except AssertionError as e:
            log(f"seed {seed} FAILED: {e} (kept {tmp})")
            run.show_logs()
            failed += 1
        finally:
            run.stop_all()
    return 1 if failed else 0


def check(run, ids, kills, seed, took):
    handled = run.handled()
    lost = set(ids) - set(handled)
    repeats = len(handled) - len(set(handled))
    sums = run.summaries()
    worst_first = max((s.get("first_handled_ms", -1) for s in sums), default=-1)
    worst_lock = max((s.get("lock_wait_max_ms", 0) for s in sums), default=0)
    dead = sum(s.get("dead_lettered", 0) for s in sums)
    log(f"seed {seed}: {len(ids)} events, {len(run.hosts)} processes, {kills} kill -9, "
        f"{took:.1f} s: lost {len(lost)}, repeated {repeats}, dead-lettered {dead}, "
        f"longest start to first handled {worst_first} ms, longest lock wait {worst_lock} ms, "
        f"peak WAL {run.wal_peak / 1048576:.1f} MiB")
    assert not lost, f"{len(lost)} events never ran"
    assert dead == 0, f"{dead} valid events dead-lettered"
    assert repeats <= 64 * kills, f"{repeats} repeated effects for {kills} kill -9"
    assert run.wal_peak <= WAL_BOUND, f"the WAL reached {run.wal_peak} bytes"
    clean = [s for s in sums if s.get("exit") is not None]
    assert all(s["exit"] == 0 for s in clean), "a process exited non-zero"
    if not run.args.churn:
        assert len(sums) == len(run.hosts), "a process wrote no summary"
        for s in sums:
            assert s.get("handled", 0) > 0, f"process {s.get('pid')} handled nothing"
            assert 0 <= s["first_handled_ms"] <= run.args.first_bound_ms, (
                f"process {s.get('pid')} took {s['first_handled_ms']} ms to its first event")


if __name__ == "__main__":
    sys.exit(main())

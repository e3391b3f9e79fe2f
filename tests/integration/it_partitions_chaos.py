#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Chaos for a partitioned consumer (issue 47): the promise under kills,
rebalances, a server restart, a pause past a lease and a poison event.

Per seed: one nats-server (loopback, free port, its own store), a
backlog of numbered events under 40 keys published in chunks while
three `ibus run --partitions 8` processes work (the scripted test plugin,
every call sleeping a few ms), and a seeded schedule of actions between
the chunks:
  kill      kill -9 of a random process, started again at once
  join      a fourth process joins (partitions move to it)
  leave     a process stops with SIGTERM (its partitions are handed over)
  restart   the nats-server is killed and started again on its store;
            with --cluster (three nodes, every stream and bucket with 3
            replicas) one node, picked at random, is killed with kill -9
            while the processes work, and started again 1-3 s later
  pause     a process is stopped with SIGSTOP past its lease, then
            continued
With --poison one event's handler aborts its process; a supervisor loop
starts every process that exited again.

Counted at the end, once every valid event was handled:
  lost          valid events never handled: must be 0
  dead-lettered valid events dead-lettered: must be 0 (the poison one is
                dead-lettered alone after --max-deliver crashes)
  repeats       handler calls of events already handled, per action that
                can cause them (kill, restart, pause, crash); with the
                calls the paused process made after it was continued
  out of order  events of a key handled after a later event of that key
                (the first call of each counts): must be 0
Every process is stopped by its PID; loopback only.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_harness import Procs, wait_for  # noqa: E402
from it_netutil import tcp_open  # noqa: E402

N = 8
BASE = "orders.p"
LEASE_MS = 3000


def log(msg):
    print(f"it_partitions_chaos: {msg}", flush=True)


class Chaos:
    def __init__(self, args, seed):
        self.args, self.seed = args, seed
        self.rng = random.Random(seed)
        self.tmp = tempfile.mkdtemp(prefix=f"it_partitions_chaos.{seed}.")
        self.procs = Procs(self.tmp)
        self.calls = os.path.join(self.tmp, "calls.log")
        self.live = {}  # name -> Popen
        self.made = 0
        self.paused_pid = None
        self.continued_at_line = None
        self.counts = {"kill": 0, "join": 0, "leave": 0, "restart": 0, "pause": 0}

    # --- processes ------------------------------------------------------
    def start(self):
        self.made += 1
        name = f"p{self.made}"
        self.live[name] = self.procs.spawn([
            self.args.ibus, "run", "--nats-url", self.procs.url, "--create",
            "--stream", "ORDERS", "--stream-subjects", BASE + ".>", "--subject", BASE,
            "--durable", "orders", "--partitions", str(N),
            "--partition-lease", f"{LEASE_MS}ms", "--ack-wait", "5s", "--max-deliver", "4",
            "--retry-delay", "200ms", "--concurrency", str(self.args.concurrency),
            "--plugin", self.args.plugin, "--plugin-config", f"scripted=file={self.calls}",
            "--log-format", "json", "--connect-timeout", "0",
            *(["--stream-replicas", "3"] if self.args.cluster else [])], name)
        log(f"{time.strftime('%H:%M:%S')} started {name} (pid {self.live[name].pid})")
        return name

    def supervise(self):
        """Starts again every process that exited (a crash, a kill)."""
        for name, p in list(self.live.items()):
            if p.poll() is not None:
                del self.live[name]
                self.start()

    def restart_server(self):
        nats = self.procs.procs[0]
        nats.kill()
        nats.wait()
        self.procs.procs[0] = self.procs.spawn(
            [self.args.nats_server, "-js", "-a", "127.0.0.1", "-p", str(self.procs.port), "-sd",
             os.path.join(self.tmp, "js")], "nats-again")
        wait_for("nats-server again", lambda: tcp_open(self.procs.port), 20)
        wait_for("JetStream again", self.jetstream_ready, 30)

    def running(self):
        """The live processes that got as far as consuming."""
        def consuming(name):
            with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
                return '"msg":"running"' in f.read()
        return [name for name in sorted(self.live) if consuming(name)]

    # --- what happened ----------------------------------------------------
    def lines(self):
        """Calls of the plugin's handler "scripted" (its handler "second"
        runs beside it on every event and is left out)."""
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as f:
            return [p for p in (ln.split() for ln in f)
                    if len(p) >= 6 and p[0].endswith("/scripted/scripted")]

    def dead_lettered(self):
        ids = []
        for name in os.listdir(self.tmp):
            if not name.endswith(".log") or name == "calls.log":
                continue
            with open(os.path.join(self.tmp, name), errors="replace") as f:
                for ln in f:
                    if '"dead-lettered"' in ln:
                        try:
                            ids.append(norm(json.loads(ln).get("event_id", "")))
                        except ValueError:
                            pass
        return ids

    # --- the run ----------------------------------------------------------
    def publish(self, events):
        path = os.path.join(self.tmp, "chunk.jsonl")
        with open(path, "w") as f:
            for e in events:
                f.write(json.dumps(e) + "\n")
        # A chunk is published once, whole: a producer that publishes some
        # events again after a failure stores them after later ones, and
        # the order measured here is the order of publication.
        # On the cluster a stream may be electing a leader (a node was
        # killed): a chunk none of which was stored is published again.
        deadline = time.monotonic() + 60
        while True:
            wait_for("JetStream", self.jetstream_ready, 60)
            with open(path) as f:
                r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.procs.url,
                                    "--subject", BASE, "--partitions", str(N), "--quiet"],
                                   stdin=f, cwd=self.tmp, capture_output=True, text=True)
            if r.returncode == 0 or "nothing was stored" not in r.stderr or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert r.returncode == 0, f"publish failed: {r.stderr}"

    def jetstream_ready(self):
        """After a restart: true once a publish to the stream is stored."""
        r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.procs.url,
                            "--subject", "orders.p.0.probe", "--type", "test.probe", "--quiet",
                            "{}"], cwd=self.tmp, capture_output=True, text=True)
        return r.returncode == 0

    def act(self, action):
        self.counts[action] += 1
        log(f"{time.strftime('%H:%M:%S')} {action} (live: {' '.join(sorted(self.live))})")
        servers = [n["proc"] for n in self.procs.nodes] if self.args.cluster else \
            [self.procs.procs[0]]
        assert all(p.poll() is None for p in servers), "a nats-server died"
        if action == "kill":
            name = self.rng.choice(sorted(self.live))
            self.live[name].send_signal(signal.SIGKILL)
            self.live[name].wait()
        elif action == "join":
            self.start()
        elif action == "leave" and len(self.running()) > 1:
            # one that runs: a process stopped while it starts exits 1 by
            # design ("stopped by a signal before consuming anything")
            name = self.rng.choice(self.running())
            p = self.live.pop(name)
            t0 = time.monotonic()
            code = self.procs.stop(p, timeout=60)
            log(f"{name} stopped with {code} after {time.monotonic() - t0:.1f} s")
            # the poison event's handler may abort it first: a crash, which
            # the figures count from the calls
            crashed = self.args.poison and code == -signal.SIGABRT
            assert code == 0 or crashed, f"{name} did not stop cleanly"
        elif action == "restart" and self.args.cluster:
            node = self.rng.randrange(len(self.procs.nodes))
            self.procs.kill_node(node)
            log(f"{time.strftime('%H:%M:%S')} killed node n{node}")
            deadline = time.monotonic() + self.rng.uniform(1.0, 3.0)
            while time.monotonic() < deadline:
                self.supervise()
                time.sleep(0.05)
            self.procs.restart_node(node)
            wait_for("JetStream again", self.jetstream_ready, 60)
        elif action == "restart":
            self.restart_server()
        elif action == "pause":
            name = self.rng.choice(sorted(self.live))
            p = self.live[name]
            p.send_signal(signal.SIGSTOP)
            time.sleep(2 * LEASE_MS / 1000)
            self.continued_at_line = len(self.lines())
            self.paused_pid = str(p.pid)
            p.send_signal(signal.SIGCONT)
        self.supervise()
        while len(self.live) < 2:
            self.start()

    def run(self):
        if self.args.cluster:
            self.procs.start_cluster(self.args.nats_server)
        else:
            self.procs.start_nats(self.args.nats_server)
        for _ in range(3):
            self.start()
        wait_for("the event stream", lambda: self.supervise() or self.jetstream_ready(), 120)
        keys = [f"account-{i}" for i in range(40)]
        numbered = {k: 0 for k in keys}
        events, want, poison = [], set(), None
        schedule = (["kill"] * self.args.kills + ["join", "leave"] * self.args.rebalances +
                    ["restart"] * self.args.restarts + ["pause"] * self.args.pauses)
        self.rng.shuffle(schedule)
        for step in range(len(schedule) + 1):
            chunk = []
            for _ in range(self.args.chunk):
                k = self.rng.choice(keys)
                numbered[k] += 1
                e = {"type": "test.scripted", "id": str(uuid.uuid4()), "partition_key": k,
                     "payload": f"sleep:{self.args.sleep_ms}", "n": numbered[k]}
                chunk.append(e)
            if step == 1 and self.args.poison:
                poison = str(uuid.uuid4())
                chunk.append({"type": "test.scripted", "id": poison, "partition_key": "poison",
                              "payload": "crash", "n": 1})
            self.publish([{x: e[x] for x in ("type", "id", "partition_key", "payload")}
                          for e in chunk])
            events += [e for e in chunk if e["id"] != poison]
            want |= {norm(e["id"]) for e in chunk if e["id"] != poison}
            if step < len(schedule):
                deadline = time.monotonic() + self.rng.uniform(0.5, 2.0)
                while time.monotonic() < deadline:
                    self.supervise()
                    time.sleep(0.05)
                self.act(schedule[step])

        def done():
            self.supervise()
            return want <= {norm(ln[1]) for ln in self.lines() if ln[4] == "ok"}
        wait_for("every valid event handled", done, self.args.settle_s)
        if poison is not None:
            wait_for("the poison event dead-lettered",
                     lambda: self.supervise() or norm(poison) in self.dead_lettered(), 120)
        time.sleep(2.0)
        self.supervise()
        return self.figures(events, want, poison)

    def figures(self, events, want, poison):
        lines = self.lines()
        ok = [ln for ln in lines if ln[4] == "ok"]
        handled = {norm(ln[1]) for ln in ok}
        first, seen, where = [], set(), {}
        for at, ln in enumerate(ok):
            i = norm(ln[1])
            if i not in seen:
                seen.add(i)
                first.append(i)
                where[i] = f"call {at} pid {ln[5]} delivery {ln[3]}"
        order = {norm(e["id"]): (e["partition_key"], e["n"]) for e in events}
        last, last_id, out_of_order = {}, {}, 0
        for i in first:
            if i not in order:
                continue
            k, n = order[i]
            if n < last.get(k, 0):
                out_of_order += 1
                if out_of_order <= 3:
                    log(f"out of order: {k} #{n} ({where[i]}) after #{last[k]} "
                        f"({where[last_id[k]]})")
            if n > last.get(k, 0):
                last[k], last_id[k] = n, i
        dead = self.dead_lettered()
        paused_twice = 0
        if self.paused_pid is not None:
            before = {norm(ln[1]) for ln in lines[:self.continued_at_line] if ln[4] == "ok"}
            after = [ln for ln in lines[self.continued_at_line:] if ln[5] == self.paused_pid]
            others = {norm(ln[1]) for ln in ok if ln[5] != self.paused_pid}
            paused_twice = sum(1 for ln in after if norm(ln[1]) in others | before)
        crashes = sum(1 for ln in lines if ln[4] == "crash")
        repeats = len(ok) - len(handled)
        causes = self.counts["kill"] + self.counts["restart"] + self.counts["pause"] + crashes
        return {
            "seed": self.seed, "events": len(want), "lost": len(want - handled),
            "valid_dead_lettered": sum(1 for d in dead if d != norm(poison or "")),
            "poison_dead_lettered": poison is not None and norm(poison) in dead,
            "poison_dead_letters": sum(1 for d in dead if poison is not None and d == norm(poison)),
            "crashes": crashes, "repeats": repeats,
            "repeats_per_cause": round(repeats / causes, 2) if causes else 0.0,
            "paused_ran_twice": paused_twice, "out_of_order": out_of_order,
            **{k + "s": v for k, v in self.counts.items()},
        }


def norm(i):
    return i.replace("-", "").lower()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin", required=True, help="the scripted test plugin")
    ap.add_argument("--nats-server", required=True)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--rebalances", type=int, default=3)
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--pauses", type=int, default=1)
    ap.add_argument("--poison", action="store_true")
    ap.add_argument("--chunk", type=int, default=400)
    ap.add_argument("--sleep-ms", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--settle-s", type=int, default=180)
    ap.add_argument("--cluster", action="store_true",
                    help="three nodes, 3 replicas; a restart kills one node")
    ap.add_argument("--max-repeats-per-cause", type=float, default=4.0)
    args = ap.parse_args()
    failed = False
    for seed in [int(s) for s in args.seeds.split(",")]:
        c = Chaos(args, seed)
        ok = False
        try:
            f = c.run()
            log(json.dumps(f))
            assert f["lost"] == 0, "lost events"
            assert f["valid_dead_lettered"] == 0, "valid events dead-lettered"
            if args.concurrency == 1:  # calls side by side keep no order
                assert f["out_of_order"] == 0, "events out of their key's order"
            assert f["repeats_per_cause"] <= args.max_repeats_per_cause, "too many repeats"
            assert f["paused_ran_twice"] <= args.concurrency, "a paused owner ran lost calls"
            if args.poison:
                assert f["poison_dead_lettered"], "the poison event was not dead-lettered"
            ok = True
        finally:
            c.procs.stop_all()
            if not ok:
                c.procs.show_logs()
                failed = True
            else:
                shutil.rmtree(c.tmp, ignore_errors=True)
    log("ok" if not failed else "FAILED")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

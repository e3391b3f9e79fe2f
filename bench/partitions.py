#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A partitioned consumer beside the bare consumer and kv:, in one run
(issue 47's goals table, the rows one server can measure).

Starts a nats-server (loopback, free port, temporary store), publishes a
fresh stream of --events events for each row, and measures:

  bare        the bare nats.c consumer (bench_bare) on an unpartitioned stream,
              first and again last: the better of the two is the baseline
  kv one      one `ibus run` on a kv: bucket (the fleet-kv overlay)
  part one    one `ibus run --partitions N` (the partition log)
  part three  three `ibus run --partitions N`, started together
  part join   one busy process and two joining 1 s later: the time from a
              joiner's exec to its first handled event (its log)
With --cluster, then on a 3-node cluster (every stream and bucket with 3
replicas):
  bare R3     the bare consumer on a 3-replica stream
  part R3     three `ibus run --partitions N` together

A rate is the stream's events over the time from the first exec to the
last ack (the ack floors' times, read with `ibus status --json`, the
latest over every partition's durable), so start-up and the taking of
partitions count. Also printed: the server's resident memory before and
after the partitioned rows, per marker written (the events' own stream
grows in it too: an upper bound), and the marker log's bytes on disk per
marker. Ratios are against the bare consumer of the
same run.

  bench/partitions.py --ibus build/plugin/cli/ibus \\
      --plugin build/bench/consumer/bench_noop.so \\
      --bare build/bench/consumer/bench_bare --nats-server $(which nats-server)
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from it_harness import Procs  # noqa: E402

TYPE = "bench.event"


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Bench:
    def __init__(self, a, tmp):
        self.a, self.tmp = a, tmp
        self.procs = Procs(tmp)
        self.n = 0
        self.replicas = 1

    def ibus(self, *argv, **kw):
        return subprocess.run([self.a.ibus, *argv], cwd=self.tmp, check=True,
                              capture_output=True, text=True, **kw)

    def status(self, stream, durable):
        """The consumer's part of `ibus status --json` (asked again while the
        server is too busy to answer in time)."""
        for _ in range(50):
            r = subprocess.run([self.a.ibus, "status", "--json", "--nats-url", self.procs.url,
                                "--stream", stream, "--durable", durable, "--recorder",
                                "memory:"], cwd=self.tmp, capture_output=True, text=True)
            try:
                return json.loads(r.stdout)["consumer"]
            except (ValueError, KeyError):
                time.sleep(0.1)
        sys.exit(f"partitions: ibus status fails: {r.stderr}")

    def spawn(self, argv):
        self.n += 1
        return self.procs.spawn(argv, f"c{self.n}"), f"c{self.n}"

    def partitions_idle(self, stream, base):
        """True once every partition's durable exists and has nothing
        pending or unacked: one `ibus status --partitions` process."""
        r = subprocess.run([self.a.ibus, "status", "--json", "--nats-url", self.procs.url,
                            "--stream", stream, "--durable", stream.lower(), "--partitions",
                            str(self.a.partitions), "--subject", base], cwd=self.tmp,
                           capture_output=True, text=True)
        try:
            parts = json.loads(r.stdout)["partitioned"]
        except (ValueError, KeyError, TypeError):
            return False
        return parts.get("lag") == 0 and all(p.get("durable_exists")
                                             for p in parts.get("partitions", []))

    def done_at(self, stream, durables, events, base=None):
        """Waits until the durables together acked `events`; the last ack's
        time (the server's). Polls twice a second with one status process:
        a status process per durable ten times a second (as this bench first
        did) took CPU from the consumer it measured."""
        while True:
            time.sleep(0.5)
            if base is not None and not self.partitions_idle(stream, base):
                continue
            cs = [self.status(stream, d) for d in durables]
            pending = sum(c.get("pending", 0) + c.get("ack_pending", 0) for c in cs)
            delivered = sum(1 for c in cs if c.get("ack_floor_time"))
            if pending == 0 and delivered > 0:
                return max(parse_time(c["ack_floor_time"]) for c in cs if c.get("ack_floor_time"))

    def run_args(self, stream, durable):
        return [self.a.ibus, "run", "--nats-url", self.procs.url, "--stream", stream,
                "--durable", durable, "--plugin", self.a.plugin, "--log-level", "info",
                "--log-format", "json"]

    def bare_row(self, stream="BARE"):
        self.ibus("run", "--nats-url", self.procs.url, "--create", "--stream", stream,
                  "--stream-subjects", stream.lower() + ".>", "--durable", "bare", "--recorder",
                  "memory:",
                  "--plugin", self.a.plugin, "--idle-exit", "300ms", "--stream-replicas",
                  str(self.replicas))
        self.ibus("publish", "--nats-url", self.procs.url, "--count", str(self.a.events),
                  "--prefix", stream.lower(), "--type", TYPE, "--quiet")
        t0 = time.time()
        p, _ = self.spawn([self.a.bare, "--url", self.procs.url, "--stream", stream,
                           "--durable", "bare"])
        end = self.done_at(stream, ["bare"], self.a.events)
        self.procs.stop(p)
        return self.a.events / (end - t0)

    def kv_row(self):
        args = self.run_args("KVS", "kvd") + ["--recorder", "kv:bench?create=1"]
        self.ibus(*(args[1:] + ["--create", "--stream-subjects", "kvs.>", "--idle-exit",
                                "300ms"]))
        self.ibus("publish", "--nats-url", self.procs.url, "--count", str(self.a.events),
                  "--prefix", "kvs", "--type", TYPE, "--quiet")
        t0 = time.time()
        p, _ = self.spawn(args)
        end = self.done_at("KVS", ["kvd"], self.a.events)
        self.procs.stop(p)
        return self.a.events / (end - t0)

    def part_args(self, stream, base):
        return self.run_args(stream, stream.lower()) + [
            "--subject", base, "--partitions", str(self.a.partitions), "--create",
            "--stream-subjects", base + ".>", "--stream-replicas", str(self.replicas)]

    def part_row(self, stream, processes, join_after=0.0):
        base = stream.lower() + ".p"
        # the stream first (a process that creates it and exits), then the events
        self.ibus(*(self.part_args(stream, base)[1:] + ["--idle-exit", "500ms"]))
        self.ibus("publish", "--nats-url", self.procs.url, "--count", str(self.a.events),
                  "--subject", base, "--partitions", str(self.a.partitions), "--type", TYPE,
                  "--quiet")
        t0 = time.time()
        first, _ = self.spawn(self.part_args(stream, base))
        joiners = []
        if processes > 1:
            time.sleep(join_after)
            joiners = [self.spawn(self.part_args(stream, base)) for _ in range(processes - 1)]
        durables = [f"{stream.lower()}_p{p}" for p in range(self.a.partitions)]
        end = self.done_at(stream, durables, self.a.events, base)
        for p in [first] + [j for j, _ in joiners]:
            self.procs.stop(p)
        firsts = [self.first_handled_ms(name) for _, name in joiners]  # in the exit summary
        return self.a.events / (end - t0), firsts

    def first_handled_ms(self, name):
        """ms from a process's exec to its first handled event (its exit summary)."""
        with open(os.path.join(self.tmp, name + ".log")) as f:
            for line in f:
                if '"stopped"' in line:
                    return json.loads(line).get("first_handled_ms", -1)
        return -1

    def run(self):
        self.procs.start_nats(self.a.nats_server)
        nats_pid = self.procs.procs[0].pid
        try:
            bare = self.bare_row()
            kv = self.kv_row()
            rss0 = rss_kb(nats_pid)
            one, _ = self.part_row("PONE", 1)
            three, _ = self.part_row("PTHREE", 3)
            join, firsts = self.part_row("PJOIN", 3, join_after=1.0)
            rss1 = rss_kb(nats_pid)
            # the bare consumer again, last: the best of its two rows is the
            # baseline (one row of it varied 68,000-145,000 a second in one
            # night on this machine)
            bare = max(bare, self.bare_row("BARE2"))
            markers = 3 * self.a.events
            log_bytes = self.store_bytes("IBUS_MARKERS_")
        finally:
            self.procs.stop_all()
        self.report(bare, kv, one, three, join, firsts, (rss1 - rss0) * 1024 / markers,
                    log_bytes / markers)
        if self.a.cluster:
            self.cluster_rows(bare)

    def cluster_rows(self, bare1):
        """The bare consumer and three partitioned processes on a 3-node
        cluster, every stream and bucket with 3 replicas."""
        self.procs = Procs(self.tmp)
        self.replicas = 3
        try:
            self.procs.start_cluster(self.a.nats_server)
            bare3 = self.bare_row()
            three3, _ = self.part_row("PCLUSTER", 3)
            bare3 = max(bare3, self.bare_row("BARE2"))
        finally:
            self.procs.stop_all()
        print()
        print("3-node cluster, 3 replicas:")
        print()
        print("| row | events/s | vs bare (one server) | vs bare (cluster) |")
        print("|---|---:|---:|---:|")
        for name, rate in (("bare consumer, R3 stream (the better of two)", bare3),
                           ("partitions, three together, R3", three3)):
            print(f"| {name} | {rate:.0f} | {rate / bare1:.2f} | {rate / bare3:.2f} |")

    def store_bytes(self, prefix):
        total = 0
        for root, _, files in os.walk(os.path.join(self.tmp, "js")):
            if prefix in root:
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total

    def report(self, bare, kv, one, three, join, firsts, rss_per, disk_per):
        print(f"{self.a.events} events per row, {self.a.partitions} partitions, "
              f"the no-op plugin, one nats-server (file storage), loopback.")
        print()
        print("| row | events/s | vs bare |")
        print("|---|---:|---:|")
        for name, rate in (("bare consumer (the better of two rows)", bare),
                           ("kv:, one process", kv),
                           ("partitions, one process", one),
                           ("partitions, three together", three),
                           ("partitions, one busy + two joining", join)):
            print(f"| {name} | {rate:.0f} | {rate / bare:.2f} |")
        print()
        print(f"joiners' first handled event after their exec: "
              f"{', '.join(str(f) + ' ms' for f in firsts)}")
        print(f"nats-server resident memory grown over the partitioned rows, per marker "
              f"written: {rss_per:.1f} B (the events' own stream included: an upper bound); "
              f"marker log on disk per marker: {disk_per:.1f} B")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--bare", required=True)
    ap.add_argument("--nats-server", default=shutil.which("nats-server"))
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (its logs)")
    ap.add_argument("--cluster", action="store_true",
                    help="then the bare and three-process rows on a 3-node cluster, 3 replicas")
    a = ap.parse_args()
    a.ibus, a.plugin, a.bare = (os.path.abspath(x) for x in (a.ibus, a.plugin, a.bare))
    tmp = tempfile.mkdtemp(prefix="bench_partitions.")
    try:
        Bench(a, tmp).run()
    finally:
        if a.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

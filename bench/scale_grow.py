#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The marker file at scale, grown the way a user grows it.

Starts a nats-server (loopback, free port, temporary store) and grows one
marker file through `ibus run` at default settings (sqlite:, synchronous=full,
the no-op plugin), a chunk of fresh events at a time, never writing the
B-tree directly. At each size asked for (and at the empty file first) it
measures, on streams published fresh for the purpose:

  bare      the bare nats.c consumer (bench_bare) on a fresh stream
  ibus      `ibus run` on the grown file, on the same stream (its own durable)
  restart   a new `ibus run` on the grown file: exec to its first event acked
  join      one `ibus run` busy on a fresh stream, two more joining it 1 s
            later on the same durable and file: all three together

A rate is the stream's messages over the time from the consumer's exec to
the consumer's last ack (the ack floor's time, read with `ibus status
--json`), so start-up counts. Prints one table; ratios are against the bare
consumer of the same row, and against the empty file's row.

  bench/scale_grow.py --ibus build/plugin/cli/ibus \\
      --plugin build/bench/consumer/bench_noop.so \\
      --bare build/bench/consumer/bench_bare --sizes 2000000,10000000
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

# The integration tests' process harness: a nats-server on a free loopback
# port, processes logging to the work directory, stopped by their PID.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from it_harness import Procs  # noqa: E402

TYPE = "bench.event"


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Scale:
    def __init__(self, a, workdir):
        self.a = a
        self.file = os.path.join(workdir, "markers.db")
        self.procs = Procs(workdir)
        self.markers = 0
        self.grow_seq = 0  # messages published to GROW
        self.spawned = 0

    def start_server(self):
        self.procs.start_nats(self.a.nats_server)
        self.env = dict(os.environ, IB_NATS_URL=self.procs.url)

    def run_args(self, stream, durable, recorder):
        return [self.a.ibus, "run", "--nats-url", self.procs.url, "--stream", stream,
                "--durable", durable,
                "--subject", f"{stream}.>", "--recorder", recorder,
                "--plugin", self.a.plugin, "--log-level", "warn"]

    def create(self, stream, durables):
        """The stream and its durables, through ibus run --create (memory:)."""
        for d in durables:
            subprocess.run(self.run_args(stream, d, "memory:") +
                           ["--create", "--stream-subjects", f"{stream}.>",
                            "--idle-exit", "300ms"],
                           env=self.env, check=True, stdout=subprocess.DEVNULL)

    def publish(self, stream, n):
        subprocess.run([self.a.ibus, "publish", "--count", str(n), "--prefix", stream,
                        "--type", TYPE, "--quiet"], env=self.env, check=True)

    def consumer(self, stream, durable):
        out = subprocess.run([self.a.ibus, "status", "--json", "--stream", stream,
                              "--durable", durable, "--recorder", "memory:"],
                             env=self.env, capture_output=True, text=True)
        return json.loads(out.stdout)["consumer"]

    def wait_done(self, stream, durable, last_seq, procs):
        """Polls until every message of the stream is acked; the last ack's time."""
        while True:
            c = self.consumer(stream, durable)
            if c["ack_floor_seq"] >= last_seq:
                return parse_time(c["ack_floor_time"])
            for p in procs:
                if p.poll() is not None:
                    sys.exit(f"scale_grow: a consumer exited ({p.returncode}) on {stream}")
            time.sleep(0.1)

    def consume(self, stream, durable, last_seq, cmds, join_after=0.0):
        """Runs cmds (the first at once, the rest join_after later) until
        last_seq is acked; seconds from the first exec to the last ack."""
        t0 = time.time()
        procs = [self.spawn(cmds[0])]
        if len(cmds) > 1:
            time.sleep(join_after)
            procs += [self.spawn(c) for c in cmds[1:]]
        end = self.wait_done(stream, durable, last_seq, procs)
        for p in procs:
            self.procs.stop(p, timeout=60)
        return end - t0

    def spawn(self, cmd):
        """A consumer, logging to consumer-N.log in the work directory."""
        self.spawned += 1
        return self.procs.spawn(cmd, f"consumer-{self.spawned}")

    def ibus_on_file(self, stream, durable):
        return self.run_args(stream, durable, f"sqlite:{self.file}")

    def bare(self, stream, durable):
        return [self.a.bare, "--url", self.procs.url, "--stream", stream, "--durable", durable]

    def grow_to(self, size):
        while self.markers < size:
            n = min(self.a.chunk, size - self.markers)
            self.publish("GROW", n)
            self.grow_seq += n
            t = self.consume("GROW", "g", self.grow_seq, [self.ibus_on_file("GROW", "g")])
            self.markers += n
            print(f"scale_grow: grown to {self.markers} markers ({n / t:.0f} events/s "
                  f"through ibus run)", file=sys.stderr, flush=True)

    def measure(self, k):
        n = self.a.fresh
        fresh, join = f"F{k}", f"J{k}"
        self.create(fresh, ["bare", "ib"])
        self.create(join, ["j"])
        self.publish(fresh, n)
        self.publish(join, n)
        bare_s = self.consume(fresh, "bare", n, [self.bare(fresh, "bare")])
        ibus_s = self.consume(fresh, "ib", n, [self.ibus_on_file(fresh, "ib")])
        self.markers += n
        self.publish("GROW", 1)
        self.grow_seq += 1
        restart_s = self.consume("GROW", "g", self.grow_seq, [self.ibus_on_file("GROW", "g")])
        self.markers += 1
        cmd = self.ibus_on_file(join, "j")
        join_s = self.consume(join, "j", n, [cmd, cmd, cmd], join_after=1.0)
        self.markers += n
        return {"bare": n / bare_s, "ibus": n / ibus_s, "restart_ms": restart_s * 1000,
                "join": n / join_s, "bytes": os.path.getsize(self.file)}

    def run(self):
        self.start_server()
        try:
            self.create("GROW", ["g"])
            rows = []
            for k, size in enumerate([0] + self.a.sizes):
                self.grow_to(size)
                markers = self.markers
                rows.append((markers, self.measure(k)))
            self.report(rows)
        finally:
            self.procs.stop_all()

    def report(self, rows):
        empty = rows[0][1]
        print(f"Fresh streams of {self.a.fresh} events; the file grown through ibus run "
              f"(sqlite default, synchronous=full) in chunks of {self.a.chunk}.")
        print()
        print("| markers in the file | bare msg/s | ibus msg/s | ibus / bare | "
              "vs empty file | restart to first ack ms | 1 + 2 joining msg/s | "
              "joining / one | bytes per marker |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        base = empty["ibus"] / empty["bare"]
        for markers, m in rows:
            ratio = m["ibus"] / m["bare"]
            per = m["bytes"] / markers if markers else 0
            print(f"| {markers} | {m['bare']:.0f} | {m['ibus']:.0f} | {ratio:.2f} | "
                  f"{ratio / base:.2f} | {m['restart_ms']:.0f} | {m['join']:.0f} | "
                  f"{m['join'] / m['ibus']:.2f} | {per:.1f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ibus", required=True)
    p.add_argument("--plugin", required=True, help="the no-op plugin (bench_noop.so)")
    p.add_argument("--bare", required=True, help="bench_bare")
    p.add_argument("--nats-server", default="nats-server")
    p.add_argument("--sizes", default="2000000,10000000",
                   help="marker counts to measure at, comma-separated (the empty file too)")
    p.add_argument("--chunk", type=int, default=1000000, help="events per growth step")
    p.add_argument("--fresh", type=int, default=100000, help="events per fresh stream")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = p.parse_args()
    a.sizes = [int(s) for s in a.sizes.split(",") if s]
    # the processes run in the work directory
    for k in ("ibus", "plugin", "bare"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    workdir = tempfile.mkdtemp(prefix="scale_grow.")
    try:
        Scale(a, workdir).run()
    finally:
        if a.keep:
            print(f"scale_grow: kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

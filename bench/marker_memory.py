#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nats-server's resident memory per marker of a partitioned consumer's
marker log, on its own (issue 47's goal: 10 B per marker).

For each size of --markers, on a fresh nats-server (loopback, free port,
temporary store), with nothing else on it:

  up        its resident set (VmRSS) once it answers
  empty restarted  the log stream made, empty (bench_marker_memory
            --markers 0), the server stopped (SIGTERM) and started again
            on that store, --settle seconds after it answers: the
            baseline of the restart below (a server no client has used
            yet holds less); the markers are appended to this server
  empty     the same server once bench_marker_memory --markers 0 has
            connected to it again: the baseline of the appends
  peak      the highest resident set while and after the markers are
            appended (VmHWM, the kernel's high-water mark)
  settled   the resident set --settle seconds after the last append,
            sampled every second (all samples printed)
  past window  with --past-window, again once the stream's duplicate
            window (2 minutes) has passed since the last append: until
            then the server keeps every record's message id in memory
  restart   the server stopped (SIGTERM) and started again on the same
            store, --settle seconds after it answers: what a server that
            loads the log at start holds; per marker against "empty
            restarted"
  replay    then every partition read back as a new owner reads it
            (bench_marker_memory --replay), sampled every second for
            --replay-watch seconds: the highest sample and the last, what
            the server holds once the owners have started; per marker
            against "empty" (a server a client has used)

The markers are appended by bench_marker_memory: batches of --per-record
ids, each batch a CLAIMED and a DONE record (two records, two entries
per marker, as the consumer writes them), spread over --partitions
partitions. Per marker: (resident set - empty) / markers, the store's
bytes on disk (the log stream's directory) and the stream's own bytes.

  bench/marker_memory.py --bench build/bench/consumer/bench_marker_memory \\
      --markers 1000000,4000000
"""
import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from it_harness import Procs  # noqa: E402

DUPLICATE_WINDOW_S = 120  # the stream's Duplicates, server default


def proc_kib(pid, field):
    """A "Vm...:" line of /proc/<pid>/status, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def mib(kib):
    return f"{kib / 1024:.1f}"


class Sampler(threading.Thread):
    """Samples a process's VmRSS every `every` seconds until stopped; the
    highest one seen."""

    def __init__(self, pid, every=0.2):
        super().__init__(daemon=True)
        self.pid, self.every, self.peak = pid, every, 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, proc_kib(self.pid, "VmRSS"))
            self.done.wait(self.every)

    def stop(self):
        self.done.set()
        self.join()
        return self.peak


class Size:
    """One size: a fresh server, the log appended, the server restarted."""

    def __init__(self, a, tmp, markers):
        self.a, self.markers = a, markers
        self.dir = os.path.join(tmp, f"m{markers}")
        os.mkdir(self.dir)
        self.procs = Procs(self.dir)
        self.row = {"markers": markers}

    def bench(self, markers, *more):
        """Runs bench_marker_memory; its line as a dict."""
        r = subprocess.run([self.a.bench, "--url", self.procs.url, "--markers", str(markers),
                            "--partitions", str(self.a.partitions), "--per-record",
                            str(self.a.per_record), *more], cwd=self.dir, capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"marker_memory: bench_marker_memory failed: {r.stderr.strip()}")
        return {k: int(v) for k, v in (w.split("=") for w in r.stdout.split())}

    def start(self):
        self.procs.start_nats(self.a.nats_server)
        self.pid = self.procs.procs[-1].pid

    def settle(self, seconds):
        """VmRSS every second for `seconds`; all of them, in KiB."""
        samples = []
        for _ in range(seconds):
            time.sleep(1)
            samples.append(proc_kib(self.pid, "VmRSS"))
        return samples

    def store_bytes(self):
        """The log stream's files on disk."""
        total = 0
        for root, _, files in os.walk(os.path.join(self.dir, "js")):
            if "IBUS_MARKERS_" in root:
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total

    def append(self):
        r = self.row
        self.start()
        time.sleep(2)
        r["up"] = proc_kib(self.pid, "VmRSS")
        self.bench(0)
        self.procs.stop(self.procs.procs[-1])
        self.start()
        r["empty_restarted"] = self.settle(self.a.settle)[-1]
        self.bench(0)  # the baseline of the appends has seen a client too
        time.sleep(2)
        r["empty"] = proc_kib(self.pid, "VmRSS")
        sampler = Sampler(self.pid)
        sampler.start()
        got = self.bench(self.markers)
        self.appended_at = time.monotonic()
        r["records"], r["append_ms"] = got["records"], got["ms"]
        r["stream_bytes"], r["payload_bytes"] = got["stream_bytes"], got["payload_bytes"]
        r["settle_samples"] = self.settle(self.a.settle)
        r["settled"] = r["settle_samples"][-1]
        r["peak"] = max(sampler.stop(), proc_kib(self.pid, "VmHWM"))
        r["disk"] = self.store_bytes()
        if self.a.past_window:
            time.sleep(max(0.0, self.appended_at + DUPLICATE_WINDOW_S + 5 - time.monotonic()))
            r["past_window"] = proc_kib(self.pid, "VmRSS")

    def restart(self):
        r = self.row
        self.procs.stop(self.procs.procs[-1])
        r["restart_after_s"] = time.monotonic() - self.appended_at
        self.start()
        r["restart_samples"] = self.settle(self.a.settle)
        r["restarted"] = r["restart_samples"][-1]
        got = self.bench(0, "--replay")  # every record is still there
        if (got["stream_msgs"], got["replayed_records"], got["replayed_marked"]) != (
                r["records"], r["records"], self.markers):
            sys.exit(f"marker_memory: {got} after the restart, {r['records']} records of "
                     f"{self.markers} markers appended")
        r["replay_ms"] = got["replay_ms"]
        r["replay_samples"] = self.settle(self.a.replay_watch)
        r["replayed"] = max(r["replay_samples"])
        r["replay_end"] = r["replay_samples"][-1]

    def run(self):
        try:
            self.append()
            self.restart()
        except BaseException:
            self.procs.show_logs()
            raise
        finally:
            self.procs.stop_all()
        return self.row


def per_marker(r, key, base="empty"):
    return f"{(r[key] - r[base]) * 1024 / r['markers']:.1f}"


def report(a, rows):
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{a.partitions} partitions, {a.per_record} markers a batch (a CLAIMED and a DONE "
          f"record each), a fresh nats-server per size, file storage, loopback. RSS in MiB; "
          f"per marker: (RSS - empty) / markers, after a restart against the empty "
          f"stream restarted (no client yet).")
    print()
    head = ["markers", "records", "append s", "RSS up", "RSS empty, restarted",
            "RSS empty stream", "RSS peak", "RSS settled", "per marker"]
    if a.past_window:
        head += ["RSS past window", "per marker"]
    head += ["RSS after restart", "per marker", "RSS after replay", "per marker",
             f"{a.replay_watch} s later", "per marker", "disk per marker",
             "stream bytes per marker"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for r in rows:
        cells = [str(r["markers"]), str(r["records"]), f"{r['append_ms'] / 1000:.1f}",
                 mib(r["up"]), mib(r["empty_restarted"]), mib(r["empty"]), mib(r["peak"]),
                 mib(r["settled"]),
                 per_marker(r, "settled") + " B"]
        if a.past_window:
            cells += [mib(r["past_window"]), per_marker(r, "past_window") + " B"]
        cells += [mib(r["restarted"]),
                  per_marker(r, "restarted", "empty_restarted") + " B",
                  mib(r["replayed"]), per_marker(r, "replayed") + " B",
                  mib(r["replay_end"]), per_marker(r, "replay_end") + " B",
                  f"{r['disk'] / r['markers']:.1f} B",
                  f"{r['stream_bytes'] / r['markers']:.1f} B"]
        print("| " + " | ".join(cells) + " |")
    print()
    for r in rows:
        step = 1 if a.replay_watch <= 20 else 10  # a long watch: every 10th second
        replay = r["replay_samples"][step - 1::step]
        every = "" if step == 1 else f", every {step} s"
        print(f"{r['markers']} markers: payload {r['payload_bytes'] / r['markers']:.1f} B per "
              f"marker; RSS after the appends, every second: "
              f"{', '.join(mib(k) for k in r['settle_samples'])}; after the restart "
              f"({r['restart_after_s']:.0f} s after the last append): "
              f"{', '.join(mib(k) for k in r['restart_samples'])}; replay of every partition "
              f"{r['replay_ms']} ms, then{every}: {', '.join(mib(k) for k in replay)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="bench_marker_memory")
    ap.add_argument("--nats-server", default=shutil.which("nats-server"))
    ap.add_argument("--markers", default="2000000",
                    help="sizes, comma-separated; each on a fresh server")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--per-record", type=int, default=64)
    ap.add_argument("--settle", type=int, default=15, help="seconds sampled after the appends")
    ap.add_argument("--replay-watch", type=int, default=15,
                    help="seconds sampled after the replay")
    ap.add_argument("--past-window", action="store_true",
                    help="also wait out the duplicate window before the restart")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (its logs)")
    a = ap.parse_args()
    a.bench = os.path.abspath(a.bench)
    sizes = [int(s) for s in a.markers.split(",")]
    if not sizes or min(sizes) < 1 or a.settle < 1 or a.replay_watch < 1:
        ap.error("--markers: sizes of 1 or more; --settle, --replay-watch: 1 or more")
    tmp = tempfile.mkdtemp(prefix="bench_marker_memory.")
    try:
        report(a, [Size(a, tmp, n).run() for n in sizes])
    finally:
        if a.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

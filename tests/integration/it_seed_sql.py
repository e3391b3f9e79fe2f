#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The seed's own SQL shares a marker file with running ibus processes (issue 21).

The seed's SqliteIdempotencyRecorder runs three statements on
processed_log(consumer, event_id, ts): CREATE TABLE IF NOT EXISTS, SELECT 1
... WHERE consumer = ? AND event_id = ?, and INSERT OR IGNORE. This test runs
exactly those, with Python's sqlite3 (the system SQLite), against a file that
two live `ibus run` processes use:

  1. the seed creates the file first and marks three ids;
  2. two ibus processes open it (migrating it in place) and keep running;
  3. the seed's statements still work: CREATE is a no-op, SELECT finds its
     own marks, INSERT OR IGNORE marks twenty more ids while ibus runs;
  4. events with all those ids and thirty fresh ones are published: the
     audit handler runs for the thirty fresh ones only, once each;
  5. the seed's SELECT finds every mark ibus made;
  6. a repeated INSERT OR IGNORE is harmless; an id that is no uuid is refused;
  7. a file stamped by a (simulated) newer version stops a running process:
     it claims nothing more, logs why and exits 2 (issue 23, part 4).
Every process is stopped by its PID, also on failure; loopback only.

usage: it_seed_sql.py --ibus EXE --plugin-audit SO --nats-server EXE
"""

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_netutil import free_port, tcp_open  # noqa: E402

CONSUMER = "ibus/audit/audit"
SEED_CREATE = ("CREATE TABLE IF NOT EXISTS processed_log (consumer TEXT NOT NULL, "
               "event_id TEXT NOT NULL, ts REAL NOT NULL, PRIMARY KEY (consumer, event_id))")
SEED_SELECT = "SELECT 1 FROM processed_log WHERE consumer = ? AND event_id = ?"
SEED_INSERT = "INSERT OR IGNORE INTO processed_log (consumer, event_id, ts) VALUES (?, ?, ?)"


def log(msg):
    print(f"it_seed_sql: {msg}", flush=True)




class Processes:
    """Children started by this test, stopped by PID in reverse order."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start(self, name, argv):
        out = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.tmp)
        out.close()
        self.procs.append((name, p))
        return p

    def stop(self, name, p):
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        return p.returncode

    def stop_all(self):
        for name, p in reversed(self.procs):
            self.stop(name, p)

    def show_logs(self):
        for name, _ in self.procs:
            with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
                sys.stdout.write(f"--- {name}.log (tail)\n{f.read()[-3000:]}\n")


def wait_until(what, probe, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if probe():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def seed_connect(path):
    """The seed's connection: Python's defaults, as its recorder opens it."""
    return sqlite3.connect(path, timeout=30)


def seed_mark(db, ids):
    for i in ids:
        db.execute(SEED_INSERT, (CONSUMER, i, time.time()))
    db.commit()


def seed_seen(db, i):
    return db.execute(SEED_SELECT, (CONSUMER, i)).fetchone() is not None


def audit_ids(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split()[1] for line in f if line.strip()]


def run(args, tmp, procs):
    path = os.path.join(tmp, "processed.db")
    seeded = [uuid.uuid4().hex for _ in range(3)]
    live = [uuid.uuid4().hex for _ in range(20)]
    fresh = [uuid.uuid4().hex for _ in range(30)]

    # 1. the seed's file comes first
    db = seed_connect(path)
    db.execute(SEED_CREATE)
    seed_mark(db, seeded)
    db.close()
    os.chmod(path, 0o600)

    port = free_port()
    procs.start("nats-server", [args.nats_server, "-js", "-a", "127.0.0.1", "-p", str(port),
                                "-sd", os.path.join(tmp, "js")])
    wait_until("nats-server", lambda: tcp_open(port), 10)
    url = f"nats://127.0.0.1:{port}"
    audit = os.path.join(tmp, "audit.log")
    hosts = []
    for name in ("ibus-a", "ibus-b"):
        hosts.append((name, procs.start(name, [
            args.ibus, "run", "--nats-url", url, "--create", "--durable", "ibus",
            "--plugin", args.plugin_audit, "--plugin-config", "audit=file=" + audit,
            "--recorder", "sqlite:" + path, "--log-format", "json"])))
        time.sleep(0.5)

    # 2. both opened the file: it speaks version 7 now
    def migrated():
        with sqlite3.connect(path, timeout=30) as c:
            return c.execute("PRAGMA user_version").fetchone()[0] >= 7
    wait_until("the migration", migrated, 20)
    for name, p in hosts:
        assert p.poll() is None, f"{name} exited with {p.returncode}"

    # 3. the seed's statements on the live file
    db = seed_connect(path)
    db.execute(SEED_CREATE)
    for i in seeded:
        assert seed_seen(db, i), f"the seed's own mark {i} is gone after the migration"
    seed_mark(db, live)
    for i in live:
        assert seed_seen(db, i), f"the seed's INSERT OR IGNORE of {i} did not mark it"

    # 4. publish all of them: only the fresh ones run
    events = os.path.join(tmp, "events.jsonl")
    with open(events, "w") as f:
        for i in seeded + live + fresh:
            f.write(json.dumps({"type": "order.created", "payload": "{}", "id": i}) + "\n")
    with open(events) as stdin:
        pub = subprocess.run([args.ibus, "publish", "--nats-url", url, "--prefix", "events"],
                             stdin=stdin, capture_output=True, text=True, timeout=60)
    assert pub.returncode == 0, f"ibus publish failed: {pub.stdout} {pub.stderr}"
    wait_until("the fresh events handled", lambda: len(audit_ids(audit)) >= len(fresh), 60)
    time.sleep(2)  # anything that would run twice has had its chance
    handled = audit_ids(audit)
    assert sorted(handled) == sorted(fresh), (
        f"handled {len(handled)} events, {len(set(handled) & set(seeded + live))} of them "
        f"marked by the seed; expected exactly the {len(fresh)} fresh ones, once each")

    # 5. the seed sees ibus's marks
    for i in fresh:
        assert seed_seen(db, i), f"the seed's SELECT misses ibus's mark of {i}"

    # 6. a repeated mark is harmless; an id that is no uuid is refused
    seed_mark(db, fresh[:5])
    try:
        db.execute(SEED_INSERT, (CONSUMER, "not-a-uuid", time.time()))
        raise AssertionError("an id that is no uuid was accepted")
    except sqlite3.DatabaseError as e:
        assert "uuid" in str(e), f"unexpected error text: {e}"
    db.rollback()
    db.close()

    for name, p in hosts:
        code = procs.stop(name, p)
        assert code == 0, f"{name} exited with {code}"
    log(f"ok: seed marks {len(seeded) + len(live)} dropped, {len(fresh)} handled once")
    newer_version(args, tmp, procs, url, path, audit)


def newer_version(args, tmp, procs, url, path, audit):
    """A newer version migrates the file under a running process (simulated
    by stamping user_version): the process stops claiming, says why, and
    exits 2 so its supervisor does not restart it into the same state."""
    p = procs.start("ibus-old", [
        args.ibus, "run", "--nats-url", url, "--durable", "ibus",
        "--plugin", args.plugin_audit, "--plugin-config", "audit=file=" + audit,
        "--recorder", "sqlite:" + path, "--log-format", "json"])
    time.sleep(1.5)
    assert p.poll() is None, f"ibus-old exited with {p.returncode}"
    with sqlite3.connect(path, timeout=30) as c:
        newer = c.execute("PRAGMA user_version").fetchone()[0] + 1
        c.execute(f"PRAGMA user_version = {newer}")
    before = len(audit_ids(audit))
    event = os.path.join(tmp, "one.jsonl")
    with open(event, "w") as f:
        f.write(json.dumps({"type": "order.created", "payload": "{}"}) + "\n")
    with open(event) as stdin:
        subprocess.run([args.ibus, "publish", "--nats-url", url, "--prefix", "events"],
                       stdin=stdin, capture_output=True, timeout=60)
    try:
        code = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("the process went on after its file was migrated by a newer version")
    assert code == 2, f"exit {code}, expected 2"
    with open(os.path.join(tmp, "ibus-old.log")) as f:
        text = f.read()
    assert f"schema is now version {newer}" in text, "the log does not say why it stopped"
    assert len(audit_ids(audit)) == before, "a handler ran on a file of another schema"
    log("ok: a newer schema stops the running process with exit 2")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin-audit", required=True)
    ap.add_argument("--nats-server", required=True)
    args = ap.parse_args()
    args.ibus, args.plugin_audit = os.path.abspath(args.ibus), os.path.abspath(args.plugin_audit)
    tmp = tempfile.mkdtemp(prefix="ib-seed-sql-")
    procs = Processes(tmp)
    try:
        run(args, tmp, procs)
        ok = True
    except AssertionError as e:
        log(f"FAILED: {e}")
        procs.show_logs()
        ok = False
    finally:
        procs.stop_all()
    if ok and not os.environ.get("IB_IT_KEEP"):
        subprocess.run(["rm", "-rf", tmp])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Rows another tool wrote straight into a marker file never stall prune
or shutdown (issue 44, points 2 and 3).

  1. the seed's table, migrated by `ibus markers stats`; 2,100 rows with a BLOB
     event_id (some with a NUL byte), 2,100 with ids longer than any id
     and alike in their first 200 bytes, and a few of our own shape go
     straight into processed_markers, all older than the cutoff;
  2. `ibus markers prune --force` returns within 30 s and removes them;
  3. the rows are written again, and `ibus run` (whose keeper prunes at
     start) exits 0 within 15 s of SIGTERM.
Every process is stopped by its own handle, also on failure; loopback only.

usage: it_foreign_rows.py --ibus EXE --plugin-audit SO --nats-server EXE
"""

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_procs import show_logs, spawn, start_nats, stop_all, wait_for  # noqa: E402

ROWS = 2100
OLD_TS = 1000000000000  # 2001
SEED_CREATE = ("CREATE TABLE IF NOT EXISTS processed_log (consumer TEXT NOT NULL, "
               "event_id TEXT NOT NULL, ts REAL NOT NULL, PRIMARY KEY (consumer, event_id))")


def log(msg):
    print(f"it_foreign_rows: {msg}", flush=True)


def write_rows(path):
    """Writes the hostile rows as another tool would; returns how many."""
    with sqlite3.connect(path, timeout=30) as db:
        for i in range(ROWS):
            key = b"%032x" % i if i % 7 else b"\x00" + b"%031x" % i
            db.execute("INSERT OR IGNORE INTO processed_markers (cid, event_id, ts) "
                       "VALUES (1, ?, ?)", (key, OLD_TS))
            db.execute("INSERT OR IGNORE INTO processed_markers (cid, event_id, ts) "
                       "VALUES (1, ?, ?)", ("0" * 200 + "%05d" % i, OLD_TS))
        for i in range(10):
            db.execute("INSERT OR IGNORE INTO processed_markers (cid, event_id, ts) "
                       "VALUES (1, ?, ?)", ("%032x" % (i + 1), OLD_TS))
        return db.execute("SELECT count(*) FROM processed_markers").fetchone()[0]


def markers_prune(args, path):
    """`ibus markers prune` on the file: its exit code and output."""
    try:
        r = subprocess.run([args.ibus, "markers", "--recorder", "sqlite:" + path,
                            "--older-than", "1d", "--force", "prune"],
                           capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("ibus markers prune did not return within 30 s")
    return r.returncode, r.stdout + r.stderr


def run(args, tmp, procs):
    path = os.path.join(tmp, "processed.db")
    with sqlite3.connect(path) as db:  # the seed's table, migrated by ibus
        db.execute(SEED_CREATE)
    os.chmod(path, 0o600)
    r = subprocess.run([args.ibus, "markers", "--recorder", "sqlite:" + path, "stats"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"ibus markers stats: {r.stdout} {r.stderr}"

    # 1-2. ibus markers prune returns and removes them
    n = write_rows(path)
    assert n == 2 * ROWS + 10, f"{n} rows written"
    code, out = markers_prune(args, path)
    assert code == 0, f"ibus markers prune exited {code}: {out}"
    assert f"pruned={n}" in out, f"expected pruned={n}: {out}"
    log(f"ok: ibus markers prune removed {n} rows of any shape")

    # 3. ibus run, whose keeper prunes at once, stops on SIGTERM
    n = write_rows(path)
    url = start_nats(procs, tmp, args.nats_server)
    p = spawn(procs, tmp, [
        args.ibus, "run", "--nats-url", url, "--create", "--durable", "ibus",
        "--stream-max-age", "1h", "--plugin", args.plugin_audit, "--plugin-config",
        "audit=file=" + os.path.join(tmp, "audit.log"), "--recorder", "sqlite:" + path,
        "--log-format", "json"], "ibus-run")
    wait_for("ibus run to bind its consumer",
             lambda: "retention follows" in open(os.path.join(tmp, "ibus-run.log")).read()
             or p.poll() is not None, 30)
    assert p.poll() is None, f"ibus run exited with {p.returncode}"
    time.sleep(2)  # the keeper's first pass has begun
    started = time.monotonic()
    os.kill(p.pid, signal.SIGTERM)
    try:
        code = p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        raise AssertionError("ibus run ignored SIGTERM for 15 s while pruning")
    assert code == 0, f"ibus run exited {code} after SIGTERM"
    log(f"ok: ibus run exited 0 {time.monotonic() - started:.1f} s after SIGTERM")
    with sqlite3.connect(path, timeout=30) as db:
        left = db.execute("SELECT count(*) FROM processed_markers").fetchone()[0]
    assert left == 0, f"{left} of {n} old rows left after the keeper's pass"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--plugin-audit", required=True)
    ap.add_argument("--nats-server", required=True)
    args = ap.parse_args()
    args.ibus, args.plugin_audit = os.path.abspath(args.ibus), os.path.abspath(args.plugin_audit)
    tmp = tempfile.mkdtemp(prefix="ib-foreign-rows-")
    procs = []
    try:
        run(args, tmp, procs)
        ok = True
    except AssertionError as e:
        log(f"FAILED: {e}")
        show_logs(tmp)
        ok = False
    finally:
        stop_all(procs)
    if ok and not os.environ.get("IB_IT_KEEP"):
        subprocess.run(["rm", "-rf", tmp])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

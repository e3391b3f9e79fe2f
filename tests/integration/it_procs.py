# SPDX-License-Identifier: Apache-2.0
"""Process helpers shared by the Python integration tests: start a
process with its output in a log file, start a nats-server on a free
loopback port, wait for a condition with a deadline, stop every process a
test started (by its own Popen handle, never by name), and print the tails
of the logs it wrote."""

import os
import subprocess
import sys
import time

from it_netutil import free_port, tcp_open


def spawn(procs, tmp, argv, name, env=None):
    """Starts `argv` in `tmp` with stdout and stderr appended to
    tmp/name.log and `env` added to the environment; remembers it in
    `procs` for stop_all."""
    out = open(os.path.join(tmp, name + ".log"), "ab")
    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
                         env={**os.environ, **(env or {})})
    out.close()
    procs.append(p)
    return p


def start_nats(procs, tmp, nats_server):
    """A nats-server with JetStream on a free loopback port, its store in
    tmp/js; returns its URL once it listens."""
    port = free_port()
    spawn(procs, tmp, [nats_server, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd",
                       os.path.join(tmp, "js")], "nats")
    wait_for("nats-server", lambda: tcp_open(port), 10)
    return f"nats://127.0.0.1:{port}"


def wait_for(what, cond, timeout=30, step=0.05):
    """Polls `cond` until it is true; fails naming `what` after `timeout` s."""
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(step)


def stop_all(procs):
    """Kills and reaps every process of `procs` that still runs."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def show_logs(tmp, tail=4000):
    """Prints the last `tail` characters of every *.log file in `tmp`."""
    for name in sorted(os.listdir(tmp)):
        if name.endswith(".log"):
            with open(os.path.join(tmp, name), errors="replace") as f:
                sys.stdout.write(f"--- {name} (tail)\n{f.read()[-tail:]}\n")

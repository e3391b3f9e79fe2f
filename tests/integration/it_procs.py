"""Process helpers shared by the Python integration tests: wait for a
condition with a deadline, stop every process a test started (by its own
Popen handle, never by name), and print the tails of the logs it wrote."""

import os
import sys
import time


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

# SPDX-License-Identifier: Apache-2.0
"""What the Python integration tests of issue 34 share: processes started
with their output in a log file of the test's directory and stopped by
their PID, a nats-server on a free loopback port, and waiting for a
condition with a deadline. Only 127.0.0.1, ever."""

import os
import shutil
import resource
import signal
import subprocess
import sys
import time
import urllib.request

from it_netutil import free_port, tcp_open


def no_core():
    """For processes a test crashes on purpose: no core file."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Procs:
    """The processes of one test, each logging to <tmp>/<name>.log."""

    def __init__(self, tmp):
        self.tmp, self.procs = tmp, []

    def spawn(self, argv, name):
        out = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.tmp,
                             preexec_fn=no_core)
        out.close()
        self.procs.append(p)
        return p

    def start_nats(self, nats_server):
        """A JetStream nats-server; sets self.port and self.url."""
        self.port = free_port()
        self.spawn([nats_server, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd",
                    os.path.join(self.tmp, "js")], "nats")
        wait_for("nats-server", lambda: tcp_open(self.port), 10)
        self.url = f"nats://127.0.0.1:{self.port}"

    def stop(self, p, timeout=30):
        """SIGTERM, then SIGKILL after `timeout`; the exit status."""
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def show_logs(self):
        for name in sorted(os.listdir(self.tmp)):
            if name.endswith(".log"):
                with open(os.path.join(self.tmp, name), errors="replace") as f:
                    sys.stdout.write(f"--- {name} (tail)\n{f.read()[-4000:]}\n")


def wait_for(what, cond, timeout=60):
    """Polls `cond` until it returns something true, which it returns."""
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def ready(port):
    """/readyz of an ibus run answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def run_steps(name, run, steps):
    """Runs `steps` (functions of `run`) after starting run's nats-server
    (run.args.nats_server); on a failure shows the logs; stops every
    process whatever happens; removes the directory on success. Returns
    the exit status."""

    try:
        run.start_nats(run.args.nats_server)
        for step in steps:
            step(run)
    except BaseException:
        run.show_logs()
        raise
    finally:
        run.stop_all()
    shutil.rmtree(run.tmp, ignore_errors=True)
    print(f"{name}: {len(steps)} passed, 0 failed")
    return 0

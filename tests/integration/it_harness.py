# SPDX-License-Identifier: Apache-2.0
"""What the Python integration tests of issue 34 share: processes started
with their output in a log file of the test's directory and stopped by
their PID, a nats-server on a free loopback port, and waiting for a
condition with a deadline. Only 127.0.0.1, ever."""

import json
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

    def start_cluster(self, nats_server, nodes=3):
        """A cluster of JetStream nats-servers (loopback, free ports, each
        its own store), ready once every node sees a meta leader; sets
        self.url to all the nodes' URLs and self.nodes to their names,
        ports and config files (restart_node starts one again)."""
        ports = [free_port() for _ in range(3 * nodes)]
        self.nodes = []
        routes = "".join(f'    "nats-route://127.0.0.1:{ports[3 * i + 2]}"\n' for i in range(nodes))
        for i in range(nodes):
            name, port, http, route = f"n{i}", ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]
            conf = os.path.join(self.tmp, f"{name}.conf")
            with open(conf, "w") as f:
                f.write(f'server_name: "{name}"\nlisten: "127.0.0.1:{port}"\n'
                        f'http: "127.0.0.1:{http}"\n'
                        f'jetstream {{\n  store_dir: "{os.path.join(self.tmp, name)}"\n}}\n'
                        f'cluster {{\n  name: "it"\n  listen: "127.0.0.1:{route}"\n'
                        f'  routes: [\n{routes}  ]\n}}\n')
            self.nodes.append({"name": name, "port": port, "http": http, "conf": conf,
                               "proc": self.spawn([nats_server, "-c", conf], name)})
        self.nats_server = nats_server
        self.url = ",".join(f"nats://127.0.0.1:{n['port']}" for n in self.nodes)
        for i in range(nodes):
            self.wait_node(i)

    def wait_node(self, i, timeout=60):
        """Until node i answers and sees a JetStream meta leader."""
        node = self.nodes[i]
        wait_for(f"nats-server {node['name']}", lambda: tcp_open(node["port"]), timeout)

        def has_leader():
            try:
                url = f"http://127.0.0.1:{node['http']}/jsz"
                with urllib.request.urlopen(url, timeout=2) as r:
                    return bool(json.loads(r.read()).get("meta_cluster", {}).get("leader"))
            except (OSError, ValueError):
                return False
        wait_for(f"a meta leader seen by {node['name']}", has_leader, timeout)

    def kill_node(self, i):
        """kill -9 of cluster node i."""
        p = self.nodes[i]["proc"]
        p.kill()
        p.wait()

    def restart_node(self, i):
        """Starts cluster node i again on its store and config."""
        node = self.nodes[i]
        node["proc"] = self.spawn([self.nats_server, "-c", node["conf"]], node["name"] + "-again")
        self.wait_node(i)

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


def fnv1a(data):
    """FNV-1a 32 of `data` (bytes): the hash of a key's partition, computed
    here apart from the product's own (core/partition.h)."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


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

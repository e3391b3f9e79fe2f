#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ibus publish's counts and ibus markers lookup --key (issue 45, item 6),
against a real nats-server on a free loopback port.

  counts  with no stream for the subject every publish fails: the summary
          says published=43 failed=43 stored=0 (published = stored +
          failed), stderr says nothing was stored, exit 1; with a stream,
          stored=2 failed=0 and exit 0. Before, the line read
          published=43 ... failed=43 and did not say what was stored.
  keys    events published with --key (and one with --key-namespace) are
          handled by ibus run with the scripted plugin; ibus markers
          lookup --key finds each by the business key, in its namespace,
          as the id publish derived (the one --ids-file wrote); forget
          --key removes it; --key with an ID, with an action that takes no
          event, or with a namespace that is not a UUID is exit 2.
Every process is stopped by its PID, also on failure; loopback only.
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_harness import Procs, run_steps  # noqa: E402

NAMESPACE = "6ba7b8109dad11d180b400c04fd430c8"


def log(msg):
    print(f"it_publish_keys: {msg}", flush=True)


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args
        self.db = os.path.join(tmp, "pk.db")

    def ibus(self, *argv):
        full = [self.args.ibus, *argv]
        return subprocess.run(full, capture_output=True, text=True, timeout=120, cwd=self.tmp)

    def publish(self, *argv):
        return self.ibus("publish", "--nats-url", self.url, "--prefix", "pk", *argv)

    def host(self):
        """ibus run until idle: creates the stream, handles what waits."""
        p = self.spawn([self.args.ibus, "run", "--nats-url", self.url, "--create", "--stream",
                        "PK", "--stream-subjects", "pk.>", "--durable", "pk", "--plugin",
                        self.args.plugin_scripted, "--recorder", "sqlite:" + self.db,
                        "--idle-exit", "1s", "--log-format", "json"], "ibus-run")
        assert p.wait(timeout=120) == 0, "ibus run did not stop cleanly"

    def markers(self, *argv):
        return self.ibus("markers", "--recorder", "sqlite:" + self.db, *argv)


def summary(out):
    line = [x for x in out.splitlines() if x.startswith("published=")]
    assert len(line) == 1, out
    return dict(kv.split("=", 1) for kv in line[0].split())


def counts(run):
    r = run.publish("--type", "test.scripted", "--count", "43", "--ack-timeout", "5s")
    s = summary(r.stdout)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert (s["published"], s["failed"], s["stored"]) == ("43", "43", "0"), s
    assert "nothing was stored" in r.stderr, r.stderr
    run.host()  # makes the stream
    r = run.publish("--type", "test.scripted", "--ids-file", os.path.join(run.tmp, "k7.ids"),
                    "--key", "order-7", "ok", "ok")
    s = summary(r.stdout)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (s["published"], s["unique"], s["failed"], s["stored"]) == ("2", "1", "0", "2"), s
    log("counts: no stream gives failed=43 stored=0 and exit 1; a stream stored=2 exit 0")


def first_id(path):
    with open(path) as f:
        return f.read().split()[0]


def keys(run):
    r = run.publish("--type", "test.scripted", "--ids-file", os.path.join(run.tmp, "k8.ids"),
                    "--key-namespace", NAMESPACE, "--key", "order-8", "ok")
    assert r.returncode == 0, r.stderr
    run.host()
    k7, k8 = first_id(os.path.join(run.tmp, "k7.ids")), first_id(os.path.join(run.tmp, "k8.ids"))
    who = ["--consumer", "pk/scripted/scripted"]

    r = run.markers(*who, "lookup", "--key", "order-7")
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.startswith(f"processed: pk/scripted/scripted {k7} at "), r.stdout
    # the same answer as the id itself
    assert run.markers(*who, "lookup", k7).returncode == 0
    # a key is looked up in its namespace: publish's default unless given
    r = run.markers(*who, "lookup", "--key", "order-8")
    assert r.returncode == 3 and "not processed" in r.stdout, (r.returncode, r.stdout)
    r = run.markers(*who, "lookup", "--key", "order-8", "--key-namespace", NAMESPACE)
    assert r.returncode == 0 and k8 in r.stdout, (r.returncode, r.stdout, r.stderr)
    r = run.markers(*who, "lookup", "--key", "order-9")
    assert r.returncode == 3, (r.returncode, r.stdout)

    r = run.markers(*who, "forget", "--key", "order-7")
    assert r.returncode == 0 and f"forgotten: pk/scripted/scripted {k7}" in r.stdout, r.stdout
    assert run.markers(*who, "lookup", "--key", "order-7").returncode == 3

    for argv, want in (((*who, "lookup", "--key", "order-7", k7), "not both"),
                       (("stats", "--key", "order-7"), "--key does not apply"),
                       ((*who, "lookup", "--key", "order-7", "--key-namespace", "nope"),
                        "--key-namespace: 'nope' is not a UUID")):
        r = run.markers(*argv)
        assert r.returncode == 2 and want in r.stderr, (argv, r.returncode, r.stderr)
    log("keys: lookup --key finds the id publish --key derived, in its namespace; forget "
        "--key; misuse is exit 2")


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--ibus", "--plugin-scripted", "--nats-server"):
        ap.add_argument(opt, required=True)
    args = ap.parse_args()
    args.ibus = os.path.abspath(args.ibus)
    args.plugin_scripted = os.path.abspath(args.plugin_scripted)
    run = Run(args, tempfile.mkdtemp(prefix="ib-publish-keys-"))
    return run_steps("it_publish_keys", run, [counts, keys])


if __name__ == "__main__":
    sys.exit(main())

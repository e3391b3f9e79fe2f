#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Honest endings (issue 45, item 3): a run that stops on --idle-exit
with events it nak'ed and never marked does not exit 0, and ibus status
does not call such a durable healthy.

One durable `en` made by `ibus run --create`, the scripted test plugin
(its handler `scripted` follows the payload, `second` says OK), a SQLite
marker file; --idle-exit 1s and --circuit off throughout (a circuit open
on these RETRYs would bring them back before their delay):
  within   17 events OK and 3 `retry:1` (RETRY on the first delivery)
           with --retry-delay 3s: the retries come back after the idle
           time. The process waits for them (saying so once), marks all
           20 and exits 0; its summary says unmarked 0; status is healthy;
  beyond   5 `retry:1` events with --retry-delay 10m: the process does
           not wait 10 minutes. It exits 1 within seconds of the idle
           time, saying it leaves 5 events unmarked for the next run; its
           summary says unmarked 5. ibus status then names them
           (attention `unfinished`, exit 1), in the text and the JSON.
Every process is stopped by its PID, also on failure; loopback only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_harness import Procs, run_steps  # noqa: E402


def log(msg):
    print(f"it_endings: {msg}", flush=True)


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args
        self.db = os.path.join(tmp, "en.db")
        self.summary = os.path.join(tmp, "summary.jsonl")
        self.runs = 0

    def host(self, *retry):
        self.runs += 1
        name = f"ibus-{self.runs}"
        p = self.spawn([self.args.ibus, "run", "--nats-url", self.url, "--create", "--stream",
                        "EN", "--stream-subjects", "en.>", "--durable", "en", "--plugin",
                        self.args.plugin_scripted, "--recorder", "sqlite:" + self.db,
                        *retry, "--circuit", "off", "--idle-exit", "1s", "--summary-file",
                        self.summary, "--log-format", "json"], name)
        return p, os.path.join(self.tmp, name + ".log")

    def publish(self, *payloads):
        r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.url, "--prefix", "en",
                            "--type", "test.scripted", *payloads], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr

    def status(self, *extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("IB_")}
        return subprocess.run([self.args.ibus, "status", "--nats-url", self.url, "--stream", "EN",
                               "--durable", "en", "--recorder", "sqlite:" + self.db, *extra],
                              capture_output=True, text=True, timeout=60, env=env)

    def last_summary(self):
        with open(self.summary) as f:
            return json.loads(f.read().splitlines()[-1])


def lines(path):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def markers(rep, name):
    for i in rep["markers"]["identities"]:
        if i["consumer"] == name:
            return i
    raise AssertionError(f"no identity {name}: {rep['markers']}")


def within_bound(run):
    # the stream and the durable exist before the events arrive
    p, _ = run.host("--retry-delay", "3s")
    assert p.wait(timeout=60) == 0, "an empty run did not exit 0"
    run.publish(*(["ok"] * 17 + ["retry:1"] * 3))
    p, path = run.host("--retry-delay", "3s")
    started = time.monotonic()
    code = p.wait(timeout=60)
    took = time.monotonic() - started
    assert code == 0, f"exit {code} after {took:.1f}s"
    said = [x for x in lines(path) if "retries to come back" in x.get("msg", "")]
    assert len(said) == 1, said
    s = run.last_summary()
    assert (s["handled"], s["retried"], s["unmarked"]) == (40, 3, 0), s
    r = run.status("--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and rep["attention"] == [], (r.returncode, rep["attention"])
    assert markers(rep, "en/scripted/scripted")["markers"] == 20, rep["markers"]
    log(f"within: 3 retries due 3s after their RETRY waited for ({said[0]['msg']!r}); all 20 "
        f"marked, exit 0 after {took:.1f}s, status healthy")


def beyond_bound(run):
    run.publish(*(["retry:1"] * 5))
    p, path = run.host("--retry-delay", "10m", "--retry-max-delay", "10m")
    started = time.monotonic()
    try:
        code = p.wait(timeout=90)
    except subprocess.TimeoutExpired:
        raise AssertionError("ibus run waits for retries due in 10 minutes")
    took = time.monotonic() - started
    assert code == 1, f"exit {code} after {took:.1f}s with 5 events unmarked"
    assert took < 30, f"exit 1 only after {took:.1f}s"
    left = [x for x in lines(path) if "unmarked" in x.get("msg", "")]
    assert left and "leaves 5 events unmarked" in left[-1]["msg"], left
    assert "next run" in left[-1]["msg"], left
    assert run.last_summary()["unmarked"] == 5, run.last_summary()

    r = run.status("--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 1 and not rep["healthy"], (r.returncode, rep)
    found = {f["code"]: f for f in rep["attention"]}
    assert list(found) == ["unfinished"], rep["attention"]
    assert "en/scripted/scripted: 5 events were attempted" in found["unfinished"]["message"], found
    text = run.status()
    assert text.returncode == 1, text
    for want in ("durable en on stream EN: attention needed", "  unfinished: en/scripted/"
                 "scripted: 5 events"):
        assert want in text.stdout, (want, text.stdout)
    log(f"beyond: 5 retries due in 10m not waited for; exit 1 after {took:.1f}s: "
        f"{left[-1]['msg']!r}; status: attention unfinished, exit 1")


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--ibus", "--plugin-scripted", "--nats-server"):
        ap.add_argument(opt, required=True)
    args = ap.parse_args()
    args.ibus = os.path.abspath(args.ibus)
    args.plugin_scripted = os.path.abspath(args.plugin_scripted)
    tmp = tempfile.mkdtemp(prefix="ib-endings-")
    return run_steps("it_endings", Run(args, tmp), [within_bound, beyond_bound])


if __name__ == "__main__":
    sys.exit(main())

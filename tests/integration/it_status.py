#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ibus status against a real nats-server (issue 34), field by field.

One durable `st` made by `ibus run --create` (AckWait 2s, --max-deliver 2,
MaxAge 1h) with the scripted test plugin, driven through the states an
operator meets:
  healthy   three events handled, a process pulling: exit 0, every count;
            the retention shown is the MaxAge that --retention auto follows;
  trouble   a rejected and a retried event dead-lettered; an event that
            crashes the process, twice (two processes, each killed by it):
            a claim left past its lease by a holder that is gone, its
            attempts used up; then 50 events nobody pulls. Exit 1 with
            exactly not-pulling, stuck-claims, exhausted and dead-letters,
            and each field of the text and the JSON checked;
  settings  the same with ibus run's defaults (--ack-wait 30s) and
            --retention 10m: the ack-wait and retention findings name
            --ack-wait 2s and --retention 1h; the IB_* variables work as
            the flags do;
  --all     a second durable made through the JetStream API with
            MaxDeliver 3 and no dead-letter stream: max-deliver (fix
            --max-deliver 3) and no-dead-letter-stream;
  options   no such stream or durable, an unknown option: exit 2.
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
from it_natsproto import Client  # noqa: E402
from it_harness import Procs, ready, run_steps, wait_for  # noqa: E402
from it_netutil import free_port  # noqa: E402

SETTINGS = ["--ack-wait", "2s", "--max-deliver", "2"]


def log(msg):
    print(f"it_status: {msg}", flush=True)


class Run(Procs):
    def __init__(self, args, tmp):
        super().__init__(tmp)
        self.args = args
        self.db = os.path.join(tmp, "st.db")

    def host(self, name, extra=()):
        return self.spawn([self.args.ibus, "run", "--nats-url", self.url, "--create", "--stream",
                           "ST", "--stream-subjects", "st.>", "--durable", "st", "--plugin",
                           self.args.plugin_scripted, "--recorder", "sqlite:" + self.db,
                           "--ack-wait", "2s", "--max-deliver", "2", "--retry-delay", "100ms",
                           "--retry-max-delay", "200ms", "--stream-max-age", "1h",
                           "--log-format", "json", *extra], name)

    def publish(self, *payloads):
        r = subprocess.run([self.args.ibus, "publish", "--nats-url", self.url, "--prefix", "st",
                            "--type", "test.scripted", *payloads], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr

    def status(self, *extra, env=None, durable="st"):
        argv = [self.args.ibus, "status", "--nats-url", self.url, "--stream", "ST",
                "--recorder", "sqlite:" + self.db]
        if durable is not None:
            argv += ["--durable", durable]
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("IB_")}
        full_env.update(env or {})
        return subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=60,
                              env=full_env)

    def status_json(self, *extra, env=None):
        r = self.status("--json", *extra, env=env)
        assert r.returncode in (0, 1), (r.returncode, r.stderr)
        return r.returncode, json.loads(r.stdout)

def identity(report, name):
    for i in report["markers"]["identities"]:
        if i["consumer"] == name:
            return i
    raise AssertionError(f"no identity {name}: {report['markers']}")


def codes(report):
    return sorted(f["code"] for f in report["attention"])


def healthy_run(run):
    mport = free_port()
    host = run.host("ibus-a", ["--http", f"127.0.0.1:{mport}"])
    wait_for("ibus run to be ready", lambda: ready(mport))
    run.publish("ok", "ok", "ok")

    def settled():
        code, rep = run.status_json(*SETTINGS)
        c = rep["consumer"]
        return (code, rep) if c["ack_floor_seq"] == 3 and c["waiting_pulls"] >= 1 else None
    code, rep = wait_for("three events handled and a pull waiting", settled)
    assert code == 0 and rep["healthy"] and rep["attention"] == [], rep["attention"]
    s, c = rep["stream"], rep["consumer"]
    assert (s["name"], s["messages"], s["first_seq"], s["last_seq"]) == ("ST", 3, 1, 3), s
    assert s["max_age_ms"] == 3600000 and s["first_time"] and s["last_time"], s
    assert (c["pending"], c["ack_pending"], c["redelivered"], c["delivered_seq"]) == (0, 0, 0, 3), c
    assert c["ack_wait_ms"] == 2000 and c["max_deliver"] == -1 and c["pull"], c
    assert 0 <= c["delivered_age_ms"] < 60000 and c["ack_floor_time"], c
    for name in ("st/scripted/scripted", "st/scripted/second"):
        i = identity(rep, name)
        assert (i["markers"], i["claims"], i["attempted"], i["exhausted"]) == (3, 0, 0, 0), i
        assert i["oldest_time"] <= i["newest_time"], i
    d = rep["dead_letters"]
    assert (d["stream"], d["count"], d["complete"]) == ("DLQ_st", 0, True), d
    assert rep["markers"]["kind"] == "sqlite" and rep["markers"]["recorder"] == "sqlite:" + run.db
    # issue 45: without --retention the run prunes by the stream's MaxAge,
    # and status says so rather than "0s"
    x = rep["expected"]
    assert (x["retention_ms"], x["retention_auto"]) == (3600000, True), x
    text = run.status(*SETTINGS)
    assert text.returncode == 0 and "durable st on stream ST: healthy" in text.stdout, text
    assert "--retention auto (1h, the stream's MaxAge)" in text.stdout, text.stdout
    log(f"healthy: exit 0, 3 messages, 3 markers per identity, {c['waiting_pulls']} pull "
        "request(s) waiting, no dead letters")
    return host


def trouble_run(run, host):
    run.publish("reject", "retry")
    wait_for("two dead letters", lambda: run.status_json(*SETTINGS)[1]["dead_letters"]["count"] == 2)
    run.publish("crash")
    assert host.wait(timeout=60) != 0, "the crash event did not crash ibus run"
    second = run.host("ibus-b")  # gets the crash event after AckWait, and crashes too
    assert second.wait(timeout=60) != 0, "the redelivered crash event did not crash ibus run"
    dead_at = time.monotonic()
    run.publish("--count", "50", "--payload-size", "2")

    def stuck():
        code, rep = run.status_json(*SETTINGS)
        return (code, rep) if "stuck-claims" in codes(rep) else None
    code, rep = wait_for("the claims to be stuck", stuck)
    waited = time.monotonic() - dead_at
    assert code == 1, code
    # the crashing handler used its two attempts; the event's other handler
    # never started (the crash came first), so it spent none (issue 43)
    assert codes(rep) == ["dead-letters", "exhausted", "not-pulling", "stuck-claims",
                          "stuck-claims"], rep["attention"]
    s, c, d = rep["stream"], rep["consumer"], rep["dead_letters"]
    assert (s["messages"], s["first_seq"], s["last_seq"]) == (56, 1, 56), s
    assert (c["pending"], c["ack_pending"], c["redelivered"], c["waiting_pulls"]) == (50, 1, 1, 0), c
    assert (c["delivered_seq"], c["ack_floor_seq"]) == (6, 5), c
    for name, markers, spent in (("st/scripted/scripted", 3, (1, 1)),
                                 ("st/scripted/second", 5, (0, 0))):
        i = identity(rep, name)
        assert (i["markers"], i["claims"], i["claims_past_lease"]) == (markers, 1, 1), i
        assert (i["attempted"], i["exhausted"]) == spent, i
        assert i["lease_left_min_ms"] < -2000, i
        assert i["lease_left_min_owner"].startswith("st@"), i
    assert (d["count"], d["complete"], d["stream_messages"]) == (2, True, 2), d
    assert d["by_reason"]["rejected"] == 1 and d["by_reason"]["max-deliver"] == 1, d
    assert d["oldest_time"] is not None, d
    msgs = {f["code"]: f for f in rep["attention"]}
    assert "50 messages wait" in msgs["not-pulling"]["message"], msgs
    assert "it is gone" in msgs["stuck-claims"]["message"], msgs
    assert "used their 2 attempts" in msgs["exhausted"]["message"], msgs
    assert msgs["dead-letters"]["fix"] == "ibus dlq --stream DLQ_st", msgs

    text = run.status(*SETTINGS)
    assert text.returncode == 1, text
    out = text.stdout
    for want in ("durable st on stream ST: attention needed",
                 "56 messages (seq 1..56)", "pending 50, ack pending 1, redelivered 1, "
                 "waiting pulls 0", "last delivered seq 6", "ack floor seq 5",
                 "st/scripted/second: markers 5", "claims 1 (1 past their lease",
                 "attempted 1, exhausted 1", "attempted 0, exhausted 0",
                 "DLQ_st: 2 (max-deliver 1, rejected 1)",
                 "\nattention\n", "  not-pulling: 50 messages wait"):
        assert want in out, (want, out)
    assert len(out.splitlines()) <= 24, f"more than one screen:\n{out}"
    log(f"trouble: exit 1 with not-pulling, stuck-claims, exhausted, dead-letters; claims "
        f"stuck {waited:.1f}s after the second crash; every field as expected")
    return rep


def settings_run(run):
    code, rep = run.status_json("--retention", "10m")
    fixes = {f["code"]: f["fix"] for f in rep["attention"]}
    assert code == 1
    assert fixes["ack-wait"] == "--ack-wait 2s", fixes
    assert fixes["retention"] == "--retention 1h", fixes
    assert "exhausted" not in fixes, "2 attempts are not 5"
    x = rep["expected"]
    assert (x["retention_ms"], x["retention_auto"]) == (600000, False), x
    # the IB_* variables of ibus run are read as the flags
    code, rep = run.status_json(env={"IB_ACK_WAIT": "2s", "IB_MAX_DELIVER": "2"})
    assert "ack-wait" not in codes(rep) and "exhausted" in codes(rep), codes(rep)
    log("settings: AckWait 2s against --ack-wait 30s, --retention 10m against MaxAge 1h, each "
        "with its fix; IB_ACK_WAIT and IB_MAX_DELIVER read as the flags")


def all_run(run):
    nc = Client(run.port)
    r = nc.js("CONSUMER.DURABLE.CREATE.ST.md",
              {"stream_name": "ST", "config": {"durable_name": "md", "ack_policy": "explicit",
                                               "max_deliver": 3, "ack_wait": 2000000000}})
    assert "error" not in r, r
    nc.close()
    r = run.status("--all", "--json", *SETTINGS, durable=None)
    assert r.returncode == 1, r
    reps = {x["consumer"]["durable"]: x for x in json.loads(r.stdout)}
    assert sorted(reps) == ["md", "st"], sorted(reps)
    md = reps["md"]
    fixes = {f["code"]: f["fix"] for f in md["attention"]}
    assert fixes.get("max-deliver") == "--max-deliver 3", md["attention"]
    assert fixes.get("no-dead-letter-stream") == "--create", md["attention"]
    assert md["consumer"]["pending"] == 56 and md["markers"]["identities"] == [], md
    text = run.status("--all", *SETTINGS, durable=None)
    assert "durable md on stream ST" in text.stdout and "durable st on stream ST" in text.stdout
    log("--all: both durables; md's MaxDeliver 3 names --max-deliver 3, its missing "
        "dead-letter stream --create")


def options_run(run):
    for extra, durable, want in ((["--stream", "NOPE"], "st", "stream NOPE does not exist"),
                                 ([], "nope", "consumer nope on stream ST does not exist"),
                                 (["--bogus"], "st", "unknown option --bogus")):
        r = run.status(*extra, durable=durable)
        assert r.returncode == 2 and want in r.stderr, (extra, r.returncode, r.stderr)
    log("options: no such stream, no such durable, an unknown option: exit 2")


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--ibus", "--plugin-scripted", "--nats-server"):
        ap.add_argument(opt, required=True)
    args = ap.parse_args()
    args.ibus = os.path.abspath(args.ibus)
    args.plugin_scripted = os.path.abspath(args.plugin_scripted)
    tmp = tempfile.mkdtemp(prefix="ib-status-")
    run = Run(args, tmp)
    state = {}

    def healthy(r):
        state["host"] = healthy_run(r)

    def trouble(r):
        trouble_run(r, state["host"])
    return run_steps("it_status", run, [healthy, trouble, settings_run, all_run, options_run])

if __name__ == "__main__":
    sys.exit(main())

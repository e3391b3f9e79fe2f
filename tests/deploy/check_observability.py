#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Static checks of what operators monitor infinity-bus with: the Prometheus
alert rules, the Grafana dashboard and the Prometheus Operator component.

usage:
  check_observability.py rules ROOT       alerts are complete: severity,
        summary, description, a runbook_url whose anchor is a runbook section
        of deploy/README.md (with what it means, how to confirm, what to do),
        a firing and a not-firing case in ibus-rules.test.yaml, and only
        metric names ibus renders
  check_observability.py dashboard ROOT   deploy/grafana/ibus.json is a sound
        Grafana model: unique panel ids, gridPos inside 24 columns without
        overlaps, every target with an expr filtered by $job and $instance,
        only metric names ibus renders, the variables and the repeated row
  check_observability.py operator ROOT FILE   FILE, `kubectl kustomize` of an
        overlay with deploy/k8s/components/prometheus-operator: the
        ServiceMonitor selects exactly the metrics Service and all its ports,
        names the job the rules expect, and the PrometheusRule's groups equal
        deploy/prometheus/ibus-rules.yaml's
  check_observability.py sync-operator ROOT   rewrites the component's
        prometheusrule.yaml from the rules file (kustomize cannot embed a file)

ROOT is the source tree. The metric names ibus renders are the "ibus_..."
strings of plugin/ops/*.c; histogram series (_bucket, _sum, _count) exist for
names ending in _seconds, and "up" is Prometheus' own. Every problem prints
one FAIL line; the exit status is then 1. Needs PyYAML (python3-yaml).
"""

import glob
import json
import os
import re
import sys

try:
    import yaml
except ImportError:
    sys.stderr.write("check_observability: PyYAML is missing (Debian: python3-yaml)\n")
    sys.exit(2)

RULES = "deploy/prometheus/ibus-rules.yaml"
RULE_TESTS = "deploy/prometheus/ibus-rules.test.yaml"
DASHBOARD = "deploy/grafana/ibus.json"
RUNBOOK = "deploy/README.md"
COMPONENT_RULE = "deploy/k8s/components/prometheus-operator/prometheusrule.yaml"
SEVERITIES = ("critical", "warning", "info")
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                "or", "unless", "offset", "inf", "nan"}
# What each runbook section must say, as bold lead-ins.
RUNBOOK_PARTS = ("**Means.**", "**Confirm.**", "**Do.**")

failures = []


def fail(what, detail):
    line = f"FAIL {what}: {detail}"
    if line not in failures:
        failures.append(line)


def known_metrics(root):
    """Series names ibus can render, from the sources that render them."""
    names = {"up"}
    for path in glob.glob(os.path.join(root, "plugin/ops/*.c")):
        with open(path, encoding="utf-8") as f:
            names.update(re.findall(r'"(ibus_[a-z0-9_]+)', f.read()))
    for n in list(names):
        if n.endswith("_seconds"):
            names.update(n + s for s in ("_bucket", "_sum", "_count"))
    return names


def metric_names(expr):
    """Series names an expression selects: identifiers that are neither
    functions, keywords, label names of by()/on() clauses, nor inside
    strings, label matchers or range brackets."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "{}", text)
    text = re.sub(r"\[[^\]]*\]", "[]", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        if m.group(2) is None and m.group(1).lower() not in PROMQL_WORDS:
            names.add(m.group(1))
    return names


def check_names(where, expr, known):
    for n in sorted(metric_names(expr) - known):
        fail(where, f"metric {n} is not rendered by ibus (plugin/ops)")


def load_yaml(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return yaml.safe_load(f)


def alerts_of(rules):
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]


def runbook_sections(root):
    """GitHub anchor of each heading of the runbook -> the text under it."""
    with open(os.path.join(root, RUNBOOK), encoding="utf-8") as f:
        text = f.read()
    sections = {}
    parts = re.split(r"^(#{1,6} .*)$", text, flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2]):
        title = heading.lstrip("#").strip().lower()
        anchor = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        sections[anchor] = body
    return sections


def check_alert(alert, sections, known):
    name = alert["alert"]
    where = f"alert {name}"
    if alert.get("labels", {}).get("severity") not in SEVERITIES:
        fail(where, f"labels.severity must be one of {', '.join(SEVERITIES)}")
    ann = alert.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        if not str(ann.get(key, "")).strip():
            fail(where, f"annotation {key} is missing")
    if "{{ $labels" not in ann.get("description", "") + ann.get("summary", ""):
        fail(where, "summary or description should name the series ({{ $labels.* }})")
    anchor = str(ann.get("runbook_url", "")).partition("#")[2]
    body = sections.get(anchor)
    if body is None:
        fail(where, f"runbook_url anchor #{anchor} is no heading of {RUNBOOK}")
    else:
        for part in RUNBOOK_PARTS:
            if part not in body:
                fail(where, f"runbook section #{anchor} lacks {part}")
    check_names(where, alert["expr"], known)


def check_rule_tests(root, alerts):
    """Each alert needs a case where it fires and one where it must not."""
    tests = load_yaml(root, RULE_TESTS)
    fired, quiet = set(), set()
    for case in tests.get("tests", []):
        for t in case.get("alert_rule_test", []):
            (fired if t.get("exp_alerts") else quiet).add(t["alertname"])
    for a in alerts:
        if a["alert"] not in fired:
            fail(f"alert {a['alert']}", f"no case in {RULE_TESTS} where it fires")
        if a["alert"] not in quiet:
            fail(f"alert {a['alert']}", f"no case in {RULE_TESTS} where it must not fire")


def check_rules(root):
    known = known_metrics(root)
    sections = runbook_sections(root)
    alerts = alerts_of(load_yaml(root, RULES))
    if not alerts:
        fail(RULES, "no alerts")
    seen = set()
    for a in alerts:
        if a["alert"] in seen:
            fail(f"alert {a['alert']}", "defined twice")
        seen.add(a["alert"])
        check_alert(a, sections, known)
    check_rule_tests(root, alerts)
    print(f"check_observability: {len(alerts)} alerts checked")


def all_panels(dash):
    """Top-level panels and those nested in collapsed rows."""
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])


def check_layout(panels):
    """Rectangles inside 24 columns that do not overlap."""
    boxes = []
    for p in panels:
        g = p.get("gridPos", {})
        where = f"panel {p.get('id')} ({p.get('title')})"
        x, y, w, h = (g.get(k) for k in ("x", "y", "w", "h"))
        if not all(isinstance(v, int) for v in (x, y, w, h)):
            fail(where, "gridPos needs integer x, y, w, h")
            continue
        if x < 0 or y < 0 or w <= 0 or h <= 0 or x + w > 24:
            fail(where, f"gridPos {g} is not inside 24 columns")
        for other, (ox, oy, ow, oh) in boxes:
            if x < ox + ow and ox < x + w and y < oy + oh and oy < y + h:
                fail(where, f"overlaps panel {other}")
        boxes.append((p.get("id"), (x, y, w, h)))


def check_targets(p, known):
    where = f"panel {p.get('id')} ({p.get('title')})"
    if p.get("datasource", {}).get("uid") != "${datasource}":
        fail(where, "datasource must be the ${datasource} variable")
    if not p.get("targets"):
        fail(where, "has no targets")
    for t in p.get("targets", []):
        expr = str(t.get("expr", "")).strip()
        if not expr:
            fail(where, f"target {t.get('refId')} has no expr")
            continue
        if '$job"' not in expr or '$instance"' not in expr:
            fail(where, f"target {t.get('refId')} is not filtered by $job and $instance")
        check_names(where, expr, known)


def check_variables(dash, known):
    vars_ = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = vars_.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        fail("templating", "needs a datasource variable of type prometheus")
    for name in ("job", "instance", "consumer"):
        v = vars_.get(name)
        if v is None or v.get("type") != "query":
            fail("templating", f"needs a query variable {name}")
            continue
        q = v.get("query", {})
        q = q.get("query", "") if isinstance(q, dict) else q
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
        if m is None or m.group(2) != name:
            fail(f"variable {name}", f"query {q!r} is not label_values(..., {name})")
            continue
        check_names(f"variable {name}", m.group(1), known)
    consumer = vars_.get("consumer", {})
    if "ibus_consumer_runs_total" not in str(consumer.get("query")):
        fail("variable consumer", "must list the consumer labels of ibus_consumer_runs_total")
    # a row repeats once per selected value: one value would show one row
    if not (consumer.get("multi") and consumer.get("includeAll")):
        fail("variable consumer", "needs multi and includeAll for the repeated row")


def check_repeat(dash):
    """The per-consumer row repeats over $consumer and its panels use it."""
    panels = dash.get("panels", [])
    rows = [i for i, p in enumerate(panels) if p.get("type") == "row"
            and p.get("repeat") == "consumer"]
    if len(rows) != 1:
        fail("dashboard", "needs exactly one row with repeat: consumer")
        return
    i = rows[0]
    end = next((j for j in range(i + 1, len(panels)) if panels[j].get("type") == "row"),
               len(panels))
    inner = panels[i].get("panels") or panels[i + 1:end]
    if not inner:
        fail("dashboard", "the consumer row has no panels")
    for p in inner:
        if not all('$consumer"' in t.get("expr", "") for t in p.get("targets", [])):
            fail(f"panel {p.get('id')}", "in the consumer row but not filtered by $consumer")


def check_dashboard(root):
    known = known_metrics(root)
    with open(os.path.join(root, DASHBOARD), encoding="utf-8") as f:
        dash = json.load(f)
    if int(dash.get("schemaVersion", 0)) < 36:
        fail("dashboard", "schemaVersion must be 36 or newer")
    panels = list(all_panels(dash))
    ids = [p.get("id") for p in panels]
    for dup in sorted({i for i in ids if ids.count(i) > 1}, key=str):
        fail("dashboard", f"panel id {dup} is used more than once")
    if any(not isinstance(i, int) for i in ids):
        fail("dashboard", "every panel needs an integer id")
    check_layout(panels)
    for p in panels:
        if p.get("type") != "row":
            check_targets(p, known)
    check_variables(dash, known)
    check_repeat(dash)
    print(f"check_observability: dashboard with {len(panels)} panels checked")


def label_selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def expected_job(root):
    """The job name the rules' target alerts select, e.g. up{job="ibus"}."""
    for a in alerts_of(load_yaml(root, RULES)):
        m = re.search(r'\bup\{[^}]*job="([^"]+)"', a["expr"])
        if m:
            return m.group(1)
    return None


def check_service_monitor(sm, services, job):
    where = f"ServiceMonitor/{sm['metadata']['name']}"
    spec = sm.get("spec", {})
    if set(spec.get("selector", {})) != {"matchLabels"}:
        fail(where, "selector must be matchLabels only")
        return
    picked = [s for s in services if label_selects(spec["selector"],
                                                   s["metadata"].get("labels", {}))]
    if len(picked) != 1:
        names = [s["metadata"]["name"] for s in picked]
        fail(where, f"selects {len(picked)} Services {names}, want exactly the metrics Service")
        return
    svc = picked[0]
    if svc["metadata"].get("namespace") != sm["metadata"].get("namespace"):
        fail(where, "is not in the namespace of the Service it selects")
    svc_ports = {p.get("name") for p in svc["spec"].get("ports", [])}
    ep_ports = [e.get("port") for e in spec.get("endpoints", [])]
    for p in ep_ports:
        if p not in svc_ports:
            fail(where, f"endpoint port {p!r} is no port of Service/{svc['metadata']['name']}")
    for p in sorted(svc_ports - set(ep_ports), key=str):
        fail(where, f"port {p!r} of Service/{svc['metadata']['name']} is not scraped")
    for e in spec.get("endpoints", []):
        if e.get("path", "/metrics") != "/metrics":
            fail(where, f"endpoint {e.get('port')} scrapes {e.get('path')}, not /metrics")
    job_label = spec.get("jobLabel")
    got = svc["metadata"].get("labels", {}).get(job_label) if job_label else None
    if got != job:
        fail(where, f"gives job {got!r} (jobLabel {job_label!r}); the rules expect {job!r}")
    print(f"check_observability: {where} scrapes Service/{svc['metadata']['name']} "
          f"ports {sorted(ep_ports)} as job {got}")


def check_operator(root, rendered):
    with open(rendered, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)
    monitors = by_kind.get("ServiceMonitor", [])
    prules = by_kind.get("PrometheusRule", [])
    if len(monitors) != 1 or len(prules) != 1:
        fail(rendered, f"want one ServiceMonitor and one PrometheusRule, got "
                       f"{len(monitors)} and {len(prules)}")
        return
    check_service_monitor(monitors[0], by_kind.get("Service", []), expected_job(root))
    groups = prules[0].get("spec", {}).get("groups")
    if groups != load_yaml(root, RULES)["groups"]:
        fail(f"PrometheusRule/{prules[0]['metadata']['name']}",
             f"groups differ from {RULES}: run check_observability.py sync-operator")
    else:
        print(f"check_observability: PrometheusRule groups equal {RULES}")


def sync_operator(root):
    with open(os.path.join(root, RULES), encoding="utf-8") as f:
        text = f.read()
    body = text[text.index("\ngroups:") + 1:]
    head = (
        "# SPDX-License-Identifier: Apache-2.0\n"
        "# GENERATED from deploy/prometheus/ibus-rules.yaml by\n"
        "#   python3 tests/deploy/check_observability.py sync-operator .\n"
        "# Edit the rules file, not this one: ctest -L deploy fails while the\n"
        "# groups differ.\n"
        "apiVersion: monitoring.coreos.com/v1\n"
        "kind: PrometheusRule\n"
        "metadata:\n"
        "  name: ibus\n"
        "  labels:\n"
        "    app.kubernetes.io/name: ibus\n"
        "spec:\n")
    out = head + "".join("  " + line if line.strip() else line
                         for line in body.splitlines(keepends=True))
    with open(os.path.join(root, COMPONENT_RULE), "w", encoding="utf-8") as f:
        f.write(out)
    print(f"check_observability: wrote {COMPONENT_RULE}")


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    cmd, root = argv[1], argv[2]
    if cmd == "rules":
        check_rules(root)
    elif cmd == "dashboard":
        check_dashboard(root)
    elif cmd == "operator" and len(argv) == 4:
        check_operator(root, argv[3])
    elif cmd == "sync-operator":
        sync_operator(root)
    else:
        sys.stderr.write(__doc__)
        return 2
    for line in failures:
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

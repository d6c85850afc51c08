#!/usr/bin/env python3
"""Check the paging policy: severities, grouping labels, inhibition and runbook URL form.

    check_alert_policy.py --repo ROOT --alertmanager FILE --rule-tests DIR
                          [--overlay DIR...] RULE_FILE...

For every alerting rule:
- `severity` is critical or warning, `scope` is gpu, node or fleet; a gpu alert (one GPU
  of a node) is never critical: a node that is down must not page once per GPU;
- a gpu or node alert names the node in its summary, and every alert its promtool tests
  expect carries the rule's severity and scope, and `node` unless the scope is fleet (the
  label Alertmanager groups by);
- runbook_url is an absolute http(s) URL, BASE#anchor, with one BASE for all alerts.

The Alertmanager configuration groups kerneleval alerts by node (fleet alerts by name), sends
critical to a receiver of its own, and inhibits `scope="gpu"` alerts with `equal: [node]`
while a node alert of the same node fires; each inhibiting alert exists and has scope node.

Each --overlay is rendered with kubectl kustomize twice: as it is (every PrometheusRule
alert's runbook_url is the runbook-links component's base plus the rule file's anchor), and
from a copy of deploy/k8s whose setting names another base (every URL follows: one setting).

A self-test of planted mistakes runs first. Exit 0 when all hold, 1 otherwise.
"""

import argparse
import copy
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

import yaml

from k8s_render import find_kubectl

SEVERITIES = {"critical", "warning"}
SCOPES = {"gpu", "node", "fleet"}
SETTING = "runbook-base-url="


def alert_rules(document):
    groups = document.get("groups") or (document.get("spec") or {}).get("groups") or []
    for group in groups:
        for rule in group.get("rules") or []:
            if "alert" in rule:
                yield rule


def expected_alerts(test_files):
    """alertname -> [exp_labels of each expected alert] over the promtool tests."""
    found = {}
    for path in test_files:
        for test in yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))["tests"]:
            for case in test.get("alert_rule_test") or []:
                for alert in case.get("exp_alerts") or []:
                    found.setdefault(case["alertname"], []).append(alert.get("exp_labels") or {})
    return found


def check_rules(rules, tested):
    problems, bases = [], set()
    for rule in rules:
        name = rule["alert"]
        labels = rule.get("labels") or {}
        annotations = rule.get("annotations") or {}
        severity, scope = labels.get("severity"), labels.get("scope")
        if severity not in SEVERITIES:
            problems.append(f"{name}: severity {severity!r}, want one of {sorted(SEVERITIES)}")
        if scope not in SCOPES:
            problems.append(f"{name}: scope {scope!r}, want one of {sorted(SCOPES)}")
        if scope == "gpu" and severity == "critical":
            problems.append(f"{name}: a single GPU's alert must not page (severity warning)")
        if scope in ("gpu", "node") and "$labels.node" not in annotations.get("summary", ""):
            problems.append(f"{name}: the summary does not name the node")
        for exp in tested.get(name, []):
            if exp.get("severity") != severity or exp.get("scope") != scope:
                problems.append(f"{name}: a promtool test expects severity "
                                f"{exp.get('severity')!r} scope {exp.get('scope')!r}")
            if scope in ("gpu", "node") and not exp.get("node"):
                problems.append(f"{name}: a promtool test expects it without a node label, "
                                "which Alertmanager groups by")
        if scope in ("gpu", "node") and name not in tested:
            problems.append(f"{name}: no promtool test shows its labels")
        url = annotations.get("runbook_url", "")
        base, _, anchor = url.partition("#")
        parsed = urllib.parse.urlsplit(base)
        if parsed.scheme not in ("http", "https") or not parsed.netloc or not anchor:
            problems.append(f"{name}: runbook_url {url!r} is not an absolute URL with a #section")
        bases.add(base)
    if len(bases) > 1:
        problems.append(f"runbook_url bases differ: {sorted(bases)}; one setting sets them all")
    return problems, bases


def matcher_values(matchers, label):
    """The value of `label=...` or `label=~...` in Alertmanager matcher strings."""
    values = []
    for matcher in matchers or []:
        m = re.fullmatch(rf'\s*{label}\s*(=~|=)\s*"(.*)"\s*', matcher)
        if m:
            values.append((m.group(1), m.group(2)))
    return values


def check_alertmanager(config, rules):
    problems = []
    by_name = {r["alert"]: r for r in rules}
    routes = [r for r in config.get("route", {}).get("routes", [])
              if ("=~", "Kerneleval.+") in matcher_values(r.get("matchers"), "alertname")]
    if len(routes) != 1:
        return [f"want one route matching alertname=~\"Kerneleval.+\", found {len(routes)}"]
    route = routes[0]
    if route.get("group_by") != ["node"]:
        problems.append(f"the kerneleval route groups by {route.get('group_by')}, want [node]")
    children = route.get("routes") or []
    fleet = [c for c in children if ("=", "fleet") in matcher_values(c.get("matchers"), "scope")]
    if len(fleet) != 1 or "alertname" not in (fleet[0].get("group_by") or []):
        problems.append("fleet alerts (no node label) need a route grouping by alertname")
    critical = [c for c in children
                if ("=", "critical") in matcher_values(c.get("matchers"), "severity")]
    if len(critical) != 1 or critical[0].get("receiver") in (None, route.get("receiver")):
        problems.append("critical alerts need a route to a receiver of their own (the pager)")
    for receiver in {route.get("receiver"), *(c.get("receiver") for c in children)} - {None}:
        if receiver not in {r["name"] for r in config.get("receivers", [])}:
            problems.append(f"receiver {receiver} is not defined")
    inhibits = [i for i in config.get("inhibit_rules", [])
                if ("=", "gpu") in matcher_values(i.get("target_matchers"), "scope")]
    if len(inhibits) != 1:
        return problems + [f"want one inhibit rule on scope=\"gpu\", found {len(inhibits)}"]
    inhibit = inhibits[0]
    if inhibit.get("equal") != ["node"]:
        problems.append(f"the GPU inhibit rule compares {inhibit.get('equal')}, want [node]: "
                        "only the same node's GPUs")
    sources = matcher_values(inhibit.get("source_matchers"), "alertname")
    if len(sources) != 1:
        return problems + ["the GPU inhibit rule needs one alertname source matcher"]
    op, value = sources[0]
    names = value.split("|") if op == "=~" else [value]
    for name in names:
        rule = by_name.get(name)
        if rule is None:
            problems.append(f"inhibit source {name} is not an alert")
        elif (rule.get("labels") or {}).get("scope") != "node":
            problems.append(f"inhibit source {name} is not a node alert")
    for required in ("KernelevalTargetDown", "KernelevalPoolNodeUncovered"):
        if required not in names:
            problems.append(f"{required} (the node's own alert) does not inhibit its GPUs'")
    return problems


def component_base(k8s):
    component = yaml.safe_load((k8s / "components/runbook-links/kustomization.yaml")
                               .read_text(encoding="utf-8"))
    for generator in component.get("configMapGenerator", []):
        for literal in generator.get("literals", []):
            if literal.startswith(SETTING):
                return literal[len(SETTING):]
    raise ValueError("components/runbook-links sets no runbook-base-url")


def rendered_urls(kubectl, overlay):
    out = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True,
                         check=True).stdout
    urls = {}
    for document in yaml.safe_load_all(out):
        if document and document.get("kind") == "PrometheusRule":
            for rule in alert_rules(document):
                urls[rule["alert"]] = (rule.get("annotations") or {}).get("runbook_url", "")
    return urls


def check_overlays(kubectl, repo, overlays, anchors):
    problems = []
    k8s = repo / "deploy/k8s"
    base = component_base(k8s)
    with tempfile.TemporaryDirectory() as tmp:
        copy_root = pathlib.Path(tmp) / "k8s"
        shutil.copytree(k8s, copy_root)
        other = "https://wiki.example.com/oncall/kerneleval/deploy/runbooks.md"
        component = copy_root / "components/runbook-links/kustomization.yaml"
        component.write_text(component.read_text(encoding="utf-8").replace(
            SETTING + base, SETTING + other), encoding="utf-8")
        for overlay in overlays:
            overlay = pathlib.Path(overlay).resolve()
            for want_base, directory in ((base, overlay),
                                         (other, copy_root / overlay.relative_to(k8s.resolve()))):
                urls = rendered_urls(kubectl, directory)
                if not urls:
                    problems.append(f"{overlay.name}: no PrometheusRule alerts rendered")
                for name, url in urls.items():
                    if url != f"{want_base}#{anchors.get(name)}":
                        problems.append(f"{overlay.name}: {name} runbook_url {url}, want "
                                        f"{want_base}#{anchors.get(name)}")
            print(f"{overlay.name}: runbook URLs follow the one setting")
    return problems


def runbook_section(text, heading):
    """The body of `## heading` in a Markdown text ("" when absent)."""
    start = text.find(f"\n## {heading}\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def check_withheld_gpu_runbook(repo, rules):
    """A GPU the device plugin withholds darkens the node at the pod's next start: an alert
    says so before, and the uncovered node's runbook names it as a cause."""
    problems = []
    names = {r["alert"] for r in rules}
    if "KernelevalPoolGpuWithheld" not in names:
        problems.append("no KernelevalPoolGpuWithheld alert (allocatable GPUs below capacity)")
    text = (repo / "deploy/runbooks.md").read_text(encoding="utf-8")
    uncovered = runbook_section(text, "KernelevalPoolNodeUncovered")
    if "withh" not in uncovered or "KernelevalPoolGpuWithheld" not in uncovered:
        problems.append("the KernelevalPoolNodeUncovered runbook does not name a withheld GPU")
    return problems


def self_test(rules, tested, config):
    """Each planted mistake must be found."""
    failures = []

    def planted(what, mutate_rules=None, mutate_config=None, mutate_tested=None):
        r, c, t = copy.deepcopy(rules), copy.deepcopy(config), copy.deepcopy(tested)
        for mutate, value in ((mutate_rules, r), (mutate_config, c), (mutate_tested, t)):
            if mutate:
                mutate(value)
        if not (check_rules(r, t)[0] + check_alertmanager(c, r)):
            failures.append(f"self-test: not found: {what}")

    def rule(rs, name):
        return next(x for x in rs if x["alert"] == name)

    planted("a GPU alert at critical",
            lambda rs: rule(rs, "KernelevalDeviceUnhealthy")["labels"].update(severity="critical"))
    planted("a repository-path runbook",
            lambda rs: rule(rs, "KernelevalTargetDown")["annotations"].update(
                runbook_url="deploy/runbooks.md#kernelevaltargetdown"))
    planted("an alert without scope",
            lambda rs: rule(rs, "KernelevalNotReady")["labels"].pop("scope", None))
    planted("a tested alert without node",
            mutate_tested=lambda t: t["KernelevalBenchmarkStale"][0].pop("node", None))
    planted("grouping by alertname only",
            mutate_config=lambda c: c["route"]["routes"][0].update(group_by=["alertname"]))
    planted("inhibition across nodes",
            mutate_config=lambda c: c["inhibit_rules"][0].update(equal=[]))
    planted("a GPU alert inhibiting",
            mutate_config=lambda c: c["inhibit_rules"][0].update(
                source_matchers=['alertname=~"KernelevalTargetDown|KernelevalPoolNodeUncovered|'
                                 'KernelevalDeviceUnhealthy"']))
    return failures


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=pathlib.Path)
    parser.add_argument("--alertmanager", required=True)
    parser.add_argument("--rule-tests", required=True, type=pathlib.Path)
    parser.add_argument("--overlay", action="append", default=[])
    parser.add_argument("rule_files", nargs="+")
    args = parser.parse_args(argv[1:])

    rules = [r for path in args.rule_files
             for r in alert_rules(yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8")))]
    tested = expected_alerts(sorted(args.rule_tests.glob("*.yml")))
    config = yaml.safe_load(pathlib.Path(args.alertmanager).read_text(encoding="utf-8"))
    problems = self_test(rules, tested, config)
    rule_problems, _ = check_rules(rules, tested)
    problems += rule_problems + check_alertmanager(config, rules)
    if args.overlay:
        kubectl = find_kubectl()
        if not kubectl:
            problems.append("kubectl is needed to render the overlays")
        else:
            anchors = {r["alert"]: r["annotations"]["runbook_url"].partition("#")[2] for r in rules}
            problems += check_overlays(kubectl, args.repo.resolve(), args.overlay, anchors)
    problems += check_withheld_gpu_runbook(args.repo, rules)
    for problem in problems:
        print(f"FAIL {problem}")
    print(f"{len(rules)} alerts, {len(problems)} problems")
    return 1 if problems or not rules else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

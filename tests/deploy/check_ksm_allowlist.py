#!/usr/bin/env python3
"""Check that installing kerneleval's kube-state-metrics allowlist keeps a shared stack's.

    check_ksm_allowlist.py REPO_ROOT

Runs deploy/prometheus/ksm-allowlist.py (the merge step deploy/README.md gives) on a
release's values as `helm get values` prints them, applies its output the way
`helm upgrade --reuse-values -f` does (maps merged key by key, a list replaced whole), and
reads the resulting allowlist the way kube-state-metrics does (one entry per resource):
every other team's label must survive and kerneleval's three must be allowed. Cases: other
teams' pods / nodes / namespaces entries, no values at all, `nodes=[*]`, two nodes entries,
a second run (no duplicates), a malformed entry (refused, exit 2). Also: the README's
install step is the merge, not `-f` of the bare values file, which would drop the others.
"""

import pathlib
import subprocess
import sys

import yaml

OURS = {"nvidia.com/gpu.product", "kerneleval.io/pool", "kubernetes.io/arch"}


def helm_reuse_values(current, override):
    """Helm's coalescing of `-f override` over reused values: maps merge, lists replace."""
    if isinstance(current, dict) and isinstance(override, dict):
        merged = dict(current)
        for key, value in override.items():
            merged[key] = helm_reuse_values(current.get(key), value)
        return merged
    return override


def ksm_allowlist(entries):
    """resource -> set of labels, as kube-state-metrics' flag parser keeps them (one per
    resource: a later entry replaces an earlier one)."""
    allowed = {}
    for entry in entries:
        resource, _, labels = entry.partition("=")
        allowed[resource] = {label for label in labels.strip("[]").split(",") if label}
    return allowed


def run_merge(script, values):
    return subprocess.run([sys.executable, str(script)], input=yaml.safe_dump(values),
                          capture_output=True, text=True, check=False)


def main(argv):
    root = pathlib.Path(argv[1])
    script = root / "deploy/prometheus/ksm-allowlist.py"
    problems = []
    if not script.is_file():
        print(f"FAIL {script} is missing: no merge step for the allowlist")
        return 1
    cases = {
        "other teams": ["pods=[team,app.kubernetes.io/name]", "nodes=[topology.kubernetes.io/zone]",
                        "namespaces=[*]"],
        "no allowlist": None,
        "every node label": ["nodes=[*]"],
        "two nodes entries": ["nodes=[a.example/x]", "pods=[team]", "nodes=[b.example/y]"],
    }
    for name, existing in cases.items():
        release = {"grafana": {"adminPassword": "kept"}}
        if existing is not None:
            release["kube-state-metrics"] = {"metricLabelsAllowlist": existing,
                                             "replicas": 2}
        result = run_merge(script, release)
        if result.returncode != 0:
            problems.append(f"{name}: exit {result.returncode}: {result.stderr.strip()}")
            continue
        after = helm_reuse_values(release, yaml.safe_load(result.stdout))
        allowed = ksm_allowlist(after["kube-state-metrics"]["metricLabelsAllowlist"])
        before = {}
        for entry in existing or []:
            resource, _, labels = entry.partition("=")
            before.setdefault(resource, set()).update(l for l in labels.strip("[]").split(",") if l)
        for resource, labels in before.items():
            if not labels <= allowed.get(resource, set()):
                problems.append(f"{name}: {resource} lost {sorted(labels - allowed.get(resource, set()))}")
        nodes = allowed.get("nodes", set())
        if "*" not in nodes and not OURS <= nodes:
            problems.append(f"{name}: kerneleval's node labels not allowed: {sorted(OURS - nodes)}")
        if after.get("grafana") != {"adminPassword": "kept"} or (
                existing is not None and after["kube-state-metrics"].get("replicas") != 2):
            problems.append(f"{name}: other values changed")
        again = run_merge(script, after)
        if again.returncode != 0 or yaml.safe_load(again.stdout) != yaml.safe_load(result.stdout):
            problems.append(f"{name}: a second run changes the list")
        print(f"{name}: {after['kube-state-metrics']['metricLabelsAllowlist']}")
    bad = run_merge(script, {"kube-state-metrics": {"metricLabelsAllowlist": ["nodes:[x]"]}})
    if bad.returncode != 2 or "nodes:[x]" not in bad.stderr:
        problems.append(f"a malformed entry: exit {bad.returncode}, {bad.stderr.strip()!r}")
    readme = (root / "deploy/README.md").read_text(encoding="utf-8")
    if "-f deploy/prometheus/kube-prometheus-stack-values.yaml" in readme:
        problems.append("deploy/README.md installs the bare values file with -f: Helm replaces "
                        "the list and drops other teams' entries")
    if "deploy/prometheus/ksm-allowlist.py" not in readme:
        problems.append("deploy/README.md does not give the merge step (ksm-allowlist.py)")
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

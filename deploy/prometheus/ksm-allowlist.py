#!/usr/bin/env python3
"""Merge kerneleval's kube-state-metrics label allowlist into a release's own values.

    helm get values kube-prometheus-stack -n monitoring -o yaml \\
      | deploy/prometheus/ksm-allowlist.py > ksm-allowlist-values.yaml
    helm upgrade kube-prometheus-stack prometheus-community/kube-prometheus-stack \\
      -n monitoring --reuse-values -f ksm-allowlist-values.yaml

kube-state-metrics exports a node label (kube_node_labels{label_...}) only when its
`metricLabelsAllowlist` allows it; kerneleval's coverage alerts read three
(kube-prometheus-stack-values.yaml beside this script, the one list of them). That value
is a list, and Helm replaces lists instead of merging them, so `-f` of kerneleval's list
alone would drop every other team's entries. And two entries for one resource
(`nodes=[a]`, `nodes=[b]`) do not add up in kube-state-metrics: one wins. So this reads the
release's values on stdin and prints values whose list is theirs with kerneleval's labels
added to the `nodes=[...]` entry: every other entry unchanged and in order, a `nodes=[*]`
kept as it is, nothing printed twice on a second run.
"""

import pathlib
import re
import sys

import yaml

HERE = pathlib.Path(__file__).resolve().parent
ENTRY = re.compile(r"^\s*([A-Za-z0-9.-]+)\s*=\s*\[(.*)\]\s*$")


def parse(entry):
    m = ENTRY.match(entry)
    if not m:
        raise ValueError(f"metricLabelsAllowlist entry {entry!r} is not RESOURCE=[label,...]")
    labels = [label.strip() for label in m.group(2).split(",") if label.strip()]
    return m.group(1), labels


def required():
    values = yaml.safe_load((HERE / "kube-prometheus-stack-values.yaml").read_text(encoding="utf-8"))
    return [parse(entry) for entry in values["kube-state-metrics"]["metricLabelsAllowlist"]]


def merge(existing, wanted):
    """`existing` entries with `wanted` (resource, labels) merged in, as entry strings."""
    entries = [parse(entry) for entry in existing]
    for resource, labels in wanted:
        same = [i for i, (r, _) in enumerate(entries) if r == resource]
        if not same:
            entries.append((resource, list(labels)))
            continue
        # Several entries for one resource: kube-state-metrics keeps one; join them here.
        first = same[0]
        joined = [label for i in same for label in entries[i][1]]
        for i in reversed(same[1:]):
            del entries[i]
        if "*" not in joined:
            joined += [label for label in labels if label not in joined]
        entries[first] = (resource, list(dict.fromkeys(joined)))
    return [f"{resource}=[{','.join(labels)}]" for resource, labels in entries]


def main():
    text = sys.stdin.read()
    values = yaml.safe_load(text) or {}
    if not isinstance(values, dict):
        print("error: stdin is not a values map (helm get values RELEASE -o yaml)", file=sys.stderr)
        return 2
    ksm = values.get("kube-state-metrics") or {}
    existing = ksm.get("metricLabelsAllowlist") or []
    try:
        merged = merge(existing, required())
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write("# kube-state-metrics' allowlist: the release's entries with kerneleval's "
                     "labels merged in\n")
    yaml.safe_dump({"kube-state-metrics": {"metricLabelsAllowlist": merged}}, sys.stdout,
                   default_flow_style=False, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

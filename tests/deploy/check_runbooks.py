#!/usr/bin/env python3
"""Check that every alert links a runbook section that exists.

    check_runbooks.py REPO_ROOT RULE_FILE [RULE_FILE...]

Every alerting rule must carry `annotations.runbook_url` (the key Alertmanager,
Grafana and kube-prometheus-stack's templates read; `runbook:` is refused), and
its value must be an absolute URL BASE#ANCHOR whose path ends in a file of this
repository (deploy/runbooks.md) and ANCHOR the GitHub anchor of one of its headings ("## KernelevalTargetDown" ->
#kernelevaltargetdown). A RULE_FILE is a Prometheus rule file (groups:) or a
PrometheusRule object (spec.groups).

Exit status: 0 when every link resolves, 1 otherwise, 2 on bad input.
"""

import pathlib
import re
import sys
import urllib.parse

try:
    import yaml
except ImportError:  # pragma: no cover - environment problem, not a test failure
    sys.exit("check_runbooks.py needs PyYAML (Debian: apt-get install python3-yaml)")


def anchor(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            found.add(anchor(m.group(1)))
    return found


def repository_path(root, url):
    """(path of the repository file an absolute runbook URL shows, problem or None).

    The URL is BASE#ANCHOR with BASE an absolute http(s) URL (the install-time setting of
    deploy/k8s/components/runbook-links) whose path ends in a file of this repository:
    https://git.example.com/org/kerneleval/-/blob/main/deploy/runbooks.md -> deploy/runbooks.md.
    """
    base = url.partition("#")[0]
    parsed = urllib.parse.urlsplit(base)
    if parsed.scheme not in ("https", "http") or not parsed.netloc:
        return None, ("not an absolute URL: a repository path does not open from "
                      "Alertmanager, Slack or PagerDuty")
    parts = [p for p in parsed.path.split("/") if p]
    for start in range(len(parts)):
        candidate = "/".join(parts[start:])
        if (root / candidate).is_file():
            return candidate, None
    return None, f"its path {parsed.path} does not end in a file of the repository"


def alert_rules(document):
    groups = document.get("groups") or (document.get("spec") or {}).get("groups") or []
    for group in groups:
        for rule in group.get("rules") or []:
            if "alert" in rule:
                yield rule


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    problems, checked = [], 0
    for name in argv[2:]:
        with open(name, encoding="utf-8") as f:
            documents = [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]
        for document in documents:
            for rule in alert_rules(document):
                checked += 1
                where = f"{name}: {rule['alert']}"
                annotations = rule.get("annotations") or {}
                if "runbook" in annotations:
                    problems.append(f"{where}: `runbook:` is not read by Alertmanager; "
                                    "use `runbook_url:`")
                url = annotations.get("runbook_url")
                if not url:
                    problems.append(f"{where}: no runbook_url annotation")
                    continue
                path, problem = repository_path(root, url)
                fragment = url.partition("#")[2]
                target = root / path if path else None
                if problem:
                    problems.append(f"{where}: runbook_url {url}: {problem}")
                elif not fragment:
                    problems.append(f"{where}: runbook_url {url}: no #section")
                elif fragment not in anchors(target):
                    problems.append(f"{where}: runbook_url {url}: {path} has no heading "
                                    f"with the anchor #{fragment}")
    for p in problems:
        print(p, file=sys.stderr)
    if checked == 0:
        print("no alerting rules found", file=sys.stderr)
        return 1
    print(f"{checked} alerts, {len(problems)} broken runbook links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Check that every kerneleval metric a dashboard or a rule file uses is exported.

    check_metric_names.py [--allow-absent PREFIX]... [--pushed FILE]... SOURCE [SOURCE...]
                          SCRAPE_FILE

SOURCE is a Grafana dashboard (.json), a Prometheus rule file (groups:) or a
`promtool test rules` file (tests: ... input_series). SCRAPE_FILE is the text
of a /metrics scrape. Every series name starting with `kerneleval_` that a
SOURCE reads must appear in the scrape, either as a sample or, for histogram
and summary families, as the _bucket/_sum/_count series of a declared family.
Names with a colon are recorded series: they must be defined by a `record:` in
one of the SOURCE files. Prometheus' own series (up, scrape_*) are not checked.

--allow-absent PREFIX tolerates missing names that start with PREFIX (for
example kerneleval_gpu_ on a host without NVML); they are listed, not failed.

--pushed FILE adds the names of a body pushed to the Pushgateway by something other
than the server (the same text format; the Pushgateway's scrape serves them): the
fleet-validation report, as `fleet-validate.py --render-push` writes it. Names are
reported with the file they came from.

Exit status: 0 when every name resolves, 1 otherwise, 2 on bad input.
"""

import argparse
import json
import os
import re
import sys

try:
    import yaml
except ImportError:  # pragma: no cover - environment problem, not a test failure
    sys.exit("check_metric_names.py needs PyYAML (Debian: apt-get install python3-yaml)")

# A PromQL identifier; metric names may contain colons (recording rules).
_IDENT = re.compile(r"(?<![\w.:$])[A-Za-z_:][A-Za-z0-9_:]*")
# Quoted strings hold label values and regexes, never metric names.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_PREFIX = "kerneleval_"


def series_names(expr):
    """Metric and recorded-series names read by a PromQL expression."""
    stripped = _STRING.sub('""', expr)
    names = set()
    for token in _IDENT.findall(stripped):
        if token.startswith(_PREFIX) or (":" in token and _PREFIX in token):
            names.add(token)
    return names


def exposed_names(scrape_text):
    """Series names a scrape makes queryable."""
    names = set()
    for line in scrape_text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                family, kind = parts[2], parts[3]
                if kind == "histogram":
                    names.update(family + s for s in ("_bucket", "_sum", "_count"))
                elif kind == "summary":
                    names.update((family, family + "_sum", family + "_count"))
                else:
                    names.add(family)
            continue
        match = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line)
        if match:
            names.add(match.group(0))
    return names


def _dashboard_queries(dashboard):
    """(where, expr) for every panel target and templating query."""
    def walk(panels):
        for panel in panels or []:
            for target in panel.get("targets", []) or []:
                if target.get("expr"):
                    yield f"panel {panel.get('id')} ({panel.get('title')!r}) target {target.get('refId')}", target["expr"]
            yield from walk(panel.get("panels"))

    yield from walk(dashboard.get("panels"))
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var.get("type") == "query" and isinstance(query, str):
            yield f"variable {var.get('name')}", query


def references(path):
    """(used, defined): used maps name -> where; defined is the recorded names."""
    used, defined = {}, set()

    def use(expr, where):
        for name in series_names(expr):
            used.setdefault(name, where)

    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if path.endswith(".json"):
        for where, expr in _dashboard_queries(json.loads(text)):
            use(expr, where)
        return used, defined

    document = yaml.safe_load(text) or {}
    for group in document.get("groups", []) or []:
        for rule in group.get("rules", []) or []:
            name = rule.get("record") or rule.get("alert")
            if "record" in rule:
                defined.add(rule["record"])
            use(str(rule.get("expr", "")), f"rule {name} in group {group.get('name')}")
    # A promtool test file's own rule files define the recorded series it reads.
    for rule_file in document.get("rule_files", []) or []:
        rule_path = os.path.join(os.path.dirname(path), rule_file)
        defined |= references(rule_path)[1]
    for test in document.get("tests", []) or []:
        for series in test.get("input_series", []) or []:
            name = str(series.get("series", "")).split("{", 1)[0].strip()
            if name.startswith(_PREFIX):
                used.setdefault(name, f"input series of test {test.get('name')!r}")
        for case in test.get("promql_expr_test", []) or []:
            use(str(case.get("expr", "")), f"expression test of {test.get('name')!r}")
    return used, defined


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--allow-absent", action="append", default=[], metavar="PREFIX",
                        help="tolerate missing names with this prefix (repeatable)")
    parser.add_argument("--pushed", action="append", default=[], metavar="FILE",
                        help="a body pushed to the Pushgateway whose names also count (repeatable)")
    parser.add_argument("sources", nargs="+", metavar="SOURCE")
    parser.add_argument("scrape", metavar="SCRAPE_FILE")
    args = parser.parse_args(argv)

    try:
        with open(args.scrape, encoding="utf-8") as handle:
            exposed = exposed_names(handle.read())
        pushed = {}
        for path in args.pushed:
            with open(path, encoding="utf-8") as handle:
                for name in exposed_names(handle.read()):
                    pushed.setdefault(name, path)
        used, defined = {}, set()
        for source in args.sources:
            source_used, source_defined = references(source)
            for name, where in source_used.items():
                used.setdefault(name, f"{source}: {where}")
            defined |= source_defined
    except (OSError, ValueError, yaml.YAMLError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    missing, tolerated = [], []
    for name in sorted(used):
        if ":" in name:
            if name not in defined:
                missing.append(f"{name} (recorded series with no `record:` rule) used by {used[name]}")
        elif name in pushed and name not in exposed:
            print(f"note: {name} is pushed ({pushed[name]}), not in the server's scrape")
        elif name not in exposed:
            if any(name.startswith(prefix) for prefix in args.allow_absent):
                tolerated.append(name)
            else:
                missing.append(f"{name} used by {used[name]}")

    for name in tolerated:
        print(f"note: {name} is absent from the scrape (allowed)")
    for line in missing:
        print(f"missing: {line}", file=sys.stderr)
    checked = len(used) - len(missing)
    print(f"{checked} of {len(used)} referenced series names resolve against "
          f"{' and '.join([args.scrape] + args.pushed)}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

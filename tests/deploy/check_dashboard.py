#!/usr/bin/env python3
"""Validate a Grafana Classic dashboard without Grafana.

    check_dashboard.py DASHBOARD.json [--rules-out FILE] [--promtool PROMTOOL]

Structure: uid, schemaVersion, __inputs DS_PROMETHEUS, a `datasource` variable
of type datasource, the device / suite / implementation variables, unique
integer panel ids, a gridPos on every panel that fits the 24-column grid and
overlaps no other panel, a refId (unique within its panel) and an expr on every
target, and datasource references that resolve to a variable or an input.

PromQL: every target expr and every label_values() selector is written as a
recording rule to FILE (Grafana's $__ intervals become 5m, template variables
become .*). With --promtool the file is checked with `promtool check rules`.

Exit status: 0 when valid, 1 on a finding, 2 on unreadable input.
"""

import argparse
import json
import re
import subprocess
import sys

GRID_COLUMNS = 24
REQUIRED_VARIABLES = ("device", "suite", "implementation")
_VARIABLE_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", re.S)


def all_panels(panels):
    for panel in panels or []:
        yield panel
        yield from all_panels(panel.get("panels"))


def referenced_variables(text):
    for match in _VARIABLE_REF.finditer(text):
        yield next(group for group in match.groups() if group)


def to_promql(expr):
    """A dashboard expression with Grafana's macros replaced by plain PromQL."""
    expr = re.sub(r"\$\{?__(rate_interval|interval|range)\}?", "5m", expr)
    return _VARIABLE_REF.sub(".*", expr)


def check(dashboard):
    """Findings (strings) and the (record name, expr) pairs to check with promtool."""
    problems, exprs = [], []

    uid = dashboard.get("uid")
    if not isinstance(uid, str) or not re.fullmatch(r"[A-Za-z0-9_-]{8,40}", uid):
        problems.append(f"uid {uid!r} must be 8-40 characters of [A-Za-z0-9_-]")
    if not dashboard.get("title"):
        problems.append("dashboard has no title")
    if not isinstance(dashboard.get("schemaVersion"), int) or dashboard["schemaVersion"] < 36:
        problems.append(f"schemaVersion {dashboard.get('schemaVersion')!r} is not a Classic model >= 36")
    if dashboard.get("id") is not None:
        problems.append("id must be null so that importing never overwrites another dashboard")

    inputs = {item.get("name"): item for item in dashboard.get("__inputs", [])}
    ds_input = inputs.get("DS_PROMETHEUS")
    if not ds_input or ds_input.get("type") != "datasource" or ds_input.get("pluginId") != "prometheus":
        problems.append("__inputs lacks DS_PROMETHEUS (type datasource, pluginId prometheus)")

    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    ds_var = variables.get("datasource")
    if not ds_var or ds_var.get("type") != "datasource" or ds_var.get("query") != "prometheus":
        problems.append("templating lacks a `datasource` variable of type datasource for prometheus")
    datasource_names = {n for n, v in variables.items() if v.get("type") == "datasource"} | set(inputs)

    def check_datasource(ref, where):
        if ref is None:
            problems.append(f"{where}: no datasource")
            return
        uid_text = ref.get("uid", "") if isinstance(ref, dict) else str(ref)
        if isinstance(ref, dict) and ref.get("type") == "grafana":
            return  # built-in annotations
        if isinstance(ref, dict) and ref.get("type") != "prometheus":
            problems.append(f"{where}: datasource type {ref.get('type')!r} is not prometheus")
        names = list(referenced_variables(uid_text))
        if not names:
            problems.append(f"{where}: datasource {uid_text!r} is fixed; use ${{datasource}}")
        for name in names:
            if name not in datasource_names:
                problems.append(f"{where}: datasource ${{{name}}} resolves to no variable or input")

    def check_variables_used(text, where):
        for name in referenced_variables(text):
            if not name.startswith("__") and name not in variables:
                problems.append(f"{where}: uses undefined variable ${name}")

    # The variable's default is the data source chosen on import (${DS_PROMETHEUS}).
    current = (ds_var or {}).get("current", {}).get("value", "")
    for name in referenced_variables(current if isinstance(current, str) else ""):
        if name not in inputs:
            problems.append(f"datasource variable: default ${{{name}}} is not an __inputs entry")

    for name in REQUIRED_VARIABLES:
        var = variables.get(name)
        query = (var or {}).get("query")
        query = query.get("query") if isinstance(query, dict) else query
        if not var or var.get("type") != "query" or not _LABEL_VALUES.match(query or ""):
            problems.append(f"variable {name!r} missing or not a label_values() query")
    for name, var in variables.items():
        if var.get("type") != "query":
            continue
        check_datasource(var.get("datasource"), f"variable {name}")
        query = var.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        match = _LABEL_VALUES.match(query or "")
        if match:
            check_variables_used(match.group(1), f"variable {name}")
            exprs.append((f"dashboard_variable_{name}", to_promql(match.group(1))))

    seen_ids, rects = set(), []
    for panel in all_panels(dashboard.get("panels")):
        pid = panel.get("id")
        where = f"panel {pid} ({panel.get('title')!r})"
        if not isinstance(pid, int):
            problems.append(f"{where}: id must be an integer")
        elif pid in seen_ids:
            problems.append(f"{where}: duplicate id")
        seen_ids.add(pid)

        grid = panel.get("gridPos") or {}
        if not all(isinstance(grid.get(k), int) for k in ("h", "w", "x", "y")):
            problems.append(f"{where}: gridPos needs integer h, w, x, y")
        else:
            if grid["x"] < 0 or grid["w"] <= 0 or grid["x"] + grid["w"] > GRID_COLUMNS:
                problems.append(f"{where}: gridPos {grid} leaves the {GRID_COLUMNS}-column grid")
            for other, rect in rects:
                if (grid["x"] < rect["x"] + rect["w"] and rect["x"] < grid["x"] + grid["w"]
                        and grid["y"] < rect["y"] + rect["h"] and rect["y"] < grid["y"] + grid["h"]):
                    problems.append(f"{where}: overlaps panel {other}")
            rects.append((pid, grid))

        if panel.get("type") == "row":
            continue
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        check_datasource(panel.get("datasource"), where)
        ref_ids = set()
        for target in targets:
            ref = target.get("refId")
            if not ref:
                problems.append(f"{where}: a target has no refId")
            elif ref in ref_ids:
                problems.append(f"{where}: duplicate refId {ref}")
            ref_ids.add(ref)
            check_datasource(target.get("datasource"), f"{where} target {ref}")
            expr = target.get("expr")
            if not expr or not expr.strip():
                problems.append(f"{where} target {ref}: no expr")
                continue
            check_variables_used(expr, f"{where} target {ref}")
            exprs.append((f"dashboard_panel_{pid}_{ref}", to_promql(expr)))
    return problems, exprs


def rules_yaml(exprs):
    """A Prometheus rule file with one recording rule per expression (JSON is valid YAML)."""
    rules = [{"record": name, "expr": expr} for name, expr in exprs]
    return json.dumps({"groups": [{"name": "dashboard-expressions", "rules": rules}]}, indent=2) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dashboard")
    parser.add_argument("--rules-out", help="write the expressions as recording rules here")
    parser.add_argument("--promtool", help="promtool binary to check the written rules with")
    args = parser.parse_args(argv)
    if args.promtool and not args.rules_out:
        parser.error("--promtool needs --rules-out")

    try:
        with open(args.dashboard, encoding="utf-8") as handle:
            dashboard = json.load(handle)
    except (OSError, ValueError) as error:
        print(f"error: {args.dashboard}: {error}", file=sys.stderr)
        return 2

    problems, exprs = check(dashboard)
    for problem in problems:
        print(f"{args.dashboard}: {problem}", file=sys.stderr)

    if args.rules_out:
        with open(args.rules_out, "w", encoding="utf-8") as handle:
            handle.write(rules_yaml(exprs))
        if args.promtool:
            result = subprocess.run([args.promtool, "check", "rules", args.rules_out], check=False)
            if result.returncode != 0:
                problems.append("promtool rejected an expression")
    print(f"{len(exprs)} expressions, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Validate a Grafana Classic dashboard without Grafana.

    check_dashboard.py DASHBOARD.json [--rules-out FILE] [--promtool PROMTOOL]

Structure: uid, schemaVersion, a `datasource` variable of type datasource
whose default is left to Grafana, and no import-time `${DS_...}` input (the
Grafana sidecar provisions files as they are and would keep the literal); the
cluster / model / node / device / suite / implementation variables, and no
query keyed on `instance` (pod addresses change; nodes do not); unique integer
panel ids, a gridPos on every panel that fits the 24-column grid and overlaps
no other panel, a refId (unique within its panel) and an expr on every target,
and datasource references that resolve to the datasource variable.

Fleet views: the panels the fleet needs exist (coverage, worst GPUs against
the fleet median, queue saturation, error budget, device-host restarts);
per-workload time series are limited with topk / bottomk; SOL and temperature
panels carry thresholds.

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
REQUIRED_VARIABLES = ("cluster", "model", "node", "device", "suite", "implementation")
# Series every fleet dashboard must show: (what, a substring of some target expr).
REQUIRED_QUERIES = (
    ("coverage: nodes benchmarked", "cluster:kerneleval_benchmarked_nodes:count6h"),
    ("coverage: pool servers ready", "cluster:kerneleval_ready_servers:count"),
    ("worst GPUs against the fleet median", "node_gpu:kerneleval_benchmark_sol_ratio:vs_fleet_median"),
    ("queue saturation", "kerneleval_queue_utilization"),
    ("error budget over 30 days", "[30d]"),
    ("device-host restarts", "kerneleval_device_host_restarts_total"),
)
# Per-workload series: thousands at fleet scale, so time series of them draw the worst k.
PER_WORKLOAD = ("kerneleval_benchmark_latency_seconds", "kerneleval_benchmark_sol_ratio",
                "kerneleval_benchmark_suite_sol_ratio", "kerneleval_benchmark_suite_mean_latency_seconds")
# Panels that read these need thresholds (colour bands or lines).
THRESHOLDED = ("sol_ratio", "kerneleval_gpu_temperature_celsius")
_VARIABLE_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", re.S)


def all_panels(panels):
    for panel in panels or []:
        yield panel
        yield from all_panels(panel.get("panels"))


def referenced_variables(text):
    for match in _VARIABLE_REF.finditer(text):
        yield next(group for group in match.groups() if group)


def to_promql(expr, values=None):
    """A dashboard expression with Grafana's macros replaced by plain PromQL: a custom
    variable by its current value (a number such as $topk), any other by `.*`."""
    values = values or {}
    expr = re.sub(r"\$\{?__(rate_interval|interval|range)\}?", "5m", expr)
    return _VARIABLE_REF.sub(
        lambda m: values.get(next(g for g in m.groups() if g), ".*"), expr)


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

    if dashboard.get("__inputs"):
        problems.append("__inputs present: the Grafana sidecar would keep its ${DS_...} literals; "
                        "use the datasource variable alone")
    if re.search(r"\$\{DS_[A-Z_]+\}", json.dumps(dashboard)):
        problems.append("a ${DS_...} import input is referenced; the sidecar never resolves it")
    inputs = {}

    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    ds_var = variables.get("datasource")
    if not ds_var or ds_var.get("type") != "datasource" or ds_var.get("query") != "prometheus":
        problems.append("templating lacks a `datasource` variable of type datasource for prometheus")
    datasource_names = {n for n, v in variables.items() if v.get("type") == "datasource"} | set(inputs)
    custom_values = {n: str(v.get("current", {}).get("value", "")) for n, v in variables.items()
                     if v.get("type") == "custom"}

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

    # Grafana picks the default Prometheus data source when none is set; a literal
    # variable reference here is what the sidecar would show as a broken selection.
    current = (ds_var or {}).get("current", {}).get("value", "")
    if isinstance(current, str) and list(referenced_variables(current)):
        problems.append(f"datasource variable: default {current!r} is a literal reference")
    if "instance" in variables:
        problems.append("variable `instance`: key on node (pod addresses change on every restart)")

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

    seen_ids, rects, all_exprs = set(), [], []
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
            if re.search(r'instance=~?"\$', expr):
                problems.append(f"{where} target {ref}: filters on instance; use node")
            if panel.get("type") == "timeseries" and any(n + "{" in expr for n in PER_WORKLOAD) \
                    and not re.match(r"\s*(topk|bottomk)\(", expr):
                problems.append(f"{where} target {ref}: per-workload series without topk / bottomk")
            all_exprs.append(expr)
            exprs.append((f"dashboard_panel_{pid}_{ref}", to_promql(expr, custom_values)))
        if any(any(t in (tg.get("expr") or "") for t in THRESHOLDED) for tg in targets) \
                and panel.get("type") in ("timeseries", "stat"):
            steps = (panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds") or {}).get("steps", [])
            if len(steps) < 2:
                problems.append(f"{where}: SOL and temperature panels need thresholds")
    for what, needle in REQUIRED_QUERIES:
        if not any(needle in e for e in all_exprs):
            problems.append(f"no panel shows {what} ({needle})")
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

#!/usr/bin/env python3
"""Sets benchmark reports (JSON from `kerneleval bench --format json`) of the same suite side
by side: per workload and implementation the median of each report in microseconds, the
spread (max - min) / min in percent, and, for two reports, the difference in microseconds.
Also the SM clock while each result was timed and the admission before it.

Usage: compare_reports.py LABEL=report.json [LABEL=report.json ...]"""
import json
import sys


def load(arg):
    label, _, path = arg.partition("=")
    with open(path) as f:
        return label, json.load(f)


def main(args):
    reports = [load(a) for a in args]
    keys, medians, clocks = [], {}, {}
    for label, report in reports:
        for r in report.get("results", []):
            key = (r.get("workload"), r.get("implementation"))
            if key not in keys:
                keys.append(key)
            medians[(label, key)] = float(r.get("latency", {}).get("median_seconds", 0)) * 1e6
            c, a = r.get("clocks", {}), r.get("admission", {})
            clocks[(label, key)] = (f"{float(c.get('sm_mhz_mean', 0)):.0f}"
                                    f" ({a.get('sm_mhz_before', '-')}->{a.get('sm_mhz_after', '-')},"
                                    f" {1e3 * float(a.get('settle_seconds', 0)):.0f} ms)")
    labels = [label for label, _ in reports]
    two = len(labels) == 2
    measured = {label: next((r.get("measured_as") for r in rep.get("results", [])), "") for label, rep in reports}
    print("measured as: " + "; ".join(f"{l}: {measured[l]}" for l in labels))
    print("| workload | implementation | " + " | ".join(f"{l} us" for l in labels)
          + (" | difference us" if two else "") + " | spread % | SM MHz while timed (admission: before->after, wait) |")
    print("|---|---|" + "---:|" * len(labels) + ("---:|" if two else "") + "---:|---|")
    worst = 0.0
    for key in keys:
        vals = [medians.get((l, key)) for l in labels]
        present = [v for v in vals if v]
        spread = 100 * (max(present) - min(present)) / min(present) if len(present) > 1 else 0
        worst = max(worst, spread)
        diff = f" | {vals[0] - vals[1]:+.3f}" if two and all(vals) else (" | -" if two else "")
        print(f"| {key[0]} | {key[1]} | " + " | ".join(f"{v:.3f}" if v else "-" for v in vals) + diff
              + f" | {spread:.2f} | " + "; ".join(clocks.get((l, key), "-") for l in labels) + " |")
    print(f"\nlargest spread: {worst:.2f}%")


if __name__ == "__main__":
    main(sys.argv[1:])

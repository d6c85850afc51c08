#!/usr/bin/env python3
"""Summarizes `ncu --csv --metrics gpu__time_duration.sum` over `kerneleval-kernel-bench --ncu
--no-unfused`: the fused kernel's launches come 5 per batch, in the bench's batch order; prints
the median per batch in microseconds, the independent timing to set beside the service's."""
import csv
import statistics
import sys

BATCHES = [1, 6, 34, 64, 79, 12383, 16254]
CALLS = 5
SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def main(path):
    rows = []
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row.get("Kernel Name", "")
        if "Fill" in name or "Flush" in name:
            continue
        value = float(row["Metric Value"].replace(",", ""))
        rows.append((name, value * SCALE.get(row.get("Metric Unit", "nsecond"), 1e-3)))
    print(f"{len(rows)} fused-kernel launches profiled")
    print("| batch | ncu gpu__time_duration median us | kernel |")
    print("|---:|---:|---|")
    for i, batch in enumerate(BATCHES):
        chunk = rows[i * CALLS:(i + 1) * CALLS]
        if not chunk:
            break
        print(f"| {batch} | {statistics.median(v for _, v in chunk):.2f} | {chunk[0][0][:60]} |")


if __name__ == "__main__":
    main(sys.argv[1])

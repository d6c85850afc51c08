#!/usr/bin/env python3
"""Summarizes `ncu --csv --metrics gpu__time_duration.sum[,dram__bytes_read.sum,
dram__bytes_write.sum]` over `kerneleval-kernel-bench --ncu --no-unfused`: the fused kernel's
launches come 5 per batch, in the bench's batch order; prints the median per batch of the
time in microseconds and, when profiled, of the DRAM bytes read and written in MB: the
independent timing and traffic to set beside the service's."""
import csv
import statistics
import sys
from collections import defaultdict

BATCHES = [1, 6, 34, 64, 79, 12383, 16254]
CALLS = 5
TIME_SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
BYTE_SCALE = {"byte": 1e-6, "Kbyte": 1e-3, "KB": 1e-3, "Mbyte": 1.0, "MB": 1.0, "Gbyte": 1e3,
              "GB": 1e3}
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]


def main(path):
    values = defaultdict(list)  # metric -> [(kernel name, value)] in launch order
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(lines):
        metric = row.get("Metric Name")
        if metric not in METRICS:
            continue
        name = row.get("Kernel Name", "")
        if "Fill" in name or "Flush" in name:
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "")
        scale = TIME_SCALE.get(unit, 1e-3) if metric.startswith("gpu__time") else BYTE_SCALE.get(unit, 1e-6)
        values[metric].append((name, value * scale))
    times = values[METRICS[0]]
    print(f"{len(times)} fused-kernel launches profiled")
    have_dram = bool(values[METRICS[1]])
    print("| batch | ncu gpu__time_duration median us |" + (" DRAM read MB | DRAM write MB |" if have_dram else "")
          + " kernel |")
    print("|---:|---:|" + ("---:|---:|" if have_dram else "") + "---|")
    for i, batch in enumerate(BATCHES):
        chunk = times[i * CALLS:(i + 1) * CALLS]
        if not chunk:
            break
        dram = ""
        if have_dram:
            rd = values[METRICS[1]][i * CALLS:(i + 1) * CALLS]
            wr = values[METRICS[2]][i * CALLS:(i + 1) * CALLS]
            dram = (f" {statistics.median(v for _, v in rd):.2f} |"
                    f" {statistics.median(v for _, v in wr):.2f} |")
        print(f"| {batch} | {statistics.median(v for _, v in chunk):.2f} |{dram} {chunk[0][0][:60]} |")


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""The service's profile of the built-in kernel (a `kerneleval bench --profile --format json`
report of fused_add_rmsnorm_h2048) beside Nsight Compute's figures for the same kernel at
the same batches (`ncu --csv --print-units base --metrics ... kerneleval-kernel-bench --ncu
--no-unfused`: 5 launches per batch in the bench's order, ncu's median of them). Prints a
markdown table, figure by figure, each cell "service / ncu (difference)".

  scripts/profile_vs_ncu.py REPORT.json NCU.csv
  scripts/profile_vs_ncu.py --submissions REPORT.json NCU.csv

With --submissions: every profiled result of the report at B = 79 and 16254 beside the ncu
launches of the same kernel with the same grid (ncu attached to the server's device hosts,
`scripts/gpu-profile.sh`), a table per implementation."""
import csv
import functools
import json
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

BATCHES = [1, 6, 34, 64, 79, 12383, 16254]
CALLS = 5
IMPL = "cuda_fused"

# (label, service figure, ncu metric): the service's side read from its derived figures
# where they have one, from its counters otherwise.
def service_figures(k):
    c = k.get("counters", {})
    stalls = {s["reason"]: s for s in k.get("stalls", [])}
    occ = k.get("occupancy", {})
    mem = k.get("memory", {})
    return {
        "duration (us)": c.get("gpu__time_duration.sum", 0) / 1e3,
        "DRAM read (MB)": mem.get("dram_read_bytes", 0) / 1e6,
        "DRAM write (MB)": mem.get("dram_write_bytes", 0) / 1e6,
        "L2 read (MB)": mem.get("l2_read_bytes", 0) / 1e6,
        "L2 write (MB)": mem.get("l2_write_bytes", 0) / 1e6,
        "L2 hit rate (%)": mem.get("l2_hit_rate_pct", 0),
        "sectors per load request": mem.get("load_sectors_per_request", 0),
        "sectors per store request": mem.get("store_sectors_per_request", 0),
        "SM throughput (%)": k.get("throughput", {}).get("sm_pct", 0),
        "memory throughput (%)": k.get("throughput", {}).get("memory_pct", 0),
        "DRAM throughput (%)": k.get("throughput", {}).get("dram_pct", 0),
        "L2 throughput (%)": k.get("throughput", {}).get("l2_pct", 0),
        "L1 throughput (%)": k.get("throughput", {}).get("l1_pct", 0),
        "achieved occupancy (%)": occ.get("achieved_pct", 0),
        "theoretical occupancy (%)": occ.get("theoretical_pct", 0),
        "registers per thread": k.get("launch", {}).get("registers_per_thread", 0),
        "long_scoreboard cycles per instruction":
            stalls.get("long_scoreboard", {}).get("cycles_per_instruction", 0),
        "FP operations (M)": k.get("roofline", {}).get("flops", 0) / 1e6,
    }


FLOPS = [("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 1),
         ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 1),
         ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 2),
         ("smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", 1),
         ("smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", 1),
         ("smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", 2)]


def ncu_figures(m):
    def get(name, scale=1.0):
        return m.get(name, 0.0) * scale
    ld = get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    st = get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    return {
        "duration (us)": get("gpu__time_duration.sum", 1e-3),
        "DRAM read (MB)": get("dram__bytes_read.sum", 1e-6),
        "DRAM write (MB)": get("dram__bytes_write.sum", 1e-6),
        "L2 read (MB)": get("lts__t_sectors_op_read.sum", 32e-6),
        "L2 write (MB)": get("lts__t_sectors_op_write.sum", 32e-6),
        "L2 hit rate (%)": get("lts__t_sector_hit_rate.pct"),
        "sectors per load request":
            get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") / ld if ld else 0,
        "sectors per store request":
            get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum") / st if st else 0,
        "SM throughput (%)": get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        "memory throughput (%)":
            get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        "DRAM throughput (%)": get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "L2 throughput (%)": get("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        "L1 throughput (%)": get("l1tex__throughput.avg.pct_of_peak_sustained_active"),
        "achieved occupancy (%)": get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        "theoretical occupancy (%)": get("sm__maximum_warps_per_active_cycle_pct"),
        "registers per thread": get("launch__registers_per_thread"),
        "long_scoreboard cycles per instruction":
            get("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"),
        "FP operations (M)": sum(get(n) * ops for n, ops in FLOPS) / 1e6,
    }


@functools.lru_cache(maxsize=None)  # each launch's name is asked for per result
def base_name(name):
    """A kernel's name without return type, parameters or template arguments, whichever tool
    wrote it: CUPTI gives a C++ kernel's mangled name, ncu its demangled one ("void
    fused_rows_vec16<0>(const __nv_bfloat16 *, ...)"); an extern "C" kernel is bare in both."""
    if name.startswith("_Z") and shutil.which("c++filt"):
        name = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    name = name.removeprefix("void ")
    return name.split("(")[0].split("<")[0].strip()


def ncu_launches(path):
    """[(kernel name, grid x, {metric: value})] in launch order; fills and flushes left out.
    Launches are told apart by process and ID: attached to the server, ncu profiles each device
    host."""
    launches = defaultdict(dict)  # (process, ID) -> metric -> value
    names, grids = {}, {}
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(lines):
        name = row.get("Kernel Name", "")
        if "Fill" in name or "Flush" in name:
            continue
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        launch = (int(row.get("Process ID") or 0), int(row["ID"]))
        launches[launch][row["Metric Name"]] = value
        names[launch] = name
        grids[launch] = int(row.get("Grid Size", "(0").strip("()").split(",")[0] or 0)
    return [(names[i], grids[i], launches[i]) for i in sorted(launches)]


def median_figures(metric_sets):
    chunk = [ncu_figures(m) for m in metric_sets]
    return {key: statistics.median(f[key] for f in chunk) for key in chunk[0]} if chunk else {}


def read_ncu(path):
    ordered = [metrics for _, _, metrics in ncu_launches(path)]
    per_batch = {}
    for i, batch in enumerate(BATCHES):
        figures = median_figures(ordered[i * CALLS:(i + 1) * CALLS])
        if figures:
            per_batch[batch] = figures
    return per_batch


def print_table(service, ncu, batches):
    print("| figure | " + " | ".join(f"B = {b}" for b in batches) + " |")
    print("|---|" + "---:|" * len(batches))
    for key in next(iter(service.values())):
        cells = []
        for b in batches:
            s = service[b][key]
            n = ncu.get(b, {}).get(key)
            if n is None:
                cells.append(f"{s:.3g} / -")
                continue
            diff = (s - n) / n * 100 if n else 0.0
            cells.append(f"{s:.3g} / {n:.3g} ({diff:+.0f}%)")
        print(f"| {key} | " + " | ".join(cells) + " |")


def submissions(report_path, ncu_path):
    report = json.load(open(report_path))
    try:
        launches = ncu_launches(ncu_path)
    except OSError as e:
        print(f"no ncu figures: {e}")
        return 1
    by_impl = defaultdict(dict)  # implementation -> batch -> (service figures, ncu figures)
    for r in report.get("results", []):
        batch = int(r.get("axes", {}).get("batch_size", 0))
        kernels = r.get("profile", {}).get("kernels", [])
        if batch not in (79, 16254) or not kernels:
            continue
        k = kernels[0]
        name = base_name(k.get("name", ""))
        grid = (k.get("launch", {}).get("grid") or [0])[0]
        same = [m for n, g, m in launches if base_name(n) == name and g == grid]
        by_impl[r["implementation"]][batch] = (service_figures(k), median_figures(same))
    if not by_impl:
        print(f"no profiled submission at B = 79 or 16254 in {report_path}")
        return 1
    for impl, rows in by_impl.items():
        print(f"\n{impl}:\n")
        batches = sorted(rows)
        print_table({b: rows[b][0] for b in batches}, {b: rows[b][1] for b in batches if rows[b][1]},
                    batches)
    return 0


def main(report_path, ncu_path):
    report = json.load(open(report_path))
    service = {}
    for r in report.get("results", []):
        if r.get("implementation") != IMPL:
            continue
        kernels = r.get("profile", {}).get("kernels", [])
        if kernels:
            service[int(r.get("axes", {}).get("batch_size", 0))] = service_figures(kernels[0])
    if not service:
        print(f"no profile of {IMPL} in {report_path}")
        return 1
    try:
        ncu = read_ncu(ncu_path)
    except OSError as e:
        print(f"no ncu figures: {e}")
        ncu = {}
    print_table(service, ncu, [b for b in BATCHES if b in service])
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--submissions":
        sys.exit(submissions(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

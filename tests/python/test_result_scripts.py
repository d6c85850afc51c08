"""The scripts that turn a GPU run's files into docs/results tables, on hand-made files whose
right answers are known: scripts/profile_vs_ncu.py --submissions pairs the service's profile of
a kernel with Nsight Compute's launches of the same kernel and grid, across the processes ncu
was attached to (the server's device hosts), whichever way each tool spells the name; and
scripts/summarize_report.py --source-lines lists where each kernel's warps waited."""

from __future__ import annotations

import csv
import json
import pathlib
import subprocess
import sys

from server_process import ROOT

SCRIPTS = pathlib.Path(ROOT) / "scripts"
HEADER = ["ID", "Process ID", "Process Name", "Kernel Name", "Grid Size", "Metric Name",
          "Metric Unit", "Metric Value"]


def ncu_csv(path: pathlib.Path, launches) -> None:
    """launches: (process, ID, kernel name, grid x, {metric: value}); ncu's CSV with the
    connection lines it writes around it."""
    with open(path, "w", newline="") as f:
        f.write("==PROF== Connected to process 11 (kerneleval-device-host)\n")
        writer = csv.writer(f, quoting=csv.QUOTE_ALL)
        writer.writerow(HEADER)
        for process, launch, name, grid, metrics in launches:
            for metric, value in metrics.items():
                writer.writerow([launch, process, "kerneleval-device-host", name,
                                 f"({grid}, 1, 1)", metric, "", f"{value:,}"])
        f.write("==PROF== Disconnected from process 11\n")


def service_report(path: pathlib.Path, name: str, grid: int, dram_read: float) -> None:
    kernel = {"name": name, "launch": {"grid": [grid, 1, 1], "registers_per_thread": 48},
              "memory": {"dram_read_bytes": dram_read}, "counters": {}}
    report = {"results": [{"implementation": "fused_rows_vec16", "workload": "batch_size=16254",
                           "axes": {"batch_size": "16254"},
                           "profile": {"available": True, "kernels": [kernel]}}]}
    path.write_text(json.dumps(report))


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_submissions_pair_by_base_name_and_grid_across_processes(tmp_path) -> None:
    # CUPTI names a C++ kernel by its mangled name; ncu by its demangled one.
    service_report(tmp_path / "report.json", "_Z16fused_rows_vec16ILi0EEvPK13__nv_bfloat16i",
                   16254, 133.2e6)
    ncu_csv(tmp_path / "ncu.csv", [
        (12, 0, "void fused_rows_vec16<0>(const __nv_bfloat16 *, int)", 79,
         {"dram__bytes_read.sum": 0.66e6}),
        (12, 1, "void fused_rows_vec16<0>(const __nv_bfloat16 *, int)", 16254,
         {"dram__bytes_read.sum": 133.0e6, "launch__registers_per_thread": 48}),
        (12, 2, "void fused_rows_vec16<0>(const __nv_bfloat16 *, int)", 16254,
         {"dram__bytes_read.sum": 135.0e6, "launch__registers_per_thread": 48}),
        # The same ID in the other device host: another kernel. Not this one.
        (11, 1, "kerneleval::SplitRowKernel", 16254,
         {"dram__bytes_read.sum": 999e6, "launch__registers_per_thread": 46}),
    ])
    out = run(str(SCRIPTS / "profile_vs_ncu.py"), "--submissions", str(tmp_path / "report.json"),
              str(tmp_path / "ncu.csv"))
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in out.splitlines() if line.startswith("| ") and "B = " not in line}
    # The median of the two launches of that kernel at that grid: 134 MB; the service 133.2.
    assert rows["DRAM read (MB)"] == "133 / 134 (-1%)", out
    assert rows["registers per thread"] == "48 / 48 (+0%)", out


def test_source_lines_list_each_kernels_top_lines(tmp_path) -> None:
    lines = {"samples": 1000, "lines": [
        {"file": "/src/add_rmsnorm.py", "line": 52, "samples": 700, "share_pct": 70.0,
         "reasons": [{"reason": "long_scoreboard", "samples": 630},
                     {"reason": "selected", "samples": 70}]},
        {"file": "/src/add_rmsnorm.py", "line": 59, "samples": 300, "share_pct": 30.0,
         "reasons": [{"reason": "wait", "samples": 300}]}]}
    report = {"results": [
        {"implementation": "cute_add_rmsnorm", "workload": "batch_size=79", "profile": {
            "kernels": [{"source_lines": lines,
                         "advice": [{"rule": "waits_on_memory_at_line"}]}]}},
        {"implementation": "cuda_fused", "workload": "batch_size=79", "profile": {
            "kernels": [{"source_lines": {"unavailable_reason": "built in"}}]}}]}
    (tmp_path / "report.json").write_text(json.dumps(report))
    out = run(str(SCRIPTS / "summarize_report.py"), "--source-lines",
              str(tmp_path / "report.json"))
    assert ("| batch_size=79 | cute_add_rmsnorm | 1000 | `add_rmsnorm.py:52` | 70% |"
            " long_scoreboard 90%, selected 10% | waits_on_memory_at_line |") in out, out
    assert "| | | | `add_rmsnorm.py:59` | 30% | wait 100% |  |" in out, out
    assert "| batch_size=79 | cuda_fused | 0 | none: built in |" in out, out

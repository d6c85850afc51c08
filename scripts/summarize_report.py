#!/usr/bin/env python3
"""Prints a benchmark report (the JSON that `kerneleval bench --format json` writes) as a
compact markdown table: per workload and implementation the median, min and p99 in
microseconds, GB/s, SOL % against each peak, how the number was measured (timer, cache,
protocol: every row says it, whatever the server could do), the SM clock while it was
timed, DRAM bytes measured against declared when asked for, integrity flags and the
correctness verdict.

  scripts/summarize_report.py REPORT.json
  scripts/summarize_report.py --source-lines REPORT.json   (a profiled report: where each
      kernel's warps waited, its top lines with their top reasons, and the advice's rules)"""
import json
import sys


def us(seconds):
    return f"{float(seconds) * 1e6:.2f}"


def mb(value):
    return f"{float(value) / 1e6:.2f}"


def measured_as(r, proto):
    if r.get("measured_as"):
        return r["measured_as"]
    graph = f", graph x{proto.get('graph_calls')}" if proto.get("cuda_graph") else ""
    return f"{r.get('timer', '')}, {proto.get('cache', '')}{graph}"


def dram_text(d):
    if not d:
        return ""
    if not d.get("available"):
        return d.get("unavailable_reason", "counters unavailable")
    return (f"{mb(d.get('read_bytes', 0))} / {mb(d.get('declared_read_bytes', 0))} R, "
            f"{mb(d.get('write_bytes', 0))} / {mb(d.get('declared_write_bytes', 0))} W MB")


def main(path):
    with open(path) as f:
        report = json.load(f)
    proto = report.get("protocol", {})
    print(f"suite {report.get('suite')}: requested timer {proto.get('timer')}, cache {proto.get('cache')},"
          f" graph {proto.get('cuda_graph', False)} ({proto.get('graph_calls')} calls), warmup {proto.get('warmup')},"
          f" repetitions {proto.get('repetitions')}, DRAM bytes {proto.get('measure_dram_bytes', False)}")
    for env in report.get("environments", []):
        dev = env.get("device", {})
        before, after = env.get("clocks_before", {}), env.get("clocks_after", {})
        during = env.get("clocks_during", {})
        print(f"device {dev.get('name')} {dev.get('model')} {dev.get('uuid')}; driver {env.get('driver_version')},"
              f" CUDA {env.get('cuda_runtime_version')}; SM clock {before.get('sm_mhz')} before,"
              f" {during.get('sm_mhz_min')}-{during.get('sm_mhz_max')} MHz while timing"
              f" ({during.get('samples', 0)} readings), {after.get('sm_mhz')} after; memory"
              f" {during.get('memory_mhz_max', before.get('memory_mhz'))} MHz; throttled {env.get('throttled', False)};"
              f" server's CUPTI: {env.get('cupti_status')} (each row says which timer it used)")
    print()
    print("| workload | implementation | median us | min us | p99 us | GB/s | SOL % (attr / sheet / copy) |"
          " measured as | SM MHz | DRAM measured / declared | correct | rank | flags |")
    print("|---|---|---:|---:|---:|---:|---|---|---:|---|---|---:|---|")
    for r in report.get("results", []):
        lat = r.get("latency", {})
        sols = " / ".join(f"{100 * float(s.get('sol_ratio', 0)):.1f}" for s in r.get("sol", []))
        corr = r.get("correctness", {})
        verdict = "PASS" if corr.get("passed") else f"FAIL ({corr.get('detail', r.get('error', ''))})"
        clocks = r.get("clocks", {})
        sm = f"{float(clocks.get('sm_mhz_mean', 0)):.0f}" if clocks.get("samples") else "-"
        flags = "; ".join(r.get("integrity_flags", [])) or "-"
        print(f"| {r.get('workload')} | {r.get('implementation')} | {us(lat.get('median_seconds', 0))} |"
              f" {us(lat.get('min_seconds', 0))} | {us(lat.get('p99_seconds', 0))} |"
              f" {float(r.get('bytes_per_second', 0)) / 1e9:.0f} | {sols} | {measured_as(r, proto)} | {sm} |"
              f" {dram_text(r.get('dram'))} | {verdict} | {r.get('rank', 0)} | {flags} |")
    print()
    for s in report.get("summaries", []):
        print(f"- {s.get('implementation')} on {s.get('device')}: rank {s.get('rank', 0)}, suite mean"
              f" {us(s.get('mean_latency_seconds', 0))} us, geomean SOL {100 * float(s.get('geomean_sol_ratio', 0)):.1f} %,"
              f" passed {s.get('passed', 0)}, failed {s.get('failed', 0)}")


def source_lines(path, top=4):
    report = json.load(open(path))
    print("| workload | implementation | samples | line | share | top reasons | rules |")
    print("|---|---|---:|---|---:|---|---|")
    for r in report.get("results", []):
        for k in r.get("profile", {}).get("kernels", []):
            lines = k.get("source_lines", {})
            rules = ", ".join(a.get("rule", "") for a in k.get("advice", []))
            head = f"| {r.get('workload')} | {r.get('implementation')} | {lines.get('samples', 0)} |"
            if not lines.get("lines"):
                print(f"{head} none: {lines.get('unavailable_reason', '')} | | | {rules} |")
                continue
            for i, line in enumerate(lines["lines"][:top]):
                total = int(line.get("samples", 0)) or 1
                reasons = ", ".join(f"{x.get('reason')} {100 * int(x.get('samples', 0)) / total:.0f}%"
                                    for x in line.get("reasons", [])[:3])
                where = f"`{line.get('file', '').split('/')[-1]}:{line.get('line', 0)}`"
                print(f"{head if i == 0 else '| | | |'} {where} | {float(line.get('share_pct', 0)):.0f}% |"
                      f" {reasons} | {rules if i == 0 else ''} |")


if __name__ == "__main__":
    if sys.argv[1] == "--source-lines":
        source_lines(sys.argv[2])
    else:
        main(sys.argv[1])

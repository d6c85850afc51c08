#!/usr/bin/env python3
"""Prints a benchmark report (the JSON that `kerneleval bench --format json` writes) as a
compact markdown table: per workload and implementation the median, min and p99 in
microseconds, GB/s, SOL % against each peak, the timer and the correctness verdict."""
import json
import sys


def us(seconds):
    return f"{float(seconds) * 1e6:.2f}"


def main(path):
    with open(path) as f:
        report = json.load(f)
    proto = report.get("protocol", {})
    print(f"suite {report.get('suite')}: cache {proto.get('cache')}, graph {proto.get('cuda_graph', False)}"
          f" ({proto.get('graph_calls')} calls), warmup {proto.get('warmup')}, repetitions {proto.get('repetitions')}")
    for env in report.get("environments", []):
        dev = env.get("device", {})
        before, after = env.get("clocks_before", {}), env.get("clocks_after", {})
        print(f"device {dev.get('name')} {dev.get('model')} {dev.get('uuid')}; driver {env.get('driver_version')},"
              f" CUDA {env.get('cuda_runtime_version')}; SM clock {before.get('sm_mhz')} -> {after.get('sm_mhz')} MHz,"
              f" memory {before.get('memory_mhz')} MHz; throttled {env.get('throttled', False)};"
              f" timer: {env.get('cupti_status')}")
    print()
    print("| workload | implementation | median us | min us | p99 us | GB/s | SOL % (attr / sheet / copy) | timer | correct | rank |")
    print("|---|---|---:|---:|---:|---:|---|---|---|---:|")
    for r in report.get("results", []):
        lat = r.get("latency", {})
        sols = " / ".join(f"{100 * float(s.get('sol_ratio', 0)):.1f}" for s in r.get("sol", []))
        corr = r.get("correctness", {})
        verdict = "PASS" if corr.get("passed") else f"FAIL ({corr.get('detail', r.get('error', ''))})"
        print(f"| {r.get('workload')} | {r.get('implementation')} | {us(lat.get('median_seconds', 0))} |"
              f" {us(lat.get('min_seconds', 0))} | {us(lat.get('p99_seconds', 0))} |"
              f" {float(r.get('bytes_per_second', 0)) / 1e9:.0f} | {sols} | {r.get('timer', '')} | {verdict} |"
              f" {r.get('rank', 0)} |")
    print()
    for s in report.get("summaries", []):
        print(f"- {s.get('implementation')} on {s.get('device')}: rank {s.get('rank', 0)}, suite mean"
              f" {us(s.get('mean_latency_seconds', 0))} us, geomean SOL {100 * float(s.get('geomean_sol_ratio', 0)):.1f} %,"
              f" passed {s.get('passed', 0)}, failed {s.get('failed', 0)}")


if __name__ == "__main__":
    main(sys.argv[1])

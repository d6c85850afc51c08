#!/usr/bin/env python3
"""Fixtures for the profile rules' tests (tests/core/kernel_profile_fixtures_test.cc) from a
`kerneleval bench --profile --format json` report taken on a real GPU: for each chosen
implementation and batch, what the device counted (ProfileReport.device and each kernel's
launch and counters, no derived figure), with its provenance (GPU, driver, CUPTI's chip,
the server's revision, the date, the protocol), as tests/core/fixtures/profile_<gpu>_<impl>_b<batch>.json.

  scripts/profile_fixtures.py REPORT.json OUT_DIR IMPL[,IMPL...] BATCH[,BATCH...]
"""
import json
import os
import re
import sys

RAW_KERNEL_KEYS = ("index", "name", "launch", "counters")


def main(report_path, out_dir, impls, batches):
    report = json.load(open(report_path))
    env = (report.get("environments") or [{}])[0]
    device = env.get("device", {})
    gpu = re.sub(r"[^a-z0-9]+", "", device.get("model", "gpu").lower().replace("nvidia", ""))[:12]
    written = 0
    for r in report.get("results", []):
        batch = int(r.get("axes", {}).get("batch_size", 0))
        if r.get("implementation") not in impls or batch not in batches:
            continue
        profile = r.get("profile", {})
        if not profile.get("available"):
            print(f"{r['implementation']} b{batch}: no profile ({profile.get('unavailable_reason')})")
            continue
        fixture = {
            "provenance": {
                "gpu": device.get("model"), "driver": env.get("driver_version"),
                "cuda_runtime": env.get("cuda_runtime_version"),
                "server_revision": env.get("git_revision"), "taken": env.get("timestamp"),
                "suite": report.get("suite"), "workload": r.get("workload"),
                "implementation": r.get("implementation"), "measured_as": r.get("measured_as"),
                "source": profile.get("source"),
                "declared_read_bytes": r.get("dram", {}).get("declared_read_bytes", 0) or 0,
                "declared_write_bytes": r.get("dram", {}).get("declared_write_bytes", 0) or 0,
                "timed_median_seconds": r.get("latency", {}).get("median_seconds"),
            },
            "report": {
                "available": True,
                "source": profile.get("source"),
                "device": profile.get("device"),
                "kernels": [{k: v for k, v in kern.items() if k in RAW_KERNEL_KEYS}
                            for kern in profile.get("kernels", [])],
            },
        }
        path = os.path.join(out_dir, f"profile_{gpu}_{r['implementation']}_b{batch}.json")
        with open(path, "w") as f:
            json.dump(fixture, f, indent=1, sort_keys=True)
            f.write("\n")
        written += 1
        print(path)
    return 0 if written else 1


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], set(sys.argv[3].split(",")),
                  {int(b) for b in sys.argv[4].split(",")}))

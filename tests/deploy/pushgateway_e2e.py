#!/usr/bin/env python3
"""End to end: `kerneleval bench --pushgateway` into a real Prometheus Pushgateway.

    pushgateway_e2e.py --server PATH --client PATH [--suites-dir DIR] [--pushgateway PATH]

Starts two kerneleval-server processes on loopback (CPU backend) and a
`prometheus-pushgateway` on a free loopback port (in memory, no persistence
file), then:

  1. one target: `kerneleval bench --suite fused_add_rmsnorm_h2048
     --repetitions 2 --warmup 1 --pushgateway http://127.0.0.1:PORT`, pushed
     twice with NODE_NAME=node-a and node-b as the fleet-validation Jobs do
     (same target, 127.0.0.1); the gateway's /metrics must hold one group per
     node, each under job=<job>, instance=<target> and node=<node>, with every
     result gauge of the report and its values (correct == 1 for cpu_fused),
     the suite gauges, runtime errors and the last-run timestamp, labelled by
     the protocol (cold_custom: warm-up and repetitions are not the defaults);
  2. two targets (the fan-out) pushed under another job without NODE_NAME: one
     group per target;
  3. a gateway that is not there: exit code 1, an error on stderr, and the
     report still printed.

Exits 77 (skipped) only when the pushgateway binary is absent.
"""

import argparse
import json
import math
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SUITE = "fused_add_rmsnorm_h2048"
JOB = "kerneleval-e2e"
FANOUT_JOB = "kerneleval-e2e-fanout"
STARTUP_SECONDS = 60
BENCH_SECONDS = 120
SKIP = 77
INSTALL_HINT = "apt-get install prometheus-pushgateway"
# The CLI's exit code for a server or gateway it could not reach (client/exit_codes.h).
EXIT_INFRASTRUCTURE = 5


class CheckFailed(Exception):
    pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command, log_path):
    with open(log_path, "w", encoding="utf-8") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def stop(process):
    """SIGTERM to the process group, then SIGKILL if it lingers."""
    if process is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.poll() is not None:
            break
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def tail(path, chars=3000):
    try:
        return pathlib.Path(path).read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError as error:
        return f"(unreadable: {error})"


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read().decode("utf-8")


def start_server(binary, suites_dir, work, name):
    port_file = work / f"{name}.ports.json"
    command = [binary, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
               "--port-file", str(port_file), "--device", "cpu", "--drain-seconds", "1"]
    if suites_dir:
        command += ["--suites-dir", suites_dir]
    process = start(command, work / f"{name}.log")
    end = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < end:
        if process.poll() is not None:
            raise CheckFailed(f"{name} exited with status {process.returncode}:\n"
                              f"{tail(work / f'{name}.log')}")
        try:
            return process, int(json.loads(port_file.read_text(encoding="utf-8"))["grpc_port"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    stop(process)
    raise CheckFailed(f"{name}: no port file after {STARTUP_SECONDS} s")


def run_client(client, *args, timeout=BENCH_SECONDS, node=None):
    command = [client, *args]
    env = {k: v for k, v in os.environ.items() if k != "NODE_NAME"}
    if node is not None:
        env["NODE_NAME"] = node
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 10,
                                check=False, stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"timed out: {' '.join(command)}") from None
    return result, " ".join(command)


def wait_until_ready(client, target):
    end = time.monotonic() + STARTUP_SECONDS
    while True:
        result, command = run_client(client, "--target", target, "--deadline", "10", "health",
                                     "--service", "readiness", timeout=10)
        if result.returncode == 0:
            return
        if time.monotonic() > end:
            raise CheckFailed(f"not ready after {STARTUP_SECONDS} s: {command}\n{result.stderr}")
        time.sleep(0.3)


def wait_for_gateway(process, port, log):
    end = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < end:
        if process.poll() is not None:
            raise CheckFailed(f"pushgateway exited with status {process.returncode}:\n{tail(log)}")
        try:
            if http_get(f"http://127.0.0.1:{port}/-/ready", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise CheckFailed(f"pushgateway not ready after {STARTUP_SECONDS} s:\n{tail(log)}")


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] of a text exposition."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if not match:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\")
                  for k, v in LABEL.findall(match.group(2) or "")}
        samples.append((match.group(1), labels, float(match.group(3))))
    return samples


class Checks:
    def __init__(self):
        self.failures = []
        self.count = 0

    def true(self, what, ok, detail=""):
        self.count += 1
        if not ok:
            self.failures.append(f"{what}{': ' + detail if detail else ''}")

    def value(self, samples, what, name, labels, expected, rel=1e-9):
        found = [v for n, l, v in samples
                 if n == name and all(l.get(k) == val for k, val in labels.items())]
        if len(found) != 1:
            self.true(what, False, f"{len(found)} series of {name}{labels}")
            return
        self.true(what, math.isclose(found[0], expected, rel_tol=rel, abs_tol=1e-15),
                  f"{found[0]} != {expected}")


PROTOCOL = "cold_custom"  # --repetitions 2 --warmup 1: not the scheduled protocol


def check_group(checks, samples, job, instance, report, started, finished, node=""):
    """Every gauge the report implies, with the report's values, under job/instance/node."""
    group = {"job": job, "instance": instance, "node": node, "protocol": PROTOCOL}
    if not node:
        del group["node"]  # no grouping label; an empty label is no label in Prometheus
        unlabelled = [l for n, l, v in samples if n.startswith("kerneleval_benchmark_")
                      and l.get("job") == job and l.get("instance") == instance and l.get("node")]
        checks.true(f"{instance}: no node label without NODE_NAME", not unlabelled, unlabelled[:2])
    suite = report["suite"]
    results = [r for r in report["results"] if r["status"] != "skipped"]
    checks.true(f"{instance}: the report has results", bool(results))
    fused = [r for r in results if r["implementation"] == "cpu_fused"]
    checks.true(f"{instance}: cpu_fused ran", bool(fused))
    for r in results:
        labels = dict(group, suite=suite, workload=r["workload"], implementation=r["implementation"],
                      device=r["device"])
        what = f"{instance} {node} {r['implementation']} {r['workload']}"
        checks.value(samples, f"{what} correct", "kerneleval_benchmark_correct", labels,
                     1.0 if r["correctness"]["passed"] else 0.0)
        if r["status"] in ("passed", "incorrect"):
            checks.value(samples, f"{what} latency", "kerneleval_benchmark_latency_seconds", labels,
                         r["latency"]["median_seconds"])
            checks.value(samples, f"{what} bandwidth",
                         "kerneleval_benchmark_bandwidth_bytes_per_second", labels,
                         r["bytes_per_second"])
            for figure in r.get("sol", []):
                checks.value(samples, f"{what} sol {figure['source']}", "kerneleval_benchmark_sol_ratio",
                             dict(labels, peak=figure["source"]),
                             figure["sol_ratio"])
    for r in fused:
        labels = dict(group, suite=suite, workload=r["workload"], implementation="cpu_fused",
                      device=r["device"])
        checks.value(samples, f"{instance} cpu_fused {r['workload']} correct == 1",
                     "kerneleval_benchmark_correct", labels, 1.0)
    for s in report["summaries"]:
        if s["failed"] != 0 or s["passed"] == 0:
            continue
        labels = dict(group, suite=suite, implementation=s["implementation"], device=s["device"])
        peaks = {f["source"] for r in results if r["implementation"] == s["implementation"]
                 for f in r.get("sol", [])[:1]}
        checks.true(f"{instance} {s['implementation']} one peak behind the suite SOL", len(peaks) == 1, peaks)
        checks.value(samples, f"{instance} {s['implementation']} suite SOL peak",
                     "kerneleval_benchmark_suite_sol_ratio",
                     dict(labels, peak=next(iter(peaks), "unknown")), s["geomean_sol_ratio"])
        checks.value(samples, f"{instance} {s['implementation']} suite mean latency",
                     "kerneleval_benchmark_suite_mean_latency_seconds", labels,
                     s["mean_latency_seconds"])
        checks.value(samples, f"{instance} {s['implementation']} suite SOL",
                     "kerneleval_benchmark_suite_sol_ratio", labels, s["geomean_sol_ratio"])
    for env in report["environments"]:
        device = dict(group, suite=suite, device=env["device"]["name"], model=env["device"]["model"])
        checks.value(samples, f"{instance} {node} runtime errors", "kerneleval_benchmark_runtime_errors",
                     device, 0.0)
        stamps = [v for n, l, v in samples if n == "kerneleval_benchmark_last_run_timestamp_seconds"
                  and all(l.get(k) == val for k, val in device.items())]
        checks.true(f"{instance} last run timestamp", len(stamps) == 1 and
                    started - 1 <= stamps[0] <= finished + 1, f"{stamps} not in [{started}, {finished}]")
    pushed = [v for n, l, v in samples if n == "push_time_seconds" and l.get("job") == job
              and l.get("instance") == instance and l.get("node", "") == node]
    checks.true(f"{instance}: the gateway recorded the push", len(pushed) == 1)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="kerneleval-server binary")
    parser.add_argument("--client", required=True, help="kerneleval binary")
    parser.add_argument("--suites-dir", help="suite JSON folder (default: the server's)")
    parser.add_argument("--pushgateway", default="", help="prometheus-pushgateway binary")
    args = parser.parse_args(argv)

    gateway_binary = args.pushgateway or shutil.which("prometheus-pushgateway")
    if not gateway_binary or not os.access(gateway_binary, os.X_OK):
        print(f"SKIP: prometheus-pushgateway not found ({INSTALL_HINT})")
        return SKIP

    work = pathlib.Path(tempfile.mkdtemp(prefix="kerneleval-pushgateway-e2e-"))
    processes = []
    checks = Checks()
    scrape = ""
    try:
        server_a, port_a = start_server(args.server, args.suites_dir, work, "server-a")
        processes.append(server_a)
        server_b, port_b = start_server(args.server, args.suites_dir, work, "server-b")
        processes.append(server_b)
        gateway_port = free_port()
        gateway_log = work / "pushgateway.log"
        # An empty --persistence.file keeps metrics in memory only (Debian's default
        # persists them under /var/lib/prometheus).
        gateway = start([gateway_binary, f"--web.listen-address=127.0.0.1:{gateway_port}",
                         "--persistence.file="], gateway_log)
        processes.append(gateway)
        wait_for_gateway(gateway, gateway_port, gateway_log)
        target_a, target_b = f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b}"
        wait_until_ready(args.client, target_a)
        wait_until_ready(args.client, target_b)
        url = f"http://127.0.0.1:{gateway_port}"
        bench = ["bench", "--suite", SUITE, "--repetitions", "2", "--warmup", "1",
                 "--format", "json"]

        # 1. One target, pushed from two nodes as the fleet-validation Jobs do.
        pushes = {}
        for node in ("node-a", "node-b"):
            started = time.time()
            result, command = run_client(args.client, "--target", target_a, "--deadline",
                                         str(BENCH_SECONDS), *bench, "--pushgateway", url,
                                         "--push-job", JOB, node=node)
            finished = time.time()
            if result.returncode != 0:
                raise CheckFailed(f"{command} exited {result.returncode}:\n{result.stderr}")
            report = json.loads(result.stdout)
            checks.true("single target: the report is printed as before", "targets" not in report)
            pushes[node] = (report, started, finished)
        _, scrape = http_get(f"{url}/metrics")
        samples = parse_metrics(scrape)
        for node, (report, started, finished) in pushes.items():
            check_group(checks, samples, JOB, target_a, report, started, finished, node=node)
        nodes = {l.get("node") for n, l, v in samples if n == "push_time_seconds" and l.get("job") == JOB}
        checks.true("one group per node for the same target", nodes == {"node-a", "node-b"}, nodes)
        print(f"single target: {len(report['results'])} results pushed as job={JOB} "
              f"instance={target_a}, nodes {sorted(nodes)}")

        # 2. Two targets, one group each.
        started = time.time()
        result, command = run_client(args.client, "--target", target_a, "--target", target_b,
                                     "--deadline", str(BENCH_SECONDS), *bench,
                                     "--pushgateway", url, "--push-job", FANOUT_JOB)
        finished = time.time()
        if result.returncode != 0:
            raise CheckFailed(f"{command} exited {result.returncode}:\n{result.stderr}")
        merged = json.loads(result.stdout)
        entries = {t["target"]: t for t in merged["targets"]}
        checks.true("fan-out: two targets", sorted(entries) == sorted([target_a, target_b]),
                    str(sorted(entries)))
        _, scrape = http_get(f"{url}/metrics")
        samples = parse_metrics(scrape)
        for target, entry in entries.items():
            checks.true(f"fan-out: {target} OK", entry["status"] == "OK", entry["status"])
            if entry["report"]:
                check_group(checks, samples, FANOUT_JOB, target, entry["report"], started, finished)
        instances = {l.get("instance") for n, l, v in samples
                     if n.startswith("kerneleval_benchmark_") and l.get("job") == FANOUT_JOB}
        checks.true("fan-out: one group per target", instances == {target_a, target_b},
                    str(instances))
        print(f"fan-out: groups {sorted(instances)} under job={FANOUT_JOB}")

        # 3. No gateway there: reported, exit 5 (infrastructure), the report still printed.
        result, command = run_client(args.client, "--target", target_a, "--deadline",
                                     str(BENCH_SECONDS), *bench, "--pushgateway",
                                     f"http://127.0.0.1:{free_port()}")
        checks.true("failed push: exit code 5", result.returncode == EXIT_INFRASTRUCTURE,
                    f"{result.returncode}: {result.stderr}")
        checks.true("failed push: error on stderr", "error: pushgateway" in result.stderr,
                    result.stderr)
        try:
            checks.true("failed push: the report is still printed",
                        json.loads(result.stdout).get("suite") == SUITE)
        except ValueError:
            checks.true("failed push: the report is still printed", False, result.stdout[:500])
        print("failed push: reported, exit code 5, report printed")
    except CheckFailed as error:
        checks.true("run", False, str(error))
    finally:
        for process in reversed(processes):
            stop(process)

    if checks.failures:
        print(f"FAILED {len(checks.failures)} of {checks.count} checks:")
        for failure in checks.failures:
            print(f"  {failure}")
        for log in sorted(work.glob("*.log")):
            print(f"--- {log.name} (tail) ---\n{tail(log)}")
        if scrape:
            print(f"--- pushgateway /metrics (tail) ---\n{scrape[-4000:]}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print(f"ok: {checks.count} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Start a real server, exercise it, scrape /metrics and check metric names.

    scrape_and_check.py --server PATH --client PATH [--suites-dir DIR]
                        [--scrape-out FILE] [--pushed FILE]... SOURCE [SOURCE...]

The server listens on free loopback ports (--port-file tells which) with the
CPU backend. A benchmark run, `devices` and `suites` calls make the labelled
series appear; then every kerneleval series name used by the SOURCE files
(dashboard, rule files, rule tests) must be in the scrape, or in a --pushed
body (series something else pushes to the Pushgateway: the fleet-validation
report). NVML gauges (kerneleval_gpu_*) may be absent when the server has no
CUDA device.
"""

import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import check_metric_names

STARTUP_SECONDS = 60
SUITE = "fused_add_rmsnorm_h2048"


def wait_for_ports(server, port_file):
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"server exited with status {server.returncode} before listening")
        try:
            ports = json.loads(port_file.read_text(encoding="utf-8"))
            return int(ports["grpc_port"]), int(ports["metrics_port"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    raise RuntimeError(f"no port file after {STARTUP_SECONDS} s")


def client_call(client, grpc_port, *args, timeout=300):
    command = [client, "--target", f"127.0.0.1:{grpc_port}", "--deadline", "240", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    return result, command


def wait_until_ready(client, grpc_port):
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        result, command = client_call(client, grpc_port, "health", "--service", "readiness", timeout=30)
        if result.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready after {STARTUP_SECONDS} s: {' '.join(command)}\n{result.stderr}")
        time.sleep(0.5)


def stop(server):
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="kerneleval-server binary")
    parser.add_argument("--client", required=True, help="kerneleval CLI binary")
    parser.add_argument("--suites-dir", help="suite JSON folder (default: the server's)")
    parser.add_argument("--scrape-out", help="also keep the scrape text here")
    parser.add_argument("--pushed", action="append", default=[], metavar="FILE",
                        help="a body pushed to the Pushgateway whose names also count")
    parser.add_argument("sources", nargs="+", metavar="SOURCE")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="kerneleval-scrape-") as tmp:
        port_file = pathlib.Path(tmp) / "ports.json"
        command = [args.server, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                   "--port-file", str(port_file), "--device", "cpu", "--drain-seconds", "1"]
        if args.suites_dir:
            command += ["--suites-dir", args.suites_dir]
        log = open(pathlib.Path(tmp) / "server.log", "w+", encoding="utf-8")
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            grpc_port, metrics_port = wait_for_ports(server, port_file)
            wait_until_ready(args.client, grpc_port)
            # The suite twice: the results store compares the second run of each series with
            # the first, which sets the regression gauges the rules and the dashboard use.
            bench = ("bench", "--suite", SUITE, "--repetitions", "3", "--warmup", "1", "--format", "json")
            calls = [("devices",), ("suites",), bench, bench]
            for call in calls:
                result, client_command = client_call(args.client, grpc_port, *call)
                if result.returncode != 0:
                    raise RuntimeError(f"{' '.join(client_command)} exited {result.returncode}:\n{result.stderr}")
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            # The store records off the device's thread: wait (bounded) for its gauges.
            deadline = time.monotonic() + 60
            while True:
                with urllib.request.urlopen(url, timeout=30) as response:
                    scrape = response.read().decode("utf-8")
                if "kerneleval_result_regression{" in scrape or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            stop(server)
            log.seek(0)
            print(f"error: {error}\n--- server log ---\n{log.read()[-4000:]}", file=sys.stderr)
            return 1
        finally:
            stop(server)
            log.close()

        scrape_path = pathlib.Path(args.scrape_out or os.path.join(tmp, "metrics.txt"))
        scrape_path.write_text(scrape, encoding="utf-8")
        # NVML gauges exist only next to a CUDA device with NVML; on a CPU-only
        # server they are allowed to be missing, and nothing else is.
        has_cuda = re.search(r'^kerneleval_device_info\{[^}]*device="cuda:', scrape, re.M)
        allow = [] if has_cuda else ["--allow-absent", "kerneleval_gpu_"]
        pushed = [a for path in args.pushed for a in ("--pushed", path)]
        return check_metric_names.main(allow + pushed + args.sources + [str(scrape_path)])


if __name__ == "__main__":
    sys.exit(main())

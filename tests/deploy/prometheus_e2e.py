#!/usr/bin/env python3
"""End to end: a real server, real client traffic, a real Prometheus scraping it.

    prometheus_e2e.py --server PATH --client PATH --rules-dir DIR
                      [--suites-dir DIR] [--prometheus PATH] [--promtool PATH]

Starts kerneleval-server on loopback (CPU backend), drives Runs (successful,
rejected by the server's validation, unknown implementation) and one Benchmark
of fused_add_rmsnorm_h2048 through the kerneleval CLI, checks a raw scrape with
`promtool check metrics`, then starts `prometheus` scraping the server every
second with the rule files of --rules-dir, and asserts through its HTTP API
(/api/v1/query, /api/v1/rules, /api/v1/alerts) that:

  - /metrics is behind the server's bearer tokens (--auth-token-file): refused
    without one, scraped by Prometheus with `authorization: credentials_file:`;
  - the target is up and every metric has the value the traffic implies
    (request counters by method and code, histogram counts, in-flight gauges,
    bytes, benchmark gauges of every workload x implementation, run counter,
    readiness, device and build info, restarts, process series), device series
    carry the server's --node-name and results their protocol;
  - the plaintext --health-listen port answers health and nothing else;
  - every recording and alerting rule loads and evaluates without error, the
    recording rules yield series, and no alert is pending or firing;
  - a Run made while Prometheus watches shows up in the counter and in the
    recorded request rate.

Every process is started in its own process group and killed on the way out.
On failure the last scrape and the tails of the server and Prometheus logs are
printed.
"""

import argparse
import json
import math
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SUITE = "fused_add_rmsnorm_h2048"
SUITE_WORKLOADS = [f"batch_size={b}" for b in (1, 6, 34, 64, 79, 12383, 16254)]
BENCH_REPETITIONS = 3
OK_RUNS = 3
RUN_REPETITIONS = 2
RUN_IMPL = "cpu_fused"  # the CPU backend's default; named so the sample count is known
STARTUP_SECONDS = 30
PROMETHEUS_SECONDS = 30
QUEUE_DEPTH_LAG = 1  # see check_series
TOTAL_SECONDS = 110  # the whole test stays under ctest's TIMEOUT
JOB = "kerneleval"  # the rules assume this job name
NODE = "e2e-node"  # --node-name: the `node` label of device series
# The bench below sets warm-up and repetitions, so it is not the scheduled protocol.
BENCH_PROTOCOL = "cold_custom"

# Bytes a Run request carries at least: hidden_states and residual [4, 2048] bf16
# plus weight [2048] bf16. The CLI asks for outputs back only with --output; then an
# OUTPUT-mode response carries output [4, 2048].
RUN_BATCH, RUN_HIDDEN = 4, 2048
RUN_REQUEST_BYTES = (2 * RUN_BATCH * RUN_HIDDEN + RUN_HIDDEN) * 2
RUN_RESPONSE_BYTES = RUN_BATCH * RUN_HIDDEN * 2


class CheckFailed(Exception):
    pass


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def check(self, what):
        if self.left() <= 0:
            raise CheckFailed(f"test time limit ({TOTAL_SECONDS} s) reached while {what}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command, log_path):
    log = open(log_path, "w", encoding="utf-8")
    try:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    finally:
        log.close()


def stop(process):
    """SIGTERM to the process group, then SIGKILL if it lingers."""
    if process is None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            break
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    # Anything else left in the group (there should be nothing).
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def tail(path, chars=4000):
    try:
        return pathlib.Path(path).read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError as error:
        return f"(unreadable: {error})"


def http_get(url, timeout=10, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
        return response.read().decode("utf-8")


def check_metrics_refused(url, checks):
    """/metrics without a token, or with a wrong one: 401 and a Bearer challenge."""
    for token in (None, "not-a-token"):
        try:
            http_get(url, token=token)
            checks.true(f"/metrics refused with token {token!r}", False, "served")
        except urllib.error.HTTPError as error:
            checks.true(f"/metrics refused with token {token!r}",
                        error.code == 401 and "Bearer" in error.headers.get("WWW-Authenticate", ""),
                        f"{error.code} {error.headers.get('WWW-Authenticate')}")


class Client:
    def __init__(self, binary, grpc_port, deadline, token=None):
        self.binary = binary
        self.target = f"127.0.0.1:{grpc_port}"
        self.deadline = deadline
        self.env = dict(os.environ, KERNELEVAL_TOKEN=token) if token else None

    def call(self, *args, timeout=60):
        timeout = max(1, min(timeout, self.deadline.left()))
        command = [self.binary, "--target", self.target, "--deadline", str(int(timeout)), *args]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 5,
                                    check=False, stdin=subprocess.DEVNULL, env=self.env)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"timed out after {timeout} s: {' '.join(command)}") from None
        return result, " ".join(command)

    def ok(self, *args, timeout=60):
        result, command = self.call(*args, timeout=timeout)
        if result.returncode != 0:
            raise CheckFailed(f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def fails_with(self, code, *args):
        result, command = self.call(*args)
        if result.returncode == 0:
            raise CheckFailed(f"{command} succeeded; expected {code}")
        if code not in result.stderr + result.stdout:
            raise CheckFailed(f"{command} exited {result.returncode} without {code}:\n{result.stderr}")


def wait_for_ports(server, port_file, deadline):
    end = time.monotonic() + min(STARTUP_SECONDS, deadline.left())
    while time.monotonic() < end:
        if server.poll() is not None:
            raise CheckFailed(f"server exited with status {server.returncode} before listening")
        try:
            ports = json.loads(port_file.read_text(encoding="utf-8"))
            return int(ports["grpc_port"]), int(ports["metrics_port"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    raise CheckFailed(f"no port file after {STARTUP_SECONDS} s")


def wait_until_ready(client):
    end = time.monotonic() + min(STARTUP_SECONDS, client.deadline.left())
    while True:
        result, command = client.call("health", "--service", "readiness", timeout=10)
        if result.returncode == 0:
            return
        if time.monotonic() > end:
            raise CheckFailed(f"not ready after {STARTUP_SECONDS} s: {command}\n{result.stderr}")
        time.sleep(0.3)


def promtool_lint(promtool, text, path):
    path.write_text(text, encoding="utf-8")
    with open(path, encoding="utf-8") as stdin:
        result = subprocess.run([promtool, "check", "metrics"], stdin=stdin, capture_output=True,
                                text=True, timeout=30, check=False)
    return result.returncode, [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


def check_metrics_lint(promtool, scrape, work, checks):
    """promtool check metrics on the raw scrape.

    prometheus-cpp's Exposer adds its own exposer_* families (scrape count, bytes,
    and a request-latency summary in microseconds, not a base unit). They belong
    to the library and cannot be renamed from here, so lint findings about them
    (promtool 2.42 reports none, newer ones may) are tolerated; the scrape without
    them, i.e. every kerneleval_* family, must be clean."""
    rc, problems = promtool_lint(promtool, scrape, work / "scrape_full.txt")
    foreign = [line for line in problems if not line.startswith("exposer_")]
    checks.true("promtool check metrics: full scrape, only exposer_* findings tolerated",
                rc == 0 or (problems and not foreign), "\n".join(problems))
    ours = "".join(line + "\n" for line in scrape.splitlines()
                   if not line.startswith(("exposer_", "# HELP exposer_", "# TYPE exposer_")))
    rc, problems = promtool_lint(promtool, ours, work / "scrape_kerneleval.txt")
    checks.true("promtool check metrics: kerneleval_* families clean", rc == 0, "\n".join(problems))


class Prometheus:
    def __init__(self, port, deadline):
        self.base = f"http://127.0.0.1:{port}"
        self.deadline = deadline

    def api(self, path, **params):
        url = f"{self.base}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            body = json.loads(http_get(url))
        except urllib.error.HTTPError as error:
            raise CheckFailed(f"GET {url}: {error.code} {error.read().decode('utf-8', 'replace')}") from None
        if body.get("status") != "success":
            raise CheckFailed(f"GET {url}: {body}")
        return body["data"]

    def query(self, expr):
        """Instant vector as [(labels, value)]."""
        data = self.api("/api/v1/query", query=expr)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise CheckFailed(f"{expr}: {data['resultType']} result, expected a vector")
        return [(sample["metric"], float(sample["value"][1])) for sample in data["result"]]

    def wait_for(self, expr, predicate, what, seconds=PROMETHEUS_SECONDS):
        """Polls `expr` until predicate(result) holds; returns the result."""
        end = time.monotonic() + min(seconds, self.deadline.left())
        result = None
        while True:
            try:
                result = self.query(expr)
                if predicate(result):
                    return result
            except (OSError, CheckFailed) as error:
                result = f"error: {error}"
            if time.monotonic() > end:
                raise CheckFailed(f"{what}: `{expr}` never matched; last result: {result}")
            time.sleep(0.5)

    def value(self, expr):
        """The single value of `expr` (exactly one series)."""
        result = self.query(expr)
        if len(result) != 1:
            raise CheckFailed(f"`{expr}`: expected one series, got {len(result)}: {result}")
        return result[0][1]


class Checks:
    """Collects failures so that one run reports all of them."""

    def __init__(self):
        self.failures = []
        self.passed = 0

    def equal(self, what, got, expected):
        if isinstance(expected, float) or isinstance(got, float):
            ok = isinstance(got, (int, float)) and math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)
        else:
            ok = got == expected
        self.record(ok, what, f"got {got!r}, expected {expected!r}")

    def true(self, what, ok, detail=""):
        self.record(bool(ok), what, detail)

    def value(self, prom, what, expr, expected):
        try:
            self.equal(what, prom.value(expr), expected)
        except CheckFailed as error:
            self.record(False, what, error)

    def record(self, ok, what, detail):
        if ok:
            self.passed += 1
            print(f"ok    {what}")
        else:
            message = f"{what}: {detail}" if detail != "" else what
            self.failures.append(message)
            print(f"FAIL  {message}")


def check_series(prom, checks, started_unix, run_calls, runs_with_output):
    """Values of the metrics after the first round of traffic."""
    sel = f'job="{JOB}"'
    ok_runs = run_calls["OK"]
    all_runs = sum(run_calls.values())

    # RPC counters by method and code: exactly the calls the test made.
    checks.value(prom, "Run OK count", f'kerneleval_rpc_requests_total{{{sel},method="Run",code="OK"}}',
                 float(ok_runs))
    checks.value(prom, "Run INVALID_ARGUMENT count",
                 f'kerneleval_rpc_requests_total{{{sel},method="Run",code="INVALID_ARGUMENT"}}',
                 float(run_calls["INVALID_ARGUMENT"]))
    checks.value(prom, "Run NOT_FOUND count",
                 f'kerneleval_rpc_requests_total{{{sel},method="Run",code="NOT_FOUND"}}',
                 float(run_calls["NOT_FOUND"]))
    checks.value(prom, "Run codes seen", f'count(kerneleval_rpc_requests_total{{{sel},method="Run"}})',
                 float(len(run_calls)))
    checks.value(prom, "Benchmark OK count",
                 f'kerneleval_rpc_requests_total{{{sel},method="Benchmark",code="OK"}}', 1.0)
    checks.value(prom, "Benchmark calls", f'sum(kerneleval_rpc_requests_total{{{sel},method="Benchmark"}})',
                 1.0)
    checks.value(prom, "ListDevices OK count",
                 f'kerneleval_rpc_requests_total{{{sel},method="ListDevices",code="OK"}}', 1.0)

    # Histograms agree with the counters: one observation per finished RPC.
    checks.value(prom, "Run duration histogram count",
                 f'kerneleval_rpc_duration_seconds_count{{{sel},method="Run"}}', float(all_runs))
    checks.value(prom, "Run duration +Inf bucket",
                 f'kerneleval_rpc_duration_seconds_bucket{{{sel},method="Run",le="+Inf"}}', float(all_runs))
    mismatch = prom.query(
        f'sum by (method) (kerneleval_rpc_requests_total{{{sel}}})'
        f' != on (method) sum by (method) (kerneleval_rpc_duration_seconds_count{{{sel}}})')
    checks.true("every method: requests_total == duration_seconds_count", not mismatch, mismatch)
    unmatched = prom.query(
        f'sum by (method) (kerneleval_rpc_requests_total{{{sel}}})'
        f' unless on (method) kerneleval_rpc_duration_seconds_count{{{sel}}}')
    checks.true("every method with requests has a duration histogram", not unmatched, unmatched)
    non_monotonic = prom.query(
        f'kerneleval_rpc_duration_seconds_bucket{{{sel},le="0.1"}}'
        f' > on (method) group_left kerneleval_rpc_duration_seconds_bucket{{{sel},le="1"}}')
    checks.true("duration buckets are cumulative (le=0.1 <= le=1)", not non_monotonic, non_monotonic)
    checks.true("Run duration sum > 0",
                prom.value(f'kerneleval_rpc_duration_seconds_sum{{{sel},method="Run"}}') > 0)
    busy = prom.query(f'kerneleval_inflight_requests{{{sel}}} != 0')
    checks.true("no RPC in flight after the traffic", not busy, busy)

    # Bytes.
    received = prom.value(f'kerneleval_received_bytes_total{{{sel},method="Run"}}')
    checks.true("Run received bytes cover the tensors sent",
                received >= (ok_runs + run_calls["NOT_FOUND"]) * RUN_REQUEST_BYTES,
                f"{received} < {(ok_runs + run_calls['NOT_FOUND']) * RUN_REQUEST_BYTES}")
    sent = prom.value(f'kerneleval_sent_bytes_total{{{sel},method="Run"}}')
    checks.true("Run sent bytes cover the outputs returned", sent >= runs_with_output * RUN_RESPONSE_BYTES,
                f"{sent} < {runs_with_output * RUN_RESPONSE_BYTES}")
    checks.true("Run sent bytes: responses without outputs are small",
                sent < (runs_with_output + 1) * RUN_RESPONSE_BYTES, sent)

    # Device series carry the server's node name (honor_labels keeps it over the
    # target's node), RPC series only the target's.
    wrong_node = prom.query(f'{{{sel},device="cpu",node!="{NODE}"}}')
    checks.true("every device series has node=--node-name", not wrong_node, wrong_node[:3])
    labelled = prom.value(f'count({{{sel},device="cpu",node="{NODE}"}})')
    checks.true("device series with the node label (queues, histograms, results, info)", labelled > 10,
                labelled)
    rpc = prom.query(f'kerneleval_rpc_requests_total{{{sel},node="localhost"}}')
    checks.true("RPC series keep the target's node", rpc, rpc)
    checks.value(prom, "device host restarts start at 0",
                 f'kerneleval_device_host_restarts_total{{{sel},device="cpu"}}', 0.0)
    start = prom.value(f'process_start_time_seconds{{{sel}}}')
    checks.true("process_start_time_seconds is when the server started",
                started_unix - 60 <= start <= time.time(), start)
    checks.true("process_resident_memory_bytes > 1 MiB",
                prom.value(f'process_resident_memory_bytes{{{sel}}}') > 1 << 20)

    # Device, queue, readiness, build.
    checks.value(prom, "ready", f'kerneleval_ready{{{sel}}}', 1.0)
    checks.value(prom, "device_info cpu", f'kerneleval_device_info{{{sel},device="cpu",kind="cpu"}}', 1.0)
    checks.value(prom, "device_healthy cpu", f'kerneleval_device_healthy{{{sel},device="cpu"}}', 1.0)
    # The queue is empty now. DeviceWorker::Submit reports the depth after releasing its
    # lock, so when the worker pops the job first, the older value (1) is set last and
    # stays until the next job: allow that one-job lag, nothing more.
    depth = prom.value(f'kerneleval_queue_depth{{{sel},device="cpu"}}')
    checks.true("queue_depth cpu idle (0, or 1 from the late Submit update)",
                depth <= QUEUE_DEPTH_LAG, depth)
    checks.true("queue_capacity cpu > 0", prom.value(f'kerneleval_queue_capacity{{{sel},device="cpu"}}') > 0)
    checks.value(prom, "build_info", f'count(kerneleval_build_info{{{sel}}} == 1)', 1.0)
    checks.true("device memory > 0", prom.value(f'kerneleval_device_memory_bytes{{{sel},device="cpu"}}') > 0)

    # Queue and compute histograms: one observation per executed job (the
    # successful Runs and the benchmark job; rejected Runs never queue).
    checks.value(prom, "queue_wait count (executed jobs)",
                 f'kerneleval_queue_wait_seconds_count{{{sel},device="cpu"}}', float(ok_runs + 1))
    checks.value(prom, "compute count (executed jobs)",
                 f'kerneleval_compute_seconds_count{{{sel},device="cpu"}}', float(ok_runs + 1))

    # Benchmark results: every workload x implementation of the suite.
    implementations = sorted({labels["implementation"] for labels, _ in prom.query(
        f'kerneleval_benchmark_latency_seconds{{{sel},suite="{SUITE}"}}')})
    checks.equal("benchmarked implementations", len(implementations), 2)
    checks.true("cpu_fused among them", "cpu_fused" in implementations, implementations)
    for family, positive in (("kerneleval_benchmark_latency_seconds", True),
                             ("kerneleval_benchmark_bandwidth_bytes_per_second", True),
                             ("kerneleval_benchmark_correct", False)):
        got = {(labels["workload"], labels["implementation"]): value for labels, value in prom.query(
            f'{family}{{{sel},suite="{SUITE}",device="cpu"}}')}
        expected = {(w, i) for w in SUITE_WORKLOADS for i in implementations}
        checks.true(f"{family}: every workload x implementation",
                    set(got) == expected, f"missing {sorted(expected - set(got))}, extra {sorted(set(got) - expected)}")
        if positive:
            bad = {k: v for k, v in got.items() if not v > 0}
            checks.true(f"{family} > 0", not bad, bad)
        else:
            bad = {k: v for k, v in got.items() if v != 1}
            checks.true(f"{family} == 1", not bad, bad)
    checks.value(prom, "correct cpu_fused batch_size=79",
                 f'kerneleval_benchmark_correct{{{sel},suite="{SUITE}",implementation="cpu_fused",'
                 f'workload="batch_size=79"}}', 1.0)
    sol = prom.query(f'kerneleval_benchmark_sol_ratio{{{sel},suite="{SUITE}"}}')
    checks.equal("sol_ratio series (one per workload x implementation x peak)",
                 len(sol), len(SUITE_WORKLOADS) * len(implementations) * len({l["peak"] for l, _ in sol}))
    checks.true("sol_ratio > 0", sol and all(v > 0 for _, v in sol), sol[:3])
    for family in ("kerneleval_benchmark_suite_mean_latency_seconds", "kerneleval_benchmark_suite_sol_ratio"):
        got = prom.query(f'{family}{{{sel},suite="{SUITE}",device="cpu"}} > 0')
        checks.equal(f"{family} > 0 per implementation", sorted(l["implementation"] for l, _ in got),
                     implementations)
    checks.value(prom, "benchmark_runs complete",
                 f'kerneleval_benchmark_runs_total{{{sel},suite="{SUITE}",device="cpu",result="complete"}}', 1.0)
    checks.value(prom, "benchmark_runs all results",
                 f'sum(kerneleval_benchmark_runs_total{{{sel},suite="{SUITE}"}})', 1.0)
    outcomes = {labels["result"]: value for labels, value in prom.query(
        f'kerneleval_benchmark_runs_total{{{sel},suite="{SUITE}",device="cpu"}}')}
    checks.equal("benchmark_runs outcomes present from the first run (0 until they happen)",
                 outcomes, {"complete": 1.0, "incomplete": 0.0, "error": 0.0})
    wrong_protocol = prom.query(f'{{{sel},suite="{SUITE}",__name__=~"kerneleval_benchmark_.*",'
                                f'__name__!="kerneleval_benchmark_runs_total",protocol!="{BENCH_PROTOCOL}"}}')
    checks.true(f"every result series has protocol={BENCH_PROTOCOL}", not wrong_protocol, wrong_protocol[:3])
    checks.value(prom, "runtime errors of the run",
                 f'kerneleval_benchmark_runtime_errors{{{sel},suite="{SUITE}",device="cpu"}}', 0.0)
    suite_peaks = {l.get("peak") for l, _ in prom.query(f'kerneleval_benchmark_suite_sol_ratio{{{sel}}}')}
    checks.true("suite SOL names the peak its workloads were measured against",
                len(suite_peaks) == 1 and suite_peaks <= {l["peak"] for l, _ in sol}, suite_peaks)
    last = prom.value(f'kerneleval_benchmark_last_run_timestamp_seconds{{{sel},suite="{SUITE}",device="cpu"}}')
    checks.true("last_run timestamp within the test", started_unix - 1 <= last <= time.time() + 1,
                f"{last} not in [{started_unix}, now]")
    # Kernel samples: every timed call of the benchmark and of the Runs.
    for impl in implementations:
        expected = len(SUITE_WORKLOADS) * BENCH_REPETITIONS + (ok_runs * RUN_REPETITIONS if impl == RUN_IMPL else 0)
        checks.value(prom, f"kernel_duration samples of {impl}",
                     f'kerneleval_kernel_duration_seconds_count{{{sel},implementation="{impl}",device="cpu"}}',
                     float(expected))


def compressed_rule_files(rules_dir, work):
    """The repository's rule files, copied with every group's own `interval` set to the test's
    1 s: a group recorded every 5 minutes in production (the error budget's) would otherwise
    not be evaluated within the test. The expressions are unchanged."""
    import yaml  # PyYAML

    out = []
    for path in sorted(pathlib.Path(rules_dir).glob("*.yml")):
        text = path.read_text(encoding="utf-8")
        document = yaml.safe_load(text) or {}
        if any("interval" in g for g in document.get("groups", [])):
            for group in document["groups"]:
                if "interval" in group:
                    group["interval"] = "1s"
            path = work / f"rules-{path.name}"
            path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        out.append(path.resolve())
    return out


# Guards of inputs this test does not provide (kube-state-metrics, a Pushgateway): they must
# be pending, and nothing else may be.
MISSING_INPUT_GUARDS = {"KernelevalCoverageInputMissing", "KernelevalFleetValidationMissing"}


def check_rules(prom, checks, rules_dir):
    """Every rule of the repository loads and evaluates cleanly; recordings have series."""
    import yaml  # PyYAML; only to list the rule names expected

    expected_records, expected_alerts = set(), set()
    for path in sorted(pathlib.Path(rules_dir).glob("*.yml")):
        for group in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("groups", []):
            for rule in group.get("rules", []):
                (expected_records if "record" in rule else expected_alerts).add(rule.get("record") or rule["alert"])

    # Wait until every group has been evaluated at least once (an unevaluated
    # group reports the zero time, 0001-01-01).
    end = time.monotonic() + min(PROMETHEUS_SECONDS, prom.deadline.left())
    while True:
        groups = prom.api("/api/v1/rules")["groups"]
        if groups and all(not g.get("lastEvaluation", "0001").startswith("0001") for g in groups):
            break
        if time.monotonic() > end:
            raise CheckFailed(f"rule groups never evaluated: {[(g['name'], g.get('lastEvaluation')) for g in groups]}")
        time.sleep(0.5)
    rules = [rule for group in groups for rule in group["rules"]]
    loaded_records = {r["name"] for r in rules if r["type"] == "recording"}
    loaded_alerts = {r["name"] for r in rules if r["type"] == "alerting"}
    checks.true("every recording rule loaded", loaded_records == expected_records,
                f"missing {sorted(expected_records - loaded_records)}")
    checks.true("every alerting rule loaded", loaded_alerts == expected_alerts,
                f"missing {sorted(expected_alerts - loaded_alerts)}")
    unhealthy = [(r["name"], r.get("health"), r.get("lastError")) for r in rules if r.get("health") != "ok"]
    checks.true("every rule evaluates without error", not unhealthy, unhealthy)

    # Recording rules that must have series for this server (the others need
    # GPU-only inputs, e.g. the device-attribute peak, absent on the CPU backend).
    prom.wait_for('instance_device:kerneleval_queue_utilization:ratio{device="cpu"}',
                  lambda r: len(r) == 1, "queue utilization recording")
    utilization = prom.value('instance_device:kerneleval_queue_utilization:ratio{device="cpu"}')
    depth = prom.value(f'kerneleval_queue_depth{{job="{JOB}",device="cpu"}}')
    capacity = prom.value(f'kerneleval_queue_capacity{{job="{JOB}",device="cpu"}}')
    checks.equal("recorded queue utilization == depth / capacity", utilization, depth / capacity)
    prom.wait_for('method_code:kerneleval_rpc_requests:rate5m{method="Run",code="OK"}', lambda r: len(r) == 1,
                  "request rate recording")
    ratio = prom.wait_for(f'method:kerneleval_rpc_server_errors:ratio_rate5m{{job="{JOB}",method="Run"}}',
                          lambda r: len(r) == 1, "server error ratio recording")
    # Counters are flat until the next Run, so the ratio is 0/0 here; only its presence is checked.
    checks.true("server error ratio recorded for Run", len(ratio) == 1, ratio)
    suite_sol = prom.wait_for(
        f'model_suite_implementation_protocol:kerneleval_benchmark_suite_sol_ratio:avg{{suite="{SUITE}"}}',
        lambda r: len(r) == 2, "suite SOL by model recording")
    checks.true("suite SOL by model and protocol from the results' own labels",
                all(l.get("model") and l.get("protocol") == BENCH_PROTOCOL and v > 0 for l, v in suite_sol),
                suite_sol)
    p50 = prom.wait_for('instance_implementation_device:kerneleval_kernel_duration_seconds:p50_rate5m',
                        lambda r: len(r) >= 1, "kernel p50 recording")
    checks.true("kernel p50 recording has series", p50, p50)

    budget = prom.wait_for(f'node:kerneleval_rpc_requests:increase5m{{job="{JOB}"}}', lambda r: len(r) == 1,
                           "error budget requests recording")
    checks.true("error budget inputs recorded per node", len(budget) == 1, budget)

    alerts = prom.api("/api/v1/alerts")["alerts"]
    active = [(a["labels"].get("alertname"), a["state"], a["labels"]) for a in alerts
              if a["labels"].get("alertname") not in MISSING_INPUT_GUARDS]
    checks.true("no alert pending or firing but the missing-input guards", not active, active)
    guards = {a["labels"].get("alertname") for a in alerts if a["state"] == "pending"}
    checks.true("the guards of the inputs this test lacks are pending", guards >= MISSING_INPUT_GUARDS,
                sorted(guards))


def check_live_update(prom, checks, client, ok_runs):
    """A Run while Prometheus watches: the counter moves and the recorded rate turns positive."""
    client.ok("run", "--batch", str(RUN_BATCH), "--hidden", str(RUN_HIDDEN), "--dtype", "bf16", "--check",
              "--repetitions", "1")
    expr = f'kerneleval_rpc_requests_total{{job="{JOB}",method="Run",code="OK"}}'
    prom.wait_for(expr, lambda r: len(r) == 1 and r[0][1] == ok_runs + 1, "counter after one more Run")
    checks.value(prom, "Run OK count after one more Run", expr, float(ok_runs + 1))
    prom.wait_for('method_code:kerneleval_rpc_requests:rate5m{method="Run",code="OK"} > 0', lambda r: len(r) == 1,
                  "recorded Run rate after one more Run")
    checks.true("recorded Run OK rate > 0", True)
    ratio = prom.wait_for(f'method:kerneleval_rpc_server_errors:ratio_rate5m{{job="{JOB}",method="Run"}}',
                          lambda r: len(r) == 1 and not math.isnan(r[0][1]), "server error ratio after a Run")
    checks.equal("recorded Run server error ratio (caller errors excluded)", ratio[0][1], 0.0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="kerneleval-server binary")
    parser.add_argument("--client", required=True, help="kerneleval CLI binary")
    parser.add_argument("--rules-dir", required=True, help="Prometheus rule files (*.yml) to load")
    parser.add_argument("--suites-dir", help="suite JSON folder (default: the server's)")
    parser.add_argument("--prometheus", default=shutil.which("prometheus"), help="prometheus binary")
    parser.add_argument("--promtool", default=shutil.which("promtool"), help="promtool binary")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed)")
    args = parser.parse_args(argv)
    if not args.prometheus or not args.promtool:
        print("prometheus and promtool are needed (apt-get install prometheus)", file=sys.stderr)
        return 1

    deadline = Deadline(TOTAL_SECONDS)
    started_unix = time.time()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kerneleval-prom-e2e-"))
    server = prometheus = None
    metrics_port = None
    scrape = ""
    checks = Checks()
    try:
        # --- the server ---------------------------------------------------------
        port_file = work / "ports.json"
        health_port = free_port()
        # Tokens as a deployment has them: the CLI's, and Prometheus' own for /metrics, which
        # it reads from a file of the bare token (deploy/README.md, "Metrics").
        client_token, scrape_token = os.urandom(16).hex(), os.urandom(16).hex()
        (work / "tokens").write_text(f"e2e-client:{client_token}\nprometheus:{scrape_token}\n",
                                     encoding="utf-8")
        (work / "prometheus.token").write_text(scrape_token + "\n", encoding="utf-8")
        command = [args.server, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                   "--health-listen", f"127.0.0.1:{health_port}", "--node-name", NODE,
                   "--port-file", str(port_file), "--device", "cpu", "--drain-seconds", "1",
                   "--auth-token-file", str(work / "tokens")]
        if args.suites_dir:
            command += ["--suites-dir", args.suites_dir]
        server = start(command, work / "server.log")
        grpc_port, metrics_port = wait_for_ports(server, port_file, deadline)
        client = Client(args.client, grpc_port, deadline, client_token)
        wait_until_ready(client)
        # The plaintext health port: readiness and liveness, but no KernelEval service.
        health = Client(args.client, health_port, deadline)
        health.ok("health", "--service", "readiness")
        health.ok("health")
        health.fails_with("UNIMPLEMENTED", "devices")

        # --- traffic through the real CLI --------------------------------------
        run_args = ["run", "--batch", str(RUN_BATCH), "--hidden", str(RUN_HIDDEN), "--dtype", "bf16"]
        run_calls = {"OK": 0, "INVALID_ARGUMENT": 0, "NOT_FOUND": 0}
        for i in range(OK_RUNS):
            extra = ["--output", str(work / "out.safetensors")] if i == 0 else []
            client.ok(*run_args, "--check", "--seed", str(i + 1), "--impl", RUN_IMPL,
                      "--repetitions", str(RUN_REPETITIONS), *extra)
            run_calls["OK"] += 1
        runs_with_output = 1
        # The CLI only checks eps > 0; the server rejects one that does not fit in fp32.
        client.fails_with("INVALID_ARGUMENT", *run_args, "--eps", "1e31")
        run_calls["INVALID_ARGUMENT"] += 1
        client.fails_with("NOT_FOUND", *run_args, "--impl", "no_such_implementation")
        run_calls["NOT_FOUND"] += 1
        client.ok("devices")
        report = json.loads(client.ok("bench", "--suite", SUITE, "--repetitions", str(BENCH_REPETITIONS),
                                      "--warmup", "1", "--format", "json", timeout=90))
        print(f"traffic done: Run {run_calls}, 1 Benchmark ({len(report.get('results', []))} results), "
              f"{deadline.left():.0f} s left")

        check_metrics_refused(f"http://127.0.0.1:{metrics_port}/metrics", checks)
        scrape = http_get(f"http://127.0.0.1:{metrics_port}/metrics", token=scrape_token)
        (work / "scrape.txt").write_text(scrape, encoding="utf-8")
        check_metrics_lint(args.promtool, scrape, work, checks)

        # --- Prometheus -----------------------------------------------------------
        rule_files = [str(p) for p in compressed_rule_files(args.rules_dir, work)]
        if not rule_files:
            raise CheckFailed(f"no rule files in {args.rules_dir}")
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": rule_files,
            "scrape_configs": [{
                "job_name": JOB,
                "honor_labels": True,
                "authorization": {"credentials_file": str(work / "prometheus.token")},
                "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"], "labels": {"node": "localhost"}}],
            }],
        }
        config_path = work / "prometheus.yml"
        config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML
        check = subprocess.run([args.promtool, "check", "config", str(config_path)], capture_output=True,
                               text=True, timeout=30, check=False)
        if check.returncode != 0:
            raise CheckFailed(f"promtool check config:\n{check.stdout}{check.stderr}")
        web_port = free_port()
        prometheus = start([args.prometheus, f"--config.file={config_path}",
                            f"--storage.tsdb.path={work / 'tsdb'}",
                            f"--web.listen-address=127.0.0.1:{web_port}",
                            "--storage.tsdb.retention.time=1h", "--log.level=info"],
                           work / "prometheus.log")
        prom = Prometheus(web_port, deadline)
        end = time.monotonic() + min(PROMETHEUS_SECONDS, deadline.left())
        while True:
            if prometheus.poll() is not None:
                raise CheckFailed(f"prometheus exited with status {prometheus.returncode}")
            try:
                http_get(f"{prom.base}/-/ready", timeout=2)
                break
            except OSError:
                if time.monotonic() > end:
                    raise CheckFailed(f"prometheus not ready after {PROMETHEUS_SECONDS} s") from None
                time.sleep(0.3)
        prom.wait_for(f'up{{job="{JOB}"}} == 1', lambda r: len(r) == 1, "scrape target up")
        # Every metric is in the same scrape, so once `up` is 1 the samples are there.
        prom.wait_for(f'kerneleval_ready{{job="{JOB}"}}', lambda r: len(r) == 1, "first scrape stored")
        targets = prom.api("/api/v1/targets")["activeTargets"]
        checks.true("one active target, healthy", len(targets) == 1 and targets[0]["health"] == "up",
                    [(t["scrapeUrl"], t["health"], t.get("lastError")) for t in targets])

        check_series(prom, checks, started_unix, run_calls, runs_with_output)
        check_rules(prom, checks, args.rules_dir)
        check_live_update(prom, checks, client, run_calls["OK"])
        scrape = http_get(f"http://127.0.0.1:{metrics_port}/metrics", token=scrape_token)
    except (CheckFailed, OSError, ValueError, subprocess.SubprocessError) as error:
        checks.failures.append(f"aborted: {type(error).__name__}: {error}")
        print(f"FAIL  aborted: {error}")
    finally:
        if checks.failures and metrics_port and server is not None and server.poll() is None:
            try:  # the state the failing checks saw, for the diagnostics below
                scrape = http_get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5,
                                  token=scrape_token)
            except OSError:
                pass
        stop(prometheus)
        stop(server)

    print(f"\n{checks.passed} checks passed, {len(checks.failures)} failed "
          f"({TOTAL_SECONDS - deadline.left():.1f} s)")
    if checks.failures:
        print("\nfailures:", *checks.failures, sep="\n  - ", file=sys.stderr)
        samples = [line for line in scrape.splitlines()
                   if line.startswith("kerneleval_") and "_bucket{" not in line]
        print("\n--- last scrape (kerneleval_* samples, buckets left out) ---", *samples, sep="\n", file=sys.stderr)
        print("\n--- server log (tail) ---\n" + tail(work / "server.log"), file=sys.stderr)
        print("\n--- prometheus log (tail) ---\n" + tail(work / "prometheus.log"), file=sys.stderr)
    if args.keep or checks.failures and os.environ.get("KERNELEVAL_KEEP_E2E"):
        print(f"work folder kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())

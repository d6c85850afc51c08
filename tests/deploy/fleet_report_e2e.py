#!/usr/bin/env python3
"""End to end: fleet-validate.py's report into a real Prometheus Pushgateway.

    fleet_report_e2e.py [--pushgateway PATH]

Starts a `prometheus-pushgateway` on a free loopback port (in memory) and runs
fleet-validate.py's main() against a cluster that plays the API (the approach of
check_fleet_wait.py; the script's own clock is the test's, no sleeping): nodes of
two GPU products whose Jobs complete, fail, never start (deleted after the admission
wait), or still run at the timeout, a node with a withheld GPU, one without any
healthy GPU, one cordoned. Then, through the gateway's /metrics:

  1. the report group (job kerneleval-fleet-validation-report): nodes per product and
     state with the scenario's counts (zeros too), withheld GPUs per product, one
     never-free series per node never free, the report's timestamp, the push time;
     the counts agree with the printed table and its one summary line; exit status 1
     (not every node validated);
  2. the next night's run replaces the group (PUT): with every node free this time
     no never-free series is left, the counts are the new run's;
  3. --report-pushgateway '' pushes nothing (the group is still the second run's);
  4. a gateway that is not there: exit status 2, the error on stderr, the table and
     the summary still printed.

Exits 77 (skipped) only when the pushgateway binary is absent.
"""

import argparse
import contextlib
import importlib.util
import io
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time

import pushgateway_e2e as gw

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "fleet_validate", REPO / "deploy/k8s/fleet-validation/fleet-validate.py")
fleet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fleet)

SKIP = 77
REPORT_JOB = "kerneleval-fleet-validation-report"
IMAGE = "registry.example/kerneleval@sha256:" + "0" * 64
H100, H200 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"
SUMMARY = re.compile(
    r"^fleet validation run (\S+): validated (\d+) of (\d+) nodes; failed (\d+); never free (\d+); "
    r"still running (\d+); cordoned (\d+); no healthy GPU (\d+); no Job (\d+); "
    r"unhealthy GPUs (\d+) on (\d+) nodes$", re.M)
SUMMARY_STATES = ("validated", None, "failed", "never_free", "still_running", "cordoned",
                  "no_healthy_gpu", "missing")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def node(name, product, capacity=8, allocatable=8, cordoned=False):
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product,
                                                  "kubernetes.io/arch": "amd64"}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"capacity": {fleet.GPU: str(capacity)},
                       "allocatable": {fleet.GPU: str(allocatable)}}}


class Cluster:
    """Nodes, and per node what its Job does: `complete` (after 20 minutes), `failed` (at once),
    `never` (no pod: the node is never free), `running` (still active at the timeout)."""

    def __init__(self, clock, nodes, behaviour):
        self.clock, self.node_list, self.behaviour = clock, nodes, behaviour
        self.created, self.deleted = {}, set()

    def nodes(self, selector):
        assert selector == fleet.SELECTOR, selector
        return self.node_list

    def create_job(self, job):
        pod = job["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        self.created[job["metadata"]["name"]] = (terms[0]["matchFields"][0]["values"][0],
                                                 job["metadata"]["labels"][fleet.RUN_LABEL])

    def delete_job(self, name):
        self.deleted.add(name)

    def jobs(self, selector):
        key, _, run = selector.partition("=")
        assert key == fleet.RUN_LABEL, selector
        out = []
        for name, (node_name, job_run) in self.created.items():
            if job_run != run or name in self.deleted:
                continue
            what = self.behaviour[node_name]
            if what == "complete" and self.clock.now >= 20 * 60:
                status = {"conditions": [{"type": "Complete", "status": "True"}]}
            elif what == "failed":
                status = {"conditions": [{"type": "Failed", "status": "True"}]}
            elif what in ("complete", "running"):
                status = {"active": 1}
            else:
                status = {}
            out.append({"metadata": {"name": name, "labels": {fleet.RUN_LABEL: job_run}},
                        "status": status})
        return out


NODES = [node("h200-ok", H200), node("h200-busy", H200), node("h200-one-bad", H200, 8, 7),
         node("h200-all-bad", H200, 8, 0), node("h200-cordoned", H200, cordoned=True),
         node("h200-slow", H200), node("h100-ok", H100), node("h100-busy", H100),
         node("h100-failed", H100)]
NIGHT_1 = {"h200-ok": "complete", "h200-busy": "never", "h200-one-bad": "complete",
           "h200-slow": "running", "h100-ok": "complete", "h100-busy": "never",
           "h100-failed": "failed"}
# The next night every node is free and passes: no never-free series at all, so a push
# that merged into the group (POST) instead of replacing it (PUT) would keep night 1's.
NIGHT_2 = {n: "complete" for n in NIGHT_1}
EXPECTED_1 = {
    H200: {"validated": 2, "failed": 0, "never_free": 1, "still_running": 1, "cordoned": 1,
           "no_healthy_gpu": 1, "missing": 0},
    H100: {"validated": 1, "failed": 1, "never_free": 1, "still_running": 0, "cordoned": 0,
           "no_healthy_gpu": 0, "missing": 0},
}
EXPECTED_2 = {
    H200: {"validated": 4, "failed": 0, "never_free": 0, "still_running": 0, "cordoned": 1,
           "no_healthy_gpu": 1, "missing": 0},
    H100: {"validated": 3, "failed": 0, "never_free": 0, "still_running": 0, "cordoned": 0,
           "no_healthy_gpu": 0, "missing": 0},
}
UNHEALTHY = {H200: 1 + 8, H100: 0}


def run_script(behaviour, run, gateway, *extra):
    """(exit status, stdout, stderr, wall-clock start, end) of one run of fleet-validate.py."""
    clock = Clock()
    cluster = Cluster(clock, NODES, behaviour)
    out, err = io.StringIO(), io.StringIO()
    started = time.time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = fleet.main(["--image", IMAGE, "--run", run, "--pushgateway", gateway,
                         "--timeout-hours", "2", "--admission-wait-minutes", "30", *extra],
                        cluster=cluster, clock=clock, sleep=clock.sleep)
    return rc, out.getvalue(), err.getvalue(), started, time.time()


def report_samples(scrape):
    return [(n, l, v) for n, l, v in gw.parse_metrics(scrape) if l.get("job") == REPORT_JOB]


def check_report(checks, what, samples, expected, never_free, started, finished, stdout):
    for product, states in expected.items():
        for state, count in states.items():
            checks.value(samples, f"{what}: {product} {state}", "kerneleval_fleet_validation_nodes",
                         {"product": product, "state": state, "instance": ""}, count)
        checks.value(samples, f"{what}: {product} withheld GPUs",
                     "kerneleval_fleet_validation_unhealthy_gpus", {"product": product},
                     UNHEALTHY[product])
    products = {l.get("product") for n, l, v in samples if n == "kerneleval_fleet_validation_nodes"}
    checks.true(f"{what}: one product label per listed product", products == set(expected),
                products)
    pushed_never = {(l.get("node"), l.get("product")) for n, l, v in samples
                    if n == "kerneleval_fleet_validation_node_never_free" and v == 1}
    checks.true(f"{what}: never-free nodes by name", pushed_never == never_free,
                f"{sorted(pushed_never)} != {sorted(never_free)}")
    stamps = [v for n, l, v in samples
              if n == "kerneleval_fleet_validation_report_timestamp_seconds"]
    checks.true(f"{what}: report timestamp",
                len(stamps) == 1 and started - 1 <= stamps[0] <= finished + 1,
                f"{stamps} not in [{started}, {finished}]")
    pushes = [v for n, l, v in samples if n == "push_time_seconds"]
    checks.true(f"{what}: the gateway recorded one push of the group", len(pushes) == 1 and
                started - 1 <= pushes[0] <= finished + 1, pushes)
    # The printed summary and table agree with what was pushed: one classification.
    lines = SUMMARY.findall(stdout)
    checks.true(f"{what}: one summary line", len(lines) == 1, stdout[-2000:])
    if lines:
        fields = lines[0]
        for state, value in zip(SUMMARY_STATES, fields[1:9]):
            if state:
                checks.true(f"{what}: summary {state} = pushed",
                            int(value) == sum(e[state] for e in expected.values()), fields)
        checks.true(f"{what}: summary lists every node", int(fields[2]) == len(NODES), fields)
        checks.true(f"{what}: summary withheld GPUs", int(fields[9]) == sum(UNHEALTHY.values()),
                    fields)
    table_never = {line.split()[0] for line in stdout.splitlines() if "never free" in line
                   and not line.startswith("fleet validation run")}
    checks.true(f"{what}: the table names the never-free nodes pushed",
                table_never == {n for n, _ in never_free}, table_never)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushgateway", default="", help="prometheus-pushgateway binary")
    args = parser.parse_args(argv)
    binary = args.pushgateway or shutil.which("prometheus-pushgateway")
    if not binary or not os.access(binary, os.X_OK):
        print(f"SKIP: prometheus-pushgateway not found ({gw.INSTALL_HINT})")
        return SKIP

    work = pathlib.Path(tempfile.mkdtemp(prefix="kerneleval-fleet-report-e2e-"))
    checks = gw.Checks()
    gateway = None
    scrape = ""
    outputs = []
    try:
        port = gw.free_port()
        log = work / "pushgateway.log"
        gateway = gw.start([binary, f"--web.listen-address=127.0.0.1:{port}",
                            "--persistence.file="], log)
        gw.wait_for_gateway(gateway, port, log)
        url = f"http://127.0.0.1:{port}"

        # 1. The first night.
        rc, out, err, started, finished = run_script(NIGHT_1, "202612060140", url)
        outputs.append(("night 1", out, err))
        checks.true("night 1: exit status 1 (not every node validated)", rc == 1, f"{rc}: {err}")
        _, scrape = gw.http_get(f"{url}/metrics")
        samples = report_samples(scrape)
        check_report(checks, "night 1", samples, EXPECTED_1,
                     {("h200-busy", H200), ("h100-busy", H100)}, started, finished, out)
        print(f"night 1: {len(samples)} series under job={REPORT_JOB}")

        # 2. The next night replaces the group.
        rc, out, err, started, finished = run_script(NIGHT_2, "202612070140", url)
        outputs.append(("night 2", out, err))
        checks.true("night 2: exit status 1 (cordoned, withheld GPUs)", rc == 1, f"{rc}: {err}")
        _, scrape = gw.http_get(f"{url}/metrics")
        samples = report_samples(scrape)
        check_report(checks, "night 2", samples, EXPECTED_2, set(), started, finished, out)
        night_2_push = [v for n, l, v in samples if n == "push_time_seconds"]
        print("night 2: the group replaced, no node never free any more")

        # 3. No report push asked for.
        rc, out, err, _, _ = run_script(NIGHT_2, "202612080140", url, "--report-pushgateway", "")
        outputs.append(("no push", out, err))
        checks.true("no push: exit status 1", rc == 1, f"{rc}: {err}")
        _, scrape = gw.http_get(f"{url}/metrics")
        checks.true("no push: the group is still night 2's",
                    [v for n, l, v in report_samples(scrape) if n == "push_time_seconds"]
                    == night_2_push)

        # 4. No gateway there.
        nowhere = f"http://127.0.0.1:{gw.free_port()}"
        rc, out, err, _, _ = run_script(NIGHT_1, "202612090140", nowhere)
        outputs.append(("failed push", out, err))
        checks.true("failed push: exit status 2", rc == 2, f"{rc}: {err}")
        checks.true("failed push: the error on stderr", "error: pushgateway PUT" in err, err)
        checks.true("failed push: the table still printed", "h200-busy" in out and
                    "NOT COVERED" in out, out[-1000:])
        checks.true("failed push: the summary still printed", len(SUMMARY.findall(out)) == 1,
                    out[-500:])
        print("failed push: exit status 2, error on stderr, table and summary printed")
    except gw.CheckFailed as error:
        checks.true("run", False, str(error))
    finally:
        gw.stop(gateway)

    if checks.failures:
        print(f"FAILED {len(checks.failures)} of {checks.count} checks:")
        for failure in checks.failures:
            print(f"  {failure}")
        for what, out, err in outputs:
            print(f"--- {what}: stdout (tail) ---\n{out[-2000:]}\n--- stderr ---\n{err[-2000:]}")
        print(f"--- pushgateway.log (tail) ---\n{gw.tail(work / 'pushgateway.log')}")
        if scrape:
            print(f"--- pushgateway /metrics (tail) ---\n{scrape[-4000:]}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print(f"ok: {checks.count} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

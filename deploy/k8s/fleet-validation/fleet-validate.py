#!/usr/bin/env python3
"""Validate every supported GPU node outside the evaluation pool: one Job per node.

    fleet-validate.py [--image REGISTRY/kerneleval@sha256:...] [--timeout-hours 6]
                      [--admission-wait-minutes 30] [--report-pushgateway URL]
    fleet-validate.py --image IMAGE --render NODE [NODE...]       # print the Jobs only
    fleet-validate.py --image IMAGE --render-nodes NODES.json     # the same for Node objects,
                      [--jobs JOBS.json] [--render-push FILE]     # and the report, no cluster

Runs daily as the CronJob kerneleval-fleet-validation (cronjob.yaml, in the
cluster, through the Kubernetes API with its ServiceAccount), or from an
operator's machine through kubectl. Lists the nodes that carry a supported GPU
product label (the H100 / H200 / B200 products the binaries are built for,
sm_90a / sm_100a), run amd64, and are not in the evaluation pool; creates one
Job per node from job-template.yaml; waits, deleting the Jobs not started within
the admission wait; and prints per node: validated, FAILED, NOT COVERED (node
never free / still running / cordoned / no Job), and the node's unhealthy GPUs,
then one summary line:

    fleet validation run 202612060140: validated 480 of 500 nodes; failed 2; never free 15;
    still running 0; cordoned 3; no healthy GPU 0; no Job 0; unhealthy GPUs 1 on 1 nodes

(one line in the log; every count always present, in this order).

Unhealthy GPUs: the device plugin withholds a GPU it marks unhealthy, so the
node's allocatable nvidia.com/gpu falls below its capacity. A Job asking for
the capacity would then stay Pending forever ("never free"); it asks for the
allocatable GPUs instead, validates those, and the report names the node with
its unhealthy count (the Job's log lists the UUIDs it did validate).

The Job's image is the evaluation pool's server image (DaemonSet kerneleval in
the namespace) unless --image names one, so both run the same release.
Each Job pushes its node's results to the Pushgateway under job
kerneleval-fleet-validation with a `node` label; the KernelevalNodeNotValidated
alert names nodes without a recent result. This script then pushes the run's
report (PUT, replacing the last run's) as job kerneleval-fleet-validation-report:
kerneleval_fleet_validation_nodes{product,state} (state validated, failed,
never_free, still_running, cordoned, no_healthy_gpu, missing; zeros included),
kerneleval_fleet_validation_unhealthy_gpus{product},
kerneleval_fleet_validation_node_never_free{node,product} 1 for each node never
free, and kerneleval_fleet_validation_report_timestamp_seconds. A node never free
is counted per product (KernelevalFleetNodesNeverFree) instead of being named by
KernelevalNodeNotValidated: a busy node is not a page. The table, the summary
and the gauges are read from one classification (node_results).
Exit status 0 only when every node was validated with all of its GPUs and the
report was pushed; 1 when a node was not; 2 on an API error or a failed push
(the table and the summary are printed first).

--render-nodes NODES.json [--jobs JOBS.json] prints what a run would create and
report for those Node objects (kubectl get nodes -o json) and, with --jobs, those
Job states (kubectl get jobs -l kerneleval.io/run=RUN -o json); --render-push FILE
writes the report it would push. Nothing is pushed in the --render modes.

Why one Job per node and not an Indexed Job: an index cannot be pinned to a
node, so an Indexed Job could validate one node twice and another never.
"""

import argparse
import copy
import datetime
import hashlib
import json
import os
import pathlib
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

HERE = pathlib.Path(__file__).resolve().parent
NAMESPACE = os.environ.get("POD_NAMESPACE", "kerneleval")
# GPU Feature Discovery's nvidia.com/gpu.product of the products the image is built for
# (deploy/README.md, "GPU product labels"); the same list as the pool's node affinity.
SUPPORTED_PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H200", "NVIDIA-B200")
SELECTOR = (f"nvidia.com/gpu.product in ({','.join(SUPPORTED_PRODUCTS)}),"
            "kubernetes.io/arch=amd64,kerneleval.io/pool!=evaluation")
RUN_LABEL = "kerneleval.io/run"
NODE_LABEL = "kerneleval.io/node"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GPU = "nvidia.com/gpu"
SERVICE_ACCOUNT = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiError(RuntimeError):
    pass


class Kubectl:
    """The cluster through kubectl (an operator's machine)."""

    def _run(self, args, stdin=None):
        result = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True,
                                check=False)
        if result.returncode != 0:
            raise ApiError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def nodes(self, selector):
        return json.loads(self._run(["get", "nodes", "-l", selector, "-o", "json"]))["items"]

    def jobs(self, selector):
        return json.loads(self._run(["get", "jobs", "-n", NAMESPACE, "-l", selector, "-o", "json"]))["items"]

    def create_job(self, job):
        self._run(["create", "-f", "-"], stdin=json.dumps(job))

    def delete_job(self, name):
        self._run(["delete", "job", "-n", NAMESPACE, name, "--wait=false",
                   "--cascade=background"])

    def daemonset(self, name):
        return json.loads(self._run(["get", "daemonset", "-n", NAMESPACE, name, "-o", "json"]))


class InCluster:
    """The cluster through its API with the pod's ServiceAccount (the CronJob)."""

    def __init__(self):
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.base = f"https://{'[' + host + ']' if ':' in host else host}:{port}"
        self.context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))

    def _call(self, method, path, body=None):
        # The projected token is rotated by the kubelet: read it for every call.
        token = (SERVICE_ACCOUNT / "token").read_text(encoding="utf-8").strip()
        request = urllib.request.Request(self.base + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json",
                                                  "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=60) as response:
                return json.load(response)
        except (urllib.error.URLError, OSError, ValueError) as error:
            detail = error.read().decode(errors="replace")[:500] if hasattr(error, "read") else ""
            raise ApiError(f"{method} {path}: {error} {detail}".strip()) from error

    def nodes(self, selector):
        query = urllib.parse.urlencode({"labelSelector": selector})
        return self._call("GET", f"/api/v1/nodes?{query}")["items"]

    def jobs(self, selector):
        query = urllib.parse.urlencode({"labelSelector": selector})
        return self._call("GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs?{query}")["items"]

    def create_job(self, job):
        self._call("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", job)

    def delete_job(self, name):
        self._call("DELETE", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}",
                   {"propagationPolicy": "Background"})

    def daemonset(self, name):
        return self._call("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{name}")


def job_name(run, node):
    # Node names may be 253 characters; a Job name (and its pods' label) at most 63.
    digest = hashlib.sha1(node.encode()).hexdigest()[:10]
    return f"kerneleval-validate-{run}-{digest}"


def gpu_counts(node):
    """(capacity, allocatable) nvidia.com/gpu of a Node object."""
    status = node.get("status", {})
    return (int(status.get("capacity", {}).get(GPU, 0) or 0),
            int(status.get("allocatable", {}).get(GPU, 0) or 0))


def pin_to_node(pod_spec, name):
    """Require the Node object's name (metadata.name), not its kubernetes.io/hostname label,
    which can differ: every node-affinity term gets the field, so each still ANDs it."""
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    for term in terms:
        term["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": [name]}]


def render(template, nodes, run, image, suite, pushgateway, queue=""):
    """One Job per Node object, asking for the node's allocatable (healthy) GPUs."""
    jobs = []
    for node in nodes:
        name = node["metadata"]["name"]
        _, healthy = gpu_counts(node)
        job = copy.deepcopy(template)
        job["metadata"]["name"] = job_name(run, name)
        job["metadata"]["namespace"] = NAMESPACE
        pod = job["spec"]["template"]
        for labels in (job["metadata"]["labels"], pod["metadata"]["labels"]):
            # Label values are at most 63 characters: the full name is in the selector.
            labels[NODE_LABEL] = name[:63].rstrip("-_.")
            labels[RUN_LABEL] = run
        if queue:
            # Kueue admits the Job (and suspends it until then) when its queue has quota.
            job["metadata"]["labels"][QUEUE_LABEL] = queue
        pin_to_node(pod["spec"], name)
        container = pod["spec"]["containers"][0]
        container["image"] = image
        if healthy:
            container["resources"]["limits"][GPU] = healthy
        for env in container["env"]:
            if env["name"] == "SUITE":
                env["value"] = suite
            elif env["name"] == "PUSHGATEWAY":
                env["value"] = pushgateway
        jobs.append(job)
    return jobs


def named_nodes(names, gpus):
    """Node objects for --render NODE...: every GPU healthy."""
    return [{"metadata": {"name": n}, "status": {"capacity": {GPU: str(gpus)},
                                                 "allocatable": {GPU: str(gpus)}}} for n in names]


def classify(nodes):
    """(to validate, cordoned, without any healthy GPU) Node objects."""
    schedulable = [n for n in nodes if not n.get("spec", {}).get("unschedulable")]
    cordoned = [n for n in nodes if n.get("spec", {}).get("unschedulable")]
    validate = [n for n in schedulable if gpu_counts(n)[1] > 0]
    no_gpu = [n for n in schedulable if gpu_counts(n)[1] == 0]
    return validate, cordoned, no_gpu


def job_states(cluster, run):
    """{job name: state} with state complete, failed, running or waiting."""
    states = {}
    for job in cluster.jobs(f"{RUN_LABEL}={run}"):
        status = job.get("status", {})
        conditions = {c["type"] for c in status.get("conditions", []) if c.get("status") == "True"}
        if "Complete" in conditions:
            states[job["metadata"]["name"]] = "complete"
        elif "Failed" in conditions:
            states[job["metadata"]["name"]] = "failed"
        elif status.get("active"):
            states[job["metadata"]["name"]] = "running"
        else:
            states[job["metadata"]["name"]] = "waiting"
    return states


def wait_for_jobs(cluster, run, timeout_s, admission_wait_s, clock=time.monotonic,
                  sleep=time.sleep):
    """Polls the run's Jobs until none is running or waiting, or `timeout_s` passed. A Job
    still waiting `admission_wait_s` after the start (no pod running: the node was never free,
    or Kueue admitted it and it stays Pending) is deleted, so that it holds no quota or node
    slot for the rest of the window, and reported as such ("not_started")."""
    start = clock()
    given_up = set()
    while True:
        states = job_states(cluster, run)
        for name in given_up:
            states[name] = "not_started"
        if clock() - start >= admission_wait_s:
            for name, state in states.items():
                if state == "waiting":
                    cluster.delete_job(name)
                    given_up.add(name)
                    states[name] = "not_started"
        if clock() - start >= timeout_s or \
                not any(s in ("running", "waiting") for s in states.values()):
            return states
        sleep(30)


# What each listed node came to in a run: the printed table, the one-line summary and the
# pushed gauges (kerneleval_fleet_validation_nodes{product,state}) all read this.
STATES = ("validated", "failed", "never_free", "still_running", "cordoned", "no_healthy_gpu",
          "missing")
# A Job's state (job_states, wait_for_jobs) -> the node's state, and the table's words for it.
JOB_RESULTS = {
    "complete": ("validated", "validated"),
    "failed": ("failed", "FAILED (see the Job's log)"),
    "running": ("still_running", "NOT COVERED (still running)"),
    "waiting": ("never_free", "NOT COVERED (node never free)"),
    "not_started": ("never_free", "NOT COVERED (not started within the admission wait: node "
                                  "never free; Job deleted, its quota released)"),
    "missing": ("missing", "NOT COVERED (no Job)"),
}
PRODUCT_LABEL = "nvidia.com/gpu.product"
REPORT_JOB = "kerneleval-fleet-validation-report"


def node_results(nodes, run, states):
    """One dict per Node object (node, product, state, unhealthy GPUs, the table's text), in
    the table's order: the nodes given Jobs, those without a healthy GPU, the cordoned."""
    validate, cordoned, no_gpu = classify(nodes)
    results = []

    def result(node, state, unhealthy, text):
        labels = node["metadata"].get("labels") or {}
        results.append({"node": node["metadata"]["name"],
                        "product": labels.get(PRODUCT_LABEL) or "unknown",
                        "state": state, "unhealthy_gpus": unhealthy, "text": text})

    for node in validate:
        capacity, healthy = gpu_counts(node)
        state, text = JOB_RESULTS[states.get(job_name(run, node["metadata"]["name"]), "missing")]
        unhealthy = max(capacity - healthy, 0)
        if unhealthy:
            text += (f"; UNHEALTHY GPUs: {unhealthy} of {capacity} withheld by the device plugin "
                     f"(validated {healthy})")
        result(node, state, unhealthy, text)
    for node in no_gpu:
        capacity, _ = gpu_counts(node)
        result(node, "no_healthy_gpu", capacity, f"NOT COVERED; UNHEALTHY GPUs: all {capacity}")
    for node in cordoned:
        result(node, "cordoned", 0, "NOT COVERED (cordoned)")
    return results


def summary(results, run):
    """The run in one line, for a log search: every state's count, always in this order."""
    counts = {state: sum(r["state"] == state for r in results) for state in STATES}
    sick = [r for r in results if r["unhealthy_gpus"]]
    return (f"fleet validation run {run}: validated {counts['validated']} of {len(results)} nodes; "
            f"failed {counts['failed']}; never free {counts['never_free']}; "
            f"still running {counts['still_running']}; cordoned {counts['cordoned']}; "
            f"no healthy GPU {counts['no_healthy_gpu']}; no Job {counts['missing']}; "
            f"unhealthy GPUs {sum(r['unhealthy_gpus'] for r in sick)} on {len(sick)} nodes")


def print_report(results, run):
    """Prints the coverage table and the summary line; True when every node was validated
    with every GPU."""
    width = max([len(r["node"]) for r in results] + [4])
    print(f"{'node':<{width}}  result")
    for r in results:
        print(f"{r['node']:<{width}}  {r['text']}")
    print(summary(results, run))
    return all(r["state"] == "validated" and not r["unhealthy_gpus"] for r in results)


def report(nodes, run, states):
    """Prints the coverage table of a run's Node objects and Job states (print_report)."""
    return print_report(node_results(nodes, run, states), run)


def _label(value):
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def push_body(results, now):
    """The run's report as the Pushgateway group REPORT_JOB (text exposition format): nodes per
    GPU product and state (every state, zeros too, so that shares divide), withheld GPUs per
    product, the nodes never free by name, and when the report was made."""
    products = sorted({r["product"] for r in results})
    lines = []
    if products:  # a family is written with its samples only
        lines += ["# HELP kerneleval_fleet_validation_nodes GPU nodes the last fleet-validation "
                  "run listed, by GPU product and result.",
                  "# TYPE kerneleval_fleet_validation_nodes gauge"]
        for product in products:
            for state in STATES:
                count = sum(r["product"] == product and r["state"] == state for r in results)
                lines.append(f'kerneleval_fleet_validation_nodes{{product="{_label(product)}",'
                             f'state="{state}"}} {count}')
        lines += ["# HELP kerneleval_fleet_validation_unhealthy_gpus GPUs the device plugin "
                  "withheld on the nodes the last fleet-validation run listed, by GPU product.",
                  "# TYPE kerneleval_fleet_validation_unhealthy_gpus gauge"]
        for product in products:
            gpus = sum(r["unhealthy_gpus"] for r in results if r["product"] == product)
            lines.append("kerneleval_fleet_validation_unhealthy_gpus"
                         f'{{product="{_label(product)}"}} {gpus}')
    never_free = [r for r in results if r["state"] == "never_free"]
    if never_free:
        lines += ["# HELP kerneleval_fleet_validation_node_never_free 1 for each node whose Job "
                  "the last fleet-validation run could not start (the node was never free).",
                  "# TYPE kerneleval_fleet_validation_node_never_free gauge"]
        lines += [f'kerneleval_fleet_validation_node_never_free{{node="{_label(r["node"])}",'
                  f'product="{_label(r["product"])}"}} 1' for r in never_free]
    lines += ["# HELP kerneleval_fleet_validation_report_timestamp_seconds When the last "
              "fleet-validation run made its report.",
              "# TYPE kerneleval_fleet_validation_report_timestamp_seconds gauge",
              f"kerneleval_fleet_validation_report_timestamp_seconds {now:.3f}"]
    return "\n".join(lines) + "\n"


class PushError(RuntimeError):
    pass


def push_report(gateway, body, timeout_s=30):
    """PUT: the group holds this report only, whatever the last one held."""
    url = f"{gateway.rstrip('/')}/metrics/job/{REPORT_JOB}"
    request = urllib.request.Request(url, method="PUT", data=body.encode(),
                                     headers={"Content-Type": "text/plain; version=0.0.4"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
    except (urllib.error.URLError, OSError, ValueError) as error:
        detail = error.read().decode(errors="replace")[:500] if hasattr(error, "read") else ""
        raise PushError(f"pushgateway PUT {url}: {error} {detail}".strip()) from error


class Listing:
    """Jobs from a JobList file (kubectl get jobs -o json) instead of a cluster."""

    def __init__(self, jobs):
        self.items = jobs

    def jobs(self, selector):
        key, _, value = selector.partition("=")
        return [j for j in self.items if j["metadata"].get("labels", {}).get(key) == value]


def server_image(cluster):
    daemonset = cluster.daemonset("kerneleval")
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    return next(c["image"] for c in containers if c["name"] == "server")


def main(argv=None, cluster=None, clock=time.monotonic, sleep=time.sleep):
    """`cluster`, `clock` and `sleep` are for tests that play the API (tests/deploy)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", help="the kerneleval image, by digest (default: the pool's)")
    parser.add_argument("--suite", default="fused_add_rmsnorm_h2048")
    parser.add_argument("--pushgateway", default="http://prometheus-pushgateway.monitoring.svc:9091",
                        help="where the Jobs push their results, and this script its report")
    parser.add_argument("--report-pushgateway", metavar="URL",
                        help="where to push the report (default: --pushgateway; empty: no push, "
                             "e.g. from a machine that cannot reach it)")
    parser.add_argument("--queue-name", default=os.environ.get("KUEUE_QUEUE_NAME", ""),
                        help="Kueue LocalQueue for the Jobs (default $KUEUE_QUEUE_NAME; none)")
    parser.add_argument("--timeout-hours", type=float, default=6.0)
    parser.add_argument("--admission-wait-minutes", type=float, default=30.0,
                        help="delete a Job whose pod has not started by then (its node never "
                             "free, or admitted by Kueue and Pending): it stops holding quota")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="for --render only")
    parser.add_argument("--run", help="run id (default: UTC yyyymmddhhmm; with --jobs, theirs)")
    parser.add_argument("--render", nargs="+", metavar="NODE",
                        help="print the Jobs for these nodes and stop")
    parser.add_argument("--render-nodes", type=pathlib.Path, metavar="NODES.json",
                        help="print the Jobs and the report for these Node objects (a NodeList) "
                             "and stop")
    parser.add_argument("--jobs", type=pathlib.Path, metavar="JOBS.json",
                        help="with --render-nodes: the run's Jobs (a JobList, kubectl get jobs "
                             "-l kerneleval.io/run=RUN -o json); the report reads their states "
                             "as the run's end would (a Job not started: never free)")
    parser.add_argument("--render-push", type=pathlib.Path, metavar="FILE",
                        help="with --render-nodes: write the report the run would push to FILE")
    args = parser.parse_args(argv)
    if (args.jobs or args.render_push) and not args.render_nodes:
        parser.error("--jobs and --render-push need --render-nodes")
    run = args.run or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M")
    template = yaml.safe_load((HERE / "job-template.yaml").read_text(encoding="utf-8"))

    if args.render or args.render_nodes:
        if not args.image:
            parser.error("--render needs --image")
        states = {}
        if args.render:
            nodes = named_nodes(args.render, args.gpus_per_node)
        else:
            nodes = json.loads(args.render_nodes.read_text(encoding="utf-8"))["items"]
        if args.jobs:
            listing = Listing(json.loads(args.jobs.read_text(encoding="utf-8"))["items"])
            if not args.run:
                runs = {j["metadata"].get("labels", {}).get(RUN_LABEL) for j in listing.items}
                if len(runs) != 1 or None in runs:
                    parser.error(f"--jobs holds Jobs of runs {sorted(map(str, runs))}: give --run")
                run = runs.pop()
            states = job_states(listing, run)
        jobs = render(template, classify(nodes)[0], run, args.image, args.suite, args.pushgateway,
                      args.queue_name)
        sys.stdout.write(yaml.safe_dump_all(jobs, sort_keys=False))
        if args.render_nodes:
            results = node_results(nodes, run, states)
            print_report(results, run)
            if args.render_push:
                args.render_push.write_text(push_body(results, time.time()), encoding="utf-8")
        return 0
    if cluster is None:
        cluster = InCluster() if "KUBERNETES_SERVICE_HOST" in os.environ else Kubectl()
    try:
        image = args.image or server_image(cluster)
        nodes = cluster.nodes(SELECTOR)
        for job in render(template, classify(nodes)[0], run, image, args.suite, args.pushgateway,
                          args.queue_name):
            cluster.create_job(job)
        states = wait_for_jobs(cluster, run, args.timeout_hours * 3600,
                               args.admission_wait_minutes * 60, clock=clock, sleep=sleep)
    except (ApiError, KeyError, StopIteration) as error:
        print(f"error: {error!r}", file=sys.stderr)
        return 2
    results = node_results(nodes, run, states)
    ok = print_report(results, run)
    sys.stdout.flush()
    gateway = args.pushgateway if args.report_pushgateway is None else args.report_pushgateway
    if gateway:
        try:
            push_report(gateway, push_body(results, time.time()))
        except PushError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

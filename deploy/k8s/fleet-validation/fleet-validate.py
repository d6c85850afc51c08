#!/usr/bin/env python3
"""Validate every supported GPU node outside the evaluation pool: one Job per node.

    fleet-validate.py [--image REGISTRY/kerneleval@sha256:...] [--timeout-hours 6]
                      [--admission-wait-minutes 30]
    fleet-validate.py --image IMAGE --render NODE [NODE...]       # print the Jobs only
    fleet-validate.py --image IMAGE --render-nodes NODES.json     # the same for Node objects

Runs daily as the CronJob kerneleval-fleet-validation (cronjob.yaml, in the
cluster, through the Kubernetes API with its ServiceAccount), or from an
operator's machine through kubectl. Lists the nodes that carry a supported GPU
product label (the H100 / H200 / B200 products the binaries are built for,
sm_90a / sm_100a), run amd64, and are not in the evaluation pool; creates one
Job per node from job-template.yaml; waits, deleting the Jobs not started within
the admission wait; and prints per node: validated, FAILED, NOT COVERED (node
never free / cordoned), and the node's unhealthy GPUs.

Unhealthy GPUs: the device plugin withholds a GPU it marks unhealthy, so the
node's allocatable nvidia.com/gpu falls below its capacity. A Job asking for
the capacity would then stay Pending forever ("never free"); it asks for the
allocatable GPUs instead, validates those, and the report names the node with
its unhealthy count (the Job's log lists the UUIDs it did validate).

The Job's image is the evaluation pool's server image (DaemonSet kerneleval in
the namespace) unless --image names one, so both run the same release.
Exit status 0 only when every node was validated with all of its GPUs; 1
otherwise, 2 on an API error. Results go to the Pushgateway under job
kerneleval-fleet-validation with a `node` label; the KernelevalNodeNotValidated
alert names nodes without a recent result.

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


def report(nodes, run, states):
    """Prints the coverage table; True when every node was validated with every GPU."""
    validate, cordoned, no_gpu = classify(nodes)
    names = [n["metadata"]["name"] for n in nodes]
    width = max([len(n) for n in names] + [4])
    print(f"{'node':<{width}}  result")
    ok = not cordoned and not no_gpu
    for node in validate:
        name = node["metadata"]["name"]
        capacity, healthy = gpu_counts(node)
        state = states.get(job_name(run, name), "missing")
        meaning = {"complete": "validated", "failed": "FAILED (see the Job's log)",
                   "running": "NOT COVERED (still running)",
                   "waiting": "NOT COVERED (node never free)",
                   "not_started": "NOT COVERED (not started within the admission wait: node "
                                  "never free; Job deleted, its quota released)",
                   "missing": "NOT COVERED (no Job)"}[state]
        if healthy < capacity:
            meaning += (f"; UNHEALTHY GPUs: {capacity - healthy} of {capacity} withheld by the device "
                        f"plugin (validated {healthy})")
            ok = False
        ok &= state == "complete"
        print(f"{name:<{width}}  {meaning}")
    for node in no_gpu:
        capacity, _ = gpu_counts(node)
        print(f"{node['metadata']['name']:<{width}}  NOT COVERED; UNHEALTHY GPUs: all {capacity}")
    for node in cordoned:
        print(f"{node['metadata']['name']:<{width}}  NOT COVERED (cordoned)")
    done = sum(states.get(job_name(run, n["metadata"]["name"])) == "complete" for n in validate)
    print(f"validated {done} of {len(nodes)} GPU nodes (run {run})")
    return ok


def server_image(cluster):
    daemonset = cluster.daemonset("kerneleval")
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    return next(c["image"] for c in containers if c["name"] == "server")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", help="the kerneleval image, by digest (default: the pool's)")
    parser.add_argument("--suite", default="fused_add_rmsnorm_h2048")
    parser.add_argument("--pushgateway", default="http://prometheus-pushgateway.monitoring.svc:9091")
    parser.add_argument("--queue-name", default=os.environ.get("KUEUE_QUEUE_NAME", ""),
                        help="Kueue LocalQueue for the Jobs (default $KUEUE_QUEUE_NAME; none)")
    parser.add_argument("--timeout-hours", type=float, default=6.0)
    parser.add_argument("--admission-wait-minutes", type=float, default=30.0,
                        help="delete a Job whose pod has not started by then (its node never "
                             "free, or admitted by Kueue and Pending): it stops holding quota")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="for --render only")
    parser.add_argument("--run", help="run id (default: UTC yyyymmddhhmm)")
    parser.add_argument("--render", nargs="+", metavar="NODE",
                        help="print the Jobs for these nodes and stop")
    parser.add_argument("--render-nodes", type=pathlib.Path, metavar="NODES.json",
                        help="print the Jobs and the report for these Node objects (a NodeList) "
                             "and stop")
    args = parser.parse_args(argv)
    run = args.run or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M")
    template = yaml.safe_load((HERE / "job-template.yaml").read_text(encoding="utf-8"))

    if args.render or args.render_nodes:
        if not args.image:
            parser.error("--render needs --image")
        if args.render:
            nodes = named_nodes(args.render, args.gpus_per_node)
        else:
            nodes = json.loads(args.render_nodes.read_text(encoding="utf-8"))["items"]
        jobs = render(template, classify(nodes)[0], run, args.image, args.suite, args.pushgateway,
                      args.queue_name)
        sys.stdout.write(yaml.safe_dump_all(jobs, sort_keys=False))
        if args.render_nodes:
            report(nodes, run, {})
        return 0
    cluster = InCluster() if "KUBERNETES_SERVICE_HOST" in os.environ else Kubectl()
    try:
        image = args.image or server_image(cluster)
        nodes = cluster.nodes(SELECTOR)
        for job in render(template, classify(nodes)[0], run, image, args.suite, args.pushgateway,
                          args.queue_name):
            cluster.create_job(job)
        states = wait_for_jobs(cluster, run, args.timeout_hours * 3600,
                               args.admission_wait_minutes * 60)
    except (ApiError, KeyError, StopIteration) as error:
        print(f"error: {error!r}", file=sys.stderr)
        return 2
    return 0 if report(nodes, run, states) else 1


if __name__ == "__main__":
    sys.exit(main())

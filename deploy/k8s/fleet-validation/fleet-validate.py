#!/usr/bin/env python3
"""Validate every GPU node outside the evaluation pool: one Job per node.

    fleet-validate.py --image REGISTRY/kerneleval@sha256:... [--timeout-hours 6]
    fleet-validate.py --image IMAGE --render NODE [NODE...]   # print the Jobs only

Lists the nodes that carry a GPU product label (nvidia.com/gpu.product) and are
not in the evaluation pool (kerneleval.io/pool != evaluation), creates one Job
per node from job-template.yaml (all of the node's GPUs, so it waits until the
node is free), waits, and prints which nodes were validated, failed, or were
never free. Exit status 0 only when every node was validated; 1 otherwise,
2 on a kubectl error. Results go to the Pushgateway under job
kerneleval-fleet-validation with a `node` label; the KernelevalNodeNotValidated
alert names nodes without a recent result.

Why one Job per node and not an Indexed Job: an index cannot be pinned to a
node, so an Indexed Job could validate one node twice and another never. One
Job per node is retried alone (backoffLimit 1) and reports per node.

Needs kubectl with rights to list nodes and create / list Jobs in the
namespace, and python3 with PyYAML.
"""

import argparse
import copy
import datetime
import hashlib
import json
import pathlib
import subprocess
import sys
import time

import yaml

HERE = pathlib.Path(__file__).resolve().parent
NAMESPACE = "kerneleval"
SELECTOR = "nvidia.com/gpu.product,kerneleval.io/pool!=evaluation"
RUN_LABEL = "kerneleval.io/run"
NODE_LABEL = "kerneleval.io/node"


def job_name(run, node):
    # Node names may be 253 characters; a Job name (and its pods' label) at most 63.
    digest = hashlib.sha1(node.encode()).hexdigest()[:10]
    return f"kerneleval-validate-{run}-{digest}"


def render(template, nodes, run, image, suite, pushgateway):
    jobs = []
    for node in nodes:
        job = copy.deepcopy(template)
        job["metadata"]["name"] = job_name(run, node)
        pod = job["spec"]["template"]
        for labels in (job["metadata"]["labels"], pod["metadata"]["labels"]):
            # Label values are at most 63 characters: the full name is in the selector.
            labels[NODE_LABEL] = node[:63].rstrip("-_.")
            labels[RUN_LABEL] = run
        pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] = node
        container = pod["spec"]["containers"][0]
        container["image"] = image
        for env in container["env"]:
            if env["name"] == "SUITE":
                env["value"] = suite
            elif env["name"] == "PUSHGATEWAY":
                env["value"] = pushgateway
        jobs.append(job)
    return jobs


def kubectl(args, stdin=None):
    result = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def fleet_nodes():
    """(schedulable nodes, cordoned nodes) of the fleet outside the pool."""
    items = json.loads(kubectl(["get", "nodes", "-l", SELECTOR, "-o", "json"]))["items"]
    nodes = sorted(n["metadata"]["name"] for n in items if not n["spec"].get("unschedulable"))
    cordoned = sorted(n["metadata"]["name"] for n in items if n["spec"].get("unschedulable"))
    return nodes, cordoned


def job_states(run):
    """{job name: state} with state complete, failed, running or waiting."""
    items = json.loads(kubectl(["get", "jobs", "-n", NAMESPACE, "-l", f"{RUN_LABEL}={run}",
                                "-o", "json"]))["items"]
    states = {}
    for job in items:
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


def report(nodes, cordoned, run, states):
    """Prints the coverage table; True when every node was validated."""
    width = max([len(n) for n in nodes + cordoned] + [4])
    print(f"{'node':<{width}}  result")
    for node in nodes:
        state = states.get(job_name(run, node), "missing")
        meaning = {"complete": "validated", "failed": "FAILED (see the Job's log)",
                   "running": "NOT COVERED (still running)",
                   "waiting": "NOT COVERED (node never free)",
                   "missing": "NOT COVERED (no Job)"}[state]
        print(f"{node:<{width}}  {meaning}")
    for node in cordoned:
        print(f"{node:<{width}}  NOT COVERED (cordoned)")
    done = sum(states.get(job_name(run, n)) == "complete" for n in nodes)
    print(f"validated {done} of {len(nodes) + len(cordoned)} GPU nodes (run {run})")
    return done == len(nodes) and not cordoned


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True, help="the kerneleval image, by digest")
    parser.add_argument("--suite", default="fused_add_rmsnorm_h2048")
    parser.add_argument("--pushgateway", default="http://prometheus-pushgateway.monitoring.svc:9091")
    parser.add_argument("--timeout-hours", type=float, default=6.0)
    parser.add_argument("--run", help="run id (default: UTC yyyymmddhhmm)")
    parser.add_argument("--render", nargs="+", metavar="NODE",
                        help="print the Jobs for these nodes and stop")
    args = parser.parse_args(argv)
    run = args.run or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M")
    template = yaml.safe_load((HERE / "job-template.yaml").read_text(encoding="utf-8"))

    if args.render:
        jobs = render(template, args.render, run, args.image, args.suite, args.pushgateway)
        sys.stdout.write(yaml.safe_dump_all(jobs, sort_keys=False))
        return 0
    try:
        nodes, cordoned = fleet_nodes()
        jobs = render(template, nodes, run, args.image, args.suite, args.pushgateway)
        if jobs:
            kubectl(["create", "-f", "-"], stdin=yaml.safe_dump_all(jobs, sort_keys=False))
        deadline = time.monotonic() + args.timeout_hours * 3600
        states = job_states(run)
        while time.monotonic() < deadline and \
                any(s in ("running", "waiting") for s in states.values()):
            time.sleep(30)
            states = job_states(run)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0 if report(nodes, cordoned, run, states) else 1


if __name__ == "__main__":
    sys.exit(main())

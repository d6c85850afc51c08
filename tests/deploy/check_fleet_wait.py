#!/usr/bin/env python3
"""fleet-validate.py's wait against a cluster that plays the API: a Job that never starts
(its node never free, or admitted by Kueue and left Pending) is deleted once the admission
wait has passed, so that it holds no quota for the rest of the six-hour window, and the
report names it; a Job that runs is waited for and not deleted. Time is the test's own
clock: no sleeping."""

import importlib.util
import io
import pathlib
import sys
from contextlib import redirect_stdout

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "fleet_validate", REPO / "deploy/k8s/fleet-validation/fleet-validate.py")
fleet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fleet)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


class Cluster:
    """Three Jobs: one finishes after 20 minutes, one never gets a pod, one fails at once."""

    def __init__(self, clock, run):
        self.clock, self.run, self.deleted = clock, run, []
        self.names = {n: fleet.job_name(run, n) for n in ("busy", "never-free", "broken")}

    def jobs(self, selector):
        assert selector == f"{fleet.RUN_LABEL}={self.run}", selector
        t = self.clock.now
        status = {
            self.names["busy"]: ({"conditions": [{"type": "Complete", "status": "True"}]}
                                 if t >= 20 * 60 else {"active": 1}),
            self.names["never-free"]: {},
            self.names["broken"]: {"conditions": [{"type": "Failed", "status": "True"}]},
        }
        return [{"metadata": {"name": n}, "status": s} for n, s in status.items()
                if n not in self.deleted]

    def delete_job(self, name):
        self.deleted.append(name)


def main():
    problems = []
    clock = Clock()
    run = "202612060000"
    cluster = Cluster(clock, run)
    states = fleet.wait_for_jobs(cluster, run, timeout_s=6 * 3600, admission_wait_s=30 * 60,
                                 clock=clock, sleep=clock.sleep)
    never = cluster.names["never-free"]
    if cluster.deleted != [never]:
        problems.append(f"only the Job that never started is deleted, once: {cluster.deleted}")
    if states.get(never) != "not_started":
        problems.append(f"the Job that never started reads not_started: {states}")
    if states.get(cluster.names["busy"]) != "complete":
        problems.append(f"the running Job is waited for: {states}")
    if clock.now > 31 * 60:
        problems.append(f"the wait ends once nothing runs or waits (at {clock.now / 60:.0f} min), "
                        "not at the six-hour timeout")
    nodes = [{"metadata": {"name": n, "labels": {}},
              "spec": {}, "status": {"capacity": {fleet.GPU: "8"},
                                     "allocatable": {fleet.GPU: "8"}}}
             for n in ("busy", "never-free", "broken")]
    out = io.StringIO()
    with redirect_stdout(out):
        ok = fleet.report(nodes, run, states)
    if ok:
        problems.append("a run with a node not started and one failed is not all validated")
    if "never-free  NOT COVERED (not started within the admission wait" not in out.getvalue():
        problems.append(f"the report names the node not started:\n{out.getvalue()}")
    for p in problems:
        print(f"fleet wait: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

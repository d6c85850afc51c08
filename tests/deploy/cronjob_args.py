#!/usr/bin/env python3
"""Print the rendered benchmark CronJob's container args, one per line.

    cronjob_args.py deploy/k8s/overlays/h100

Uses kubectl's kustomize when installed and otherwise the base sources (the
overlays do not change the CronJob; check_manifests.py verifies that when
kubectl is present). Lets a test feed the exact arguments to the CLI parser.
"""

import sys

from k8s_render import RenderError, render


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        documents, mode = render(argv[1])
    except RenderError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if mode != "kustomize":
        print("note: kubectl not found; args read from the kustomization's sources", file=sys.stderr)
    cronjobs = [d for d in documents if d.get("kind") == "CronJob"
                and d["metadata"]["name"] == "kerneleval-benchmark"]
    if len(cronjobs) != 1:
        print(f"error: expected one CronJob, found {len(cronjobs)}", file=sys.stderr)
        return 1
    containers = cronjobs[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    for arg in containers[0].get("args", []):
        print(arg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

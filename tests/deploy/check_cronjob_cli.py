#!/usr/bin/env python3
"""Check that the benchmark CronJob's args are accepted by the CLI's real parser.

    check_cronjob_cli.py CHECKER KUSTOMIZATION_DIR...

CHECKER is the check_cli_args program (kerneleval's own argument parser, no
RPCs). For each kustomization, the CronJob's container args are rendered (as
cronjob_args.py does) and passed to it; it must accept them as a `bench` of a
suite with a JSON report, aimed at the headless Service (whose DNS name
resolves to every server pod: the client fans the suite out over them).

Options naming files the pod mounts (--tls-ca, --tls-cert, --tls-key; the
parser checks that they exist) are pointed at an empty temporary file here:
their existence is the cluster's business, their spelling the parser's.
"""

import subprocess
import sys
import tempfile

from k8s_render import RenderError, render


def cronjob_args(directory):
    documents, mode = render(directory)
    cronjobs = [d for d in documents if d.get("kind") == "CronJob"
                and d["metadata"]["name"] == "kerneleval-benchmark"]
    if len(cronjobs) != 1:
        raise RenderError(f"{directory}: expected one CronJob, found {len(cronjobs)}")
    spec = cronjobs[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = spec["containers"][0]
    return [str(a) for a in container.get("command", [])], [str(a) for a in container.get("args", [])], mode


FILE_OPTIONS = ("--tls-ca", "--tls-cert", "--tls-key")


def with_local_files(args, path):
    out = list(args)
    for i, arg in enumerate(out):
        if arg in FILE_OPTIONS and i + 1 < len(out):
            out[i + 1] = path
        elif "=" in arg and arg.split("=", 1)[0] in FILE_OPTIONS:
            out[i] = f"{arg.split('=', 1)[0]}={path}"
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    checker, directories = argv[1], argv[2:]
    failures = 0
    for directory in directories:
        try:
            command, args, mode = cronjob_args(directory)
        except RenderError as error:
            print(f"FAIL {directory}: {error}")
            failures += 1
            continue
        with tempfile.NamedTemporaryFile(suffix=".pem") as placeholder:
            result = subprocess.run([checker, *with_local_files(args, placeholder.name)],
                                    capture_output=True, text=True, check=False)
        parsed = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        targets = [line.split("=", 1)[1] for line in result.stdout.splitlines()
                   if line.startswith("target=")]
        problems = []
        if command != ["kerneleval"]:
            problems.append(f"command is {command}, expected ['kerneleval']")
        if result.returncode != 0:
            problems.append(f"parser rejected {args}: {result.stderr.strip()}")
        else:
            if parsed.get("command") != "bench":
                problems.append(f"command {parsed.get('command')!r}, expected 'bench'")
            if not parsed.get("suite"):
                problems.append("no --suite")
            if parsed.get("format") != "json":
                problems.append(f"format {parsed.get('format')!r}, expected 'json'")
            if len(targets) != 1 or not targets[0].startswith("kerneleval-headless."):
                problems.append(f"targets {targets}, expected the headless Service")
        status = "FAIL" if problems else "ok"
        print(f"{status} {directory} ({mode}): {' '.join(args)}")
        for problem in problems:
            print(f"  {problem}")
        failures += bool(problems)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

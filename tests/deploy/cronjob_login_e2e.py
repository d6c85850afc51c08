#!/usr/bin/env python3
"""Run the benchmark CronJob's own command line against a real server, both configured
from the Secrets exactly as the cluster mounts them.

    cronjob_login_e2e.py --server BIN --client BIN --suites-dir DIR KUSTOMIZATION_DIR

The overlay is rendered (kubectl kustomize, else the base's sources). From it:

- the Secrets the day-one commands create (deploy/README.md) are laid out on disk the way
  the kubelet projects them: kerneleval-auth's `token` key is the servers' token file,
  `owner:token` lines with a trailing newline (what `--from-file=token=./token` stores);
  kerneleval-tls holds tls.crt, tls.key and ca.crt of a CA made here with openssl;
- the DaemonSet's --auth-token-file, --tls-cert and --tls-key, through its volume mounts,
  configure a real kerneleval-server on loopback (CPU backend);
- the CronJob's container is run as the kubelet would: its command and args, its mounts
  mapped onto those files, every env var its spec draws from a Secret key set to that
  key's content. Only --target changes (the headless Service's DNS name cannot resolve
  here; --tls-server-name still checks the certificate against the Service name).

Pass: the client authenticates (no UNAUTHENTICATED, no abort on a header value) and the
server answers the bench. The CronJob asks for cuda:0 with --all-devices; a CPU server has
no cuda:0, so that run must end in the server's NOT_FOUND for the device (an answer only an
authenticated caller gets), and the same command line with `--device cpu` must return a
JSON report with results. On a CronJob that hands the Secret over as $KERNELEVAL_TOKEN, the
client sends `owner:token` and is refused: this test fails.
"""

import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from k8s_render import RenderError, render


def small_suites(suites_dir, work):
    """The served suites under their own names with their two smallest workloads: the test is
    about logging in, and the whole official suite, cold on a busy 2-core CPU, can take minutes."""
    small = work / "suites"
    small.mkdir()
    for path in sorted(suites_dir.glob("*.json")):
        suite = json.loads(path.read_text(encoding="utf-8"))
        suite["workloads"] = suite["workloads"][:2]
        (small / path.name).write_text(json.dumps(suite), encoding="utf-8")
    return small

STARTUP_SECONDS = 60
CALL_SECONDS = 120
SERVICE_NAME = "kerneleval.kerneleval.svc"


class Failed(Exception):
    pass


def one(documents, kind, name):
    found = [d for d in documents if d.get("kind") == kind and d["metadata"]["name"] == name]
    if len(found) != 1:
        raise Failed(f"expected one {kind} {name}, found {len(found)}")
    return found[0]


def make_tls(directory, openssl):
    """A CA and a server certificate for the Service names, as cert-manager would write them."""
    def run(*args):
        result = subprocess.run([openssl, *args], cwd=directory, capture_output=True, text=True,
                                check=False)
        if result.returncode != 0:
            raise Failed(f"openssl {' '.join(args)}: {result.stderr}")

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=kerneleval-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
        "-subj", f"/CN={SERVICE_NAME}")
    (directory / "san.ext").write_text(
        f"subjectAltName=DNS:{SERVICE_NAME},DNS:kerneleval-headless.kerneleval.svc.cluster.local\n",
        encoding="utf-8")
    run("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "tls.crt", "-days", "2", "-extfile", "san.ext")
    return {name: (directory / name).read_bytes() for name in ("tls.crt", "tls.key", "ca.crt")}


def project_volumes(pod_spec, container, secrets, root):
    """Mount path -> local directory, with each Secret volume's keys written as the kubelet
    projects them (all keys, or `items` key -> path)."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        local = root / f"{container['name']}-{mount['name']}"
        local.mkdir(parents=True, exist_ok=True)
        if "secret" in volume:
            data = secrets.get(volume["secret"]["secretName"])
            if data is None:
                raise Failed(f"volume {mount['name']}: Secret {volume['secret']['secretName']} "
                             "is not one the day-one commands create")
            items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] not in data:
                    raise Failed(f"volume {mount['name']}: Secret has no key {item['key']}")
                (local / item["path"]).write_bytes(data[item["key"]])
        mounts[mount["mountPath"].rstrip("/")] = local
    return mounts


def local_path(value, mounts):
    for mount_path, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
        if value == mount_path or value.startswith(mount_path + "/"):
            return str(local) + value[len(mount_path):]
    return value


def container_env(container, secrets):
    """The env the kubelet would give: values, and Secret keys by content (bytes as text)."""
    env = {}
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        ref = entry.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            env[entry["name"]] = secrets[ref["name"]][ref["key"]].decode("utf-8")
    return env


def arg_value(args, name):
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def with_arg(args, name, value):
    out = list(args)
    for i, arg in enumerate(out):
        if arg == name and i + 1 < len(out):
            out[i + 1] = value
            return out
        if arg.startswith(name + "="):
            out[i] = f"{name}={value}"
            return out
    raise Failed(f"no {name} in {args}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--suites-dir", required=True)
    parser.add_argument("--openssl", default=shutil.which("openssl"))
    parser.add_argument("kustomization")
    args = parser.parse_args(argv[1:])
    if not args.openssl:
        print("openssl is needed (apt-get install openssl)", file=sys.stderr)
        return 1

    work = pathlib.Path(tempfile.mkdtemp(prefix="kerneleval-cronjob-login-"))
    server = None
    try:
        documents, mode = render(args.kustomization)
        print(f"rendered {args.kustomization} ({mode})")
        # The day-one Secrets. The token file as an operator writes it: one line per caller,
        # a trailing newline, the benchmark's line not first.
        tokens = {owner: os.urandom(16).hex() for owner in ("prometheus", "benchmark", "alice")}
        token_file = "".join(f"{owner}:{token}\n" for owner, token in tokens.items())
        secrets = {
            "kerneleval-auth": {"token": token_file.encode()},
            "kerneleval-tls": make_tls(work, args.openssl),
            "kerneleval-metrics-token": {"token": (tokens["prometheus"] + "\n").encode()},
            "kerneleval-results-db": {"url": b"postgresql://unused@127.0.0.1:1/unused"},
        }

        daemonset = one(documents, "DaemonSet", "kerneleval")
        server_pod = daemonset["spec"]["template"]["spec"]
        server_container = server_pod["containers"][0]
        server_mounts = project_volumes(server_pod, server_container, secrets, work)
        server_args = server_container.get("args", [])
        port_file = work / "ports.json"
        command = [args.server, "--listen", "127.0.0.1:0", "--metrics-listen", "",
                   "--port-file", str(port_file), "--device", "cpu", "--drain-seconds", "1",
                   "--suites-dir", str(small_suites(pathlib.Path(args.suites_dir), work))]
        for flag in ("--auth-token-file", "--tls-cert", "--tls-key"):
            value = arg_value(server_args, flag)
            if value is None:
                raise Failed(f"the DaemonSet has no {flag}")
            command += [flag, local_path(value, server_mounts)]
        with open(work / "server.log", "w", encoding="utf-8") as log:
            server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
        end = time.monotonic() + STARTUP_SECONDS
        grpc_port = None
        while grpc_port is None:
            if server.poll() is not None:
                raise Failed(f"server exited ({server.returncode}):\n"
                             f"{(work / 'server.log').read_text(errors='replace')[-3000:]}")
            try:
                grpc_port = int(json.loads(port_file.read_text(encoding="utf-8"))["grpc_port"])
            except (OSError, ValueError, KeyError):
                if time.monotonic() > end:
                    raise Failed(f"no port file after {STARTUP_SECONDS} s") from None
                time.sleep(0.1)
        print(f"server on 127.0.0.1:{grpc_port} with the DaemonSet's token and TLS files")

        cronjob = one(documents, "CronJob", "kerneleval-benchmark")
        pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        if container.get("command") != ["kerneleval"]:
            raise Failed(f"CronJob command {container.get('command')}, expected ['kerneleval']")
        mounts = project_volumes(pod, container, secrets, work)
        cron_args = [local_path(str(a), mounts) for a in container.get("args", [])]
        cron_args = with_arg(cron_args, "--target", f"127.0.0.1:{grpc_port}")
        # Only what the pod's spec gives (plus PATH for the dynamic loader's sake).
        env = dict(container_env(container, secrets), PATH=os.environ.get("PATH", "/usr/bin"))

        def run(run_args):
            print("$ kerneleval " + " ".join(run_args))
            result = subprocess.run([args.client, *run_args], env=env, capture_output=True,
                                    text=True, timeout=CALL_SECONDS, check=False)
            print(f"exit {result.returncode}\n{result.stderr.strip()[-2000:]}")
            if result.returncode < 0 or result.returncode == 134:
                raise Failed("the client aborted (an invalid header value?)")
            combined = result.stdout + result.stderr
            if "UNAUTHENTICATED" in combined or "PERMISSION_DENIED" in combined:
                raise Failed("the server refused the CronJob's token")
            return result

        # Warm-up first (the CronJob runs against ready pods): the line's own connection flags.
        global_args = cron_args[:cron_args.index("bench")]
        end = time.monotonic() + STARTUP_SECONDS
        while True:
            probe = subprocess.run([args.client, *with_arg(global_args, "--deadline", "5"), "health",
                                    "--service", "readiness"], env=env, capture_output=True,
                                   text=True, timeout=30, check=False)
            if probe.returncode == 0:
                break
            if time.monotonic() > end:
                raise Failed(f"server not ready after {STARTUP_SECONDS} s: {probe.stderr.strip()}")
            time.sleep(0.3)
        # The CronJob's exact arguments: cuda:0 does not exist on this CPU server, which only
        # an authenticated caller learns.
        exact = run(cron_args)
        if exact.returncode == 0 or "cuda:0" not in exact.stdout + exact.stderr:
            raise Failed(f"expected the server's answer that cuda:0 is not found, got exit "
                         f"{exact.returncode}:\n{exact.stdout[-2000:]}")
        # The same line on the CPU device: the hourly report, with results.
        report_run = run(with_arg(cron_args, "--device", "cpu"))
        if report_run.returncode != 0:
            raise Failed(f"bench on cpu failed (exit {report_run.returncode})")
        report = json.loads(report_run.stdout)
        results = report.get("results") or []
        if not results or not report.get("complete"):
            raise Failed(f"the report is incomplete or holds no results:\n{report_run.stdout[:2000]}")
        print(f"ok: the CronJob's command line logged in as owner "
              f"{arg_value(cron_args, '--owner')!r} and got a report")
        return 0
    except (Failed, RenderError, subprocess.TimeoutExpired) as error:
        print(f"FAIL: {error}")
        return 1
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

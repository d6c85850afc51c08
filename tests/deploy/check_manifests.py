#!/usr/bin/env python3
"""Check the rendered Kubernetes objects of kustomize overlays.

    check_manifests.py [--require-kubectl] DIR [DIR...]

DIR is a kustomization (deploy/k8s/base or deploy/k8s/overlays/<product>).
With kubectl the overlay is rendered by kustomize and everything is checked;
without it only the base sources are checked (see k8s_render.py) and the
overlay-specific checks (product selection, generated ConfigMaps) are skipped.
--require-kubectl turns a missing kubectl into exit status 77 (skipped).

Exit status: 0 valid, 1 findings, 2 bad input, 77 skipped.
"""

import argparse
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

from k8s_render import RenderError, find_kubectl, render

REPO = pathlib.Path(__file__).resolve().parents[2]
GRPC_PORT, METRICS_PORT, HEALTH_PORT = 50051, 9464, 50052
GPUS_PER_NODE = 8  # the evaluation pool takes every GPU of an HGX node
# The device name NVML (and CUDA, and so the server's `model`) reports for each overlay's
# product. Where each comes from (deploy/README.md, "GPU product labels"):
#   h200: read by this project on its H200 (docs/results/device-isolation-h200.md, checked
#         below against the recorded `device cuda:0 NVIDIA H200 GPU-...` line);
#   h100: the SXM5 80 GB board (server/figures/sol.cc records the same name);
#   b200: NVIDIA's B200 (HGX B200) name.
NVML_NAMES = {
    "h100": "NVIDIA H100 80GB HBM3",
    "h200": "NVIDIA H200",
    "b200": "NVIDIA B200",
}


def gfd_label(nvml_name):
    """GPU Feature Discovery's nvidia.com/gpu.product: the NVML name, spaces -> hyphens
    (without time-slicing's -SHARED suffix or a MIG profile)."""
    return nvml_name.strip().replace(" ", "-")


# The GPU Feature Discovery product label each overlay must select.
PRODUCTS = {overlay: gfd_label(name) for overlay, name in NVML_NAMES.items()}


def recorded_h200_name():
    """The model name the server reported on the project's H200 (a results log)."""
    text = (REPO / "docs/results/device-isolation-h200.md").read_text(encoding="utf-8")
    match = re.search(r"device cuda:0 (.+?) GPU-[0-9a-f-]+;", text)
    return match.group(1) if match else None


# name[:tag][@sha256:<64 hex>]; the tag's colon is the last one after the last slash.
IMAGE_REFERENCE = re.compile(r"^(?P<name>[^@\s]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?"
                             r"(?:@(?P<digest>[a-z0-9]+:[0-9a-fA-F]+))?$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
PLACEHOLDER_DIGEST = "sha256:" + "0" * 64


def image_reference(image):
    """{'name', 'tag', 'digest'} of an image reference (missing parts None)."""
    match = IMAGE_REFERENCE.match(image)
    if not match or "/" in (match["tag"] or ""):
        return {"name": image, "tag": None, "digest": None}
    return match.groupdict()


def registry_host(image):
    """The registry of an image reference, or None for a Docker Hub short name."""
    first = image.split("/", 1)[0] if "/" in image else ""
    return first if ("." in first or ":" in first or first == "localhost") else None
# The kerneleval CLI's global options (client/cli.cc): those that take a value and flags.
CLI_GLOBAL_OPTIONS = {"--target", "--deadline", "--token", "--token-file", "--owner", "--tls-ca", "--tls-cert", "--tls-key",
                      "--tls-server-name", "--max-message-mib"}
CLI_GLOBAL_FLAGS = {"--json", "--tls"}
CLI_SUBCOMMANDS = {"devices", "suites", "health", "run", "bench"}
CLUSTER_KINDS = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding"}
# kubectl apply (client side) keeps a copy in an annotation limited to 256 KiB.
ANNOTATION_LIMIT = 262144


def arg_value(args, name):
    """The value of `--name value` or `--name=value` in an argument list."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class Checker:
    def __init__(self, directory, documents, mode):
        self.directory = pathlib.Path(directory)
        self.docs = documents
        self.mode = mode
        # deploy/k8s/overlays/* are what a cluster applies; the base is their development form.
        self.production = self.directory.resolve().parent.name == "overlays"
        self.problems = []

    def fail(self, message):
        self.problems.append(message)

    def of_kind(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind, name=None):
        found = [d for d in self.of_kind(kind) if name is None or d["metadata"]["name"] == name]
        if len(found) != 1:
            self.fail(f"expected one {kind}{' ' + name if name else ''}, found {len(found)}")
            return None
        return found[0]

    # --- the server workload -------------------------------------------------
    def check_server(self):
        workloads = [d for d in self.of_kind("DaemonSet") + self.of_kind("Deployment")
                     if any(c["name"] == "server" for c in d["spec"]["template"]["spec"]["containers"])]
        if len(workloads) != 1:
            self.fail(f"expected one workload with a `server` container, found {len(workloads)}")
            return None
        workload = workloads[0]
        pod = workload["spec"]["template"]["spec"]
        labels = workload["spec"]["template"]["metadata"].get("labels", {})
        if not selects(workload["spec"]["selector"].get("matchLabels"), labels):
            self.fail(f"{workload['kind']} selector does not match its pod labels")
        server = next(c for c in pod["containers"] if c["name"] == "server")

        limits = server.get("resources", {}).get("limits", {})
        requests = server.get("resources", {}).get("requests", {})
        if str(limits.get("nvidia.com/gpu")) != str(GPUS_PER_NODE):
            self.fail(f"server limits nvidia.com/gpu is {limits.get('nvidia.com/gpu')!r}, want every GPU "
                      f"of a node ({GPUS_PER_NODE})")
        if "nvidia.com/gpu" in requests and str(requests["nvidia.com/gpu"]) != str(limits.get("nvidia.com/gpu")):
            self.fail("a GPU request must equal the GPU limit")
        for key in ("cpu", "memory"):
            if key not in requests or key not in limits:
                self.fail(f"server resources need a {key} request and limit")

        ports = {p.get("name"): p.get("containerPort") for p in server.get("ports", [])}
        if ports != {"grpc": GRPC_PORT, "metrics": METRICS_PORT, "health": HEALTH_PORT}:
            self.fail(f"server ports {ports}, want grpc {GRPC_PORT}, metrics {METRICS_PORT}, "
                      f"health {HEALTH_PORT}")

        # Probes go to the plaintext health port: the main port needs TLS and a token,
        # which the kubelet's gRPC probes cannot present.
        want_service = {"startupProbe": None, "readinessProbe": "readiness", "livenessProbe": None}
        for probe_name, service in want_service.items():
            grpc = (server.get(probe_name) or {}).get("grpc")
            if not grpc:
                self.fail(f"server has no gRPC {probe_name}")
                continue
            if grpc.get("port") != HEALTH_PORT:
                self.fail(f"{probe_name} port {grpc.get('port')!r}, want the health port {HEALTH_PORT}")
            if (grpc.get("service") or None) != service:
                self.fail(f"{probe_name} service {grpc.get('service')!r}, want {service!r}")

        args = server.get("args", [])
        if not (arg_value(args, "--health-listen") or "").endswith(f":{HEALTH_PORT}"):
            self.fail(f"server --health-listen must serve the probes' port {HEALTH_PORT}")
        if arg_value(args, "--device") != "cuda":
            self.fail(f"server --device {arg_value(args, '--device')!r}, want cuda (every GPU, no CPU "
                      "fallback)")
        # Closed by default: token and TLS from Secrets mounted read-only.
        mounts = {m["mountPath"]: m for m in server.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for flag in ("--auth-token-file", "--tls-cert", "--tls-key"):
            path = arg_value(args, flag)
            mount = next((m for p, m in mounts.items() if path and path.startswith(p.rstrip("/") + "/")),
                         None)
            if path is None:
                self.fail(f"server lacks {flag}: the service would be open")
            elif mount is None or "secret" not in volumes.get(mount["name"], {}):
                self.fail(f"server {flag} {path!r} is not in a mounted Secret")
        env = {e["name"]: e for e in server.get("env", [])}
        if (env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                != "spec.nodeName"):
            self.fail("server needs NODE_NAME from the downward API (spec.nodeName): the node label")
        self.check_results_store(args, env)
        strategy = workload["spec"].get("updateStrategy", {}).get("rollingUpdate", {})
        if workload["kind"] == "DaemonSet" and not str(strategy.get("maxUnavailable", "")).endswith("%"):
            self.fail(f"DaemonSet maxUnavailable {strategy.get('maxUnavailable')!r}: a percentage, so that "
                      "a rollout over hundreds of nodes takes a few waves")
        drain = arg_value(args, "--drain-seconds")
        grace = pod.get("terminationGracePeriodSeconds")
        if drain is None or grace is None or not int(grace) > int(drain):
            self.fail(f"terminationGracePeriodSeconds {grace} must exceed --drain-seconds {drain}")
        for flag, port in (("--listen", GRPC_PORT), ("--metrics-listen", METRICS_PORT)):
            value = arg_value(args, flag) or ""
            if not value.endswith(f":{port}"):
                self.fail(f"server {flag} {value!r} does not listen on {port}")

        pod_security = pod.get("securityContext", {})
        container_security = server.get("securityContext", {})
        if not (pod_security.get("runAsNonRoot") or container_security.get("runAsNonRoot")):
            self.fail("server must set runAsNonRoot")
        if container_security.get("allowPrivilegeEscalation") is not False:
            self.fail("server must set allowPrivilegeEscalation: false")

        if not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])):
            self.fail("server pods need a toleration for nvidia.com/gpu")
        if not any(t.get("key") == "kerneleval.io/pool" and t.get("value") == "evaluation"
                   for t in pod.get("tolerations", [])):
            self.fail("server pods need a toleration for the evaluation pool's taint")
        pool = [e for term in pod.get("affinity", {}).get("nodeAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
                for e in term.get("matchExpressions", []) if e.get("key") == "kerneleval.io/pool"]
        if not pool or pool[0].get("values") != ["evaluation"]:
            self.fail("server pods must require the evaluation pool (kerneleval.io/pool In [evaluation])")
        # Driver upgrades: the pod must leave a node the GPU Operator's upgrade controller is
        # working on (drain and its pod deletion do not remove a DaemonSet pod), in every
        # term of the affinity (terms are ORed).
        upgrading = {"cordon-required", "wait-for-jobs-required", "pod-deletion-required",
                     "drain-required", "pod-restart-required", "validation-required",
                     "uncordon-required"}
        for term in (pod.get("affinity", {}).get("nodeAffinity", {})
                     .get("requiredDuringSchedulingIgnoredDuringExecution", {})
                     .get("nodeSelectorTerms", [])):
            leave = [e for e in term.get("matchExpressions", [])
                     if e.get("key") == "nvidia.com/gpu-driver-upgrade-state"
                     and e.get("operator") == "NotIn"]
            if not leave or not upgrading <= set(leave[0].get("values", [])):
                self.fail("server pods must leave a node during a GPU driver upgrade "
                          "(nvidia.com/gpu-driver-upgrade-state NotIn every in-progress state)")
            elif {"upgrade-done", "upgrade-required", "upgrade-failed"} & set(leave[0]["values"]):
                self.fail("server pods must run on a node whose driver upgrade is done, "
                          "pending or failed")
        products = set()
        if "nvidia.com/gpu.product" in pod.get("nodeSelector", {}):
            products.add(pod["nodeSelector"]["nvidia.com/gpu.product"])
        affinity = pod.get("affinity", {}).get("nodeAffinity", {})
        terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        for term in terms:
            for expression in term.get("matchExpressions", []):
                if expression.get("key") == "nvidia.com/gpu.product" and expression.get("operator") == "In":
                    products.update(expression.get("values", []))
        if not products:
            self.fail("server pods select no nvidia.com/gpu.product")
        unknown = products - set(PRODUCTS.values())
        if unknown:
            self.fail(f"unknown GPU products {sorted(unknown)}")
        expected = PRODUCTS.get(self.directory.name)
        if expected and self.mode == "kustomize":
            if pod.get("nodeSelector", {}).get("nvidia.com/gpu.product") != expected:
                self.fail(f"overlay {self.directory.name} must select nvidia.com/gpu.product={expected}")

        suites_dir = arg_value(args, "--suites-dir")
        mounts = {m["mountPath"]: m["name"] for m in server.get("volumeMounts", [])}
        volume = volumes.get(mounts.get(suites_dir, ""), {})
        if "configMap" not in volume:
            self.fail(f"--suites-dir {suites_dir!r} is not a mounted ConfigMap")
        elif self.mode == "kustomize":
            configmap = self.one("ConfigMap", volume["configMap"]["name"])
            suites = sorted(p.name for p in (REPO / "suites").glob("*.json"))
            if configmap is not None and sorted(configmap.get("data", {})) != suites:
                self.fail(f"suites ConfigMap holds {sorted(configmap.get('data', {}))}, suites/ has {suites}")
        return workload

    def check_results_store(self, args, env):
        """Benchmark reports kept in PostgreSQL (URL from a Secret), with retention on."""
        flags_cc = (REPO / "server/app/server_flags.cc").read_text(encoding="utf-8")
        for flag in ("--results-db", "--results-max-age-days", "--results-raw-sample-runs"):
            if f'"{flag}"' not in flags_cc:
                self.fail(f"server/app/server_flags.cc has no {flag}; the manifests pass it")
        url = arg_value(args, "--results-db") or ""
        match = re.fullmatch(r"\$\((\w+)\)", url)
        secret = env.get(match.group(1), {}) if match else {}
        if not secret.get("valueFrom", {}).get("secretKeyRef", {}).get("name"):
            self.fail(f"server --results-db {url!r} must be $(VAR) of an env var from a Secret (the "
                      "URL holds a password); without it results live in memory only")
        # Benchmarks through the queue the pool shares, not the pod a connection reached.
        if "--queue-benchmarks" not in args:
            self.fail("server args lack --queue-benchmarks: a Benchmark would run on the pod its "
                      "connection reached, full or not")
        if '"--queue-benchmarks"' not in flags_cc:
            self.fail("server/app/server_flags.cc has no --queue-benchmarks; the manifests pass it")
        for flag in ("--results-max-age-days", "--results-raw-sample-runs"):
            value = arg_value(args, flag)
            if value is None or not float(value) > 0:
                self.fail(f"server {flag} {value!r}: retention must be on by default")

    # --- Services, ServiceMonitor, PodDisruptionBudget ------------------------
    def check_services(self, workload):
        labels = workload["spec"]["template"]["metadata"].get("labels", {})
        container_ports = {p["name"] for c in workload["spec"]["template"]["spec"]["containers"]
                           for p in c.get("ports", [])}
        services = self.of_kind("Service")
        for service in services:
            name = service["metadata"]["name"]
            if not selects(service["spec"].get("selector"), labels):
                self.fail(f"Service {name} selector {service['spec'].get('selector')} matches no server pod")
            for port in service["spec"].get("ports", []):
                target = port.get("targetPort", port.get("port"))
                if isinstance(target, str) and target not in container_ports:
                    self.fail(f"Service {name} targetPort {target!r} is no container port")
        main = self.one("Service", "kerneleval")
        if main is not None:
            ports = {p["name"]: p["port"] for p in main["spec"]["ports"]}
            if main["spec"].get("clusterIP") == "None" or ports != {"grpc": GRPC_PORT, "metrics": METRICS_PORT}:
                self.fail(f"Service kerneleval must be ClusterIP with grpc/metrics ports, has {ports}")
        headless = self.one("Service", "kerneleval-headless")
        if headless is not None:
            ports = {p["name"]: p["port"] for p in headless["spec"]["ports"]}
            if headless["spec"].get("clusterIP") != "None" or ports.get("grpc") != GRPC_PORT:
                self.fail("Service kerneleval-headless must be headless with port grpc 50051")

        pushgateway = []
        for monitor in self.of_kind("ServiceMonitor"):
            if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
                self.fail(f"ServiceMonitor apiVersion {monitor.get('apiVersion')}")
            selector = monitor["spec"].get("selector", {}).get("matchLabels", {})
            namespace = monitor["metadata"].get("namespace")
            elsewhere = monitor["spec"].get("namespaceSelector", {}).get("matchNames")
            if elsewhere and namespace not in elsewhere:
                # A Service of another release (the Pushgateway in monitoring).
                pushgateway.append(monitor)
                continue
            chosen = [s for s in services if selects(selector, s["metadata"].get("labels", {}))
                      and s["metadata"].get("namespace") == namespace]
            if len(chosen) != 1:
                self.fail(f"ServiceMonitor selects {len(chosen)} Services; pods would be scraped "
                          f"{'never' if not chosen else 'more than once'}")
            for endpoint in monitor["spec"].get("endpoints", []):
                # /metrics takes the server's bearer tokens where --auth-token-file is given.
                credentials = endpoint.get("authorization", {}).get("credentials", {})
                if (endpoint.get("authorization", {}).get("type", "Bearer") != "Bearer"
                        or not credentials.get("name") or not credentials.get("key")):
                    self.fail("the server ServiceMonitor must present a bearer token from a Secret "
                              "(authorization.credentials): /metrics takes the --auth-token-file tokens")
                for service in chosen:
                    if endpoint.get("port") not in {p.get("name") for p in service["spec"]["ports"]}:
                        self.fail(f"ServiceMonitor port {endpoint.get('port')!r} is not a port of "
                                  f"Service {service['metadata']['name']}")
        if not self.of_kind("ServiceMonitor"):
            self.fail("no ServiceMonitor")
        # Fleet-validation results reach Prometheus only through the Pushgateway, and only
        # with the pushed job / node / uuid labels kept (honorLabels).
        if len(pushgateway) != 1:
            self.fail(f"expected one ServiceMonitor of the Pushgateway, found {len(pushgateway)}")
        for monitor in pushgateway:
            if monitor["spec"]["selector"].get("matchLabels", {}).get("app.kubernetes.io/name") != \
                    "prometheus-pushgateway":
                self.fail("the Pushgateway ServiceMonitor must select app.kubernetes.io/name="
                          "prometheus-pushgateway (the chart's Service)")
            if not all(e.get("honorLabels") is True for e in monitor["spec"].get("endpoints", [])):
                self.fail("the Pushgateway ServiceMonitor needs honorLabels: true")
        # kube-prometheus-stack selects monitoring objects by its `release` label.
        if self.production:
            for doc in self.docs:
                if doc.get("apiVersion", "").startswith("monitoring.coreos.com/") and \
                        not doc["metadata"].get("labels", {}).get("release"):
                    self.fail(f"{doc['kind']} {doc['metadata']['name']} lacks the `release` label "
                              "kube-prometheus-stack selects")

        # `kubectl drain --ignore-daemonsets` never evicts DaemonSet pods, so a budget on them
        # protects nothing and only blocks eviction-based maintenance tools.
        if workload["kind"] == "DaemonSet" and self.of_kind("PodDisruptionBudget"):
            self.fail("a PodDisruptionBudget on a DaemonSet protects nothing; remove it")

    # --- the scheduled benchmark ----------------------------------------------
    def check_cronjob(self, workload):
        cronjob = self.one("CronJob", "kerneleval-benchmark")
        if cronjob is None:
            return
        spec = cronjob["spec"]
        if spec.get("concurrencyPolicy") != "Forbid":
            self.fail(f"CronJob concurrencyPolicy {spec.get('concurrencyPolicy')!r}, want Forbid")
        for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
            if not isinstance(spec.get(key), int):
                self.fail(f"CronJob needs {key}")
        job = spec["jobTemplate"]["spec"]
        active = job.get("activeDeadlineSeconds")
        if not isinstance(active, int):
            self.fail("CronJob's job needs activeDeadlineSeconds")
        pod = job["template"]["spec"]
        if pod.get("restartPolicy") != "Never":
            self.fail(f"CronJob restartPolicy {pod.get('restartPolicy')!r}, want Never")
        if not pod.get("securityContext", {}).get("runAsNonRoot"):
            self.fail("CronJob pods must set runAsNonRoot")
        container = pod["containers"][0]
        if container.get("command") != ["kerneleval"]:
            self.fail(f"CronJob command {container.get('command')}, want [kerneleval]")
        # A CPU-only client: the CLI image (no CUDA, no NVIDIA_* environment), no GPU, same release.
        server_image = workload["spec"]["template"]["spec"]["containers"][0]["image"]
        image = container.get("image", "")
        if image.split("/")[-1].split(":")[0].split("@")[0] != "kerneleval-cli":
            self.fail(f"CronJob image {image!r}: the CPU-only kerneleval-cli image, not the CUDA one")
        # Two images of one release share a tag; pinned by digest they differ by nature
        # (different contents), so then both must be pinned.
        server_ref, cli_ref = image_reference(server_image), image_reference(image)
        if self.mode == "kustomize" and (server_ref["digest"] is None) != (cli_ref["digest"] is None):
            self.fail(f"CronJob image {image} and server image {server_image}: pin both by digest or "
                      "neither")
        elif self.mode == "kustomize" and server_ref["digest"] is None and server_ref["tag"] != cli_ref["tag"]:
            self.fail(f"CronJob image {image} and server image {server_image} are different releases")
        if any("nvidia.com/gpu" in (container.get("resources", {}).get(k) or {}) for k in ("limits", "requests")):
            self.fail("the CronJob's client must not take a GPU")
        if any(e["name"].startswith("NVIDIA_") for e in container.get("env", [])):
            self.fail("the CronJob's client must not set NVIDIA_* variables")
        if job.get("backoffLimit") != 0:
            self.fail("CronJob backoffLimit must be 0: a failed server must not rerun the fleet")
        pod_labels = job["template"]["metadata"].get("labels", {})
        if pod_labels.get("kerneleval.io/client") != "true":
            self.fail("CronJob pods need kerneleval.io/client=true to pass the servers' NetworkPolicy")
        # The Secret's `token` key is the servers' token file (`owner:token` lines and a
        # newline): the client must read it as a file and pick its owner's line. Handed over
        # whole as $KERNELEVAL_TOKEN by an older CLI it was sent verbatim and refused.
        if "KERNELEVAL_TOKEN" in {e["name"] for e in container.get("env", [])}:
            self.fail("CronJob must not pass the auth Secret as KERNELEVAL_TOKEN; "
                      "mount it and give --token-file with --owner")
        token_file = arg_value(container.get("args", []), "--token-file")
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        auth_mount = [name for name, volume in volumes.items()
                      if volume.get("secret", {}).get("secretName") == "kerneleval-auth"]
        if not token_file or not auth_mount or auth_mount[0] not in mounts:
            self.fail("CronJob needs --token-file on a mount of the kerneleval-auth Secret")
        elif token_file != mounts[auth_mount[0]].rstrip("/") + "/token":
            self.fail(f"CronJob --token-file {token_file} is not the Secret's `token` key "
                      f"under {mounts[auth_mount[0]]}")
        if not arg_value(container.get("args", []), "--owner"):
            self.fail("CronJob needs --owner: the auth Secret holds one line per caller")

        args = container.get("args", [])
        i = 0
        while i < len(args) and args[i].startswith("--"):
            flag = args[i].split("=", 1)[0]
            if flag in CLI_GLOBAL_OPTIONS:
                i += 1 if "=" in args[i] else 2
            elif flag in CLI_GLOBAL_FLAGS:
                i += 1
            else:
                self.fail(f"CronJob arg {args[i]!r} is not a global option of the kerneleval CLI")
                return
        global_args, command = args[:i], args[i:]
        if not global_args or global_args[0].split("=", 1)[0] != "--target":
            self.fail("CronJob args must start with the global --target")
        if not command or command[0] != "bench":
            self.fail(f"CronJob subcommand {command[:1]}, want bench")
        if arg_value(command, "--suite") != "fused_add_rmsnorm_h2048" or arg_value(command, "--format") != "json":
            self.fail("CronJob must run bench --suite fused_add_rmsnorm_h2048 --format json")
        if "--all-devices" not in command:
            self.fail("CronJob must benchmark every GPU of a server (--all-devices)")
        if "--tls" not in global_args or not arg_value(global_args, "--tls-ca"):
            self.fail("CronJob must speak TLS (--tls --tls-ca) to the servers")
        concurrency = int(arg_value(command, "--concurrency") or 4)
        if concurrency < 64:
            self.fail(f"CronJob --concurrency {concurrency}: servers benchmark their own GPUs, so the "
                      "client fans out widely (a 4-wide fan-out leaves a large fleet unbenchmarked)")
        suites = {json.loads(p.read_text(encoding="utf-8")).get("name") for p in (REPO / "suites").glob("*.json")}
        if arg_value(command, "--suite") not in suites:
            self.fail(f"suite {arg_value(command, '--suite')!r} is not in suites/*.json")

        headless = [s for s in self.of_kind("Service") if s["spec"].get("clusterIP") == "None"]
        if headless:
            service = headless[0]["metadata"]
            want = f"{service['name']}.{service.get('namespace', 'default')}.svc.cluster.local:{GRPC_PORT}"
            if arg_value(global_args, "--target") != want:
                self.fail(f"CronJob --target {arg_value(global_args, '--target')!r}, want {want!r}")
        deadline = arg_value(global_args, "--deadline")
        if deadline is None or (isinstance(active, int) and not float(deadline) < active):
            self.fail(f"--deadline {deadline} must be set and below activeDeadlineSeconds {active}")

    # --- in-cluster fleet validation -------------------------------------------
    def check_fleet_cronjob(self):
        """The overlays run fleet validation in the cluster: a CronJob with a low, non-preempting
        priority class, rights to list nodes and create Jobs, the script and template of this
        repository, and Jobs restricted to the supported products on amd64."""
        cronjob = [c for c in self.of_kind("CronJob") if c["metadata"]["name"] == "kerneleval-fleet-validation"]
        if not cronjob:
            if self.production:
                self.fail("no CronJob kerneleval-fleet-validation: fleet validation must run in the cluster")
            return
        spec = cronjob[0]["spec"]
        if spec.get("concurrencyPolicy") != "Forbid":
            self.fail("fleet-validation CronJob needs concurrencyPolicy Forbid")
        pod = spec["jobTemplate"]["spec"]["template"]["spec"]
        classes = {c["metadata"]["name"]: c for c in self.of_kind("PriorityClass")}
        if pod.get("priorityClassName") not in classes:
            self.fail(f"fleet-validation CronJob priorityClassName {pod.get('priorityClassName')!r} "
                      "is not shipped")
        for name, cls in classes.items():
            if not cls.get("value", 0) < 0 or cls.get("preemptionPolicy") != "Never" or cls.get("globalDefault"):
                self.fail(f"PriorityClass {name}: want a negative value, preemptionPolicy Never, not default")
        account = pod.get("serviceAccountName")
        if not pod.get("automountServiceAccountToken", True) or account in (None, "kerneleval"):
            self.fail("the fleet-validation CronJob needs its own ServiceAccount with a token")
        granted = set()
        roles = {(r["kind"], r["metadata"]["name"]): r for r in self.of_kind("Role") + self.of_kind("ClusterRole")}
        for binding in self.of_kind("RoleBinding") + self.of_kind("ClusterRoleBinding"):
            if any(s.get("kind") == "ServiceAccount" and s.get("name") == account for s in binding["subjects"]):
                role = roles.get((binding["roleRef"]["kind"], binding["roleRef"]["name"]), {})
                for rule in role.get("rules", []):
                    for resource in rule["resources"]:
                        granted.update((resource, verb) for verb in rule["verbs"])
        for need in (("nodes", "list"), ("jobs", "create"), ("jobs", "list"), ("daemonsets", "get")):
            if need not in granted:
                self.fail(f"the fleet-validation ServiceAccount may not {need[1]} {need[0]}")
        if ("*" in {v for _, v in granted}) or ("secrets", "get") in granted:
            self.fail("the fleet-validation ServiceAccount has more rights than it needs")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        container = pod["containers"][0]
        mounted = [volumes[m["name"]]["configMap"]["name"] for m in container.get("volumeMounts", [])
                   if "configMap" in volumes.get(m["name"], {})]
        configmap = self.one("ConfigMap", mounted[0]) if mounted else None
        if configmap is None:
            self.fail("the fleet-validation CronJob mounts no ConfigMap with its script")
            return
        here = REPO / "deploy/k8s/fleet-validation"
        for name in ("fleet-validate.py", "job-template.yaml"):
            if configmap.get("data", {}).get(name) != (here / name).read_text(encoding="utf-8"):
                self.fail(f"fleet-validation ConfigMap's {name} differs from the repository's")
        env = {e["name"] for e in container.get("env", [])}
        if "KUEUE_QUEUE_NAME" not in env:
            self.fail("fleet-validation CronJob needs KUEUE_QUEUE_NAME (empty: no Kueue queue)")
        job = yaml.safe_load(configmap["data"].get("job-template.yaml", "{}"))
        job_pod = job["spec"]["template"]["spec"]
        if job_pod.get("priorityClassName") not in classes:
            self.fail(f"fleet-validation Jobs' priorityClassName {job_pod.get('priorityClassName')!r} "
                      "is not shipped")
        expressions = {e["key"]: e for term in job_pod.get("affinity", {}).get("nodeAffinity", {})
                       .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
                       for e in term.get("matchExpressions", [])}
        if sorted(expressions.get("nvidia.com/gpu.product", {}).get("values", [])) != sorted(PRODUCTS.values()):
            self.fail("fleet-validation Jobs must require the supported GPU products "
                      f"{sorted(PRODUCTS.values())} (the binaries carry sm_90a / sm_100a only)")
        if expressions.get("kubernetes.io/arch", {}).get("values") != ["amd64"]:
            self.fail("fleet-validation Jobs must require kubernetes.io/arch amd64")
        # Its results reach the results store, and its server runs no job of the fleet's queue.
        script = " ".join(job_pod["containers"][0].get("args", []))
        for flag in ("--results-db", "--queue-workers 0"):
            if flag not in script:
                self.fail(f"fleet-validation Jobs' server needs {flag}")
        job_env = {e["name"]: e for e in job_pod["containers"][0].get("env", [])}
        secret = job_env.get("KERNELEVAL_RESULTS_DB", {}).get("valueFrom", {}).get("secretKeyRef", {})
        if secret.get("name") != "kerneleval-results-db":
            self.fail("fleet-validation Jobs take KERNELEVAL_RESULTS_DB from Secret kerneleval-results-db")

    # --- NetworkPolicies and images ------------------------------------------
    def check_network(self, workload):
        policies = self.of_kind("NetworkPolicy")
        deny = [p for p in policies if p["spec"].get("podSelector") == {}
                and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
                and not p["spec"].get("ingress") and not p["spec"].get("egress")]
        if not deny:
            self.fail("no default-deny NetworkPolicy (podSelector {}, Ingress and Egress, no rules)")
        labels = workload["spec"]["template"]["metadata"].get("labels", {})
        server = [p for p in policies if selects(p["spec"].get("podSelector", {}).get("matchLabels"), labels)]
        if len(server) != 1:
            self.fail(f"expected one NetworkPolicy for the server pods, found {len(server)}")
            return
        allowed = {}
        for rule in server[0]["spec"].get("ingress", []):
            for port in rule.get("ports", []):
                allowed[port.get("port")] = rule.get("from")
        if set(allowed) != {GRPC_PORT, METRICS_PORT, HEALTH_PORT}:
            self.fail(f"server NetworkPolicy opens ports {sorted(allowed)}, want grpc, metrics, health")
        grpc_from = allowed.get(GRPC_PORT) or []
        if not grpc_from or not all(
                f.get("podSelector", {}).get("matchLabels", {}).get("kerneleval.io/client") == "true"
                for f in grpc_from):
            self.fail("the gRPC port must be open only to pods labelled kerneleval.io/client=true")
        if not allowed.get(METRICS_PORT):
            self.fail("the metrics port must be open only to the monitoring namespace, not to all")
        egress_ports = {p.get("port") for rule in server[0]["spec"].get("egress", [])
                        for p in rule.get("ports", [])}
        if "Egress" not in server[0]["spec"].get("policyTypes", []) or 5432 not in egress_ports:
            self.fail("the server NetworkPolicy must let the server reach PostgreSQL (5432) for --results-db")

    def check_images(self):
        for doc in self.docs:
            spec = doc.get("spec", {})
            pod = (spec.get("template") or spec.get("jobTemplate", {}).get("spec", {}).get("template")
                   or {}).get("spec")
            for container in (pod or {}).get("containers", []):
                image = container.get("image", "")
                if self.mode == "kustomize" and registry_host(image) is None:
                    self.fail(f"{doc['kind']} {doc['metadata']['name']} image {image!r} would be pulled "
                              "from Docker Hub's library namespace; name a registry")
                # An overlay is what a cluster runs: a tag can be re-pushed under it.
                reference = image_reference(image)
                if self.production and self.mode == "kustomize" and not DIGEST.match(
                        reference["digest"] or ""):
                    self.fail(f"{doc['kind']} {doc['metadata']['name']} image {image!r} is not pinned "
                              "by digest (name@sha256:<64 hex>)")
                # The unreleased overlays' all-zero digest is a placeholder: on the reserved
                # registry.invalid it can never pull, anywhere else it would pose as a release.
                if (reference["digest"] == PLACEHOLDER_DIGEST
                        and registry_host(image) != "registry.invalid"):
                    self.fail(f"{doc['kind']} {doc['metadata']['name']} image {image!r}: the all-zero "
                              "digest is a placeholder, not a pushed image; pin the digest the "
                              "registry returned (deploy/README.md, Images)")

    # --- packaged Grafana dashboard and Prometheus rules -----------------------
    def check_packaged(self):
        if self.mode == "kustomize":
            dashboards = [c for c in self.of_kind("ConfigMap")
                          if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
            if len(dashboards) != 1:
                self.fail(f"expected one ConfigMap labelled grafana_dashboard=1, found {len(dashboards)}")
            else:
                data = dashboards[0].get("data", {})
                source = (REPO / "deploy/grafana/kerneleval-dashboard.json").read_text(encoding="utf-8")
                if data.get("kerneleval-dashboard.json") != source:
                    self.fail("dashboard ConfigMap differs from deploy/grafana/kerneleval-dashboard.json")
                size = sum(len(v.encode()) for v in data.values())
                if size >= ANNOTATION_LIMIT:
                    self.fail(f"dashboard ConfigMap is {size} bytes; client-side kubectl apply allows "
                              f"{ANNOTATION_LIMIT}")
        rule = self.one("PrometheusRule")
        if rule is not None:
            groups = []
            for path in sorted((REPO / "deploy/prometheus/rules").glob("*.yml")):
                groups.extend(yaml.safe_load(path.read_text(encoding="utf-8"))["groups"])
            if rule["spec"].get("groups") != groups:
                self.fail("PrometheusRule groups differ from deploy/prometheus/rules/*.yml")

        namespaces = {d["metadata"].get("namespace") for d in self.docs if d.get("kind") not in CLUSTER_KINDS}
        if len(namespaces) != 1 or None in namespaces:
            self.fail(f"objects span namespaces {namespaces}")

    def run(self):
        workload = self.check_server()
        if workload is not None:
            self.check_services(workload)
            self.check_cronjob(workload)
            self.check_network(workload)
        if self.mode == "kustomize":
            self.check_fleet_cronjob()
        self.check_images()
        self.check_packaged()
        return self.problems


def check_product_labels():
    """The H200 label is what GFD derives from the name the server read on a real H200."""
    name = recorded_h200_name()
    if name is None:
        return ["docs/results/device-isolation-h200.md records no `device cuda:0 <name> GPU-...` line"]
    if gfd_label(name) != PRODUCTS["h200"]:
        return [f"the H200 overlay selects {PRODUCTS['h200']!r}, but the server read {name!r} on an "
                f"H200 (GFD label {gfd_label(name)!r})"]
    return []


def pinned_node(pod):
    """The node name a pod's node affinity requires by metadata.name (None without one); each
    term must require it, since terms are ORed."""
    names = set()
    terms = (pod.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))
    for term in terms:
        fields = [f for f in term.get("matchFields", [])
                  if f.get("key") == "metadata.name" and f.get("operator") == "In"
                  and len(f.get("values", [])) == 1]
        names.add(fields[0]["values"][0] if fields else None)
    return names.pop() if len(names) == 1 else None


def check_fleet_validation():
    """fleet-validate.py renders one Job per node: pinned to it, every GPU, results pushed
    under the node's name, unique names within Kubernetes' limits."""
    nodes = ["gpu-a", "gpu-b", "n" * 200]
    script = REPO / "deploy/k8s/fleet-validation/fleet-validate.py"
    result = subprocess.run([sys.executable, str(script), "--image", "registry.example/kerneleval@sha256:"
                             + "0" * 64, "--run", "202612010000", "--render", *nodes],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return [f"fleet-validate.py --render failed: {result.stderr.strip()}"]
    jobs = [d for d in yaml.safe_load_all(result.stdout) if d]
    problems = []
    if len(jobs) != len(nodes):
        problems.append(f"fleet-validate.py rendered {len(jobs)} Jobs for {len(nodes)} nodes")
    names = [j["metadata"]["name"] for j in jobs]
    if len(set(names)) != len(names) or any(len(n) > 63 for n in names):
        problems.append(f"fleet-validation Job names must be unique and at most 63 characters: {names}")
    for node, job in zip(nodes, jobs):
        pod = job["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = {e["name"]: e for e in container.get("env", [])}
        if pinned_node(pod) != node:
            problems.append(f"fleet-validation Job {job['metadata']['name']} is not pinned to node "
                            f"name {node[:20]} (node affinity on metadata.name)")
        if "kubernetes.io/hostname" in pod.get("nodeSelector", {}):
            problems.append("fleet-validation Jobs must not select the kubernetes.io/hostname label: "
                            "it can differ from the node's name, and the Job stays Pending for ever")
        rules = job["spec"].get("podFailurePolicy", {}).get("rules", [])
        if not any(r.get("action") == "Ignore" and {"type": "DisruptionTarget"} in
                   [{"type": c.get("type")} for c in r.get("onPodConditions", [])] for r in rules):
            problems.append("fleet-validation Jobs must not count a preempted or evicted pod as a "
                            "failure (podFailurePolicy: Ignore on DisruptionTarget)")
        if str(container["resources"]["limits"].get("nvidia.com/gpu")) != str(GPUS_PER_NODE):
            problems.append("a fleet-validation Job must take every GPU of its node")
        if env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
            problems.append("fleet-validation pods need NODE_NAME from the downward API (the push's node)")
        script_text = " ".join(container.get("args", []))
        if "--pushgateway" not in script_text or "--all-devices" not in script_text:
            problems.append("fleet-validation must benchmark --all-devices and push the results")
        if job["spec"].get("backoffLimit", 6) > 1:
            problems.append("a fleet-validation Job retries at most once")
        if any(len(v) > 63 for v in job["metadata"]["labels"].values()):
            problems.append("fleet-validation label values must fit 63 characters")
    return problems + check_unhealthy_gpus(script)


def check_unhealthy_gpus(script):
    """A node whose device plugin withholds a GPU: its Job asks for the healthy GPUs (not all 8,
    which would stay Pending and read as "never free"), the report names the unhealthy count, a
    node without a healthy GPU gets no Job, and --queue-name labels the Jobs for Kueue."""
    def node(name, capacity, allocatable, cordoned=False):
        return {"metadata": {"name": name}, "spec": {"unschedulable": cordoned},
                "status": {"capacity": {"nvidia.com/gpu": str(capacity)},
                           "allocatable": {"nvidia.com/gpu": str(allocatable)}}}
    nodes = {"kind": "NodeList", "items": [node("gpu-ok", 8, 8), node("gpu-one-bad", 8, 7),
                                           node("gpu-all-bad", 8, 0), node("gpu-cordoned", 8, 8, True)]}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as listing:
        json.dump(nodes, listing)
        listing.flush()
        result = subprocess.run([sys.executable, str(script), "--image", "registry.example/kerneleval@sha256:"
                                 + "0" * 64, "--run", "202612010000", "--queue-name", "gpu-batch",
                                 "--render-nodes", listing.name], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return [f"fleet-validate.py --render-nodes failed: {result.stderr.strip()}"]
    text, _, table = result.stdout.partition("\nnode ")
    jobs = {pinned_node(j["spec"]["template"]["spec"]): j
            for j in yaml.safe_load_all(text) if j}
    problems = []
    if sorted(jobs) != ["gpu-ok", "gpu-one-bad"]:
        problems.append(f"fleet-validate.py made Jobs for {sorted(jobs)}, want the schedulable nodes "
                        "with a healthy GPU")
    gpus = {n: j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
            for n, j in jobs.items()}
    if gpus != {"gpu-ok": 8, "gpu-one-bad": 7}:
        problems.append(f"fleet-validation Jobs ask for {gpus} GPUs, want each node's allocatable")
    if any(j["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") != "gpu-batch" for j in jobs.values()):
        problems.append("--queue-name must label every Job kueue.x-k8s.io/queue-name")
    lines = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip()}
    if "UNHEALTHY GPUs: 1 of 8" not in lines.get("gpu-one-bad", ""):
        problems.append(f"the report must name gpu-one-bad's unhealthy GPU: {lines.get('gpu-one-bad')!r}")
    if "UNHEALTHY GPUs: all 8" not in lines.get("gpu-all-bad", ""):
        problems.append(f"the report must name gpu-all-bad's GPUs as unhealthy: {lines.get('gpu-all-bad')!r}")
    if "cordoned" not in lines.get("gpu-cordoned", ""):
        problems.append("the report must name the cordoned node")
    return problems


def render_with_component(resources, component):
    """The documents of an overlay of `resources` with `component`, rendered from a copy of
    deploy/k8s (kustomize takes only relative paths); a RenderError says why not."""
    with tempfile.TemporaryDirectory() as temp:
        k8s = pathlib.Path(temp) / "k8s"
        shutil.copytree(REPO / "deploy/k8s", k8s)
        overlay = k8s / "overlays" / f"with-{component}"
        overlay.mkdir()
        (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": resources, "components": [f"../../components/{component}"]}),
            encoding="utf-8")
        documents, _ = render(overlay, allow_sources=False)
        return documents


def check_submissions_component():
    """The optional submissions component, added to an overlay, turns submissions on in every
    pool pod with a per-owner limit, and leaves the results database the store they live in."""
    if not find_kubectl():
        return []
    try:
        documents = render_with_component(["../../base"], "submissions")
    except RenderError as error:
        return [f"the submissions component does not render: {error}"]
    for doc in documents:
        if doc["kind"] == "DaemonSet" and doc["metadata"]["name"] == "kerneleval":
            args = doc["spec"]["template"]["spec"]["containers"][0]["args"]
            problems = []
            if "--submissions" not in args:
                problems.append("the submissions component must pass --submissions")
            if "--max-submissions-per-owner" not in args:
                problems.append("the submissions component must bound each owner's submissions")
            if "--results-db" not in args:
                problems.append("with submissions on, the pool must keep --results-db (where "
                                "a fleet's submissions live)")
            return problems
    return ["the submissions component's render has no kerneleval DaemonSet"]


def check_kueue_component():
    """The optional Kueue component, added to an overlay, hands the CronJob a queue name (and so
    every Job it creates the kueue.x-k8s.io/queue-name label; check_unhealthy_gpus)."""
    if not find_kubectl():
        return []
    try:
        documents = render_with_component(["../../fleet-validation"], "kueue")
    except RenderError as error:
        return [f"the Kueue component does not render: {error}"]
    for doc in documents:
        if doc["kind"] == "CronJob" and doc["metadata"]["name"] == "kerneleval-fleet-validation":
            env = {e["name"]: e.get("value") for e in
                   doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0].get("env", [])}
            if not env.get("KUEUE_QUEUE_NAME"):
                return ["the Kueue component leaves KUEUE_QUEUE_NAME empty"]
            return []
    return ["the Kueue component's render has no fleet-validation CronJob"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--require-kubectl", action="store_true",
                        help="exit 77 (skipped) when kubectl is absent")
    parser.add_argument("directories", nargs="+", metavar="DIR")
    args = parser.parse_args(argv)
    if args.require_kubectl and not find_kubectl():
        print("kubectl not found: skipped")
        return 77

    failed = False
    for problem in (check_product_labels() + check_fleet_validation() + check_kueue_component()
                    + check_submissions_component()):
        print(f"deploy: {problem}", file=sys.stderr)
        failed = True
    for directory in args.directories:
        try:
            documents, mode = render(directory)
        except (RenderError, OSError, yaml.YAMLError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        problems = Checker(directory, documents, mode).run()
        for problem in problems:
            print(f"{directory}: {problem}", file=sys.stderr)
        note = "" if mode == "kustomize" else " (kubectl absent: base sources only)"
        print(f"{directory}: {len(documents)} objects, {len(problems)} problems{note}")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

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
import sys

import yaml

from k8s_render import RenderError, find_kubectl, render

REPO = pathlib.Path(__file__).resolve().parents[2]
GRPC_PORT, METRICS_PORT = 50051, 9464
# The GPU Feature Discovery product label each overlay must select.
PRODUCTS = {
    "h100": "NVIDIA-H100-80GB-HBM3",
    "h200": "NVIDIA-H200-141GB-HBM3e",
    "b200": "NVIDIA-B200",
}
# The kerneleval CLI's global options (client/cli.cc): those that take a value and flags.
CLI_GLOBAL_OPTIONS = {"--target", "--deadline", "--token", "--tls-ca", "--tls-cert", "--tls-key",
                      "--tls-server-name", "--max-message-mib"}
CLI_GLOBAL_FLAGS = {"--json", "--tls"}
CLI_SUBCOMMANDS = {"devices", "suites", "health", "run", "bench"}
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
        if str(limits.get("nvidia.com/gpu")) != "1":
            self.fail(f"server limits nvidia.com/gpu is {limits.get('nvidia.com/gpu')!r}, want 1")
        if "nvidia.com/gpu" in requests and str(requests["nvidia.com/gpu"]) != str(limits.get("nvidia.com/gpu")):
            self.fail("a GPU request must equal the GPU limit")
        for key in ("cpu", "memory"):
            if key not in requests or key not in limits:
                self.fail(f"server resources need a {key} request and limit")

        ports = {p.get("name"): p.get("containerPort") for p in server.get("ports", [])}
        if ports.get("grpc") != GRPC_PORT or ports.get("metrics") != METRICS_PORT:
            self.fail(f"server ports {ports}, want grpc {GRPC_PORT} and metrics {METRICS_PORT}")

        want_service = {"startupProbe": None, "readinessProbe": "readiness", "livenessProbe": None}
        for probe_name, service in want_service.items():
            grpc = (server.get(probe_name) or {}).get("grpc")
            if not grpc:
                self.fail(f"server has no gRPC {probe_name}")
                continue
            if grpc.get("port") != GRPC_PORT:
                self.fail(f"{probe_name} port {grpc.get('port')!r}, want the integer {GRPC_PORT}")
            if (grpc.get("service") or None) != service:
                self.fail(f"{probe_name} service {grpc.get('service')!r}, want {service!r}")

        args = server.get("args", [])
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
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        volume = volumes.get(mounts.get(suites_dir, ""), {})
        if "configMap" not in volume:
            self.fail(f"--suites-dir {suites_dir!r} is not a mounted ConfigMap")
        elif self.mode == "kustomize":
            configmap = self.one("ConfigMap", volume["configMap"]["name"])
            suites = sorted(p.name for p in (REPO / "suites").glob("*.json"))
            if configmap is not None and sorted(configmap.get("data", {})) != suites:
                self.fail(f"suites ConfigMap holds {sorted(configmap.get('data', {}))}, suites/ has {suites}")
        return workload

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

        for monitor in self.of_kind("ServiceMonitor"):
            if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
                self.fail(f"ServiceMonitor apiVersion {monitor.get('apiVersion')}")
            selector = monitor["spec"].get("selector", {}).get("matchLabels", {})
            namespace = monitor["metadata"].get("namespace")
            chosen = [s for s in services if selects(selector, s["metadata"].get("labels", {}))
                      and s["metadata"].get("namespace") == namespace]
            if len(chosen) != 1:
                self.fail(f"ServiceMonitor selects {len(chosen)} Services; pods would be scraped "
                          f"{'never' if not chosen else 'more than once'}")
            for endpoint in monitor["spec"].get("endpoints", []):
                for service in chosen:
                    if endpoint.get("port") not in {p.get("name") for p in service["spec"]["ports"]}:
                        self.fail(f"ServiceMonitor port {endpoint.get('port')!r} is not a port of "
                                  f"Service {service['metadata']['name']}")
        if not self.of_kind("ServiceMonitor"):
            self.fail("no ServiceMonitor")

        pdb = self.one("PodDisruptionBudget")
        if pdb is not None:
            if not selects(pdb["spec"].get("selector", {}).get("matchLabels"), labels):
                self.fail("PodDisruptionBudget selects no server pod")
            if workload["kind"] == "DaemonSet" and not isinstance(pdb["spec"].get("minAvailable"), int):
                self.fail("a DaemonSet's PodDisruptionBudget needs an integer minAvailable")

    # --- the scheduled benchmark ----------------------------------------------
    def check_cronjob(self, workload):
        cronjob = self.one("CronJob")
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
        server_image = workload["spec"]["template"]["spec"]["containers"][0]["image"]
        if container.get("image") != server_image:
            self.fail(f"CronJob image {container.get('image')} differs from the server's {server_image}")

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

        namespaces = {d["metadata"].get("namespace") for d in self.docs if d.get("kind") != "Namespace"}
        if len(namespaces) != 1 or None in namespaces:
            self.fail(f"objects span namespaces {namespaces}")

    def run(self):
        workload = self.check_server()
        if workload is not None:
            self.check_services(workload)
            self.check_cronjob(workload)
        self.check_packaged()
        return self.problems


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

#!/usr/bin/env python3
"""Validate every rendered object strictly against pinned API schemas.

    check_schemas.py [--require-kubectl] DIR [DIR...]

No API server can run here, so the objects an operator would apply are checked against the
schemas of the API it would apply them to, pinned in tests/deploy/fixtures/schemas/:
Kubernetes 1.27 and 1.30 (generated from the official client of each release,
generate_k8s_schemas.py) and the prometheus-operator v0.93.0 CRDs (ServiceMonitor,
PodMonitor, PrometheusRule: their openAPIV3Schema). Strict as `kubectl apply
--validate=strict`: an unknown field, a wrong type, a missing required field, a value outside
an enum or pattern is an error. Also checked: object names (DNS-1123), label keys and values
(63 characters, the label syntax). DIR is rendered with kubectl kustomize; the Jobs
fleet-validate.py creates are rendered by the script itself and checked the same way.

Before anything else a self-test feeds the validator objects with planted mistakes and fails
unless each is found, so the check cannot pass by accepting everything.
Exit status: 0 valid, 1 findings, 2 bad input, 77 skipped (--require-kubectl, no kubectl).
"""

import argparse
import copy
import json
import pathlib
import re
import subprocess
import sys

import yaml

from k8s_render import RenderError, find_kubectl, render

REPO = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = pathlib.Path(__file__).resolve().parent / "fixtures/schemas"
KUBERNETES = ("k8s-1.27.json", "k8s-1.30.json")
CRDS = "prometheus-operator-v0.93.0.json"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
JSON_TYPES = {"string": str, "boolean": bool, "object": dict, "array": list}


def type_ok(value, kind):
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, JSON_TYPES[kind])


def validate(value, schema, root, path, errors):
    """Appends 'path: problem' for each way value breaks schema (a JSON-Schema subset)."""
    if "$ref" in schema:
        schema = root["definitions"][schema["$ref"].rsplit("/", 1)[-1]]
    if schema.get("x-kubernetes-int-or-string"):
        if not (type_ok(value, "integer") or type_ok(value, "string")):
            errors.append(f"{path}: {value!r} is neither an integer nor a string")
        return
    if "anyOf" in schema and not schema.get("type"):
        if all(probe(value, s, root) for s in schema["anyOf"]):
            errors.append(f"{path}: {value!r} matches none of {schema['anyOf']}")
        return
    kinds = schema.get("type")
    if kinds:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(type_ok(value, k) for k in kinds):
            errors.append(f"{path}: {type(value).__name__} {str(value)[:60]!r}, want {'/'.join(kinds)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not one of {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", 1 << 62):
            errors.append(f"{path}: length {len(value)} outside the schema's bounds")
    if type_ok(value, "number"):
        if value < schema.get("minimum", float("-inf")) or value > schema.get("maximum", float("inf")):
            errors.append(f"{path}: {value} outside [{schema.get('minimum')}, {schema.get('maximum')}]")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        for i, item in enumerate(value):
            validate(item, schema.get("items", {}), root, f"{path}[{i}]", errors)
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: required field {key!r} missing")
        for key, item in value.items():
            if properties is not None and key in properties:
                validate(item, properties[key], root, f"{path}.{key}", errors)
            elif isinstance(extra, dict):
                validate(item, extra, root, f"{path}.{key}", errors)
            elif properties is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}: unknown field {key!r}")


def probe(value, schema, root):
    errors = []
    validate(value, schema, root, "", errors)
    return errors


def check_metadata(doc, errors):
    meta = doc.get("metadata", {})
    name = meta.get("name", "")
    if not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        errors.append(f"metadata.name {name!r} is not a DNS-1123 subdomain")
    for where in ("labels", "annotations"):
        for key in (meta.get(where) or {}):
            prefix, _, short = key.rpartition("/")
            if (prefix and (not DNS_SUBDOMAIN.match(prefix) or len(prefix) > 253)) or \
                    not short or len(short) > 63 or not LABEL_NAME.match(short):
                errors.append(f"metadata.{where} key {key!r} is not a valid qualified name")
    for key, value in (meta.get("labels") or {}).items():
        if not isinstance(value, str) or len(value) > 63 or not LABEL_NAME.match(value):
            errors.append(f"metadata.labels[{key}] value {value!r} is not a valid label value")


class Schemas:
    def __init__(self):
        self.kubernetes = [json.loads((SCHEMAS / n).read_text(encoding="utf-8")) for n in KUBERNETES]
        self.crds = json.loads((SCHEMAS / CRDS).read_text(encoding="utf-8"))

    def check(self, doc):
        """Problems of one object against every pinned API version."""
        errors = []
        key = f"{doc.get('apiVersion')}/{doc.get('kind')}"
        check_metadata(doc, errors)
        for api in self.kubernetes:
            found = []
            if key in api["kinds"]:
                body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
                validate(body, {"$ref": api["kinds"][key]}, api, key, found)
            elif key in self.crds["kinds"]:
                body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
                schema = copy.deepcopy(self.crds["kinds"][key])
                schema["properties"] = {k: v for k, v in schema["properties"].items()
                                        if k not in ("apiVersion", "kind", "metadata")}
                validate(body, schema, self.crds, key, found)
                validate(doc.get("metadata", {}), {"$ref": "#/definitions/V1ObjectMeta"}, api,
                         f"{key}.metadata", found)
            else:
                found.append(f"{key}: no pinned schema for this kind")
            errors.extend(f"Kubernetes {api['kubernetes']}: {e}" for e in found)
        return sorted(set(errors))


def self_test(schemas):
    """Planted mistakes the validator must find; returns what it missed."""
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
                 "spec": {"selector": {"matchLabels": {"a": "b"}},
                          "template": {"metadata": {"labels": {"a": "b"}},
                                       "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "m"},
               "spec": {"selector": {}, "endpoints": [{"port": "metrics", "honorLabels": True}]}}
    cases = []

    def planted(what, base, change):
        doc = copy.deepcopy(base)
        change(doc)
        cases.append((what, doc))
    planted("unknown container field", daemonset,
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicyy="Always"))
    planted("string for an integer", daemonset,
            lambda d: d["spec"]["template"]["spec"].update(terminationGracePeriodSeconds="90"))
    planted("missing required containers", daemonset,
            lambda d: d["spec"]["template"]["spec"].pop("containers"))
    planted("label value too long", daemonset,
            lambda d: d["metadata"].update(labels={"a": "v" * 64}))
    planted("unknown ServiceMonitor field", monitor,
            lambda d: d["spec"]["endpoints"][0].update(honorLabel=True))
    planted("ServiceMonitor scheme outside its enum", monitor,
            lambda d: d["spec"]["endpoints"][0].update(scheme="ftp"))
    planted("unknown kind", daemonset, lambda d: d.update(kind="DaemonSett"))
    missed = [what for what, doc in cases if not schemas.check(doc)]
    if schemas.check(daemonset) or schemas.check(monitor):
        missed.append(f"valid objects rejected: {schemas.check(daemonset) + schemas.check(monitor)}")
    return missed


def fleet_jobs():
    script = REPO / "deploy/k8s/fleet-validation/fleet-validate.py"
    result = subprocess.run([sys.executable, str(script), "--image", "registry.example/kerneleval@sha256:"
                             + "0" * 64, "--run", "202612010000", "--queue-name", "gpu-batch",
                             "--render", "gpu-a", "n" * 200], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--require-kubectl", action="store_true")
    parser.add_argument("directories", nargs="+", metavar="DIR")
    args = parser.parse_args(argv)
    if not find_kubectl():
        print("kubectl not found: skipped")
        return 77 if args.require_kubectl else 0
    schemas = Schemas()
    missed = self_test(schemas)
    for what in missed:
        print(f"self-test: the validator missed: {what}", file=sys.stderr)
    if missed:
        return 1
    failed = False
    sets = []
    for directory in args.directories:
        try:
            sets.append((directory, render(directory, allow_sources=False)[0]))
        except (RenderError, OSError, yaml.YAMLError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    sets.append(("fleet-validate.py --render", fleet_jobs()))
    for where, documents in sets:
        problems = 0
        for doc in documents:
            for problem in schemas.check(doc):
                print(f"{where}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}: {problem}",
                      file=sys.stderr)
                problems += 1
        print(f"{where}: {len(documents)} objects, {problems} schema problems")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

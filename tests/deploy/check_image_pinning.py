#!/usr/bin/env python3
"""The release procedure of deploy/README.md ("Container images") on a copy of deploy/k8s.

    check_image_pinning.py [--require-kubectl]

On a temporary copy: deploy/k8s/set-images.py pins both images by digest, and (where a
`kustomize` binary is installed) `kustomize edit set image` does the same on one overlay;
every overlay is then rendered and each container must carry exactly the pinned reference,
and check_manifests.py must accept it. A copy whose overlay names a tag must be rejected by
check_manifests.py, and set-images.py must refuse a tag. Exit 0 pass, 1 fail, 77 skipped.
"""

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

from check_manifests import Checker
from k8s_render import find_kubectl, render

REPO = pathlib.Path(__file__).resolve().parents[2]
SERVER = "registry.example:5000/ml/kerneleval@sha256:" + "1a" * 32
CLI = "registry.example:5000/ml/kerneleval-cli@sha256:" + "2b" * 32


def containers(documents):
    for doc in documents:
        spec = doc.get("spec", {})
        template = spec.get("template") or spec.get("jobTemplate", {}).get("spec", {}).get("template")
        for container in ((template or {}).get("spec") or {}).get("containers", []):
            yield doc, container


def check_pinned(overlay, problems):
    documents, _ = render(overlay, allow_sources=False)
    seen = set()
    for doc, container in containers(documents):
        image = container["image"]
        seen.add(image)
        if image not in (SERVER, CLI):
            problems.append(f"{overlay.name}: {doc['kind']} {doc['metadata']['name']} renders {image!r}, "
                            "not the pinned reference")
    if not {SERVER, CLI} <= seen:
        problems.append(f"{overlay.name}: rendered images {sorted(seen)} lack one of the pinned two")
    findings = Checker(overlay, documents, "kustomize").run()
    problems.extend(f"{overlay.name} pinned by digest, check_manifests: {p}" for p in findings)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--require-kubectl", action="store_true")
    args = parser.parse_args(argv)
    if not find_kubectl():
        print("kubectl not found: skipped")
        return 77 if args.require_kubectl else 0
    problems = []
    with tempfile.TemporaryDirectory() as temp:
        k8s = pathlib.Path(temp) / "k8s"
        shutil.copytree(REPO / "deploy/k8s", k8s)
        script = k8s / "set-images.py"
        refused = subprocess.run([sys.executable, str(script), "--server", "r.example/kerneleval:0.2.0",
                                  "--cli", CLI], capture_output=True, text=True, check=False)
        if refused.returncode == 0:
            problems.append("set-images.py accepted a tag for --server")
        overlays = sorted(p for p in (k8s / "overlays").iterdir() if p.is_dir())

        # A tag in an overlay: the deploy tests must refuse it.
        tagged = overlays[0] / "kustomization.yaml"
        original = tagged.read_text(encoding="utf-8")
        tagged.write_text(original.replace("digest: sha256:" + "0" * 64, 'newTag: "0.2.0"'),
                          encoding="utf-8")
        documents, _ = render(overlays[0], allow_sources=False)
        findings = Checker(overlays[0], documents, "kustomize").run()
        if not any("not pinned by digest" in f for f in findings):
            problems.append(f"check_manifests accepted a tagged overlay: {findings}")

        # The placeholder digest moved to a real registry: it would pose as a release.
        tagged.write_text(original.replace("newName: registry.invalid/kerneleval\n",
                                           "newName: registry.example/kerneleval\n"),
                          encoding="utf-8")
        documents, _ = render(overlays[0], allow_sources=False)
        findings = Checker(overlays[0], documents, "kustomize").run()
        if not any("all-zero digest is a placeholder" in f for f in findings):
            problems.append(f"check_manifests accepted the placeholder digest on a real registry: "
                            f"{findings}")
        tagged.write_text(original, encoding="utf-8")

        result = subprocess.run([sys.executable, str(script), "--server", SERVER, "--cli", CLI],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            problems.append(f"set-images.py failed: {result.stderr.strip()}")
        for overlay in overlays:
            check_pinned(overlay, problems)

        kustomize = shutil.which("kustomize")
        if kustomize:
            fresh = pathlib.Path(temp) / "fresh"
            shutil.copytree(REPO / "deploy/k8s", fresh)
            overlay = fresh / "overlays" / overlays[0].name
            for name, reference in (("registry.invalid/kerneleval", SERVER),
                                    ("registry.invalid/kerneleval-cli", CLI)):
                subprocess.run([kustomize, "edit", "set", "image", f"{name}={reference}"], cwd=overlay,
                               check=True)
            check_pinned(overlay, problems)
        else:
            print("kustomize not installed: `kustomize edit set image` not exercised")
    for problem in problems:
        print(f"image pinning: {problem}", file=sys.stderr)
    print(f"image pinning: {len(overlays)} overlays, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

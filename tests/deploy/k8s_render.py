"""Render a kustomization for the deploy tests.

With kubectl (its built-in kustomize) the real rendering is used. Without it,
`sources` mode reads the resource files the kustomization lists (recursively)
and applies its `namespace:`, but no generators and no patches: enough to
check the base objects, not what an overlay changes. Callers report the mode.
"""

import os
import pathlib
import shutil
import subprocess

import yaml


class RenderError(RuntimeError):
    pass


def find_kubectl():
    """$KUBECTL if set (empty means: do not use kubectl), else kubectl on PATH."""
    if "KUBECTL" in os.environ:
        return os.environ["KUBECTL"] or None
    return shutil.which("kubectl")


def _kustomization(directory):
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        path = directory / name
        if path.is_file():
            return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    raise RenderError(f"{directory}: no kustomization file")


def _sources(directory):
    config = _kustomization(directory)
    documents = []
    for entry in config.get("resources", []) or []:
        path = (directory / entry).resolve()
        if path.is_dir():
            documents.extend(_sources(path))
        else:
            documents.extend(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d)
    namespace = config.get("namespace")
    if namespace:
        for document in documents:
            if document.get("kind") != "Namespace":
                document.setdefault("metadata", {})["namespace"] = namespace
    return documents


def render(directory, kubectl=None, allow_sources=True):
    """(documents, mode) with mode 'kustomize' or 'sources'."""
    directory = pathlib.Path(directory)
    kubectl = kubectl or find_kubectl()
    if kubectl:
        try:
            result = subprocess.run([kubectl, "kustomize", str(directory)],
                                    capture_output=True, text=True, check=False)
        except OSError as error:
            raise RenderError(f"cannot run {kubectl}: {error}") from error
        if result.returncode != 0:
            raise RenderError(f"kubectl kustomize {directory} failed:\n{result.stderr}")
        return [d for d in yaml.safe_load_all(result.stdout) if d], "kustomize"
    if not allow_sources:
        raise RenderError("kubectl is not installed")
    return _sources(directory), "sources"

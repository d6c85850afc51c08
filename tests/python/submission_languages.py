"""What the tests of the Python-language front ends (test_triton, test_cute, test_tilelang)
share: a client of a server started with --submissions (conftest.py's `submissions_server`),
an example loaded by its path, and an example's --emit output registered by the real CLI, as
the GPU scripts register it on a machine without the language's compiler."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys
import types
from typing import List, Tuple

import pytest

import kerneleval
from server_process import ROOT, Server


def client_of(server: Server) -> kerneleval.Client:
    return kerneleval.Client(f"127.0.0.1:{server.grpc_port}", timeout=120)


def example_path(language: str) -> pathlib.Path:
    return ROOT / "examples" / "submissions" / language / "add_rmsnorm.py"


def load_example(language: str) -> types.ModuleType:
    """examples/submissions/<language>/add_rmsnorm.py, under a name of its own (every
    example's file is add_rmsnorm.py)."""
    spec = importlib.util.spec_from_file_location(f"{language}_add_rmsnorm_example",
                                                  example_path(language))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def register_emitted(language: str, server: Server, out: pathlib.Path,
                     name: str) -> Tuple[List[str], subprocess.CompletedProcess]:
    """Runs the example with --emit OUT, then `kerneleval submit` with the PTX and the flags
    it wrote; returns the flags and the CLI's completed process."""
    cli = os.environ.get("KERNELEVAL_CLI")
    if not cli:
        pytest.fail("KERNELEVAL_CLI is not set (the path of the kerneleval CLI)")
    subprocess.run([sys.executable, str(example_path(language)), "--emit", str(out)],
                   check=True, timeout=300)
    flags = (out / "add_rmsnorm.flags").read_text().split()
    done = subprocess.run(
        [cli, "--target", f"127.0.0.1:{server.grpc_port}", "submit", "--source",
         str(out / "add_rmsnorm_sm_90a.ptx"), "--name", name, "--dtype", "bf16", *flags],
        capture_output=True, text=True, timeout=300)
    return flags, done

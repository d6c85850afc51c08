"""Starts a real kerneleval-server on a loopback port (CPU device) for the Python tests.

The binary comes from $KERNELEVAL_SERVER (tests/python/CMakeLists.txt sets it); suites from
the repository's suites/. Each server listens on free ports (the server writes them to a
port file) and is stopped with SIGTERM at the end of the module that started it.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import List, Optional

import grpc
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
READY_SECONDS = 120  # start, warm-up and readiness of a CPU server on a loaded machine


@dataclass
class Server:
    process: subprocess.Popen
    grpc_port: int
    metrics_port: int
    log: pathlib.Path
    token: Optional[str] = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def health(self, service: str) -> int:
        """grpc.health.v1 Check: 1 = SERVING, 2 = NOT_SERVING (hand-encoded: no extra package)."""
        with grpc.insecure_channel(self.target) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            name = service.encode()
            reply = check(b"\n" + bytes([len(name)]) + name, timeout=10)
        return reply[1] if len(reply) >= 2 else 0  # field 1 varint; absent = UNKNOWN (0)

    def scrape(self) -> str:
        # Where tokens are configured, /metrics takes them as the gRPC port does.
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        request = urllib.request.Request(f"http://127.0.0.1:{self.metrics_port}/metrics", headers=headers)
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.read().decode()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(tmp: pathlib.Path, extra: List[str] = (), token: Optional[str] = None) -> Server:
    binary = os.environ.get("KERNELEVAL_SERVER")
    if not binary:
        pytest.fail("KERNELEVAL_SERVER is not set (the path of kerneleval-server)")
    port_file = tmp / "ports.json"
    command = [
        binary,
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--port-file",
        str(port_file),
        "--device",
        "cpu",
        "--drain-seconds",
        "2",
        "--suites-dir",
        str(ROOT / "suites"),
        *extra,
    ]
    if token:
        (tmp / "token").write_text(token + "\n")
        command += ["--auth-token-file", str(tmp / "token")]
    log = tmp / "server.log"
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + READY_SECONDS
    while True:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            ports = json.loads(port_file.read_text())
            server = Server(
                process, int(ports["grpc_port"]), int(ports["metrics_port"]), log, token
            )
            break
        except (OSError, ValueError, KeyError):
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"no port file after {READY_SECONDS} s")
            time.sleep(0.1)
    while True:
        try:
            if server.health("readiness") == 1:
                return server
        except grpc.RpcError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"not ready after {READY_SECONDS} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)

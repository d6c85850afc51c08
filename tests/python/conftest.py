"""Fixtures: one server per test module, another behind a bearer token (server_process.py)."""

from __future__ import annotations

import pathlib
import tempfile
from typing import Iterator

import pytest

from server_process import Server, start_server


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="kerneleval-py-") as tmp:
        s = start_server(pathlib.Path(tmp))
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="module")
def token_server() -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="kerneleval-py-token-") as tmp:
        s = start_server(pathlib.Path(tmp), token="s3cret-token")
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="module")
def submissions_server() -> Iterator[Server]:
    """A server that registers submissions (the language front ends' tests)."""
    with tempfile.TemporaryDirectory(prefix="kerneleval-py-submissions-") as tmp:
        s = start_server(pathlib.Path(tmp), extra=["--submissions"])
        try:
            yield s
        finally:
            s.stop()

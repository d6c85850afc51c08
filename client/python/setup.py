"""Builds kerneleval-client: generates the gRPC stubs from the repository's proto/ first.

The stubs are never checked in: every build regenerates them from the .proto files, so the
package speaks the contract of the tree it was built from. The proto folder is
`$KERNELEVAL_PROTO_DIR`, else `../../proto` (this file's place in the repository), else a
`proto/` copy beside this file (an sdist carries one).
"""

from __future__ import annotations

import os
import pathlib
import sys

from setuptools import setup

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "src"
# Public contract only: kerneleval/internal/ is the server's own.
PROTO_GLOB = "kerneleval/v1/*.proto"


def proto_dir() -> pathlib.Path:
    candidates = [
        os.environ.get("KERNELEVAL_PROTO_DIR"),
        HERE.parent.parent / "proto",
        HERE / "proto",
    ]
    for candidate in candidates:
        if candidate and any(pathlib.Path(candidate).glob(PROTO_GLOB)):
            return pathlib.Path(candidate)
    sys.exit("kerneleval-client: no kerneleval/v1/*.proto found; set KERNELEVAL_PROTO_DIR")


def generate_stubs() -> None:
    import grpc_tools
    from grpc_tools import protoc

    source = proto_dir()
    protos = sorted(str(p.relative_to(source)) for p in source.glob(PROTO_GLOB))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{source}",
        f"-I{well_known}",
        f"--python_out={OUT}",
        f"--pyi_out={OUT}",
        f"--grpc_python_out={OUT}",
        *protos,
    ]
    if protoc.main(args) != 0:
        sys.exit(f"kerneleval-client: protoc failed on {protos} from {source}")
    # The generated modules import each other as kerneleval.v1.*: make that a package.
    (OUT / "kerneleval" / "v1" / "__init__.py").write_text(
        '"""Generated from proto/kerneleval/v1 at build time; do not edit."""\n', encoding="utf-8"
    )


generate_stubs()
setup()

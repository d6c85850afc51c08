"""Builds kerneleval-client: generates the gRPC stubs from the repository's proto/.

The stubs are never checked in, nor written into this source tree: `build_py` generates
them into its build directory (setuptools' build/lib, then the wheel), so the package
speaks the contract of the tree it was built from and a `pip install` leaves the checkout
as it was. The proto folder is `$KERNELEVAL_PROTO_DIR`, else `../../proto` (this file's
place in the repository), else a `proto/` copy beside this file (an sdist carries one).
An editable install (`pip install -e`) has no build directory to hold them: install normally.
"""

from __future__ import annotations

import os
import pathlib
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
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


def generate_stubs(out: pathlib.Path) -> None:
    import grpc_tools
    from grpc_tools import protoc

    source = proto_dir()
    protos = sorted(str(p.relative_to(source)) for p in source.glob(PROTO_GLOB))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{source}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *protos,
    ]
    if protoc.main(args) != 0:
        sys.exit(f"kerneleval-client: protoc failed on {protos} from {source}")
    # The generated modules import each other as kerneleval.v1.*: make that a package.
    (out / "kerneleval" / "v1" / "__init__.py").write_text(
        '"""Generated from proto/kerneleval/v1 at build time; do not edit."""\n', encoding="utf-8"
    )


class BuildPyWithStubs(build_py):
    """The package's own modules, then the stubs beside them in the build directory."""

    def run(self) -> None:
        super().run()
        if not self.dry_run:
            generate_stubs(pathlib.Path(self.build_lib))


setup(cmdclass={"build_py": BuildPyWithStubs})

"""kerneleval.tilelang on a machine with no GPU: the TileLang example compiles for sm_90a and
sm_100a (TileLang lowers it, nvcc writes the PTX), its parameters are bound by name in the
order TileLang passes them (buffers by name, then the dynamic batch, then scalars), its launch
(threads, dynamic shared memory, one block per row) is read from the compiled module, and the
server reads the same parameter sizes from the PTX; bindings and grids the service cannot
launch are refused naming the parameter. A verdict needs a GPU: scripts/gpu-ptx-example.sh.

TileLang needs PyTorch, whose PyPI wheel brings gigabytes of CUDA libraries, so the pinned
test requirements leave both out and this file is skipped (visibly) where TileLang is not
installed: `pip install tilelang==0.1.15` into the tests' virtualenv runs it."""


# No `from __future__ import annotations`: TileLang evaluates a prim_func's annotations
# (its shapes) in the function's scope.
import pathlib

import pytest

from kerneleval.v1 import submissions_pb2 as spb
from server_process import Server
from submission_languages import client_of, load_example, register_emitted

tilelang = pytest.importorskip("tilelang")
T = pytest.importorskip("tilelang.language")
import kerneleval.tilelang as kt  # noqa: E402

example = load_example("tilelang")


def _sources(kernel: kt.CompiledKernel) -> list:
    return [(p.name, spb.ParamSource.Name(p.source)[len("PARAM_SOURCE_"):].lower())
            for p in kernel.params]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_compiles_for_each_arch_without_a_gpu(arch: str) -> None:
    kernel = kt.compile(example.make_add_rmsnorm(store_residual=True), arch=arch)
    assert f".target {arch}" in kernel.ptx
    assert f".entry {kernel.name}(" in kernel.ptx
    # TileLang passes the buffers ordered by name, then the dynamic batch, then the scalar.
    assert _sources(kernel) == [
        ("hidden_states", "hidden_states"), ("output", "output"), ("residual", "residual"),
        ("residual_out", "residual_out"), ("weight", "weight"), ("batch", "batch"),
        ("eps", "eps")]
    assert kernel.block_size == example.THREADS
    assert kernel.rows_per_block == 1
    assert kernel.shared_bytes > 0  # the block-wide reduction's workspace
    flags = kt.submit_flags(kernel)
    assert flags[:6] == ["--entry", kernel.name, "--block", "256", "--rows-per-block", "1"]
    assert "batch=batch" in flags and "eps=eps" in flags


def test_output_mode_has_no_residual_out() -> None:
    """TileLang drops a buffer the kernel never touches; the binding follows the PTX."""
    kernel = kt.compile(example.make_add_rmsnorm(store_residual=False))
    assert [p.name for p in kernel.params] == ["hidden_states", "output", "residual", "weight",
                                               "batch", "eps"]


def test_registers_with_its_binding(submissions_server: Server) -> None:
    with client_of(submissions_server) as client:
        verdict = kt.submit(client, example.make_add_rmsnorm(store_residual=True),
                            name="tilelang_add_rmsnorm", mode="output_and_residual")
        sub = verdict.submission
        assert sub.id.startswith("sub-")
        assert verdict.report is None  # no suite asked for
        kernel = sub.diagnostics.kernels[0]
        # What the server read from the PTX: five pointers, an i32 batch, an f32 eps.
        assert list(kernel.param_bytes) == [8, 8, 8, 8, 8, 4, 4]
        plan = sub.spec.launch_plan.kernels[0]
        assert plan.block_size == 256 and plan.rows_per_block == 1
        assert plan.dynamic_smem_bytes > 0


def test_what_the_service_cannot_launch_is_refused_naming_it() -> None:
    batch = T.dynamic("batch")

    @T.prim_func
    def scale(X: T.Tensor((batch, 256), "bfloat16"), Y: T.Tensor((batch, 256), "bfloat16"),
              mystery: T.float32):
        with T.Kernel(batch, threads=128) as row:
            for j in T.Parallel(256):
                Y[row, j] = T.cast(T.cast(X[row, j], "float32") * mystery, "bfloat16")

    with pytest.raises(ValueError, match=r"no value for parameter\(s\) \['mystery'\]"):
        kt.compile(scale)
    kernel = kt.compile(scale, bindings={"mystery": "float:0.5"})
    assert _sources(kernel)[-1] == ("mystery", "float")
    with pytest.raises(ValueError, match=r"bindings: \['nowhere'\] are not parameters"):
        kt.compile(scale, bindings={"mystery": "eps", "nowhere": "hidden"})

    @T.prim_func
    def two_rows(X: T.Tensor((batch, 256), "bfloat16"), Y: T.Tensor((batch, 256), "bfloat16")):
        with T.Kernel(T.ceildiv(batch, 2), threads=128) as block:
            for i, j in T.Parallel(2, 256):
                Y[block * 2 + i, j] = X[block * 2 + i, j]

    assert kt.compile(two_rows).rows_per_block == 2

    @T.prim_func
    def fixed_grid(X: T.Tensor((batch, 256), "bfloat16"), Y: T.Tensor((batch, 256), "bfloat16")):
        with T.Kernel(132, threads=128) as block:
            for j in T.Parallel(256):
                Y[block, j] = X[block, j]

    with pytest.raises(ValueError, match="its grid is a constant 132 blocks, not following a dynamic batch"):
        kt.compile(fixed_grid)


def test_the_emitted_ptx_and_flags_register_through_the_cli(submissions_server: Server,
                                                            tmp_path: pathlib.Path) -> None:
    """What the GPU script does on a machine without TileLang: the example's --emit output,
    registered by the real CLI with its --arg flags."""
    _, done = register_emitted("tilelang", submissions_server, tmp_path, "tilelang_from_cli")
    assert done.returncode == 0, done.stderr
    with client_of(submissions_server) as client:
        sub = client.get_submission("tilelang_from_cli")
        assert list(sub.diagnostics.kernels[0].param_bytes) == [8, 8, 8, 8, 4, 4]

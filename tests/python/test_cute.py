"""kerneleval.cute on a machine with no GPU: the CuTe DSL example compiles for sm_90a and
sm_100a, each tensor is bound as the struct CuTe passes (pointer, i32 shape, i64 row stride)
and the server reads the same sizes from the PTX; wrong bindings are refused naming the
parameter (on the client where the client can tell, by the server otherwise). A verdict
needs a GPU: scripts/gpu-ptx-example.sh cute."""

from __future__ import annotations

import pathlib
import re

import grpc
import pytest

import kerneleval
from kerneleval.v1 import submissions_pb2 as spb
from server_process import Server
from submission_languages import client_of, load_example, register_emitted

cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")
import kerneleval.cute as kc  # noqa: E402

example = load_example("cute")

LAUNCH = {"threads": 256, "constexprs": {"STORE_RESIDUAL": True}}
STRUCT_2D = ["PARAM_SOURCE_BATCH", "PARAM_SOURCE_HIDDEN"]


def _fields(p: spb.KernelParam) -> list:
    return [(spb.ParamSource.Name(f.source), f.bytes) for f in p.fields]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_compiles_for_each_arch_without_a_gpu(arch: str) -> None:
    kernel = kc.compile(example.add_rmsnorm, arch=arch, **LAUNCH)
    assert f".target {arch}" in kernel.ptx
    assert f".entry {kernel.name}(" in kernel.ptx
    assert ".reqntid 256, 1, 1" in kernel.ptx
    # Line information, for the profile's source lines: the example's own file and lines.
    assert ".loc" in kernel.ptx and "cute/add_rmsnorm.py" in kernel.ptx
    # Every instruction's line is the example's: the conversion after each load (the first use,
    # where warps wait) among them, not a line of the launcher kerneleval.cute generates.
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', kernel.ptx, re.M))
    current, converts = None, 0
    for line in kernel.ptx.splitlines():
        loc = re.match(r"\s*\.loc\s+(\d+)\s", line)
        if loc:
            current = files[loc.group(1)]
        elif "cvt.f32.bf16" in line:
            converts += 1
            assert current is not None and current.endswith("cute/add_rmsnorm.py"), current
    assert converts > 0
    launcher = [n for n, path in files.items() if path.endswith("kerneleval_cute_launch.py")]
    assert not [line for line in kernel.ptx.splitlines()
                if re.match(r"\s*\.loc\s+(%s)\s" % "|".join(launcher or ["-"]), line)]
    assert [p.name for p in kernel.params] == ["mX", "mResidual", "mWeight", "mOut",
                                               "mResidualOut", "eps"]
    assert _fields(kernel.params[0]) == [("PARAM_SOURCE_HIDDEN_STATES", 0),
                                         ("PARAM_SOURCE_BATCH", 4), ("PARAM_SOURCE_HIDDEN", 4),
                                         ("PARAM_SOURCE_HIDDEN_STATES_STRIDE", 8)]
    assert _fields(kernel.params[2]) == [("PARAM_SOURCE_WEIGHT", 0), ("PARAM_SOURCE_HIDDEN", 4)]
    assert _fields(kernel.params[4])[-1] == ("PARAM_SOURCE_RESIDUAL_OUT_STRIDE", 8)
    assert kernel.params[5].source == spb.PARAM_SOURCE_EPS
    flags = kc.submit_flags(kernel, rows_per_block=8)
    assert "mWeight=struct(weight,hidden:i32)" in flags
    assert "mX=struct(hidden_states,batch:i32,hidden:i32,hidden_states_stride:i64)" in flags


def test_registers_with_its_binding(submissions_server: Server) -> None:
    with client_of(submissions_server) as client:
        verdict = kc.submit(client, example.add_rmsnorm, name="cute_add_rmsnorm",
                            rows_per_block=8, mode="output_and_residual", **LAUNCH)
        sub = verdict.submission
        assert sub.id.startswith("sub-")
        assert verdict.report is None  # no suite asked for
        kernel = sub.diagnostics.kernels[0]
        # What the server read from the PTX: four (batch, hidden) tensors of 24 bytes, the
        # (hidden,) weight of 16, an fp32.
        assert list(kernel.param_bytes) == [24, 24, 16, 24, 24, 4]
        assert kernel.registers > 0
        plan = sub.spec.launch_plan.kernels[0]
        assert plan.block_size == 256 and plan.rows_per_block == 8
        assert plan.params[3].source == spb.PARAM_SOURCE_STRUCT
        assert client.get_submission("cute_add_rmsnorm").id == sub.id


def _refused(client: kerneleval.Client, spec: spb.SubmissionSpec) -> str:
    with pytest.raises(kerneleval.KernelEvalError) as caught:
        client.register_submission(spec)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return str(caught.value)


def test_wrong_structs_are_refused_by_the_server(submissions_server: Server) -> None:
    kernel = kc.compile(example.add_rmsnorm, **LAUNCH)
    with client_of(submissions_server) as client:
        spec = kc.spec(kernel, "no_stride")
        del spec.launch_plan.kernels[0].params[1].fields[-1]
        message = _refused(client, spec)
        assert "params[1] ('mResidual'): bound to struct (a struct of 3 field(s), 16 bytes)" in (
            message)
        assert "parameter 1 has 24 bytes" in message

        spec = kc.spec(kernel, "narrow")
        spec.launch_plan.kernels[0].params[0].fields[1].bytes = 2
        assert "params[0] ('mX').fields[1].bytes: 2; batch takes 4 (i32) or 8 (i64)" in (
            _refused(client, spec))

        spec = kc.spec(kernel, "scratch_field")
        spec.launch_plan.kernels[0].params[0].fields[0].source = spb.PARAM_SOURCE_SCRATCH
        assert "fields[0].source: scratch cannot be a struct's field" in _refused(client, spec)


def test_bindings_the_client_can_tell_are_refused_there() -> None:
    @cute.kernel
    def odd(mX: cute.Tensor, mOut: cute.Tensor, mystery: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        mOut[0, tidx] = (mX[0, tidx].to(cutlass.Float32) * mystery).to(mOut.element_type)

    with pytest.raises(ValueError, match=r"no value for parameter\(s\) \['mystery'\]"):
        kc.compile(odd, threads=32)
    kernel = kc.compile(odd, threads=32, bindings={"mystery": "float:0.5"})
    assert kernel.params[2].source == spb.PARAM_SOURCE_FLOAT
    with pytest.raises(ValueError, match=r"bindings\['mX'\]: 'hidden' is a cute.Tensor"):
        kc.compile(odd, threads=32, bindings={"mX": "hidden", "mystery": "eps"})
    with pytest.raises(ValueError, match=r"bindings\['mystery'\]: 'batch' does not fit a f32"):
        kc.compile(odd, threads=32, bindings={"mystery": "batch"})
    with pytest.raises(ValueError, match="'nowhere'"):
        kc.compile(odd, threads=32, bindings={"nowhere": "hidden"})
    with pytest.raises(ValueError, match=r"constexprs: no value for \['STORE_RESIDUAL'\]"):
        kc.compile(example.add_rmsnorm, threads=256)
    with pytest.raises(ValueError, match="threads: 100"):
        kc.compile(odd, threads=100, bindings={"mystery": "eps"})

    @cute.kernel
    def untyped(mX: cute.Tensor, n):
        pass

    with pytest.raises(TypeError, match="parameter 'n' is annotated"):
        kc.compile(untyped, threads=32)


def test_the_emitted_ptx_and_flags_register_through_the_cli(submissions_server: Server,
                                                            tmp_path: pathlib.Path) -> None:
    """What scripts/gpu-ptx-example.sh cute does on a GPU machine without the DSL: the
    example's --emit output, registered by the real CLI with its --arg struct(...) flags."""
    flags, done = register_emitted("cute", submissions_server, tmp_path, "cute_from_cli")
    assert "mResidual=struct(residual,batch:i32,hidden:i32,residual_stride:i64)" in flags
    assert done.returncode == 0, done.stderr
    assert "mX=struct(hidden_states, batch:i32, hidden:i32, hidden_states_stride:i64)" in (
        done.stdout)
    with client_of(submissions_server) as client:
        sub = client.get_submission("cute_from_cli")
        assert list(sub.diagnostics.kernels[0].param_bytes) == [24, 24, 16, 24, 24, 4]

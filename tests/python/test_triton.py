"""kerneleval.triton on a machine with no GPU: the Triton example compiles for sm_90a and
sm_100a, its PTX registers through a real server with the parameter list bound by name, and
wrong bindings are refused naming the parameter (on the client where the client can tell,
by the server otherwise). A verdict needs a GPU: scripts/gpu-triton.sh."""

from __future__ import annotations

import sys

import grpc
import pytest

import kerneleval
import kerneleval.triton as kt
from kerneleval.v1 import submissions_pb2 as spb
from server_process import ROOT, Server
from submission_languages import client_of, example_path

sys.path.insert(0, str(example_path("triton").parent))
import add_rmsnorm as example  # noqa: E402

triton = pytest.importorskip("triton")
tl = triton.language

CONSTEXPRS = {"BLOCK": 2048, "STORE_RESIDUAL": False}


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_compiles_for_each_arch_without_a_gpu(arch: str) -> None:
    kernel = kt.compile(example.add_rmsnorm, constexprs=CONSTEXPRS, num_warps=8, arch=arch)
    assert f".target {arch}" in kernel.ptx
    assert f".entry {kernel.name}(" in kernel.ptx
    assert kernel.num_warps == 8
    sources = [spb.ParamSource.Name(p.source) for p in kernel.params]
    assert sources == [
        "PARAM_SOURCE_HIDDEN_STATES", "PARAM_SOURCE_RESIDUAL", "PARAM_SOURCE_WEIGHT",
        "PARAM_SOURCE_OUTPUT", "PARAM_SOURCE_RESIDUAL_OUT", "PARAM_SOURCE_HIDDEN_STATES_STRIDE",
        "PARAM_SOURCE_HIDDEN", "PARAM_SOURCE_EPS",
        # Triton's global and profile scratch pointers, sized 0 by this compile.
        "PARAM_SOURCE_NULL", "PARAM_SOURCE_NULL",
    ]


def test_an_older_ptxas_falls_back_quietly(tmp_path, monkeypatch, capsys) -> None:
    """Triton 3.6 checks its PTX with a ptxas of CUDA 12.8, which cannot read ISA 9.0: the
    compile falls back to Triton's own ISA without printing the failed attempt's PTX."""
    nvidia_compiler = pytest.importorskip("triton.backends.nvidia.compiler")
    real = nvidia_compiler.get_ptxas(90).path
    old_ptxas = tmp_path / "ptxas"
    old_ptxas.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "Cuda compilation tools, release 12.8, V12.8.93"; '
        "exit 0; fi\n"
        'for a in "$@"; do case $a in *.ptx) if grep -q "^.version 9" "$a"; then\n'
        "  echo \"ptxas fatal   : Unsupported .version 9.0; current version is '8.7'\" >&2; "
        "exit 255; fi;; esac; done\n"
        f'exec "{real}" "$@"\n')
    old_ptxas.chmod(0o755)
    for knob in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
        monkeypatch.setenv(knob, str(old_ptxas))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    nvidia_compiler.get_ptxas_version.cache_clear()
    try:
        kernel = kt.compile(example.add_rmsnorm, constexprs=CONSTEXPRS, num_warps=8)
    finally:
        nvidia_compiler.get_ptxas_version.cache_clear()
    assert ".version 8.7" in kernel.ptx
    printed = capsys.readouterr()
    assert "codegen error" not in printed.out + printed.err and ".entry" not in printed.out


def test_registers_with_its_binding(submissions_server: Server) -> None:
    with client_of(submissions_server) as client:
        verdict = kt.submit(client, example.add_rmsnorm, name="triton_add_rmsnorm",
                            constexprs=CONSTEXPRS, num_warps=8)
        sub = verdict.submission
        assert sub.id.startswith("sub-")
        assert verdict.report is None  # no suite asked for
        kernel = sub.diagnostics.kernels[0]
        # What the server read from the PTX: five pointers, two 32-bit ints, an fp32, and
        # Triton's two scratch pointers.
        assert list(kernel.param_bytes) == [8, 8, 8, 8, 8, 4, 4, 4, 8, 8]
        assert kernel.registers > 0
        plan = sub.spec.launch_plan.kernels[0]
        assert plan.block_size == 256 and plan.rows_per_block == 1
        assert [p.name for p in plan.params][:3] == ["x_ptr", "residual_ptr", "weight_ptr"]
        assert client.get_submission("triton_add_rmsnorm").id == sub.id


def _spec(name: str) -> spb.SubmissionSpec:
    kernel = kt.compile(example.add_rmsnorm, constexprs=CONSTEXPRS, num_warps=8)
    return kt.spec(kernel, name)


def _refused(client: kerneleval.Client, spec: spb.SubmissionSpec) -> str:
    with pytest.raises(kerneleval.KernelEvalError) as caught:
        client.register_submission(spec)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return str(caught.value)


def test_wrong_bindings_are_refused_by_name(submissions_server: Server) -> None:
    with client_of(submissions_server) as client:
        spec = _spec("count")
        del spec.launch_plan.kernels[0].params[-1]
        assert "kernels[0].params: 9 bound; 'add_rmsnorm' takes 10 parameter(s)" in _refused(
            client, spec)

        spec = _spec("size")
        spec.launch_plan.kernels[0].params[6].source = spb.PARAM_SOURCE_WEIGHT
        message = _refused(client, spec)
        assert "params[6] ('n_cols'): bound to weight (a pointer, 8 bytes)" in message
        assert "parameter 6 has 4 bytes" in message

        spec = _spec("unknown")
        spec.launch_plan.kernels[0].params[2].source = 99
        assert "params[2] ('weight_ptr').source: 99 is no value the service supplies" in (
            _refused(client, spec))

        spec = _spec("scratch")
        params = spec.launch_plan.kernels[0].params
        params[8].source = spb.PARAM_SOURCE_SCRATCH
        params[8].scratch_bytes = 1 << 30
        assert "params[8] ('global_scratch').scratch_bytes: 1073741824 must be from 1 to" in (
            _refused(client, spec))


def test_unbound_names_are_refused_on_the_client() -> None:
    @triton.jit
    def odd(x_ptr, out_ptr, mystery, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(out_ptr + i, tl.load(x_ptr + i) * mystery)

    with pytest.raises(ValueError, match=r"no value for parameter\(s\) \['mystery'\]"):
        kt.compile(odd, constexprs={"BLOCK": 128})
    # Named in bindings, it compiles: a float constant.
    kernel = kt.compile(odd, constexprs={"BLOCK": 128}, bindings={"mystery": "float:0.5"})
    assert kernel.params[2].source == spb.PARAM_SOURCE_FLOAT
    assert kernel.params[2].float_value == 0.5
    with pytest.raises(ValueError, match="'nowhere'"):
        kt.compile(odd, constexprs={"BLOCK": 128}, bindings={"nowhere": "hidden"})


sys.path.insert(0, str(ROOT / "tests" / "gpu" / "cheats"))
import triton_cheats  # noqa: E402


def test_the_pdl_rule_reads_tritons_ptx(submissions_server: Server) -> None:
    """A Triton kernel launched with PDL that never waits for its predecessor is refused at
    registration, as a CUDA one is; with gdc_wait before its loads it registers."""
    with client_of(submissions_server) as client:
        kernel = triton_cheats.compile_cheat("triton_pdl_no_wait", launch_pdl=True)
        message = _refused(client, kt.spec(kernel, "pdl_no_wait"))
        assert "kernels[0].pdl: 'triton_pdl_no_wait' never executes griddepcontrol.wait" in message

        @triton.jit
        def waits(x_ptr, residual_ptr, weight_ptr, out_ptr, stride, n_cols, eps,
                  BLOCK: tl.constexpr):
            tl.extra.cuda.gdc_wait()
            row = tl.program_id(0).to(tl.int64)
            triton_cheats._honest_row(x_ptr, residual_ptr, weight_ptr, out_ptr, row, stride,
                                      n_cols, eps, BLOCK)

        honest = kt.compile(waits, constexprs={"BLOCK": 2048}, num_warps=8, launch_pdl=True)
        sub = client.register_submission(kt.spec(honest, "pdl_waits"))
        assert sub.spec.launch_plan.kernels[0].pdl
        assert sub.diagnostics.kernels[0].waits_for_grid_dependency


def test_a_counter_in_a_scratch_parameter_registers(submissions_server: Server) -> None:
    """The call-counting cheat keeps its count in a scratch parameter (zeroed at every module
    load, which is what catches it on a GPU): its binding registers with the scratch sized."""
    with client_of(submissions_server) as client:
        kernel = triton_cheats.compile_cheat("triton_call_counter")
        sub = client.register_submission(kt.spec(kernel, "call_counter"))
        params = sub.spec.launch_plan.kernels[0].params
        scratch = [p for p in params if p.source == spb.PARAM_SOURCE_SCRATCH]
        assert [(p.name, p.scratch_bytes) for p in scratch] == [("counter_ptr", 16)]
        assert list(sub.diagnostics.kernels[0].param_bytes) == [8, 8, 8, 8, 4, 4, 4, 4, 8, 8, 8]


def test_a_grid_fixed_by_the_compile_is_the_launchs() -> None:
    """A kernel compiled for one block per N rows (TileLang's grid) registers with N; another
    count is refused on the client, never launched with a grid the kernel does not expect."""
    kernel = kt.compile(example.add_rmsnorm, num_warps=8, constexprs=CONSTEXPRS)
    assert kt.spec(kernel, "any").launch_plan.kernels[0].rows_per_block == 1
    assert kt.spec(kernel, "four", rows_per_block=4).launch_plan.kernels[0].rows_per_block == 4
    kernel.rows_per_block = 2
    assert kt.spec(kernel, "fixed").launch_plan.kernels[0].rows_per_block == 2
    assert kt.submit_flags(kernel)[kt.submit_flags(kernel).index("--rows-per-block") + 1] == "2"
    with pytest.raises(ValueError, match="rows_per_block: 4, but .* one block per 2 rows"):
        kt.spec(kernel, "other", rows_per_block=4)

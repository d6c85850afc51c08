"""Triton kernels as submissions: a `@triton.jit` function, as its author wrote it, to a
verdict ranked beside the built-ins, in one call.

    import kerneleval, kerneleval.triton
    from my_kernels import add_rmsnorm          # a @triton.jit function

    with kerneleval.Client("gpu-node:50051") as client:
        verdict = kerneleval.triton.submit(
            client, add_rmsnorm, name="triton_add_rmsnorm",
            constexprs={"BLOCK": 2048}, num_warps=8,
            dtype="bf16", mode="output_and_residual", suite="fused_add_rmsnorm_h2048")
        print(verdict.report.to_pandas())

The kernel is compiled here, for the server's GPU arch, by Triton itself (no GPU is needed
on this machine); the service receives its PTX, assembles it for the device, and launches
it with the parameter list Triton gave it. Each parameter is bound to a value the service
supplies (kerneleval.v1.ParamSource) by its name: `x_ptr` is the call's hidden_states,
`n_cols` its hidden size, `eps` its eps (NAMES lists every conventional name); `bindings`
names any other. Triton's trailing scratch pointers are bound to NULL where the compile
needs no scratch. Every check a struct-ABI submission gets applies unchanged.

Needs the `triton` package (pip install triton); nothing else here imports it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from kerneleval.v1 import submissions_pb2 as spb

# Conventional names of each value, as Triton kernels for add + RMSNorm spell them (Liger,
# FlashInfer-Bench, the Triton tutorials); matched after lower-casing and dropping a `_ptr`
# suffix.
NAMES: Dict[str, Sequence[str]] = {
    "hidden_states": ("x", "hidden_states", "input", "inp", "a", "x_in"),
    "residual": ("residual", "res", "r", "residual_in"),
    "weight": ("weight", "w", "gamma", "g"),
    "output": ("out", "output", "y", "o", "x_out"),
    "residual_out": ("residual_out", "res_out", "r_out", "residual_output", "new_residual"),
    "hidden_states_stride": (
        "stride", "row_stride", "stride_row", "x_stride", "stride_x", "x_row_stride",
        "hidden_states_stride", "input_row_stride",
    ),
    "residual_stride": ("residual_stride", "stride_residual", "res_stride", "r_row_stride",
                        "residual_row_stride"),
    "output_stride": ("output_stride", "out_stride", "stride_out", "y_stride", "stride_y",
                      "y_row_stride", "output_row_stride"),
    "residual_out_stride": ("residual_out_stride", "res_out_stride", "stride_residual_out"),
    "batch": ("n_rows", "rows", "batch", "m", "num_rows", "num_tokens", "n_tokens"),
    "hidden": ("n_cols", "cols", "hidden", "n", "hidden_size", "d", "dim", "n_elements"),
    "eps": ("eps", "epsilon", "variance_epsilon"),
    "inv_hidden": ("inv_hidden", "inv_n", "rcp_n", "inv_cols"),
    "sm_count": ("num_sms", "sm_count", "n_sms"),
}

_POINTERS = {"hidden_states", "residual", "weight", "output", "residual_out", "scratch",
             "plan_scratch", "null"}
_FLOATS = {"eps", "inv_hidden", "float"}
# Triton 3.5 and later append these two to every kernel's parameter list.
_TRITON_SCRATCH = ("global_scratch", "profile_scratch")
_DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}
# The PTX ISA the service assembles (CUDA 13.0).
_SERVICE_PTX = 90


@dataclasses.dataclass
class CompiledKernel:
    """A Triton kernel compiled for one arch: its PTX and what its launch needs."""

    name: str  # the PTX entry
    ptx: str
    arch: str  # sm_90a, sm_100a
    num_warps: int
    shared_bytes: int  # dynamic shared memory per program
    launch_pdl: bool
    params: List[spb.KernelParam]  # the binding, in the PTX's parameter order


@dataclasses.dataclass
class Verdict:
    """What `submit` returns: the registered submission, and the suite's report when a suite
    was given (its rows rank the submission beside the built-ins)."""

    submission: spb.Submission
    report: Any = None  # a kerneleval.BenchReport


def _source_number(name: str) -> int:
    return spb.ParamSource.Value("PARAM_SOURCE_" + name.upper())


def _conventional(arg: str) -> Optional[str]:
    key = arg.lower()
    if key.endswith("_ptr"):
        key = key[: -len("_ptr")]
    for value, names in NAMES.items():
        if key in names:
            return value
    return None


def _param(arg: str, value: str) -> spb.KernelParam:
    """One binding from a value name: "hidden", "int:4", "float:0.5", "scratch:4096"."""
    head, _, argument = value.partition(":")
    p = spb.KernelParam(name=arg)
    try:
        if head == "int":
            p.source, p.int_value = spb.PARAM_SOURCE_INT, int(argument)
        elif head == "float":
            p.source, p.float_value = spb.PARAM_SOURCE_FLOAT, float(argument)
        elif head == "scratch":
            p.source, p.scratch_bytes = spb.PARAM_SOURCE_SCRATCH, int(argument)
        else:
            p.source = _source_number(head)
    except ValueError:
        known = ", ".join(list(NAMES) + ["plan_scratch", "null", "abi_params", "int:N",
                                         "float:X", "scratch:BYTES"])
        raise ValueError(f"bindings[{arg!r}]: {value!r} is none of {known}") from None
    return p


def _arg_names(fn: Any) -> List[str]:
    names = getattr(fn, "arg_names", None)
    if names is None:
        raise TypeError("fn: a @triton.jit function is expected")
    return list(names)


def _constexpr_names(fn: Any) -> List[str]:
    return [p.name for p in fn.params if p.is_constexpr]


def bind(fn: Any, bindings: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Each non-constexpr parameter of `fn` and the value it is bound to: `bindings` first,
    then the conventional names. ValueError naming every parameter no rule binds."""
    bindings = dict(bindings or {})
    constexprs = set(_constexpr_names(fn))
    bound: Dict[str, str] = {}
    missing = []
    for arg in _arg_names(fn):
        if arg in constexprs:
            continue
        value = bindings.pop(arg, None) or _conventional(arg)
        if value is None:
            missing.append(arg)
        else:
            bound[arg] = value
    if bindings:
        raise ValueError(f"bindings: {sorted(bindings)} are not parameters of {fn.__name__}")
    if missing:
        raise ValueError(
            f"{fn.__name__}: no value for parameter(s) {missing}; name them in bindings= "
            f"(e.g. bindings={{{missing[0]!r}: 'hidden'}}) with one of {sorted(NAMES)} "
            "or plan_scratch, null, int:N, float:X, scratch:BYTES"
        )
    return bound


def _signature(fn: Any, bound: Mapping[str, str], dtype: str,
               types: Mapping[str, str]) -> Dict[str, str]:
    signature = {}
    constexprs = set(_constexpr_names(fn))
    for arg in _arg_names(fn):
        if arg in constexprs:
            signature[arg] = "constexpr"
        elif arg in types:
            signature[arg] = types[arg]
        else:
            head = bound[arg].partition(":")[0]
            signature[arg] = ("*" + _DTYPES[dtype] if head in _POINTERS
                              else "fp32" if head in _FLOATS else "i32")
    return signature


def compile(  # noqa: A001 - the verb Triton uses
    fn: Any,
    dtype: str = "bf16",
    constexprs: Optional[Mapping[str, Any]] = None,
    num_warps: int = 4,
    num_stages: int = 3,
    arch: str = "sm_90a",
    bindings: Optional[Mapping[str, str]] = None,
    types: Optional[Mapping[str, str]] = None,
    ptx_version: Optional[int] = None,
    launch_pdl: bool = False,
) -> CompiledKernel:
    """Compiles `fn` for `arch` with Triton, on this machine (no GPU needed).

    `launch_pdl=True` launches the kernel with programmatic dependent launch, as Triton's
    option of that name: the service then requires it to wait for its predecessor
    (`tl.extra.cuda.gdc_wait()`) before touching memory, and refuses it otherwise.

    Pointers are compiled as `*dtype`, floats as fp32 and integers as i32 unless `types`
    says otherwise (`{"n_cols": "i64"}`). `ptx_version` is the PTX ISA written; by default
    9.0 (CUDA 13.0, what the service assembles), or Triton's own default where the ptxas that
    Triton checks its PTX with is older and cannot read 9.0 (Triton 3.6 ships one of CUDA
    12.8): an older ISA the service reads too, while Triton's default on a newer toolkit
    may be newer than the server's. ValueError for a parameter nothing binds, or a kernel the service cannot
    launch as Triton would (a global scratch per program, several CTAs per program, a
    cooperative grid), saying which.
    """
    import triton  # noqa: PLC0415 - optional dependency
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import ASTSource  # noqa: PLC0415

    if dtype not in _DTYPES:
        raise ValueError(f"dtype: {dtype!r} is not bf16, fp16 or fp32")
    match = re.fullmatch(r"sm_(\d+)a?", arch)
    if not match:
        raise ValueError(f"arch: {arch!r} is not sm_90a or sm_100a")
    bound = bind(fn, bindings)
    source = ASTSource(fn, _signature(fn, bound, dtype, types or {}),
                       constexprs=dict(constexprs or {}))
    options = {"num_warps": num_warps, "num_stages": num_stages,
               **({"launch_pdl": True} if launch_pdl else {})}
    target = GPUTarget("cuda", int(match.group(1)), 32)
    try:
        kernel = triton.compile(source, target=target,
                                options={**options, "ptx_version": ptx_version or _SERVICE_PTX})
    except Exception as error:  # Triton's PTXASError has no stable import path
        if ptx_version is not None or ".version" not in str(error):
            raise
        kernel = triton.compile(source, target=target, options=options)
    meta = kernel.metadata
    if getattr(meta, "num_ctas", 1) != 1:
        raise ValueError(f"num_ctas={meta.num_ctas}: programs of several CTAs are not launched "
                         "by the service yet")
    if getattr(meta, "launch_cooperative_grid", False):
        raise ValueError("launch_cooperative_grid: cooperative launches are not supported")
    params = [_param(arg, value) for arg, value in bound.items()]
    for scratch in _TRITON_SCRATCH:
        size = getattr(meta, scratch + "_size", 0)
        if size:
            raise ValueError(
                f"{scratch}_size={size}: the kernel needs {size} bytes of {scratch} per "
                "program, which the service does not size per grid yet"
            )
    entry_params = _ptx_param_count(kernel.asm["ptx"], meta.name)
    # The scratch pointers Triton appends (two since 3.5), bound to NULL: their sizes are 0.
    for scratch in _TRITON_SCRATCH[: max(0, entry_params - len(params))]:
        params.append(spb.KernelParam(name=scratch, source=spb.PARAM_SOURCE_NULL))
    return CompiledKernel(
        name=meta.name,
        ptx=kernel.asm["ptx"],
        arch=arch,
        num_warps=meta.num_warps,
        shared_bytes=int(meta.shared),
        launch_pdl=bool(getattr(meta, "launch_pdl", False)),
        params=params,
    )


def _ptx_param_count(ptx: str, entry: str) -> int:
    head = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(([^)]*)\)", ptx)
    return head.group(1).count(".param") if head else 0


def spec(
    kernel: CompiledKernel,
    name: str,
    dtype: str = "bf16",
    mode: str = "output",
    rows_per_block: int = 1,
    ctas_per_sm: int = 0,
    device: str = "",
    description: str = "",
) -> spb.SubmissionSpec:
    """The SubmissionSpec of a compiled kernel: its PTX, one kernel launched with
    num_warps * 32 threads and Triton's shared memory, one program per `rows_per_block`
    rows (a program per row: 1), or `ctas_per_sm` programs per SM for a persistent kernel."""
    from kerneleval import _names as names  # noqa: PLC0415
    from kerneleval.v1 import kerneleval_pb2 as pb  # noqa: PLC0415

    launch = spb.KernelLaunch(
        entry=kernel.name,
        block_size=kernel.num_warps * 32,
        dynamic_smem_bytes=kernel.shared_bytes,
        pdl=kernel.launch_pdl,
        params=kernel.params,
    )
    if ctas_per_sm:
        launch.ctas_per_sm = ctas_per_sm
    else:
        launch.rows_per_block = rows_per_block
    return spb.SubmissionSpec(
        name=name,
        description=description or f"Triton kernel {kernel.name}",
        language=spb.SOURCE_LANGUAGE_PTX,
        source=kernel.ptx,
        launch_plan=spb.LaunchPlan(kernels=[launch]),
        dtype=names.parse(pb.DType, dtype, "dtype"),
        mode=names.parse(pb.Mode, mode, "mode"),
        target_arch=kernel.arch,
        device=device,
    )


def submit_flags(kernel: CompiledKernel, rows_per_block: int = 1) -> List[str]:
    """The `kerneleval submit` flags that register `kernel`'s PTX as `spec` would (after
    `--source FILE.ptx --name NAME --dtype ... --mode ...`): entry, block, grid, shared
    memory, PDL and one `--arg NAME=VALUE` per parameter."""
    flags = ["--entry", kernel.name, "--block", str(kernel.num_warps * 32),
             "--rows-per-block", str(rows_per_block)]
    if kernel.shared_bytes:
        flags += ["--smem", str(kernel.shared_bytes)]
    if kernel.launch_pdl:
        flags.append("--pdl")
    for p in kernel.params:
        value = spb.ParamSource.Name(p.source)[len("PARAM_SOURCE_"):].lower()
        if p.source == spb.PARAM_SOURCE_INT:
            value += f":{p.int_value}"
        elif p.source == spb.PARAM_SOURCE_FLOAT:
            value += f":{p.float_value!r}"
        elif p.source == spb.PARAM_SOURCE_SCRATCH:
            value += f":{p.scratch_bytes}"
        flags += ["--arg", f"{p.name}={value}"]
    return flags


def _server_arch(client: Any, device: str) -> str:
    for d in client.devices():
        if d.kind == "cuda" and (not device or d.name == device):
            major = d.compute_capability.split(".")[0]
            return "sm_100a" if major == "10" else "sm_90a"
    return "sm_90a"


def submit(
    client: Any,
    fn: Any,
    name: str,
    constexprs: Optional[Mapping[str, Any]] = None,
    num_warps: int = 4,
    num_stages: int = 3,
    dtype: str = "bf16",
    mode: str = "output",
    bindings: Optional[Mapping[str, str]] = None,
    types: Optional[Mapping[str, str]] = None,
    rows_per_block: int = 1,
    ctas_per_sm: int = 0,
    suite: str = "",
    device: str = "",
    arch: str = "",
    ptx_version: Optional[int] = None,
    on_progress: Optional[Callable[[Any], None]] = None,
    **bench_args: Any,
) -> Verdict:
    """Compiles `fn` for the server's GPU (or `arch`), registers it as `name`, and with a
    `suite` benchmarks it beside the device's built-ins, every call of each checked on the
    device (as `kerneleval submit --suite`). The arguments are `compile`'s and `spec`'s;
    `bench_args` go to `Client.bench` (repetitions, cache, ...)."""
    kernel = compile(fn, dtype=dtype, constexprs=constexprs, num_warps=num_warps,
                     num_stages=num_stages, arch=arch or _server_arch(client, device),
                     bindings=bindings, types=types, ptx_version=ptx_version)
    submission = client.register_submission(
        spec(kernel, name, dtype=dtype, mode=mode, rows_per_block=rows_per_block,
             ctas_per_sm=ctas_per_sm, device=device)
    )
    if not suite:
        return Verdict(submission)
    built_ins = [i.name for i in client.implementations(device)
                 if i.device_kind == "cuda" and not i.test_only]
    report = client.bench(suite, implementations=built_ins + [submission.id], device=device,
                          check_every_call=True, on_progress=on_progress, **bench_args)
    return Verdict(submission, report)

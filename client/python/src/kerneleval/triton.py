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

import contextlib
import io
import re
from typing import Any, Callable, Dict, List, Mapping, Optional

from kerneleval.v1 import submissions_pb2 as spb
from kerneleval._ptx_kernel import (  # noqa: F401 - NAMES, Verdict, spec, submit_flags: API
    DTYPES,
    FLOATS,
    NAMES,
    POINTERS,
    CompiledKernel,
    Verdict,
    conventional,
    param,
    ptx_param_count,
    register_and_rank,
    server_arch,
    spec,
    submit_flags,
    unbound_error,
)

# Triton 3.5 and later append these two to every kernel's parameter list.
_TRITON_SCRATCH = ("global_scratch", "profile_scratch")
# The PTX ISA the service assembles (CUDA 13.0).
_SERVICE_PTX = 90


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
        value = bindings.pop(arg, None) or conventional(arg)
        if value is None:
            missing.append(arg)
        else:
            bound[arg] = value
    if bindings:
        raise ValueError(f"bindings: {sorted(bindings)} are not parameters of {fn.__name__}")
    if missing:
        raise unbound_error(fn.__name__, missing)
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
            signature[arg] = ("*" + dtype if head in POINTERS
                              else "fp32" if head in FLOATS else "i32")
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

    if dtype not in DTYPES:
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
        # Quietly: where its ptxas cannot read the ISA, Triton prints the whole PTX with the
        # error before raising it, which the fallback below makes no error of the caller's.
        with contextlib.redirect_stdout(io.StringIO()):
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
    params = [param(arg, value) for arg, value in bound.items()]
    for scratch in _TRITON_SCRATCH:
        size = getattr(meta, scratch + "_size", 0)
        if size:
            raise ValueError(
                f"{scratch}_size={size}: the kernel needs {size} bytes of {scratch} per "
                "program, which the service does not size per grid yet"
            )
    entry_params = ptx_param_count(kernel.asm["ptx"], meta.name)
    # The scratch pointers Triton appends (two since 3.5), bound to NULL: their sizes are 0.
    for scratch in _TRITON_SCRATCH[: max(0, entry_params - len(params))]:
        params.append(spb.KernelParam(name=scratch, source=spb.PARAM_SOURCE_NULL))
    return CompiledKernel(
        name=meta.name,
        ptx=kernel.asm["ptx"],
        arch=arch,
        block_size=meta.num_warps * 32,
        shared_bytes=int(meta.shared),
        launch_pdl=bool(getattr(meta, "launch_pdl", False)),
        params=params,
        language="Triton",
    )


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
                     num_stages=num_stages, arch=arch or server_arch(client, device),
                     bindings=bindings, types=types, ptx_version=ptx_version)
    submission_spec = spec(kernel, name, dtype=dtype, mode=mode, rows_per_block=rows_per_block,
                           ctas_per_sm=ctas_per_sm, device=device)
    return register_and_rank(client, submission_spec, suite, device, on_progress, bench_args)

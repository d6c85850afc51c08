"""TileLang kernels as submissions: a `@T.prim_func`, as its author wrote it, to a verdict
ranked beside the built-ins, in one call.

    import kerneleval, kerneleval.tilelang
    from my_kernels import add_rmsnorm          # a @T.prim_func

    with kerneleval.Client("gpu-node:50051") as client:
        verdict = kerneleval.tilelang.submit(client, add_rmsnorm, name="tl_add_rmsnorm",
                                             suite="fused_add_rmsnorm_h2048")
        print(verdict.report.to_pandas())

The function is compiled here by TileLang for the server's GPU arch (no GPU is needed on this
machine; TileLang runs the CUDA toolkit's nvcc for the PTX), and the service receives the
PTX. What the launch needs is read from the compiled device function, not guessed: its
parameters (TileLang passes each buffer's data pointer, ordered by buffer name, then the
dynamic dimensions), its threads per block, its dynamic shared memory, and its grid, which
must be one block per `rows_per_block` rows of the dynamic batch dimension (checked at
several batches) since the service launches the plan's grid, not TileLang's host code.

Each parameter is bound by its name, as for Triton (`kerneleval.triton.NAMES`: a buffer named
`X` or `hidden_states`, a dimension named `M` or `batch`), or by `bindings`. TMA lowering is
turned off (`tl.disable_tma_lower`): on sm_90 it passes `CUtensorMap`s built by TileLang's
host code, which the service does not run; a kernel that still takes one is refused here,
saying so. The row stride is compiled in (TileLang kernels take contiguous buffers), which
the service's tensors are: every stride equals `hidden`.

Needs the `tilelang` package (which needs PyTorch) and nvcc; nothing else here imports them.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Callable, Dict, List, Mapping, Optional

from kerneleval.v1 import submissions_pb2 as spb
from kerneleval._ptx_kernel import (  # noqa: F401 - Verdict, spec, submit_flags: API
    CompiledKernel,
    Verdict,
    check_arch,
    conventional,
    entry_names,
    param,
    ptx_param_bytes,
    register_and_rank,
    server_arch,
    spec,
    submit_flags,
    unbound_error,
)

# TileLang's defaults for a kernel the service launches: no TMA descriptors (built on the
# host) and no warp specialization around them.
PASS_CONFIGS = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}
# Batches at which the grid is evaluated to find its rows per block.
_PROBE_BATCHES = (1, 2, 7, 79, 1000, 16254)


def _device_function(kernel: Any) -> Any:
    functions = list(kernel.artifact.device_mod.functions.values())
    if len(functions) != 1:
        raise ValueError(f"the module has {len(functions)} device functions; one is launched")
    return functions[0]


def _constant(extent: Any) -> Optional[int]:
    """An extent's value where it is a constant (a Python int or a TIR IntImm), else None."""
    if isinstance(extent, int):
        return extent
    value = getattr(extent, "value", None)
    return int(value) if isinstance(value, int) else None


def _pointer_names(prim_func: Any) -> Dict[str, str]:
    """Each buffer's data variable name to the buffer's name (what the author wrote)."""
    return {str(b.data.name): str(b.name) for b in prim_func.buffer_map.values()}


def _rows_per_block(grid: Any, batch_var: Optional[Any], entry: str) -> int:
    """The r for which the grid is ceil(batch / r) at every probed batch."""
    from tvm import arith  # noqa: PLC0415 - optional dependency

    try:  # TileLang's TVM names its TIR module tirx
        from tvm import tirx as tir  # noqa: PLC0415
    except ImportError:
        from tvm import tir  # noqa: PLC0415

    def blocks(batch: int) -> int:
        expr = tir.stmt_functor.substitute(grid, {batch_var: tir.IntImm(batch_var.dtype, batch)})
        value = arith.Analyzer().simplify(expr)
        if not isinstance(value, tir.IntImm):
            raise ValueError(f"{entry}: its grid {grid} depends on more than the batch")
        return int(value.value)

    constant = _constant(grid)
    if batch_var is None or constant is not None:
        what = f"a constant {constant} blocks" if constant is not None else f"{grid}"
        raise ValueError(f"{entry}: its grid is {what}, not following a dynamic batch dimension; "
                         "the service launches one block per rows_per_block rows of the batch")
    rows = max(1, math.ceil(_PROBE_BATCHES[-1] / max(1, blocks(_PROBE_BATCHES[-1]))))
    for batch in _PROBE_BATCHES:
        if blocks(batch) != math.ceil(batch / rows):
            raise ValueError(f"{entry}: its grid {grid} is not one block per {rows} rows of the "
                             f"batch (at batch {batch}: {blocks(batch)} blocks)")
    return rows


def compile(  # noqa: A001 - the verb TileLang uses
    fn: Any,
    arch: str = "sm_90a",
    bindings: Optional[Mapping[str, str]] = None,
    pass_configs: Optional[Mapping[str, Any]] = None,
) -> CompiledKernel:
    """Compiles the @T.prim_func `fn` for `arch` with TileLang, on this machine (no GPU
    needed). Returns the PTX, its binding and launch shape (threads, dynamic shared memory;
    `CompiledKernel.rows_per_block` from its grid). ValueError for a parameter nothing binds,
    a `CUtensorMap` parameter, a grid that is not one block per rows of the batch, or more
    than one kernel, saying which."""
    import tilelang  # noqa: PLC0415 - optional dependency

    check_arch(arch)
    bindings = dict(bindings or {})
    configs = dict(PASS_CONFIGS, **dict(pass_configs or {}))
    # A kernel from TileLang's cache carries no compiled module to read the launch from.
    cached = tilelang.is_cache_enabled()
    tilelang.disable_cache()
    try:
        kernel = tilelang.compile(fn, target={"kind": "cuda", "arch": arch},
                                  execution_backend="tvm_ffi", pass_configs=configs)
    finally:
        if cached:
            tilelang.enable_cache()
    device = _device_function(kernel)
    entry = str(device.attrs["global_symbol"])
    with tempfile.TemporaryDirectory(prefix="kerneleval-tilelang-") as workdir:
        path = os.path.join(workdir, "kernel.ptx")
        kernel.export_ptx(path)
        with open(path, encoding="utf-8") as f:
            ptx = f.read()
    if entry not in entry_names(ptx):
        raise ValueError(f"{entry}: not an entry of the PTX TileLang wrote ({entry_names(ptx)})")

    extents = {str(k): v for k, v in device.attrs["thread_extent"].items()}
    threads = 1
    for axis in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        extent = _constant(extents.get(axis, 1))
        if extent is None:
            raise ValueError(f"{entry}: its {axis} extent {extents[axis]} is not a constant")
        threads *= extent
    for axis in ("blockIdx.y", "blockIdx.z"):
        if _constant(extents.get(axis, 1)) != 1:
            raise ValueError(f"{entry}: a grid in {axis}; the service launches a 1-D grid")

    pointers = _pointer_names(kernel.prim_func)
    sizes = ptx_param_bytes(ptx, entry)
    if len(sizes) != len(device.params):
        raise ValueError(f"{entry}: the PTX has {len(sizes)} parameters, TileLang's device "
                         f"function {len(device.params)}")
    params: List[spb.KernelParam] = []
    missing, batch_var = [], None
    for var, size in zip(device.params, sizes):
        name = pointers.get(str(var.name), str(var.name))
        if size > 8:
            raise ValueError(f"{entry}: parameter {name!r} is {size} bytes, a CUtensorMap "
                             "built by TileLang's host code; compile without TMA lowering "
                             "(pass_configs={'tl.disable_tma_lower': True})")
        value = bindings.pop(name, None) or conventional(name)
        if value is None:
            missing.append(name)
            continue
        params.append(param(name, value))
        if value == "batch":
            batch_var = var
    if missing:
        raise unbound_error(entry, missing, "; a buffer binds to a tensor's name")
    if bindings:
        raise ValueError(f"bindings: {sorted(bindings)} are not parameters of {entry}")
    return CompiledKernel(
        name=entry, ptx=ptx, arch=arch, block_size=threads,
        shared_bytes=int(device.attrs.get("dyn_shared_memory_buf", 0) or 0),
        launch_pdl=False, params=params, language="TileLang",
        rows_per_block=_rows_per_block(extents.get("blockIdx.x", 1), batch_var, entry))


def submit(
    client: Any,
    fn: Any,
    name: str,
    dtype: str = "bf16",
    mode: str = "output",
    bindings: Optional[Mapping[str, str]] = None,
    pass_configs: Optional[Mapping[str, Any]] = None,
    suite: str = "",
    device: str = "",
    arch: str = "",
    on_progress: Optional[Callable[[Any], None]] = None,
    **bench_args: Any,
) -> Verdict:
    """Compiles `fn` for the server's GPU (or `arch`), registers it as `name` with the launch
    its compile gives, and with a `suite` benchmarks it beside the device's built-ins, every
    call of each checked on the device (as `kerneleval submit --suite`). `bench_args` go to
    `Client.bench` (repetitions, cache, ...)."""
    kernel = compile(fn, arch=arch or server_arch(client, device), bindings=bindings,
                     pass_configs=pass_configs)
    submission_spec = spec(kernel, name, dtype=dtype, mode=mode, device=device)
    return register_and_rank(client, submission_spec, suite, device, on_progress, bench_args)

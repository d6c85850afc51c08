"""CuTe DSL kernels as submissions: a `@cute.kernel` function, as its author wrote it, to a
verdict ranked beside the built-ins, in one call.

    import kerneleval, kerneleval.cute
    from my_kernels import add_rmsnorm          # a @cute.kernel function

    with kerneleval.Client("gpu-node:50051") as client:
        verdict = kerneleval.cute.submit(
            client, add_rmsnorm, name="cute_add_rmsnorm", threads=256, rows_per_block=8,
            dtype="bf16", suite="fused_add_rmsnorm_h2048")
        print(verdict.report.to_pandas())

The kernel is compiled here by the CuTe DSL for the server's GPU arch (no GPU is needed on
this machine), through a `@cute.jit` launcher written for it that passes its parameters
through unchanged; the service receives the PTX, assembles it for the device and launches
the kernel with the grid of its plan (one CTA per `rows_per_block` rows, or `ctas_per_sm`
per SM) instead of the DSL's host code.

Each parameter is bound by its name, as for Triton (`kerneleval.triton.NAMES`; CuTe's `mX`
is `x`), or by `bindings`:
- a `cute.Tensor` is passed as CuTe passes a tensor, one struct of its pointer and its
  layout's dynamic entries. The layouts compiled are those the service's tensors have:
  hidden_states, residual, output and residual_out are (batch, hidden) with i32 shapes, an
  i64 row stride and a static unit column stride; the weight is (hidden,) with an i32 shape
  and a unit stride. The struct is bound field by field (ParamSource STRUCT), so each call
  receives its own pointers, batch and hidden; its size is checked here against the PTX, and
  again by the service. Base pointers are 16-byte aligned (the contract says so), which the
  layouts assume.
- a `cutlass.Float32` / `Float64` takes a float value (eps, inv_hidden, float:X), an
  `Int32` / `Int64` an integer one (batch, hidden, sm_count, a stride, int:N);
- a `cutlass.Constexpr` takes its value from `constexprs` and is compiled in.

Needs the `nvidia-cutlass-dsl` package; nothing else here imports it.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import tempfile
from typing import Any, Callable, List, Mapping, Optional, Tuple

from kerneleval.v1 import submissions_pb2 as spb
from kerneleval._ptx_kernel import (  # noqa: F401 - Verdict, spec, submit_flags: API
    DTYPES,
    STRIDE_OF,
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

TENSORS = ("hidden_states", "residual", "weight", "output", "residual_out")

# The launcher compiled around the kernel: every parameter passed through unchanged, so the
# kernel's PTX parameters are the author's own, in order. Written to a file because the DSL
# reads a @cute.jit function's source to rewrite its control flow.
_LAUNCHER = """\
import cutlass
import cutlass.cute as cute


@cute.jit
def kerneleval_launch({params}):
    _KERNEL({args}).launch(grid=[1, 1, 1], block=[_THREADS, 1, 1], smem=_SMEM)
"""


_LAUNCHER_FILE = "kerneleval_cute_launch.py"


def _without_launcher_lines(ptx: str, launcher: str) -> str:
    """`ptx` without its `.loc` lines into the generated launcher `launcher`. The DSL gives a
    few generated operations the launcher's location rather than that of the kernel statement
    they belong to: the `.to()` conversions among them, the first use of each load, where warps
    wait on memory (on an H100, 83% of the example's samples fell on the launcher's line). The
    launcher holds no device code of its own; with its `.loc` lines gone, those instructions
    keep the location before them, the author's statement, as PTX line information reads."""
    ids = [n for n, path in re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.M)
           if os.path.realpath(path) == os.path.realpath(launcher)]
    if not ids:
        return ptx
    return re.sub(r"^\s*\.loc\s+(?:" + "|".join(ids) + r")\s.*\n", "", ptx, flags=re.M)


def _kind(annotation: Any) -> str:
    """"tensor", "constexpr", "f32", "f64", "i32", "i64" for a parameter's annotation."""
    import cutlass  # noqa: PLC0415 - optional dependency
    import cutlass.cute as cute  # noqa: PLC0415

    if annotation is cute.Tensor:
        return "tensor"
    if annotation is cutlass.Constexpr or getattr(annotation, "__origin__", None) is (
            cutlass.Constexpr):
        return "constexpr"
    scalars = {cutlass.Float32: "f32", cutlass.Float64: "f64", cutlass.Int32: "i32",
               cutlass.Int64: "i64"}
    for kind, name in scalars.items():
        if annotation is kind:
            return name
    return ""


def _parameters(fn: Any) -> List[Tuple[str, str]]:
    """Each parameter of the @cute.kernel `fn` and its kind, in order."""
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (TypeError, ValueError, NameError) as error:
        raise TypeError(f"fn: a @cute.kernel function is expected ({error})") from None
    kinds = []
    for name, p in signature.parameters.items():
        kind = _kind(p.annotation)
        if not kind:
            raise TypeError(
                f"{fn.__name__}: parameter {name!r} is annotated {p.annotation!r}; give "
                "cute.Tensor, cutlass.Float32/Float64, cutlass.Int32/Int64 or cutlass.Constexpr")
        kinds.append((name, kind))
    return kinds


def _tensor_param(arg: str, value: str) -> spb.KernelParam:
    """The struct CuTe passes for tensor `value` of the layout compiled for it."""
    if value not in TENSORS:
        raise ValueError(f"bindings[{arg!r}]: {value!r} is a cute.Tensor parameter; bind it to "
                         f"one of {', '.join(TENSORS)}")
    p = spb.KernelParam(name=arg, source=spb.PARAM_SOURCE_STRUCT)
    p.fields.add(source=spb.ParamSource.Value("PARAM_SOURCE_" + value.upper()))
    if value == "weight":
        p.fields.add(source=spb.PARAM_SOURCE_HIDDEN, bytes=4)
    else:
        p.fields.add(source=spb.PARAM_SOURCE_BATCH, bytes=4)
        p.fields.add(source=spb.PARAM_SOURCE_HIDDEN, bytes=4)
        p.fields.add(source=spb.ParamSource.Value("PARAM_SOURCE_" + STRIDE_OF[value].upper()),
                     bytes=8)
    return p


def _scalar_param(arg: str, value: str, kind: str) -> spb.KernelParam:
    p = param(arg, value)
    floats = (spb.PARAM_SOURCE_EPS, spb.PARAM_SOURCE_INV_HIDDEN, spb.PARAM_SOURCE_FLOAT)
    if (p.source in floats) != kind.startswith("f") or p.source == spb.PARAM_SOURCE_STRUCT:
        raise ValueError(f"bindings[{arg!r}]: {value!r} does not fit a {kind} parameter")
    return p


def _fake_tensor(value: str, dtype: str) -> Any:
    import cutlass  # noqa: PLC0415
    import cutlass.cute as cute  # noqa: PLC0415
    from cutlass.cute.runtime import make_fake_tensor  # noqa: PLC0415

    element = {"bf16": cutlass.BFloat16, "fp16": cutlass.Float16, "fp32": cutlass.Float32}[dtype]
    if value == "weight":
        return make_fake_tensor(element, (cute.sym_int32(),), (1,), assumed_align=16)
    return make_fake_tensor(element, (cute.sym_int32(), cute.sym_int32()),
                            (cute.sym_int64(), 1), assumed_align=16)


def _scalar_example(kind: str) -> Any:
    import cutlass  # noqa: PLC0415

    return {"f32": cutlass.Float32(0.0), "f64": cutlass.Float64(0.0), "i32": cutlass.Int32(0),
            "i64": cutlass.Int64(0)}[kind]


def _launcher(fn: Any, kinds: List[Tuple[str, str]], constexprs: Mapping[str, Any],
              threads: int, smem_bytes: int, workdir: str) -> Any:
    params = [name for name, kind in kinds if kind != "constexpr"]
    args = [f"{name}={name}" if kind != "constexpr" else f"{name}=_CONSTEXPRS[{name!r}]"
            for name, kind in kinds]
    path = os.path.join(workdir, _LAUNCHER_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(_LAUNCHER.format(params=", ".join(params), args=", ".join(args)))
    module_spec = importlib.util.spec_from_file_location("kerneleval_cute_launch", path)
    module = importlib.util.module_from_spec(module_spec)
    module.__dict__.update(_KERNEL=fn, _THREADS=threads, _SMEM=smem_bytes,
                           _CONSTEXPRS=dict(constexprs))
    module_spec.loader.exec_module(module)
    return module.kerneleval_launch


def compile(  # noqa: A001 - the verb the DSL uses
    fn: Any,
    threads: int,
    dtype: str = "bf16",
    constexprs: Optional[Mapping[str, Any]] = None,
    smem_bytes: int = 0,
    arch: str = "sm_90a",
    bindings: Optional[Mapping[str, str]] = None,
) -> CompiledKernel:
    """Compiles the @cute.kernel `fn` for `arch` with the CuTe DSL, on this machine (no GPU
    needed), launched with `threads` threads and `smem_bytes` of dynamic shared memory.
    ValueError for a parameter nothing binds, a binding that does not fit its parameter, or
    PTX whose parameters are not the structs the service fills (a DSL that lays tensors out
    otherwise), saying which."""
    import cutlass.cute as cute  # noqa: PLC0415 - optional dependency

    if dtype not in DTYPES:
        raise ValueError(f"dtype: {dtype!r} is not bf16, fp16 or fp32")
    check_arch(arch)
    if threads <= 0 or threads % 32 or threads > 1024:
        raise ValueError(f"threads: {threads} is not a multiple of 32 from 32 to 1024")
    kinds = _parameters(fn)
    constexprs = dict(constexprs or {})
    bindings = dict(bindings or {})
    unknown = sorted(set(bindings) - {name for name, kind in kinds if kind != "constexpr"})
    if unknown:
        raise ValueError(f"bindings: {unknown} are not parameters of {fn.__name__}")
    absent = [name for name, kind in kinds if kind == "constexpr" and name not in constexprs]
    if absent:
        raise ValueError(f"constexprs: no value for {absent}")
    params: List[spb.KernelParam] = []
    examples: List[Any] = []
    missing = []
    for name, kind in kinds:
        if kind == "constexpr":
            continue
        value = bindings.get(name) or conventional(name)
        if value is None:
            missing.append(name)
        elif kind == "tensor":
            params.append(_tensor_param(name, value))
            examples.append(_fake_tensor(value, dtype))
        else:
            params.append(_scalar_param(name, value, kind))
            examples.append(_scalar_example(kind))
    if missing:
        raise unbound_error(fn.__name__, missing, "; a cute.Tensor binds to a tensor's name")
    with tempfile.TemporaryDirectory(prefix="kerneleval-cute-") as workdir:
        launch = _launcher(fn, kinds, constexprs, threads, smem_bytes, workdir)
        compiled = cute.compile(launch, *examples,
                                options=f"--keep-ptx --generate-line-info --gpu-arch {arch} "
                                        f"--dump-dir {workdir}")
        ptx = _without_launcher_lines(compiled.__ptx__, os.path.join(workdir, _LAUNCHER_FILE))
    entries = entry_names(ptx)
    if len(entries) != 1:
        raise ValueError(f"{fn.__name__}: the PTX has {len(entries)} entries; one is launched")
    sizes = ptx_param_bytes(ptx, entries[0])
    want = [_struct_bytes(p) if p.source == spb.PARAM_SOURCE_STRUCT else None for p in params]
    if len(sizes) != len(params) or any(w is not None and w != s for w, s in zip(want, sizes)):
        raise ValueError(
            f"{fn.__name__}: the PTX's parameters have {sizes} bytes, the tensors' structs "
            f"{want}: this CuTe DSL lays tensors out otherwise than kerneleval.cute knows")
    return CompiledKernel(name=entries[0], ptx=ptx, arch=arch, block_size=threads,
                          shared_bytes=smem_bytes, launch_pdl=False, params=params,
                          language="CuTe DSL")


def _struct_bytes(p: spb.KernelParam) -> int:
    """C's layout of the struct's fields (the service's rule, docs/submissions.md)."""
    offset, align = 0, 1
    for f in p.fields:
        size = f.bytes or 8
        offset = (offset + size - 1) // size * size + size
        align = max(align, size)
    return (offset + align - 1) // align * align


def submit(
    client: Any,
    fn: Any,
    name: str,
    threads: int,
    rows_per_block: int = 1,
    ctas_per_sm: int = 0,
    constexprs: Optional[Mapping[str, Any]] = None,
    smem_bytes: int = 0,
    dtype: str = "bf16",
    mode: str = "output",
    bindings: Optional[Mapping[str, str]] = None,
    suite: str = "",
    device: str = "",
    arch: str = "",
    on_progress: Optional[Callable[[Any], None]] = None,
    **bench_args: Any,
) -> Verdict:
    """Compiles `fn` for the server's GPU (or `arch`), registers it as `name`, and with a
    `suite` benchmarks it beside the device's built-ins, every call of each checked on the
    device (as `kerneleval submit --suite`). The arguments are `compile`'s and `spec`'s;
    `bench_args` go to `Client.bench` (repetitions, cache, ...)."""
    kernel = compile(fn, threads, dtype=dtype, constexprs=constexprs, smem_bytes=smem_bytes,
                     arch=arch or server_arch(client, device), bindings=bindings)
    submission_spec = spec(kernel, name, dtype=dtype, mode=mode, rows_per_block=rows_per_block,
                           ctas_per_sm=ctas_per_sm, device=device)
    return register_and_rank(client, submission_spec, suite, device, on_progress, bench_args)


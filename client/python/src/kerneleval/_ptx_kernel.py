"""What kerneleval.triton and kerneleval.cute share: a kernel compiled to PTX on this machine
with its parameter list bound to the values the service supplies, turned into a
SubmissionSpec or `kerneleval submit` flags, registered, and ranked beside the device's
built-ins.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from kerneleval.v1 import submissions_pb2 as spb

# Conventional names of each value, as kernels for add + RMSNorm spell them (Liger,
# FlashInfer-Bench, the Triton tutorials, the CuTe DSL examples); matched after lower-casing
# and dropping a `_ptr` suffix (and CuTe's `m`/`g` tensor prefix and camel case: `mX` is
# `x`, `mResidualOut` is `residual_out`).
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

POINTERS = {"hidden_states", "residual", "weight", "output", "residual_out", "scratch",
            "plan_scratch", "null"}
FLOATS = {"eps", "inv_hidden", "float"}
DTYPES = ("bf16", "fp16", "fp32")
# The row stride of each tensor the service passes.
STRIDE_OF = {"hidden_states": "hidden_states_stride", "residual": "residual_stride",
             "output": "output_stride", "residual_out": "residual_out_stride"}


@dataclasses.dataclass
class CompiledKernel:
    """A kernel compiled for one arch: its PTX and what its launch needs."""

    name: str  # the PTX entry
    ptx: str
    arch: str  # sm_90a, sm_100a
    block_size: int  # threads per CTA
    shared_bytes: int  # dynamic shared memory per CTA
    launch_pdl: bool
    params: List[spb.KernelParam]  # the binding, in the PTX's parameter order
    language: str = "PTX"  # for the description: "Triton", "CuTe DSL", "TileLang"
    rows_per_block: int = 0  # rows per CTA where the compile fixes it (TileLang's grid)

    @property
    def num_warps(self) -> int:
        return self.block_size // 32


@dataclasses.dataclass
class Verdict:
    """What `submit` returns: the registered submission, and the suite's report when a suite
    was given (its rows rank the submission beside the built-ins)."""

    submission: spb.Submission
    report: Any = None  # a kerneleval.BenchReport


def source_number(name: str) -> int:
    return spb.ParamSource.Value("PARAM_SOURCE_" + name.upper())


def conventional(arg: str) -> Optional[str]:
    """The value a parameter's conventional name stands for, or None."""
    key = re.sub(r"^[mg](?=[A-Z])", "", arg)
    key = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower()  # ResidualOut: residual_out
    if key.endswith("_ptr"):
        key = key[: -len("_ptr")]
    for value, names in NAMES.items():
        if key in names:
            return value
    return None


def param(arg: str, value: str) -> spb.KernelParam:
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
            p.source = source_number(head)
    except ValueError:
        known = ", ".join(list(NAMES) + ["plan_scratch", "null", "abi_params", "int:N",
                                         "float:X", "scratch:BYTES"])
        raise ValueError(f"bindings[{arg!r}]: {value!r} is none of {known}") from None
    return p


def unbound_error(kernel: str, missing: Sequence[str], extra: str = "") -> ValueError:
    return ValueError(
        f"{kernel}: no value for parameter(s) {list(missing)}; name them in bindings= "
        f"(e.g. bindings={{{missing[0]!r}: 'hidden'}}) with one of {sorted(NAMES)} "
        f"or plan_scratch, null, int:N, float:X, scratch:BYTES{extra}"
    )


def entry_names(ptx: str) -> List[str]:
    return re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx)


def ptx_param_bytes(ptx: str, entry: str) -> List[int]:
    """The byte size of each parameter of `entry`, as its PTX declares them (a `.b8 p[N]`
    array is N: a struct by value, or a 128-byte CUtensorMap)."""
    head = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(([^)]*)\)", ptx)
    sizes = []
    for decl in (head.group(1).split(",") if head else []):
        array = re.search(r"\.b8\s+\S+\[(\d+)\]", decl)
        scalar = re.search(r"\.[busf](8|16|32|64)\s", decl + " ")
        sizes.append(int(array.group(1)) if array else int(scalar.group(1)) // 8 if scalar else 0)
    return sizes


def ptx_param_count(ptx: str, entry: str) -> int:
    head = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(([^)]*)\)", ptx)
    return head.group(1).count(".param") if head else 0


def check_arch(arch: str) -> None:
    """ValueError unless `arch` names a GPU arch the way the compilers take it (sm_90a)."""
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise ValueError(f"arch: {arch!r} is not sm_90a or sm_100a")


def _rows_per_block(kernel: CompiledKernel, asked: Optional[int]) -> int:
    """The rows per CTA of the launch: the compile's where it fixed them (a grid the kernel
    was compiled for cannot be launched with another), else the caller's, else 1."""
    if kernel.rows_per_block and asked and asked != kernel.rows_per_block:
        raise ValueError(f"rows_per_block: {asked}, but {kernel.name} was compiled for a grid of "
                         f"one block per {kernel.rows_per_block} rows")
    return kernel.rows_per_block or asked or 1


def spec(
    kernel: CompiledKernel,
    name: str,
    dtype: str = "bf16",
    mode: str = "output",
    rows_per_block: Optional[int] = None,
    ctas_per_sm: int = 0,
    device: str = "",
    description: str = "",
) -> spb.SubmissionSpec:
    """The SubmissionSpec of a compiled kernel: its PTX, one kernel of `block_size` threads
    and its shared memory, one CTA per `rows_per_block` rows, or `ctas_per_sm` CTAs per SM
    for a persistent kernel."""
    from kerneleval import _names as names  # noqa: PLC0415
    from kerneleval.v1 import kerneleval_pb2 as pb  # noqa: PLC0415

    launch = spb.KernelLaunch(
        entry=kernel.name,
        block_size=kernel.block_size,
        dynamic_smem_bytes=kernel.shared_bytes,
        pdl=kernel.launch_pdl,
        params=kernel.params,
    )
    if ctas_per_sm:
        launch.ctas_per_sm = ctas_per_sm
    else:
        launch.rows_per_block = _rows_per_block(kernel, rows_per_block)
    return spb.SubmissionSpec(
        name=name,
        description=description or f"{kernel.language} kernel {kernel.name}",
        language=spb.SOURCE_LANGUAGE_PTX,
        source=kernel.ptx,
        launch_plan=spb.LaunchPlan(kernels=[launch]),
        dtype=names.parse(pb.DType, dtype, "dtype"),
        mode=names.parse(pb.Mode, mode, "mode"),
        target_arch=kernel.arch,
        device=device,
    )


def _value_text(source: int, int_value: int, float_value: float) -> str:
    value = spb.ParamSource.Name(source)[len("PARAM_SOURCE_"):].lower()
    if source == spb.PARAM_SOURCE_INT:
        value += f":{int_value}"
    elif source == spb.PARAM_SOURCE_FLOAT:
        value += f":{float_value!r}"
    return value


def arg_text(p: spb.KernelParam) -> str:
    """A binding as `kerneleval submit --arg` reads it: hidden, int:4, scratch:4096,
    struct(hidden_states,batch:i32,...)."""
    if p.source == spb.PARAM_SOURCE_STRUCT:
        fields = []
        for f in p.fields:
            text = _value_text(f.source, f.int_value, f.float_value)
            if f.bytes:
                kind = "f" if text.partition(":")[0] in FLOATS else "i"
                text += f":{kind}{f.bytes * 8}"
            fields.append(text)
        return f"struct({','.join(fields)})"  # no spaces: one shell word in a flags file
    value = _value_text(p.source, p.int_value, p.float_value)
    if p.source == spb.PARAM_SOURCE_SCRATCH:
        value += f":{p.scratch_bytes}"
    return value


def submit_flags(kernel: CompiledKernel, rows_per_block: Optional[int] = None) -> List[str]:
    """The `kerneleval submit` flags that register `kernel`'s PTX as `spec` would (after
    `--source FILE.ptx --name NAME --dtype ... --mode ...`): entry, block, grid, shared
    memory, PDL and one `--arg NAME=VALUE` per parameter."""
    flags = ["--entry", kernel.name, "--block", str(kernel.block_size),
             "--rows-per-block", str(_rows_per_block(kernel, rows_per_block))]
    if kernel.shared_bytes:
        flags += ["--smem", str(kernel.shared_bytes)]
    if kernel.launch_pdl:
        flags.append("--pdl")
    for p in kernel.params:
        flags += ["--arg", f"{p.name}={arg_text(p)}"]
    return flags


def server_arch(client: Any, device: str) -> str:
    """The arch of the server's GPU `device` (its first GPU where empty); sm_90a with none."""
    for d in client.devices():
        if d.kind == "cuda" and (not device or d.name == device):
            major = d.compute_capability.split(".")[0]
            return "sm_100a" if major == "10" else "sm_90a"
    return "sm_90a"


def register_and_rank(
    client: Any,
    submission_spec: spb.SubmissionSpec,
    suite: str,
    device: str,
    on_progress: Optional[Callable[[Any], None]],
    bench_args: Mapping[str, Any],
) -> Verdict:
    """Registers the spec and, with a `suite`, benchmarks it beside the device's built-ins,
    every call of each checked on the device (as `kerneleval submit --suite`)."""
    submission = client.register_submission(submission_spec)
    if not suite:
        return Verdict(submission)
    built_ins = [i.name for i in client.implementations(device)
                 if i.device_kind == "cuda" and not i.test_only]
    report = client.bench(suite, implementations=built_ins + [submission.id], device=device,
                          check_every_call=True, on_progress=on_progress, **bench_args)
    return Verdict(submission, report)

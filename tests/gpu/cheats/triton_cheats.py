"""Planted cheats written in Triton, for the same checks a struct-ABI cheat meets: each is a
fused add + RMSNorm that is honest on some calls or rows and not on others, registered from
its PTX with its own parameter list (kerneleval.triton). scripts/gpu-cheat-matrix.sh ranks
them beside the CUDA cheats; none may ever rank.

    python tests/gpu/cheats/triton_cheats.py --emit DIR

writes NAME_sm_90a.ptx and NAME.flags (the `kerneleval submit` flags) for each.

  triton_half_rows     computes the first half of the rows only (caught: every output
                       checked; the other rows stay poisoned).
  triton_call_counter  counts its calls in a scratch parameter and skips all but the first
                       and those from the 300th on (caught: the scratch is zeroed at every
                       module load, and every call of hot and graph replay is checked).
  triton_pdl_no_wait   launched with programmatic dependent launch and never waits for its
                       predecessor (caught at registration: the PDL rule reads the PTX).
"""

from __future__ import annotations

import argparse
import pathlib

import sys

import triton
import triton.language as tl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "examples" / "submissions"
                       / "triton"))
from add_rmsnorm import add_rmsnorm_row  # noqa: E402

BLOCK = 2048


@triton.jit
def _honest_row(x_ptr, residual_ptr, weight_ptr, out_ptr, row, stride, n_cols, eps,
                BLOCK: tl.constexpr):
    # The example's row (examples/submissions/triton), output only.
    add_rmsnorm_row(x_ptr, residual_ptr, weight_ptr, out_ptr, out_ptr, row, stride, n_cols, eps,
                    BLOCK, False)


@triton.jit
def triton_half_rows(x_ptr, residual_ptr, weight_ptr, out_ptr, stride, n_rows, n_cols, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if row < n_rows // 2:
        _honest_row(x_ptr, residual_ptr, weight_ptr, out_ptr, row, stride, n_cols, eps, BLOCK)


@triton.jit
def triton_call_counter(x_ptr, residual_ptr, weight_ptr, out_ptr, stride, n_rows, n_cols, eps,
                        counter_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    # counter_ptr[0]: programs done in this call; counter_ptr[1]: calls seen.
    call = tl.load(counter_ptr + 1, volatile=True)
    if (call == 0) | (call >= 300):
        _honest_row(x_ptr, residual_ptr, weight_ptr, out_ptr, row, stride, n_cols, eps, BLOCK)
    done = tl.atomic_add(counter_ptr, 1)
    if done == n_rows - 1:
        tl.store(counter_ptr, 0)
        tl.atomic_add(counter_ptr + 1, 1)


@triton.jit
def triton_pdl_no_wait(x_ptr, residual_ptr, weight_ptr, out_ptr, stride, n_cols, eps,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    _honest_row(x_ptr, residual_ptr, weight_ptr, out_ptr, row, stride, n_cols, eps, BLOCK)


# name -> (function, compile arguments for kerneleval.triton.compile)
CHEATS = {
    "triton_half_rows": (triton_half_rows, {}),
    "triton_call_counter": (triton_call_counter, {
        "bindings": {"counter_ptr": "scratch:16"}, "types": {"counter_ptr": "*i64"}}),
}
# Refused at registration, so never in a benchmark: compiled with launch_pdl.
PDL_NO_WAIT = (triton_pdl_no_wait, {})


def compile_cheat(name: str, arch: str = "sm_90a", launch_pdl: bool = False):
    import kerneleval.triton as kt  # noqa: PLC0415

    fn, extra = CHEATS[name] if name in CHEATS else PDL_NO_WAIT
    return kt.compile(fn, dtype="bf16", constexprs={"BLOCK": BLOCK}, num_warps=8, arch=arch,
                      launch_pdl=launch_pdl, **extra)


def main() -> None:
    import kerneleval.triton as kt  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emit", metavar="DIR", required=True)
    args = parser.parse_args()
    folder = pathlib.Path(args.emit)
    folder.mkdir(parents=True, exist_ok=True)
    for name in list(CHEATS) + ["triton_pdl_no_wait"]:
        kernel = compile_cheat(name, launch_pdl=name == "triton_pdl_no_wait")
        (folder / f"{name}_sm_90a.ptx").write_text(kernel.ptx)
        (folder / f"{name}.flags").write_text(" ".join(kt.submit_flags(kernel)) + "\n")


if __name__ == "__main__":
    main()

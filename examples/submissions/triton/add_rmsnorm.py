"""A fused add + RMSNorm in Triton, submitted as written: one program per row, the row in
registers, fp32 arithmetic, each output rounded once.

    python examples/submissions/triton/add_rmsnorm.py --server localhost:50051 \
        --suite fused_add_rmsnorm_h2048

compiles it here for the server's GPU (Triton needs no GPU for that), registers its PTX with
the parameter list bound by name, and ranks it beside the built-ins on the suite, every call
checked on the device. Needs `pip install triton kerneleval-client`.

    python examples/submissions/triton/add_rmsnorm.py --emit DIR

writes the PTX for sm_90a and sm_100a (add_rmsnorm_sm_90a.ptx, ...) and the `kerneleval
submit` flags that register it (add_rmsnorm.flags), for the CLI: `kerneleval submit --source
DIR/add_rmsnorm_sm_90a.ptx --name NAME --dtype bf16 $(cat DIR/add_rmsnorm.flags)`.
"""

from __future__ import annotations

import argparse

import triton
import triton.language as tl


@triton.jit
def add_rmsnorm(
    x_ptr,
    residual_ptr,
    weight_ptr,
    out_ptr,
    residual_out_ptr,
    stride,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
    STORE_RESIDUAL: tl.constexpr,
):
    add_rmsnorm_row(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr,
                    tl.program_id(0).to(tl.int64), stride, n_cols, eps, BLOCK, STORE_RESIDUAL)


@triton.jit
def add_rmsnorm_row(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, row, stride,
                    n_cols, eps, BLOCK: tl.constexpr, STORE_RESIDUAL: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(residual_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    s = x + r
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / n_cols + eps)
    tl.store(out_ptr + row * stride + cols, (s * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)
    if STORE_RESIDUAL:
        tl.store(residual_out_ptr + row * stride + cols,
                 s.to(residual_out_ptr.dtype.element_ty), mask=mask)


def main() -> None:
    # Here, not at the top: the kernel alone imports with Triton only (a GPU machine times it
    # with Triton's own launcher, scripts/triton_own_launch.py).
    import kerneleval  # noqa: PLC0415
    import kerneleval.triton  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    parser.add_argument("--suite", default="fused_add_rmsnorm_h2048")
    parser.add_argument("--hidden", type=int, default=2048, help="the suite's hidden size")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--mode", default="output")
    parser.add_argument("--num-warps", type=int, default=8)
    parser.add_argument("--name", default="triton_add_rmsnorm")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--emit", metavar="DIR", help="write PTX and CLI flags; no server")
    args = parser.parse_args()
    constexprs = {"BLOCK": triton.next_power_of_2(args.hidden),
                  "STORE_RESIDUAL": args.mode != "output"}
    if args.emit:
        import pathlib  # noqa: PLC0415

        folder = pathlib.Path(args.emit)
        folder.mkdir(parents=True, exist_ok=True)
        for arch in ("sm_90a", "sm_100a"):
            kernel = kerneleval.triton.compile(add_rmsnorm, dtype=args.dtype, constexprs=constexprs,
                                               num_warps=args.num_warps, arch=arch)
            (folder / f"add_rmsnorm_{arch}.ptx").write_text(kernel.ptx)
        (folder / "add_rmsnorm.flags").write_text(
            " ".join(kerneleval.triton.submit_flags(kernel)) + "\n")
        return
    with kerneleval.Client(args.server) as client:
        verdict = kerneleval.triton.submit(
            client, add_rmsnorm, name=args.name, constexprs=constexprs,
            num_warps=args.num_warps, dtype=args.dtype, mode=args.mode, suite=args.suite,
            repetitions=args.repetitions,
        )
        print(verdict.submission.id, verdict.submission.diagnostics.kernels[0].registers,
              "registers")
        print(verdict.report.to_pandas().to_string())


if __name__ == "__main__":
    main()

"""A fused add + RMSNorm in the CuTe DSL, submitted as written: a warp per row, each lane
striding over the row's columns, the sum of squares reduced across the warp with butterfly
shuffles, fp32 arithmetic, each output rounded once.

    python examples/submissions/cute/add_rmsnorm.py --server localhost:50051 \
        --suite fused_add_rmsnorm_h2048

compiles it here for the server's GPU (the CuTe DSL needs no GPU for that), registers its PTX
with each tensor bound as CuTe passes it (a struct of pointer, shape and row stride), and
ranks it beside the built-ins on the suite, every call checked on the device. Needs
`pip install nvidia-cutlass-dsl kerneleval-client`.

    python examples/submissions/cute/add_rmsnorm.py --emit DIR

writes the PTX for sm_90a (add_rmsnorm_sm_90a.ptx) and the `kerneleval submit` flags that
register it (add_rmsnorm.flags), for the CLI: `kerneleval submit --source
DIR/add_rmsnorm_sm_90a.ptx --name NAME --dtype bf16 $(cat DIR/add_rmsnorm.flags)`.
"""

from __future__ import annotations

import argparse

import cutlass
import cutlass.cute as cute
from cutlass import Float32

WARP = 32
WARPS_PER_CTA = 8


@cute.kernel
def add_rmsnorm(
    mX: cute.Tensor,
    mResidual: cute.Tensor,
    mWeight: cute.Tensor,
    mOut: cute.Tensor,
    mResidualOut: cute.Tensor,
    eps: Float32,
    STORE_RESIDUAL: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    rows, cols = mX.shape
    lane = tidx % WARP
    row = bidx * WARPS_PER_CTA + tidx // WARP
    if row < rows:
        # Pass 1: the sum of squares of x + residual (the row is read again in pass 2, from
        # L1/L2: the row length is a runtime value, so it is not held in registers).
        ss = Float32(0.0)
        for c in cutlass.range(lane, cols, WARP):
            s = mX[row, c].to(Float32) + mResidual[row, c].to(Float32)
            ss += s * s
        for i in cutlass.range_constexpr(5):
            ss += cute.arch.shuffle_sync_bfly(ss, offset=1 << i)
        rstd = cute.math.rsqrt(ss / cols.to(Float32) + eps)
        # Pass 2: normalize, scale, round once.
        for c in cutlass.range(lane, cols, WARP):
            s = mX[row, c].to(Float32) + mResidual[row, c].to(Float32)
            mOut[row, c] = (s * rstd * mWeight[c].to(Float32)).to(mOut.element_type)
            if cutlass.const_expr(STORE_RESIDUAL):
                mResidualOut[row, c] = s.to(mResidualOut.element_type)


def main() -> None:
    import kerneleval  # noqa: PLC0415
    import kerneleval.cute  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    parser.add_argument("--suite", default="fused_add_rmsnorm_h2048")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--mode", default="output")
    parser.add_argument("--name", default="cute_add_rmsnorm")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--emit", metavar="DIR", help="write PTX and CLI flags; no server")
    args = parser.parse_args()
    launch = {"threads": WARP * WARPS_PER_CTA,
              "constexprs": {"STORE_RESIDUAL": args.mode != "output"}}
    if args.emit:
        import pathlib  # noqa: PLC0415

        out = pathlib.Path(args.emit)
        out.mkdir(parents=True, exist_ok=True)
        kernel = kerneleval.cute.compile(add_rmsnorm, dtype=args.dtype, arch="sm_90a", **launch)
        (out / "add_rmsnorm_sm_90a.ptx").write_text(kernel.ptx)
        (out / "add_rmsnorm.flags").write_text(
            " ".join(kerneleval.cute.submit_flags(kernel, rows_per_block=WARPS_PER_CTA)) + "\n")
        return
    with kerneleval.Client(args.server) as client:
        verdict = kerneleval.cute.submit(
            client, add_rmsnorm, name=args.name, rows_per_block=WARPS_PER_CTA, dtype=args.dtype,
            mode=args.mode, suite=args.suite, repetitions=args.repetitions, **launch)
        print(verdict.submission.id, verdict.submission.diagnostics.kernels[0].registers,
              "registers")
        print(verdict.report.to_pandas().to_string())


if __name__ == "__main__":
    main()

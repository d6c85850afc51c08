"""A fused add + RMSNorm in TileLang, submitted as written: a block per row, each thread
loading 16-byte vectors of the row into registers, the sum of squares reduced across the
block, fp32 arithmetic, each output rounded once.

    python examples/submissions/tilelang/add_rmsnorm.py --server localhost:50051 \
        --suite fused_add_rmsnorm_h2048

compiles it here for the server's GPU (TileLang needs no GPU for that, only nvcc), registers
its PTX with each parameter bound by its name, and ranks it beside the built-ins on the
suite, every call checked on the device. Needs `pip install tilelang kerneleval-client`.

    python examples/submissions/tilelang/add_rmsnorm.py --emit DIR

writes the PTX for sm_90a (add_rmsnorm_sm_90a.ptx) and the `kerneleval submit` flags that
register it (add_rmsnorm.flags), for the CLI: `kerneleval submit --source
DIR/add_rmsnorm_sm_90a.ptx --name NAME --dtype bf16 $(cat DIR/add_rmsnorm.flags)`.

The hidden size is compiled in (TileLang sizes its register fragments statically): 2048 by
default, `--hidden` for another suite's.
"""


# No `from __future__ import annotations`: TileLang evaluates a prim_func's annotations
# (its shapes) in the function's scope.
import argparse

import tilelang.language as T

THREADS = 256


def make_add_rmsnorm(hidden: int = 2048, store_residual: bool = False, dtype: str = "bfloat16"):
    """The kernel for rows of `hidden` elements; with `store_residual`, it also writes the sum
    (the OUTPUT_AND_RESIDUAL mode)."""
    batch = T.dynamic("batch")
    f32 = "float32"

    @T.prim_func
    def add_rmsnorm(
        hidden_states: T.Tensor((batch, hidden), dtype),
        residual: T.Tensor((batch, hidden), dtype),
        weight: T.Tensor((hidden,), dtype),
        output: T.Tensor((batch, hidden), dtype),
        residual_out: T.Tensor((batch, hidden), dtype),
        eps: T.float32,
    ):
        with T.Kernel(batch, threads=THREADS) as row:
            x = T.alloc_fragment((1, hidden), dtype)
            r = T.alloc_fragment((1, hidden), dtype)
            w = T.alloc_fragment((hidden,), dtype)
            s = T.alloc_fragment((1, hidden), f32)
            squares = T.alloc_fragment((1, hidden), f32)
            sum_squares = T.alloc_fragment((1,), f32)
            out = T.alloc_fragment((1, hidden), dtype)
            T.copy(hidden_states[row, 0], x)
            T.copy(residual[row, 0], r)
            T.copy(weight, w)
            for i, j in T.Parallel(1, hidden):
                s[i, j] = T.cast(x[i, j], f32) + T.cast(r[i, j], f32)
                squares[i, j] = s[i, j] * s[i, j]
            if store_residual:
                for i, j in T.Parallel(1, hidden):
                    out[i, j] = T.cast(s[i, j], dtype)
                T.copy(out, residual_out[row, 0])
            T.reduce_sum(squares, sum_squares, dim=1)
            for i in T.Parallel(1):
                sum_squares[i] = T.rsqrt(sum_squares[i] / hidden + eps)
            for i, j in T.Parallel(1, hidden):
                out[i, j] = T.cast(s[i, j] * sum_squares[i] * T.cast(w[j], f32), dtype)
            T.copy(out, output[row, 0])

    return add_rmsnorm


def main() -> None:
    import kerneleval  # noqa: PLC0415
    import kerneleval.tilelang  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051")
    parser.add_argument("--suite", default="fused_add_rmsnorm_h2048")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--mode", default="output")
    parser.add_argument("--name", default="tilelang_add_rmsnorm")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--emit", metavar="DIR", help="write PTX and CLI flags; no server")
    args = parser.parse_args()
    kernel_fn = make_add_rmsnorm(args.hidden, store_residual=args.mode != "output")
    if args.emit:
        import pathlib  # noqa: PLC0415

        out = pathlib.Path(args.emit)
        out.mkdir(parents=True, exist_ok=True)
        kernel = kerneleval.tilelang.compile(kernel_fn, arch="sm_90a")
        (out / "add_rmsnorm_sm_90a.ptx").write_text(kernel.ptx)
        (out / "add_rmsnorm.flags").write_text(
            " ".join(kerneleval.tilelang.submit_flags(kernel)) + "\n")
        return
    with kerneleval.Client(args.server) as client:
        verdict = kerneleval.tilelang.submit(client, kernel_fn, name=args.name, mode=args.mode,
                                             suite=args.suite, repetitions=args.repetitions)
        print(verdict.submission.id, verdict.submission.diagnostics.kernels[0].registers,
              "registers")
        print(verdict.report.to_pandas().to_string())


if __name__ == "__main__":
    main()

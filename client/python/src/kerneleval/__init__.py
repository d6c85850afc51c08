"""Python client for kerneleval, the fused residual-add + RMSNorm evaluation service.

    import numpy as np, ml_dtypes
    from kerneleval import Client

    with Client("localhost:50051") as client:
        x = np.random.randn(79, 2048).astype(ml_dtypes.bfloat16)
        r = np.random.randn(79, 2048).astype(ml_dtypes.bfloat16)
        w = np.ones(2048, dtype=ml_dtypes.bfloat16)
        result = client.run(x, r, w, mode="output_and_residual")
        print(result.median_seconds, result.passed)

        report = client.bench("fused_add_rmsnorm_h2048")
        print(report.run_id, report.to_pandas())
        last_week = client.history(runs=True, suite=report.suite, until="2026-11-25")
        if client.compare(last_week.run_id[0], report.run_id).fails(["slower"]):
            raise SystemExit(1)

The generated stubs are `kerneleval.v1.kerneleval_pb2` and `kerneleval_pb2_grpc`.
"""

from kerneleval._client import Client, ProgressCallback, custom_suite
from kerneleval._errors import KernelEvalError
from kerneleval._report import BenchInterrupted, BenchReport, Row, RunResult
from kerneleval._store import Comparison, Reproduction

__all__ = [
    "BenchInterrupted",
    "BenchReport",
    "Client",
    "Comparison",
    "KernelEvalError",
    "ProgressCallback",
    "Reproduction",
    "Row",
    "RunResult",
    "custom_suite",
]
__version__ = "0.1.0"

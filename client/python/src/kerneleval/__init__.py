"""Python client for kerneleval, the fused residual-add + RMSNorm evaluation service.

    import numpy as np, ml_dtypes
    from kerneleval import Client

    with Client("localhost:50051") as client:
        x = np.random.randn(79, 2048).astype(ml_dtypes.bfloat16)
        r = np.random.randn(79, 2048).astype(ml_dtypes.bfloat16)
        w = np.ones(2048, dtype=ml_dtypes.bfloat16)
        result = client.run(x, r, w, mode="output_and_residual")
        print(result.median_seconds, result.passed)

The generated stubs are `kerneleval.v1.kerneleval_pb2` and `kerneleval_pb2_grpc`.
"""

from kerneleval._client import Client, ProgressCallback, custom_suite
from kerneleval._errors import KernelEvalError
from kerneleval._report import BenchReport, Row, RunResult

__all__ = [
    "BenchReport",
    "Client",
    "KernelEvalError",
    "ProgressCallback",
    "Row",
    "RunResult",
    "custom_suite",
]
__version__ = "0.1.0"

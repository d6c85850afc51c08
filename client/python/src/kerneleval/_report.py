"""Results as Python objects: one Run, and a Benchmark report with rows for tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from kerneleval import _names as names
from kerneleval.v1 import kerneleval_pb2 as pb

Row = Dict[str, Any]


@dataclass
class RunResult:
    """What one `Client.run` returned.

    `output` (and `residual_out` in the modes that write it) have the inputs' type: numpy
    arrays, or torch tensors on the inputs' device. In IN_PLACE mode they are the updated
    hidden_states and residual. Latencies are in seconds; `response` is the full
    kerneleval.v1.RunResponse.
    """

    output: Any
    residual_out: Optional[Any]
    device: str
    implementation: str
    timer: str
    median_seconds: float
    bytes_per_second: float
    sol_ratio: Optional[float]
    correctness: Optional[pb.Correctness]
    response: pb.RunResponse

    @property
    def passed(self) -> Optional[bool]:
        """The correctness verdict, or None when the run was not checked."""
        return None if self.correctness is None else self.correctness.passed


def result_row(r: pb.WorkloadResult) -> Row:
    preferred = names.preferred_sol(r.sol)
    sol = None if preferred is None else preferred.sol_ratio
    return {
        "workload": r.workload,
        **{f"axis.{k}": v for k, v in sorted(r.axes.items())},
        "implementation": r.implementation,
        "device": r.device,
        "status": names.name(pb.ResultStatus, r.status),
        "rank": r.rank or None,
        "median_us": r.latency.median_seconds * 1e6,
        "mean_us": r.latency.mean_seconds * 1e6,
        "min_us": r.latency.min_seconds * 1e6,
        "samples": r.latency.samples,
        "gb_per_s": r.bytes_per_second / 1e9,
        "sol_pct": None if sol is None else sol * 100,
        "passed": r.correctness.passed if r.correctness.checked else None,
        "max_abs_error": r.correctness.max_abs_error if r.correctness.checked else None,
        "timer": names.name(pb.Timer, r.timer),
        "measured_as": r.measured_as,
        "error": r.error or None,
    }


class BenchReport:
    """A finished Benchmark: `rows()` for tables, `to_pandas()` for analysis.

    `proto` is the full kerneleval.v1.BenchmarkReport (environments, protocol, summaries).
    """

    def __init__(self, proto: pb.BenchmarkReport) -> None:
        self.proto = proto

    @property
    def suite(self) -> str:
        return self.proto.suite

    @property
    def complete(self) -> bool:
        """False when the run was cut short (time cap, cancellation)."""
        return self.proto.complete

    @property
    def run_id(self) -> str:
        """The stored run this report became ("" when the server keeps no results store):
        the id `kerneleval history --runs`, `compare` and `export --run` take."""
        return self.proto.run_id

    def rows(self) -> List[Row]:
        """One dict per workload x implementation x device, in the server's order.

        Keys: workload, axis.<name> for each axis, implementation, device, status, rank
        (None when unranked), median_us / mean_us / min_us, samples, gb_per_s, sol_pct
        (against the first peak the server reports), passed, max_abs_error, timer,
        measured_as, error.
        """
        return [result_row(r) for r in self.proto.results]

    def summaries(self) -> List[Row]:
        """One dict per implementation x device: rank, mean latency, geomean SOL, passes."""
        return [
            {
                "implementation": s.implementation,
                "device": s.device,
                "rank": s.rank or None,
                "mean_latency_us": s.mean_latency_seconds * 1e6,
                "geomean_sol_pct": s.geomean_sol_ratio * 100,
                "vs_best": s.vs_best,
                "passed": s.passed,
                "failed": s.failed,
            }
            for s in self.proto.summaries
        ]

    def to_pandas(self) -> Any:
        """`rows()` as a pandas.DataFrame (pandas is optional: ImportError without it)."""
        try:
            import pandas as pd
        except ImportError as error:
            raise ImportError("BenchReport.to_pandas needs pandas: pip install pandas") from error
        return pd.DataFrame(self.rows())

    def __repr__(self) -> str:
        n = len(self.proto.results)
        return f"BenchReport(suite={self.suite!r}, results={n}, complete={self.complete})"

"""Results as Python objects: one Run, and a Benchmark report with rows for tables."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    # The verdict, as bench rows give it: "passed", "incorrect", "rejected" (an anti-cheat
    # check caught it: `error` says which), or "unchecked" (check=False, nothing caught).
    status: str = "unchecked"
    error: Optional[str] = None
    measured_as: str = ""
    integrity_flags: List[str] = field(default_factory=list)
    calls_checked: int = 0
    # Set when sol_ratio > 1: the figure is not a fraction of the DRAM roofline; the reason
    # says why (a working set that fits in cache, a peak measured below this rate).
    sol_above_peak: bool = False
    sol_above_peak_reason: Optional[str] = None

    @property
    def passed(self) -> Optional[bool]:
        """The correctness verdict, or None when the run was not checked."""
        return None if self.correctness is None else self.correctness.passed

    def profiles(self) -> List[Row]:
        """With `run(profile=True)`: one dict per kernel of the call, as
        `BenchReport.profiles()` gives them."""
        return profile_rows(self.response)

    def __str__(self) -> str:
        lines = [
            f"{self.implementation} on {self.device}: {self.status}"
            + (f" ({self.error})" if self.error else ""),
            f"  median {self.median_seconds * 1e6:.3f} us [{self.measured_as or self.timer}],"
            f" {self.bytes_per_second / 1e9:.2f} GB/s",
        ]
        if self.sol_ratio is not None:
            lines.append(f"  SOL {self.sol_ratio * 100:.1f} %")
            if self.sol_above_peak:
                lines.append(f"  above 100 %: {self.sol_above_peak_reason}")
        lines += [f"  FLAGGED: {flag}" for flag in self.integrity_flags]
        if self.calls_checked:
            lines.append(f"  calls checked: {self.calls_checked}")
        return "\n".join(lines)


def run_status(response: pb.RunResponse) -> str:
    """The verdict's name; a server that predates RunResponse.status sent only the check."""
    status = response.status
    if status == pb.RESULT_STATUS_UNSPECIFIED and response.correctness.checked:
        passed = response.correctness.passed
        status = pb.RESULT_STATUS_PASSED if passed else pb.RESULT_STATUS_INCORRECT
    if status == pb.RESULT_STATUS_UNSPECIFIED:
        return "unchecked"
    return names.name(pb.ResultStatus, status)


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
        "sol_above_peak": bool(preferred is not None and preferred.above_peak),
        "sol_above_peak_reason": (preferred.above_peak_reason or None)
        if preferred is not None and preferred.above_peak
        else None,
        "passed": r.correctness.passed if r.correctness.checked else None,
        "max_abs_error": r.correctness.max_abs_error if r.correctness.checked else None,
        "timer": names.name(pb.Timer, r.timer),
        "measured_as": r.measured_as,
        "integrity_flags": list(r.integrity_flags),
        "error": r.error or None,
    }


class BenchReport:
    """A finished Benchmark: `rows()` for tables, `to_pandas()` for analysis.

    `proto` is the full kerneleval.v1.BenchmarkReport (environments, protocol, summaries).
    """

    def __init__(self, proto: pb.BenchmarkReport) -> None:
        self.proto = proto
        # Set by `Client.bench(compare_to=...)`: the run against its baseline (a Comparison).
        self.comparison: Optional[Any] = None

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
        (against the device-attribute peak, else the first the server reports),
        sol_above_peak and sol_above_peak_reason (SOL over 100 %, and why), passed,
        max_abs_error, timer, measured_as, integrity_flags, error.
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
        return _frame(self.rows(), "BenchReport.to_pandas")

    def profiles(self) -> List[Row]:
        """With `profile=True`: one dict per kernel of each profiled result (docs/profile.md).

        Keys: workload, axis.<name>, implementation, device, kernel (its place in the call),
        name, grid, block, registers, the throughput shares (sm_pct, memory_pct, dram_pct,
        l2_pct, l1_pct), dram_read_mb, dram_write_mb, l2_hit_pct, load_sectors_per_request,
        store_sectors_per_request, dram_read_vs_declared, dram_vs_declared,
        theoretical_occupancy_pct,
        achieved_occupancy_pct, limited_by, waves, top_stall, top_stall_pct,
        arithmetic_intensity, bound, advice (the rules that fired). A result whose profile was
        unavailable gives one row with `unavailable` set to the reason.
        """
        return [row for r in self.proto.results for row in profile_rows(r)]

    def stalls(self) -> List[Row]:
        """Every warp stall reason of every profiled kernel: workload, implementation,
        kernel, reason, cycles_per_instruction, share_pct (the bars of a stall chart)."""
        return [
            {"workload": r.workload, "implementation": r.implementation, "device": r.device,
             "kernel": k.index, "reason": s.reason,
             "cycles_per_instruction": s.cycles_per_instruction, "share_pct": s.share_pct}
            for r in self.proto.results for k in r.profile.kernels for s in k.stalls
        ]

    def profiles_pandas(self) -> Any:
        """`profiles()` as a pandas.DataFrame."""
        return _frame(self.profiles(), "BenchReport.profiles_pandas")

    def source_lines(self) -> List[Row]:
        """Where each profiled kernel's warps were sampled, by source line (submissions):
        workload, implementation, kernel, file, line, samples, share_pct, and the line's top
        reason with its samples (top_reason, top_reason_samples)."""
        return [
            {"workload": r.workload, "implementation": r.implementation, "device": r.device,
             "kernel": k.index, "file": line.file, "line": line.line, "samples": line.samples,
             "share_pct": line.share_pct,
             "top_reason": line.reasons[0].reason if line.reasons else "",
             "top_reason_samples": line.reasons[0].samples if line.reasons else 0}
            for r in self.proto.results for k in r.profile.kernels
            for line in k.source_lines.lines
        ]

    def __repr__(self) -> str:
        n = len(self.proto.results)
        return (
            f"BenchReport(suite={self.suite!r}, results={n}, complete={self.complete},"
            f" run_id={self.run_id!r})"
        )


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C during `Client.bench`: the benchmark was cancelled on the server, which keeps
    the partial run. Still a KeyboardInterrupt, so code that does not catch it stops as before.

    Attributes:
        run_id: the stored partial run ("" when the server keeps no results store, or
            predates the started event and no workload had finished).
        partial: a BenchReport of the results that had arrived (complete=False).
    """

    def __init__(self, partial: BenchReport) -> None:
        run = partial.run_id
        super().__init__(
            f"benchmark cancelled; partial run stored as run {run}" if run else
            "benchmark cancelled; no run id (the server keeps no results store)"
        )
        self.partial = partial
        self.run_id = run


def _frame(rows: List[Row], who: str) -> Any:
    try:
        import pandas as pd
    except ImportError as error:
        raise ImportError(f"{who} needs pandas: pip install pandas") from error
    return pd.DataFrame(rows)


def profile_rows(r: Any) -> List[Row]:
    """The rows of `BenchReport.profiles()` for one WorkloadResult (or RunResponse)."""
    head: Row = {"workload": getattr(r, "workload", ""),
                 **{f"axis.{k}": v for k, v in getattr(r, "axes", {}).items()},
                 "implementation": r.implementation, "device": r.device}
    p = r.profile
    if not p.available:
        return [{**head, "unavailable": p.unavailable_reason}] if p.unavailable_reason else []
    rows = []
    for k in p.kernels:
        t, m, o, roof = k.throughput, k.memory, k.occupancy, k.roofline
        rows.append({
            **head,
            "kernel": k.index, "name": k.name,
            "grid": "x".join(map(str, k.launch.grid)),
            "block": "x".join(map(str, k.launch.block)),
            "registers": k.launch.registers_per_thread,
            "duration_us": k.duration_seconds * 1e6,
            "sm_pct": t.sm_pct, "memory_pct": t.memory_pct, "dram_pct": t.dram_pct,
            "l2_pct": t.l2_pct, "l1_pct": t.l1_pct,
            "dram_read_mb": m.dram_read_bytes / 1e6, "dram_write_mb": m.dram_write_bytes / 1e6,
            "l2_hit_pct": m.l2_hit_rate_pct,
            "load_sectors_per_request": m.load_sectors_per_request,
            "store_sectors_per_request": m.store_sectors_per_request,
            "dram_read_vs_declared": m.dram_read_vs_declared or None,
            "dram_vs_declared": m.dram_vs_declared or None,
            "theoretical_occupancy_pct": o.theoretical_pct,
            "achieved_occupancy_pct": o.achieved_pct,
            "limited_by": list(o.limited_by), "waves": o.waves,
            "top_stall": k.stalls[0].reason if k.stalls else None,
            "top_stall_pct": k.stalls[0].share_pct if k.stalls else None,
            "arithmetic_intensity": roof.arithmetic_intensity, "bound": roof.bound or None,
            "advice": [a.rule for a in k.advice],
            "unavailable": None,
        })
    return rows

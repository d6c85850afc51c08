"""The Benchmark RPC's stream of events, read into `Client.bench`'s report."""

from __future__ import annotations

from typing import Callable, Optional

import grpc

from kerneleval._errors import KernelEvalError
from kerneleval._report import BenchInterrupted, BenchReport
from kerneleval.v1 import kerneleval_pb2 as pb

ProgressCallback = Callable[[pb.BenchmarkProgress], None]
StartedCallback = Callable[[pb.BenchmarkStarted], None]


def read_report(
    stream: grpc.Call,
    bench_request: pb.BenchmarkRequest,
    on_started: Optional[StartedCallback],
    on_progress: Optional[ProgressCallback],
) -> BenchReport:
    """Reads the events of `stream` until its report, calling back on each started and
    progress event. Ctrl-C cancels the run and raises BenchInterrupted with what arrived."""
    report: Optional[pb.BenchmarkReport] = None
    # What has arrived, for Ctrl-C: the run id (first, in the started event) and results.
    partial = pb.BenchmarkReport(suite=bench_request.suite or bench_request.custom_suite.name)
    try:
        for event in stream:
            kind = event.WhichOneof("event")
            if kind == "started":
                partial.run_id = event.started.run_id or partial.run_id
                if on_started is not None:
                    on_started(event.started)
            elif kind == "progress":
                partial.run_id = event.progress.run_id or partial.run_id
                partial.results.extend(event.progress.results)
                if on_progress is not None:
                    on_progress(event.progress)
            elif kind == "report":
                report = event.report
            # Any other kind is newer than this client and carries nothing it needs.
    except grpc.RpcError as error:
        raise KernelEvalError.from_rpc_error(error) from None
    except KeyboardInterrupt:
        stream.cancel()  # the server stops and stores what was measured
        raise BenchInterrupted(BenchReport(partial)) from None
    if report is None:
        raise KernelEvalError(
            grpc.StatusCode.INTERNAL, "Benchmark: the stream ended without a report"
        )
    return BenchReport(report)

"""The kerneleval client: one channel, the KernelEval RPCs as Python methods."""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple, Union

import grpc
import pandas as pd

from kerneleval import _names as names
from kerneleval._benchmark import ProgressCallback, read_report
from kerneleval._errors import KernelEvalError, status_code
from kerneleval import _store as store
from kerneleval._report import BenchReport, RunResult, run_status
from kerneleval._store import Comparison, Reproduction, When
from kerneleval._tensors import ArrayLike, like, to_numpy, to_proto
from kerneleval.v1 import kerneleval_pb2 as pb
from kerneleval.v1 import kerneleval_pb2_grpc as pb_grpc
from kerneleval.v1 import queue_pb2 as qpb
from kerneleval.v1 import queue_pb2_grpc as qpb_grpc
from kerneleval.v1 import results_pb2 as rpb
from kerneleval.v1 import results_pb2_grpc as rpb_grpc
from kerneleval.v1 import submissions_pb2 as spb
from kerneleval.v1 import submissions_pb2_grpc as spb_grpc

# The server's default --max-message-bytes: three 66 MB tensors and their answer fit.
MAX_MESSAGE_BYTES = 512 * 1024 * 1024
# The columns of `Client.queue()`.
QUEUE_COLUMNS = (
    "run_id", "state", "position", "estimated_start_seconds", "suite", "device_kind",
    "priority", "worker", "attempts", "max_attempts", "message",
)


def custom_suite(
    name: str,
    batch_sizes: Sequence[int],
    hidden_size: int,
    dtype: str = "bf16",
    mode: str = "output",
    eps: float = 1e-6,
) -> pb.SuiteDefinition:
    """A suite definition to pass to `Client.bench`: one workload per batch size.

    `dtype` is "bf16", "fp16" or "fp32"; `mode` as in `Client.run`.
    """
    suite = pb.SuiteDefinition(
        name=name,
        dtype=names.parse(pb.DType, dtype, "dtype"),
        mode=names.parse(pb.Mode, mode, "mode"),
        eps=eps,
        axes=[
            pb.Axis(name="batch_size"),
            pb.Axis(name="hidden_size", is_const=True, value=hidden_size),
        ],
    )
    for b in batch_sizes:
        suite.workloads.add(name=f"batch_size={b}", axes={"batch_size": b})
    return suite



# A suite: a served suite's name, a definition (`custom_suite`), or a suite file's path.
SuiteArg = Union[str, pb.SuiteDefinition, "os.PathLike[str]"]


def _set_suite(request: pb.BenchmarkRequest, suite: SuiteArg) -> None:
    """Names the suite in `request`. A path (pathlib.Path, not a str: a str is a suite name)
    sends the file's text as `suite_json`, which the server parses with the rules of
    `kerneleval bench --suite-file`; its errors name the place in the file."""
    if isinstance(suite, str):
        request.suite = suite
    elif isinstance(suite, pb.SuiteDefinition):
        request.custom_suite.CopyFrom(suite)
    elif isinstance(suite, os.PathLike):
        try:
            with open(suite, encoding="utf-8") as file:
                request.suite_json = file.read()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"suite: cannot read {os.fspath(suite)!r}: {error}") from error
    else:
        raise TypeError(
            "suite: a suite name (str), a SuiteDefinition or a suite file's path "
            f"(pathlib.Path), not {type(suite).__name__}"
        )


def _priority(text: str) -> int:
    """A JobPriority by the name `kerneleval bench --priority` takes (its first value,
    waited_for, is the default rather than 'unspecified')."""
    table = {
        qpb.JobPriority.Name(v).removeprefix("JOB_PRIORITY_").lower(): v
        for v in qpb.JobPriority.values()
    }
    if text not in table:
        raise ValueError(f"priority: {text!r} is not one of {', '.join(table)}")
    return table[text]


def _bench_request(
    suite: SuiteArg,
    implementations: Iterable[str],
    device: str,
    all_devices: bool,
    warmup: Optional[int],
    repetitions: Optional[int],
    cache: str,
    cuda_graph: bool,
    rotate_inputs: bool,
    timer: Optional[str],
    seed: Optional[int],
    max_total_seconds: float,
) -> pb.BenchmarkRequest:
    """The BenchmarkRequest of `Client.bench` and `Client.enqueue` (the same arguments)."""
    protocol = pb.Protocol(
        cache=names.parse(pb.CacheMode, cache, "cache"),
        cuda_graph=cuda_graph,
        rotate_inputs=rotate_inputs,
        max_total_seconds=max_total_seconds,
    )
    if warmup is not None:
        protocol.warmup = warmup
    if repetitions is not None:
        protocol.repetitions = repetitions
    if timer is not None:
        protocol.timer = names.parse(pb.Timer, timer, "timer")
    if seed is not None:
        protocol.seed = seed
    request = pb.BenchmarkRequest(
        implementations=list(implementations),
        device=device,
        all_devices=all_devices,
        protocol=protocol,
    )
    _set_suite(request, suite)
    return request


class Client:
    """A connection to one kerneleval server.

    Args:
        target: "host:port".
        token: bearer token for a server started with --auth-token-file (sent on every call).
        tls: use TLS; `root_certificates` (PEM) verifies the server, else the system roots.
            `private_key` and `certificate_chain` (PEM) are the client's for mutual TLS.
        timeout: default deadline of each call in seconds (None: no deadline).

    Every method raises `KernelEvalError` (gRPC code and message) when the call fails.
    Thread-safe: calls may run concurrently from several threads. Use as a context manager
    or call `close()`.
    """

    def __init__(
        self,
        target: str,
        token: Optional[str] = None,
        tls: bool = False,
        root_certificates: Optional[bytes] = None,
        private_key: Optional[bytes] = None,
        certificate_chain: Optional[bytes] = None,
        timeout: Optional[float] = None,
    ) -> None:
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ]
        if tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates, private_key, certificate_chain
            )
            self._channel = grpc.secure_channel(target, credentials, options)
        else:
            self._channel = grpc.insecure_channel(target, options)
        self._stub = pb_grpc.KernelEvalStub(self._channel)
        self._submissions = spb_grpc.SubmissionsStub(self._channel)
        self._results = rpb_grpc.ResultsStub(self._channel)
        self._queue = qpb_grpc.QueueStub(self._channel)
        self._metadata: Tuple[Tuple[str, str], ...] = ()
        if token:
            self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Callable, request: object, timeout: Optional[float]):
        try:
            return method(request, timeout=timeout or self._timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise KernelEvalError.from_rpc_error(error) from None

    def run(
        self,
        hidden_states: ArrayLike,
        residual: ArrayLike,
        weight: ArrayLike,
        mode: str = "output",
        eps: Optional[float] = None,
        check: bool = True,
        device: str = "",
        implementation: str = "",
        warmup: int = 0,
        repetitions: int = 1,
        timer: Optional[str] = None,
        timeout: Optional[float] = None,
        profile: bool = False,
    ) -> RunResult:
        """Runs the operation once on these tensors (plus optional timed repetitions).

        Args:
            hidden_states, residual: [batch, hidden]; weight: [hidden]. One dtype for all
                three: numpy float32 / float16 / ml_dtypes.bfloat16, or torch tensors of
                float32 / float16 / bfloat16 (any device; they are copied to the host).
            mode: "output", "output_and_residual" or "in_place" (see kerneleval.proto).
            eps: None for the server's default (1e-6).
            check: compare the outputs with the server's fp64 reference (the default, as
                for `kerneleval run`; check=False is `--no-check`).
            device: "cpu", "cuda:0", ...; "" lets the server pick the least-loaded one.
            implementation: "" for the device's default; see `implementations()`.
            warmup, repetitions: untimed and timed calls on copies of the inputs.
            timer: "cupti", "cuda_events" or "host_clock"; None for the device's default.
            timeout: this call's deadline in seconds (default: the client's).
            profile: also profile the call's kernels (CUDA devices only): the result's
                `profiles()`.

        Returns:
            A RunResult whose outputs have the inputs' type (and device, for torch).
        """
        request = pb.RunRequest(
            hidden_states=to_proto(hidden_states, "hidden_states"),
            residual=to_proto(residual, "residual"),
            weight=to_proto(weight, "weight"),
            mode=names.parse(pb.Mode, mode, "mode"),
            device=device,
            implementation=implementation,
            check_correctness=check,
            warmup=warmup,
            repetitions=repetitions,
            profile=profile,
        )
        if eps is not None:
            request.eps = eps
        if timer is not None:
            request.timer = names.parse(pb.Timer, timer, "timer")
        response: pb.RunResponse = self._call(self._stub.Run, request, timeout)
        residual_out = None
        if response.HasField("residual_out"):
            residual_out = like(residual, to_numpy(response.residual_out))
        sol = names.preferred_sol(response.sol)
        return RunResult(
            output=like(hidden_states, to_numpy(response.output)),
            residual_out=residual_out,
            device=response.device,
            implementation=response.implementation,
            timer=names.name(pb.Timer, response.timer),
            median_seconds=response.latency.median_seconds,
            bytes_per_second=response.bytes_per_second,
            sol_ratio=None if sol is None else sol.sol_ratio,
            correctness=response.correctness if response.correctness.checked else None,
            response=response,
            status=run_status(response),
            error=response.error or None,
            measured_as=response.measured_as,
            integrity_flags=list(response.integrity_flags),
            calls_checked=response.calls_checked,
            sol_above_peak=bool(sol is not None and sol.above_peak),
            sol_above_peak_reason=(sol.above_peak_reason or None)
            if sol is not None and sol.above_peak
            else None,
        )

    def bench(
        self,
        suite: SuiteArg,
        implementations: Iterable[str] = (),
        device: str = "",
        all_devices: bool = False,
        warmup: Optional[int] = None,
        repetitions: Optional[int] = None,
        cache: str = "cold",
        cuda_graph: bool = False,
        rotate_inputs: bool = False,
        timer: Optional[str] = None,
        seed: Optional[int] = None,
        max_total_seconds: float = 0.0,
        on_progress: Optional[ProgressCallback] = None,
        timeout: Optional[float] = None,
        on_started: Optional[Callable[[pb.BenchmarkStarted], None]] = None,
        compare_to: str = "",
        threshold: float = 0.01,
        check_every_call: bool = False,
        profile: bool = False,
    ) -> BenchReport:
        """Runs a benchmark suite, calling `on_progress` once per workload as results stream in.

        Args:
            suite: a suite name (see `suites()`), a definition (e.g. `custom_suite(...)`), or
                a suite file's path as a `pathlib.Path` (the format of suites/README.md).
            implementations: which to compare; empty for every one of the device.
            device, all_devices: where to run ("" = least-loaded device).
            warmup, repetitions: None for the server's defaults (10 and 50).
            cache: "cold" (caches flushed before every timed call) or "hot".
            cuda_graph, rotate_inputs, timer, seed, max_total_seconds: see Protocol in
                kerneleval.proto.
            on_progress: called with each kerneleval.v1.BenchmarkProgress, in order.
            timeout: the whole run's deadline in seconds (default: the client's).
            on_started: called once with the kerneleval.v1.BenchmarkStarted event (the run
                id, the workload count, the devices) before any workload is measured.
            compare_to: after the run, compare it with this run id, or with "previous" (the
                newest complete run of the same suite content and protocol), as `kerneleval
                bench --compare-to`: the report's `comparison` (a `Comparison`; its
                `fails()` is the nightly gate) at `threshold`. "": no comparison.
            check_every_call: check every call of the built-ins on the device too, as a
                submission's always are (Protocol.check_every_call; CUDA devices only).
            profile: also profile each kernel in replays after the timed calls
                (Protocol.profile; CUDA devices only): `profiles()`, `stalls()`.

        Returns:
            The report: `rows()`, `summaries()`, `to_pandas()`, `profiles()`, and `proto`.

        Raises:
            BenchInterrupted (a KeyboardInterrupt) on Ctrl-C: the benchmark is cancelled on
            the server, which keeps the partial run; its `run_id` and `partial` report say
            which, even when no workload had finished.
        """
        request = _bench_request(
            suite, implementations, device, all_devices, warmup, repetitions, cache,
            cuda_graph, rotate_inputs, timer, seed, max_total_seconds,
        )
        request.protocol.check_every_call = check_every_call
        request.protocol.profile = profile
        stream = self._stub.Benchmark(
            request, timeout=timeout or self._timeout, metadata=self._metadata
        )
        report = read_report(stream, request, on_started, on_progress)
        if compare_to:
            if not report.run_id:
                raise ValueError("compare_to: the server keeps no results store; nothing to compare")
            self._wait_until_stored(report.run_id)
            report.comparison = self.compare(
                compare_to, report.run_id, threshold=threshold, timeout=timeout
            )
        return report

    def _wait_until_stored(self, run_id: str, seconds: float = 30.0) -> None:
        """The store writes a report on its own thread after the Benchmark answer: waits until
        history lists the run, as `kerneleval bench --compare-to` does."""
        give_up = time.monotonic() + seconds
        while len(self.history(runs=True, run_id=run_id)) == 0:
            if time.monotonic() > give_up:
                raise KernelEvalError(
                    grpc.StatusCode.DEADLINE_EXCEEDED, f"run {run_id} was not stored within 30 s"
                )
            time.sleep(0.1)

    def devices(self, timeout: Optional[float] = None) -> List[pb.Device]:
        """The server's devices (kerneleval.v1.Device: name, kind, model, peak bandwidth, ...)."""
        return list(self._call(self._stub.ListDevices, pb.ListDevicesRequest(), timeout).devices)

    def suites(self, timeout: Optional[float] = None) -> List[pb.SuiteDefinition]:
        """The suites the server loaded at start, with their workloads."""
        return list(self._call(self._stub.ListSuites, pb.ListSuitesRequest(), timeout).suites)

    def implementations(
        self, device: str = "", timeout: Optional[float] = None
    ) -> List[pb.Implementation]:
        """The implementations of one device, or of every device ("")."""
        request = pb.ListImplementationsRequest(device=device)
        return list(self._call(self._stub.ListImplementations, request, timeout).implementations)

    def register_submission(
        self, spec: spb.SubmissionSpec, timeout: Optional[float] = None
    ) -> spb.Submission:
        """Registers (compiles) a kernel; the same spec again returns the existing one.

        `spec` is a kerneleval.v1.SubmissionSpec (source, launch plan, dtype, mode, ...).
        The returned Submission carries the id and the compile diagnostics; its name can
        then be passed as `implementation=` to `run` and `bench`. Needs a server started
        with --submissions; INVALID_ARGUMENT names the field or the source line at fault.
        """
        request = spb.RegisterSubmissionRequest(submission=spec, compile_error_in_response=True)
        response = self._call(self._submissions.RegisterSubmission, request, timeout)
        if response.HasField("compile_error"):
            # The whole NVRTC log came in the body (a status message carries only its head).
            error = response.compile_error
            raise KernelEvalError(
                status_code(error.code),
                f"{error.message}\nNVRTC log:\n{error.diagnostics.log}",
                diagnostics=error.diagnostics,
            )
        return response.submission

    def submissions(self, timeout: Optional[float] = None) -> List[spb.Submission]:
        """The caller's submissions, by name (sources left out)."""
        request = spb.ListSubmissionsRequest()
        return list(self._call(self._submissions.ListSubmissions, request, timeout).submissions)

    def get_submission(self, submission: str, timeout: Optional[float] = None) -> spb.Submission:
        """One submission by id ("sub-...") or name, with its source."""
        request = spb.GetSubmissionRequest(submission=submission)
        return self._call(self._submissions.GetSubmission, request, timeout).submission

    def delete_submission(self, submission: str, timeout: Optional[float] = None) -> str:
        """Deletes a submission by id or name; returns its id."""
        request = spb.DeleteSubmissionRequest(submission=submission)
        return self._call(self._submissions.DeleteSubmission, request, timeout).id

    # The results store (kerneleval.v1.Results). Each method is one RPC, with the CLI verb's
    # defaults; tables are pandas DataFrames (kerneleval._store describes the columns).

    def history(
        self,
        suite: str = "",
        workload: str = "",
        implementation: str = "",
        device_model: str = "",
        run_id: str = "",
        since: When = None,
        until: When = None,
        limit: int = 50,
        page_token: str = "",
        runs: bool = False,
        include_samples: bool = False,
        complete: bool = False,
        timeout: Optional[float] = None,
        protocol: str = "",
    ) -> pd.DataFrame:
        """Stored results, newest first, as `kerneleval history`: one row per result, or
        with `runs=True` one row per run (run_id, time, suite, results, complete, ...).

        Filters: `suite`, `workload`, `implementation` (or a submission id), `device_model`
        (a substring: "H200"), `run_id` (a unique prefix is enough), `since` / `until`
        (Unix seconds, "YYYY-MM-DD", RFC 3339 text or datetime; until is exclusive).
        `protocol`: only results of that protocol, as leaderboards label it ("cold",
        "hot_graph", ...). `complete=True` (with runs): only runs that measured everything, as
        `history --runs --complete`; each run row carries its suite_hash and protocol.
        `limit` rows per page (max 1000); the DataFrame's attrs["next_page_token"] is the
        `page_token` of the next page ("" on the last). `include_samples` adds each result's
        raw samples as a `samples_seconds` column.
        """
        request = rpb.HistoryRequest(
            filter=store.result_filter(
                suite, workload, implementation, device_model, run_id, since, until, protocol
            ),
            page_size=limit,
            page_token=page_token,
            include_samples=include_samples,
            runs=runs,
            complete_only=complete,
        )
        response: rpb.HistoryResponse = self._call(self._results.History, request, timeout)
        if runs:
            rows = [store.run_row(r) for r in response.runs]
        else:
            rows = [store.stored_row(r) for r in response.results]
            if include_samples:
                for row, r in zip(rows, response.results):
                    row["samples_seconds"] = list(r.result.samples_seconds)
        table = store.frame(rows, store.history_columns(runs))
        table.attrs["next_page_token"] = response.next_page_token
        return table

    def leaderboard(
        self,
        suite: str,
        device_model: str = "",
        protocol: str = "",
        timeout: Optional[float] = None,
    ) -> pd.DataFrame:
        """The best passing run per implementation of `suite`, as `kerneleval leaderboard`.

        One protocol per board: `protocol` is its label ("cold", "hot_graph", ...; default
        that of the newest complete run); attrs["protocol"] names the one ranked and
        attrs["other_protocols"] the others this suite has boards for. Ranked by geomean
        SOL, or by mean latency when the runs' peaks differ within a device model:
        attrs["ranked_by_latency"] and attrs["peak_note"] say so.
        """
        request = rpb.LeaderboardRequest(
            suite=suite, device_model=device_model, protocol=protocol
        )
        response: rpb.LeaderboardResponse = self._call(
            self._results.Leaderboard, request, timeout
        )
        table = store.frame(
            [store.leaderboard_row(e) for e in response.entries], store.leaderboard_columns()
        )
        table.attrs["ranked_by_latency"] = response.ranked_by_latency
        table.attrs["peak_note"] = response.peak_note
        table.attrs["protocol"] = response.protocol
        table.attrs["other_protocols"] = list(response.other_protocols)
        return table

    def compare(
        self,
        baseline_run: str = "",
        candidate_run: str = "",
        implementation: str = "",
        suite: str = "",
        device_model: str = "",
        baseline_since: When = None,
        baseline_until: When = None,
        candidate_since: When = None,
        candidate_until: When = None,
        alpha: float = 0.05,
        threshold: float = 0.01,
        timeout: Optional[float] = None,
    ) -> Comparison:
        """Two runs, or one implementation of a suite across two time windows, workload by
        workload, as `kerneleval compare`.

        Give `baseline_run` and `candidate_run` (ids or unique prefixes; `baseline_run`
        "previous": the newest complete run before the candidate of the same suite content
        and protocol, the nightly gate's baseline), or
        `implementation` and `suite` (and `device_model`) with the windows. A change is
        called when Mann-Whitney U is significant at `alpha` and the 95 % interval of the
        ratio of medians lies beyond 1 +- max(`threshold`, the measured noise).
        `Comparison.fails()` is the CLI's gate: a row slower, not comparable or missing.
        """
        if bool(baseline_run) != bool(candidate_run):
            raise ValueError("compare: give both baseline_run and candidate_run, or neither")
        if baseline_run and implementation:
            raise ValueError("compare: implementation is for windows, not with two run ids")
        if not baseline_run and not (implementation and suite):
            raise ValueError(
                "compare: give two run ids, or implementation and suite with the two windows"
            )
        previous = baseline_run == "previous"
        request = rpb.CompareRequest(
            baseline_run="" if previous else baseline_run,
            baseline_previous=previous,
            candidate_run=candidate_run,
            implementation=implementation,
            suite=suite,
            device_model=device_model,
            alpha=alpha,
            min_relative_difference=threshold,
        )
        if not baseline_run:
            request.baseline_window.since_unix_seconds = store.unix_seconds(
                baseline_since, "baseline_since"
            )
            request.baseline_window.until_unix_seconds = store.unix_seconds(
                baseline_until, "baseline_until"
            )
            request.candidate_window.since_unix_seconds = store.unix_seconds(
                candidate_since, "candidate_since"
            )
            request.candidate_window.until_unix_seconds = store.unix_seconds(
                candidate_until, "candidate_until"
            )
        return Comparison(self._call(self._results.Compare, request, timeout))

    def reproduce(
        self,
        result_id: str,
        device: str = "",
        alpha: float = 0.05,
        timeout: Optional[float] = None,
    ) -> Reproduction:
        """Re-runs a stored result's receipt on this server and compares, as
        `kerneleval reproduce`. `device` "" is the least-loaded one."""
        request = rpb.ReproduceRequest(result_id=result_id, device=device, alpha=alpha)
        return Reproduction(self._call(self._results.Reproduce, request, timeout))

    def export(
        self,
        suite: str = "",
        workload: str = "",
        implementation: str = "",
        device_model: str = "",
        run_id: str = "",
        since: When = None,
        until: When = None,
        format: str = "jsonl",
        limit: int = 1000,
        raw: bool = False,
        timeout: Optional[float] = None,
        protocol: str = "",
    ) -> Any:
        """Stored results in the server's export schema, as `kerneleval export`.

        `format` "jsonl" and "csv" (one flat row per result, the same columns) come back as
        a DataFrame, "trace" (FlashInfer-Bench traces) as a list of dicts; `raw=True` gives
        the text itself; `protocol` filters as in `history`. At most `limit` rows (max
        100000), the newest: when more matched,
        a warning says so and the DataFrame's attrs["truncated"] is True.
        """
        if format not in store.EXPORT_FORMATS:
            raise ValueError(f"format: {format!r} is not one of jsonl, csv, trace")
        request = rpb.ExportRequest(
            filter=store.result_filter(
                suite, workload, implementation, device_model, run_id, since, until, protocol
            ),
            format=store.EXPORT_FORMATS[format],
            limit=limit,
        )
        response: rpb.ExportResponse = self._call(self._results.Export, request, timeout)
        if response.truncated:
            warnings.warn(
                f"export: truncated: more results match than limit={limit}; "
                f"the newest {response.rows} are exported",
                stacklevel=2,
            )
        if raw:
            return response.data
        table = store.parse_export(response.data, format)
        if isinstance(table, pd.DataFrame):
            table.attrs["truncated"] = response.truncated
        return table

    def enqueue(
        self,
        suite: SuiteArg,
        implementations: Iterable[str] = (),
        device: str = "",
        all_devices: bool = False,
        warmup: Optional[int] = None,
        repetitions: Optional[int] = None,
        cache: str = "cold",
        cuda_graph: bool = False,
        rotate_inputs: bool = False,
        timer: Optional[str] = None,
        seed: Optional[int] = None,
        max_total_seconds: float = 0.0,
        priority: str = "waited_for",
        runs_on: str = "",
        timeout: Optional[float] = None,
    ) -> qpb.Job:
        """Queues a benchmark for any server of the fleet to run, as `kerneleval bench
        --detach`, and returns at once: the kerneleval.v1.Job with its `run_id` and
        `position`. The arguments are `bench`'s; `priority` is "waited_for", "scheduled" or
        "reproduction"; `runs_on` which servers may claim it: "cpu", "cuda" or "cuda:sm_XY"
        (a GPU architecture), optionally followed by "@NODE" (empty: the server decides)."""
        request = qpb.EnqueueRequest(
            benchmark=_bench_request(
                suite, implementations, device, all_devices, warmup, repetitions, cache,
                cuda_graph, rotate_inputs, timer, seed, max_total_seconds,
            ),
            priority=_priority(priority),
            runs_on=runs_on,
        )
        return self._call(self._queue.Enqueue, request, timeout)

    def watch(
        self,
        run_id: str,
        on_job: Optional[Callable[[qpb.Job], None]] = None,
        timeout: Optional[float] = None,
    ) -> qpb.Job:
        """Follows a queued job until it ends, as `kerneleval watch`: `on_job` is called with
        each state the server sends; returns the last (DONE, FAILED or CANCELLED). Its results
        are then in `history(run_id=...)`."""
        last = qpb.Job()
        try:
            for job in self._queue.Watch(
                qpb.WatchJobRequest(run_id=run_id),
                timeout=timeout or self._timeout,
                metadata=self._metadata,
            ):
                last = job
                if on_job is not None:
                    on_job(job)
        except grpc.RpcError as error:
            raise KernelEvalError.from_rpc_error(error) from None
        return last

    def cancel(self, run_id: str, timeout: Optional[float] = None) -> qpb.Job:
        """Cancels a queued or running job of the caller's, as `kerneleval cancel`."""
        return self._call(self._queue.Cancel, qpb.CancelJobRequest(run_id=run_id), timeout)

    def queue(
        self,
        ended_within_seconds: int = 3600,
        limit: int = 100,
        timeout: Optional[float] = None,
    ) -> pd.DataFrame:
        """The caller's queued and running jobs (and those that ended within
        `ended_within_seconds`), one row per job, as `kerneleval queue`; attrs
        "queued_total" and "running_total" count every owner's."""
        request = qpb.ListJobsRequest(ended_within_seconds=ended_within_seconds, limit=limit)
        response: qpb.ListJobsResponse = self._call(self._queue.List, request, timeout)
        rows = [
            {
                "run_id": job.run_id,
                "state": names.name(qpb.JobState, job.state),
                "position": job.position,
                "estimated_start_seconds": job.estimated_start_seconds,
                "suite": job.suite,
                "device_kind": job.device_kind,
                "priority": qpb.JobPriority.Name(job.priority)
                .removeprefix("JOB_PRIORITY_")
                .lower(),
                "worker": job.worker,
                "attempts": job.attempts,
                "max_attempts": job.max_attempts,
                "message": job.message,
            }
            for job in response.jobs
        ]
        table = pd.DataFrame(rows, columns=QUEUE_COLUMNS)
        table.attrs["queued_total"] = response.queued_total
        table.attrs["running_total"] = response.running_total
        return table

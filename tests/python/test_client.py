"""The Python client (client/python, installed with pip) against a real server on loopback."""

from __future__ import annotations

import re
import signal
import threading
import time
from typing import List

import grpc
import numpy as np
import pytest

import kerneleval
from kerneleval.v1 import kerneleval_pb2 as pb
from kerneleval.v1 import submissions_pb2 as spb
from server_process import start_server
from oracle import DTYPES, assert_close, inputs, reference

MODES = ["output", "output_and_residual", "in_place"]


@pytest.fixture(scope="module")
def client(server):
    with kerneleval.Client(server.target, timeout=120) as c:
        yield c


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_run_matches_fp64_reference(client, dtype, mode):
    x, r, w = inputs(5, 257, dtype)
    x_before, r_before = x.copy(), r.copy()
    eps = 1e-5
    result = client.run(x, r, w, mode=mode, eps=eps, check=True, device="cpu")
    out_ref, s_ref = reference(x, r, w, eps)
    assert_close(result.output, out_ref, dtype, "output")
    if mode == "output":
        assert result.residual_out is None
    else:
        assert_close(result.residual_out, s_ref, dtype, "residual_out")
    # The caller's arrays are never written, in place or not: the server works on copies.
    assert np.array_equal(x.view(np.uint8), x_before.view(np.uint8))
    assert np.array_equal(r.view(np.uint8), r_before.view(np.uint8))
    assert result.passed is True
    assert result.device == "cpu"
    assert result.timer == "host_clock"
    assert result.median_seconds > 0
    assert result.bytes_per_second > 0


def test_run_repetitions_and_implementation(client):
    x, r, w = inputs(3, 64, "fp32")
    result = client.run(x, r, w, check=False, implementation="cpu_fused", warmup=1, repetitions=5)
    assert result.implementation == "cpu_fused"
    assert result.response.latency.samples == 5
    assert result.passed is None  # not checked
    assert_close(result.output, reference(x, r, w)[0], "fp32", "output")


def test_run_torch_tensors(client):
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 96, dtype=torch.bfloat16)
    r = torch.randn(4, 96, dtype=torch.bfloat16)
    w = torch.ones(96, dtype=torch.bfloat16)
    result = client.run(x, r, w, mode="output_and_residual")
    assert isinstance(result.output, torch.Tensor) and result.output.dtype == torch.bfloat16
    ref, s = reference(x.float().numpy(), r.float().numpy(), w.float().numpy())
    assert_close(
        result.output.view(torch.int16).numpy().view(DTYPES["bf16"]), ref, "bf16", "output"
    )


def test_bench_custom_suite_streams_progress(client):
    suite = kerneleval.custom_suite(
        "py_small", batch_sizes=[1, 7, 33], hidden_size=128, dtype="fp32"
    )
    progress: List[pb.BenchmarkProgress] = []
    report = client.bench(suite, device="cpu", warmup=1, repetitions=3, on_progress=progress.append)
    assert [p.workload_index for p in progress] == [0, 1, 2]
    assert all(p.workload_count == 3 for p in progress)
    assert report.complete
    rows = report.rows()
    impls = {i.name for i in client.implementations("cpu") if not i.test_only}
    assert len(rows) == 3 * len(impls)
    assert {row["implementation"] for row in rows} == impls
    assert {row["axis.batch_size"] for row in rows} == {1, 7, 33}
    for row in rows:
        assert row["status"] == "passed", row
        assert row["passed"] is True
        assert row["samples"] == 3
        assert row["median_us"] > 0 and row["gb_per_s"] > 0
    assert {s["implementation"] for s in report.summaries()} == impls


def test_bench_report_names_its_stored_run(client):
    suite = kerneleval.custom_suite("py_run_id", batch_sizes=[1, 5], hidden_size=64, dtype="fp32")
    progress: List[pb.BenchmarkProgress] = []
    first = client.bench(suite, device="cpu", warmup=0, repetitions=2, on_progress=progress.append)
    second = client.bench(suite, device="cpu", warmup=0, repetitions=2)
    # 128 random bits in hex, known from the first progress event on, new for every bench.
    assert re.fullmatch(r"[0-9a-f]{32}", first.run_id), first.run_id
    assert [p.run_id for p in progress] == [first.run_id] * 2
    assert second.run_id != first.run_id and len(second.run_id) == 32


SUITE_FILE = {
    "name": "py_suite_file",
    "op_type": "fused_add_rmsnorm",
    "description": "two workloads from a file",
    "mode": "output_and_residual",
    "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 96}},
    "inputs": {
        "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
        "residual": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
        "weight": {"shape": ["hidden_size"], "dtype": "float32"},
    },
    "outputs": {
        "output": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
        "residual_out": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
    },
    "workloads": [{"name": "two", "axes": {"batch_size": 2}}, {"axes": {"batch_size": 9}}],
}


def test_bench_suite_file(client, tmp_path):
    """A suite file's path is sent as its text and parsed by the server, as --suite-file."""
    import json
    import pathlib

    path = tmp_path / "py_suite_file.json"
    path.write_text(json.dumps(SUITE_FILE), encoding="utf-8")
    report = client.bench(pathlib.Path(path), device="cpu", warmup=0, repetitions=2)
    assert report.proto.suite == "py_suite_file"
    assert report.complete
    rows = report.rows()
    assert {row["workload"] for row in rows} >= {"two"}
    assert {row["axis.batch_size"] for row in rows} == {2, 9}
    assert report.proto.definition.description == "two workloads from a file"
    for row in rows:
        assert row["status"] == "passed" and row["passed"] is True, row


def test_bench_suite_file_errors_name_the_place(client, tmp_path):
    import json
    import pathlib

    broken = json.loads(json.dumps(SUITE_FILE))
    broken["workloads"][1]["axes"] = {"batch_size": -3}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.bench(pathlib.Path(path), device="cpu")
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "suite_json" in error.value.details and "workloads[1]" in error.value.details, (
        error.value.details
    )
    path.write_text("{ not json", encoding="utf-8")
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.bench(pathlib.Path(path), device="cpu")
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.details.startswith("suite_json: "), error.value.details
    with pytest.raises(ValueError, match="cannot read"):
        client.bench(pathlib.Path(tmp_path / "missing.json"), device="cpu")


def test_bench_named_suite_rejects_unknown(client):
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.bench("no_such_suite")
    assert error.value.code == grpc.StatusCode.NOT_FOUND


def test_to_pandas(client):
    pd = pytest.importorskip("pandas")
    suite = kerneleval.custom_suite("py_pandas", batch_sizes=[2], hidden_size=64)
    frame = client.bench(suite, device="cpu", warmup=0, repetitions=2).to_pandas()
    assert isinstance(frame, pd.DataFrame) and len(frame) >= 1


def test_a_profile_is_refused_on_the_cpu_by_name(client):
    suite = kerneleval.custom_suite("py_profile", batch_sizes=[2], hidden_size=64)
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.bench(suite, device="cpu", warmup=0, repetitions=2, profile=True)
    assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "protocol.profile" in error.value.details


def test_profile_rows_are_one_per_kernel():
    report = pb.BenchmarkReport()
    r = report.results.add(workload="b2", implementation="impl", device="cuda:0")
    r.axes["batch"] = 2
    k = r.profile.kernels.add(index=0, name="void add_rmsnorm<bf16>(...)")
    r.profile.available = True
    k.launch.grid.extend([132, 1, 1])
    k.launch.block.extend([256, 1, 1])
    k.throughput.dram_pct = 81.5
    k.memory.dram_read_vs_declared = 0.5
    k.occupancy.limited_by.append("registers")
    k.stalls.add(reason="long_scoreboard", cycles_per_instruction=7.0, share_pct=60.0)
    k.advice.add(rule="at_memory_roof", text="...", figure="throughput.dram_pct", value=81.5)
    unavailable = report.results.add(workload="b2", implementation="other", device="cuda:0")
    unavailable.profile.unavailable_reason = "counters unavailable on this machine: no access"
    rows = kerneleval.BenchReport(report).profiles()
    assert len(rows) == 2
    assert rows[0]["grid"] == "132x1x1" and rows[0]["axis.batch"] == 2
    assert rows[0]["top_stall"] == "long_scoreboard" and rows[0]["advice"] == ["at_memory_roof"]
    assert rows[0]["dram_read_vs_declared"] == 0.5
    assert rows[1]["unavailable"].startswith("counters unavailable")
    stalls = kerneleval.BenchReport(report).stalls()
    assert [s["reason"] for s in stalls] == ["long_scoreboard"]
    k.source_lines.available = True
    line = k.source_lines.lines.add(file="submission.cu", line=14, samples=380, share_pct=38.0)
    line.reasons.add(reason="long_scoreboard", samples=300)
    line.reasons.add(reason="selected", samples=60)
    lines = kerneleval.BenchReport(report).source_lines()
    assert lines == [{"workload": "b2", "implementation": "impl", "device": "cuda:0", "kernel": 0,
                      "file": "submission.cu", "line": 14, "samples": 380, "share_pct": 38.0,
                      "top_reason": "long_scoreboard", "top_reason_samples": 300}]


def test_listings(client):
    devices = client.devices()
    assert [d.name for d in devices] == ["cpu"] and devices[0].kind == "cpu"
    names = [i.name for i in client.implementations()]
    assert "cpu_fused" in names
    assert "fused_add_rmsnorm_h2048" in [s.name for s in client.suites()]


def test_errors_carry_code_and_field(client):
    x, r, w = inputs(3, 8, "fp32")
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.run(x, r[:, :7], w)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.details.startswith("residual.shape"), error.value.details
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.run(x, r, w, implementation="no_such_impl")
    assert error.value.code == grpc.StatusCode.NOT_FOUND
    assert "implementation" in error.value.details
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.run(x, r, w, device="cuda:7")
    assert error.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.run(x, r, w, eps=-1.0)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT and "eps" in error.value.details
    with pytest.raises(TypeError, match="hidden_states"):
        client.run(x.astype(np.float64), r, w)
    with pytest.raises(ValueError, match="mode"):
        client.run(x, r, w, mode="sideways")


def test_token(token_server):
    x, r, w = inputs(2, 16, "fp16")
    with kerneleval.Client(token_server.target) as anonymous:
        with pytest.raises(kerneleval.KernelEvalError) as error:
            anonymous.devices()
        assert error.value.code == grpc.StatusCode.UNAUTHENTICATED
    with kerneleval.Client(token_server.target, token="wrong") as wrong:
        with pytest.raises(kerneleval.KernelEvalError) as error:
            wrong.run(x, r, w)
        assert error.value.code == grpc.StatusCode.PERMISSION_DENIED
    with kerneleval.Client(token_server.target, token=token_server.token) as good:
        assert_close(good.run(x, r, w).output, reference(x, r, w)[0], "fp16", "output")


def test_submission_calls(client, tmp_path):
    # Registering compiles with NVRTC (a CUDA build); listing and look-ups work anywhere.
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.submissions()
    assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION  # served without --submissions
    assert "--submissions" in error.value.details
    s = start_server(tmp_path, extra=["--submissions"])
    try:
        with kerneleval.Client(s.target, timeout=60) as c:
            assert c.submissions() == []
            with pytest.raises(kerneleval.KernelEvalError) as error:
                c.get_submission("sub-000000000000000000000000")
            assert error.value.code == grpc.StatusCode.NOT_FOUND
            with pytest.raises(kerneleval.KernelEvalError) as error:
                c.delete_submission("nothing")
            assert error.value.code == grpc.StatusCode.NOT_FOUND
            spec = spb.SubmissionSpec(name="x" * 10000, source="__global__ void k() {}")
            with pytest.raises(kerneleval.KernelEvalError) as error:
                c.register_submission(spec)
            assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert "submission.name" in error.value.details
    finally:
        s.stop()


def test_run_carries_its_verdict(client):
    x, r, w = inputs(3, 64, "fp32")
    checked = client.run(x, r, w, device="cpu", implementation="cpu_fused", repetitions=3)
    assert checked.status == "passed" and checked.passed is True
    assert checked.response.status == pb.RESULT_STATUS_PASSED
    assert checked.measured_as == "host_clock, hot"
    assert checked.integrity_flags == [] and checked.calls_checked == 0
    assert checked.error is None
    assert str(checked).startswith("cpu_fused on cpu: passed")
    assert "[host_clock, hot]" in str(checked)
    unchecked = client.run(x, r, w, check=False, device="cpu")
    assert unchecked.status == "unchecked" and unchecked.passed is None
    assert unchecked.response.status == pb.RESULT_STATUS_UNSPECIFIED


# fp32 shapes in the last-level cache of any server CPU, long enough that the timer does not
# hide the cache's speed (as tests/integration/sol_above_peak_test.cc): a hot Run of one
# beats the DRAM copy peak the CPU server measured at start.
IN_CACHE = [(4, 4096), (64, 8192), (16, 8192), (64, 4096)]


def test_sol_above_peak_is_flagged_with_its_reason(client):
    above = None
    for _ in range(3):
        for batch, hidden in IN_CACHE:
            x, r, w = inputs(batch, hidden, "fp32")
            result = client.run(x, r, w, device="cpu", check=False, warmup=20, repetitions=100)
            assert result.sol_above_peak == (result.sol_ratio > 1), result.response.sol
            if result.sol_above_peak:
                above = result
                break
            assert result.sol_above_peak_reason is None
        if above is not None:
            break
    assert above is not None, "SOL stayed at or below 100 % in cache"
    reason = above.sol_above_peak_reason
    assert reason and reason == above.response.sol[0].above_peak_reason
    assert re.match(r"(working set .* fits in the|peak measured at start)", reason), reason
    assert f"above 100 %: {reason}" in str(above)

    # The bench rows (and so the DataFrame) carry the flag and the reason on every row.
    suite = kerneleval.custom_suite("py_in_cache", batch_sizes=[4, 16], hidden_size=8192)
    report = client.bench(
        suite, device="cpu", implementations=["cpu_fused"], cache="hot", warmup=20,
        repetitions=100,
    )
    frame = report.to_pandas()
    assert {"sol_above_peak", "sol_above_peak_reason"} <= set(frame.columns)
    for row in report.rows():
        assert row["sol_above_peak"] == (row["sol_pct"] > 100), row
        assert (row["sol_above_peak_reason"] is not None) == row["sol_above_peak"], row


def stored_run(client, run_id: str):
    """The run's row in history once the store has written it (a cancelled run is stored
    once its job has stopped between samples: generous, the machine may be busy)."""
    for _ in range(600):
        runs = client.history(runs=True, run_id=run_id)
        if len(runs):
            return runs
        time.sleep(0.1)
    return runs


def test_ctrl_c_during_the_first_workload_names_the_partial_run(client):
    # One workload of 4096 cold calls on 4 MiB tensors: seconds, interrupted at its start.
    suite = kerneleval.custom_suite("py_ctrl_c", batch_sizes=[256, 257], hidden_size=4096,
                                    dtype="fp32")
    started: List[pb.BenchmarkStarted] = []

    def ctrl_c(event: pb.BenchmarkStarted) -> None:
        started.append(event)
        signal.raise_signal(signal.SIGINT)  # as a terminal's Ctrl-C: KeyboardInterrupt here

    with pytest.raises(kerneleval.BenchInterrupted) as interrupted:
        client.bench(suite, device="cpu", implementations=["cpu_fused"], warmup=0,
                     repetitions=4096, on_started=ctrl_c)
    assert isinstance(interrupted.value, KeyboardInterrupt)
    assert len(started) == 1 and started[0].workload_count == 2
    assert list(started[0].devices) == ["cpu"]
    run_id = interrupted.value.run_id
    assert re.fullmatch(r"[0-9a-f]{32}", run_id) and run_id == started[0].run_id
    assert interrupted.value.partial.run_id == run_id
    assert interrupted.value.partial.rows() == []  # no workload had finished
    # The server stopped and kept the partial run under that id, cut short.
    runs = stored_run(client, run_id)
    assert list(runs.run_id) == [run_id]
    assert not runs.complete.iloc[0]


def test_a_run_cancelled_while_queued_behind_another_is_still_kept(client):
    """The run id a client learns at once (BenchmarkStarted) resolves even when it went away
    before the device took its job: the store keeps the run, cut short, its workload
    skipped."""
    busy = kerneleval.custom_suite("py_busy", batch_sizes=[256], hidden_size=4096, dtype="fp32")
    waiting = kerneleval.custom_suite("py_queued", batch_sizes=[4], hidden_size=64, dtype="fp32")
    first_started = threading.Event()
    first = {}

    def occupy() -> None:
        first["report"] = client.bench(
            busy, device="cpu", implementations=["cpu_fused"], warmup=0, repetitions=3000,
            on_started=lambda _: first_started.set(),
        )

    thread = threading.Thread(target=occupy)
    thread.start()
    try:
        assert first_started.wait(60)
        time.sleep(1.0)  # the first job is on the device; the next one waits behind it

        def ctrl_c(event: pb.BenchmarkStarted) -> None:
            signal.raise_signal(signal.SIGINT)

        with pytest.raises(kerneleval.BenchInterrupted) as interrupted:
            client.bench(waiting, device="cpu", implementations=["cpu_fused"], warmup=0,
                         repetitions=5, on_started=ctrl_c)
        run_id = interrupted.value.run_id
    finally:
        thread.join(300)
    assert "report" in first and first["report"].complete
    runs = stored_run(client, run_id)
    assert list(runs.run_id) == [run_id]
    assert not runs.complete.iloc[0]
    # Its one workload stopped before it started, as a cancelled run's are.
    results = client.history(run_id=run_id)
    assert list(results.status) == ["skipped"], results

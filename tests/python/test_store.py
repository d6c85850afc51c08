"""The Python client's store verbs (history, compare, leaderboard, export, reproduce) against
a real server on loopback: each a Results RPC with the CLI verb's defaults, tables as pandas
DataFrames; and the package built with its stubs outside the source tree."""

from __future__ import annotations

import inspect
import pathlib
import time
import warnings

import grpc
import numpy as np
import pandas as pd
import pytest

import kerneleval

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERDICTS = {"same", "faster", "slower", "inconclusive", "incomparable", "noisy"}
SUITE = "py_store"


@pytest.fixture(scope="module")
def client(server):
    with kerneleval.Client(server.target, timeout=120) as c:
        yield c


def stored(client, run_id: str, count: int) -> pd.DataFrame:
    """The store writes a run after Benchmark answers: polls history until it is there."""
    for _ in range(100):
        table = client.history(run_id=run_id)
        if len(table) >= count:
            return table
        time.sleep(0.1)
    pytest.fail(f"run {run_id} has {len(table)} of {count} results in history after 10 s")


@pytest.fixture(scope="module")
def runs(client):
    """Two runs of one two-workload suite, two implementations each, stored."""
    suite = kerneleval.custom_suite(SUITE, [1, 257], 64, dtype="fp32")
    reports = [
        client.bench(
            suite, implementations=["cpu_fused", "cpu_unfused"], device="cpu", warmup=1,
            repetitions=8,
        )
        for _ in range(2)
    ]
    for r in reports:
        assert r.run_id, "a server with a store names the run every bench became"
        stored(client, r.run_id, 4)
    return reports


def test_history_rows_are_the_runs_results(client, runs):
    table = client.history(run_id=runs[0].run_id)
    assert isinstance(table, pd.DataFrame)
    assert len(table) == 4
    assert set(table.run_id) == {runs[0].run_id}
    assert sorted(set(table.workload)) == ["batch_size=1", "batch_size=257"]
    assert set(table.implementation) == {"cpu_fused", "cpu_unfused"}
    assert set(table.status) == {"passed"}
    assert set(table.timer) == {"host_clock"}
    # Numbers as numbers: what a filter on them needs.
    assert pd.api.types.is_integer_dtype(table["created_unix_seconds"])
    assert pd.api.types.is_integer_dtype(table["axis.batch_size"])
    assert list(table[table["axis.batch_size"] > 100].workload.unique()) == ["batch_size=257"]
    assert (table.median_us > 0).all()
    assert str(table.time.dt.tz) == "UTC"
    assert all(rid.startswith(runs[0].run_id + "/") for rid in table.result_id)
    # The same rows as the bench report's, plus the store's columns.
    assert set(runs[0].to_pandas().columns) <= set(table.columns)
    # The server's verdict on arrival: the first run had no baseline, the second has the first.
    for _ in range(100):  # written just after the run itself
        second = stored(client, runs[1].run_id, 4)
        if second.regression.notna().all():
            break
        time.sleep(0.1)
    assert set(second.regression) <= VERDICTS, second.regression
    assert (second.regression_ratio > 0).all()


def test_history_filters_pages_and_runs(client, runs):
    runs_table = client.history(runs=True, suite=SUITE)
    assert {r.run_id for r in runs} <= set(runs_table.run_id)
    row = runs_table.set_index("run_id").loc[runs[1].run_id]
    assert row.results == 4 and bool(row.complete) is True
    # Newest first (two runs of one second may come in either order).
    assert runs_table.created_unix_seconds.is_monotonic_decreasing

    page = client.history(suite=SUITE, limit=3)
    assert len(page) == 3 and page.attrs["next_page_token"]
    rest = client.history(suite=SUITE, limit=3, page_token=page.attrs["next_page_token"])
    assert not set(rest.result_id) & set(page.result_id)

    # A run id prefix, the printed time accepted back, an empty window.
    prefix = runs[0].run_id[:12]
    assert set(client.history(run_id=prefix).run_id) == {runs[0].run_id}
    newest = runs_table.time[0].to_pydatetime()
    assert len(client.history(suite=SUITE, since=newest)) >= 4
    assert client.history(suite=SUITE, until="1970-01-02").empty
    empty = client.history(suite=SUITE, until=86400)
    # The columns exist with no rows (but the axes', which come from the results).
    assert list(empty.columns) == [c for c in page.columns if not c.startswith("axis.")]

    samples = client.history(run_id=runs[0].run_id, include_samples=True)
    assert all(len(s) == 8 for s in samples.samples_seconds)


def test_history_errors_name_the_field(client):
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.history(suite="no_such_suite_anywhere")
    assert error.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(ValueError, match="since"):
        client.history(since="last tuesday")


def test_compare_two_runs(client, runs):
    result = client.compare(runs[0].run_id, runs[1].run_id)
    assert isinstance(result, kerneleval.Comparison)
    table = result.to_pandas()
    assert len(table) == 4
    assert set(table.verdict) <= VERDICTS
    assert (table.baseline_samples == 8).all() and (table.candidate_samples == 8).all()
    counts = {v: int((table.verdict == v).sum()) for v in VERDICTS}
    assert counts["faster"] == result.faster and counts["slower"] == result.slower
    assert counts["same"] == result.same
    assert counts["inconclusive"] == result.inconclusive
    assert counts["incomparable"] == result.incomparable
    assert result.fails(["slower"]) == (result.slower > 0)
    assert result.baseline_protocol == result.candidate_protocol == "cold_custom"
    strict = ["slower", "inconclusive", "incomparable"]
    assert result.fails(strict) == any(v in strict for v in table.verdict)
    with pytest.raises(ValueError, match="fail_on"):
        result.fails(["regressed"])
    assert result.noisy == counts["noisy"]
    assert result.missing == []
    # The gate's default: slower, not comparable or missing.
    assert result.fails() == any(v in ("slower", "incomparable") for v in table.verdict)


def test_compare_with_the_previous_run_lists_a_dropped_implementation(client, runs):
    """The nightly gate in Python: compare("previous", run) picks the newest complete run of
    the same suite content and protocol, and a run without cpu_unfused fails on it."""
    suite = kerneleval.custom_suite(SUITE, [1, 257], 64, dtype="fp32")
    lone = client.bench(suite, implementations=["cpu_fused"], device="cpu", warmup=1, repetitions=8)
    stored(client, lone.run_id, 2)
    result = client.compare("previous", lone.run_id)
    assert result.baseline_run == runs[1].run_id
    assert sorted(result.missing) == [("batch_size=1", "cpu_unfused"), ("batch_size=257", "cpu_unfused")]
    assert result.fails()
    assert not result.fails(["slower"]) or result.slower > 0


def test_compare_across_windows_and_argument_errors(client, runs):
    result = client.compare(
        implementation="cpu_fused", suite=SUITE, baseline_until=time.time() + 3600,
        candidate_since=0,
    )
    assert set(result.to_pandas().implementation) <= {"cpu_fused"}
    with pytest.raises(ValueError, match="both"):
        client.compare(runs[0].run_id)
    with pytest.raises(ValueError, match="run ids"):
        client.compare()
    with pytest.raises(kerneleval.KernelEvalError) as error:
        client.compare("no-such-run", runs[0].run_id)
    assert error.value.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT)


def test_leaderboard(client, runs):
    board = client.leaderboard(SUITE)
    assert set(board.implementation) == {"cpu_fused", "cpu_unfused"}
    assert sorted(board["rank"]) == [1, 2]
    # Other tests store runs of this suite too (a cpu_fused-only run): any stored run may
    # hold an implementation's best.
    stored_runs = set(client.history(runs=True, suite=SUITE, limit=1000).run_id)
    assert {r.run_id for r in runs} <= stored_runs
    assert set(board.run_id) <= stored_runs
    assert isinstance(board.attrs["ranked_by_latency"], bool)
    # One protocol per board, named on the board and on every row.
    assert board.attrs["protocol"] == "cold_custom"
    assert set(board.protocol) == {"cold_custom"}
    assert board.attrs["other_protocols"] == []
    hot = client.leaderboard(SUITE, protocol="hot")
    assert hot.empty and hot.attrs["protocol"] == "hot"
    assert hot.attrs["other_protocols"] == ["cold_custom"]
    with pytest.raises(kerneleval.KernelEvalError, match="protocol"):
        client.leaderboard(SUITE, protocol="lukewarm")
    best = board[board["rank"] == 1].iloc[0]
    assert best.vs_best == pytest.approx(1.0)


def test_export_formats_agree(client, runs):
    rows = client.export(run_id=runs[0].run_id)
    csv = client.export(run_id=runs[0].run_id, format="csv")
    assert len(rows) == len(csv) == 4
    assert list(rows.columns) == list(csv.columns), "one export schema"
    assert set(rows.result_id) == set(csv.result_id)
    assert pd.api.types.is_integer_dtype(rows["created_unix_seconds"])
    assert set(rows.status) == {"passed"}
    # The protocol is part of every row: warm-up 1 and 8 repetitions are not the defaults.
    assert set(rows.protocol) == set(csv.protocol) == {"cold_custom"}
    traces = client.export(run_id=runs[0].run_id, format="trace")
    assert isinstance(traces, list) and len(traces) == 4
    text = client.export(run_id=runs[0].run_id, raw=True)
    assert text.count("\n") == 4

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cut = client.export(suite=SUITE, limit=1)
    assert len(cut) == 1 and cut.attrs["truncated"] is True
    assert any("truncated" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="format"):
        client.export(format="parquet")


def test_reproduce_a_stored_result(client, runs):
    result_id = client.history(run_id=runs[0].run_id).result_id[0]
    again = client.reproduce(result_id, device="cpu")
    assert isinstance(again, kerneleval.Reproduction)
    assert again.original["result_id"] == result_id
    assert again.reproduced["workload"] == again.original["workload"]
    assert again.reproduced["status"] == "passed"
    assert again.verdict in VERDICTS
    assert again.fails(["slower"]) == (again.verdict == "slower")


def test_defaults_match_the_cli(client):
    # `kerneleval run` checks correctness unless --no-check; Client.run(check=True) too.
    assert inspect.signature(kerneleval.Client.run).parameters["check"].default is True
    ones = np.ones((2, 8), dtype=np.float32)
    assert client.run(ones, ones, np.ones(8, dtype=np.float32)).passed is True
    # The store verbs' defaults are the CLI's: history 50 rows a page, export 1000 rows,
    # alpha 0.05, threshold 0.01.
    assert inspect.signature(kerneleval.Client.history).parameters["limit"].default == 50
    assert inspect.signature(kerneleval.Client.export).parameters["limit"].default == 1000
    compare = inspect.signature(kerneleval.Client.compare).parameters
    assert compare["alpha"].default == 0.05 and compare["threshold"].default == 0.01


def test_stubs_are_built_outside_the_source_tree():
    import kerneleval.v1.results_pb2 as generated

    source = ROOT / "client" / "python" / "src"
    assert not (source / "kerneleval" / "v1").exists(), "pip install wrote into the checkout"
    assert source not in pathlib.Path(generated.__file__).resolve().parents


def test_a_queued_benchmark_is_watched_to_its_end_and_stored(client):
    """enqueue / watch / queue / cancel: the Queue RPCs with the CLI verbs' names."""
    from kerneleval.v1 import queue_pb2 as qpb

    suite = kerneleval.custom_suite("py_queue", [1, 33], 64, dtype="fp32")
    job = client.enqueue(
        suite, implementations=["cpu_fused"], device="cpu", warmup=1, repetitions=4,
        priority="scheduled",
    )
    assert len(job.run_id) == 32
    assert job.state in (qpb.JOB_STATE_QUEUED, qpb.JOB_STATE_RUNNING)
    seen = []
    last = client.watch(job.run_id[:10], on_job=seen.append)
    assert last.state == qpb.JOB_STATE_DONE, last
    assert seen[-1] == last
    table = stored(client, job.run_id, 2)
    assert set(table["implementation"]) == {"cpu_fused"}
    jobs = client.queue()
    row = jobs[jobs["run_id"] == job.run_id].iloc[0]
    assert row["state"] == "done" and row["priority"] == "scheduled"
    assert row["attempts"] == 1
    with pytest.raises(kerneleval.KernelEvalError) as ended:
        client.cancel(job.run_id)
    assert ended.value.code == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(ValueError, match="priority: 'urgent'"):
        client.enqueue(suite, priority="urgent")


def test_a_job_for_an_architecture_no_server_has_waits_where_it_is_seen(client):
    """runs_on: a job for cuda:sm_90 queued through a CPU server is claimed by none of its
    devices; it waits first in line among sm_90 jobs until cancelled. A kind the service does
    not know is refused by name."""
    from kerneleval.v1 import queue_pb2 as qpb

    suite = kerneleval.custom_suite("py_queue_arch", [1], 64, dtype="fp32")
    job = client.enqueue(suite, implementations=["cpu_fused"], runs_on="cuda:sm_90")
    try:
        assert job.device_kind == "cuda:sm_90"
        assert job.state == qpb.JOB_STATE_QUEUED and job.position == 1
        time.sleep(1.5)  # a few of the server's polls: still nobody's
        jobs = client.queue()
        row = jobs[jobs["run_id"] == job.run_id].iloc[0]
        assert row["state"] == "queued" and row["device_kind"] == "cuda:sm_90"
    finally:
        client.cancel(job.run_id)
    with pytest.raises(kerneleval.KernelEvalError) as refused:
        client.enqueue(suite, runs_on="gpu:sm_90")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "runs_on: 'gpu:sm_90'" in str(refused.value)


def test_bench_compare_to_previous_is_the_nightly_gate(client, runs):
    """bench(compare_to="previous") as `kerneleval bench --compare-to previous`: the new run
    against the newest complete run of the same suite content and protocol."""
    suite = kerneleval.custom_suite(SUITE, [1, 257], 64, dtype="fp32")
    report = client.bench(
        suite, implementations=["cpu_fused", "cpu_unfused"], device="cpu", warmup=1,
        repetitions=8, compare_to="previous", threshold=0.5,
    )
    comparison = report.comparison
    assert isinstance(comparison, kerneleval.Comparison)
    # An earlier run of the same content and protocol, against this one.
    assert comparison.baseline_run and comparison.baseline_run != report.run_id
    assert comparison.proto.candidate_run == report.run_id
    assert comparison.baseline_protocol == comparison.candidate_protocol == "cold_custom"
    # Every row the baseline had is compared (an earlier test's run may hold one implementation
    # only; rows new in this run have nothing to compare with).
    table = comparison.to_pandas()
    assert len(table) >= 2 and set(table.implementation) <= {"cpu_fused", "cpu_unfused"}
    assert not comparison.missing

"""The results store as tables: stored results, runs, leaderboards and comparisons.

Rows are plain dicts with the same names and units as `BenchReport.rows()` (latencies in
microseconds, SOL in percent, enums by their short names), and each table is a
pandas.DataFrame of those rows. Times are `created_unix_seconds` (an int, what filters
take) and `time`, a timezone-aware UTC pandas Timestamp.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Union

import pandas as pd

from kerneleval import _names as names
from kerneleval._report import Row, result_row
from kerneleval.v1 import kerneleval_pb2 as pb
from kerneleval.v1 import results_pb2 as rpb

When = Union[None, int, float, str, datetime.datetime, datetime.date]

# The --fail-on words of the CLI and the verdicts they fail on.
FAIL_ON = ("slower", "inconclusive", "incomparable", "missing", "noisy")
# What `kerneleval compare` fails on when --fail-on is not given.
DEFAULT_FAIL_ON = ("slower", "incomparable", "missing")


def unix_seconds(value: When, what: str) -> int:
    """A filter bound as the contract takes it: Unix seconds, 0 for none.

    Accepts what `kerneleval history --since` accepts: Unix seconds, "YYYY-MM-DD",
    RFC 3339 / ISO 8601 text (naive times are UTC), and datetime / date objects.
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a time, not {value!r}")
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            value = datetime.datetime.fromisoformat(text.replace(" UTC", "").replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{what}: {value[:64]!r} is not Unix seconds, YYYY-MM-DD or an RFC 3339 time"
            ) from None
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = datetime.datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return int(value.timestamp())


def result_filter(
    suite: str = "",
    workload: str = "",
    implementation: str = "",
    device_model: str = "",
    run_id: str = "",
    since: When = None,
    until: When = None,
    protocol: str = "",
) -> rpb.ResultFilter:
    return rpb.ResultFilter(
        suite=suite,
        workload=workload,
        implementation=implementation,
        device_model=device_model,
        run_id=run_id,
        since_unix_seconds=unix_seconds(since, "since"),
        until_unix_seconds=unix_seconds(until, "until"),
        protocol=protocol,
    )


def _time(unix: int) -> pd.Timestamp:
    return pd.Timestamp(unix, unit="s", tz="UTC")


def stored_row(s: rpb.StoredResult) -> Row:
    """One stored result: its ids and time, then `BenchReport.rows()`' columns."""
    return {
        "result_id": s.id,
        "run_id": s.run_id,
        "created_unix_seconds": s.created_unix_seconds,
        "time": _time(s.created_unix_seconds),
        "suite": s.suite,
        "server": s.server,
        "device_model": s.environment.device.model,
        **result_row(s.result),
        "downsampled": s.downsampled,
        # The server's verdict on arrival against the series' baseline (None: its first).
        "regression": s.regression.change if s.HasField("regression") else None,
        "regression_ratio": s.regression.ratio if s.HasField("regression") else None,
    }


def run_row(r: rpb.RunSummary) -> Row:
    return {
        "run_id": r.run_id,
        "created_unix_seconds": r.created_unix_seconds,
        "time": _time(r.created_unix_seconds),
        "suite": r.suite,
        "results": r.results,
        "complete": r.complete,
        "server": r.server,
        "device_model": r.device_model,
        "peak_source": names.name(pb.PeakSource, r.peak_source),
        "peak_gb_per_s": r.peak_bytes_per_second / 1e9,
        # The protocol is part of what the run measured: runs compare only where it matches.
        "suite_hash": r.suite_hash,
        "cache": names.name(pb.CacheMode, r.protocol.cache),
        "warmup": r.protocol.warmup,
        "repetitions": r.protocol.repetitions,
        "timer": names.name(pb.Timer, r.protocol.timer),
        "seed": r.protocol.seed,
    }


def leaderboard_row(e: rpb.LeaderboardEntry) -> Row:
    return {
        "rank": e.rank,
        "implementation": e.implementation,
        "submission_hash": e.submission_hash or None,
        "device_model": e.device_model,
        "geomean_sol_pct": e.geomean_sol_ratio * 100,
        "mean_latency_us": e.mean_latency_seconds * 1e6,
        "vs_best": e.vs_best,
        "workloads": e.workloads,
        "run_id": e.run_id,
        "server": e.server,
        "created_unix_seconds": e.created_unix_seconds,
        "time": _time(e.created_unix_seconds),
        "peak_source": names.name(pb.PeakSource, e.peak_source),
        "peak_gb_per_s": e.peak_bytes_per_second / 1e9,
        "protocol": e.protocol,
    }


def comparison_row(c: rpb.SampleComparison) -> Row:
    """One workload x implementation of a comparison: each side's median, n and IQR, the
    ratio with its 95 % interval, the p-value and the verdict."""
    measured = c.ratio > 0
    return {
        "workload": c.workload,
        "implementation": c.implementation,
        "baseline_median_us": c.baseline_median_seconds * 1e6 if measured else None,
        "baseline_samples": c.baseline_samples,
        "baseline_iqr_us": c.baseline_iqr_seconds * 1e6,
        "candidate_median_us": c.candidate_median_seconds * 1e6 if measured else None,
        "candidate_samples": c.candidate_samples,
        "candidate_iqr_us": c.candidate_iqr_seconds * 1e6,
        "ratio": c.ratio if measured else None,
        "ratio_ci_low": c.ratio_ci_low if measured else None,
        "ratio_ci_high": c.ratio_ci_high if measured else None,
        "p_value": c.p_value if measured else None,
        "verdict": names.name(rpb.Verdict, c.verdict),
        "threshold": c.threshold,
        "baseline_status": names.name(pb.ResultStatus, c.baseline_status),
        "candidate_status": names.name(pb.ResultStatus, c.candidate_status),
        "correctness_changed": c.correctness_changed,
        "incomparable_reason": c.incomparable_reason or None,
    }


def frame(rows: List[Row], columns: Sequence[str]) -> pd.DataFrame:
    """`rows` as a DataFrame whose columns exist even when there are no rows."""
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(columns))


def _check_fail_on(fail_on: Sequence[str]) -> None:
    for word in fail_on:
        if word not in FAIL_ON:
            raise ValueError(f"fail_on: {word!r} is not one of {', '.join(FAIL_ON)}")


@dataclass
class Comparison:
    """What `Client.compare` answered: one row per workload x implementation.

    `faster`, `slower`, `same`, `inconclusive`, `noisy` and `incomparable` count the
    verdicts; `missing` lists the (workload, implementation) pairs the candidate dropped;
    `baseline_run` is the run compared with (the one `compare("previous", run)` picked);
    `baseline_protocol` and `candidate_protocol` label what each side measured ("cold",
    "hot_graph"; comma-separated where a window holds several); `proto` is the
    kerneleval.v1.CompareResponse.
    """

    proto: rpb.CompareResponse

    def rows(self) -> List[Row]:
        return [comparison_row(c) for c in self.proto.comparisons]

    def to_pandas(self) -> pd.DataFrame:
        return frame(self.rows(), comparison_row(rpb.SampleComparison()).keys())

    @property
    def faster(self) -> int:
        return self.proto.faster

    @property
    def slower(self) -> int:
        return self.proto.slower

    @property
    def same(self) -> int:
        return self.proto.same

    @property
    def inconclusive(self) -> int:
        return self.proto.inconclusive

    @property
    def incomparable(self) -> int:
        return self.proto.incomparable

    @property
    def noisy(self) -> int:
        return self.proto.noisy

    @property
    def missing(self) -> List[tuple]:
        return [
            (m.workload, m.implementation)
            for m in self.proto.missing
            if m.missing_from == "candidate"
        ]

    @property
    def baseline_protocol(self) -> str:
        return self.proto.baseline_protocol

    @property
    def candidate_protocol(self) -> str:
        return self.proto.candidate_protocol

    @property
    def baseline_run(self) -> str:
        return self.proto.baseline_run

    def fails(self, fail_on: Sequence[str] = DEFAULT_FAIL_ON) -> bool:
        """True when a verdict is one of `fail_on`, as `kerneleval compare --fail-on`
        exits 1 (regression): "slower", "inconclusive", "incomparable", "noisy", and
        "missing" for a row the candidate dropped. The default is the CLI's:
        slower, incomparable, missing."""
        _check_fail_on(fail_on)
        if "missing" in fail_on and self.missing:
            return True
        return any(row["verdict"] in fail_on for row in self.rows())

    def __repr__(self) -> str:
        return (
            f"Comparison(faster={self.faster}, slower={self.slower}, same={self.same}, "
            f"inconclusive={self.inconclusive}, noisy={self.noisy}, "
            f"incomparable={self.incomparable}, missing={len(self.missing)})"
        )


@dataclass
class Reproduction:
    """What `Client.reproduce` answered: the stored result, the re-run and their comparison.

    `original` is a `history` row, `reproduced` a `BenchReport.rows()` row, `comparison` a
    `Comparison` row; `proto` is the kerneleval.v1.ReproduceResponse.
    """

    proto: rpb.ReproduceResponse

    @property
    def original(self) -> Row:
        return stored_row(self.proto.original)

    @property
    def reproduced(self) -> Row:
        return result_row(self.proto.reproduced)

    @property
    def comparison(self) -> Row:
        return comparison_row(self.proto.comparison)

    @property
    def verdict(self) -> str:
        return self.comparison["verdict"]

    def fails(self, fail_on: Sequence[str] = ("slower",)) -> bool:
        """As `kerneleval reproduce --fail-on`: the re-run's verdict is one of `fail_on`."""
        _check_fail_on(fail_on)
        return self.verdict in fail_on

    def __repr__(self) -> str:
        return f"Reproduction(result={self.proto.original.id!r}, verdict={self.verdict!r})"


def parse_export(data: str, export_format: str) -> Any:
    """Export's text as a table: JSONL and CSV rows as a DataFrame, traces as dicts."""
    import io
    import json

    if export_format == "csv":
        return pd.read_csv(io.StringIO(data)) if data.strip() else pd.DataFrame()
    rows: List[Dict[str, Any]] = [json.loads(line) for line in data.splitlines() if line.strip()]
    if export_format == "trace":
        return rows
    return pd.DataFrame(rows)


EXPORT_FORMATS = {
    "jsonl": rpb.EXPORT_FORMAT_JSONL,
    "csv": rpb.EXPORT_FORMAT_CSV,
    "trace": rpb.EXPORT_FORMAT_TRACE_JSONL,
}


def history_columns(runs: bool) -> Sequence[str]:
    if runs:
        return run_row(rpb.RunSummary()).keys()
    return stored_row(rpb.StoredResult()).keys()


def leaderboard_columns() -> Sequence[str]:
    return leaderboard_row(rpb.LeaderboardEntry()).keys()

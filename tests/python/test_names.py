"""The Python client's names for the contract's enums: every value of every enum has one,
it is the contract's (the enum name without its prefix, in lower case, the same rule as
common/enum_names.h and tests/client/enum_names_test.cc), and it parses back. Needs no
server."""

from __future__ import annotations

import pytest

from kerneleval import _names as names
from kerneleval.v1 import kerneleval_pb2 as pb
from kerneleval.v1 import results_pb2 as rpb
from kerneleval.v1 import submissions_pb2 as spb

ENUMS = [
    (pb.DType, "DTYPE_"),
    (pb.Mode, "MODE_"),
    (pb.Timer, "TIMER_"),
    (pb.CacheMode, "CACHE_MODE_"),
    (pb.ResultStatus, "RESULT_STATUS_"),
    (pb.PeakSource, "PEAK_SOURCE_"),
]
# The enums without a table entry take the same rule (the CLI's JSON prints them so).
UNTABLED = [
    (rpb.Verdict, "VERDICT_"),
    (rpb.ExportFormat, "EXPORT_FORMAT_"),
    (spb.SourceLanguage, "SOURCE_LANGUAGE_"),
]


@pytest.mark.parametrize("enum,prefix", UNTABLED, ids=[p for _, p in UNTABLED])
def test_enums_without_a_table_print_their_contract_names(enum, prefix):
    for value in enum.values():
        expected = "unspecified" if value == 0 else enum.Name(value)[len(prefix):].lower()
        assert names.name(enum, value) == expected


@pytest.mark.parametrize("enum,prefix", ENUMS, ids=[p for _, p in ENUMS])
def test_every_value_prints_its_contract_name_and_parses_back(enum, prefix):
    values = [v for v in enum.values() if v != 0]
    assert len(values) >= 2
    for value in values:
        expected = enum.Name(value)[len(prefix):].lower()
        assert names.name(enum, value) == expected
        assert names.parse(enum, expected, "field") == value


def test_unspecified_prints_what_the_contract_says_it_means():
    assert names.name(pb.Mode, pb.MODE_UNSPECIFIED) == "output"
    assert names.name(pb.CacheMode, pb.CACHE_MODE_UNSPECIFIED) == "cold"
    assert names.name(pb.Timer, pb.TIMER_UNSPECIFIED) == "auto"
    assert names.name(pb.ResultStatus, 99) == "unspecified"


def test_aliases_parse_and_junk_names_the_field():
    assert names.parse(pb.Timer, "events", "timer") == pb.TIMER_CUDA_EVENTS
    assert names.parse(pb.Timer, "host", "timer") == pb.TIMER_HOST_CLOCK
    assert names.parse(pb.Timer, "auto", "timer") == pb.TIMER_UNSPECIFIED
    assert names.parse(pb.DType, "bfloat16", "dtype") == pb.DTYPE_BF16
    with pytest.raises(ValueError, match="timer: 'CUPTI' is not one of auto, cupti"):
        names.parse(pb.Timer, "CUPTI", "timer")
    with pytest.raises(ValueError, match="mode"):
        names.parse(pb.Mode, "unspecified", "mode")


def test_preferred_sol_is_the_device_attribute_figure():
    r = pb.WorkloadResult()
    assert names.preferred_sol(r.sol) is None
    r.sol.add(source=pb.PEAK_SOURCE_MEASURED_COPY, sol_ratio=0.5)
    assert names.preferred_sol(r.sol).sol_ratio == 0.5
    r.sol.add(source=pb.PEAK_SOURCE_DEVICE_ATTRIBUTES, sol_ratio=0.25)
    assert names.preferred_sol(r.sol).sol_ratio == 0.25

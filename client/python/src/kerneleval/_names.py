"""The names of the contract's enums, as every kerneleval format prints them.

The same table as the server's and the CLI's (common/enum_names.h): a value prints as its
enum name without the prefix, in lower case ("bf16", "output_and_residual", "cuda_events",
"rejected"); MODE_UNSPECIFIED prints "output", CACHE_MODE_UNSPECIFIED "cold" and
TIMER_UNSPECIFIED "auto", what the contract says they mean. Parsing also takes the aliases
the CLI takes ("bfloat16", "half", "events", "host").
"""

from __future__ import annotations

from typing import Any, Dict, List

from kerneleval.v1 import kerneleval_pb2 as pb

_PREFIX = {
    "DType": "DTYPE_",
    "Mode": "MODE_",
    "Timer": "TIMER_",
    "CacheMode": "CACHE_MODE_",
    "ResultStatus": "RESULT_STATUS_",
    "PeakSource": "PEAK_SOURCE_",
}
# What an unspecified value means, where the contract gives it a meaning.
_UNSPECIFIED = {"Mode": "output", "CacheMode": "cold", "Timer": "auto"}
_ALIASES = {
    "DType": {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
              "float": "fp32"},
    "Timer": {"events": "cuda_events", "host": "host_clock"},
}


def _enum_name(enum: Any) -> str:
    return enum.DESCRIPTOR.name


def _prefix(enum: Any) -> str:
    """The values' common leading words ("VERDICT_"), for the enums without a table entry
    (Verdict, ExportFormat, SourceLanguage): the rule common/enum_names.cc's EnumShortName
    applies to them."""
    kind = _enum_name(enum)
    if kind in _PREFIX:
        return _PREFIX[kind]
    spelled = list(enum.keys())
    prefix = spelled[0]
    for other in spelled[1:]:
        n = 0
        while n < min(len(prefix), len(other)) and prefix[n] == other[n]:
            n += 1
        prefix = prefix[:n]
    return prefix[: prefix.rfind("_") + 1]


def name(enum: Any, value: int) -> str:
    """The printed name of `value` of `enum` (e.g. `name(pb.Timer, pb.TIMER_CUPTI)`)."""
    kind = _enum_name(enum)
    if value == 0 or value not in enum.values():
        return _UNSPECIFIED.get(kind, "unspecified")
    return enum.Name(value).removeprefix(_prefix(enum)).lower()


def names(enum: Any) -> List[str]:
    """The names a caller may ask for: every value but the unspecified one, and the
    timer's "auto"."""
    kind = _enum_name(enum)
    out = [name(enum, v) for v in enum.values() if v != 0]
    return (["auto"] if kind == "Timer" else []) + out


def parse(enum: Any, text: str, what: str) -> int:
    """The value named `text` (a name or an alias); ValueError naming `what` otherwise."""
    kind = _enum_name(enum)
    spelled = _ALIASES.get(kind, {}).get(text, text)
    table: Dict[str, int] = {name(enum, v): v for v in enum.values() if v != 0}
    if kind == "Timer":
        table["auto"] = pb.TIMER_UNSPECIFIED
    if spelled in table:
        return table[spelled]
    raise ValueError(f"{what}: {text!r} is not one of {', '.join(names(enum))}")


def preferred_sol(figures: Any) -> Any:
    """The SOL figure every format shows: the device-attribute peak's, else the first;
    None when there is none."""
    for figure in figures:
        if figure.source == pb.PEAK_SOURCE_DEVICE_ATTRIBUTES:
            return figure
    return figures[0] if len(figures) else None

"""What a profiler output file holds, told from its name: one vocabulary for the wrapper's manifest and the reports.

rocprofv3 names its files `<prefix>_<kind>.<ext>` (prefix `%hostname%/%pid%` by default, `rank<r>_<pid>` under
launchers); the NVIDIA conversions and the embedded tracer write the same names. Standard library only: the
wrapper bundle carries this module into containers, and the reports import it from here.
"""
from __future__ import annotations

import os
import re

KERNEL_TRACE = "kernel_trace"
KERNEL_STATS = "kernel_stats"
COUNTER_COLLECTION = "counter_collection"
MEMORY_COPY_TRACE = "memory_copy_trace"
RESULTS_JSON = "results_json"  # rocprofv3 `-f json` (or legacy rocprof's chrome trace: check the content)
ROCPD = "rocpd"  # rocprofv3 `-f rocpd` SQLite
PERFETTO = "perfetto"
OTF2 = "otf2"
LEGACY_RESULTS = "legacy_results"  # legacy rocprof results.csv
NCU_REPORT = "ncu_report"
NSYS_REPORT = "nsys_report"
NSYS_SQLITE = "nsys_sqlite"
OTHER = "other"

# name suffix -> kind, checked in order (any prefix: `host/1234_`, `rank0_1234_`, or none)
SUFFIXES = (
    ("kernel_trace.csv", KERNEL_TRACE),
    ("kernel_stats.csv", KERNEL_STATS),
    ("counter_collection.csv", COUNTER_COLLECTION),
    ("memory_copy_trace.csv", MEMORY_COPY_TRACE),
    ("results.json", RESULTS_JSON),
    ("results.db", ROCPD),
    ("results.pftrace", PERFETTO),
)
# other per-process files: the kind is the name between the pid and the extension (`hip_api_trace`, ...)
_PER_PROCESS = re.compile(
    r"^(?:rank\d+_)?\d+_(?P<kind>.+?)\.(?P<ext>csv|json|pftrace|db|otf2|ncu-rep|sqlite|nsys-rep)$"
)
_RESULTS_BY_EXT = {"pftrace": PERFETTO, "otf2": OTF2, "csv": LEGACY_RESULTS}
_BY_EXT = {".ncu-rep": NCU_REPORT, ".nsys-rep": NSYS_REPORT, ".sqlite": NSYS_SQLITE}


def split_name(name: str) -> tuple[str, str]:
    """(kind, per-process prefix) of a file name; the prefix is what precedes the kind suffix (`1234`, `rank0_1234`)."""
    name = os.path.basename(name)
    for suffix, kind in SUFFIXES:
        if name.endswith(suffix):
            return kind, name[: -len(suffix)].rstrip("_.")
    m = _PER_PROCESS.match(name)
    if m:
        kind, ext = m.group("kind"), m.group("ext")
        kind = _RESULTS_BY_EXT.get(ext, kind) if kind == "results" else _BY_EXT.get("." + ext, kind)
        return kind, name.split("_" + m.group("kind"))[0]
    for ext, kind in _BY_EXT.items():
        if name.endswith(ext):
            return kind, name[: -len(ext)]
    return OTHER, name.split(".")[0]


def kind_of(name: str) -> str:
    """The kind of a file (see the constants above); `other` for anything not recognised."""
    return split_name(name)[0]

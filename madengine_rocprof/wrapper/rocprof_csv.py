"""Writers for rocprofv3 7.0 CSV files, so every backend's output reads like rocprofv3's.

rocprofv3 quotes headers and strings and leaves numbers bare; stats use sample standard deviation (n-1), which
matches the published hip_api_stats.csv. Files are written to a temporary name and renamed into place.
"""
from __future__ import annotations

import math
import os
import re

from madengine_rocprof.atomic import atomic_file

KERNEL_TRACE = ("Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
                "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
                "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
                "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z")
COUNTER_COLLECTION = ("Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Process_Id", "Thread_Id", "Grid_Size",
                      "Kernel_Id", "Kernel_Name", "Workgroup_Size", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
                      "Accum_VGPR_Count", "SGPR_Count", "Counter_Name", "Counter_Value", "Start_Timestamp",
                      "End_Timestamp")
API_TRACE = ("Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp", "End_Timestamp")
MEMORY_COPY_TRACE = ("Kind", "Direction", "Stream_Id", "Source_Agent_Id", "Destination_Agent_Id", "Correlation_Id",
                     "Start_Timestamp", "End_Timestamp")
STATS = ("Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev")


class _Std(float):
    """A standard deviation: rocprofv3 prints zero as 0.00000000e+00."""


def _cell(value) -> str:
    if isinstance(value, _Std) and value == 0:
        return "0.00000000e+00"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6f}"
    return '"' + str(value).replace('"', '""') + '"'


cell = _cell  # one value as rocprofv3 writes it (the tracer's streaming writer formats with it too)


def write_rows(path: str, header, rows) -> int:
    """Write `rows` (sequences in header order) atomically; returns the row count."""
    count = 0
    with atomic_file(path) as fh:
        fh.write(",".join(_cell(h) for h in header) + "\n")
        for row in rows:
            fh.write(",".join(_cell(v) for v in row) + "\n")
            count += 1
    return count


def kernel_stats(durations_by_name: dict) -> list[tuple]:
    """Rows of <pid>_kernel_stats.csv from {name: [duration_ns, ...]}, largest total first."""
    grand = sum(sum(d) for d in durations_by_name.values()) or 1
    rows = []
    for name, durs in durations_by_name.items():
        n, total = len(durs), sum(durs)
        mean = total / n
        std = math.sqrt(sum((d - mean) ** 2 for d in durs) / (n - 1)) if n > 1 else 0.0
        rows.append((name, n, int(total), float(mean), round(100.0 * total / grand, 2), int(min(durs)), int(max(durs)),
                     _Std(std)))
    rows.sort(key=lambda r: (-r[2], r[0]))
    return rows


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def truncate_name(name: str) -> str:
    """rocprofv3 -T: keep only the function name (no return type, template arguments or parameters)."""
    # Anonymous namespaces are spelled "(anonymous namespace)" (CUPTI) or "<unnamed>" (ncu): drop them first.
    text = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    while True:
        stripped = _TEMPLATE_ARGS.sub("", text)
        if stripped == text:
            break
        text = stripped
    text = text.split("(", 1)[0].strip()
    text = text.split(" ")[-1]
    return text.split("::")[-1] or name


def file_prefix(pid: int, env=None) -> str:
    """`<pid>_`, or `rank<r>_<pid>_` under a launcher that sets a rank."""
    env = os.environ if env is None else env
    for key in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if env.get(key, "").isdigit():
            return f"rank{env[key]}_{pid}_"
    return f"{pid}_"

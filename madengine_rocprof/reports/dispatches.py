"""Per-dispatch tables (kernel name, start, end, device) aggregated with polars: kernel statistics and busy time.

Every source with a per-dispatch timeline (kernel_trace.csv, legacy results.csv, rocprofv3 JSON, rocpd) becomes one
polars DataFrame with the columns of DISPATCH_SCHEMA, and `aggregate` fills the TimingSource from it: calls, total,
min and max per kernel name, first start and last end, and per device the busy time (union of kernel intervals).

Busy time of intervals sorted by start: each interval adds what it extends past the latest end seen before it,
max(0, end - max(start, latest earlier end)); the sum is the length of the union.
"""

from __future__ import annotations

import polars as pl

from madengine_rocprof.reports.categories import categorize
from madengine_rocprof.reports.model import DeviceTime, KernelStats, TimingSource

DISPATCH_SCHEMA = {"name": pl.String, "start": pl.Int64, "end": pl.Int64, "device": pl.String}
NON_COMPUTE = ("communication", "memory copy")  # HTA's communication / memory kernels; the rest is compute


def frame(rows: dict[str, list]) -> pl.DataFrame:
    """A dispatch table from Python lists (the JSON reader, the stdlib CSV path)."""
    return pl.DataFrame(rows, schema=DISPATCH_SCHEMA)


def union_ns(start: pl.Series, end: pl.Series) -> int:
    """Length of the union of the intervals [start, end), given sorted by start."""
    if start.len() == 0:
        return 0
    latest = end.cum_max().shift(1).fill_null(start[0])
    covered = end - pl.DataFrame({"s": start, "l": latest}).select(pl.max_horizontal("s", "l")).to_series()
    return int(covered.clip(lower_bound=0).sum())


def _device_time(device: str, table: pl.DataFrame) -> DeviceTime:
    """One device's dispatches, sorted by start, with the boolean column non_compute."""
    busy = union_ns(table["start"], table["end"])
    comm_count = int(table["non_compute"].sum())
    # one group empty (the common single-GPU case): the other group's union is the whole busy time, no copy needed
    comm = table.filter(pl.col("non_compute")) if 0 < comm_count < table.height else None
    compute = table.filter(~pl.col("non_compute")) if 0 < comm_count < table.height else None
    return DeviceTime(
        device=device,
        dispatches=table.height,
        span_ns=int(table["end"].max() - table["start"][0]),
        busy_ns=busy,
        compute_busy_ns=(busy if comm_count == 0 else 0)
        if compute is None
        else union_ns(compute["start"], compute["end"]),
        comm_busy_ns=(busy if comm_count == table.height else 0)
        if comm is None
        else union_ns(comm["start"], comm["end"]),
        kernel_time_sum_ns=int((table["end"] - table["start"]).sum()),
    )


def aggregate(src: TimingSource, table: pl.DataFrame, copies: pl.DataFrame | None = None) -> TimingSource:
    """Fill src from a dispatch table (columns: name, start, end, device); durations must not be negative.

    `copies`: the same process's memory copies and memsets on the devices (DISPATCH_SCHEMA), when the input has them
    (rocprofv3 memory_copy_trace, Kineto memcpy/memset); they count towards device busy time (see docs/reports.md).
    """
    duration = pl.col("end") - pl.col("start")
    per_name = table.group_by("name").agg(
        pl.len().alias("calls"),
        duration.sum().alias("total"),
        duration.min().alias("low"),
        duration.max().alias("high"),
    )
    src.kernels = {
        str(name): KernelStats(int(calls), int(total), int(low), int(high))
        for name, calls, total, low, high in per_name.iter_rows()
    }
    src.dispatches = table.height
    src.has_timeline = table.height > 0
    if not table.height:
        return src
    src.first_start_ns, src.last_end_ns = table.select(pl.col("start").min(), pl.col("end").max()).row(0)
    non_compute_names = [n for n in src.kernels if categorize(n) in NON_COMPUTE]
    table = table.with_columns(pl.col("name").is_in(non_compute_names).alias("non_compute"))
    devices = sorted(table["device"].unique().to_list(), key=str)
    for device in devices:  # one device at a time, only the columns the unions need: memory stays small
        part = table if len(devices) == 1 else table.filter(pl.col("device") == device)
        part = part.select("start", "end", "non_compute")
        if not part["start"].is_sorted():  # traces are mostly written in start order: skip the sort then
            part = part.sort("start")
        src.devices.append(_device_time(str(device), part))
    return src

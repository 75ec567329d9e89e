"""Readers for the CSV outputs: rocprofv3 (6.2 .. 7.x, rocpd-converted), legacy rocprof, our tracer, NVIDIA conversions.

Kernel traces are read into a columnar table (polars) for per-kernel statistics and busy time; counter and copy
files stream through the csv module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from madengine_rocprof.reports import cpu_ops, dispatches
from madengine_rocprof.reports.csv_tables import open_table, parse_int, parse_number, read_header
from madengine_rocprof.reports.model import CopyStats, CounterSource, CounterStats, KernelStats, TimingSource

NAME = ("Kernel_Name", "KernelName")
START = ("Start_Timestamp", "BeginNs", "start")
END = ("End_Timestamp", "EndNs", "end")
TRACK: dict[str, tuple[str, ...]] = {
    "agent": ("Agent_Id", "gpu-id", "agent_abs_index"),
    "queue": ("Stream_Id", "Queue_Id", "queue-id"),
}


def read_kernel_trace(src: TimingSource, copy_files: list[Path] | None = None) -> TimingSource:
    """A per-dispatch kernel trace (rocprofv3 kernel_trace.csv or legacy results.csv), aggregated with polars.

    polars parses well-formed files fast; a file it rejects, or whose rows have gaps or negative durations, is
    read again with the csv module, which names the line of the problem (or reads what polars could not, such
    as float timestamps). `copy_files`: the same process's memory_copy_trace.csv files, whose copies count
    towards the devices' busy time.
    """
    table = _polars_table(src.path)
    if table is None:
        table = _stdlib_table(src.path)
    copies = None
    if copy_files:
        devices = {str(d) for d in table["device"].unique().to_list()}
        copies = pl.concat([copy_intervals(path, devices) for path in copy_files])
    return dispatches.aggregate(src, table, copies)


def read_cpu_operator_trace(src: TimingSource) -> TimingSource:
    """The embedded tracer's CPU output (kernel_trace.csv rows with Agent_Id CPU): nested operators, one thread each.

    Per operator name: inclusive time counted once where the name nests in itself, and self time (cpu_ops). There is
    no device timeline, so no busy time: `devices` stays empty.
    """
    table = _polars_table(src.path, THREAD)
    if table is None:
        table = _stdlib_table(src.path, THREAD)
    src.cpu_operators = True
    src.kernels = cpu_ops.operator_stats(
        zip(table["name"].cast(pl.String), table["device"].cast(pl.String), table["start"], table["end"], strict=True)
    )
    src.dispatches = table.height
    src.has_timeline = table.height > 0
    if table.height:
        src.first_start_ns, src.last_end_ns = table.select(pl.col("start").min(), pl.col("end").max()).row(0)
    return src


THREAD = ("Thread_Id",)  # the host thread of a CPU operator row


def _columns(path: Path, track: tuple[str, ...] = TRACK["agent"]) -> tuple[str, str, str, str | None]:
    """Header names of the name, start, end and (optional) device columns; missing required ones are an error."""
    with open_table(path, {"name": NAME, "start": START, "end": END}, {"device": track}) as table:
        header = read_header(path)
        index = table.index
        device = index["device"]
        # `or 0` only for the type checker: open_table has raised if a required column is missing
        return (
            header[index["name"] or 0],
            header[index["start"] or 0],
            header[index["end"] or 0],
            None if device is None else header[device],
        )


def _polars_table(path: Path, track: tuple[str, ...] = TRACK["agent"]) -> pl.DataFrame | None:
    """The dispatch table; `track` names the column read as `device` (the agent, or the thread for CPU rows)."""
    name, start, end, device = _columns(path, track)
    types: dict[str, pl.DataType] = {name: pl.Categorical(), start: pl.Int64(), end: pl.Int64()}
    if device:
        types[device] = pl.Categorical()
    if len(set(read_header(path))) != len(read_header(path)):
        return None  # duplicate column names: polars renames them, the csv module reads them by position
    try:
        table = (
            pl.scan_csv(
                path,
                schema_overrides=types,
                encoding="utf8-lossy",
                infer_schema=False,
            )
            .select(
                pl.col(name).alias("name"),
                pl.col(start).alias("start"),
                pl.col(end).alias("end"),
                pl.col(device).alias("device") if device else pl.lit("all").alias("device"),
            )
            .collect(engine="streaming")
        )
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None
    if table.select(pl.any_horizontal(pl.col("name", "start", "end").is_null().any())).item():
        return None  # short rows: let the csv module say where
    if table.height and table.select((pl.col("end") < pl.col("start")).any()).item():
        return None
    return table


def _stdlib_table(path: Path, track: tuple[str, ...] = TRACK["agent"]) -> pl.DataFrame:
    """The same table through the csv module: slower, exact errors (file, line, what) for malformed rows."""
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    with open_table(path, {"name": NAME, "start": START, "end": END}, {"device": track}) as table:
        i_name, i_start, i_end, i_device = (table.index[k] for k in ("name", "start", "end", "device"))
        for row in table.rows():
            start = parse_int(table, row[i_start], "Start_Timestamp")
            end = parse_int(table, row[i_end], "End_Timestamp")
            if end < start:
                raise table.error(
                    f"End_Timestamp {end} is before Start_Timestamp {start}",
                    fix="the file is corrupt; re-run the profiler",
                )
            rows["name"].append(row[i_name])
            rows["start"].append(start)
            rows["end"].append(end)
            rows["device"].append(row[i_device] if i_device is not None else "all")
    return dispatches.frame(rows)


def iter_kernel_trace(path: Path) -> Iterator[tuple[str, int, int, str]]:
    """Each dispatch as (kernel name, start ns, end ns, track), for the Perfetto writer."""
    with open_table(path, {"name": NAME, "start": START, "end": END}, TRACK) as table:
        idx = table.index
        for row in table.rows():
            track = (
                " ".join(f"{key} {row[idx[key]]}" for key in ("agent", "queue") if idx[key] is not None) or "kernels"
            )
            yield (
                row[idx["name"]],
                parse_int(table, row[idx["start"]], "Start_Timestamp"),
                parse_int(table, row[idx["end"]], "End_Timestamp"),
                track,
            )


def read_kernel_stats(src: TimingSource) -> TimingSource:
    """rocprofv3 `--stats` kernel_stats.csv or legacy results.stats.csv: already aggregated per kernel."""
    with open_table(
        src.path,
        {"name": ("Name", "KernelName"), "calls": ("Calls",), "total": ("TotalDurationNs",)},
        {"min": ("MinNs",), "max": ("MaxNs",)},
    ) as table:
        idx = table.index
        for row in table.rows():
            name = row[idx["name"]]
            stats = KernelStats(
                calls=parse_int(table, row[idx["calls"]], "Calls"),
                total_ns=parse_number(table, row[idx["total"]], "TotalDurationNs"),
                min_ns=parse_number(table, row[idx["min"]], "MinNs") if idx["min"] is not None else None,
                max_ns=parse_number(table, row[idx["max"]], "MaxNs") if idx["max"] is not None else None,
            )
            if stats.calls < 0 or stats.total_ns < 0:
                raise table.error("negative Calls or TotalDurationNs", fix="the file is corrupt; re-run the profiler")
            if name in src.kernels:  # the same name twice cannot come from one stats file
                raise table.error(f"kernel {name!r} appears twice", fix="the file is corrupt; re-run the profiler")
            src.kernels[name] = stats
            src.dispatches += stats.calls
    return src


# ncu's per-dispatch kernel duration (ns); the wrapper's ncu conversion carries it as a counter, and its
# Start/End timestamps are relative to the replay, so this value is preferred where present
NCU_DURATION = "gpu__time_duration.sum"


def read_counter_collection(src: CounterSource) -> CounterSource:
    """rocprofv3 counter_collection.csv (one row per dispatch x counter), also the wrapper's ncu conversion.

    Besides the counter statistics it keeps one entry per dispatch (Dispatch_Id, else Correlation_Id), so
    a process profiled with counters only still has a dispatch list (see discover.derive_timing_from_counters).
    """
    with open_table(
        src.path,
        {"name": NAME, "counter": ("Counter_Name",), "value": ("Counter_Value",)},
        {"dispatch": ("Dispatch_Id", "Correlation_Id"), "start": START, "end": END},
    ) as table:
        idx = table.index
        i_dispatch = idx["dispatch"]
        has_times = idx["start"] is not None and idx["end"] is not None
        # dispatch id -> [kernel name, End - Start or None, ncu duration or None]
        dispatches: dict[str, list] = {}
        for row in table.rows():
            kernel, counter = row[idx["name"]], row[idx["counter"]]
            value = parse_number(table, row[idx["value"]], "Counter_Value")
            src.counters.setdefault(counter, CounterStats()).add(value)
            src.by_kernel.setdefault((kernel, counter), CounterStats()).add(value)
            if i_dispatch is None:
                continue
            entry = dispatches.get(row[i_dispatch])
            if entry is None:
                duration = None
                if has_times:
                    duration = parse_int(table, row[idx["end"]], "End_Timestamp") - parse_int(
                        table, row[idx["start"]], "Start_Timestamp"
                    )
                    if duration < 0:
                        raise table.error(
                            "End_Timestamp is before Start_Timestamp", fix="the file is corrupt; re-run the profiler"
                        )
                entry = dispatches[row[i_dispatch]] = [kernel, duration, None]
            if counter == NCU_DURATION:
                entry[2] = value
    _collect_dispatches(src, dispatches)
    return src


def _collect_dispatches(src: CounterSource, dispatches: dict[str, list]) -> None:
    """Per kernel name: calls and durations (the ncu duration where present, else End - Start)."""
    uses_ncu = any(ncu is not None for _, _, ncu in dispatches.values())
    timed = all(ncu is not None or span is not None for _, span, ncu in dispatches.values())
    src.time_from = ("gpu__time_duration.sum" if uses_ncu else "timestamps") if timed else "untimed"
    for kernel, span, ncu in dispatches.values():
        stats = src.dispatch_kernels.setdefault(kernel, KernelStats())
        stats.calls += 1
        if timed:
            duration = ncu if ncu is not None else span
            stats.merge(KernelStats(0, duration, duration, duration))
            entry = src.kernel_time.setdefault(kernel, [0, 0])
            entry[0] += 1
            entry[1] += duration


def copy_intervals(path: Path, devices: set[str]) -> pl.DataFrame:
    """memory_copy_trace.csv as a dispatch table: name = direction, device = the copy's GPU agent.

    The device is the destination agent if the process ran kernels there, else the source agent if it did, else
    the destination (host-to-device copies to a GPU without kernels); a kernel trace names the same agents.
    """
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    with open_table(
        path,
        {"start": START, "end": END},
        {"direction": ("Direction",), "src": ("Source_Agent_Id",), "dst": ("Destination_Agent_Id",)},
    ) as table:
        idx = table.index
        for row in table.rows():
            start = parse_int(table, row[idx["start"]], "Start_Timestamp")
            end = parse_int(table, row[idx["end"]], "End_Timestamp")
            if end < start:
                raise table.error(
                    f"End_Timestamp {end} is before Start_Timestamp {start}",
                    fix="the file is corrupt; re-run the profiler",
                )
            src = row[idx["src"]] if idx["src"] is not None else None
            dst = row[idx["dst"]] if idx["dst"] is not None else None
            device = dst if dst in devices or src not in devices else src
            rows["name"].append(row[idx["direction"]] if idx["direction"] is not None else "MEMORY_COPY")
            rows["start"].append(start)
            rows["end"].append(end)
            rows["device"].append(device if device is not None else "all")
    return dispatches.frame(rows)


def read_memory_copies(path: Path) -> dict[str, CopyStats]:
    """memory_copy_trace.csv: copies per direction (these are not kernels, so they never enter kernel time)."""
    copies: dict[str, CopyStats] = {}
    with open_table(path, {"start": START, "end": END}, {"direction": ("Direction",)}) as table:
        idx = table.index
        for row in table.rows():
            direction = row[idx["direction"]] if idx["direction"] is not None else "MEMORY_COPY"
            direction = direction.replace("MEMORY_COPY_", "").replace("_", " ").lower() or "unknown"
            stats = copies.setdefault(direction, CopyStats())
            stats.calls += 1
            stats.total_ns += parse_int(table, row[idx["end"]], "End_Timestamp") - parse_int(
                table, row[idx["start"]], "Start_Timestamp"
            )
    return copies

"""Readers for the CSV outputs: rocprofv3 (6.2 .. 7.x, rocpd-converted), legacy rocprof, our tracer, NVIDIA conversions.

Kernel traces are read into a columnar table (polars) for per-kernel statistics and busy time; counter and copy
files stream through the csv module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import polars as pl

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import cpu_ops, csv_native, dispatches, phases
from madengine_rocprof.reports.csv_tables import open_table, parse_int, parse_number, parse_time
from madengine_rocprof.reports.model import CopyStats, CounterSource, CounterStats, KernelStats, TimingSource

NAME = ("Kernel_Name", "KernelName")
START = ("Start_Timestamp", "BeginNs", "start")
END = ("End_Timestamp", "EndNs", "end")
TRACK: dict[str, tuple[str, ...]] = {
    "agent": ("Agent_Id", "gpu-id", "agent_abs_index"),
    "queue": ("Stream_Id", "Queue_Id", "queue-id"),
    "thread": ("Thread_Id",),  # the host thread of a CPU operator row (the embedded tracer without a GPU)
}


def read_kernel_trace(src: TimingSource, copy_files: list[Path] | None = None) -> TimingSource:
    """A per-dispatch kernel trace (rocprofv3 kernel_trace.csv or legacy results.csv), aggregated with polars.

    `copy_files`: the same process's memory_copy_trace.csv files, whose copies count towards the devices' busy time.
    """
    table = kernel_trace_table(src.path)
    copies = None
    if copy_files:
        devices = {str(d) for d in table["device"].unique().to_list()}
        copies = pl.concat([copy_intervals(path, devices) for path in copy_files])
        check_dispatches(copies, ", ".join(map(str, copy_files)))
    return dispatches.aggregate(src, table, copies)


def read_cpu_operator_trace(src: TimingSource) -> TimingSource:
    """The embedded tracer's CPU output (kernel_trace.csv rows with Agent_Id CPU): nested operators, one thread each.

    Per operator name: inclusive time counted once where the name nests in itself, and self time (cpu_ops). There is
    no device timeline, so no busy time: `devices` stays empty.
    """
    table = kernel_trace_table(src.path, device="thread")
    src.cpu_operators = True
    operators = list(
        zip(table["name"].cast(pl.String), table["device"].cast(pl.String), table["start"], table["end"], strict=True)
    )
    src.kernels = cpu_ops.operator_stats(operators)
    markers_path = phases.markers_file(Path(src.path))
    if markers_path.is_file():  # the tracer's phase markers: forward / backward / optimizer time
        markers = phases.read_markers(markers_path)
        src.phase_ns = phases.self_time_per_phase(operators, markers)
        src.steps_marked = any(m[0].startswith("ProfilerStep#") for m in markers)
    src.dispatches = table.height
    src.has_timeline = table.height > 0
    if table.height:
        src.first_start_ns, src.last_end_ns = table.select(pl.col("start").min(), pl.col("end").max()).row(0)
    return src


def kernel_trace_table(path: Path, tracks: bool = False, device: str = "agent") -> pl.DataFrame:
    """The one parser of per-dispatch CSV traces (report, report --perfetto and compare all read through it).

    Columns name, start, end, device (and track, "agent A queue Q", when asked). polars reads well-formed files fast,
    but only after a streaming pass has shown that every line has exactly the header's field count (polars itself
    drops extra fields of the columns it does not select); anything it cannot vouch for (ragged or blank lines,
    quoted newlines, float timestamps, values out of range) is read again with the csv module, which accepts it
    exactly or names the line of the problem. Before both, the native reader (csv_native) checks and reads the
    plain layout rocprofv3 writes in one pass; it gives the same table as that path (skipping blank lines as the csv
    module does) and hands anything else to it.
    Either way the table is checked by `check_dispatches`. `device`: the TRACK column read as the device (`thread`
    for CPU operator rows)."""
    layout = _layout(path)
    table = _native_table(path, layout, tracks, device)
    if table is None:
        table = _polars_table(path, layout, tracks, device)
    if table is None:
        table = _stdlib_table(path, layout, tracks, device)
    check_dispatches(table, str(path))
    return table


class _Layout(NamedTuple):
    ncols: int
    names: dict[str, str | None]  # our column -> its header name (None: absent)
    duplicates: bool
    positions: dict[str, int | None]  # our column -> its position (None: absent)


def _layout(path: Path) -> _Layout:
    """Header names of the name, start, end, device, queue columns; missing required ones are an error."""
    with open_table(path, {"name": NAME, "start": START, "end": END}, TRACK) as table:
        header = table.header
        names = {key: (None if pos is None else header[pos]) for key, pos in table.index.items()}
        return _Layout(len(header), names, len(set(header)) != len(header), dict(table.index))


# One CSV field as the csv module reads it without ambiguity: a whole quoted field ("" escapes a quote), or an
# unquoted one without quotes, commas or carriage returns (the csv module ends a row at a bare CR).
_FIELD = r'(?:"[^"]*"(?:"[^"]*")*|[^",\r]*)'


def _bad_lines(path: Path, ncols: int) -> pl.LazyFrame:
    """The number of lines that are not exactly ncols such fields (one linear-time regex per line, streamed). A
    line-wise check cannot judge a quoted newline, a stray separator byte or a quote inside a field: those count as
    bad, and the csv module then reads the file, exactly, or names the line."""
    line = f"^{_FIELD}(?:,{_FIELD}){{{ncols - 1}}}$"
    return (
        pl.scan_csv(path, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"],
                    schema_overrides={"line": pl.String}, infer_schema=False, encoding="utf8-lossy")
        .select((~pl.col("line").fill_null("").str.contains(line)).sum())
    )


# the guard's verdict per file version (the report's statistics and its per-event tables read one file twice)
_VOUCHED: dict[tuple, bool] = {}


def _lines_vouched(path: Path, ncols: int) -> bool:
    """True when every line is exactly ncols fields polars reads as the csv module does (`_bad_lines` finds none)."""
    info = path.stat()
    key = (str(path.resolve()), ncols, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _VOUCHED:
        _VOUCHED[key] = not _bad_lines(path, ncols).collect(engine="streaming").item()
    return _VOUCHED[key]


def fast_columns(path: Path, strings: dict[str, tuple[str, ...]],
                 times: dict[str, tuple[str, ...]]) -> pl.DataFrame | None:
    """Columns of a CSV file read by the native reader or polars, or None where the csv module must read it (the
    same readers and guard as `kernel_trace_table`). `strings` (absent columns left out; empty fields as the csv
    module reads them, "") and `times` (required: whole ns, none empty or negative, end not before start) map our
    names to header aliases."""
    try:
        with open_table(path, {}, {**strings, **times}) as table:
            header, index = table.header, table.index
    except UserError:
        return None
    if len(set(header)) != len(header) or any(index[k] is None for k in times):
        return None
    wanted = {k: header[i] for k, i in index.items() if i is not None}
    native = _native_columns(path, len(header), index, [k for k in wanted if k not in times], times)
    if native is not None:
        return native
    types = {wanted[k]: (pl.Int64() if k in times else pl.String()) for k in wanted}
    columns = [pl.col(col).alias(k) if k in times else pl.col(col).fill_null("").alias(k) for k, col in wanted.items()]
    try:
        if not _lines_vouched(path, len(header)):
            return None
        frame = (pl.scan_csv(path, schema_overrides=types, encoding="utf8-lossy", infer_schema=False)
                 .select(columns).collect(engine="streaming"))
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None
    start, end = times
    if frame.select(pl.any_horizontal(pl.col(*times).is_null().any())).item():
        return None
    if frame.height and frame.select(((pl.col(end) < pl.col(start)) | (pl.col(start) < 0)).any()).item():
        return None
    return frame


def _columns(layout: _Layout, tracks: bool, device_key: str) -> list[pl.Expr]:
    """The table's columns from a frame whose columns carry the header's names (the polars and native paths)."""
    names = layout.names
    # open_table has raised if a required column is missing: `or ""` only for the type checker
    name, start, end = (names[k] or "" for k in ("name", "start", "end"))
    device = names[device_key]
    columns = [pl.col(name).cast(pl.Categorical).alias("name"), pl.col(start).alias("start"),
               pl.col(end).alias("end"),
               # an empty field: "" as the csv module reads it (polars reads null)
               pl.col(device).fill_null("").cast(pl.Categorical).alias("device") if device
               else pl.lit("all").alias("device")]
    if tracks:
        columns.append(_track_expr(names["agent"], names["queue"]))
    return columns


def _native_columns(path: Path, ncols: int, index: dict[str, int | None], strings: list[str],
                    times: dict[str, tuple[str, ...]]) -> pl.DataFrame | None:
    """`fast_columns`' frame through the native reader (the same columns and values), or None."""
    start, end = (index[k] or 0 for k in times)
    columns = csv_native.read_columns(path, ncols, start, end, [index[k] or 0 for k in strings])
    if columns is None:
        return None
    by_key = dict(zip([*times, *strings], [columns[0], columns[1], *(c.cast(pl.String) for c in columns[2:])],
                      strict=True))
    return pl.DataFrame([by_key[k].alias(k) for k in (*strings, *times)])


def _polars_table(path: Path, layout: _Layout, tracks: bool, device_key: str) -> pl.DataFrame | None:
    names = layout.names
    if layout.duplicates:
        return None  # duplicate column names: polars renames them, the csv module reads them by position
    name, start, end = (names[k] or "" for k in ("name", "start", "end"))
    types: dict[str, pl.DataType] = {c: pl.String() for c in (name, names[device_key], names["agent"],
                                                                names["queue"]) if c}
    types.update({start: pl.Int64(), end: pl.Int64()})
    try:
        if not _lines_vouched(path, layout.ncols):
            return None  # lines the csv module must judge (polars drops extra fields of unselected columns)
        table = (pl.scan_csv(path, schema_overrides=types, encoding="utf8-lossy", infer_schema=False)
                 .select(_columns(layout, tracks, device_key)).collect(engine="streaming"))
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None
    if table.select(pl.any_horizontal(pl.col("name", "start", "end").is_null().any())).item():
        return None  # empty fields: let the csv module say where
    if table.height and table.select(((pl.col("end") < pl.col("start")) | (pl.col("start") < 0)).any()).item():
        return None
    return table


def _native_table(path: Path, layout: _Layout, tracks: bool, device_key: str) -> pl.DataFrame | None:
    """The polars path's table through the native reader, or None where it does not vouch for every line (or is
    unavailable): then the polars path decides, as it did before the reader existed."""
    if layout.duplicates:
        return None
    index, names = layout.positions, layout.names
    wanted = ["name", device_key, *(("agent", "queue") if tracks else ())]
    strings: list[int] = list(dict.fromkeys(i for i in (index[k] for k in wanted) if i is not None))  # name first
    columns = csv_native.read_columns(path, layout.ncols, index["start"] or 0, index["end"] or 0, strings)
    if columns is None:
        return None
    header = {index[k]: names[k] for k in ("start", "end")} | {index[k]: names[k] for k in wanted}
    frame = pl.DataFrame([s.alias(header[i] or "") for s, i in zip(
        columns, [index["start"], index["end"], *strings], strict=True)])
    strings_as_text = [header[i] or "" for i in strings[1:] if tracks and i in (index["agent"], index["queue"])]
    if strings_as_text:  # the track's text is formatted from strings, as polars reads them
        frame = frame.with_columns(pl.col(*strings_as_text).cast(pl.String))
    return frame.select(_columns(layout, tracks, device_key))


def _track_expr(agent: str | None, queue: str | None) -> pl.Expr:
    parts = [pl.format(f"{key} {{}}", pl.col(col).fill_null("")) for key, col in (("agent", agent), ("queue", queue))
             if col]
    if not parts:
        return pl.lit("kernels").alias("track")
    return (parts[0] if len(parts) == 1 else pl.concat_str(parts, separator=" ")).alias("track")


def _stdlib_table(path: Path, layout: _Layout, tracks: bool, device_key: str) -> pl.DataFrame:
    """The same table through the csv module: slower, exact errors (file, line, what) for malformed rows."""
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    track_list: list[str] = []
    with open_table(path, {"name": NAME, "start": START, "end": END}, TRACK) as table:
        i_name, i_start, i_end, i_agent, i_queue = (table.index[k] for k in ("name", "start", "end", "agent", "queue"))
        i_device = table.index[device_key]
        for row in table.rows():
            start = parse_time(table, row[i_start], "Start_Timestamp")
            end = parse_time(table, row[i_end], "End_Timestamp")
            if end < start:
                raise table.error(
                    f"End_Timestamp {end} is before Start_Timestamp {start}",
                    fix="the file is corrupt; re-run the profiler",
                )
            rows["name"].append(row[i_name])
            rows["start"].append(start)
            rows["end"].append(end)
            rows["device"].append(row[i_device] if i_device is not None else "all")
            if tracks:
                track_list.append(" ".join(f"{key} {row[i]}" for key, i in (("agent", i_agent), ("queue", i_queue))
                                           if i is not None) or "kernels")
    frame = dispatches.frame(rows)
    return frame.with_columns(pl.Series("track", track_list, dtype=pl.String)) if tracks else frame


def check_dispatches(table: pl.DataFrame, source: str) -> None:
    """What every per-dispatch table (CSV, JSON, rocpd) must satisfy before it is aggregated: every dispatch has a
    device. (Sums of durations cannot overflow: `dispatches.aggregate` adds them in Int128.)"""
    if table.height and table["device"].null_count():
        raise UserError("a dispatch has no agent (device)", file=source,
                        fix="the file is corrupt; re-run the profiler")


def iter_kernel_trace(path: Path) -> Iterator[tuple[str, int, int, str]]:
    """Each dispatch as (kernel name, start ns, end ns, track), for the Perfetto writer and compare: the same
    parser and checks as the report's kernel statistics."""
    table = kernel_trace_table(path, tracks=True)
    yield from table.select(pl.col("name").cast(pl.String), "start", "end", "track").iter_rows()


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
            _check_stats(table, stats)
            if name in src.kernels:  # the same name twice cannot come from one stats file
                raise table.error(f"kernel {name!r} appears twice", fix="the file is corrupt; re-run the profiler")
            src.kernels[name] = stats
            src.dispatches += stats.calls
    return src


def _check_stats(table, stats: KernelStats) -> None:
    """One kernel's aggregated row is consistent: no negative value (each column on its own), MinNs <= MaxNs, and
    a maximum within the total (one call's duration is part of it)."""
    fix = "the file is corrupt; re-run the profiler"
    for column, value in (("Calls", stats.calls), ("TotalDurationNs", stats.total_ns), ("MinNs", stats.min_ns),
                          ("MaxNs", stats.max_ns)):
        if value is not None and value < 0:
            raise table.error(f"column {column}: {value:g} is negative", fix=fix)
    if stats.min_ns is not None and stats.max_ns is not None and stats.min_ns > stats.max_ns:
        raise table.error(f"MinNs {stats.min_ns:g} is above MaxNs {stats.max_ns:g}", fix=fix)
    if stats.calls and stats.max_ns is not None and stats.max_ns > stats.total_ns:
        raise table.error(f"MaxNs {stats.max_ns:g} is above TotalDurationNs {stats.total_ns:g}", fix=fix)
    if not stats.calls and stats.total_ns:
        raise table.error(f"TotalDurationNs {stats.total_ns:g} with 0 Calls", fix=fix)


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
        {"dispatch": ("Dispatch_Id", "Correlation_Id"), "start": START, "end": END,
         "guid": ("Guid",), "pid": ("Process_Id", "Pid")},
    ) as table:
        idx = table.index
        i_dispatch = idx["dispatch"]
        # a dispatch is its id within its process (ids restart per process in a merged file)
        key_columns = [i for i in (idx["guid"], idx["pid"], i_dispatch) if i is not None]
        has_times = idx["start"] is not None and idx["end"] is not None
        # dispatch key -> [kernel name, End - Start or None, ncu duration or None]
        dispatches: dict[tuple[str, ...], list] = {}
        spans: dict[tuple[str, ...], tuple[str, ...]] = {}  # the timestamps' text, to see a dispatch's rows agree
        for row in table.rows():
            kernel, counter = row[idx["name"]], row[idx["counter"]]
            value = parse_number(table, row[idx["value"]], "Counter_Value")
            src.counters.setdefault(counter, CounterStats()).add(value)
            src.by_kernel.setdefault((kernel, counter), CounterStats()).add(value)
            if i_dispatch is None:
                continue
            key = tuple(row[i] for i in key_columns)
            span = tuple(row[i] for i in (idx["start"], idx["end"]) if i is not None)
            entry = dispatches.get(key)
            if entry is not None and (entry[0] != kernel or spans[key] != span):  # which of the two would count?
                raise table.error(f"dispatch {row[i_dispatch]} appears with another kernel or other timestamps "
                                  f"than on its first row", fix="the file is corrupt; re-run the profiler")
            if entry is None:
                spans[key] = span
                duration = None
                if has_times:
                    duration = parse_time(table, row[idx["end"]], "End_Timestamp") - parse_time(
                        table, row[idx["start"]], "Start_Timestamp"
                    )
                    if duration < 0:
                        raise table.error(
                            "End_Timestamp is before Start_Timestamp", fix="the file is corrupt; re-run the profiler"
                        )
                entry = dispatches[key] = [kernel, duration, None]
            if counter == NCU_DURATION:
                entry[2] = value
    _collect_dispatches(src, dispatches)
    return src


def _collect_dispatches(src: CounterSource, dispatches: dict[tuple[str, ...], list]) -> None:
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
            start = parse_time(table, row[idx["start"]], "Start_Timestamp")
            end = parse_time(table, row[idx["end"]], "End_Timestamp")
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
            span = parse_time(table, row[idx["end"]], "End_Timestamp") - parse_time(
                table, row[idx["start"]], "Start_Timestamp"
            )
            if span < 0:
                raise table.error("End_Timestamp is before Start_Timestamp",
                                  fix="the file is corrupt; re-run the profiler")
            stats.total_ns += span
    return copies

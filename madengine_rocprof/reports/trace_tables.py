"""Per-event tables of one trace, for the analyses that follow links between events (collectives, efficiency from
shapes, idle time, launch latency): /work/coord/TABLES.md is the interface, docs/reports.md says what each holds.

- Kineto (PyTorch profiler) traces: collected by kineto_reader in the same pass as the report's kernel statistics
  (same bounded block decoder, limits and errors), kept on `TimingSource.tables`. Strings and ids are held as codes
  in integer arrays while reading; the frames are built once at the end.
- rocprofv3-format CSV folders (rocprofv3's and the embedded tracer's): kernels with their Correlation_Id from
  `*kernel_trace.csv`, host API calls from the same process's `*hip_api_trace.csv`, copies from its
  `*memory_copy_trace.csv`, read through the CSV layer (csv_tables: the same number rules and errors as the report).

Times are absolute nanoseconds (Int64, Int128 where a value passes 2^63). Text columns: Categorical in a Kineto
trace's kernels, copies, runtime and cpu_ops (millions of rows, few distinct texts), String in comms and CSV tables;
cpu_ops' and runtime's pid/tid/external_id Int32 where every value fits (kineto_reader.narrow_ids). Links: a kernel's
`correlation` equals its launching runtime call's `correlation`; a runtime call's `external_id` equals its enclosing
CPU operator's.
"""

from __future__ import annotations

import array
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from madengine_rocprof import inputs
from madengine_rocprof.reports import csv_readers, dispatches, kineto_native, kineto_reader
from madengine_rocprof.reports.csv_tables import open_table, parse_int, parse_time
from madengine_rocprof.reports.kineto_reader import nullable as _nullable
from madengine_rocprof.reports.model import Iteration, TimingSource
from madengine_rocprof.wrapper import file_kinds

RANK_PREFIX = re.compile(r"^rank(\d+)_")  # per-rank file names under a launcher: rank<r>_<pid>_kernel_trace.csv
AGENT_NUMBER = re.compile(r"(\d+)\s*$")  # "Agent 4" (rocprofv3 7.x), "4" (6.x): the device number

GPU_COLUMNS = ("name", "device", "stream", "start", "end", "correlation", "external_id")
RUNTIME_COLUMNS = ("name", "pid", "tid", "start", "end", "correlation", "external_id")
CPU_COLUMNS = ("name", "pid", "tid", "start", "end", "external_id", "input_dims", "input_types", "input_strides",
               "concrete_inputs")
COMM_COLUMNS = ("name", "pid", "tid", "start", "end", "external_id", "collective", "in_nelems", "out_nelems",
                "dtype", "group_size", "pg_name", "pg_desc", "seq", "ranks")
_STRING_COLUMNS = {"name", "cat", "input_dims", "input_types", "input_strides", "concrete_inputs", "collective",
                   "dtype", "pg_name", "pg_desc", "ranks"}


class TraceTables:
    """One trace's events as frames (columns above; extra columns may follow them). A frame is built on first use
    (a report that asks for no table pays for none of its frames: a CPU run's millions of operators stay compact)."""

    FRAMES = {"kernels": GPU_COLUMNS, "copies": GPU_COLUMNS, "runtime": RUNTIME_COLUMNS, "cpu_ops": CPU_COLUMNS,
              "comms": COMM_COLUMNS}

    def __init__(self, path: Path, fmt: str, rank: int | None, world_size: int | None, *,
                 distributed: dict | None = None, device_properties: list[dict] | None = None,
                 steps: list[Iteration] | None = None,
                 **frames: pl.DataFrame | Callable[[], pl.DataFrame]) -> None:
        self.path = path
        self.fmt = fmt  # "kineto" or "rocprofv3-csv"
        self.rank = rank  # Kineto distributedInfo.rank, or from per-rank file names (rank0_/rank1_)
        self.world_size = world_size
        self.distributed = distributed or {}
        self.device_properties = device_properties or []
        self.steps = steps or []
        unknown = set(frames) - set(self.FRAMES)
        if unknown:
            raise TypeError(f"unknown tables: {sorted(unknown)}")
        self._frames: dict[str, pl.DataFrame | Callable[[], pl.DataFrame]] = frames

    def _frame(self, key: str) -> pl.DataFrame:
        value = self._frames.get(key)
        if value is None:
            value = empty(self.FRAMES[key])
        elif callable(value):
            value = value()
        self._frames[key] = value
        return value

    @property
    def kernels(self) -> pl.DataFrame:
        return self._frame("kernels")

    @property
    def copies(self) -> pl.DataFrame:
        return self._frame("copies")

    @property
    def runtime(self) -> pl.DataFrame:
        return self._frame("runtime")

    @property
    def cpu_ops(self) -> pl.DataFrame:
        return self._frame("cpu_ops")

    @property
    def comms(self) -> pl.DataFrame:
        return self._frame("comms")


def empty(columns: tuple[str, ...], text: Any = pl.String) -> pl.DataFrame:
    return pl.DataFrame(schema={c: text if c in _STRING_COLUMNS else pl.Int64 for c in columns})


def load_tables(src: TimingSource) -> TraceTables | None:
    """The tables of a timing source, or None for formats that carry no per-event links (stats, counters, rocpd,
    JSON, pftrace). Read once: a Kineto trace's come from the report's own pass, others are kept on src."""
    if src.tables is not None:
        return src.tables
    if not src.path.is_file():  # a source built in memory by a caller of build_report: no file to read tables from
        return None
    if src.fmt == kineto_reader.FORMAT:
        src.tables = from_kineto(src.path, kineto_reader._read(src.path, tables=True, native=kineto_native.read))
    elif src.fmt == "rocprofv3-csv" and not src.cpu_operators:
        src.tables = from_rocprofv3_csv(src.path)
    return src.tables


# ---------------------------------------------------------------- Kineto


def _lookup(codes: array.array, values: list[Any], dtype: Any) -> pl.Series:
    """Codes (NULL: absent) -> the values they stand for."""
    return pl.Series(values, dtype=dtype).gather(_nullable(codes))


def _as_text(column: pl.Series) -> pl.Series:
    """A categorical column as strings, gathered from its few distinct texts: a cast copies each row's text first
    (5.5M CPU operators with shapes: 0.3 GB more at the peak, and more CPU)."""
    if column.dtype != pl.Categorical:
        return column.cast(pl.String)
    distinct = column.unique().drop_nulls()
    codes = distinct.to_physical()
    if not len(codes):
        return pl.repeat(None, len(column), dtype=pl.String, eager=True).alias(column.name)
    texts = pl.Series([None], dtype=pl.String).extend_constant(None, int(codes.max()))  # type: ignore[arg-type]
    texts.scatter(codes, distinct.cast(pl.String))
    return texts.gather(column.to_physical()).alias(column.name)


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int and -(2**63) <= value < 2**63 else None


def _times(start: array.array, end: array.array, base: int) -> tuple[pl.Series, pl.Series]:
    wide = dispatches.time_dtype(base + min(start, default=0), base + max(end, default=0))
    offset = pl.Series([base], dtype=wide)
    return (pl.Series(start, dtype=pl.Int64).cast(wide) + offset, pl.Series(end, dtype=pl.Int64).cast(wide) + offset)


def _times_of(frame: pl.DataFrame, base: int) -> tuple[pl.Expr, pl.Expr]:
    """start and end columns made absolute (Int128 where base + a time passes 2^63)."""
    wide = dispatches.time_dtype(base + (frame["start"].min() or 0), base + (frame["end"].max() or 0))  # type: ignore
    return ((pl.col("start").cast(wide) + pl.lit(base, dtype=wide)).alias("start"),
            (pl.col("end").cast(wide) + pl.lit(base, dtype=wide)).alias("end"))


def from_kineto(path: Path, read: kineto_reader.Read) -> TraceTables:
    """The frames of a trace read by kineto_reader with tables=True."""
    got, base = read.got, read.base
    assert got.host_frames is not None, "kineto_reader._read(tables=True) collects them"
    names = list(got.names)
    devices = [_int_or_none(d) for d in got.devices]

    def gpu(columns: kineto_reader._Columns) -> pl.DataFrame:
        if not len(columns):
            return empty(GPU_COLUMNS, pl.Categorical)
        start, end = _times(columns.start, columns.end, base)
        return pl.DataFrame({
            "name": _lookup(columns.name, names, pl.Categorical), "device": _lookup(columns.device, devices, pl.Int64),
            "stream": _nullable(columns.stream), "start": start, "end": end,
            "correlation": _nullable(columns.correlation), "external_id": _nullable(columns.external_id),
        })

    def host(frame: pl.DataFrame, wanted: tuple[str, ...], text: Any = pl.Categorical) -> pl.DataFrame:
        """A host table: the reader's frame with times absolute. Names and texts stay Categorical (the reader's
        codes: millions of CPU operators' names and shapes as String would take ~0.4 GB more); the few collectives'
        texts become String."""
        if not frame.height:
            return empty(wanted, text).with_columns(pl.lit(None, dtype=text).alias("cat"))
        start, end = _times_of(frame, base)
        out = frame.select(*[(start if key == "start" else end) if key in ("start", "end") else pl.col(key)
                             for key in wanted], pl.col("cat"))
        return out.with_columns([_as_text(out[key]) if text is pl.String else out[key].cast(pl.Categorical)
                                 for key in out.columns if key in _STRING_COLUMNS])

    # each host frame is handed over once, when its table is built: the reader's copy (categorical names, relative
    # times) is then freed, not kept beside the table for the rest of the report
    frames = got.host_frames or {}
    info = read.distributed
    world = info.get("world_size")
    return TraceTables(
        path, kineto_reader.FORMAT, read.rank, world if type(world) is int and world > 0 else None,
        distributed=info, device_properties=read.device_properties,
        kernels=lambda: gpu(got.kernels), copies=lambda: gpu(got.copies),
        runtime=lambda: host(frames.pop("runtime"), RUNTIME_COLUMNS),
        cpu_ops=lambda: host(frames.pop("cpu"), CPU_COLUMNS),
        comms=lambda: host(frames.pop("comms"), COMM_COLUMNS, pl.String),
        steps=[Iteration(n, base + s, base + e) for n, (s, e) in sorted(got.steps.items())],
    )


# ---------------------------------------------------------------- rocprofv3-format CSV


def _sibling(path: Path, kind: str) -> Path | None:
    """The same process's file of another kind (`rank0_123_kernel_trace.csv` -> `rank0_123_hip_api_trace.csv`)."""
    prefix = file_kinds.split_name(path.name)[1]
    other = path.with_name(f"{prefix}_{kind}.csv" if prefix else f"{kind}.csv")
    return other if inputs.is_regular(other) else None


def _agent(text: str) -> int | None:
    match = AGENT_NUMBER.search(text)
    return int(match.group(1)) if match and len(match.group(1)) < 19 else None


def _optional_int(table: Any, row: list[str], index: int | None, column: str) -> int | None:
    if index is None or not row[index].strip():
        return None
    return parse_int(table, row[index], column)


# a whole number the fast path takes as it is (anything else, signs, blanks, decimals, goes through parse_int)
_PLAIN_INT = r"^[0-9]{1,18}$"


def _fast_kernels(path: Path) -> pl.DataFrame | None:
    """kernel_trace.csv through polars (csv_readers.fast_columns): the same frame as the csv-module loop of
    `_gpu_csv`, or None where a value needs that loop's exact rules or errors (which then reads the file)."""
    frame = csv_readers.fast_columns(path, {"name": ("Kernel_Name",), "agent": ("Agent_Id",),
                                            "stream": ("Stream_Id", "Queue_Id"), "correlation": ("Correlation_Id",)},
                                     {"start": ("Start_Timestamp",), "end": ("End_Timestamp",)})
    if frame is None:
        return None
    ints = [c for c in ("stream", "correlation") if c in frame.columns]
    # an empty field is None; a value other than plain digits is left to parse_int (its rules, its errors)
    if frame.select(pl.any_horizontal([((pl.col(c) != "") & ~pl.col(c).str.contains(_PLAIN_INT)).any()
                                       for c in ints] or [pl.lit(False)])).item():
        return None
    # few distinct agents: each mapped by `_agent` itself, so "Agent 4", "4" and odd texts read as the loop reads them
    device = pl.lit(None, pl.Int64)
    if "agent" in frame.columns:
        agents = frame["agent"].unique().to_list()
        device = pl.col("agent").replace_strict(agents, [_agent(a) for a in agents], return_dtype=pl.Int64)

    def whole(column: str) -> pl.Expr:
        return pl.when(pl.col(column) != "").then(pl.col(column)).cast(pl.Int64) if column in ints \
            else pl.lit(None, pl.Int64)

    return frame.select(pl.col("name"), device.alias("device"), whole("stream").alias("stream"), pl.col("start"),
                        pl.col("end"), whole("correlation").alias("correlation"),
                        pl.lit(None, pl.Int64).alias("external_id"))


def _gpu_csv(path: Path, kind: str, kernel_devices: frozenset = frozenset()) -> pl.DataFrame:
    """kernel_trace.csv or memory_copy_trace.csv rows with their device, stream and correlation id."""
    if kind == "kernel":
        fast = _fast_kernels(path)
        if fast is not None:
            return fast
    rows: dict[str, list] = {c: [] for c in GPU_COLUMNS}
    required: dict[str, tuple[str, ...]]
    if kind == "kernel":
        required = {"name": ("Kernel_Name",), "start": ("Start_Timestamp",), "end": ("End_Timestamp",)}
        optional = {"agent": ("Agent_Id",), "stream": ("Stream_Id", "Queue_Id"), "correlation": ("Correlation_Id",)}
    else:
        required = {"name": ("Direction",), "start": ("Start_Timestamp",), "end": ("End_Timestamp",)}
        optional = {"agent": ("Destination_Agent_Id",), "source": ("Source_Agent_Id",), "stream": ("Stream_Id",),
                    "correlation": ("Correlation_Id",)}
    with open_table(path, required, optional) as table:
        idx = table.index
        for row in table.rows():
            start = parse_time(table, row[idx["start"]], "Start_Timestamp")
            end = parse_time(table, row[idx["end"]], "End_Timestamp")
            if end < start:
                raise table.error(f"End_Timestamp {end} is before Start_Timestamp {start}",
                                  fix="the file is corrupt; re-run the profiler")
            rows["name"].append(row[idx["name"]])
            device = _agent(row[idx["agent"]]) if idx["agent"] is not None else None
            if idx.get("source") is not None:  # a copy: its device as the report's timeline counts it (csv_readers):
                source = _agent(row[idx["source"]])  # the destination, unless only the source ran kernels
                if device not in kernel_devices and source in kernel_devices or device is None:
                    device = source
            rows["device"].append(device)
            rows["stream"].append(_optional_int(table, row, idx["stream"], "Stream_Id"))
            rows["start"].append(start)
            rows["end"].append(end)
            rows["correlation"].append(_optional_int(table, row, idx["correlation"], "Correlation_Id"))
            rows["external_id"].append(None)
    return _csv_frame(rows)


def _runtime_csv(path: Path) -> pl.DataFrame:
    rows: dict[str, list] = {c: [] for c in RUNTIME_COLUMNS}
    with open_table(path, {"name": ("Function",), "start": ("Start_Timestamp",), "end": ("End_Timestamp",)},
                    {"pid": ("Process_Id",), "tid": ("Thread_Id",), "correlation": ("Correlation_Id",)}) as table:
        idx = table.index
        for row in table.rows():
            start = parse_time(table, row[idx["start"]], "Start_Timestamp")
            end = parse_time(table, row[idx["end"]], "End_Timestamp")
            if end < start:
                raise table.error(f"End_Timestamp {end} is before Start_Timestamp {start}",
                                  fix="the file is corrupt; re-run the profiler")
            rows["name"].append(row[idx["name"]])
            rows["pid"].append(_optional_int(table, row, idx["pid"], "Process_Id"))
            rows["tid"].append(_optional_int(table, row, idx["tid"], "Thread_Id"))
            rows["start"].append(start)
            rows["end"].append(end)
            rows["correlation"].append(_optional_int(table, row, idx["correlation"], "Correlation_Id"))
            rows["external_id"].append(None)
    return _csv_frame(rows)


def _csv_frame(rows: dict[str, list]) -> pl.DataFrame:
    wide = dispatches.time_dtype(max(rows["end"], default=0))
    return pl.DataFrame(rows, schema={c: pl.String if c in _STRING_COLUMNS else (
        wide if c in ("start", "end") else pl.Int64) for c in rows})


def api_trace_of(kernel_trace: Path) -> Path | None:
    """The API-call trace (`hip_api_trace.csv`) beside a rocprofv3-format kernel trace, same prefix; None if absent."""
    return _sibling(kernel_trace, "hip_api_trace")


def from_rocprofv3_csv(path: Path) -> TraceTables:
    """A process's kernel trace, with its API calls and copies when the same prefix has them."""
    rank = RANK_PREFIX.match(path.name)
    runtime = api_trace_of(path)
    copies = _sibling(path, "memory_copy_trace")
    kernels = _gpu_csv(path, "kernel")
    devices = frozenset(kernels["device"].drop_nulls().unique().to_list())
    return TraceTables(
        path, "rocprofv3-csv", int(rank.group(1)) if rank else None, None,
        kernels=kernels,
        copies=_gpu_csv(copies, "copy", devices) if copies else empty(GPU_COLUMNS),
        runtime=_runtime_csv(runtime) if runtime else empty(RUNTIME_COLUMNS),
    )

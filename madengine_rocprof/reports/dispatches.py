"""Per-dispatch tables (kernel name, start, end, device) aggregated with polars: kernel statistics and busy time.

Every source with a per-dispatch timeline (kernel_trace.csv, legacy results.csv, rocprofv3 JSON, rocpd, Kineto)
becomes one polars DataFrame with the columns of DISPATCH_SCHEMA, and `aggregate` fills the TimingSource from it:
calls, total, min and max per kernel name, first start and last end, and per device the busy time of the kernels
and of the same process's copies and memsets (a second table of the same schema), under two sets of definitions
(ours and Holistic Trace Analysis's; docs/reports.md, "Busy, idle and overlap").

Timestamps are unsigned 64-bit ns. Columns are Int64 (fast) while every value fits, else Int128 (`time_dtype`); sums
of durations are always taken in Int128, so two dispatches of 2^62 ns add up to exactly 2^63 ns.

Busy time of intervals sorted by start: each interval adds what it extends past the latest end seen before it,
max(0, end - max(start, latest earlier end)); the sum is the length of the union.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import polars as pl

from madengine_rocprof.inputs import INT64_MAX
from madengine_rocprof.reports import heap, id_lookup
from madengine_rocprof.reports.categories import categorize, classify_many
from madengine_rocprof.reports.model import BusyTime, DeviceTime, IterationTime, KernelStats, TimingSource

DISPATCH_SCHEMA = {"name": pl.String, "start": pl.Int64, "end": pl.Int64, "device": pl.String}

# groups of an interval, ours and HTA's (column `ours`, column `hta`)
COMPUTE, COMMUNICATION, COPY = 0, 1, 2
OUR_GROUP = {"communication": COMMUNICATION, "memory copy": COPY}  # kernel category -> group; others compute
# HTA 0.5.0 (hta/utils/utils.py): is_comm_kernel, is_memory_kernel; every other GPU event is computation
HTA_COMMUNICATION = re.compile(r"^nccl.*Kernel")
HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")


def time_dtype(*values: int) -> type[pl.Int64] | type[pl.Int128]:
    """Int64 while the given timestamps (lowest and highest) fit it, else Int128 (uint64 timestamps >= 2^63)."""
    return pl.Int64 if all(-INT64_MAX - 1 <= v <= INT64_MAX for v in values) else pl.Int128


def frame(rows: dict[str, list]) -> pl.DataFrame:
    """A dispatch table from Python lists (the JSON reader, the stdlib CSV path)."""
    wide = time_dtype(max(rows["end"], default=0), max(rows["start"], default=0))
    return pl.DataFrame(rows, schema=DISPATCH_SCHEMA | {"start": wide, "end": wide})


def _same_time_dtype(frames: list[pl.DataFrame], *bounds: int) -> list[pl.DataFrame]:
    """Int128 time columns for all frames if one of them (or a bound to compare with) needs it."""
    if all(f.schema["start"] == pl.Int64 and f.schema["end"] == pl.Int64 for f in frames) and \
            time_dtype(*bounds) == pl.Int64:
        return frames
    return [f.with_columns(pl.col("start", "end").cast(pl.Int128)) for f in frames]


def union_ns(start: pl.Series, end: pl.Series) -> int:
    """Length of the union of the intervals [start, end), given sorted by start."""
    if start.len() == 0:
        return 0
    latest = end.cum_max().shift(1).fill_null(start[0])
    covered = end - pl.DataFrame({"s": start, "l": latest}).select(pl.max_horizontal("s", "l")).to_series()
    return int(covered.clip(lower_bound=0).sum())


def _hta_group(name: str) -> int:
    if HTA_COMMUNICATION.match(name):
        return COMMUNICATION
    return COPY if HTA_MEMORY.match(name) else COMPUTE


def _group_column(names: list[str], group_of) -> pl.Expr:
    """The group code of each row, from the group of each distinct name (is_in: fast on categorical names)."""
    by_group: dict[int, list[str]] = {}
    for name in names:
        by_group.setdefault(group_of(name), []).append(name)
    expr = pl.lit(COMPUTE, dtype=pl.Int8)
    for group in (COMMUNICATION, COPY):
        if by_group.get(group):
            expr = pl.when(pl.col("name").is_in(by_group[group])).then(pl.lit(group, dtype=pl.Int8)).otherwise(expr)
    return expr


def busy_time(part: pl.DataFrame, into: BusyTime) -> None:
    """Fill `into` from intervals (columns start, end, ours, hta) sorted by start."""
    busy = union_ns(part["start"], part["end"])
    total = part.height

    def union_where(mask: pl.Series) -> int:
        selected = int(mask.sum())
        if selected == 0:
            return 0
        if selected == total:  # one group only (the common single-GPU case): no copy of the table
            return busy
        sub = part.select("start", "end").filter(mask)  # only the columns the union reads are copied
        return union_ns(sub["start"], sub["end"])

    into.busy_ns = busy
    for column, prefix in (("ours", ""), ("hta", "hta_")):
        group = part[column]
        compute = union_where(group == COMPUTE)
        comm = union_where(group == COMMUNICATION)
        # overlap of compute and communication: |A| + |B| - |A u B|
        overlap = compute + comm - union_where(group != COPY) if comm and compute else 0
        setattr(into, f"{prefix}compute_busy_ns", compute)
        setattr(into, f"{prefix}comm_busy_ns", comm)
        setattr(into, f"{prefix}overlap_ns", overlap)
    into.copy_busy_ns = union_where(part["ours"] == COPY)


def _launch_windows(part: pl.DataFrame, its: list) -> tuple[list[int], list[int], pl.Expr] | None:
    """Device windows of the iterations from launch links, or None to keep the host-window cut.

    Each kernel or copy belongs to the iteration whose host window [start, end) holds its launching runtime call
    (column `launch`; a row without a link: its own start). Iteration i's device window runs from D_i to E_i:
    D_i = max(host start, last end of the device work launched before it), E_i = max(host end, last end of the work
    launched before the host end). Host windows that tile give device windows that tile, and every interval launched
    in a window ends inside that iteration's device window (docs/reports.md, "Per iteration").
    """
    if "launch" not in part.columns or part["launch"].null_count() == part.height:
        return None
    lo = [it.start_ns for it in its]
    hi = [it.end_ns for it in its]
    if lo != sorted(lo) or hi != sorted(hi):
        return None
    key = part.select(pl.coalesce("launch", "start").alias("key"), "end").sort("key")
    latest = key["end"].cum_max()  # last end of the work launched up to each key
    # for every window edge t at once: the later of t and the last end of the work launched before t
    edges = lo[1:] + hi
    before = key["key"].search_sorted(pl.Series(edges, dtype=key.schema["key"]), side="left").to_list()
    ended = latest.gather([max(n - 1, 0) for n in before]).to_list()  # the part has rows: launch is not all null
    ended_by = [t if n == 0 else max(t, int(e)) for t, n, e in zip(edges, before, ended, strict=True)]
    device_lo = [lo[0]] + ended_by[:len(lo) - 1]
    device_hi = ended_by[len(lo) - 1:]
    starts = pl.Series("lo", lo, dtype=part.schema["start"])
    ends = pl.Series("hi", hi, dtype=part.schema["start"])
    keys = part.select(pl.coalesce("launch", "start")).to_series()
    index = starts.search_sorted(keys, side="right").cast(pl.Int64) - 1
    within = (index >= 0) & (keys < ends.gather(index.clip(lower_bound=0)))
    owner = index.zip_with(within, pl.Series([-1] * part.height, dtype=pl.Int64)).alias("owner")
    return device_lo, device_hi, pl.lit(owner)


def _iterations(part: pl.DataFrame, src: TimingSource) -> list[IterationTime]:
    """Device time inside each marked iteration's window: intervals cut at the window's edges, every window at once.

    Windows: the host windows (ProfilerStep spans), or, when the rows carry launch links, the device windows of
    `_launch_windows`; a kernel is counted in (dispatches, kernel time) the iteration that launched it, or without
    links the window it starts in.

    Each interval is repeated for every window it overlaps (when the windows' starts and ends are both in order, those
    are a contiguous run found by two searches), cut to the window, and the unions of `busy_time` are taken per window
    in one polars query each: the cost grows with the intervals, not with intervals x windows (1,000 windows of a
    1M-kernel trace took 9.7 s one window at a time). Windows out of order fall back to one window at a time.
    """
    its = src.iterations
    by_launch = _launch_windows(part, its) if its else None
    if by_launch is not None:
        win_lo, win_hi, owner = by_launch
        part = part.with_columns(owner=owner)
    else:
        win_lo, win_hi = [it.start_ns for it in its], [it.end_ns for it in its]
    lo = pl.Series("lo", win_lo, dtype=part.schema["start"])
    hi = pl.Series("hi", win_hi, dtype=part.schema["start"])
    if not (lo.is_sorted() and hi.is_sorted()):
        return [_window(part, it) for it in its]
    base = win_lo[0] if its else 0
    first = hi.search_sorted(part["start"], side="right").cast(pl.Int64)  # the first window that ends after the start
    last = lo.search_sorted(part["end"], side="left").cast(pl.Int64) - 1  # the last that starts before the end
    # most traces put each interval in one window at most: it is then that window, with no row repeated, and rows
    # sorted by start stay sorted by (window, start in it); lazy, so each column is dropped once no step reads it
    single = bool((last <= first).all())
    cut_q = part.lazy().with_columns(first=first, last=last).filter(pl.col("first") <= pl.col("last"))
    cut_q = cut_q.with_columns(it=pl.col("first")) if single else cut_q.with_columns(
        it=pl.int_ranges("first", pl.col("last") + 1)).explode("it")
    del first, last
    cut = (
        cut_q.with_columns(lo=pl.lit(lo).gather(pl.col("it")), hi=pl.lit(hi).gather(pl.col("it")))
        .with_columns(
            # in the window: relative to the first window's start, so Int64 whatever the timestamps' width
            s=(pl.max_horizontal("start", "lo") - base).cast(pl.Int64),
            e=(pl.min_horizontal("end", "hi") - base).cast(pl.Int64),
            counted=(pl.col("start") >= pl.col("lo")) & ~pl.col("copy_engine"),
        )
        # the kernels' own time per window, read below only where no launch links say which window owns a kernel
        .with_columns(*([] if by_launch is not None else [(pl.col("end") - pl.col("start")).cast(pl.Int128)
                                                          .alias("duration")]))
        .select("it", "s", "e", "ours", "hta", "counted", *([] if by_launch is not None else ["duration"]))
        .collect()
    )
    if not (single and cut.select(((pl.col("it").diff() > 0) | (pl.col("it").diff() == 0) & (pl.col("s").diff() >= 0))
                                  .fill_null(True).all()).item()):
        cut = cut.sort(["it", "s"], maintain_order=True)

    def union(mask: pl.Expr) -> dict[int, int]:
        covered = (
            cut.lazy().filter(mask).select("it", "s", "e")
            .with_columns(latest=pl.col("e").cum_max().shift(1).over("it"))
            .select("it", (pl.col("e") - pl.max_horizontal("s", pl.col("latest").fill_null(pl.col("s"))))
                    .clip(lower_bound=0).cast(pl.Int128).alias("covered"))
            .group_by("it")
            .agg(pl.col("covered").sum())
            .collect()
        )
        return {int(i): int(c) for i, c in covered.iter_rows()}

    if by_launch is not None:  # the kernels each iteration launched, wherever they ran
        owned = part.filter(~pl.col("copy_engine") & (pl.col("owner") >= 0)).group_by("owner").agg(
            pl.len(), (pl.col("end") - pl.col("start")).cast(pl.Int128).sum())
    else:  # the kernels that start in the window
        owned = cut.group_by("it").agg(pl.col("counted").sum(), pl.col("duration").filter(pl.col("counted")).sum())
    counts = {int(i): (int(n), int(t)) for i, n, t in owned.iter_rows()}
    busy = union(pl.lit(True))
    ours = {g: union(pl.col("ours") == g) for g in (COMPUTE, COMMUNICATION, COPY)}
    hta = {g: union(pl.col("hta") == g) for g in (COMPUTE, COMMUNICATION)}
    ours_no_copy, hta_no_copy = union(pl.col("ours") != COPY), union(pl.col("hta") != COPY)
    out = []
    for i, it in enumerate(its):
        row = IterationTime(number=it.number, start_ns=win_lo[i], end_ns=win_hi[i], host_start_ns=it.start_ns,
                            host_end_ns=it.end_ns, by_launch=by_launch is not None)
        row.dispatches, row.kernel_time_sum_ns = counts.get(i, (0, 0))
        row.busy_ns = busy.get(i, 0)
        for prefix, groups, no_copy in (("", ours, ours_no_copy), ("hta_", hta, hta_no_copy)):
            compute, comm = groups[COMPUTE].get(i, 0), groups[COMMUNICATION].get(i, 0)
            setattr(row, f"{prefix}compute_busy_ns", compute)
            setattr(row, f"{prefix}comm_busy_ns", comm)
            setattr(row, f"{prefix}overlap_ns", compute + comm - no_copy.get(i, 0) if comm and compute else 0)
        row.copy_busy_ns = ours[COPY].get(i, 0)
        out.append(row)
    return out


def _window(part: pl.DataFrame, it) -> IterationTime:
    """One host window's device time (windows out of order, so no launch windows). Clipping keeps the order by
    start, so no sort is needed."""
    upto = int(part["start"].search_sorted(it.end_ns, side="left"))  # rows that start before the window ends
    window = part.slice(0, upto).filter(pl.col("end") > it.start_ns)
    row = IterationTime(number=it.number, start_ns=it.start_ns, end_ns=it.end_ns, host_start_ns=it.start_ns,
                        host_end_ns=it.end_ns)
    counted = window.filter((pl.col("start") >= it.start_ns) & ~pl.col("copy_engine"))
    row.dispatches = counted.height
    row.kernel_time_sum_ns = int((counted["end"] - counted["start"]).cast(pl.Int128).sum())
    window = window.with_columns(
        pl.col("start").clip(lower_bound=it.start_ns), pl.col("end").clip(upper_bound=it.end_ns)
    )
    busy_time(window, row)
    return row


def launch_times(gpu: pl.DataFrame, runtime: pl.DataFrame) -> pl.Series:
    """Per GPU row (column `correlation`), the start of the runtime call with the same correlation id, null where
    none (runtime correlation ids are unique within a process; a CUDA graph's kernels share their cudaGraphLaunch's;
    where a trace repeats an id, its first call counts)."""
    return id_lookup.lookup(_launch_calls(runtime, gpu.schema["correlation"]), "correlation",
                            gpu["correlation"])["launch"]


# the last runtime table's calls by correlation id: the reader asks for its kernels' and copies' launches and the idle
# analysis again for the tables' (a million calls: one pass, not four). Keyed by the frame's identity, held weakly
_LAUNCH_CALLS: dict[str, Any] = {"frame": None, "dtype": None, "calls": None}


def _launch_calls(runtime: pl.DataFrame, dtype: Any) -> pl.DataFrame:
    """correlation (sorted, each id once: id_lookup.index) -> launch (the start of the id's first call)."""
    cached = _LAUNCH_CALLS["frame"]
    if cached is not None and cached() is runtime and _LAUNCH_CALLS["dtype"] == dtype:
        return _LAUNCH_CALLS["calls"]
    calls = id_lookup.index(runtime.select(pl.col("correlation").cast(dtype), pl.col("start").alias("launch")),
                            "correlation")
    _LAUNCH_CALLS.update(frame=weakref.ref(runtime), dtype=dtype, calls=calls)
    return calls


def _launch_column(table: pl.DataFrame, launches: bool) -> list[pl.Expr]:
    """The `launch` column (start of the launching runtime call, null without a link) when the rows carry links."""
    if not launches:
        return []
    if "launch" in table.columns:
        return [pl.col("launch").cast(table.schema["start"])]
    return [pl.lit(None, dtype=table.schema["start"]).alias("launch")]


def aggregate(src: TimingSource, table: pl.DataFrame, copies: pl.DataFrame | None = None) -> TimingSource:
    """Fill src from a dispatch table (columns: name, start, end, device); durations must not be negative.

    `copies`: the same process's memory copies and memsets on the devices (DISPATCH_SCHEMA; `name` says what they
    are, e.g. `Memcpy HtoD`), when the input has them (rocprofv3 memory_copy_trace, Kineto memcpy/memset); they count
    towards device busy time and the span (see docs/reports.md), not towards kernel statistics.
    Readers set src.iterations (and src.rank) before calling: per-iteration device time is computed here.
    An optional column `launch` in either table (ns, the start of the row's launching runtime call; null where the
    trace links none) makes iterations own the work they launched (`_launch_windows`); without it, or with no link at
    all, device time is cut at the host windows.
    """
    iteration_bounds = [t for it in src.iterations for t in (it.start_ns, it.end_ns)]
    table, *rest = _same_time_dtype([table] + ([copies] if copies is not None else []), *iteration_bounds)
    copies = rest[0] if rest else None
    duration = (pl.col("end") - pl.col("start")).cast(pl.Int128)  # sums never wrap
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
    if copies is not None and copies.height == 0:
        copies = None
    if not table.height and copies is None:
        return src
    launches = any("launch" in t.columns for t in (table, copies) if t is not None)
    # device labels as the readers give them (a Kineto trace's are Categorical: 4 bytes a row), String where the
    # two tables differ
    device = pl.col("device") if copies is None or copies.schema["device"] == table.schema["device"] else pl.col(
        "device").cast(pl.String)
    classify_many(src.kernels)  # every name's category at once, then each `categorize` below is a look-up
    parts = [
        table.select(
            "start",
            "end",
            device,
            _group_column(list(src.kernels), lambda n: OUR_GROUP.get(categorize(n), COMPUTE)).alias("ours"),
            _group_column(list(src.kernels), _hta_group).alias("hta"),
            pl.lit(False).alias("copy_engine"),
            *_launch_column(table, launches),
        )
    ]
    if copies is not None:  # copies and memsets: copies in our groups, memory in HTA's
        parts.append(
            copies.select(
                "start",
                "end",
                device,
                pl.lit(COPY, dtype=pl.Int8).alias("ours"),
                pl.lit(COPY, dtype=pl.Int8).alias("hta"),
                pl.lit(True).alias("copy_engine"),
                *_launch_column(copies, launches),
            )
        )
    events = pl.concat(parts) if len(parts) > 1 else parts[0]
    src.first_start_ns, src.last_end_ns = events.select(pl.col("start").min(), pl.col("end").max()).row(0)
    devices = sorted(events["device"].unique().to_list(), key=str)
    for device in devices:  # one device at a time, only the columns the unions need: memory stays small
        part = events if len(devices) == 1 else events.filter(pl.col("device") == device)
        part = part.drop("device")
        if not part["start"].is_sorted():  # traces are mostly written in start order: skip the sort then
            part = part.sort("start")
        kernel_count, kernel_ns = part.select((~pl.col("copy_engine")).sum(),
                                              duration.filter(~pl.col("copy_engine")).sum()).row(0)
        row = DeviceTime(
            device=str(device),
            dispatches=kernel_count,
            copies=part.height - kernel_count,
            span_ns=int(part["end"].max() - part["start"][0]),
            kernel_time_sum_ns=int(kernel_ns or 0),
        )
        busy_time(part, row)
        if src.iterations:
            heap.release()  # the unions' frames, before the windows' (a 1M-kernel trace: ~0.1 GB of the peak)
            row.iterations = _iterations(part, src)
        src.devices.append(row)
    return src

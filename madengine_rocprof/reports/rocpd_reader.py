"""rocpd SQLite output (rocprofv3 7.x `-f rocpd`, results.db), read through its unsuffixed views.

`kernels` gives per-dispatch times (ns); without it `top_kernels` gives totals (microseconds);
`counters_collection` gives counter values per dispatch.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import dispatches
from madengine_rocprof.reports.csv_readers import check_dispatches
from madengine_rocprof.reports.csv_tables import MAX_NUMBER
from madengine_rocprof.reports.model import CounterSource, CounterStats, KernelStats, TimingSource
from madengine_rocprof.reports.sqlite_frames import fetch_rows, read_columns, uri

FIX = "the database is truncated or corrupt, or not a rocpd file; re-run rocprofv3 with -f rocpd"


# Work SQLite may do per byte of the file (virtual-machine instructions), plus a fixed allowance. Reading rocpd's
# tables and views costs a few instructions per byte; a view that recurses or cross-joins without end (a crafted or
# corrupt schema) would run forever: it is stopped at this budget, not hung on.
STEPS_PER_BYTE = 200
STEPS_BASE = 500_000_000
_STEP_CHECK = 100_000  # instructions between two looks at the budget


@contextmanager
def _connect(path: Path):
    size = inputs.check_regular(path, "rocpd database", inputs.STREAM_LIMIT)
    try:
        con = sqlite3.connect(uri(path), uri=True)
    except sqlite3.Error as err:
        raise UserError(f"cannot open SQLite database: {err}", file=str(path), fix=FIX) from None
    budget = [STEPS_BASE + STEPS_PER_BYTE * size]

    def spend() -> int:
        budget[0] -= _STEP_CHECK
        return budget[0] < 0  # non-zero: SQLite interrupts the statement

    con.set_progress_handler(spend, _STEP_CHECK)
    try:
        yield con
    except sqlite3.Error as err:
        if budget[0] < 0:
            raise UserError("the database's views compute far more rows than the file holds (a view that recurses "
                            "or joins without end)", file=str(path), fix=FIX) from None
        raise UserError(f"SQLite error: {err}", file=str(path), fix=FIX) from None
    finally:
        con.close()


def _objects(con) -> set[str]:
    return {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type IN ('view', 'table')")}


def _columns(con, view: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info(`{view}`)")}


def _sql_type(value: object) -> str:
    return "NULL" if value is None else {int: "an integer", float: "a real", bytes: "a blob"}.get(type(value), "text")


RAW_DISPATCH = ("kernel_id", "agent_id", "start", "end")  # rocpd_kernel_dispatch columns of rocpd 7.x


def _bounded(con, name: str) -> None:
    """Before a view is read by the Arrow reader (its own connections, outside _connect's work budget): walk it once
    here, within the budget. A table holds what the file holds; a view may compute without end."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?", (name,)).fetchone():
        con.execute(f"SELECT count(*) FROM `{name}`").fetchone()


def _dispatch_table(con, path: Path, objects: set[str], tracks: bool = False) -> pl.DataFrame:
    """Per-dispatch (name, start, end, device, and with `tracks` "agent A queue Q"). From rocpd_kernel_dispatch's
    integer columns, named by joining the small symbol and agent tables in polars (categorical: 10M rows share ~100
    names), where present; else from the `kernels` view (a schema whose dispatch table lacks these columns). The one
    table builder of report, report --perfetto and compare."""
    raw_columns = _columns(con, "rocpd_kernel_dispatch") if "rocpd_kernel_dispatch" in objects else set()
    if {"rocpd_kernel_dispatch", "rocpd_info_kernel_symbol", "rocpd_info_agent"} <= objects and set(
        RAW_DISPATCH
    ) <= raw_columns:
        _bounded(con, "rocpd_kernel_dispatch")
        ids = {"guid": pl.String, "id": pl.Int64}
        symbols = fetch_rows(
            con, "SELECT guid, id, display_name FROM rocpd_info_kernel_symbol", ids | {"name": pl.String}
        )
        agents = fetch_rows(con, "SELECT guid, id, absolute_index FROM rocpd_info_agent", ids | {"agent": pl.Int64})
        on = ["guid"] if symbols["guid"].n_unique() > 1 else []  # a merged database: ids repeat per process (guid)
        symbols = _unique_ids(symbols, on, path, "rocpd_info_kernel_symbol")
        agents = _unique_ids(agents, on, path, "rocpd_info_agent")
        queue = ["queue_id"] if tracks and "queue_id" in raw_columns else []
        table = read_columns(
            con,
            path,
            "rocpd_kernel_dispatch",
            on + ["kernel_id", "agent_id", "start", "`end`"] + queue,
            ({"guid": pl.String} if on else {}) | {c: pl.Int64 for c in RAW_DISPATCH} | {c: pl.Int64 for c in queue},
            key="id",
        )
        names = symbols.select(*on, pl.col("id").alias("kernel_id"), pl.col("name").cast(pl.Categorical))
        devices = agents.select(
            *on, pl.col("id").alias("agent_id"), pl.format("agent {}", "agent").cast(pl.Categorical).alias("device")
        )
        track = pl.format("{} queue {}", "device", pl.col("queue_id") if queue else pl.lit(None)).alias("track")
        return (
            table.lazy()
            .join(names.lazy(), on=[*on, "kernel_id"], how="left", maintain_order="left")
            .join(devices.lazy(), on=[*on, "agent_id"], how="left", maintain_order="left")
            .select("name", "start", "end", "device", *([track] if tracks else []))
            .collect()
        )
    _bounded(con, "kernels")
    # a number among the names would be read as text by the Arrow reader: refuse it here
    if con.execute("SELECT 1 FROM kernels WHERE typeof(name) NOT IN ('text', 'null') LIMIT 1").fetchone():
        raise UserError("a kernel name in the kernels view is not text", file=str(path), where="kernels", fix=FIX)
    columns = _columns(con, "kernels")
    stream = "queue_id" if "queue_id" in columns else ("stream_id" if "stream_id" in columns else "NULL")
    return read_columns(
        con,
        path,
        "kernels",
        ["name", "start", "`end`", "'agent ' || agent_abs_index"]
        + ([f"'agent ' || agent_abs_index || ' queue ' || coalesce({stream}, 'None')"] if tracks else []),
        dispatches.DISPATCH_SCHEMA | ({"track": pl.String} if tracks else {}),
        None,
    )


def _checked_dispatches(con, path: Path, objects: set[str], tracks: bool = False) -> pl.DataFrame:
    table = _dispatch_table(con, path, objects, tracks)
    bad = pl.any_horizontal(pl.col("name", "start", "end").is_null()) | (pl.col("end") < pl.col("start")) | (
        pl.col("start") < 0)
    if table.select(bad.any()).item():
        raise UserError(
            "a kernel dispatch has no kernel symbol, a NULL time, or ends before it starts",
            file=str(path),
            where="kernels",
            fix=FIX,
        )
    check_dispatches(table, str(path))
    return table


def _unique_ids(info: pl.DataFrame, on: list[str], path: Path, name: str) -> pl.DataFrame:
    """A rocpd info table keyed by (guid,) id: a row listed twice is one row; one id with two different rows would
    join each dispatch twice (calls and time doubled, silently), so it is refused."""
    info = info.unique(maintain_order=True)
    clash = info.filter(pl.struct(*on, "id").is_duplicated())
    if clash.height:
        raise UserError(f"id {clash['id'][0]} appears in {name} with different values; every dispatch of it would "
                        f"count twice", file=str(path), where=name, fix=FIX)
    return info


COPY_COLUMNS = {"name", "start", "end", "dst_agent_abs_index", "src_agent_abs_index"}  # rocpd's memory_copies view


def _copy_table(con, objects: set[str], devices: set[str]) -> pl.DataFrame | None:
    """The `memory_copies` view as a dispatch table; the device is the destination agent if kernels ran there, else
    the source agent if they did, else the GPU side (`*_agent_type`), named as the kernel table names agents."""
    if "memory_copies" not in objects or not _columns(con, "memory_copies") >= COPY_COLUMNS:
        return None
    typed = {"dst_agent_type", "src_agent_type"} <= _columns(con, "memory_copies")
    types = "dst_agent_type, src_agent_type" if typed else "NULL, NULL"
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    query = f"SELECT name, start, `end`, dst_agent_abs_index, src_agent_abs_index, {types} FROM memory_copies"
    for name, start, end, dst, src, dst_type, _ in con.execute(query):
        dst_name, src_name = f"agent {dst}", f"agent {src}"
        if dst_name in devices or (src_name not in devices and str(dst_type).upper() != "CPU"):
            device = dst_name
        else:
            device = src_name
        rows["name"].append(str(name))
        rows["start"].append(int(start))
        rows["end"].append(int(end))
        rows["device"].append(device)
    return dispatches.frame(rows) if rows["name"] else None


def read_rocpd_kernels(src: TimingSource) -> TimingSource:
    with _connect(src.path) as con:
        objects = _objects(con)
        if "kernels" in objects or "rocpd_kernel_dispatch" in objects:
            table = _checked_dispatches(con, src.path, objects)
            copies = _copy_table(con, objects, {str(d) for d in table["device"].unique().to_list()})
            dispatches.aggregate(src, table, copies)
        elif "top_kernels" in objects:
            # durations in microseconds here; min/max are not in the view
            for n, (name, calls, total_us) in enumerate(
                    con.execute("SELECT name, total_calls, total_duration FROM top_kernels")):
                where = f"top_kernels row {n + 1}"
                if not isinstance(name, str):
                    raise UserError(f"{where}: name is {_sql_type(name)}, expected text", file=str(src.path), fix=FIX)
                calls = inputs.int_in_range(calls, str(src.path), f"{where}: total_calls")
                total_ns = inputs.finite(total_us, str(src.path), f"{where}: total_duration", low=0) * 1000.0
                if name in src.kernels:
                    raise UserError(f"{where}: kernel {name!r} appears twice", file=str(src.path), fix=FIX)
                src.kernels[name] = KernelStats(calls, total_ns)
                src.dispatches += calls
        elif "rocpd_metadata" not in objects and not any(o.startswith("rocpd_") for o in objects):
            raise UserError(
                "SQLite file without rocpd views (rocpd_kernel_dispatch, kernels or top_kernels)",
                file=str(src.path),
                fix=FIX,
            )
    return src


def iter_rocpd(path: Path) -> Iterator[tuple[str, int, int, str]]:
    """Each dispatch as (name, start, end, track), for the Perfetto writer and compare: the report's table."""
    with _connect(path) as con:
        objects = _objects(con)
        if "kernels" not in objects and "rocpd_kernel_dispatch" not in objects:
            return
        table = _checked_dispatches(con, path, objects, tracks=True)
    yield from table.sort("start", maintain_order=True).select(
        pl.col("name").cast(pl.String), "start", "end", "track").iter_rows()


def read_rocpd_counters(src: CounterSource) -> CounterSource:
    with _connect(src.path) as con:
        if "counters_collection" not in _objects(con):
            return src
        columns = _columns(con, "counters_collection")
        timed = {"start", "end", "dispatch_id"} <= columns
        # dispatch ids restart per process; a merged database holds several processes
        process = "guid" if "guid" in columns else ("pid" if "pid" in columns else "NULL")
        query = "SELECT kernel_name, counter_name, value" + (f", {process}, dispatch_id, start, `end`" if timed else "")
        seen = set()
        for n, row in enumerate(con.execute(query + " FROM counters_collection")):
            where = f"counters_collection row {n + 1}"
            kernel, counter = str(row[0]), str(row[1])
            value = inputs.finite(row[2], str(src.path), f"{where}: value")
            if abs(value) > MAX_NUMBER:
                raise UserError(f"{where}: value {value:g} is out of range", file=str(src.path), fix=FIX)
            src.counters.setdefault(counter, CounterStats()).add(value)
            src.by_kernel.setdefault((kernel, counter), CounterStats()).add(value)
            if timed and row[3:5] not in seen:
                seen.add(row[3:5])
                entry = src.kernel_time.setdefault(kernel, [0, 0])
                entry[0] += 1
                start = inputs.int_in_range(row[5], str(src.path), f"{where}: start")
                entry[1] += inputs.int_in_range(row[6], str(src.path), f"{where}: end", low=start) - start
    return src

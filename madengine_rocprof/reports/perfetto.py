"""Chrome JSON trace (the format ui.perfetto.dev and chrome://tracing open) for one run.

One process track per profiled process (origin), one thread track per GPU queue/stream, one complete
("X") event per kernel dispatch, timestamps in microseconds relative to the run's first dispatch.
Streams dispatches straight to the file, so memory stays bounded for large traces.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl

from madengine_rocprof.atomic import FileSet
from madengine_rocprof.reports.categories import categorize
from madengine_rocprof.reports.discover import dispatch_frame, iter_dispatches
from madengine_rocprof.reports.model import RunData
from madengine_rocprof.reports.output import atomic_writer


def has_timeline(run: RunData) -> bool:
    return any(s.has_timeline for s in run.timing)


def write_trace(run: RunData, path: Path, files: FileSet | None = None) -> int:
    """Write the trace (staged in `files`, the command's output set, when given); returns the number of dispatch
    events written."""
    sources = [s for s in run.timing if s.has_timeline]
    origin = min(s.first_start_ns or 0 for s in sources)  # a source with a timeline has a first start
    events = 0
    with files.open(path) if files is not None else atomic_writer(path) as fh:
        fh.write('{"displayTimeUnit":"ns","otherData":' + json.dumps({"run": run.label, "path": str(run.path),
                 "time_origin_ns": origin}, allow_nan=False) + ',"traceEvents":[\n')
        first = True

        def emit(event: dict) -> None:
            nonlocal first
            fh.write(("" if first else ",\n") + json.dumps(event, separators=(",", ":"), allow_nan=False))
            first = False

        for pid, source in enumerate(sources, start=1):
            emit(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": f"{run.label}: {source.process}"},
                }
            )
            frame = dispatch_frame(source)
            if frame is not None:
                events += _write_frame(frame, pid, origin, emit, fh.write)
                continue
            tracks: dict[str, int] = {}
            for name, start, end, track in iter_dispatches(source):
                tid = tracks.get(track)
                if tid is None:
                    tid = tracks[track] = len(tracks) + 1
                    emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": track}})
                emit({"name": name, "cat": categorize(name), "ph": "X", "pid": pid, "tid": tid,
                      "ts": round((start - origin) / 1e3, 3), "dur": round((end - start) / 1e3, 3)})
                events += 1
        fh.write("\n]}\n")
    return events


CHUNK_ROWS = 50_000  # event lines formatted and written at a time: the text of a million events is never held whole
EXACT_BELOW_NS = 10**15  # below this, a time's microseconds have at most 15 digits: the text below is json.dumps'


def _micros(ns: pl.Expr) -> pl.Expr:
    """Non-negative integer ns as json.dumps writes round(ns / 1e3, 3): the microseconds with their three decimals,
    trailing zeros dropped ("12.5", "7.0"). Exact for values with at most 15 digits (EXACT_BELOW_NS), where that
    decimal is the shortest text of the float."""
    decimals = (ns % 1000).cast(pl.String).str.zfill(3).str.strip_chars_end("0")
    return pl.concat_str((ns // 1000).cast(pl.String), pl.lit("."),
                         pl.when(decimals == "").then(pl.lit("0")).otherwise(decimals))


def _write_frame(frame: pl.DataFrame, pid: int, origin: int, emit: Callable[[dict], None],
                 write: Callable[[str], None]) -> int:
    """The X events of one source's dispatch frame (name, start, end, track), the same text the per-event path
    writes: each distinct name's JSON text and category once, lines built by polars a chunk at a time, a track's
    thread_name event written just before its first dispatch."""
    names = frame["name"].unique().drop_nulls().cast(pl.String).to_list()
    texts = {name: json.dumps(name) + ',"cat":' + json.dumps(categorize(name)) for name in names}
    tracks = frame.select(pl.col("track").unique(maintain_order=True))["track"].to_list()
    ids = {track: i for i, track in enumerate(tracks, start=1)}
    firsts = frame.select(pl.col("track").is_first_distinct().arg_true())[:, 0].to_list()
    rel = pl.col("start") - origin
    span = pl.col("end") - pl.col("start")
    fast = frame.select(((rel < EXACT_BELOW_NS) & (span < EXACT_BELOW_NS)).all()).item()
    written = 0
    cuts = sorted(set(firsts) | set(range(0, frame.height, CHUNK_ROWS)) | {frame.height})
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        part = frame.slice(lo, hi - lo)
        if lo in firsts:
            track = part["track"][0]
            emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": ids[track], "args": {"name": track}})
        if not fast:  # a time past 10^15 ns: the float's own text, event by event
            for name, start, end, track in part.select(pl.col("name").cast(pl.String), "start", "end",
                                                       "track").iter_rows():
                emit({"name": name, "cat": categorize(name), "ph": "X", "pid": pid, "tid": ids[track],
                      "ts": round((start - origin) / 1e3, 3), "dur": round((end - start) / 1e3, 3)})
            written += part.height
            continue
        lines = part.select(pl.concat_str(
            pl.lit(',\n{"name":'),
            pl.col("name").cast(pl.String).replace_strict(texts, return_dtype=pl.String),
            pl.lit(f',"ph":"X","pid":{pid},"tid":'),
            pl.col("track").replace_strict(ids, return_dtype=pl.Int64).cast(pl.String),
            pl.lit(',"ts":'), _micros(rel), pl.lit(',"dur":'), _micros(span), pl.lit("}")))[:, 0]
        write(lines.str.join("").item())
        written += part.height
    return written

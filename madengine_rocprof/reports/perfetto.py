"""Chrome JSON trace (the format ui.perfetto.dev and chrome://tracing open) for one run.

One process track per profiled process (origin), one thread track per GPU queue/stream, one complete
("X") event per kernel dispatch, timestamps in microseconds relative to the run's first dispatch.
Streams dispatches straight to the file, so memory stays bounded for large traces.
"""
from __future__ import annotations

import json
from pathlib import Path

from madengine_rocprof.atomic import FileSet
from madengine_rocprof.reports.categories import categorize
from madengine_rocprof.reports.discover import iter_dispatches
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

"""What a run left in OUT: the new files, their kinds and row counts, the dispatch count, and manifest.json."""
from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from madengine_rocprof.wrapper.contracts import OutputFile, TracerSummary
from madengine_rocprof.wrapper.file_kinds import kind_of

MANIFEST = "manifest.json"
FILTERED_LOG = "wrapper_filtered.log"
SKIP_DIRS = {".rocprofv3"}  # rocprofv3's temporary data


def snapshot(out: str) -> dict[str, tuple]:
    """{relative path: (size, mtime_ns)} of every file below OUT."""
    seen = {}
    for root, dirs, files in os.walk(out):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            seen[os.path.relpath(path, out)] = (st.st_size, st.st_mtime_ns)
    return seen


def count_rows(path: str) -> int | None:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            return max(sum(1 for _ in csv.reader(fh)) - 1, 0)
    except (OSError, csv.Error):
        return None


def dispatches_in(path: str, kind: str) -> int | None:
    """Kernel dispatches a file records: rows of a trace, distinct dispatches of a counter file."""
    if kind in ("kernel_trace", "legacy_results"):
        return count_rows(path)
    if kind == "counter_collection":
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as fh:
                return len({row.get("Dispatch_Id") for row in csv.DictReader(fh)})
        except (OSError, csv.Error):
            return None
    return None


def collect(out: str, before: dict[str, tuple]) -> tuple[list[OutputFile], int | None]:
    """Files created or changed since `before`, and the total dispatch count (traces first, else counters)."""
    outputs: list[OutputFile] = []
    for rel, stat in sorted(snapshot(out).items()):
        if rel in (MANIFEST, FILTERED_LOG) or before.get(rel) == stat or os.path.basename(rel).startswith(".tmp_"):
            continue
        kind = kind_of(rel)
        entry: OutputFile = {"path": rel, "size_bytes": stat[0], "kind": kind}
        if rel.endswith(".csv"):
            entry["rows"] = count_rows(os.path.join(out, rel))
        outputs.append(entry)
    counts = {}
    for kinds in (("kernel_trace",), ("legacy_results",), ("counter_collection",)):
        found = [dispatches_in(os.path.join(out, o["path"]), o["kind"]) for o in outputs if o["kind"] in kinds]
        total = [t for t in found if t is not None]
        if total:
            counts[kinds[0]] = sum(total)
    dispatch = next((counts[k] for k in ("kernel_trace", "legacy_results", "counter_collection") if k in counts), None)
    return outputs, dispatch


TRACER_SUMMARY = "tracer_summary"  # kind of <pid>_tracer_summary.json, written by the embedded tracer


def tracer_summary(out: str, files: Sequence[Mapping[str, Any]]) -> TracerSummary | None:
    """The embedded tracer's per-process summaries in this run: backends used and dropped records (None: unknown,
    as with torch.profiler, which does not report them). None when the run has no summary."""
    per_process = []
    for f in files:
        if f["kind"] != TRACER_SUMMARY:
            continue
        try:
            with open(os.path.join(out, f["path"]), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            per_process.append(dict(data, path=f["path"]))
    if not per_process:
        return None
    counts = [p.get("dropped_records") for p in per_process]
    known = [int(c) for c in counts if c is not None]
    return {"backends": sorted({str(p.get("backend")) for p in per_process}),
            "dropped_records": sum(known) if len(known) == len(counts) else None,
            "processes": per_process}


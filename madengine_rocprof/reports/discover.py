"""Find profiler outputs anywhere below a RUN directory and load them into a RunData.

Files are recognised by suffix (rocprofv3 names them `<prefix>_<kind>.<ext>`, the prefix being
`%hostname%/%pid%` by default, `rank<r>_<pid>` under launchers), legacy rocprof files by their header.
Within one process only the richest format is counted (a kernel trace beats rocpd beats JSON beats
stats), so `-f csv json rocpd` never triples the numbers. Multi-pass runs (`pmc_N/`, `pass_N/`) re-run
the whole workload per pass: kernel time is taken from the first pass, counters from all of them.
A process profiled with counters only (no kernel trace) gets its dispatches from its counter_collection
rows, again from the first pass only, since every pass re-dispatches the same kernels.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import cast

import polars as pl

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import (
    csv_readers,
    json_reader,
    kineto_native,
    kineto_reader,
    pftrace_reader,
    rocpd_reader,
    trace_tables,
)
from madengine_rocprof.reports.csv_tables import first_value, normalize, read_header
from madengine_rocprof.reports.model import CopyStats, CounterSource, KernelStats, RunData, TimingSource
from madengine_rocprof.wrapper import file_kinds
from madengine_rocprof.wrapper.contracts import Manifest, RunJson, WorkloadResult

# file kind (the wrapper's vocabulary) -> the format a report reads it as
FORMATS = {
    file_kinds.KERNEL_TRACE: "rocprofv3-csv",
    file_kinds.KERNEL_STATS: "rocprofv3-stats",
    file_kinds.COUNTER_COLLECTION: "counters-csv",
    file_kinds.MEMORY_COPY_TRACE: "memory-copy",
    file_kinds.RESULTS_JSON: "rocprofv3-json",
    file_kinds.ROCPD: "rocpd",
    file_kinds.PERFETTO: "rocprofv3-pftrace",
}
# lower number = richer source; the richest per process is counted
PRIORITY = {
    "rocprofv3-csv": 0,
    "kineto": 1,  # the embedded tracer keeps its Kineto JSON beside the kernel_trace.csv made from it
    "rocpd": 2,
    "rocprofv3-json": 3,
    "rocprofv3-pftrace": 4,  # kernel times may carry the writer's overlap adjustment (pftrace_reader)
    "legacy-csv": 5,
    "rocprofv3-stats": 6,
    "legacy-stats": 7,
}
PASS_DIR = re.compile(r"^(pmc|pass)_(\d+)$")
RUN_FILES = ("workload_result.json", "run.json", "manifest.json")
LOOKED_FOR = ("*kernel_trace.csv, *kernel_stats.csv, *counter_collection.csv, *results.json, *results.db, "
              "*results.pftrace, legacy results.csv / results.stats.csv, "
              "PyTorch profiler (Kineto) traces *.json / *.json.gz")


_TEXT = (str, None)
_NUMBER = (float, None)
# What the report reads from the run's JSON files (inputs.check_shape; other fields are not looked at)
RUN_FILE_SHAPES = {
    "workload_result.json": {
        "model?": _TEXT, "version?": _TEXT, "status?": _TEXT, "device?": (dict, str, None),
        "metrics?": ({"tokens_per_second?": _NUMBER, "samples_per_second?": _NUMBER, "mfu?": _NUMBER,
                      "peak_memory_allocated_bytes?": _NUMBER, "step_time_ms?": (dict, float, None)}, None),
        "step_times_ms?": ([float], None),
    },
    "run.json": {"model?": _TEXT, "status?": _TEXT, "performance?": ({"value?": _NUMBER, "metric?": _TEXT}, None)},
    "manifest.json": {"outcome?": _TEXT, "profiler?": (dict, None), "dispatch_count?": (int, None)},
}


def classify(path: Path) -> str | None:
    """The format a file is read as, or None: by name (file_kinds), legacy rocprof CSV by its header."""
    kind = file_kinds.kind_of(path.name)
    if kind in FORMATS:
        if kind == file_kinds.RESULTS_JSON and not json_reader.is_rocprofv3_json(path):
            return None  # legacy rocprof's chrome trace, or another tool's
        return FORMATS[kind]
    name = path.name
    if kineto_reader.is_kineto_trace(path):
        return kineto_reader.FORMAT
    if name.endswith(".csv"):
        header = {normalize(h) for h in read_header(path)}
        if {"kernelname", "beginns", "endns"} <= header:
            return "legacy-csv"
        if (name.endswith(".stats.csv") and {"name", "calls", "totaldurationns"} <= header
                and not any(name.endswith(s) for s in (".hip_stats.csv", ".copy_stats.csv", ".hsa_stats.csv"))):
            return "legacy-stats"
    return None


def _process_key(rel: Path, fmt: str | None = None) -> str:
    """Origin of a file: its directory plus the per-process prefix (`host/1234`).

    A PyTorch profiler trace is its own origin (the path without `.pt.trace.json`/`.json.gz`: torch names files
    `<worker>.<timestamp>.pt.trace.json`), except the embedded tracer's `<pid>_perfetto_trace.json`, which shares its
    origin with the kernel_trace.csv converted from it so that the two are not counted twice.
    """
    if fmt == kineto_reader.FORMAT and file_kinds.kind_of(rel.name) != "perfetto_trace":
        return rel.as_posix().removesuffix(".gz").removesuffix(".json").removesuffix(".pt.trace")
    prefix = file_kinds.split_name(rel.name)[1]
    parent = rel.parent.as_posix()
    return prefix if parent == "." else (f"{parent}/{prefix}" if prefix else parent)


def _pass_id(rel: Path) -> str | None:
    for part in rel.parent.parts:
        if PASS_DIR.match(part):
            return part
    return None


def _pass_order(pass_id: str | None) -> tuple:
    if pass_id is None:
        return (0, "", 0)
    match = PASS_DIR.match(pass_id)
    if match is None:  # not a pass folder name: sorts after the numbered passes
        return (2, pass_id, 0)
    kind, number = match.groups()
    return (1, kind, int(number))


def walk(root: Path):
    """(relative path, absolute path) of every file below root, in a stable order; skips hidden dirs."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            full = Path(dirpath) / name
            yield full.relative_to(root), full


def expand_runs(path: Path) -> list[Path]:
    """A runner output directory (perf.csv + one subdirectory per model run) stands for its model runs."""
    if not path.is_dir():
        raise UserError(f"not a directory: {path}", fix="pass run directories or rocprofv3 output trees")
    if (path / "run.json").is_file():
        return [path]
    children = sorted(p for p in path.iterdir() if p.is_dir() and (p / "run.json").is_file())
    return children or [path]


def load_run(path: Path, label: str) -> RunData:
    run = RunData(label=label, path=path)
    timing: list[TimingSource] = []
    copy_files: dict[tuple[str, str | None], list[Path]] = {}  # (process, pass) -> its memory_copy_trace files
    run_files: dict[str, tuple[int, Path]] = {}
    for rel, full in walk(path):
        if rel.name in RUN_FILES:
            depth = len(rel.parts)
            if rel.name not in run_files or depth < run_files[rel.name][0]:
                run_files[rel.name] = (depth, full)
            continue
        kind = classify(full)
        if kind is None:
            continue
        common = dict(path=full, rel=rel.as_posix(), fmt=kind, process=_process_key(rel, kind), pass_id=_pass_id(rel))
        if kind == "counters-csv":
            run.counters.append(csv_readers.read_counter_collection(CounterSource(**common)))
        elif kind == "memory-copy":
            copy_files.setdefault((common["process"], common["pass_id"]), []).append(full)
            _add_copies(run, csv_readers.read_memory_copies(full))
        else:
            timing.append(TimingSource(**common))
            if kind == "rocpd":
                source = rocpd_reader.read_rocpd_counters(CounterSource(**common))
                if source.counters:
                    run.counters.append(source)

    _choose_timing(run, timing, copy_files)
    derive_timing_from_counters(run)
    for name, (_, file) in run_files.items():
        value = inputs.load_json_object(file, name)  # strict JSON, and the fields the report uses typed
        inputs.check_shape(value, RUN_FILE_SHAPES[name], str(file),
                           fix=f"the {name} is corrupt or was edited by hand; re-create it (re-run)")
        if name == "workload_result.json":
            run.workload, run.workload_path = cast(WorkloadResult, value), file.relative_to(path).as_posix()
        elif name == "run.json":
            run.run_info = cast(RunJson, value)
        else:
            run.manifest = cast(Manifest, value)
    if not run.timing and not run.counters and run.workload is None:
        raise UserError(
            f"no profiler output found below {path}",
            file=str(path),
            fix=f"pass a directory that holds profiler output; looked for {LOOKED_FOR}"
            + (
                " (the wrapper's manifest.json says outcome=" + str(run.manifest.get("outcome")) + ")"
                if run.manifest
                else ""
            ),
        )
    return run


def _add_copies(run: RunData, copies: dict[str, CopyStats]) -> None:
    for direction, stats in copies.items():
        total = run.copies.setdefault(direction, CopyStats())
        total.calls += stats.calls
        total.total_ns += stats.total_ns


def _choose_timing(
    run: RunData, timing: list[TimingSource], copy_files: dict[tuple[str, str | None], list[Path]]
) -> None:
    """Keep one source per process, from the first pass that has any; read only those."""
    if not timing:
        return
    first_pass = min((s.pass_id for s in timing), key=_pass_order)
    best: dict[str, TimingSource] = {}
    for source in timing:
        if source.pass_id != first_pass:
            run.skipped_timing.append(source)
            continue
        current = best.get(source.process)
        if current is None or PRIORITY[source.fmt] < PRIORITY[current.fmt]:
            if current is not None:
                run.skipped_timing.append(current)
            best[source.process] = source
        else:
            run.skipped_timing.append(source)
    for source in best.values():
        _read_timing(source, copy_files.get((source.process, source.pass_id), []))
        run.timing.append(source)
        _add_copies(run, source.copies)  # Kineto memcpy/memset: the run's copy table
    run.timing.sort(key=lambda s: s.rel)
    skipped_passes = sorted({s.pass_id for s in run.skipped_timing if s.pass_id != first_pass}, key=_pass_order)
    if skipped_passes:
        run.notes.append(
            f"kernel times are from {first_pass or 'the top level'}; "
            f"{', '.join(p or 'the top level' for p in skipped_passes)} re-ran the workload "
            "to collect other counters, so their kernel times are not added"
        )
    duplicates = [s.rel for s in run.skipped_timing if s.pass_id == first_pass]
    if duplicates:
        run.notes.append(
            f"also read, not counted again (the same process's kernels, in a poorer format): {', '.join(duplicates)}"
        )


def derive_timing_from_counters(run: RunData) -> None:
    """Processes with counter_collection rows but no kernel-timing file: one dispatch per Dispatch_Id.

    Only the pass the kernel times come from counts (the first pass when no process has a kernel trace):
    the other passes re-ran the same dispatches to read other counters.
    """
    candidates = [s for s in run.counters if s.fmt == "counters-csv" and s.dispatch_kernels]
    if not candidates:
        return
    chosen_pass = run.timing[0].pass_id if run.timing else min((s.pass_id for s in candidates), key=_pass_order)
    have_trace = {s.process for s in run.timing}
    derived = [s for s in candidates if s.pass_id == chosen_pass and s.process not in have_trace]
    for counter in derived:
        source = TimingSource(path=counter.path, rel=counter.rel, fmt=counter.fmt, process=counter.process,
                              pass_id=counter.pass_id, counter_time=counter.time_from)
        source.kernels = {name: KernelStats(k.calls, k.total_ns, k.min_ns, k.max_ns)
                          for name, k in counter.dispatch_kernels.items()}
        source.dispatches = sum(k.calls for k in counter.dispatch_kernels.values())
        run.timing.append(source)
    if not derived:
        return
    run.timing.sort(key=lambda s: s.rel)
    other_passes = sorted({s.pass_id for s in candidates if s.pass_id != chosen_pass}, key=_pass_order)
    if other_passes:
        run.notes.append(
            f"dispatches are counted from the counter collection of {chosen_pass or 'the top level'} only; "
            f"{', '.join(p or 'the top level' for p in other_passes)} re-ran the same dispatches to read other counters"
        )


def _read_timing(source: TimingSource, copy_files: list[Path]) -> None:
    """Read one timing source; the CSV trace also takes the same process's memory_copy_trace files (busy time)."""
    if source.fmt in ("rocprofv3-csv", "legacy-csv"):
        if first_value(source.path, "Agent_Id") == "CPU":  # the embedded tracer without a GPU: CPU operators
            csv_readers.read_cpu_operator_trace(source)
        else:
            csv_readers.read_kernel_trace(source, copy_files)
    elif source.fmt in ("rocprofv3-stats", "legacy-stats"):
        csv_readers.read_kernel_stats(source)
    elif source.fmt == "rocprofv3-json":
        json_reader.read_json(source)
    elif source.fmt == "rocpd":
        rocpd_reader.read_rocpd_kernels(source)
    elif source.fmt == "rocprofv3-pftrace":
        pftrace_reader.read_pftrace(source)
    elif source.fmt == kineto_reader.FORMAT:
        kineto_reader.read_kineto(source, trace_tables.from_kineto, kineto_native.read)


def dispatch_frame(source: TimingSource) -> pl.DataFrame | None:
    """A Kineto source's kernels as a frame (name, start, end, track), taken from the trace tables its report read:
    what iter_dispatches gives, without reading the file again. None where the tables cannot tell it exactly (no
    tables, a CPU-operator trace, or a device or stream that is not an integer: iter_kineto writes such a value as
    the trace spells it)."""
    tables = source.tables
    if source.fmt != kineto_reader.FORMAT or tables is None or source.cpu_operators:
        return None
    kernels = tables.kernels
    if not kernels.height or kernels["device"].null_count() or kernels["stream"].null_count():
        return None
    return kernels.select("name", "start", "end", pl.format("GPU {} stream {}", "device", "stream").alias("track"))


def iter_dispatches(source: TimingSource):
    """Per-dispatch (name, start ns, end ns, track) for sources that have a timeline."""
    if source.fmt in ("rocprofv3-csv", "legacy-csv"):
        return csv_readers.iter_kernel_trace(source.path)
    if source.fmt == "rocprofv3-json":
        return json_reader.iter_json(source.path)
    if source.fmt == "rocpd":
        return rocpd_reader.iter_rocpd(source.path)
    if source.fmt == "rocprofv3-pftrace":
        return pftrace_reader.iter_pftrace(source.path)
    if source.fmt == kineto_reader.FORMAT:
        return kineto_reader.iter_kineto(source.path)
    return iter(())

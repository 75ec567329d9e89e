"""Operator shapes from the embedded tracer (MADENGINE_ROCPROF_TRACER_SHAPES=1): where the report finds them, and
the roofline of a run without a GPU, where CPU operators are the only work.

1. The tracer's torch.profiler backend keeps its Kineto JSON (`<pid>_perfetto_trace.json`) beside the
   kernel_trace.csv it converted from it. Discovery counts the CSV and skips the JSON (same process, poorer
   format), so the report's kernel numbers come from one file. The efficiency analysis needs the operators and
   their shapes, which only the JSON holds: `kept_trace` finds the skipped JSON of the same process and pass when
   it records shapes, and its tables are read for that analysis alone (nothing in it is counted again).
2. Without a GPU, the tracer's "kernels" are the CPU operators themselves. `analyse_cpu` gives each instant a
   thread spends in operators to the innermost operator open then (its self time), as a pseudo-kernel that
   operator launched, and hands these to efficiency.analyse, whose rules then place each one: the innermost
   operator with a model on the call stack owns it. One rule is added for the CPU: an operator with a model that
   calls a modelled operator doing its work (aten::linear calling aten::addmm, aten::matmul calling aten::mm: the
   same family; for elementwise ops the same op, or a copy's wrapper: `_hands_work`) dispatches its work there,
   so it owns no time itself (on a GPU it launches no kernel); its own time outside the callee (argument checks,
   views) is listed as time without a model.
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path

import polars as pl

from madengine_rocprof.insights.peaks import Peak
from madengine_rocprof.reports import kineto_reader, trace_tables
from madengine_rocprof.reports.analyses import efficiency, nesting, op_models
from madengine_rocprof.reports.model import RunData, TimingSource

SHAPES_KEY = b'"Input Dims"'  # what Kineto writes in a cpu_op's args when record_shapes=True
TRACER_JSON = "perfetto_trace.json"  # the tracer's kept Kineto JSON: <prefix>_perfetto_trace.json
TRACER_SUMMARY = "tracer_summary.json"  # tracer/runtime.SUMMARY_SUFFIX (the report imports nothing of the tracer)


def records_shapes(path: Path) -> bool:
    """The Kineto JSON carries operator shapes (one scan of the mapped file; stops at the first)."""
    try:
        with open(path, "rb") as fh:
            if not fh.seek(0, 2):
                return False
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                return mm.find(SHAPES_KEY) >= 0
    except OSError:
        return False


def _said_by_tracer(kept: Path) -> bool | None:
    """What the tracer's summary beside the JSON says of shapes (`record_shapes`), None where it says nothing: a
    GPU trace of a gigabyte is then not scanned for a key it cannot hold."""
    summary = kept.with_name(kept.name.removesuffix(TRACER_JSON) + TRACER_SUMMARY)
    try:
        said = json.loads(summary.read_text(encoding="utf-8")).get("record_shapes")
    except (OSError, ValueError, AttributeError):  # absent, unreadable, not a JSON object: the scan decides
        return None
    return said if isinstance(said, bool) else None


def kept_trace(run: RunData, src: TimingSource) -> TimingSource | None:
    """The embedded tracer's Kineto JSON of `src`'s process and pass, skipped by discovery in favour of the CSV,
    when it records shapes; None otherwise."""
    if src.fmt != "rocprofv3-csv":
        return None
    for other in run.skipped_timing:
        if (other.fmt == kineto_reader.FORMAT and other.process == src.process and other.pass_id == src.pass_id
                and other.path.name.endswith(TRACER_JSON)):
            said = _said_by_tracer(other.path)
            if said if said is not None else records_shapes(other.path):
                return other
    return None


def shape_tables(run: RunData, src: TimingSource) -> trace_tables.TraceTables | None:
    """The tables that carry `src`'s operator shapes: a Kineto trace's own, or the tracer's kept JSON's."""
    if src.fmt == kineto_reader.FORMAT:
        return trace_tables.load_tables(src)
    kept = kept_trace(run, src)
    return None if kept is None else trace_tables.load_tables(kept)


def self_time(ops: pl.DataFrame) -> pl.DataFrame:
    """(op, start, end) pieces: each instant a thread spends inside operators goes to the innermost one open then.
    The pieces of a thread are disjoint and cover the union of its operators; `op` is the row's `op` column."""
    pieces: tuple[list[int], list[int], list[int]] = ([], [], [])
    order = ops.select("op", "pid", "tid", "start", "end").sort(
        ["pid", "tid", "start", "end"], descending=[False, False, False, True], nulls_last=True, maintain_order=True)
    stack: list[tuple[int, int]] = []  # (end, op) of the operators open now, innermost last
    cursor = 0  # the thread's time given out so far

    def emit(op: int, start: int, end: int) -> None:
        pieces[0].append(op)
        pieces[1].append(start)
        pieces[2].append(end)

    def close(until: int | None) -> None:
        nonlocal cursor
        while stack and (until is None or stack[-1][0] <= until):
            end, op = stack.pop()
            if end > cursor:
                emit(op, cursor, end)
                cursor = end

    thread = None
    for op, pid, tid, start, end in order.iter_rows():
        if (pid, tid) != thread:
            close(None)
            thread, cursor = (pid, tid), start
        close(start)
        if stack and start > cursor:
            emit(stack[-1][1], cursor, start)
        cursor = max(cursor, start)
        stack.append((end, op))
    close(None)
    return pl.DataFrame({"op": pieces[0], "start": pieces[1], "end": pieces[2]},
                        schema={"op": ops.schema["op"], "start": ops.schema["start"], "end": ops.schema["end"]})


# elementwise ops whose whole work is an op they call (a copy into new memory, a fill)
ELEMENTWISE_WRAPPERS = frozenset({"aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::zero_"})


def _families(ops: pl.DataFrame) -> dict[int, str]:
    """op -> the family of its model, for the ops whose shapes fit one."""
    modelled = ops.filter(pl.col("name").is_in(list(op_models.MODELS)) & pl.col("input_dims").is_not_null())
    keys = modelled.select(*efficiency.KEY).unique(maintain_order=True)
    family = {}
    for name, dims, types, strides, concrete in keys.iter_rows():
        cost = op_models.cost(name, efficiency._parse(dims), efficiency._parse(types), efficiency._parse(strides),
                              efficiency._parse(concrete))
        if cost is not None:
            family[(name, dims, types, strides, concrete)] = cost.family
    return {row[0]: family[row[1:]] for row in modelled.select("op", *efficiency.KEY).iter_rows()
            if row[1:] in family}


def _base(name: str) -> str:
    return name.removeprefix("aten::").strip("_")


def _hands_work(caller: tuple[str, str], callee: tuple[str, str]) -> bool:
    """The caller's work is the callee's. Operators of one matrix, norm, softmax or reduction family nest only where
    one hands its work to the other (linear -> addmm, softmax -> _softmax, mean -> sum); an elementwise op also
    calls others for side work (aten::mul_ converting its scalar with aten::_to_copy, aten::pow copying its result),
    so there only the same op (aten::mul under aten::mul, div_ under div_) or a copy's or fill's wrapper counts."""
    (family, name), (callee_family, callee_name) = caller, callee
    if family != callee_family:
        return False
    return family != "elementwise" or name in ELEMENTWISE_WRAPPERS or _base(name) == _base(callee_name)


def dispatchers(ops: pl.DataFrame) -> set[int]:
    """The modelled ops that call a modelled op doing their work (see the module's docstring and `_hands_work`)."""
    family = _families(ops)
    if not family:
        return set()
    names = dict(zip(ops["op"].to_list(), ops["name"].to_list(), strict=True))
    parents = nesting.parents(ops.filter(pl.col("op").is_in(list(family))))
    found: set[int] = set()
    for op, fam in family.items():
        up = parents[op]
        while up != -1 and not _hands_work((family[up], names[up]), (fam, names[op])):
            up = parents[up]
        if up != -1:
            found.add(up)
    return found


def analyse_cpu(cpu_ops: pl.DataFrame, peak: Peak | None, device: str | None,
                target: float = efficiency.DEFAULT_TARGET) -> dict | None:
    """efficiency.analyse for a trace of CPU operators only: an operator's time is its self time plus that of the
    unmodelled operators it calls; None when the trace records no shapes."""
    if cpu_ops.is_empty() or "input_dims" not in cpu_ops.columns or cpu_ops["input_dims"].null_count() == \
            cpu_ops.height:
        return None
    ops = cpu_ops.with_row_index("op")
    # each op its own id (the trace's External ids are not needed, nor trusted to be unique)
    ops = ops.with_columns((pl.col("op").cast(pl.Int64) + 1).alias("external_id"))
    pieces = self_time(ops)
    names = ops["name"]
    kernels = pl.DataFrame({
        "name": names.gather(pieces["op"]), "device": pl.Series([None] * pieces.height, dtype=pl.Int64),
        "stream": pl.Series([None] * pieces.height, dtype=pl.Int64), "start": pieces["start"], "end": pieces["end"],
        "correlation": pl.Series([None] * pieces.height, dtype=pl.Int64),
        "external_id": pieces["op"].cast(pl.Int64) + 1})
    wrapping = dispatchers(ops)
    if wrapping:  # no shapes, no model: the time they keep is listed without one
        ops = ops.with_columns(pl.when(pl.col("op").is_in(list(wrapping))).then(None)
                               .otherwise(pl.col("input_dims")).alias("input_dims"))
    result = efficiency.analyse(ops.drop("op"), trace_tables.empty(trace_tables.RUNTIME_COLUMNS), kernels, peak,
                                device, target)
    if result is not None:
        result["cpu_operators"] = True
    return result

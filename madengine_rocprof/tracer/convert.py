"""Kineto-style Chrome trace (torch.profiler export, or the CUPTI backend's) -> rocprofv3 rows (stdlib only).

GPU kernels (category `kernel`, from CUPTI on CUDA or roctracer on ROCm) become KERNEL_DISPATCH rows; without a
GPU, CPU operators (category `cpu_op`) are reported as the "kernels", nested operators included. Grid sizes are in
work-items like rocprofv3's (CUDA grid x block); Scratch/Accum_VGPR/SGPR columns have no CUDA value and are 0.

Times are exact integer nanoseconds: Kineto's microsecond `ts`/`dur` are read as decimal text (never through a
float, which shifts absolute-time starts by up to 128 ns beyond 2**53 ns).

Speed: a torch.profiler trace of a few minutes holds millions of events, written while a SIGTERM's grace period
runs. `read_kineto` does not json.load the file: it maps it and picks the events out with one regular expression
per chunk for the layout Kineto writes, checking per chunk that every `"ph": "X"` event was matched. A chunk that
fails the check (another writer's layout) sends the whole file through the standard JSON parser instead, exact too.
"""
from __future__ import annotations

import decimal
import itertools
import json
import mmap
import operator
import os
import re
from collections.abc import Iterable

from madengine_rocprof.atomic import atomic_file
from madengine_rocprof.tracer import native_rows
from madengine_rocprof.tracer.line_writer import LineWriter
from madengine_rocprof.wrapper import rocprof_csv

API_CATEGORIES = {"cuda_runtime": "CUDA_RUNTIME_API", "cuda_driver": "CUDA_DRIVER_API",
                  "hip_runtime": "HIP_RUNTIME_API"}
_DIRECTIONS = {"HtoD": ("HOST_TO_DEVICE", True, False), "DtoH": ("DEVICE_TO_HOST", False, True),
               "DtoD": ("DEVICE_TO_DEVICE", False, False), "HtoH": ("HOST_TO_HOST", True, True),
               "PtoP": ("DEVICE_TO_DEVICE", False, False), "HtoA": ("HOST_TO_DEVICE", True, False),
               "AtoH": ("DEVICE_TO_HOST", False, True), "AtoA": ("DEVICE_TO_DEVICE", False, False),
               "AtoD": ("DEVICE_TO_DEVICE", False, False), "DtoA": ("DEVICE_TO_DEVICE", False, False)}
_EXACT = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN, traps=[decimal.InvalidOperation])
BLOCK_ROWS = 8192  # rows per write: each write is whole lines
_FLOAT_EXACT_US = 2**51 / 1000  # below this, round(us * 1000) of the float nearest k/1000 is k


# record_function ranges that mark a training step's phases (reports/phases.py): kept in CPU mode, beside the
# operators (<prefix>phase_markers.csv), never as operators
PHASE_MARKER = re.compile(r"^(?:Optimizer\.(?:step|zero_grad)#|ProfilerStep#\d+$)")
PHASE_MARKERS_FILE = "phase_markers.csv"
PHASE_MARKERS_HEADER = ("Name", "Thread_Id", "Start_Timestamp", "End_Timestamp")


class BadTrace(ValueError):
    """The trace file is not a Kineto trace this reader understands."""


def us_to_ns(value) -> int:
    """Microseconds (JSON number text, int, float or Decimal) -> integer nanoseconds, exact for decimal text; half
    a nanosecond rounds to even. A float is taken at its shortest repr (what a JSON writer printed)."""
    kind = type(value)
    if kind is float and -_FLOAT_EXACT_US < value < _FLOAT_EXACT_US:
        scaled = value * 1000
        whole = round(scaled)
        if abs(scaled - whole) < 1e-3:  # k/1000 us as a float (the CUPTI backend's): k, exactly, below 2**51 ns
            return whole
    if kind is bool:
        raise BadTrace(f"a time is {value!r}, not a number")
    if kind is int:
        return value * 1000
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    try:
        number = decimal.Decimal(repr(value) if isinstance(value, float) else str(value).strip())
        return int(_EXACT.multiply(number, 1000).to_integral_value(context=_EXACT))
    except (decimal.InvalidOperation, ValueError, OverflowError) as exc:
        raise BadTrace(f"a time is {value!r}, not a finite number of microseconds") from exc


def _int(value) -> int:
    if type(value) is int:
        return value
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _xyz(value) -> tuple[int, int, int]:
    if type(value) is list and len(value) == 3:
        a, b, c = value
        if type(a) is int and type(b) is int and type(c) is int:
            return a, b, c
    if isinstance(value, (bytes, str)):
        value = [v for v in (value.decode() if isinstance(value, bytes) else value).strip("[] ").split(",") if v]
    if isinstance(value, (list, tuple)) and value:
        a, b, c = ([_int(v) for v in value] + [1, 1, 1])[:3]
        return a, b, c
    return 0, 0, 0


class Events:
    """The fields of one trace that the rocprofv3 files need, in columns; times in exact integer nanoseconds.

    ops: the rows of kernel_trace.csv (kernels on a GPU, CPU operators without one), in the trace's order;
    `op_extra` holds, per kernel, (device, stream, registers, shared memory, block xyz, grid xyz)."""

    def __init__(self, cpu: bool) -> None:
        self.cpu = cpu
        self.base = 0
        self.op_start: list[int] = []
        self.op_dur: list[int] = []
        self.op_tid: list[int] = []
        self.op_name: list[str] = []
        self.op_corr: list[int] = []
        self.op_extra: list[tuple] = []
        self.launcher: dict[int, int] = {}  # correlation id -> thread of the runtime call that launched it
        self.api: list[tuple] = []  # (start, dur, category, name, pid, tid, correlation)
        self.copies: list[tuple] = []  # (start, dur, name, device, stream, correlation)
        self.markers: list[tuple] = []  # CPU mode: phase markers (name, thread, start, dur), see PHASE_MARKER

    def __len__(self) -> int:
        return len(self.op_start)

    def add_dict_event(self, e: dict) -> None:
        """One decoded Chrome-trace event (a dict, as json or the CUPTI backend gives it)."""
        if not isinstance(e, dict) or e.get("ph") != "X":
            return
        cat = e.get("cat")
        args = e.get("args") or {}
        if not isinstance(args, dict):
            args = {}
        if self.cpu and cat != "cpu_op":
            name = e.get("name")
            if cat == "user_annotation" and isinstance(name, str) and PHASE_MARKER.match(name):
                self.markers.append((name, _int(e.get("tid")), us_to_ns(e.get("ts", 0)), us_to_ns(e.get("dur", 0))))
            return  # CPU mode is the no-GPU case: no runtime calls or copies to read
        if cat in API_CATEGORIES:
            corr = _int(args.get("correlation"))
            tid = _int(e.get("tid"))
            if corr:
                self.launcher[corr] = tid
            self.api.append((us_to_ns(e.get("ts", 0)), us_to_ns(e.get("dur", 0)), cat, str(e.get("name", "")),
                             _int(e.get("pid")), tid, corr))
        elif cat == "gpu_memcpy":
            self.copies.append((us_to_ns(e.get("ts", 0)), us_to_ns(e.get("dur", 0)), str(e.get("name", "")),
                                _int(args.get("device")), _int(args.get("stream")), _int(args.get("correlation"))))
        elif cat == ("cpu_op" if self.cpu else "kernel"):
            self.op_start.append(us_to_ns(e.get("ts", 0)))
            self.op_dur.append(us_to_ns(e.get("dur", 0)))
            self.op_name.append(str(e.get("name", "")))
            if self.cpu:
                self.op_tid.append(_int(e.get("tid")))
                self.op_corr.append(_int(args.get("External id")))
                return
            self.op_tid.append(0)
            self.op_corr.append(_int(args.get("correlation")))
            stream = _int(args.get("stream", e.get("tid", 0)))
            self.op_extra.append((_int(args.get("device")), stream, _int(args.get("registers per thread")),
                                  _int(args.get("shared memory")), _xyz(args.get("block")), _xyz(args.get("grid"))))


def from_dict(trace: dict, *, cpu: bool = False) -> Events:
    events = Events(cpu)
    events.base = _int(trace.get("baseTimeNanoseconds"))
    for e in trace.get("traceEvents", []) or []:
        events.add_dict_event(e)
    return events


# ---------------------------------------------------------------- Kineto's own layout, read fast
_STR = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_NUMBER = rb'(\d+(?:\.\d+)?)'  # Kineto's microseconds: three decimals (older writers: integers, other decimals)
_HEAD = (rb'"ph": "(?:X",\s*"cat": "([^"\\]*)",\s*"name": (' + _STR + rb'),\s*"pid": (-?\d+|' + _STR + rb'),\s*'
         rb'"tid": (-?\d+|' + _STR + rb'),\s*"ts": ' + _NUMBER + rb',\s*"dur": ' + _NUMBER + rb'\s*')
# Every "ph" key of a chunk must be matched: an event of a category read here in full (the groups), any other event
# by its phase, or its category, alone (empty groups). A "ph" left unmatched (another layout, or the string "ph" as
# a value) fails the chunk's check, and the file goes to the JSON parser.
_READ = rb"(?:cpu_op|kernel|cuda_runtime|cuda_driver|hip_runtime|gpu_memcpy)"
_OTHER = rb'|X",\s*"cat": "(?!' + _READ + rb'")|[^X"])'
_ARGS_TEXT = rb'([^{}"]*(?:' + _STR + rb'[^{}"]*)*)'  # strings may hold braces: `{lambda(int)#1}`
# CPU operators: Kineto writes "External id" first in their args, and the rest of the event is skipped unread;
# args that start otherwise are captured whole and searched.
_CPU_EVENT = re.compile(_HEAD + rb'(?:,\s*"args": \{\s*(?:"External id": (\d+)|' + _ARGS_TEXT + rb'\}))?'
                        + _OTHER)
_GPU_EVENT = re.compile(_HEAD + rb'(?:,\s*"args": \{' + _ARGS_TEXT + rb'\})?\s*\}' + _OTHER)
_ARG_VALUE = re.compile(rb'\s*(' + _STR + rb'|\[[^\]]*\]|[^,\s}]*)')
_BASE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
CHUNK = 16 << 20


# a user_annotation event in Kineto's layout; any other layout is counted apart and read by the JSON parser
# (one scan for the literal category, each hit then matched in place; a name holding the word has its quotes escaped)
_ANNOTATION = re.compile(rb'"cat": "user_annotation",\s*"name": (' + _STR + rb'),\s*"pid": (?:-?\d+|' + _STR
                         + rb'),\s*"tid": (-?\d+|' + _STR + rb'),\s*"ts": ' + _NUMBER + rb',\s*"dur": ' + _NUMBER)
_ANNOTATION_CAT = re.compile(rb'"user_annotation"')


def markers_of_file(path: str) -> tuple[int, list[tuple]]:
    """(baseTimeNanoseconds, phase markers) of a Kineto JSON file: one scan of the mapped file, whichever path wrote
    the operators (native or Python). A file whose annotations are not all in Kineto's layout goes to the parser."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return 0, []
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            markers: list[tuple] = []
            kineto_layout = True
            for hit in _ANNOTATION_CAT.finditer(mm):
                event = _ANNOTATION.match(mm, hit.start() - len(b'"cat": '))
                if event is None:  # not Kineto's layout
                    kineto_layout = False
                    break
                raw, tid, ts, dur = event.groups()
                name = _json_string(raw)
                if PHASE_MARKER.match(name):
                    markers.append((name, _int(tid), _us_text_ns(ts), _us_text_ns(dur)))
            if kineto_layout:
                base = _BASE.search(mm)
                return (int(base.group(1)) if base else 0), markers
    events = _read_generic(path, cpu=True)
    return events.base, events.markers


def write_markers(host_dir: str, prefix: str, base: int, markers: list[tuple]) -> str:
    """<prefix>phase_markers.csv: Name, Thread_Id, Start/End_Timestamp in the kernel trace's time base, start order.
    Written in CPU mode even when empty: the report then knows that no optimizer step ran, rather than guessing."""
    path = os.path.join(host_dir, prefix + PHASE_MARKERS_FILE)
    rows = sorted((name, tid, base + start, base + start + dur) for name, tid, start, dur in markers)
    rows.sort(key=operator.itemgetter(2))
    _write_table(path, PHASE_MARKERS_HEADER, rows)
    return path


def _json_string(raw: bytes) -> str:
    return json.loads(raw) if b"\\" in raw else raw[1:-1].decode("utf-8", "replace")


_DOT, _NOTHING, _FOURTH_LAST = itertools.repeat(b"."), itertools.repeat(b""), itertools.repeat(slice(-4, -3))


def _ns3(texts: list[bytes]) -> list[int]:
    """Microseconds text -> nanoseconds. With three decimals everywhere (Kineto's own layout) the digits without the
    dot are the nanoseconds (C-level maps, no Python per value); otherwise value by value, exactly."""
    if all(map(operator.eq, map(operator.getitem, texts, _FOURTH_LAST), _DOT)):  # "...d.ddd"
        return list(map(int, map(bytes.replace, texts, _DOT, _NOTHING)))
    return [_us_text_ns(t) for t in texts]


def _us_text_ns(text: bytes) -> int:
    whole, _dot, fraction = text.partition(b".")
    if len(fraction) <= 3:
        return int(whole + fraction.ljust(3, b"0"))
    return us_to_ns(text)  # finer than a nanosecond: rounded half to even


def _chunks(mm, start: int):
    """(begin, end) pieces of the event array, each cut just before an event's opening brace."""
    size = len(mm)
    pos = start
    while pos < size:
        end = min(size, pos + CHUNK)
        if end < size:
            key = mm.rfind(b'"ph"', pos, end)
            brace = mm.rfind(b"{", pos, key) if key > pos else -1
            # no event start to cut at: the rest is one piece
            end = size if brace <= pos or mm[brace + 1:key].strip() else brace
        yield pos, end
        pos = end


def read_kineto(path: str, *, cpu: bool) -> Events:
    """The events of a Kineto JSON trace file (see the module's docstring)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise BadTrace(f"{path}: empty file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            head = mm.find(b'"traceEvents"')
            if head < 0:
                return _read_generic(path, cpu)
            base = _BASE.search(mm, 0, head) or _BASE.search(mm, head)  # Kineto writes it first; others last
            events = Events(cpu)
            events.base = int(base.group(1)) if base else 0
            for begin, end in _chunks(mm, head):
                if not _fast_chunk(mm[begin:end], events):
                    return _read_generic(path, cpu)
    return events


def _fast_chunk(chunk: bytes, events: Events) -> bool:
    """Adds the chunk's events; False (events partly added) when the chunk is not in Kineto's layout."""
    found = (_CPU_EVENT if events.cpu else _GPU_EVENT).findall(chunk)
    if len(found) != chunk.count(b'"ph"'):
        return False
    names: dict[bytes, str] = {}
    if events.cpu:
        ops = [f for f in found if f[0] == b"cpu_op"]
        if not ops:
            return True
        name_col, tid_col, ts_col, dur_col, ext_col = (list(map(operator.itemgetter(i), ops)) for i in (1, 3, 4, 5, 6))
        if not all(ext_col):  # some "External id" not first in its args, or absent
            ext_col = [x if x else b"%d" % _arg_int(f[7], b'"External id":') for x, f in zip(ext_col, ops, strict=True)]
        for raw in set(name_col):
            names[raw] = _json_string(raw)
        events.op_name += map(names.__getitem__, name_col)
        events.op_start += _ns3(ts_col)
        events.op_dur += _ns3(dur_col)
        try:
            threads = list(map(int, tid_col))
        except ValueError:  # a thread named by a string: as the JSON path reads it
            threads = [_int(t) for t in tid_col]
        external = list(map(int, ext_col))
        events.op_tid += threads
        events.op_corr += external
        return True
    for cat, name, pid, tid, ts_text, dur_text, args_text in found:
        if not cat:
            continue
        ts, dur = _us_text_ns(ts_text), _us_text_ns(dur_text)
        if cat == b"kernel":
            if name not in names:
                names[name] = _json_string(name)
            events.op_name.append(names[name])
            events.op_start.append(ts)
            events.op_dur.append(dur)
            events.op_tid.append(0)
            events.op_corr.append(_arg_int(args_text, b'"correlation":'))
            stream = _arg_int_or_none(args_text, b'"stream":')
            events.op_extra.append((_arg_int(args_text, b'"device":'), _int(tid) if stream is None else stream,
                                    _arg_int(args_text, b'"registers per thread":'),
                                    _arg_int(args_text, b'"shared memory":'),
                                    _arg_xyz(args_text, b'"block":'), _arg_xyz(args_text, b'"grid":')))
        elif cat in (b"cuda_runtime", b"cuda_driver", b"hip_runtime"):
            corr, thread = _arg_int(args_text, b'"correlation":'), _int(tid)
            if corr:
                events.launcher[corr] = thread
            if name not in names:
                names[name] = _json_string(name)
            events.api.append((ts, dur, cat.decode(), names[name], _int(pid), thread, corr))
        elif cat == b"gpu_memcpy":
            events.copies.append((ts, dur, _json_string(name), _arg_int(args_text, b'"device":'),
                                  _arg_int(args_text, b'"stream":'), _arg_int(args_text, b'"correlation":')))
    return True


_INT_AT = re.compile(rb"\s*(-?\d+)(?=\s*[,}\]]|\s*$)")
_XYZ_AT = re.compile(rb"\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")


def _arg_int(args: bytes, key: bytes) -> int:
    """The integer after `key` ("name": with its colon) in an event's args text; 0 when absent or not an integer
    (what the JSON path's int(... or 0) gives for them)."""
    value = _arg_int_or_none(args, key)
    return 0 if value is None else value


def _arg_int_or_none(args: bytes, key: bytes) -> int | None:
    at = args.find(key)
    if at < 0:
        return None
    found = _INT_AT.match(args, at + len(key))
    return int(found.group(1)) if found else 0


def _arg_xyz(args: bytes, key: bytes) -> tuple[int, int, int]:
    at = args.find(key)
    if at < 0:
        return 0, 0, 0
    found = _XYZ_AT.match(args, at + len(key))
    if found is not None:
        return int(found.group(1)), int(found.group(2)), int(found.group(3))
    other = _ARG_VALUE.match(args, at + len(key))  # not three integers: as the JSON path reads it
    return _xyz(other.group(1) if other else None)


def _read_generic(path: str, cpu: bool) -> Events:
    """Any valid JSON trace, through the standard parser; numbers stay decimal text, so times are exact."""
    with open(path, "rb") as fh:
        try:
            data = json.loads(fh.read(), parse_float=decimal.Decimal)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadTrace(f"{path}: not a JSON trace: {exc}") from exc
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict):
        raise BadTrace(f"{path}: not a JSON trace (top level is {type(data).__name__})")
    return from_dict(data, cpu=cpu)


def load(path: str) -> dict:
    """The whole trace as a dict (small traces and tests; `read_kineto` for the files the tracer writes)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh, parse_float=decimal.Decimal)
    return data if isinstance(data, dict) else {"traceEvents": data}


# ---------------------------------------------------------------- rows
def _order(starts: list[int]) -> list[int] | None:
    """The permutation that sorts by start (stable), or None when the starts are sorted already."""
    if all(map(operator.le, starts, starts[1:])):
        return None
    return sorted(range(len(starts)), key=starts.__getitem__)


class _Rows:
    """kernel_trace rows of `events` in start order, as columns (built once, written in blocks)."""

    def __init__(self, events: Events, truncate: bool, max_rows: int | None) -> None:
        n = len(events) if max_rows is None else min(len(events), max(max_rows, 0))
        order = _order(events.op_start)
        pick = (lambda col: list(map(col.__getitem__, order[:n]))) if order is not None else (lambda col: col[:n])
        base = events.base
        self.cpu = events.cpu
        self.start = [s + base for s in pick(events.op_start)] if base else pick(events.op_start)
        self.end = list(map(operator.add, self.start, pick(events.op_dur)))
        names = pick(events.op_name)
        if truncate:
            short = {name: rocprof_csv.truncate_name(name) for name in set(names)}
            names = list(map(short.__getitem__, names))
        self.name = names
        ids: dict[str, int] = {}
        for name in names:
            if name not in ids:
                ids[name] = len(ids) + 1
        self.kernel_ids = ids
        self.corr = pick(events.op_corr)
        if self.cpu:
            self.tid = pick(events.op_tid)
            self.extra: list[tuple] = []
        else:
            self.tid = [events.launcher.get(c, 0) for c in self.corr]
            self.extra = pick(events.op_extra)

    def __len__(self) -> int:
        return len(self.start)

    def tuples(self) -> list[tuple]:
        rows = []
        for i in range(len(self)):
            name = self.name[i]
            head = (self.tid[i], i + 1, self.kernel_ids[name], name, self.corr[i], self.start[i], self.end[i])
            if self.cpu:
                rows.append(("KERNEL_DISPATCH", "CPU", 0, 0, *head, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
                continue
            device, stream, regs, shared, block, grid = self.extra[i]
            rows.append(("KERNEL_DISPATCH", f"Agent {device}", stream, stream, *head, shared, 0, regs, 0, 0,
                         block[0], block[1], block[2], grid[0] * block[0], grid[1] * block[1], grid[2] * block[2]))
        return rows

    def lines(self) -> Iterable[str]:
        """The CSV lines, in blocks of BLOCK_ROWS rows (one string each)."""
        quoted = {name: '"' + name.replace('"', '""') + '"' for name in self.kernel_ids}
        ids = self.kernel_ids
        for lo in range(0, len(self), BLOCK_ROWS):
            hi = min(len(self), lo + BLOCK_ROWS)
            names = self.name[lo:hi]
            if self.cpu:
                yield "".join(map(_CPU_LINE.__mod__, zip(self.tid[lo:hi], range(lo + 1, hi + 1),
                                                         map(ids.__getitem__, names), map(quoted.__getitem__, names),
                                                         self.corr[lo:hi], self.start[lo:hi], self.end[lo:hi],
                                                         strict=True)))
                continue
            parts = []
            for i in range(lo, hi):
                device, stream, regs, shared, block, grid = self.extra[i]
                name = self.name[i]
                parts.append(_GPU_LINE % (device, stream, stream, self.tid[i], i + 1, ids[name], quoted[name],
                                          self.corr[i], self.start[i], self.end[i], shared, regs, block[0],
                                          block[1], block[2], grid[0] * block[0], grid[1] * block[1],
                                          grid[2] * block[2]))
            yield "".join(parts)

    def stats(self) -> list[tuple]:
        durations: dict[str, list[int]] = {name: [] for name in self.kernel_ids}
        for name, start, end in zip(self.name, self.start, self.end, strict=True):
            durations[name].append(end - start)
        return rocprof_csv.kernel_stats(durations)


_CPU_LINE = '"KERNEL_DISPATCH","CPU",0,0,%d,%d,%d,%s,%d,%d,%d,0,0,0,0,0,0,0,0,0,0,0\n'
_GPU_LINE = '"KERNEL_DISPATCH","Agent %d",%d,%d,%d,%d,%d,%s,%d,%d,%d,%d,0,%d,0,0,%d,%d,%d,%d,%d,%d\n'


def _events(trace, cpu: bool) -> Events:
    if isinstance(trace, Events):
        return trace
    return from_dict(trace, cpu=cpu)


def kernel_rows(trace, *, cpu: bool = False, truncate: bool = False, max_rows: int | None = None) -> list[tuple]:
    """rocprofv3 kernel_trace rows, in start order. `cpu`: report CPU operators instead of GPU kernels."""
    return _Rows(_events(trace, cpu), truncate, max_rows).tuples()


def stats_rows(rows: list[tuple]) -> list[tuple]:
    durations: dict[str, list[int]] = {}
    for r in rows:
        durations.setdefault(r[7], []).append(r[10] - r[9])
    return rocprof_csv.kernel_stats(durations)


def _sorted(items: list[tuple]) -> list[tuple]:
    return sorted(items, key=operator.itemgetter(0))


def api_rows(trace) -> list[tuple]:
    """rocprofv3 *_api_trace rows (Domain, Function, Process_Id, Thread_Id, Correlation_Id, Start, End), in order."""
    events = _events(trace, False)
    base = events.base
    return [(API_CATEGORIES[cat], name, pid, tid, corr, base + start, base + start + dur)
            for start, dur, cat, name, pid, tid, corr in _sorted(events.api)]


def memcpy_rows(trace) -> list[tuple]:
    """rocprofv3 memory_copy_trace rows (Kind, Direction, Stream_Id, Source/Destination_Agent_Id, Correlation_Id,
    Start, End); the direction is read from Kineto's event name (`Memcpy HtoD (Pinned -> Device)`)."""
    events = _events(trace, False)
    rows = []
    for start, dur, name, device, stream, corr in _sorted(events.copies):
        direction, src_host, dst_host = copy_direction(name)
        gpu = f"Agent {device}"
        rows.append(("MEMORY_COPY", direction, stream, "CPU" if src_host else gpu,
                     "CPU" if dst_host else gpu, corr, events.base + start, events.base + start + dur))
    return rows


def copy_direction(name: str) -> tuple[str, bool, bool]:
    """(Direction column, source on the host, destination on the host) of a Kineto copy's name."""
    words = name.split()
    direction, src_host, dst_host = _DIRECTIONS.get(words[1] if len(words) > 1 else "", ("UNKNOWN", False, False))
    return "MEMORY_COPY_" + direction, src_host, dst_host


def write_chrome_trace(trace: dict, path: str) -> None:
    """The CUPTI backend's Chrome trace as JSON, through a temporary file renamed into place. json.dump would run
    the pure-Python encoder; blocks of events through json.dumps use the C one, and memory stays bounded."""
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    events = trace.get("traceEvents", [])
    with atomic_file(path) as fh:
        fh.write(json.dumps(head, allow_nan=False)[:-1] + (', "traceEvents": [' if head else '"traceEvents": ['))
        for lo in range(0, len(events), BLOCK_ROWS):
            if lo:
                fh.write(", ")
            fh.write(json.dumps(events[lo:lo + BLOCK_ROWS], allow_nan=False)[1:-1])
        fh.write("]}")


def _write_table(path: str, header, rows: list[tuple]) -> None:
    with LineWriter(path) as out:
        out.write(",".join(rocprof_csv.cell(h) for h in header) + "\n")
        for lo in range(0, len(rows), BLOCK_ROWS):
            out.write("".join(",".join(map(rocprof_csv.cell, r)) + "\n" for r in rows[lo:lo + BLOCK_ROWS]))


def write_files(trace, host_dir: str, prefix: str, *, cpu: bool, truncate: bool = False,
                max_rows: int | None = None, api: bool = False, memcpy: bool = False, stats: bool = False) -> list[str]:
    """Write <prefix>kernel_trace.csv and <prefix>kernel_stats.csv, with `api` <prefix>hip_api_trace.csv (and
    hip_api_stats.csv with `stats`), with `memcpy` <prefix>memory_copy_trace.csv; nothing when no kernel was
    captured (rocprofv3 writes no files then). `trace`: Events, a Kineto trace dict, or a Kineto JSON file path.

    kernel_trace.csv is written first and in whole lines (LineWriter): a kill or a full disk part way keeps the
    rows written so far, in start order. The stats files, computed from every row, follow. A file path goes
    through write_trace_file (the native converter where it builds)."""
    if isinstance(trace, (str, os.PathLike)):
        return write_trace_file(os.fspath(trace), host_dir, prefix, cpu=cpu, truncate=truncate, max_rows=max_rows,
                                api=api, memcpy=memcpy, stats=stats)[0]
    events = _events(trace, cpu)
    written = _write_events(events, host_dir, prefix, truncate=truncate, max_rows=max_rows, api=api, memcpy=memcpy,
                            stats=stats)
    if cpu and written:
        written.append(write_markers(host_dir, prefix, events.base, events.markers))
    return written


def write_trace_file(path: str, host_dir: str, prefix: str, *, cpu: bool, truncate: bool = False,
                     max_rows: int | None = None, api: bool = False, memcpy: bool = False,
                     stats: bool = False) -> tuple[list[str], int]:
    """write_files for a Kineto JSON file: (files written, kernel events in the trace). The native converter
    (native_rows, about 5x faster) writes the same bytes where it builds and the file is in Kineto's own layout;
    otherwise read_kineto and the Python writer do (MADENGINE_ROCPROF_TRACER_NATIVE_ROWS=0 forces them)."""
    done = native_rows.convert_file(path, host_dir, prefix, cpu=cpu, truncate=truncate, max_rows=max_rows, api=api,
                                    memcpy=memcpy, stats=stats, names_of=_json_string, direction_of=copy_direction)
    if done is None:
        events = read_kineto(path, cpu=cpu)
        done = _write_events(events, host_dir, prefix, truncate=truncate, max_rows=max_rows, api=api, memcpy=memcpy,
                             stats=stats), len(events)
    if cpu and done[0]:  # the phase markers, by one scan whichever path wrote the operators
        done[0].append(write_markers(host_dir, prefix, *markers_of_file(path)))
    return done


def _write_events(events: Events, host_dir: str, prefix: str, *, truncate: bool, max_rows: int | None, api: bool,
                  memcpy: bool, stats: bool) -> list[str]:
    rows = _Rows(events, truncate, max_rows)
    if not len(rows):
        return []
    written = [os.path.join(host_dir, prefix + "kernel_trace.csv"), os.path.join(host_dir, prefix + "kernel_stats.csv")]
    with LineWriter(written[0]) as out:
        out.write(",".join(rocprof_csv.cell(h) for h in rocprof_csv.KERNEL_TRACE) + "\n")
        for block in rows.lines():
            out.write(block)
    rocprof_csv.write_rows(written[1], rocprof_csv.STATS, rows.stats())
    calls = api_rows(events) if api else []
    if calls:
        written.append(os.path.join(host_dir, prefix + "hip_api_trace.csv"))
        _write_table(written[-1], rocprof_csv.API_TRACE, calls)
        if stats:
            durations: dict[str, list[int]] = {}
            for r in calls:
                durations.setdefault(r[1], []).append(r[6] - r[5])
            written.append(os.path.join(host_dir, prefix + "hip_api_stats.csv"))
            rocprof_csv.write_rows(written[-1], rocprof_csv.STATS, rocprof_csv.kernel_stats(durations))
    copies = memcpy_rows(events) if memcpy else []
    if copies:
        written.append(os.path.join(host_dir, prefix + "memory_copy_trace.csv"))
        _write_table(written[-1], rocprof_csv.MEMORY_COPY_TRACE, copies)
    return written

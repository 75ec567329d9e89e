"""PyTorch profiler traces: Kineto's Chrome-trace JSON (`torch.profiler` export_chrome_trace), `.json` or `.json.gz`.

One file per process (rank). What is read, by event category (`cat`, compared lower-case):

- `kernel` (GPU kernels, NCCL/RCCL included): the dispatches, per device (`args.device`, else the event's pid);
- `gpu_memcpy` / `gpu_memset`: device copies, passed to `dispatches.aggregate` as `copies` (busy time) and
  summed per direction into `TimingSource.copies`;
- `cpu_op`: CPU operators, reported only when the trace has no kernels (self and inclusive time: cpu_ops);
- `ProfilerStep#N` (category `user_annotation`, or `cpu_op` in older traces): the marked iterations;
- `[memory]` instant events: the peak of `Total Allocated` per device;
- `distributedInfo.rank`: the rank.

Times: Kineto writes `ts`/`dur` in microseconds with up to three decimals, relative to `baseTimeNanoseconds` when
the trace has it. The JSON is decoded with msgspec, floats kept as their text, and converted to integer nanoseconds
by decimal arithmetic, so no timestamp goes through a binary float.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import cpu_ops, dispatches
from madengine_rocprof.reports.model import CopyStats, Iteration, TimingSource

FORMAT = "kineto"
SUFFIXES = (".json", ".json.gz")
TORCH_NAME = re.compile(r"\.pt\.trace\.json(\.gz)?$")  # torch's default file name: always a Kineto trace
SNIFF_BYTES = 1 << 20
# a Chrome trace written by Kineto: its top-level keys or its event categories (other tools' Chrome traces, such as
# the report's own Perfetto output, have neither); keys may come after the events when a tool re-wrote the file
KINETO_MARK = re.compile(
    rb'"(?:schemaVersion|baseTimeNanoseconds|distributedInfo|deviceProperties)"\s*:'
    rb'|"cat"\s*:\s*"(?:cpu_op|kernel|cuda_runtime|hip_runtime|cuda_driver|python_function|gpu_memcpy|gpu_memset)"',
    re.IGNORECASE,
)
STEP = re.compile(r"^ProfilerStep#(\d+)$")
KERNEL, MEMCPY, MEMSET, CPU_OP = "kernel", "gpu_memcpy", "gpu_memset", "cpu_op"
STEP_CATEGORIES = ("user_annotation", "cpu_op")
# c10::DeviceType of a [memory] event: CPU 0, CUDA 1, HIP 6 (ROCm builds report 1 or 6 for GPU memory)
DEVICE_TYPES = {0: "CPU", 1: "GPU", 6: "GPU"}
FIX = "the trace is truncated or corrupt; export it again (torch.profiler's export_chrome_trace)"


class _Event(msgspec.Struct):
    """The fields read from a trace event; the rest of each event is skipped by the decoder."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Any = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]  # noqa: N815 - Kineto's key
    baseTimeNanoseconds: Any = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815


# floats arrive as their JSON text (float_hook=str): timestamps stay exact
_DECODER = msgspec.json.Decoder(_Trace, float_hook=str)


def is_kineto_trace(path: Path) -> bool:
    """By name (`*.json`, `*.json.gz`) and the first bytes: a JSON object with Kineto's keys."""
    name = path.name
    if not name.endswith(SUFFIXES):
        return False
    if TORCH_NAME.search(name):
        return True
    try:
        if name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                head = fh.read(SNIFF_BYTES)
        else:
            with open(path, "rb") as fh:
                head = fh.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return False
    head = head.lstrip()
    if not head.startswith(b"{") or b'"traceEvents"' not in head:
        return False
    return KINETO_MARK.search(head) is not None


def _raw(path: Path) -> bytes:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise UserError(f"cannot decompress: {err}", file=str(path), fix=FIX) from None
    except OSError as err:
        raise UserError(f"cannot read: {err.strerror or err}", file=str(path)) from None


def _load(path: Path) -> _Trace:
    raw = _raw(path)
    try:
        return _DECODER.decode(raw)
    except msgspec.ValidationError as err:
        text = str(err)
        where = text.rsplit(" - at `", 1)[1].rstrip("`") if " - at `" in text else None
        raise UserError(f"not a Kineto trace: {text.split(' - at `')[0]}", file=str(path), where=where,
                        fix="pass a trace written by torch.profiler (export_chrome_trace)") from None
    except msgspec.DecodeError as err:
        text = str(err)
        match = re.search(r"\(byte (\d+)\)", text)
        line = column = None
        if match:
            pos = int(match.group(1))
            line = raw.count(b"\n", 0, pos) + 1
            column = pos - (raw.rfind(b"\n", 0, pos) + 1) + 1
        raise UserError(f"not valid JSON: {text}", file=str(path), line=line, column=column, fix=FIX) from None


def to_ns(value: Any) -> int:
    """Kineto microseconds (JSON int, or a decimal's text) -> integer nanoseconds, rounded half to even."""
    if type(value) is int:
        return value * 1000
    if type(value) is str:
        whole, dot, frac = value.partition(".")
        if dot and len(frac) <= 3 and whole.isdigit() and frac.isdigit():
            return int(whole) * 1000 + int(frac.ljust(3, "0"))
        try:  # more than three decimals, an exponent or a sign: exact decimal arithmetic
            return int((Decimal(value) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except InvalidOperation:
            pass
    raise ValueError(value)


class _Bad(Exception):
    """An event field that cannot be used; carries the message for UserError."""


def _times(event: _Event, base: int) -> tuple[int, int]:
    try:
        start = base + to_ns(event.ts)
        duration = to_ns(event.dur)
    except ValueError:
        raise _Bad(f"ts {event.ts!r} / dur {event.dur!r} are not numbers of microseconds") from None
    if duration < 0:
        raise _Bad(f"negative dur {event.dur}")
    return start, start + duration


def _int_arg(args: Any, key: str, default: Any) -> Any:
    return args.get(key, default) if isinstance(args, dict) else default


class _Collected:
    """Columns gathered in one pass over the events."""

    def __init__(self) -> None:
        self.kernels: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
        self.copies: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
        self.cpu: list[tuple[str, object, int, int]] = []
        self.steps: dict[int, Iteration] = {}
        self.memory: dict[str, int] = {}
        self.tracks: list[str] = []  # per kernel/copy: "<device> stream <n>" (for the Perfetto writer)


def _collect(path: Path, trace: _Trace, *, want_cpu: bool = True, want_tracks: bool = False) -> _Collected:
    base = trace.baseTimeNanoseconds
    if base is None:
        base = 0
    elif type(base) is not int or base < 0:
        raise UserError(f"baseTimeNanoseconds is {base!r}, not a non-negative integer", file=str(path),
                        where="$.baseTimeNanoseconds", fix=FIX)
    out = _Collected()
    for i, event in enumerate(trace.traceEvents):
        ph, cat = event.ph, event.cat
        try:
            if ph == "X" and type(cat) is str:
                cat = cat.lower()
                if cat in (KERNEL, MEMCPY, MEMSET):
                    start, end = _times(event, base)
                    args = event.args
                    device = _int_arg(args, "device", event.pid)
                    table = out.kernels if cat == KERNEL else out.copies
                    table["name"].append(_name(event))
                    table["start"].append(start)
                    table["end"].append(end)
                    table["device"].append(f"GPU {device}")
                    if want_tracks and cat == KERNEL:
                        out.tracks.append(f"GPU {device} stream {_int_arg(args, 'stream', event.tid)}")
                elif cat in STEP_CATEGORIES and type(event.name) is str and event.name.startswith("ProfilerStep#"):
                    match = STEP.match(event.name)
                    if match:
                        start, end = _times(event, base)
                        out.steps.setdefault(int(match.group(1)), Iteration(int(match.group(1)), start, end))
                elif cat == CPU_OP and want_cpu:
                    start, end = _times(event, base)
                    out.cpu.append((_name(event), (event.pid, event.tid), start, end))
            elif ph in ("i", "I") and event.name == "[memory]" and isinstance(event.args, dict):
                _memory(event.args, out.memory)
        except _Bad as err:
            raise UserError(f"{cat} event {event.name!r}: {err}", file=str(path), where=f"$.traceEvents[{i}]",
                            fix=FIX) from None
    return out


def _name(event: _Event) -> str:
    if type(event.name) is not str:
        raise _Bad("has no name")
    return event.name


def _memory(args: dict, peaks: dict[str, int]) -> None:
    allocated = args.get("Total Allocated")
    if type(allocated) is not int:
        return
    device_type = args.get("Device Type")
    kind = DEVICE_TYPES.get(device_type, f"device type {device_type}") if type(device_type) is int else "device"
    label = kind if kind == "CPU" else f"{kind} {args.get('Device Id', '?')}"
    if allocated > peaks.get(label, -1):
        peaks[label] = allocated


def _rank(path: Path, info: Any) -> int | None:
    if info is None:
        return None
    rank = info.get("rank") if isinstance(info, dict) else None
    if type(rank) is not int or rank < 0:
        raise UserError(f"distributedInfo.rank is {rank!r}, not a rank number", file=str(path),
                        where="$.distributedInfo.rank", fix=FIX)
    return rank


def read_kineto(src: TimingSource) -> TimingSource:
    """Fill src from one Kineto trace: kernels (or CPU operators when there are none), copies, steps, memory."""
    trace = _load(src.path)
    src.rank = _rank(src.path, trace.distributedInfo)
    got = _collect(src.path, trace)
    del trace  # the decoded events are the largest thing held; the columns are all that is needed now
    copies = dispatches.frame(got.copies) if got.copies["name"] else None
    if got.kernels["name"] or not got.cpu:
        dispatches.aggregate(src, dispatches.frame(got.kernels), copies=copies)
    else:
        src.cpu_operators = True
        src.kernels = cpu_ops.operator_stats(got.cpu)
        src.dispatches = len(got.cpu)
        src.has_timeline = True
        src.first_start_ns = min(c[2] for c in got.cpu)
        src.last_end_ns = max(c[3] for c in got.cpu)
    src.copies = _copy_stats(got.copies)
    src.iterations = [got.steps[n] for n in sorted(got.steps)]
    src.peak_memory_bytes = dict(sorted(got.memory.items()))
    return src


def _copy_stats(copies: dict[str, list]) -> dict[str, CopyStats]:
    """Per direction as the rocprofv3 reader names them: `Memcpy HtoD (Pinned -> Device)` -> `host to device`."""
    stats: dict[str, CopyStats] = {}
    for name, start, end in zip(copies["name"], copies["start"], copies["end"], strict=True):
        words = name.split()
        direction = "memset" if words and words[0].lower() == "memset" else DIRECTIONS.get(
            words[1] if len(words) > 1 else "", "unknown")
        entry = stats.setdefault(direction, CopyStats())
        entry.calls += 1
        entry.total_ns += end - start
    return stats


DIRECTIONS = {"HtoD": "host to device", "DtoH": "device to host", "DtoD": "device to device",
              "HtoH": "host to host", "PtoP": "peer to peer"}


def iter_kineto(path: Path) -> Iterator[tuple[str, int, int, str]]:
    """Each kernel as (name, start ns, end ns, track) for the Perfetto writer; CPU operators when there are none."""
    got = _collect(path, _load(path), want_tracks=True)
    if got.kernels["name"]:
        k = got.kernels
        yield from zip(k["name"], k["start"], k["end"], got.tracks, strict=True)
        return
    for name, thread, start, end in got.cpu:
        yield name, start, end, "pid {} thread {}".format(*thread)  # type: ignore[misc]


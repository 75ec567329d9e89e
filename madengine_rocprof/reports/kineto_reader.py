"""PyTorch profiler traces: Kineto's Chrome-trace JSON (`torch.profiler` export_chrome_trace), `.json` or `.json.gz`.

One file per process (rank). What is read, by event category (`cat`, any case):

- `kernel` (GPU kernels, NCCL/RCCL included): the dispatches, per device (`args.device`, else the event's pid);
- `gpu_memcpy` / `gpu_memset` (`Memcpy` / `Memset` before 2022): device copies, passed to `dispatches.aggregate`
  as `copies` (busy time) and summed per direction into `TimingSource.copies`;
- `cpu_op` (`Operator` before 2022): CPU operators, reported only when the trace has no kernels, with self and
  inclusive time (cpu_ops);
- `ProfilerStep#N` (category `user_annotation`, or `cpu_op` in older traces): the marked iterations;
- `[memory]` instant events: the peak of `Total Allocated` per device;
- `distributedInfo.rank`: the rank.

Times: Kineto writes `ts`/`dur` in microseconds with up to three decimals, relative to `baseTimeNanoseconds` when
the trace has it. The JSON is decoded with msgspec, floats kept as their text, and converted to integer nanoseconds
by decimal arithmetic, so no timestamp goes through a binary float. The file is decoded a block of events at a
time (CHUNK bytes), so memory does not grow with the size of the file, only with the number of GPU events kept
(four 8-byte integers each).
"""

from __future__ import annotations

import array
import codecs
import contextlib
import gzip
import importlib
import itertools
import json
import operator
import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from decimal import ROUND_HALF_EVEN, Context, InvalidOperation, Overflow
from pathlib import Path
from typing import Any, cast

import msgspec
import polars as pl

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import cpu_ops, dispatches, heap, phases
from madengine_rocprof.reports.model import CopyStats, Iteration, TimingSource

try:  # ISA-L's inflate: about a third of zlib's CPU on a trace (requirements.txt); the standard library otherwise
    _gzip: Any = importlib.import_module("isal.igzip")
    _INFLATE_ERRORS: tuple[type[Exception], ...] = (
        EOFError, zlib.error, gzip.BadGzipFile, importlib.import_module("isal.isal_zlib").error)
except ImportError:  # pragma: no cover - the pinned requirement is installed where the report runs
    _gzip = gzip
    _INFLATE_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)

_REREAD_ERRORS: tuple[type[Exception], ...] = (OSError, *_INFLATE_ERRORS)
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
_KERNEL, _COPY, _CPU, _ANNOTATION = "kernel", "copy", "cpu", "annotation"
# event category (as written, any case) -> what is read from it. ProfilerStep#N is a user_annotation, or a cpu_op in
# older traces. Kineto before 2022 wrote Kernel, Memcpy, Memset and Operator.
CATEGORY_KINDS = {
    spelling: kind
    for cat, kind in (
        (KERNEL, _KERNEL), (MEMCPY, _COPY), (MEMSET, _COPY), ("memcpy", _COPY), ("memset", _COPY),
        (CPU_OP, _CPU), ("operator", _CPU), ("user_annotation", _ANNOTATION),
    )
    for spelling in (cat, cat.upper(), cat.capitalize())
}
# c10::DeviceType of a [memory] event: CPU 0, CUDA 1, HIP 6 (ROCm builds report 1 or 6 for GPU memory)
DEVICE_TYPES = {0: "CPU", 1: "GPU", 6: "GPU"}
FIX = "the trace is truncated or corrupt; export it again (torch.profiler's export_chrome_trace)"


def is_kineto_trace(path: Path) -> bool:
    """By name (`*.json`, `*.json.gz`) and the first bytes: a JSON object with Kineto's keys or event categories."""
    name = path.name
    if not name.endswith(SUFFIXES):
        return False
    if not inputs.is_regular(path):  # discovery skips FIFOs, devices and sockets: reading one could hang
        return False
    if TORCH_NAME.search(name):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
        if name.endswith(".gz"):  # the start of the stream, even when the file is truncated (the read then says so)
            head = zlib.decompressobj(wbits=31).decompress(head, SNIFF_BYTES)
    except (OSError, zlib.error):
        return False
    head = head.lstrip()
    if not head.startswith(b"{") or b'"traceEvents"' not in head:
        return False
    return KINETO_MARK.search(head) is not None


class _Args(msgspec.Struct, gc=False):
    """The args read: a GPU event's device and stream, the links between events (correlation, External id), a CPU
    operator's shapes and a collective's parameters (trace_tables), a [memory] event's figures; others are skipped.
    Shapes stay raw JSON text (no Python lists per event); a wrongly typed link or count is read as absent."""

    device: int | str | None = None  # typed: a list or object here is refused with its JSON path, never hashed
    stream: int | str | None = None
    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    input_dims: msgspec.Raw = msgspec.field(default=None, name="Input Dims")  # type: ignore[assignment]
    input_types: msgspec.Raw = msgspec.field(default=None, name="Input type")  # type: ignore[assignment]
    input_strides: msgspec.Raw = msgspec.field(default=None, name="Input Strides")  # type: ignore[assignment]
    concrete_inputs: msgspec.Raw = msgspec.field(default=None, name="Concrete Inputs")  # type: ignore[assignment]
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = msgspec.field(default=None, name="Group size")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    ranks: msgspec.Raw = msgspec.field(default=None, name="Process Group Ranks")  # type: ignore[assignment]
    seq: Any = msgspec.field(default=None, name="Seq")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


class _Event(msgspec.Struct, gc=False):
    """The fields read from a trace event; the rest of each event is skipped by the decoder."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Any = None
    dur: Any = None
    args: _Args | None = None


class _Meta(msgspec.Struct):
    """The top-level object without its events."""

    traceEvents: list[Any]  # noqa: N815 - Kineto's key
    baseTimeNanoseconds: Any = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815
    deviceProperties: Any = None  # noqa: N815


# floats arrive as their JSON text (float_hook=str): timestamps stay exact
_EVENTS = msgspec.json.Decoder(list[_Event], float_hook=str)
_META = msgspec.json.Decoder(_Meta, float_hook=str)
CHUNK = 8 << 20  # decompressed bytes decoded at a time: memory stays flat however large the trace
GZIP_MAGIC = b"\x1f\x8b"
EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


class _Stream:
    """A trace file's bytes (decompressed), read chunk by chunk, with the position of what was consumed.

    A thread reads and decompresses the next chunks while the caller decodes this one (zlib lets go of the GIL).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # bytes consumed before `buffer`
        self.buffer = b""
        self.eof = False
        # a FIFO or device would hang or never end; the file, and what it decompresses to, within the limit
        inputs.check_regular(path, "PyTorch profiler trace", inputs.JSON_TRACE_LIMIT)
        self.limit = inputs.limit_for(inputs.JSON_TRACE_LIMIT)
        try:
            fh = _gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
        except OSError as err:
            raise UserError(f"cannot read: {err.strerror or err}", file=str(path)) from None
        self._chunks: queue.Queue = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read_ahead, args=(fh,), daemon=True)
        self._reader.start()

    def _read_ahead(self, fh) -> None:
        decoded = 0
        with fh:
            while not self._stop.is_set():
                try:
                    data = fh.read(CHUNK)
                    decoded += len(data)
                    if decoded > self.limit:  # a gzip bomb, or a trace too large for this machine's memory
                        self._chunks.put(UserError(
                            f"PyTorch profiler trace decompresses to over the limit of {self.limit:,} bytes",
                            file=str(self.path), fix=f"check that the right file was given; to read it anyway set "
                                                     f"{inputs.LIMIT_ENV} to a size in MiB"))
                        return
                except _INFLATE_ERRORS as err:
                    self._chunks.put(UserError(f"cannot decompress: {err}", file=str(self.path), fix=FIX))
                    return
                except OSError as err:
                    self._chunks.put(UserError(f"cannot read: {err.strerror or err}", file=str(self.path)))
                    return
                self._chunks.put(data)
                if not data:
                    return

    def next_chunk(self) -> bytes:
        """The next chunk, b"" at the end of the file (for a reader that keeps no buffer: kineto_native)."""
        if self.eof:
            return b""
        data = self._chunks.get()
        if isinstance(data, UserError):
            self.eof = True
            raise data
        if not data:
            self.eof = True
        return data

    def fill(self) -> bool:
        """Append the next chunk to the buffer; False at the end of the file."""
        data = self.next_chunk()
        if not data:
            return False
        self.buffer += data
        return True

    def close(self) -> None:
        """Stop the reading thread (it may be waiting to hand over a chunk)."""
        self._stop.set()
        while self._reader.is_alive():
            with contextlib.suppress(queue.Empty):
                self._chunks.get(timeout=0.05)

    def _lines_consumed(self) -> int | None:
        """Newlines before `buffer`: counted only for an error (the file read again up to there), so reading a
        good trace scans its text once less. None if the file cannot be read again."""
        lines, left = 0, self.offset
        try:
            with _gzip.open(self.path, "rb") if self.path.name.endswith(".gz") else open(self.path, "rb") as fh:
                while left > 0:
                    data = fh.read(min(CHUNK, left))
                    if not data:
                        break
                    lines += data.count(b"\n")
                    left -= len(data)
        except _REREAD_ERRORS:
            return None
        return lines

    def consume(self, n: int) -> None:
        self.buffer = self.buffer[n:]
        self.offset += n

    def error(self, what: str, pos: int | None = None, where: str | None = None) -> UserError:
        """An error at byte `pos` of the buffer (line and column counted from the start of the file)."""
        line = column = None
        if pos is not None:
            pos = max(0, min(pos, len(self.buffer)))
            before = self._lines_consumed()
            line = None if before is None else before + self.buffer.count(b"\n", 0, pos) + 1
            column = pos - (self.buffer.rfind(b"\n", 0, pos) + 1) + 1
        return UserError(what, file=str(self.path), line=line, column=column, where=where, fix=FIX)


def _decode_error_pos(err: Exception) -> int | None:
    match = re.search(r"\(byte (\d+)\)", str(err))
    return int(match.group(1)) if match else None


def _events(stream: _Stream, handle) -> _Meta:
    """`_decode_events`, with JSON nested deeper than the decoder recurses reported in the file's name."""
    try:
        return _decode_events(stream, handle)
    except RecursionError:
        raise UserError("JSON nested too deeply to read (thousands of levels)", file=str(stream.path),
                        fix="no profiler writes this: check that the right file was given") from None


def _decode_events(stream: _Stream, handle) -> _Meta:
    """Decode the events block by block, passing each decoded list to `handle(events, index of the first)`.

    A block ends at the last `}, {` outside strings in the buffer (_boundaries); if it does not decode (a `}, {`
    between objects inside an event's args) the one before is tried, then a longer buffer. Returns the top-level
    object with an empty event list (its keys may come before or after the events).
    """
    head = _head(stream)
    seen = 0
    while True:
        while not stream.eof and len(stream.buffer) < CHUNK:
            stream.fill()
        if stream.eof:
            return _last_block(stream, head, handle, seen)
        events, cut = _decode_block(stream, seen)
        if events is None:
            stream.fill()  # no candidate end decoded (a string holding `}, {`, or a huge event): take in more
            continue
        _no_repeated_event_keys(stream, stream.buffer[:cut], len(events), seen)
        handle(events, seen)
        seen += len(events)
        comma = stream.buffer.index(b",", cut)  # the comma between this block's last event and the next one
        stream.consume(comma + 1)


def _head(stream: _Stream) -> bytes:
    """The text up to and including `"traceEvents": [`, checked (_check_head) and consumed from the stream."""
    stream.fill()
    if stream.buffer[:2] == GZIP_MAGIC:  # only a name without .gz gets here: gzip.open reads the others
        raise UserError("the file is gzip-compressed", file=str(stream.path), line=1,
                        fix=f"name it {stream.path.name}.gz (the reader decompresses .json.gz), or decompress it")
    if stream.buffer.startswith(codecs.BOM_UTF8):
        stream.consume(len(codecs.BOM_UTF8))  # dropped, as the input layer drops it from every JSON file
    while True:  # the prefix, up to `"traceEvents": [`
        match = EVENTS_KEY.search(stream.buffer)
        if match:
            break
        if not stream.fill() or len(stream.buffer) > 8 * CHUNK:
            raise stream.error('no "traceEvents" list: not a PyTorch profiler trace', 0)
    _check_head(stream, stream.buffer[:match.end()])
    head = stream.buffer[:match.end()]
    stream.consume(match.end())
    return head


def _check_head(stream: _Stream, head: bytes) -> None:
    """The text before the events is the start of a JSON object: a comment or stray bytes there are reported where
    they are (not at the end of the file, where decoding the whole would fail)."""
    try:
        _META.decode(head + b"]}")
    except msgspec.DecodeError as err:
        pos = _decode_error_pos(err)
        if pos is None or pos >= len(head):  # the head itself is fine: the rest is judged later
            return
        raise stream.error(f"not valid JSON before the events: {err}", pos) from None
    except msgspec.ValidationError:
        return  # the keys' types are judged with the keys after the events


def _decode_block(stream: _Stream, seen: int) -> tuple[list[_Event] | None, int]:
    """The events of the buffer up to a candidate end of an event (the last `}, {` first); (None, 0) if none decodes.

    A candidate outside strings can still be inside an event (`[{}, {}]` in its args): then the block does not
    decode and the next one back is tried. A buffer that grew past 8 blocks without a decodable end is broken JSON,
    reported where it breaks.
    """
    error: Exception | None = None
    for attempt, cut in enumerate(_boundaries(stream.buffer)):
        if attempt == 8:
            break
        try:
            return _EVENTS.decode(b"[" + stream.buffer[:cut] + b"]"), cut
        except msgspec.DecodeError as err:
            error = error or err
        except msgspec.ValidationError as err:
            raise _validation(stream, err, seen) from None
    if len(stream.buffer) > 8 * CHUNK:
        pos = _decode_error_pos(error) if error else None
        if error is None:  # no event ends within the bound: one event (or the space between two) is larger than it
            bound = 8 * CHUNK
            size = f"{bound >> 20} MiB" if bound >= 1 << 20 else f"{bound:,} bytes"
            error = stream.error(f"no event ends within {size}: an event (or the blank space between two) is larger"
                                 f" than the reader's bound of {size} per event", None)
            error.fix = ("torch.profiler writes events of a few KB: check that this file is the trace it exported,"
                         " not one built or edited by another tool")
            raise error
        raise stream.error(f"not valid JSON: {error}", None if pos is None else max(0, pos - 1))
    return None, 0


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)  # a whole JSON string literal


def _boundaries(buffer: bytes) -> Iterator[int]:
    """Offsets just past the `}` of `}, {` outside strings in the buffer, the last first: tentative ends of a block
    of whole events.

    The first one is offered unchecked: if it lies inside a string, the block ends inside that string and cannot
    decode, so a block that decodes was cut between events. After that, text inside a string (a kernel name holding
    `}, {`) is never offered: the buffer starts between two events, outside any string, so a place is outside
    strings when the quotes before it pair up (bytes.count, no Python loop per byte), or, where the buffer holds
    an escaped quote, by matching whole string literals."""
    end = len(buffer)
    quotes_after = 0  # quotes in buffer[end:]
    total = escaped = None
    while True:
        brace = buffer.rfind(b"}", 0, end)
        if brace < 0:
            return
        if total is not None:
            quotes_after += buffer.count(b'"', brace, end)
        end = brace
        after = buffer[brace + 1: brace + 65].lstrip()
        if after[:1] != b"," or after[1:].lstrip()[:1] != b"{":
            continue
        if total is None:  # the common case: the last candidate decodes, and nothing is counted
            yield brace + 1
            total, escaped = buffer.count(b'"'), buffer.find(b'\\"') >= 0
            quotes_after = buffer.count(b'"', brace)
            continue
        if (_outside_string(buffer, brace) if escaped else (total - quotes_after) % 2 == 0):
            yield brace + 1


def _outside_string(buffer: bytes, pos: int) -> bool:
    """Whether `pos` lies outside every string literal, the buffer starting outside one (exact with escapes)."""
    at = 0
    while True:
        quote = buffer.find(b'"', at, pos)
        if quote < 0:
            return True
        literal = _STRING.match(buffer, quote)
        if literal is None or literal.end() > pos:
            return False
        at = literal.end()


def _last_block(stream: _Stream, head: bytes, handle, seen: int) -> _Meta:
    """At the end of the file: the last events, then `]`, then the rest of the top-level object."""
    rest = stream.buffer
    close = len(rest)
    error: Exception | None = None
    while True:  # the array's `]` is the last one after which both parts decode
        close = rest.rfind(b"]", 0, close)
        if close < 0:
            break
        try:  # the small part first: most wrong candidates (a `]` in the keys after the events) fail there
            meta = _META.decode(head + b"]" + rest[close + 1:])
            events = _EVENTS.decode(b"[" + rest[: close + 1])
        except msgspec.ValidationError as err:
            raise _validation(stream, err, seen) from None
        except msgspec.DecodeError as err:
            error = error or err
            continue
        _no_repeated_keys(stream, head + b"]" + rest[close + 1:])
        _no_repeated_event_keys(stream, rest[:close], len(events), seen)
        handle(events, seen)
        return meta
    try:  # say where the events stop being JSON (a truncated file: at its end)
        _EVENTS.decode(b"[" + rest)
    except msgspec.DecodeError as err:
        error = err
    except msgspec.ValidationError:
        pass
    pos = _decode_error_pos(error) if error else None
    if pos is None:  # "Input data was truncated": the file ends early, so the place is its end
        pos = len(rest) + 1
    raise stream.error(f"not valid JSON: {error or 'no end of the traceEvents list'}", max(0, pos - 1))


def _no_repeated_keys(stream: _Stream, outside: bytes) -> None:
    """The top-level object around the events (its keys are a few kB): a key given twice, "traceEvents" above all,
    would make the trace two traces, of which the decoder would read one. The strict JSON loader refuses it."""
    try:
        text = outside.decode("utf-8")
    except UnicodeDecodeError:
        return  # the decoder has read it; a non-UTF-8 byte there is msgspec's to judge
    try:
        inputs.loads(text, str(stream.path), "trace")
    except UserError as err:  # its line and column would count in the keys alone: name the top level instead
        raise UserError(err.what.replace("invalid JSON: ", ""), file=str(stream.path),
                        where="$ (the keys around traceEvents)", fix=FIX) from None


# The keys whose repetition inside one event would change a number: the decoder keeps the last of two. Counting a
# key costs about 0.5 s per GB of trace, so only the two times are counted (a repeated name stays unchecked).
_COUNTED_KEYS = (b'"ts"', b'"dur"')
_EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
_REPEATED = "\0repeated"  # a key no JSON text gives: marks an object that gave one of _EVENT_KEYS twice


def _mark_repeats(items: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _v in items]
    twice = [k for k in _EVENT_KEYS if keys.count(k) > 1]
    return {**dict(items), _REPEATED: twice[0]} if twice else dict(items)


def _no_repeated_event_keys(stream: _Stream, block: bytes, count: int, seen: int) -> None:
    """An event that gives `ts` or `dur` twice is refused (exit 2), and any of its own keys once the block is parsed:
    the decoder would read the last silently.

    Cheap in the common case: `"ts"` appears in the raw text only as a key or a whole string value (a quote inside
    a string is escaped), so while each counted key appears at most once per event nothing is repeated. A higher
    count (a repeat, or the same word as an args key or a value) sends the block to the standard parser, which names
    the event that repeats a key of its own (args are not checked)."""
    if all(block.count(key) <= count for key in _COUNTED_KEYS):
        return
    try:
        events = json.loads(b"[" + block + b"]", object_pairs_hook=_mark_repeats)
    except ValueError:
        return  # msgspec decoded it; what the stricter parser refuses is not a repeated key
    for index, event in enumerate(events):
        if isinstance(event, dict) and _REPEATED in event:
            raise UserError(f'an event gives "{event[_REPEATED]}" twice', file=str(stream.path),
                            where=f"$.traceEvents[{seen + index}]",
                            fix="write each key once per event (was the trace edited, or two traces joined?)")


def _validation(stream: _Stream, err: msgspec.ValidationError, seen: int) -> UserError:
    text = str(err)
    what, _, at = text.partition(" - at `")
    where = at.rstrip("`")
    match = re.match(r"\$\[(\d+)\](.*)", where)
    if match:
        where = f"$.traceEvents[{seen + int(match.group(1))}]{match.group(2)}"
    return UserError(f"not a PyTorch profiler trace: {what}", file=str(stream.path), where=where or None,
                     fix="pass a trace written by torch.profiler (export_chrome_trace)")


# A time given as text (msgspec hands JSON numbers over as their text; a JSON string arrives the same way): JSON's
# number grammar in ASCII. int()/Decimal() alone would also take "1_000", " 1000", "Infinity" and non-ASCII digits.
_NUMBER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_TIME_TEXT = 64  # characters: no profiler writes a longer number (and Decimal arithmetic stays small)
_DECIMAL = Context(prec=_MAX_TIME_TEXT + 8, Emax=_MAX_TIME_TEXT, Emin=-_MAX_TIME_TEXT - 8, traps=[InvalidOperation,
                                                                                                   Overflow])


def to_ns(value: Any) -> int:
    """Kineto microseconds (JSON int, or a decimal's text) -> integer nanoseconds, rounded half to even.

    Text must be a JSON number (ASCII digits, no blanks, underscores, NaN or Infinity; what the CSV reader accepts
    less its padding) of at most 64 characters; anything else is a ValueError, a number far out of range (1e400)
    an OverflowError."""
    if type(value) is int:
        return value * 1000
    if type(value) is str and len(value) <= _MAX_TIME_TEXT and _NUMBER_TEXT.fullmatch(value):
        whole, dot, frac = value.partition(".")
        if dot and len(frac) <= 3 and whole.isdigit() and frac.isdigit():
            return int(whole) * 1000 + int(frac.ljust(3, "0"))
        try:  # more than three decimals, an exponent or a sign: exact decimal arithmetic, exponent bounded
            number = _DECIMAL.create_decimal(value)
        except (Overflow, InvalidOperation):
            raise OverflowError(value) from None  # 1e1000000: a number, far out of range
        if number.adjusted() > 30:  # 10^30 us: far past 2^64 ns; the caller reports it out of range
            raise OverflowError(value)
        return int(_DECIMAL.multiply(number, 1000).to_integral_value(ROUND_HALF_EVEN, _DECIMAL))
    raise ValueError(value)


class _Bad(Exception):
    """An event field that cannot be used; carries the message for UserError."""


NULL = -(2**63)  # an absent value in an integer column (no link, no sequence number); never a real id
_STEP_DIGITS = 18  # ProfilerStep#N with a longer N is not a step number (int() would refuse 4,300 digits)


def _link(value: Any) -> int:
    """An id or count as found (int), NULL when absent or not an integer (the link is then unknown, not wrong)."""
    return value if type(value) is int and -(2**63) < value < 2**63 else NULL


class _Columns:
    """One table of GPU events: codes and integer times in arrays (8 bytes a value, not a Python int object).
    With `links` (trace_tables): stream, correlation and External id too."""

    def __init__(self, links: bool = False) -> None:
        self.name = array.array("q")
        self.start = array.array("q")
        self.end = array.array("q")
        self.device = array.array("q")
        self.links = links
        self.stream = array.array("q")
        self.correlation = array.array("q")
        self.external_id = array.array("q")

    def __len__(self) -> int:
        return len(self.name)

    def frame(self, names: dict[str, int], devices: dict[Any, int], base: int) -> pl.DataFrame:
        """The dispatch table (dispatches.DISPATCH_SCHEMA, names categorical), times from baseTimeNanoseconds."""
        name_list = pl.Series(list(names), dtype=pl.String).cast(pl.Categorical)
        device_list = pl.Series([f"GPU {d}" for d in devices], dtype=pl.Categorical)
        # base + a time past 2^63 (a uint64 timestamp) needs Int128 columns; _read has checked [0, 2^64)
        wide = dispatches.time_dtype(base + min(self.start, default=0), base + max(self.end, default=0))
        return pl.DataFrame(
            {
                "name": name_list.gather(pl.Series(self.name, dtype=pl.Int64)),
                "start": pl.Series(self.start, dtype=pl.Int64).cast(wide) + pl.Series([base], dtype=wide),
                "end": pl.Series(self.end, dtype=pl.Int64).cast(wide) + pl.Series([base], dtype=wide),
                "device": device_list.gather(pl.Series(self.device, dtype=pl.Int64)),
            }
        )


_RUNTIME_CATS = {spelling for cat in ("cuda_runtime", "hip_runtime", "cuda_driver", "hip_driver", "runtime")
                 for spelling in (cat, cat.upper(), cat.capitalize())}
_INT64 = (-(2**63), 2**63)
_KINETO_TIME = r"^[0-9]{1,15}\.[0-9]{3}$"  # what Kineto writes: whole ns after dropping the point, within Int64
_SHAPES = (("input_dims", "input_dims"), ("input_types", "input_types"), ("input_strides", "input_strides"),
           ("concrete_inputs", "concrete_inputs"))
_COMM_INTS = ("in_nelems", "out_nelems", "group_size", "seq")
_COMM_TEXT = ("collective", "dtype", "pg_name", "pg_desc")
_EMPTY_ARGS = _Args()
_NAME, _TS, _DUR, _CAT, _PID, _TID, _ARGS = map(operator.attrgetter, ("name", "ts", "dur", "cat", "pid", "tid", "args"))
_CORRELATION, _EXTERNAL_ID = map(operator.attrgetter, ("correlation", "external_id"))


def _int_column(values: list) -> pl.Series:
    """An Int64 column of ids or counts as the trace wrote them; a value that is not a JSON integer within Int64 (a
    list, an object, a string, a float, a bool) is absent. polars' own lenient conversion truncates 1.5 to 1, reads
    "12" as 12 and fails on a list that follows integers: the strict conversion is the fast path, and a block that it
    refuses takes the exact one."""
    try:
        return pl.Series(values, dtype=pl.Int64, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series([v if type(v) is int and _INT64[0] <= v < _INT64[1] else None for v in values],
                         dtype=pl.Int64)


class _Tables:
    """What trace_tables adds to the report's columns: host events (runtime calls, CPU operators, collectives) and
    their links. Millions of host events pass here, so they are converted a block at a time with polars (times
    checked by one regex over the column and parsed vectorised; names categorical), not field by field in Python;
    a block holding anything unusual (an integer `ts`, a time out of the common form) takes the exact per-event
    path, which names the event that is wrong."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runtime: list[pl.DataFrame] = []
        self.cpu: list[pl.DataFrame] = []
        self.comms: list[dict[str, Any]] = []  # one row per collective (a few per step): one frame at the end
        self.raw: dict[bytes, str | None] = {}  # raw JSON text of an argument -> its compact text

    def compact(self, raw: Any, strings_as_is: bool = False) -> str | None:
        """The compact JSON text of a raw argument (`[[8, 128], []]` -> `[[8,128],[]]`); a JSON string is kept as
        its value when `strings_as_is` (Process Group Ranks is written either way)."""
        key = bytes(raw)
        if key in self.raw:
            return self.raw[key]
        try:  # msgspec has checked it is JSON; the strict loader bounds its depth and numbers
            value = inputs.loads(key.decode("utf-8"), None, "trace")
        except (UserError, UnicodeDecodeError) as err:
            raise _Bad(f"an argument is not usable JSON: {getattr(err, 'what', err)}") from None
        text = None if value is None else value if strings_as_is and type(value) is str else json.dumps(
            value, separators=(",", ":"), ensure_ascii=False)
        self.raw[key] = text
        return text

    def block(self, got: _Collected, events: list[_Event], all_events: list[_Event], first: int,
              runtime: bool) -> None:
        """One block's runtime calls (`runtime`) or CPU operators and annotations, as a frame."""
        if not events:
            return
        names = list(map(_NAME, events))  # attrgetter maps: C loops, a third of a comprehension's time
        ts = list(map(_TS, events))
        durs = list(map(_DUR, events))
        times = None
        frame = None
        if None not in names:
            with contextlib.suppress(TypeError):  # a number that is not text (an integer ts): the exact path
                frame = pl.DataFrame({"ts": ts, "dur": durs}, schema={"ts": pl.String, "dur": pl.String})
        if frame is not None and frame.select(pl.col("ts").str.contains(_KINETO_TIME).all()
                                              & pl.col("dur").str.contains(_KINETO_TIME).all()).item():
            times = frame.select(
                start=pl.col("ts").str.replace(".", "", literal=True).cast(pl.Int64),
                dur=pl.col("dur").str.replace(".", "", literal=True).cast(pl.Int64))
            times = times.select("start", end=pl.col("start") + pl.col("dur"))
        if times is None:  # the exact path, event by event: it names the first event that is wrong
            starts, ends = [], []
            for event in events:
                start, end = got._times(event, all_events, first)
                if not (_INT64[0] <= start and end < _INT64[1]):
                    raise got._out_of_range(event, all_events, first)
                starts.append(start)
                ends.append(end)
            times = pl.DataFrame({"start": starts, "end": ends}, schema={"start": pl.Int64, "end": pl.Int64})
        args = list(map(_ARGS, events))
        if None in args:
            args = [_EMPTY_ARGS if a is None else a for a in args]
        columns: dict[str, pl.Series] = {
            "name": pl.Series(names, dtype=pl.Categorical),
            "cat": pl.Series(list(map(_CAT, events)), dtype=pl.Categorical),
            "pid": _int_column(list(map(_PID, events))),
            "tid": _int_column(list(map(_TID, events))),
            "start": times["start"], "end": times["end"],
        }
        if runtime:
            columns["correlation"] = _int_column(list(map(_CORRELATION, args)))
        columns["external_id"] = _int_column(list(map(_EXTERNAL_ID, args)))
        if runtime:
            self.runtime.append(pl.DataFrame(columns))
            return
        for key, attr in _SHAPES:
            raws = list(map(operator.attrgetter(attr), args))
            if raws.count(None) == len(raws):
                columns[key] = pl.repeat(None, len(raws), dtype=pl.Categorical, eager=True)
                continue
            known = self.raw
            try:
                texts = [None if r is None else known.get(bytes(r), _UNSEEN) for r in raws]
                texts = [self.compact(r) if t is _UNSEEN else t for r, t in zip(raws, texts, strict=True)]
            except _Bad as err:
                bad = next(e for e, r in zip(events, raws, strict=True) if r is not None and self._fails(r))
                raise got._bad(bad, all_events, first, str(err)) from None
            columns[key] = pl.Series(texts, dtype=pl.Categorical)
        frame = pl.DataFrame(columns)
        self.cpu.append(frame)
        distinct = frame["name"].unique().to_list()  # a block's few names, looked at once each (no string per row)
        comms = [n for n in distinct if n == "record_param_comms" or n.startswith("nccl:")]
        steps = [n for n in distinct if n.startswith("ProfilerStep#")]
        for wanted, add in ((comms, True), (steps, False)):
            if not wanted:
                continue
            for index in frame.select(pl.arg_where(pl.col("name").is_in(wanted))).to_series():
                if add:
                    self.comms.append(self._comm(frame.row(index, named=True), events[index], got, all_events,
                                                 first))
                else:
                    got.step(events[index], all_events, first, int(times["start"][index]), int(times["end"][index]))

    def _fails(self, raw: Any) -> bool:
        try:
            self.compact(raw)
        except _Bad:
            return True
        return False

    def _comm(self, row: dict, event: _Event, got: _Collected, all_events: list[_Event], first: int) -> dict:
        out: dict[str, Any] = {key: row[key] for key in ("name", "cat", "pid", "tid", "start", "end", "external_id")}
        try:
            out.update(self.comm_args(_EMPTY_ARGS if event.args is None else event.args))
        except _Bad as err:
            raise got._bad(event, all_events, first, str(err)) from None
        return out

    def comm_args(self, args: _Args) -> dict:
        """A collective's parameters from its args (_Bad: Process Group Ranks is not usable JSON)."""
        out: dict[str, Any] = {}
        for key in _COMM_INTS:
            value = getattr(args, key)
            out[key] = value if type(value) is int and _INT64[0] <= value < _INT64[1] else None
        for key in _COMM_TEXT:
            value = getattr(args, key)
            out[key] = value if type(value) is str else None
        out["ranks"] = None if args.ranks is None else self.compact(args.ranks, strings_as_is=True)
        return out

    def frames(self) -> dict[str, pl.DataFrame]:
        """Each table's blocks as one frame (names and shapes categorical), times relative to the base."""
        out = {}
        for key, blocks, schema in (("runtime", self.runtime, _RUNTIME_SCHEMA), ("cpu", self.cpu, _CPU_SCHEMA)):
            out[key] = pl.concat(blocks, rechunk=False) if blocks else pl.DataFrame(schema=schema)
        out["comms"] = pl.DataFrame(self.comms, schema=_COMM_SCHEMA) if self.comms else pl.DataFrame(
            schema=_COMM_SCHEMA)
        return out


def narrow_ids(frame: pl.DataFrame) -> pl.DataFrame:
    """A host frame's pid, tid and external_id as Int32 where every value fits (millions of rows: 4 bytes a value
    less each), Int64 otherwise; a column at a time, so only one column is held twice. Join keys that meet the GPU
    tables' Int64 ids (a runtime call's correlation) keep their width."""
    for key in ("pid", "tid", "external_id"):
        column = frame[key]
        low, high = column.min(), column.max()
        if frame.height and (low is None or low >= -(2**31) and high < 2**31):  # type: ignore[operator]
            frame = frame.with_columns(column.cast(pl.Int32))
            del column
    return frame


_UNSEEN = object()
_HOST_SCHEMA = {"name": pl.Categorical, "cat": pl.Categorical, "pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64,
                "end": pl.Int64}
_RUNTIME_SCHEMA = _HOST_SCHEMA | {"correlation": pl.Int64, "external_id": pl.Int64}
_CPU_SCHEMA = _HOST_SCHEMA | {"external_id": pl.Int64} | {
    key: pl.Categorical for key, _ in _SHAPES}
_COMM_SCHEMA = _HOST_SCHEMA | {"external_id": pl.Int64} | {key: pl.Int64 for key in _COMM_INTS} | {
    key: pl.String for key in (*_COMM_TEXT, "ranks")}


class _Collected:
    """Columns gathered from the events, block by block; times in ns relative to baseTimeNanoseconds.

    With `tables` (trace_tables), host events and the links between events are kept too (_Tables)."""

    def __init__(self, path: Path, *, want_tracks: bool = False, tables: bool = False) -> None:
        self.path = path
        self.want_tracks = want_tracks
        # GPU events as compact columns: name and device as codes into `names` / `devices`, times in ns
        self.kernels = _Columns(tables)
        self.copies = _Columns(tables)
        self.names: dict[Any, int] = {}  # keys: the events' names (typed str | None; _times refuses None)
        self.devices: dict[Any, int] = {}
        self.tables = _Tables(path) if tables else None
        # CPU operators for the report's operator table; with tables they are read from tables.cpu instead
        self.cpu: list[tuple[Any, object, int, int]] | None = None if tables else []  # None once a kernel was seen
        self.saw_kernel = False
        self.host_frames: dict[str, pl.DataFrame] | None = None  # the tables' host events, once all are read
        self.steps: dict[int, tuple[int, int]] = {}
        self.memory: dict[str, int] = {}
        self.tracks: list[str] = []  # per kernel: "GPU <device> stream <n>" (for the Perfetto writer)
        self.strings: dict[Any, Any] = {}  # one str object per distinct CPU operator name
        self.markers: list[tuple[Any, object, int, int]] = []  # Optimizer.step/zero_grad ranges (reports/phases.py)

    def __call__(self, events: list[_Event], first: int) -> None:
        kinds, tables = CATEGORY_KINDS, self.tables
        runtime: list[_Event] = []
        host: list[_Event] = []
        for event in events:
            if event.ph != "X":
                if event.name == "[memory]" and event.ph in ("i", "I") and event.args is not None:
                    _memory(event.args, self.memory)
                continue
            cat = event.cat
            kind = kinds.get(cat) if cat is not None else None
            if tables is not None and kind is not _KERNEL and kind is not _COPY:
                if kind is not None:
                    host.append(event)  # CPU operators and annotations: converted a block at a time
                elif cat in _RUNTIME_CATS:
                    runtime.append(event)
                continue
            if kind is None:
                continue
            ts, dur, name = event.ts, event.dur, event.name
            if kind is _ANNOTATION and not (type(name) is str and name.startswith(("ProfilerStep#", "Optimizer."))):
                continue  # record_function ranges: only the profiler's steps and the optimizer's are read
            # the common case inline (three decimals, as Kineto writes them); anything else through _times
            if type(ts) is str and type(dur) is str and ts[-4:-3] == "." and dur[-4:-3] == "." and type(name) is str:
                digits, span = ts.replace(".", ""), dur.replace(".", "")
                if digits.isdigit() and span.isdigit() and digits.isascii() and span.isascii():
                    start = int(digits)
                    end = start + int(span)
                else:  # a sign, blanks, underscores, other digits: the one number rule says
                    start, end = self._times(event, events, first)
            else:
                start, end = self._times(event, events, first)
            name = cast(str, name)  # _times has refused an event without a name
            try:
                if kind is _KERNEL or kind is _COPY:
                    self._gpu(event, kind, name, start, end)
                elif kind is _CPU and self.cpu is not None:
                    self.cpu.append((self.strings.setdefault(name, name), (event.pid, event.tid), start, end))
                elif kind is _ANNOTATION and self.cpu is not None and phases.MARKER.match(name):
                    self.markers.append((name, (event.pid, event.tid), start, end))
            except OverflowError:  # beyond +-2^63 ns relative to baseTimeNanoseconds: no uint64 timestamp
                raise self._out_of_range(event, events, first) from None
            if kind is not _KERNEL and kind is not _COPY and name.startswith("ProfilerStep#"):
                self.step(event, events, first, start, end)
        if tables is not None:
            tables.block(self, host, events, first, runtime=False)
            tables.block(self, runtime, events, first, runtime=True)

    def step(self, event: _Event, events: list[_Event], first: int, start: int, end: int) -> None:
        """A ProfilerStep#N range (the first of a number counts)."""
        match = STEP.match(cast(str, event.name))
        if match:
            if len(match.group(1)) > _STEP_DIGITS:
                raise self._bad(event, events, first, f"the step number has {len(match.group(1)):,} digits; "
                                                      f"torch.profiler counts steps from 0")
            self.steps.setdefault(int(match.group(1)), (start, end))

    def _gpu(self, event: _Event, kind: str, name: str, start: int, end: int) -> None:
        args = event.args
        device = event.pid if args is None or args.device is None else args.device
        table = self.kernels if kind is _KERNEL else self.copies
        if start < NULL or end >= 2**63:
            raise OverflowError
        code = self.names.get(name)
        if code is None:
            code = self.names[name] = len(self.names)
        table.start.append(start)
        table.end.append(end)
        table.name.append(code)
        code = self.devices.get(device)
        if code is None:
            code = self.devices[device] = len(self.devices)
        table.device.append(code)
        if kind is _KERNEL:
            self.saw_kernel = True
            if self.cpu is not None:
                self.cpu = None  # CPU operators are reported only for traces without kernels: stop keeping them
        if table.links:
            stream = event.tid if args is None or args.stream is None else args.stream
            table.stream.append(stream if type(stream) is int and -(2**63) < stream < 2**63 else NULL)
            table.correlation.append(NULL if args is None else _link(args.correlation))
            table.external_id.append(NULL if args is None else _link(args.external_id))
        if self.want_tracks and kind is _KERNEL:
            stream = event.tid if args is None or args.stream is None else args.stream
            self.tracks.append(f"GPU {device} stream {stream}")

    def _out_of_range(self, event: _Event, events: list[_Event], first: int) -> UserError:
        index = first + next(i for i, e in enumerate(events) if e is event)
        return UserError(f"{event.cat} event {event.name!r}: ts {event.ts!r} / dur {event.dur!r} are out of range "
                         f"(a time, relative to the trace's base, must lie in [0, 2^63) ns)", file=str(self.path),
                         where=f"$.traceEvents[{index}]", fix=FIX)

    def _times(self, event: _Event, events: list[_Event], first: int) -> tuple[int, int]:
        """Start and end in ns of an event whose fields are not the common case; an error names the event."""
        try:
            _name(event)
            return _times(event)
        except _Bad as err:
            raise self._bad(event, events, first, str(err)) from None

    def _bad(self, event: _Event, events: list[_Event], first: int, what: str) -> UserError:
        index = first + next(i for i, e in enumerate(events) if e is event)
        return UserError(f"{_short(event.cat)} event {_short(event.name)!r}: {what}", file=str(self.path),
                         where=f"$.traceEvents[{index}]", fix=FIX)


def _short(value: Any, limit: int = 80) -> Any:
    """A value for a message: long text cut (a 10 MB name is not echoed whole)."""
    return value[:limit] + "..." if type(value) is str and len(value) > limit else value


def _times(event: _Event) -> tuple[int, int]:
    try:
        start = to_ns(event.ts)
        duration = to_ns(event.dur)
    except OverflowError:
        raise _Bad(f"ts {_short(event.ts, 40)!r} / dur {_short(event.dur, 40)!r} are out of range (a time must lie "
                   f"in [0, 2^64) ns)") from None
    except ValueError:
        raise _Bad(f"ts {_short(event.ts, 40)!r} / dur {_short(event.dur, 40)!r} are not numbers of microseconds "
                   f"(JSON numbers: ASCII digits, optional fraction and exponent; no NaN, Infinity, blanks or "
                   f"underscores)") from None
    if duration < 0:
        raise _Bad(f"negative dur {event.dur}")
    return start, start + duration


def _name(event: _Event) -> str:
    if type(event.name) is not str:
        raise _Bad("has no name")
    return event.name


def _memory(args: _Args, peaks: dict[str, int]) -> None:
    allocated, device_type = args.total_allocated, args.device_type
    if type(allocated) is not int:
        return
    kind = DEVICE_TYPES.get(device_type, f"device type {device_type}") if type(device_type) is int else "device"
    label = kind if kind == "CPU" else f"{kind} {args.device_id if args.device_id is not None else '?'}"
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


class Read:
    """One Kineto trace, read once: the collected columns and the top-level facts around the events."""

    def __init__(self, got: _Collected, base: int, rank: int | None, meta: _Meta) -> None:
        self.got = got
        self.base = base
        self.rank = rank
        self.distributed: dict = meta.distributedInfo if isinstance(meta.distributedInfo, dict) else {}
        props = meta.deviceProperties
        self.device_properties: list[dict] = [p for p in props if isinstance(p, dict)] if isinstance(
            props, list) else []


def _read(path: Path, *, want_tracks: bool = False, tables: bool = False,
          native: Callable[[Path], Read | None] | None = None) -> Read:
    """The events' columns, baseTimeNanoseconds (0 when absent) and the rank (None when not distributed).

    With tables, `native` (kineto_native.read, given by the caller: it builds on this module's classes) first: it
    gives the same Read, or None for a file it is not sure of, which this module's reader then reads whole (its
    errors and refusals)."""
    if tables and not want_tracks and native is not None:
        read = native(path)
        if read is not None:  # its host frames already narrowed (narrow_ids)
            return read
    stream = _Stream(path)
    got = _Collected(path, want_tracks=want_tracks, tables=tables)
    try:
        meta = _events(stream, got)
    finally:
        stream.close()
    if got.tables is not None:
        got.host_frames = got.tables.frames()
        got.tables = None  # the blocks, now concatenated
        _narrow_host(got)
    return finish(path, got, meta)


def _narrow_host(got: _Collected) -> None:
    """The CPU operators' and runtime calls' frames with narrow ids (narrow_ids), once the reader's own buffers are
    freed."""
    if got.host_frames is not None:
        for key in ("cpu", "runtime"):
            got.host_frames[key] = narrow_ids(got.host_frames[key])


def finish(path: Path, got: _Collected, meta: _Meta) -> Read:
    """The Read of collected events and the keys around them (checked: base, rank, every time within uint64)."""
    base = meta.baseTimeNanoseconds
    if base is None:
        base = 0
    elif type(base) is not int or base < 0:
        raise UserError(f"baseTimeNanoseconds is {_short(base)!r}, not a non-negative integer", file=str(path),
                        where="$.baseTimeNanoseconds", fix=FIX)
    _check_absolute(path, got, base)
    return Read(got, base, _rank(path, meta.distributedInfo), meta)


def _check_absolute(path: Path, got: _Collected, base: int) -> None:
    """Every time, baseTimeNanoseconds added, is a uint64 timestamp: in [0, 2^64) ns."""
    times = [t for columns in (got.kernels, got.copies) if len(columns) for t in (min(columns.start),
                                                                                  max(columns.end))]
    times += [t for step in got.steps.values() for t in step]
    if got.cpu:
        times += [min(c[2] for c in got.cpu), max(c[3] for c in got.cpu)]
    for host in (got.host_frames or {}).values():
        if host.height:
            times += [host["start"].min(), host["end"].max()]  # type: ignore[list-item]
    if times and not (base + min(times) >= 0 and base + max(times) <= inputs.UINT64_MAX):
        raise UserError(f"event times (ts plus baseTimeNanoseconds {base}) reach {base + min(times)} .. "
                        f"{base + max(times)} ns, outside [0, 2^64)", file=str(path), where="$.traceEvents",
                        fix=FIX)


def _cpu_stats(got: _Collected) -> tuple[dict[str, Any], int, int, int] | None:
    """Per-name statistics of the CPU operators (cat cpu_op / Operator, not annotations), their count, first start
    and last end; None when there are none. From the tables' frame, sorted by thread and time in polars and fed to
    cpu_ops one call at a time: no Python object per operator is kept."""
    if got.host_frames is None:
        cpu = got.cpu or []
        if not cpu:
            return None
        return (cpu_ops.operator_stats(cpu), len(cpu), min(c[2] for c in cpu), max(c[3] for c in cpu))
    frame = got.host_frames["cpu"]
    cats = [c for c in frame["cat"].unique().drop_nulls().to_list() if CATEGORY_KINDS.get(c) is _CPU]
    ops = frame.filter(pl.col("cat").is_in(cats)).select("pid", "tid", "start", "end", "name")
    if not ops.height:
        return None
    ops = ops.sort("pid", "tid", "start", pl.col("end"), descending=[False, False, False, True], maintain_order=True)
    first, last = ops["start"].min(), ops["end"].max()
    rows = ops.select("pid", "tid", "start", (-pl.col("end")).alias("neg_end"),
                      pl.col("name").cast(pl.String)).iter_rows()
    threads = (((start, neg_end, name) for _, _, start, neg_end, name in calls)
               for _, calls in itertools.groupby(rows, key=lambda row: (row[0], row[1])))
    return cpu_ops.operator_stats_sorted(threads), ops.height, int(first), int(last)  # type: ignore[arg-type]


def _phases(got: _Collected) -> tuple[dict[str, int] | None, bool]:
    """Self time per training phase of a CPU-operator trace (reports/phases.py) and whether steps are marked; the
    operators and the Optimizer/ProfilerStep markers from the tables' host frame, or from the lists without tables."""
    if got.host_frames is None:
        operators: list = got.cpu or []
        markers: list = got.markers + [(f"ProfilerStep#{n}", None, a, b) for n, (a, b) in got.steps.items()]
    else:
        frame = got.host_frames["cpu"]
        cats = frame["cat"].unique().drop_nulls().to_list()
        cpu_cats = [c for c in cats if CATEGORY_KINDS.get(c) is _CPU]
        note_cats = [c for c in cats if CATEGORY_KINDS.get(c) is _ANNOTATION]
        columns = (pl.col("name").cast(pl.String), pl.concat_str(pl.col("pid"), pl.col("tid"), separator=" "),
                   pl.col("start"), pl.col("end"))
        operators = frame.filter(pl.col("cat").is_in(cpu_cats)).select(*columns).rows()
        notes = frame.filter(pl.col("cat").is_in(note_cats)).select(*columns).rows()
        markers = [row for row in notes if phases.MARKER.match(row[0])]
    if not operators:
        return None, False
    steps_marked = any(name.startswith("ProfilerStep#") for name, *_ in markers)
    return phases.self_time_per_phase(operators, markers), steps_marked


def nullable(values: Any) -> pl.Series:
    """An integer column (an int64 array.array); NULL becomes null."""
    series = pl.Series(values, dtype=pl.Int64)
    if not (series == NULL).any():
        return series
    return pl.select(pl.when(series != NULL).then(series)).to_series()


def read_kineto(src: TimingSource, tables_of: Callable[[Path, Read], Any],
                native: Callable[[Path], Read | None] | None = None) -> TimingSource:
    """Fill src from one Kineto trace: kernels (or CPU operators when there are none), copies, steps, memory.

    The trace tables are collected in the same pass; `tables_of` (trace_tables.from_kineto, given by the caller:
    trace_tables reads through this module) turns them into frames, kept on src.tables; `native` as in _read."""
    read = _read(src.path, tables=True, native=native)
    got, base, src.rank = read.got, read.base, read.rank
    # aggregate computes device time per iteration: the iterations go in first
    src.iterations = [Iteration(n, base + start, base + end) for n, (start, end) in sorted(got.steps.items())]
    src.tables = tables = tables_of(src.path, read)
    copies = got.copies.frame(got.names, got.devices, base) if len(got.copies) else None
    cpu = None if len(got.kernels) else _cpu_stats(got)
    if cpu is None:
        kernels = got.kernels.frame(got.names, got.devices, base)
        if tables.runtime.height:  # iterations own the work they launched (dispatches._launch_windows)
            def launch(columns: _Columns) -> pl.Series:  # from the correlation ids alone: no kernel table built
                ids = pl.DataFrame({"correlation": nullable(columns.correlation)})
                return dispatches.launch_times(ids, tables.runtime)

            kernels = kernels.with_columns(launch=launch(got.kernels))
            if copies is not None:
                copies = copies.with_columns(launch=launch(got.copies))
        dispatches.aggregate(src, kernels, copies=copies)
    else:
        src.cpu_operators = True
        src.kernels, src.dispatches, first, last = cpu
        src.phase_ns, src.steps_marked = _phases(got)
        src.has_timeline = True
        src.first_start_ns = base + first
        src.last_end_ns = base + last
    src.copies = _copy_stats(got)
    src.peak_memory_bytes = dict(sorted(got.memory.items()))
    if len(got.kernels):  # the analyses of a GPU trace read its kernel and copy tables: built now, from the reader's
        tables.kernels, tables.copies  # noqa: B018 (arrays, which are then freed rather than held beside them)
    del got, read
    heap.release()  # the aggregate's and the reader's frames
    return src


def _copy_stats(got: _Collected) -> dict[str, CopyStats]:
    """Per direction as the rocprofv3 reader names them: `Memcpy HtoD (Pinned -> Device)` -> `host to device`."""
    stats: dict[str, CopyStats] = {}
    if not len(got.copies):
        return stats
    names = list(got.names)
    copies = got.copies
    durations = pl.DataFrame({"code": pl.Series(copies.name, dtype=pl.Int64), "ns": (
        pl.Series(copies.end, dtype=pl.Int64).cast(pl.Int128) - pl.Series(copies.start, dtype=pl.Int64))})
    # per name, in the order names first appear (so directions keep the order of their first copy)
    for code, calls, total in durations.group_by("code", maintain_order=True).agg(
            pl.len(), pl.col("ns").sum()).iter_rows():
        words = names[code].split()
        direction = "memset" if words and words[0].lower() == "memset" else DIRECTIONS.get(
            words[1] if len(words) > 1 else "", "unknown")
        entry = stats.setdefault(direction, CopyStats())
        entry.calls += calls
        entry.total_ns += total
    return stats


DIRECTIONS = {"HtoD": "host to device", "DtoH": "device to host", "DtoD": "device to device",
              "HtoH": "host to host", "PtoP": "peer to peer"}


def marked_starts(path: Path, prefix: str) -> list[int]:
    """Start times (ns, as written: relative to baseTimeNanoseconds) of the events whose name starts with `prefix`,
    sorted; streamed through the same block decoder and limits as the report (a side file such as the embedded
    tracer's perfetto_trace.json can be hundreds of MB: never loaded whole). Events without a usable ts are skipped."""
    starts: list[int] = []

    def handle(events: list[_Event], first: int) -> None:
        for event in events:
            name = event.name
            if type(name) is str and name.startswith(prefix):
                with contextlib.suppress(ValueError, OverflowError):
                    starts.append(to_ns(event.ts))

    stream = _Stream(path)
    try:
        _events(stream, handle)
    finally:
        stream.close()
    return sorted(starts)


def iter_kineto(path: Path) -> Iterator[tuple[str, int, int, str]]:
    """Each kernel as (name, start ns, end ns, track) for the Perfetto writer; CPU operators when there are none."""
    read = _read(path, want_tracks=True)
    got, base = read.got, read.base
    if len(got.kernels):
        k, names = got.kernels, list(got.names)
        for code, start, end, track in zip(k.name, k.start, k.end, got.tracks, strict=True):
            yield names[code], base + start, base + end, track
        return
    for name, thread, start, end in got.cpu or []:
        yield name, base + start, base + end, "pid {} thread {}".format(*thread)  # type: ignore[misc]

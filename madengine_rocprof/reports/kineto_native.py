"""The report's native reader of a Kineto trace's events (native/kineto_scan.c), beside kineto_reader.

kineto_reader._read(tables=True) asks `read` first. The file is opened, inflated and split as the Python reader does
(its _Stream, its checks of the text before the events and of the keys after them); the C scanner reads the events
in between, a block at a time, into columns, and this module turns those into the same `Read` (the same GPU columns,
host frames, steps, collectives and memory peaks) that the Python reader builds. The C file is compiled once per
source version with the system's C compiler (tracer/api_recorder.build, as the tracer's native converter).

The scanner takes only the layout torch.profiler writes. For anything else (a duplicate key, a number given as text,
a time with an exponent, an escape in a key...) `read` returns None and the Python reader reads the whole file, so
its errors, refusals and figures are the ones a user sees. So does any error this path meets (the Python reader then
meets it, or not, on its own). MADENGINE_ROCPROF_NATIVE_KINETO=0 forces the Python reader; so does a machine without
a C compiler. tests/reports/test_reports_kineto_native.py checks both give equal tables and reports.
"""

from __future__ import annotations

import array
import ctypes
import os
from pathlib import Path

import msgspec
import polars as pl

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import heap
from madengine_rocprof.reports import kineto_reader as kr
from madengine_rocprof.tracer import api_recorder

SOURCE = Path(__file__).with_name("native") / "kineto_scan.c"
ENV_SWITCH = "MADENGINE_ROCPROF_NATIVE_KINETO"
KS_MORE, KS_FOREIGN, KS_NOMEM, KS_DONE = 0, 1, 2, 3
T_KERNEL, T_COPY, T_HOST, T_RUNTIME, T_COMM, T_MEMORY, T_DEVICE = range(7)
S_GPU, S_HOST, S_CAT, S_SHAPE, S_COMM = range(5)
# column order of each table in kineto_scan.c (the names: int32 codes into interned texts; a host pid, tid and
# External id: int32 while every value fits, as narrow_ids would make them; the rest int64)
GPU_COLUMNS = ("name", "device", "start", "end", "stream", "correlation", "external_id")
HOST_COLUMNS = ("name", "cat", "pid", "tid", "start", "end", "external_id", "input_dims", "input_types",
                "input_strides", "concrete_inputs")
RUNTIME_COLUMNS = ("name", "cat", "pid", "tid", "start", "end", "correlation", "external_id")
SHAPES = ("input_dims", "input_types", "input_strides", "concrete_inputs")
_KIND_CODES = {kr._KERNEL: 1, kr._COPY: 2, kr._CPU: 3, kr._ANNOTATION: 3}
_ARGS = msgspec.json.Decoder(kr._Args, float_hook=str)
_lib: ctypes.CDLL | None = None
why_not = ""  # why the last read did not use the native path (tests, doctor), "" when it did


class _Foreign(Exception):
    """The trace holds something only the Python reader reads as it should."""


def enabled(env=None) -> bool:
    """MADENGINE_ROCPROF_NATIVE_KINETO as on/off (default on); a bad value is the input layer's error (exit 2)."""
    return inputs.env_flag(os.environ if env is None else env, ENV_SWITCH, True)


def describe(env) -> str:
    """One line for `doctor`: which reader reads a PyTorch profiler trace for `report`."""
    try:
        on = enabled(env)
    except UserError as err:
        return f"Report's Kineto reader: {ENV_SWITCH} is not on or off ({err.what})"
    if not on:
        return f"Report's Kineto reader: Python ({ENV_SWITCH}=0; the native scanner is the default)"
    cc = api_recorder.compiler(env)
    if cc is None:
        return "Report's Kineto reader: Python (the native scanner is the default, but no C compiler builds it)"
    return (f"Report's Kineto reader: native scanner (the default; built with {cc} on first use; traces not in "
            f"torch.profiler's exact layout go to the Python reader; {ENV_SWITCH}=0 selects Python)")


def library() -> ctypes.CDLL | None:
    """The built scanner, or None (why_not says why)."""
    global _lib, why_not
    if not enabled():
        why_not = f"{ENV_SWITCH}=0"
        return None
    if _lib is not None:
        return _lib
    lib, why_not = api_recorder.open_built(SOURCE)
    if lib is None:
        return None
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.ks_new.argtypes, lib.ks_new.restype = [ctypes.c_char_p, i64], p
    lib.ks_feed.argtypes, lib.ks_feed.restype = [p, ctypes.c_char_p, i64], i32
    lib.ks_finish.argtypes, lib.ks_finish.restype = [p], i32
    lib.ks_reason.argtypes, lib.ks_reason.restype = [p], ctypes.c_char_p
    lib.ks_tail.argtypes, lib.ks_tail.restype = [p, ctypes.POINTER(i64)], p
    lib.ks_count.argtypes, lib.ks_count.restype = [p, i32], i64
    lib.ks_column.argtypes, lib.ks_column.restype = [p, i32, i32], p
    lib.ks_export.argtypes, lib.ks_export.restype = [p, i32, i32, p, p], i32
    lib.ks_copy_i64.argtypes, lib.ks_copy_i64.restype = [p, i32, i32, p], None
    lib.ks_release_array.argtypes, lib.ks_release_array.restype = [p], None
    lib.ks_strings.argtypes, lib.ks_strings.restype = [p, i32], i64
    lib.ks_string.argtypes, lib.ks_string.restype = [p, i32, i64, ctypes.POINTER(i64)], p
    lib.ks_free.argtypes, lib.ks_free.restype = [p], None
    _lib = lib
    why_not = ""
    return lib


def _kinds() -> bytes:
    """Category -> what it is read as, for the scanner (the Python reader's tables, so both read the same)."""
    lines = [f"{cat}\t{_KIND_CODES[kind]}" for cat, kind in kr.CATEGORY_KINDS.items()]
    lines += [f"{cat}\t4" for cat in sorted(kr._RUNTIME_CATS)]
    return ("\n".join(lines) + "\n").encode()


def read(path: Path) -> kr.Read | None:
    """The trace read natively, or None when the Python reader is to read it (why_not says why)."""
    global why_not
    lib = library()
    if lib is None:
        return None
    try:
        got = _read(lib, path)
    except _Foreign as err:
        why_not = str(err)
        return None
    except (UserError, RecursionError) as err:  # the Python reader reports it (or finds the file readable)
        why_not = f"error: {err}"
        return None
    why_not = ""
    kr._narrow_host(got.got)  # the scanner's ids are int32 already, unless a value did not fit
    heap.release()  # the scanner's columns (and any Int64 ids narrowing replaced): freed C heap pages
    return got


def _read(lib: ctypes.CDLL, path: Path) -> kr.Read:
    stream = kr._Stream(path)
    try:
        head = kr._head(stream)
        spec = _kinds()
        scanner = lib.ks_new(spec, len(spec))
        if not scanner:
            raise _Foreign("no memory")
        try:
            rest = _scan(lib, scanner, stream)
            try:
                meta = kr._META.decode(head + b"]" + rest)
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                raise _Foreign(f"the keys after the events: {err}") from None
            kr._no_repeated_keys(stream, head + b"]" + rest)
            got = _collected(lib, scanner, path)
        finally:
            lib.ks_free(scanner)
    finally:
        stream.close()
    return kr.finish(path, got, meta)


def _scan(lib: ctypes.CDLL, scanner: int, stream: kr._Stream) -> bytes:
    """Feed the events to the scanner; the text after the list's `]`, to the end of the file."""
    data = stream.buffer
    stream.buffer = b""
    status = KS_MORE
    while status == KS_MORE:
        if not data:
            data = stream.next_chunk()
            if not data:
                status = lib.ks_finish(scanner)
                break
        status = lib.ks_feed(scanner, data, len(data))
        data = b""
    if status != KS_DONE:
        raise _Foreign((lib.ks_reason(scanner) or b"").decode("utf-8", "replace") or "no memory")
    size = ctypes.c_int64()
    at = lib.ks_tail(scanner, ctypes.byref(size))
    parts = [ctypes.string_at(at, size.value)]
    while True:  # the keys after the events: a few hundred bytes, but read to the end (and within the limit)
        chunk = stream.next_chunk()
        if not chunk:
            break
        parts.append(chunk)
        if sum(map(len, parts)) > 8 * kr.CHUNK:
            raise _Foreign("the text after the events is long")
    return b"".join(parts)


def _strings(lib: ctypes.CDLL, scanner: int, which: int) -> list[bytes]:
    size = ctypes.c_int64()
    out = []
    for i in range(lib.ks_strings(scanner, which)):
        at = lib.ks_string(scanner, which, i, ctypes.byref(size))
        out.append(ctypes.string_at(at, size.value))
    return out


def _texts(raws: list[bytes]) -> list[str]:
    """Raw JSON strings (quotes included) -> their text, as msgspec decodes them."""
    return [raw[1:-1].decode("utf-8") if b"\\" not in raw else msgspec.json.decode(raw) for raw in raws]


class _ArrowSchema(ctypes.Structure):
    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
                ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p)]


class _ArrowArray(ctypes.Structure):
    _fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
                ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64), ("buffers", ctypes.c_void_p),
                ("children", ctypes.c_void_p), ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p),
                ("private_data", ctypes.c_void_p)]


_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype, _capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_SCHEMA_CAPSULE, _ARRAY_CAPSULE = b"arrow_schema", b"arrow_array"  # kept alive: the capsules point at them


class _Exported:
    """One of the scanner's columns as an Arrow array (the PyCapsule interface): polars takes its memory over
    without a copy, nulls already marked (the scanner's NULL, a negative code)."""

    def __init__(self, lib: ctypes.CDLL, scanner: int, table: int, index: int) -> None:
        self._lib = lib
        self.schema, self.array = _ArrowSchema(), _ArrowArray()
        if lib.ks_export(scanner, table, index, ctypes.byref(self.schema), ctypes.byref(self.array)):
            raise MemoryError("the native Kineto scanner's column")

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return (_capsule(ctypes.addressof(self.schema), _SCHEMA_CAPSULE, None),
                _capsule(ctypes.addressof(self.array), _ARRAY_CAPSULE, None))

    def __del__(self) -> None:  # polars moved the array out (release is then NULL), or it is released here
        self._lib.ks_release_array(ctypes.byref(self.array))


def _column(lib: ctypes.CDLL, scanner: int, table: int, index: int) -> pl.Series:
    """One of the scanner's columns as a series (Int64, or Int32 codes), without a copy."""
    return pl.Series(_Exported(lib, scanner, table, index))


def _codes(codes: pl.Series, texts: list[str | None]) -> pl.Series:
    """Categorical column from codes into `texts` (a null code: absent)."""
    return pl.Series(texts, dtype=pl.Categorical).gather(codes)


def _collected(lib: ctypes.CDLL, scanner: int, path: Path) -> kr._Collected:
    """The Python reader's _Collected, from the scanner's columns."""
    got = kr._Collected(path, tables=True)
    got.tables = None
    gpu_names = _texts(_strings(lib, scanner, S_GPU))
    got.names = {name: i for i, name in enumerate(gpu_names)}
    if len(got.names) != len(gpu_names):
        raise _Foreign("two spellings of one kernel name")
    got.devices = {d: i for i, d in enumerate(_column(lib, scanner, T_DEVICE, 0).to_list())}
    for table, columns in ((T_KERNEL, got.kernels), (T_COPY, got.copies)):
        n = lib.ks_count(scanner, table)
        for index, key in enumerate(GPU_COLUMNS):  # the Python reader's int64 arrays, NULL for no value
            values = array.array("q", bytes(8 * n))
            lib.ks_copy_i64(scanner, table, index, values.buffer_info()[0])
            setattr(columns, key, values)
    cats = _texts(_strings(lib, scanner, S_CAT))
    host_names = _texts(_strings(lib, scanner, S_HOST))
    if any(b"\\" in raw and _is_comm(name) for raw, name in zip(_strings(lib, scanner, S_HOST), host_names,
                                                                  strict=True)):
        raise _Foreign("an escaped collective's name")
    tables = kr._Tables(path)
    try:
        shapes = [tables.compact(raw) for raw in _strings(lib, scanner, S_SHAPE)]
    except kr._Bad as err:
        raise _Foreign(str(err)) from None
    cpu = _host(lib, scanner, T_HOST, HOST_COLUMNS, host_names, cats, shapes)
    runtime = _host(lib, scanner, T_RUNTIME, RUNTIME_COLUMNS, host_names, cats, shapes)
    got.host_frames = {"runtime": runtime, "cpu": cpu, "comms": _comms(lib, scanner, cpu, tables)}
    _steps(got, cpu)
    _memory(lib, scanner, got)
    return got


def _is_comm(name: str) -> bool:
    return name == "record_param_comms" or name.startswith("nccl:")


def _host(lib: ctypes.CDLL, scanner: int, table: int, layout: tuple, names: list[str], cats: list[str],
          shapes: list[str | None]) -> pl.DataFrame:
    """The CPU-operator or runtime frame, as kineto_reader._Tables.frames builds it."""
    n = lib.ks_count(scanner, table)
    schema = kr._CPU_SCHEMA if table == T_HOST else kr._RUNTIME_SCHEMA
    if not n:
        return pl.DataFrame(schema=schema)
    columns: dict[str, pl.Series] = {}
    for index, key in enumerate(layout):
        values = _column(lib, scanner, table, index)
        if key == "name":
            columns[key] = _codes(values, names)  # type: ignore[arg-type]
        elif key == "cat":
            columns[key] = _codes(values, cats)  # type: ignore[arg-type]
        elif key in SHAPES:
            columns[key] = _codes(values, shapes)
        else:
            columns[key] = values
    return pl.DataFrame(columns).select(list(schema))


def _comms(lib: ctypes.CDLL, scanner: int, cpu: pl.DataFrame, tables: kr._Tables) -> pl.DataFrame:
    """One row per collective (record_param_comms, nccl:*), its args decoded by the Python reader's decoder."""
    n = lib.ks_count(scanner, T_COMM)
    if not n:
        return pl.DataFrame(schema=kr._COMM_SCHEMA)
    rows = _column(lib, scanner, T_COMM, 0)
    args_ids = _column(lib, scanner, T_COMM, 1).to_list()  # None: the event has no args object
    raws = _strings(lib, scanner, S_COMM)
    picked = cpu[rows.to_list()].select("name", "cat", "pid", "tid", "start", "end", "external_id").rows(named=True)
    out = []
    for row, args_id in zip(picked, args_ids, strict=True):
        try:
            args = kr._EMPTY_ARGS if args_id is None else _ARGS.decode(raws[args_id])
            out.append(row | tables.comm_args(args))
        except (msgspec.DecodeError, msgspec.ValidationError, kr._Bad) as err:
            raise _Foreign(f"a collective's args: {err}") from None
    return pl.DataFrame(out, schema=kr._COMM_SCHEMA)


def _steps(got: kr._Collected, cpu: pl.DataFrame) -> None:
    """ProfilerStep#N ranges, the first of a number counting (kineto_reader._Collected.step)."""
    if not cpu.height:
        return
    names = [n for n in cpu["name"].unique().drop_nulls().to_list() if n.startswith("ProfilerStep#")]
    if not names:
        return
    for name, start, end in cpu.filter(pl.col("name").is_in(names)).select(
            pl.col("name").cast(pl.String), "start", "end").iter_rows():
        match = kr.STEP.match(name)
        if match:
            if len(match.group(1)) > kr._STEP_DIGITS:
                raise _Foreign("a step number too long")
            got.steps.setdefault(int(match.group(1)), (start, end))


def _memory(lib: ctypes.CDLL, scanner: int, got: kr._Collected) -> None:
    """Peak Total Allocated per device label (kineto_reader._memory over the scanner's per-device maxima)."""
    n = lib.ks_count(scanner, T_MEMORY)
    if not n:
        return
    allocs, types, ids = (_column(lib, scanner, T_MEMORY, i).to_list() for i in range(3))
    for allocated, device_type, device_id in zip(allocs, types, ids, strict=True):  # None: not given
        kr._memory(kr._Args(total_allocated=allocated, device_type=device_type, device_id=device_id), got.memory)

"""The native converter of a Kineto JSON trace file (native/kineto_rows.c) into the rocprofv3 CSVs.

convert.write_trace_file uses it when the C file builds (with the system's C compiler, once per source version, as
the API recorder: api_recorder.build) and the trace is in the layout Kineto writes; otherwise it returns None and
convert's Python reader and writer handle the file. Both give byte-identical files (tests/wrapper/
test_wrapper_tracer_native_rows.py). The C code does the per-event work: reading, sorting, writing whole lines.
Python keeps the per-name work (JSON unescaping, -T truncation, CSV quoting) over the unique names, and the stats
(rocprof_csv.kernel_stats on the durations the C code hands back), so those are the Python path's own code.

MADENGINE_ROCPROF_TRACER_NATIVE_ROWS=0 forces the Python path.
"""
from __future__ import annotations

import array
import ctypes
import os
from pathlib import Path
from typing import Any

from madengine_rocprof.tracer import api_recorder
from madengine_rocprof.wrapper import rocprof_csv

SOURCE = Path(__file__).with_name("native") / "kineto_rows.c"
ENV_SWITCH = "MADENGINE_ROCPROF_TRACER_NATIVE_ROWS"
OPS, API, COPIES = 0, 1, 2
_lib: ctypes.CDLL | None = None
why_not = ""  # why the native converter is not used (for tests and the summary), "" when it is


def enabled(env=None) -> bool:
    """MADENGINE_ROCPROF_TRACER_NATIVE_ROWS read by the tracer settings' rules (on/off words); a bad value keeps the
    default, on (the wrapper refuses it before the app starts)."""
    from madengine_rocprof.errors import UserError
    from madengine_rocprof.wrapper import tracer_settings as settings

    suffix, reader, default = settings.TABLE["native_rows"]
    try:
        return bool(reader(os.environ if env is None else env, settings.PREFIX + suffix))
    except UserError:
        return bool(default)


def describe(env) -> str:
    """One line for `doctor`: what would write the CSVs of a torch.profiler trace."""
    if not enabled(env):
        return f"Trace CSV writer: Python ({ENV_SWITCH}=0; the native converter is the default)"
    cc = api_recorder.compiler(env)
    if cc is None:
        return "Trace CSV writer: Python (the native converter is the default, but no C compiler builds it)"
    return (f"Trace CSV writer: native converter for torch.profiler's JSON (the default; built with {cc} on first"
            f" use; files it is not sure of go to the Python path, same bytes; {ENV_SWITCH}=0 selects Python)")


def library() -> ctypes.CDLL | None:
    """The built converter, or None (why_not says why)."""
    global _lib, why_not
    if not enabled():
        why_not = f"{ENV_SWITCH}=0"
        return None
    if _lib is not None:
        return _lib
    lib, why_not = api_recorder.open_built(SOURCE)
    if lib is None:
        return None
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    lib.kr_scan.argtypes, lib.kr_scan.restype = [ctypes.c_char_p, ctypes.c_int], p
    lib.kr_status.argtypes, lib.kr_status.restype = [p], ctypes.c_int
    lib.kr_reason.argtypes, lib.kr_reason.restype = [p], ctypes.c_char_p
    lib.kr_count.argtypes, lib.kr_count.restype = [p, ctypes.c_int], i64
    lib.kr_names.argtypes, lib.kr_names.restype = [p, ctypes.c_int], i64
    lib.kr_name.argtypes, lib.kr_name.restype = [p, ctypes.c_int, i64, ctypes.POINTER(i64)], p
    grouped: list[Any] = [p, ctypes.c_char_p, ctypes.c_char_p]
    cells: list[Any] = [ctypes.POINTER(i32), ctypes.c_char_p, ctypes.POINTER(i64), i64]
    lib.kr_write_ops.argtypes = [*grouped, i64, *cells, ctypes.POINTER(i64), ctypes.POINTER(i64)]
    lib.kr_write_api.argtypes = [*grouped, *cells, ctypes.POINTER(i64), ctypes.POINTER(i64)]
    lib.kr_write_copies.argtypes = [*grouped, *cells, ctypes.POINTER(ctypes.c_uint8)]
    for f in (lib.kr_write_ops, lib.kr_write_api, lib.kr_write_copies):
        f.restype = ctypes.c_int
    lib.kr_free.argtypes, lib.kr_free.restype = [p], None
    _lib = lib
    why_not = ""
    return lib


class _Cells:
    """Per raw name its group (one per distinct final name) and per group the CSV cell, as C arrays."""

    def __init__(self, finals: list[str], cell_of) -> None:
        index: dict[str, int] = {}
        of = [index.setdefault(f, len(index)) for f in finals]
        self.names = list(index)
        data = [cell_of(name).encode("utf-8") for name in self.names]  # UnicodeEncodeError: see convert_file
        offsets = [0]
        for d in data:
            offsets.append(offsets[-1] + len(d))
        self.group_of = (ctypes.c_int32 * max(len(of), 1))(*of)
        self.cells = b"".join(data)
        self.offsets = (ctypes.c_int64 * len(offsets))(*offsets)

    def args(self) -> tuple:
        return self.group_of, self.cells, self.offsets, len(self.names)


def _header(columns) -> bytes:
    return (",".join(rocprof_csv.cell(h) for h in columns) + "\n").encode()


def _grouped(durs: array.array, offsets, names: list[str]) -> dict[str, list[int]]:
    out = {}
    for g, name in enumerate(names):
        lo, hi = offsets[g], offsets[g + 1]
        if hi > lo:
            out[name] = durs[lo:hi].tolist()
    return out


def _check(status: int, path: str) -> None:
    """The OSError the Python path raises: os.open's names the file (a negative status), os.write's does not."""
    if status < 0:
        raise OSError(-status, os.strerror(-status), path)
    if status:
        raise OSError(status, os.strerror(status))


def convert_file(path: str, host_dir: str, prefix: str, *, cpu: bool, truncate: bool, max_rows: int | None,
                 api: bool, memcpy: bool, stats: bool, names_of, direction_of) -> tuple[list[str], int] | None:
    """convert.write_files for a Kineto JSON file: (files written, kernel events read), or None when the native
    converter is unavailable or the file is not in Kineto's layout (then nothing was written). `names_of` turns a
    raw JSON string (bytes, quotes included) into its text, as the Python reader does (errors propagate alike);
    `direction_of` a copy's name into (Direction cell value, source on the host, destination on the host)."""
    global why_not
    lib = library()
    if lib is None:
        return None
    t = lib.kr_scan(os.fsencode(path), 1 if cpu else 0)
    if not t:
        why_not = "no memory"
        return None
    try:
        if lib.kr_status(t) != 0:
            why_not = (lib.kr_reason(t) or b"").decode("utf-8", "replace") or "no memory"
            return None
        why_not = ""
        texts = []
        for table in (OPS, API, COPIES):
            size = ctypes.c_int64()
            raws = []
            for i in range(lib.kr_names(t, table)):
                at = lib.kr_name(t, table, i, ctypes.byref(size))
                raws.append(ctypes.string_at(at, size.value))
            texts.append([names_of(raw) for raw in raws])
        count = lib.kr_count(t, OPS)
        n = count if max_rows is None else min(count, max(max_rows, 0))
        if not n:
            return [], count
        op_names = [rocprof_csv.truncate_name(name) for name in texts[OPS]] if truncate else texts[OPS]
        try:  # a name Python cannot write as UTF-8 (a lone surrogate): the Python path fails the same way on it
            ops = _Cells(op_names, rocprof_csv.cell)
            calls = _Cells(texts[API], rocprof_csv.cell)
            directions = [direction_of(name) for name in texts[COPIES]]
            copies = _Cells([d[0] for d in directions], rocprof_csv.cell)
        except UnicodeEncodeError:
            why_not = "a name not writable as UTF-8"
            return None
        written = [os.path.join(host_dir, prefix + name) for name in ("kernel_trace.csv", "kernel_stats.csv")]
        durs = array.array("q", [0]) * n
        offsets = (ctypes.c_int64 * (len(ops.names) + 1))()
        _check(lib.kr_write_ops(t, os.fsencode(written[0]), _header(rocprof_csv.KERNEL_TRACE), n, *ops.args(),
                                (ctypes.c_int64 * n).from_buffer(durs), offsets), written[0])
        rocprof_csv.write_rows(written[1], rocprof_csv.STATS,
                               rocprof_csv.kernel_stats(_grouped(durs, offsets, ops.names)))
        n_api = lib.kr_count(t, API)
        if api and n_api:
            written.append(os.path.join(host_dir, prefix + "hip_api_trace.csv"))
            durs = array.array("q", [0]) * n_api
            offsets = (ctypes.c_int64 * (len(calls.names) + 1))()
            _check(lib.kr_write_api(t, os.fsencode(written[-1]), _header(rocprof_csv.API_TRACE), *calls.args(),
                                    (ctypes.c_int64 * n_api).from_buffer(durs), offsets), written[-1])
            if stats:
                written.append(os.path.join(host_dir, prefix + "hip_api_stats.csv"))
                rocprof_csv.write_rows(written[-1], rocprof_csv.STATS,
                                       rocprof_csv.kernel_stats(_grouped(durs, offsets, calls.names)))
        if memcpy and lib.kr_count(t, COPIES):
            written.append(os.path.join(host_dir, prefix + "memory_copy_trace.csv"))
            host = [0] * len(copies.names)  # a direction names its sides (convert._DIRECTIONS)
            for (_cell, src, dst), g in zip(directions, copies.group_of, strict=False):
                host[g] = (1 if src else 0) | (2 if dst else 0)
            _check(lib.kr_write_copies(t, os.fsencode(written[-1]), _header(rocprof_csv.MEMORY_COPY_TRACE),
                                       *copies.args(), (ctypes.c_uint8 * max(len(host), 1))(*host)), written[-1])
        return written, count
    finally:
        lib.kr_free(t)


"""The native reader of per-dispatch CSV traces (native/csv_columns.c): one pass that checks every line and
extracts the time and string columns, handed to polars as Arrow arrays without a copy.

csv_readers.kernel_trace_table tries it first. It vouches only for the plain layout rocprofv3 writes (see the C
file's comment for the exact rules); for anything else, and where no C compiler builds it, it returns None and the
table is read as before (the line guard, polars, the csv module), so values and error messages never depend on
which path read a file (tests/reports/test_reports_csv_native.py compares the two on every fixture and on malformed
files). One difference is by design: blank lines, which the csv module skips, are skipped here too, where the
Python path's line guard sends such a file to the csv module, whose table has the same values with String names.
Built once per source version with the system's C compiler, as the tracer's native parts (api_recorder.build).

MADENGINE_ROCPROF_NATIVE_CSV=0 forces the Python path.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import polars as pl

from madengine_rocprof import inputs

SOURCE = Path(__file__).with_name("native") / "csv_columns.c"
ENV_SWITCH = "MADENGINE_ROCPROF_NATIVE_CSV"
MAX_STRINGS = 8  # MAX_STR in the C file
_OK = 0
_lib: ctypes.CDLL | None = None
_failed = ""  # why the library could not be built or loaded (kept: the build is not retried in one process)
why_not = ""  # why the last file was not read natively ("" when it was): for tests and debugging


class _Schema(ctypes.Structure):
    pass


class _Array(ctypes.Structure):
    pass


_Schema._fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
                    ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                    ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p)]
_Array._fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
                   ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64), ("buffers", ctypes.c_void_p),
                   ("children", ctypes.c_void_p), ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p),
                   ("private_data", ctypes.c_void_p)]
_RELEASE_ARRAY = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Array))
_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype, _capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_SCHEMA_NAME, _ARRAY_NAME = b"arrow_schema", b"arrow_array"  # module constants: a capsule keeps the pointer


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "off", "false", "no")


def library() -> ctypes.CDLL | None:
    """The built reader, or None (why_not says why)."""
    global _lib, _failed, why_not
    if _lib is not None or _failed:
        why_not = _failed
        return _lib
    from madengine_rocprof.tracer import api_recorder  # the compile-once helper of the native parts

    lib, why_not = api_recorder.open_built(SOURCE)
    if lib is None:
        _failed = why_not
        return None
    p = ctypes.c_void_p
    lib.cc_scan.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                            ctypes.c_int]
    lib.cc_scan.restype = p
    lib.cc_status.argtypes, lib.cc_status.restype = [p], ctypes.c_int
    lib.cc_reason.argtypes, lib.cc_reason.restype = [p], ctypes.c_char_p
    lib.cc_rows.argtypes, lib.cc_rows.restype = [p], ctypes.c_int64
    lib.cc_export.argtypes = [p, ctypes.c_int, ctypes.POINTER(_Schema), ctypes.POINTER(_Array)]
    lib.cc_export.restype = ctypes.c_int
    lib.cc_free.argtypes, lib.cc_free.restype = [p], None
    _lib = lib
    return lib


class _Column:
    """One exported column, offered to polars through the Arrow PyCapsule interface (polars moves the array out)."""

    def __init__(self) -> None:
        self.schema, self.array = _Schema(), _Array()

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return (_capsule(ctypes.addressof(self.schema), _SCHEMA_NAME, None),
                _capsule(ctypes.addressof(self.array), _ARRAY_NAME, None))

    def series(self) -> pl.Series:
        try:
            return pl.Series(self)
        finally:
            if self.array.release:  # not taken by polars (an error): free the buffers here
                _RELEASE_ARRAY(self.array.release)(ctypes.byref(self.array))


def read_columns(path: Path, ncols: int, start: int, end: int, strings: list[int]) -> list[pl.Series] | None:
    """[start, end, *strings] of a CSV file with `ncols` columns (positions as the csv module reads the header):
    Int64 times and Categorical strings (the first, the kernel name, never empty), or None where the native
    reader is off, unavailable, or does not vouch for the file (why_not says which)."""
    global why_not
    if not enabled():
        why_not = f"{ENV_SWITCH}=0"
        return None
    if not 1 <= len(strings) <= MAX_STRINGS:
        why_not = "unsupported columns"
        return None
    lib = library()
    if lib is None:
        return None
    with inputs.open_binary(path, "CSV file") as fh:
        handle = lib.cc_scan(fh.fileno(), ncols, start, end, (ctypes.c_int * len(strings))(*strings), len(strings))
    if not handle:
        why_not = "out of memory"
        return None
    try:
        if lib.cc_status(handle) != _OK:
            why_not = (lib.cc_reason(handle) or b"").decode("utf-8", "replace") or "out of memory"
            return None
        why_not = ""
        out = []
        for which in range(2 + len(strings)):
            column = _Column()
            if lib.cc_export(handle, which, ctypes.byref(column.schema), ctypes.byref(column.array)) != 0:
                why_not = "out of memory"
                return None
            out.append(column.series())
        return [out[0], out[1], *(s.cast(pl.Categorical) for s in out[2:])]
    finally:
        lib.cc_free(handle)

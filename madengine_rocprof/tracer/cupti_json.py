"""The CUPTI backend's Chrome trace JSON, written by C (native/cupti_json.c) straight from the raw records.

The Python path (cupti_records.chrome_trace: a dict per record, then json) wrote about 55k records/s on an H100,
~17 s for a 60-step run with API records, spent at exit or inside a SIGTERM's grace period. Here C walks the copied
activity buffers (with CUPTI's own cuptiActivityGetNextRecord) and the interposer's record windows twice: a scan
that counts records and collects what needs Python (kernel names to demangle, API callback names, copy and set
kinds: once per distinct key, escaped by the json module), then the write, in Kineto's layout (what torch.profiler
exports and `convert.read_kineto` reads fast). The file is written through a temporary file renamed into place
(atomic_file): a kill or an error leaves no partial trace under the final name.
"""
from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from pathlib import Path

from madengine_rocprof.atomic import atomic_file
from madengine_rocprof.tracer import api_recorder
from madengine_rocprof.tracer import cupti_records as cr

SOURCE = Path(__file__).with_name("native") / "cupti_json.c"
VERSION = 1
KINDS = (cr.KERNEL, cr.MEMCPY, cr.MEMSET, cr.RUNTIME, cr.DRIVER)  # the C file's kind order
COUNTED_KINDS = 1024  # counts[COUNTED_KINDS]: records of kinds beyond
# the C file's text tables: which key each holds
T_KERNEL, T_RUNTIME, T_DRIVER, T_FUNCTION, T_COPY_NAME, T_SET_NAME, T_COPY_ARGS = range(7)


def spec(layouts: dict) -> list[int]:
    """The int table the C file reads the records with: per kind value, field count, then offset, size and
    signedness of each field in cupti_records.FIELDS order."""
    out: list[int] = []
    for kind in KINDS:
        layout = layouts[kind]
        out += [kind, len(cr.FIELDS[kind])]
        for name in cr.FIELDS[kind]:
            offset, char = layout.fields[name]
            out += [offset, ctypes.sizeof(_CTYPE[char.lower()]), int(char.islower())]
    return out


_CTYPE = {"b": ctypes.c_int8, "h": ctypes.c_int16, "i": ctypes.c_int32, "q": ctypes.c_int64}


def copy_args(copy_kind: int) -> str:
    """The args that follow "bytes" in a memcpy event, as chrome_trace writes them."""
    direction, src_host, dst_host = cr.COPY_KINDS.get(copy_kind, ("Unknown", False, False))
    return (f'"direction": {json.dumps(direction)}, "src host": {json.dumps(src_host)},'
            f' "dst host": {json.dumps(dst_host)}')


class Writer:
    """The compiled C writer (raises api_recorder.Unavailable where it cannot be built)."""

    def __init__(self, native_path: Path | None = None) -> None:
        n = self.native = api_recorder.load(SOURCE, "cupti_json_version", VERSION, "native trace writer", native_path)
        n.cupti_json_new.argtypes = [ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.c_void_p]
        n.cupti_json_new.restype = ctypes.c_void_p
        n.cupti_json_free.argtypes = [ctypes.c_void_p]
        n.cupti_json_error.argtypes = [ctypes.c_void_p]
        n.cupti_json_error.restype = ctypes.c_char_p
        n.cupti_json_add_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        n.cupti_json_add_window.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64,
                                            ctypes.c_int64, ctypes.c_double]
        n.cupti_json_base.argtypes = [ctypes.c_void_p]
        n.cupti_json_base.restype = ctypes.c_int64
        n.cupti_json_events.argtypes = [ctypes.c_void_p]
        n.cupti_json_events.restype = ctypes.c_uint64
        n.cupti_json_counts.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        n.cupti_json_keys.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        n.cupti_json_keys.restype = ctypes.c_size_t
        n.cupti_json_set_text.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
                                          ctypes.c_size_t]
        n.cupti_json_write.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64]

    def write(self, path: str, *, layouts: dict, next_record: int, buffers: list[bytes], windows: list,
              text: Callable[[int, int], str], pid: int) -> tuple[dict[int, int], int]:
        """Writes the trace of `buffers` (CUPTI activity buffers, walked by the C function at `next_record`) and
        `windows` (api_recorder.Window) to `path`; text(table, key) gives the JSON text of one key (T_* tables).
        Returns ({kind: records seen}, events written)."""
        n = self.native
        table = spec(layouts)
        session = n.cupti_json_new((ctypes.c_int32 * len(table))(*table), len(table), next_record)
        if not session:
            raise RuntimeError("the native trace writer refused the CUPTI record layouts")
        try:
            for raw in buffers:
                self._check(session, n.cupti_json_add_buffer(session, raw, len(raw)))
            for w in windows:
                count = len(w.raw) // api_recorder.RECORD.size
                self._check(session, n.cupti_json_add_window(session, w.raw, count, w.t0, w.ns0, w.rate))
            for which in range(T_COPY_ARGS + 1):
                self._set_text(session, which, text)
            head = cr.trace_head(n.cupti_json_base(session))
            with atomic_file(path, "wb") as fh:
                fh.write(json.dumps(head, allow_nan=False)[:-1].encode() + b', "traceEvents": [\n')
                fh.flush()
                self._check(session, n.cupti_json_write(session, fh.fileno(), pid))
                fh.write(b"\n]}\n")
            counts = (ctypes.c_uint64 * (COUNTED_KINDS + 1))()
            n.cupti_json_counts(session, counts)
            seen = {kind: int(c) for kind, c in enumerate(counts) if c}
            return seen, int(n.cupti_json_events(session))
        finally:
            n.cupti_json_free(session)

    def _check(self, session, status: int) -> None:
        if status != 0:
            message = (self.native.cupti_json_error(session) or b"").decode("utf-8", "replace")
            if message.startswith("cannot write"):
                raise OSError(message)
            raise RuntimeError(message)

    def _set_text(self, session, which: int, text: Callable[[int, int], str]) -> None:
        n = self.native
        count = n.cupti_json_keys(session, which, None, 0)
        keys = (ctypes.c_uint64 * max(count, 1))()
        n.cupti_json_keys(session, which, keys, count)
        parts = [text(which, keys[i]).encode("utf-8") for i in range(count)]
        starts = (ctypes.c_uint64 * (count + 1))()
        pos = 0
        for i, part in enumerate(parts):
            starts[i] = pos
            pos += len(part)
        starts[count] = pos
        self._check(session, n.cupti_json_set_text(session, which, b"".join(parts), starts, count))

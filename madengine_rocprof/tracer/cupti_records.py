"""Raw CUPTI activity buffers -> Kineto-style Chrome trace events (standard library only).

The CUPTI backend copies each completed activity buffer as bytes and parses it only when the trace is written, so
no per-record Python work runs while the app does. Record layouts come from cupti-python's numpy dtypes (the C
structs); only the fields below are read. The trace uses Kineto's vocabulary (`kernel`, `gpu_memcpy`,
`gpu_memset`, `cuda_runtime` categories, microsecond `ts` from `baseTimeNanoseconds`) so `convert` turns it into
rocprofv3's files exactly as it does a torch.profiler trace.
"""
from __future__ import annotations

import re
import struct

# CUpti_ActivityKind values (cupti.ActivityKind); the backend checks them against the loaded module.
KERNEL, MEMCPY, MEMSET, DRIVER, RUNTIME = 10, 1, 2, 4, 5
FIELDS = {
    KERNEL: ("start", "end", "correlation_id", "name", "device_id", "context_id", "stream_id", "grid_x", "grid_y",
             "grid_z", "block_x", "block_y", "block_z", "registers_per_thread", "static_shared_memory",
             "dynamic_shared_memory", "graph_id"),
    MEMCPY: ("start", "end", "correlation_id", "device_id", "stream_id", "copy_kind", "src_kind", "dst_kind", "bytes"),
    MEMSET: ("start", "end", "correlation_id", "device_id", "stream_id", "memory_kind", "bytes", "value"),
    RUNTIME: ("start", "end", "correlation_id", "cbid", "process_id", "thread_id"),
    DRIVER: ("start", "end", "correlation_id", "cbid", "process_id", "thread_id"),
}
DTYPE_NAMES = {KERNEL: "activity_kernel10_dtype", MEMCPY: "activity_memcpy6_dtype",
               MEMSET: "activity_memset4_dtype", RUNTIME: "activity_api_dtype",
               DRIVER: "activity_api_dtype"}
_STRUCT_CHAR = {"u1": "B", "i1": "b", "u2": "H", "i2": "h", "u4": "I", "i4": "i", "u8": "Q", "i8": "q"}
# CUpti_ActivityMemcpyKind -> (rocprofv3 direction, source is host, destination is host)
COPY_KINDS = {1: ("HtoD", True, False), 2: ("DtoH", False, True), 3: ("HtoA", True, False), 4: ("AtoH", False, True),
              5: ("AtoA", False, False), 6: ("AtoD", False, False), 7: ("DtoA", False, False),
              8: ("DtoD", False, False), 9: ("HtoH", True, True), 10: ("PtoP", False, False)}
MEMORY_KINDS = {1: "Pageable", 2: "Pinned", 3: "Device", 4: "Array", 5: "Managed", 6: "Device Static",
                7: "Managed Static"}


class Layout:
    """Where one record kind keeps the fields we read: a struct over the record, fields in offset order."""

    def __init__(self, kind: int, dtype, names: tuple) -> None:
        placed = []
        for name in names:
            field = dtype.fields.get(name)
            if field is None:
                raise ValueError(f"CUPTI record kind {kind} has no field {name!r}: cupti-python version mismatch")
            char = _STRUCT_CHAR.get(field[0].str.lstrip("<>|="))
            if char is None:
                raise ValueError(f"CUPTI record field {name!r} has unsupported type {field[0].str}")
            placed.append((field[1], name, char))
        placed.sort()
        fmt, pos = "<", 0
        for offset, _name, char in placed:
            fmt += (f"{offset - pos}x" if offset > pos else "") + char
            pos = offset + struct.calcsize("<" + char)
        self.kind = kind
        self.fields = {name: (offset, char) for offset, name, char in placed}  # for the C writer (cupti_json)
        self.names = tuple(name for _o, name, _c in placed)
        self.struct = struct.Struct(fmt)
        self.itemsize = int(dtype.itemsize)

    def read(self, raw, offset: int) -> dict:
        return dict(zip(self.names, self.struct.unpack_from(raw, offset), strict=True))


def layouts(module) -> dict:
    """{kind: Layout} from cupti-python's dtypes (module = cupti.cupti)."""
    return {kind: Layout(kind, getattr(module, DTYPE_NAMES[kind]), names) for kind, names in FIELDS.items()}


def parse(raw, offsets, table: dict) -> tuple[list[tuple[int, dict]], dict]:
    """Records of the kinds in `table` at `offsets` of one buffer; also {kind: count} of every kind seen."""
    records: list[tuple[int, dict]] = []
    seen: dict[int, int] = {}
    for off in offsets:
        kind = struct.unpack_from("<i", raw, off)[0]
        seen[kind] = seen.get(kind, 0) + 1
        layout = table.get(kind)
        if layout is not None:
            records.append((kind, layout.read(raw, off)))
    return records, seen


_VERSION_SUFFIX = re.compile(r"_v\d+$")


def api_name(callback_name: str) -> str:
    """`cudaLaunchKernel_v7000` -> `cudaLaunchKernel` (the name the API has in code, as Kineto shows it)."""
    return _VERSION_SUFFIX.sub("", callback_name)


def memcpy_name(copy_kind: int, src_kind: int, dst_kind: int) -> str:
    direction = COPY_KINDS.get(copy_kind, ("Unknown", False, False))[0]
    src = MEMORY_KINDS.get(src_kind, "Unknown")
    dst = MEMORY_KINDS.get(dst_kind, "Unknown")
    return f"Memcpy {direction} ({src} -> {dst})"


def memset_name(memory_kind: int) -> str:
    return f"Memset ({MEMORY_KINDS.get(memory_kind, 'Unknown')})"


def chrome_trace(records: list[tuple[int, dict]], *, kernel_name, api_name_of, pid: int) -> dict:
    """Kineto-style trace of parsed records (the Python path, where the C writer, cupti_json, cannot be built).
    `kernel_name(ptr)` -> the name to show; `api_name_of(kind, cbid)` -> str
    (kind RUNTIME or DRIVER), for API records that do not carry their own `name` (the interposer's do)."""
    starts = [r["start"] for _k, r in records if r["start"]]
    base = min(starts) if starts else 0
    events = []
    for kind, r in records:
        ts, dur = (r["start"] - base) / 1000.0, max(r["end"] - r["start"], 0) / 1000.0
        if kind == KERNEL:
            events.append({"ph": "X", "cat": "kernel", "name": kernel_name(r["name"]), "pid": r["device_id"],
                           "tid": r["stream_id"], "ts": ts, "dur": dur,
                           "args": {"device": r["device_id"], "context": r["context_id"], "stream": r["stream_id"],
                                    "correlation": r["correlation_id"],
                                    "registers per thread": r["registers_per_thread"],
                                    "shared memory": r["static_shared_memory"] + r["dynamic_shared_memory"],
                                    "grid": [r["grid_x"], r["grid_y"], r["grid_z"]],
                                    "block": [r["block_x"], r["block_y"], r["block_z"]], "graph id": r["graph_id"]}})
        elif kind == MEMCPY:
            direction, src_host, dst_host = COPY_KINDS.get(r["copy_kind"], ("Unknown", False, False))
            name = memcpy_name(r["copy_kind"], r["src_kind"], r["dst_kind"])
            events.append({"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": r["device_id"],
                           "tid": r["stream_id"], "ts": ts, "dur": dur,
                           "args": {"device": r["device_id"], "stream": r["stream_id"],
                                    "correlation": r["correlation_id"],
                                    "bytes": r["bytes"], "direction": direction, "src host": src_host,
                                    "dst host": dst_host}})
        elif kind == MEMSET:
            events.append({"ph": "X", "cat": "gpu_memset", "name": memset_name(r["memory_kind"]), "pid": r["device_id"],
                           "tid": r["stream_id"], "ts": ts, "dur": dur,
                           "args": {"device": r["device_id"], "stream": r["stream_id"],
                                    "correlation": r["correlation_id"],
                                    "bytes": r["bytes"], "value": r["value"]}})
        elif kind in (RUNTIME, DRIVER):
            events.append({"ph": "X", "cat": "cuda_runtime" if kind == RUNTIME else "cuda_driver",
                           "name": r.get("name") or api_name_of(kind, r["cbid"]),
                           "pid": r["process_id"] or pid, "tid": r["thread_id"], "ts": ts, "dur": dur,
                           "args": {"correlation": r["correlation_id"], "cbid": r["cbid"]}})
    events.sort(key=lambda e: e["ts"])
    return {**trace_head(base), "traceEvents": events}


def trace_head(base: int) -> dict:
    """The trace's keys besides its events."""
    return {"schemaVersion": 1, "baseTimeNanoseconds": base, "deviceProperties": [],
            "traceName": "madengine-rocprof CUPTI tracer"}

"""A fake of cupti-python's `cupti.cupti` module and of libcupti's buffer protocol, for CPU tests.

It behaves like the real pair as the CUPTI backend uses them (checked on an H200 with cupti-python 13.0.1 and
libcupti 13.0.85): record layouts are the real ones (offsets and types of cupti.activity_*_dtype, the fields the
backend reads), kind values are CUpti_ActivityKind's, records are written into buffers obtained from the
registered request callback and handed back through the completion callback (at flush, or when a buffer is
full), records are walked with cuptiActivityGetNextRecord (status 12 = no more), kernel names are C strings
owned by the library (mangled), thread-id type and hardware tracing can be refused with cuptiError, and dropped
records are reported through a size_t pointer.

The callback API too: one subscriber at a time (a second cuptiSubscribe answers status 39), callbacks only for the
domains enabled, each API call calling the subscriber's C function at entry and exit with a CUpti_CallbackData laid
out as in cupti_callbacks.h (the same 64-bit correlationData slot at entry and exit), and an activity record of the
call only when that activity kind is enabled. cuptiGetTimestamp is a C-callable function on CLOCK_MONOTONIC.
"""
from __future__ import annotations

import ctypes
import enum
import struct
import threading
import time
from pathlib import Path
from typing import Any


class cuptiError(Exception):  # noqa: N801 - the real class name
    def __init__(self, status: int, name: str) -> None:
        super().__init__(f"{name} ({status})")
        self.status = status


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    DRIVER = 4
    RUNTIME = 5
    CONCURRENT_KERNEL = 10


class ActivityAttribute(enum.IntEnum):
    ATTR_PER_THREAD_BUFFER = 9
    ATTR_ZEROED_OUT_BUFFER = 5


class CallbackDomain(enum.IntEnum):
    DRIVER_API = 1
    RUNTIME_API = 2


class _Type:
    def __init__(self, s: str) -> None:
        self.str = s


class _Dtype:
    def __init__(self, itemsize: int, fields: dict) -> None:
        self.itemsize = itemsize
        self.fields = {name: (_Type(t), off) for name, (t, off) in fields.items()}


# Offsets and types as in cupti-python 13.0.1 (CUpti_ActivityKernel10, Memcpy6, Memset4, API), fields we read + kind.
activity_kernel10_dtype = _Dtype(216, {
    "kind": ("<i4", 0), "registers_per_thread": ("<u2", 6), "start": ("<u8", 16), "end": ("<u8", 24),
    "device_id": ("<u4", 40), "context_id": ("<u4", 44), "stream_id": ("<u4", 48), "grid_x": ("<i4", 52),
    "grid_y": ("<i4", 56), "grid_z": ("<i4", 60), "block_x": ("<i4", 64), "block_y": ("<i4", 68),
    "block_z": ("<i4", 72), "static_shared_memory": ("<i4", 76), "dynamic_shared_memory": ("<i4", 80),
    "correlation_id": ("<u4", 92), "name": ("<i8", 104), "graph_id": ("<u4", 156)})
activity_memcpy6_dtype = _Dtype(96, {
    "kind": ("<i4", 0), "copy_kind": ("|u1", 4), "src_kind": ("|u1", 5), "dst_kind": ("|u1", 6), "bytes": ("<u8", 8),
    "start": ("<u8", 16), "end": ("<u8", 24), "device_id": ("<u4", 32), "stream_id": ("<u4", 40),
    "correlation_id": ("<u4", 44)})
activity_memset4_dtype = _Dtype(88, {
    "kind": ("<i4", 0), "value": ("<u4", 4), "bytes": ("<u8", 8), "start": ("<u8", 16), "end": ("<u8", 24),
    "device_id": ("<u4", 32), "stream_id": ("<u4", 40), "correlation_id": ("<u4", 44), "memory_kind": ("<u2", 50)})
activity_api_dtype = _Dtype(40, {
    "kind": ("<i4", 0), "cbid": ("<u4", 4), "start": ("<u8", 8), "end": ("<u8", 16), "process_id": ("<u4", 24),
    "thread_id": ("<u4", 28), "correlation_id": ("<u4", 32)})
_DTYPES = {1: activity_memcpy6_dtype, 2: activity_memset4_dtype, 4: activity_api_dtype, 5: activity_api_dtype,
           10: activity_kernel10_dtype}
_CALLBACK_NAMES = {211: "cudaLaunchKernel_v7000", 41: "cudaMemcpyAsync_v3020", 17: "cudaGetDevice_v3020"}


class _State:
    def __init__(self) -> None:
        self.enabled: set = set()
        self.pending: list[tuple[int, dict]] = []  # records CUPTI holds until a buffer is completed
        self.dropped = 0
        self.hw_trace_supported = False
        self.thread_id_type: int | None = None
        self.callbacks: tuple | None = None
        self.names: dict[str, ctypes.Array] = {}  # C strings the library owns
        self.completions = 0
        self.attributes: dict[int, int] = {}  # activity attributes set through cuptiActivitySetAttribute
        self.attribute_status = 0  # what cuptiActivitySetAttribute answers (an older CUPTI: not 0)
        self.subscriber: Any = None  # the subscribed C callback (a ctypes function; a test may put any object)
        self.domains: set[int] = set()  # callback domains enabled for it
        self.cbids: set[tuple[int, int]] = set()  # (domain, callback id) enabled one by one (cuptiEnableCallback)
        self.next_correlation = 1


STATE = _State()


def reset(hw_trace_supported: bool = False) -> None:
    global STATE
    STATE = _State()
    STATE.hw_trace_supported = hw_trace_supported


def activity_enable(kind) -> None:
    STATE.enabled.add(int(kind))


def activity_disable(kind) -> None:
    STATE.enabled.discard(int(kind))


def activity_enable_hw_trace(enable: int) -> None:
    if not STATE.hw_trace_supported:
        raise cuptiError(27, "ERROR_NOT_SUPPORTED")


def set_thread_id_type(kind: int) -> None:
    STATE.thread_id_type = kind


def get_timestamp() -> int:
    return time.monotonic_ns()


_DRIVER_NAMES = {307: "cuLaunchKernel", 442: "cuLaunchKernelEx", 279: "cuMemcpyHtoDAsync_v2"}


def get_callback_name(domain, cbid: int) -> str:
    names = _CALLBACK_NAMES if int(domain) == CallbackDomain.RUNTIME_API else _DRIVER_NAMES
    if cbid not in names:
        raise cuptiError(1, "ERROR_INVALID_PARAMETER")
    return names[cbid]


def activity_get_num_dropped_records(context: int, stream_id: int, dropped: int) -> None:
    ctypes.c_size_t.from_address(dropped).value = STATE.dropped


def record(kind: int, **fields) -> bool:
    """What the driver does on an activity: queue a record of an enabled kind (False: kind not enabled)."""
    if kind not in STATE.enabled:
        return False
    if kind == ActivityKind.CONCURRENT_KERNEL and isinstance(fields.get("name"), str):
        text = fields["name"]
        STATE.names.setdefault(text, ctypes.create_string_buffer(text.encode()))
        fields["name"] = ctypes.addressof(STATE.names[text])
    STATE.pending.append((kind, fields))
    return True


def _pack(kind: int, fields: dict) -> bytes:
    dt = _DTYPES[kind]
    raw = bytearray(dt.itemsize)
    struct.pack_into("<i", raw, 0, kind)
    for name, value in fields.items():
        ftype, off = dt.fields[name]
        char = {"u1": "B", "u2": "H", "u4": "I", "i4": "i", "u8": "Q", "i8": "q"}[ftype.str[1:]]
        struct.pack_into("<" + char, raw, off, value)
    return bytes(raw)


def activity_flush_all(flag: int) -> None:
    """Hand every queued record back through request/complete callbacks, as many buffers as it takes."""
    if STATE.callbacks is None:
        return
    request, complete = STATE.callbacks
    while STATE.pending:
        buf, size, max_records = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        request(ctypes.byref(buf), ctypes.byref(size), ctypes.byref(max_records))
        base = buf.value or 0  # the address the request callback handed out
        used = 0
        while STATE.pending:
            data = _pack(*STATE.pending[0])
            if used + len(data) > size.value:
                if used == 0:  # a record larger than a whole buffer: CUPTI drops it
                    STATE.pending.pop(0)
                    STATE.dropped += 1
                    continue
                break
            ctypes.memmove(base + used, data, len(data))
            used += len(data)
            STATE.pending.pop(0)
        STATE.completions += 1
        complete(None, 0, base, size.value, used)


class CallbackData(ctypes.Structure):
    """CUpti_CallbackData (cupti_callbacks.h), natural C layout."""
    _fields_ = [("callbackSite", ctypes.c_int32), ("functionName", ctypes.c_char_p),
                ("functionParams", ctypes.c_void_p), ("functionReturnValue", ctypes.c_void_p),
                ("symbolName", ctypes.c_char_p), ("context", ctypes.c_void_p), ("contextUid", ctypes.c_uint32),
                ("correlationData", ctypes.POINTER(ctypes.c_uint64)), ("correlationId", ctypes.c_uint32)]


_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32, ctypes.POINTER(CallbackData))
_ACTIVITY_OF_DOMAIN = {int(CallbackDomain.DRIVER_API): ActivityKind.DRIVER,
                       int(CallbackDomain.RUNTIME_API): ActivityKind.RUNTIME}
_LOCK = threading.Lock()


def api_call(domain: int, cbid: int, work=None) -> int:
    """What the CUDA runtime or driver does for one API call; returns its correlation id. `work(correlation)` runs
    between the entry and the exit callbacks (e.g. a kernel record of the launch)."""
    with _LOCK:
        corr = STATE.next_correlation
        STATE.next_correlation += 1
    calls = STATE.subscriber is not None and (int(domain) in STATE.domains or (int(domain), cbid) in STATE.cbids)
    slot = ctypes.c_uint64(0)
    data = CallbackData(0, b"fake", None, None, None, None, 1, ctypes.pointer(slot), corr)
    start = time.monotonic_ns()
    if calls:
        STATE.subscriber(None, int(domain), cbid, ctypes.byref(data))
    if work is not None:
        work(corr)
    if calls:
        data.callbackSite = 1
        STATE.subscriber(None, int(domain), cbid, ctypes.byref(data))
    record(int(_ACTIVITY_OF_DOMAIN[int(domain)]), cbid=cbid, start=start, end=time.monotonic_ns(), process_id=0,
           thread_id=threading.get_native_id(), correlation_id=corr)
    return corr


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64))
def _get_timestamp(out) -> int:
    out[0] = get_timestamp()
    return 0


# Record sizes of kinds the backend does not read (CUPTI may put other kinds in a buffer): walked, counted, skipped.
OTHER_KINDS = {3: 48, 6: 64}


def record_size(kind: int) -> int:
    return _DTYPES[kind].itemsize if kind in _DTYPES else OTHER_KINDS[kind]


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p))
def _next_record(base, valid, record_ref) -> int:
    """cuptiActivityGetNextRecord: *record NULL starts the walk; status 12 (MAX_LIMIT_REACHED) ends it."""
    rec = record_ref.contents
    start = rec.value is None
    nxt = (base or 0) if start else rec.value + record_size(ctypes.c_int32.from_address(rec.value).value)
    if nxt >= (base or 0) + valid:
        return 12  # CUPTI_ERROR_MAX_LIMIT_REACHED
    rec.value = nxt
    return 0


NEXT_SOURCE = Path(__file__).with_name("next_record.c")


def c_next_record(folder: Path | None = None):
    """The same walk in C (next_record.c, built like the tracer's native code): a ctypes function, as fast as
    libcupti's own."""
    from madengine_rocprof.tracer import api_recorder

    fn = ctypes.CDLL(str(api_recorder.build(NEXT_SOURCE, folder))).fake_next_record
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    fn.restype = ctypes.c_int
    return fn


class FakeLib:
    """libcupti's C entry points the backend calls through ctypes."""

    cuptiGetTimestamp = _get_timestamp  # noqa: N815 - C name; a C function pointer, called from native code

    def cuptiSubscribe(self, handle_ref, callback, userdata) -> int:  # noqa: N802 - C name
        if STATE.subscriber is not None:
            return 39  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
        STATE.subscriber = _CALLBACK(callback.value)
        handle_ref._obj.value = 0x5B5B
        return 0

    def cuptiEnableDomain(self, enable: int, subscriber, domain: int) -> int:  # noqa: N802 - C name
        if STATE.subscriber is None or subscriber.value != 0x5B5B:
            return 1  # CUPTI_ERROR_INVALID_PARAMETER
        (STATE.domains.add if enable else STATE.domains.discard)(int(domain))
        return 0

    def cuptiEnableCallback(self, enable: int, subscriber, domain: int, cbid: int) -> int:  # noqa: N802 - C name
        if STATE.subscriber is None or subscriber.value != 0x5B5B:
            return 1  # CUPTI_ERROR_INVALID_PARAMETER
        (STATE.cbids.add if enable else STATE.cbids.discard)((int(domain), int(cbid)))
        return 0

    def cuptiUnsubscribe(self, subscriber) -> int:  # noqa: N802 - C name
        STATE.subscriber, STATE.domains, STATE.cbids = None, set(), set()
        return 0

    def cuptiActivitySetAttribute(self, attr: int, size_ref, value_ref) -> int:  # noqa: N802 - C name
        if STATE.attribute_status == 0:
            size = size_ref._obj.value
            STATE.attributes[attr] = int.from_bytes(ctypes.string_at(ctypes.addressof(value_ref._obj), size), "little")
        return STATE.attribute_status

    def cuptiActivityRegisterCallbacks(self, request, complete) -> int:  # noqa: N802 - C name
        STATE.callbacks = (request, complete)
        return 0

    # a C-callable function, as libcupti's: the backend's C trace writer calls it through its address
    cuptiActivityGetNextRecord = _next_record  # noqa: N815 - C name

"""CUPTI activity tracing through NVIDIA's cupti-python bindings, at the lowest host cost we could measure.

Only the activity kinds the profile needs are enabled: concurrent kernels, memcpy and memset. An API trace
(--hip-trace/--runtime-trace/--sys-trace) records every CUDA runtime call, like rocprofv3's --hip-trace, or, with
api_domain="driver" (MADENGINE_ROCPROF_TRACER_API_DOMAIN=driver), the driver calls instead. API calls are recorded as
by the libcudart interposer (`api_recorder`, the default: cheaper per call; kernels launched by statically linked
runtimes such as cuBLAS join their driver launch) or as CUPTI's API activity records (api_recorder_choice="activity",
and the fallback where the interposer cannot run); benchmarks/tracer/README.md has the product-path figures.
Activity buffers are per thread where CUPTI supports it (no lock shared by the forward and autograd threads), and
CUPTI is told not to zero a buffer before filling it (a 32 MiB memset each time a buffer is handed over; records
are walked by their valid size, so stale bytes are never read). Hardware-event-based tracing is switched on where
the driver supports it (CUPTI answers NOT_SUPPORTED elsewhere, e.g. Hopper with driver 580).

Buffers: cupti-python turns every record of a completed buffer into a Python object before its callback runs,
which measured about 80 us per kernel record on an H200 (benchmarks/wrapper/README.md); a buffer completing while
the app runs would stall it for that long per record. So the buffer callbacks are registered on the same libcupti
through ctypes, and they are C functions (`NativeBuffers`, native/cupti_buffers.c, built with the system's C
compiler like the API recorder): CUPTI's threads never take the GIL, a request pops a buffer whose pages were
touched in advance, a completed buffer is queued as it is. When a window closes its buffers are copied out as
bytes and go back to the free list; the records are read only when the trace is written: by C, straight into the
Chrome trace JSON (`cupti_json`, native/cupti_json.c), from which `convert` makes the rows as from a torch.profiler
export. Without a C compiler the same protocol runs in Python callbacks (`Buffers`) and the trace is made in Python
(`cupti_records`), and the summary says so.
Everything else (enabling kinds, flush, dropped-record counts, callback names, record layouts) goes through the
bindings. CUPTI counts records it had to drop for lack of buffer space; the count is reported, never hidden.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import threading
from pathlib import Path

from madengine_rocprof.tracer import api_recorder, convert, cupti_json
from madengine_rocprof.tracer import cupti_records as cr

BUFFER_BYTES = 32 << 20      # one activity buffer: ~150k kernel records, so a bounded window rarely completes one
THREAD_ID_TYPE_SYSTEM = 1    # CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM: OS thread ids (gettid), like rocprofv3
API_DOMAINS = ("runtime", "driver")
_ERROR_MAX_LIMIT_REACHED = 12  # cuptiActivityGetNextRecord: no more records in the buffer

_REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                            ctypes.POINTER(ctypes.c_size_t))
_COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_size_t)


def load():
    """The `cupti.cupti` module, or raise ImportError (the caller falls back to torch.profiler)."""
    from cupti import cupti  # optional dependency, imported only when tracing on CUDA

    return cupti


def libcupti_path(maps: str = "/proc/self/maps") -> str | None:
    """Path of the libcupti the bindings loaded (so ctypes talks to the same library instance)."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if "/libcupti.so" in path:
                    return path
    except OSError:
        return None
    return None


def open_lib(cupti):
    """ctypes handle on the libcupti the bindings loaded, with the two entry points the backend calls."""
    cupti.get_timestamp()  # makes sure the bindings have loaded libcupti
    path = libcupti_path()
    if path is None:
        raise RuntimeError("cannot find the libcupti that cupti-python loaded (/proc/self/maps)")
    lib = ctypes.CDLL(path)
    lib.cuptiActivityRegisterCallbacks.argtypes = [_REQUEST, _COMPLETE]
    lib.cuptiActivityRegisterCallbacks.restype = ctypes.c_int
    lib.cuptiActivityGetNextRecord.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    lib.cuptiActivityGetNextRecord.restype = ctypes.c_int
    lib.cuptiActivitySetAttribute.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
    lib.cuptiActivitySetAttribute.restype = ctypes.c_int
    return lib


class Buffers:
    """Activity buffers for CUPTI: handed out from a free list, copied out as bytes when CUPTI completes them."""

    def __init__(self, size: int = BUFFER_BYTES) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.free: list = []
        self.owned: dict[int, object] = {}  # address -> ctypes array keeping the memory alive
        self.completed: list[bytes] = []
        self.requested = 0
        self.completed_bytes = 0
        self.mechanism = "Python callbacks"

    def _allocate(self) -> int:
        memory = (ctypes.c_uint8 * self.size)()  # zeroed (every page touched), 16-byte aligned (CUPTI needs 8)
        address = ctypes.addressof(memory)
        self.owned[address] = memory
        return address

    def prefill(self, count: int = 1) -> None:
        """Allocate buffers now, outside the traced steps: zeroing 32 MiB takes milliseconds, which the first
        launch that needs a buffer would otherwise pay."""
        with self.lock:
            while len(self.free) < count:
                self.free.append(self._allocate())

    def request(self) -> int:
        with self.lock:
            self.requested += 1
            return self.free.pop() if self.free else self._allocate()

    def complete(self, address: int, valid: int) -> None:
        data = ctypes.string_at(address, valid) if valid else b""
        with self.lock:
            if data:
                self.completed.append(data)
                self.completed_bytes += valid
            if address in self.owned:
                self.free.append(address)

    def take(self) -> list[bytes]:
        with self.lock:
            done, self.completed = self.completed, []
        return done

    def callbacks(self) -> tuple:
        """The request and complete callbacks to register (ctypes objects: they must outlive the registration)."""
        def on_request(buf_out, size_out, max_records_out):
            buf_out[0] = self.request()
            size_out[0] = self.size
            max_records_out[0] = 0  # as many as fit

        def on_complete(_context, _stream, address, _size, valid):
            self.complete(address, valid)

        return _REQUEST(on_request), _COMPLETE(on_complete)


BUFFERS_SOURCE = Path(__file__).with_name("native") / "cupti_buffers.c"
PREFILL = 2  # buffers ready before the first record: one per launching thread (forward and autograd)


class NativeBuffers:
    """Activity buffers handled in C (native/cupti_buffers.c): CUPTI's request and completion callbacks never enter
    Python. keep=False discards every completed buffer (the do-nothing consumer benchmarks/tracer measures CUPTI's
    own cost with). The C state is one per process, like CUPTI's registration."""

    def __init__(self, size: int = BUFFER_BYTES, *, keep: bool = True, native_path: Path | None = None) -> None:
        n = self.native = api_recorder.load(BUFFERS_SOURCE, "cupti_buffers_version", 1, "native buffers", native_path)
        n.cupti_buffers_configure.argtypes = [ctypes.c_size_t, ctypes.c_int]
        n.cupti_buffers_configure.restype = ctypes.c_int
        n.cupti_buffers_prefill.argtypes = [ctypes.c_size_t]
        n.cupti_buffers_prefill.restype = ctypes.c_long
        n.cupti_buffers_pending.restype = ctypes.c_size_t
        n.cupti_buffers_take.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        n.cupti_buffers_take.restype = ctypes.c_size_t
        n.cupti_buffers_release.argtypes = [ctypes.c_void_p]
        n.cupti_buffers_counts.argtypes = [ctypes.c_void_p]
        if n.cupti_buffers_configure(size, 1 if keep else 0) != 0:
            raise api_recorder.Unavailable(f"native buffers of another size already exist in this process (asked"
                                           f" for {size} bytes)")
        self.size = size
        self.keep = keep
        self.mechanism = "native (C callbacks)"

    def callbacks(self) -> tuple:
        n = self.native
        request = ctypes.cast(n.cupti_buffers_request, ctypes.c_void_p).value or 0
        complete = ctypes.cast(n.cupti_buffers_complete, ctypes.c_void_p).value or 0
        return _REQUEST(request), _COMPLETE(complete)

    def prefill(self, count: int = PREFILL) -> None:
        if self.native.cupti_buffers_prefill(count) < 0:
            raise MemoryError(f"cannot allocate {count} CUPTI activity buffers of {self.size} bytes")

    def take(self) -> list[bytes]:
        """The completed buffers' records as bytes, oldest first; the buffers go back to the free list."""
        n = self.native
        pending = n.cupti_buffers_pending()
        if not pending:
            return []
        ptrs = (ctypes.c_void_p * pending)()
        valids = (ctypes.c_size_t * pending)()
        got = n.cupti_buffers_take(ptrs, valids, pending)
        out = []
        for i in range(got):
            out.append(ctypes.string_at(ptrs[i], valids[i]))
            n.cupti_buffers_release(ptrs[i])
        return out

    def _counts(self) -> list[int]:
        values = (ctypes.c_uint64 * 5)()
        self.native.cupti_buffers_counts(values)
        return list(values)

    @property
    def requested(self) -> int:
        return self._counts()[0]

    @property
    def completed_bytes(self) -> int:
        return self._counts()[3]


def make_buffers(size: int = BUFFER_BYTES) -> tuple[Buffers | NativeBuffers, str]:
    """NativeBuffers where the C file builds, else the Python callbacks; and a warning when it falls back."""
    try:
        return NativeBuffers(size), ""
    except (api_recorder.Unavailable, OSError, AttributeError) as exc:
        buffers = Buffers(size)
        buffers.mechanism = f"Python callbacks (native buffers unavailable: {exc})"
        return buffers, (f"native CUPTI buffer handling unavailable ({exc}); CUPTI's buffer callbacks run in Python"
                         " and take the GIL")


class CuptiBackend:
    """start() / stop() / trace(): the records of one window as a Kineto-style trace, plus counts for the manifest."""

    name = "cupti"

    def __init__(self, cupti, *, api: bool, lib=None, buffers: Buffers | NativeBuffers | None = None,
                 hw_trace: bool = True, per_thread_buffers: bool = True, api_domain: str = "runtime",
                 api_recorder_choice: str = api_recorder.DEFAULT, native_recorder: str | None = None) -> None:
        if api_domain not in API_DOMAINS:
            raise ValueError(f"api_domain must be runtime or driver, not {api_domain!r}")
        if api_recorder_choice not in api_recorder.CHOICES:
            raise ValueError(f"api_recorder_choice must be one of {', '.join(api_recorder.CHOICES)},"
                             f" not {api_recorder_choice!r}")
        self.cupti = cupti
        self.api = api
        self.api_domain = api_domain
        self.want_per_thread = per_thread_buffers
        self.per_thread: str = "off"
        self.zeroed_buffers: str = "on"  # CUPTI's default
        self.lib = lib
        self.buffers = buffers or Buffers()
        self.want_hw_trace = hw_trace
        self.hw_trace: str = "off"
        self.layouts = cr.layouts(cupti)
        self.kinds = [cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET]
        self.api_recorder_choice = api_recorder_choice
        self.native_recorder = native_recorder  # a built recorder library (tests); None: build or find it
        self.recorder: api_recorder.Interposer | None = None
        self.api_mechanism = "undecided" if api else "none"  # decided by the first start()
        self.warnings: list[str] = []
        self._check_kind_values()
        self.dropped = 0
        self.enabled: list = []
        self._callbacks: tuple = ()  # ctypes function objects: must outlive the registration
        self.raw: list[bytes] = []
        self.writer: cupti_json.Writer | None = None
        self.trace_writer = "undecided"  # decided by the first start(): built then, not in a SIGTERM's grace period

    def _check_kind_values(self) -> None:
        ak = self.cupti.ActivityKind
        expected = {cr.KERNEL: ak.CONCURRENT_KERNEL, cr.MEMCPY: ak.MEMCPY, cr.MEMSET: ak.MEMSET, cr.RUNTIME: ak.RUNTIME,
                    cr.DRIVER: ak.DRIVER}
        wrong = {k: int(v) for k, v in expected.items() if int(v) != k}
        if wrong:
            raise RuntimeError(f"cupti ActivityKind values differ from the ones this tracer parses: {wrong}")

    # -------------------------------------------------- control
    def _register(self) -> None:
        if self._callbacks:  # registered by an earlier window of this backend
            return
        self._callbacks = self.buffers.callbacks()
        status = self.lib.cuptiActivityRegisterCallbacks(*self._callbacks)
        if status != 0:
            raise RuntimeError(f"cuptiActivityRegisterCallbacks failed with CUPTI status {status}")

    def start(self) -> None:
        c = self.cupti
        with contextlib.suppress(c.cuptiError):  # older CUPTI: thread ids stay pthread ids
            c.set_thread_id_type(THREAD_ID_TYPE_SYSTEM)
        if self.want_hw_trace:
            try:
                c.activity_enable_hw_trace(1)
                self.hw_trace = "on"
            except c.cuptiError as exc:
                self.hw_trace = f"unsupported ({exc})"
        if self.lib is None:
            self.lib = open_lib(c)
        if self.want_per_thread and self.per_thread == "off":
            self.per_thread = self._set_flag(c.ActivityAttribute.ATTR_PER_THREAD_BUFFER, 1)
        if self.zeroed_buffers == "on":
            self.zeroed_buffers = {"on": "off"}.get(self._set_flag(c.ActivityAttribute.ATTR_ZEROED_OUT_BUFFER, 0),
                                                    "on (CUPTI cannot switch it off)")
        self.buffers.prefill()
        self._register()
        if self.trace_writer == "undecided":
            self._choose_writer()
        if self.api_mechanism == "undecided":
            self._choose_api_recorder()
        for kind in self.kinds:
            c.activity_enable(kind)
            self.enabled.append(kind)
        if self.recorder is not None:
            try:
                self.recorder.start()
            except api_recorder.Unavailable as exc:  # e.g. no libcudart.so loaded (a statically linked runtime)
                if self.recorder.windows:
                    raise
                self.recorder.close()
                self.recorder = None
                kind = self._use_activity_records(self.api_recorder_choice, exc)
                c.activity_enable(kind)
                self.enabled.append(kind)

    def _use_activity_records(self, choice: str, why: Exception):
        """Falls back from a native recorder to CUPTI's API activity records, saying why; returns their kind."""
        self.api_mechanism = f"CUPTI activity records ({choice} recorder unavailable: {why})"
        self.warnings.append(f"{api_recorder.ENV_RECORDER}={choice}, but {why}; recording API calls with CUPTI"
                             " activity records")
        ak = self.cupti.ActivityKind
        kind = ak.RUNTIME if self.api_domain == "runtime" else ak.DRIVER
        self.kinds.append(kind)
        return kind

    def _choose_api_recorder(self) -> None:
        """The libcudart interposer when asked for (the default) and it builds and CUPTI takes its subscription, else
        API activity records (saying why)."""
        ak = self.cupti.ActivityKind
        activity_kind = ak.RUNTIME if self.api_domain == "runtime" else ak.DRIVER
        choice = self.api_recorder_choice
        if choice == "interpose" and self.api_domain == "driver":
            self.warnings.append(f"{api_recorder.ENV_RECORDER}=interpose records runtime calls only; recording"
                                 " driver API calls with CUPTI activity records")
            choice = "activity"
        if choice == "activity":
            self.api_mechanism = "CUPTI activity records"
            self.kinds.append(activity_kind)
            return
        try:
            path = Path(self.native_recorder) if self.native_recorder else None
            recorder = api_recorder.Interposer(self.lib, self.cupti, path)
            recorder.subscribe()
            self.recorder = recorder
            self.api_mechanism = f"libcudart interposer ({recorder.clock})"
        except (api_recorder.Unavailable, OSError, AttributeError) as exc:
            self._use_activity_records(choice, exc)

    def _choose_writer(self) -> None:
        """The C trace writer where it builds and libcupti's record walker is a C function, else the Python path."""
        try:
            self.writer = cupti_json.Writer()
            self.next_record()
            self.trace_writer = "native (C)"
        except (api_recorder.Unavailable, OSError, AttributeError, TypeError, ctypes.ArgumentError) as exc:
            self.writer = None
            self.trace_writer = f"Python (native trace writer unavailable: {exc})"

    def next_record(self) -> int:
        """Address of libcupti's cuptiActivityGetNextRecord, for the C writer."""
        address = ctypes.cast(self.lib.cuptiActivityGetNextRecord, ctypes.c_void_p).value
        if not address:
            raise TypeError("cuptiActivityGetNextRecord has no C address")
        return address

    def _set_flag(self, attribute, flag: int) -> str:
        """Sets a one-byte CUPTI activity attribute: "on" when CUPTI took it, or why not (an older CUPTI lacks it)."""
        size = ctypes.c_size_t(1)
        value = ctypes.c_uint8(flag)
        status = self.lib.cuptiActivitySetAttribute(int(attribute), ctypes.byref(size), ctypes.byref(value))
        return "on" if status == 0 else f"unsupported (CUPTI status {status})"

    def stop(self) -> None:
        c = self.cupti
        if self.recorder is not None:
            self.recorder.stop()
        for kind in self.enabled:
            c.activity_disable(kind)
        self.enabled = []
        c.activity_flush_all(1)  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: complete every buffer now
        self.dropped += self.dropped_now()
        self.raw += self.buffers.take()
        if self.hw_trace == "on":
            c.activity_enable_hw_trace(0)

    def refresh(self) -> None:
        """Called at optimizer steps: the interposer patches libraries the app loaded since the window opened."""
        if self.recorder is not None:
            self.recorder.refresh()

    def close(self) -> None:
        """Gives up the CUPTI callback subscription (a later backend in this process may subscribe)."""
        if self.recorder is not None:
            self.recorder.close()

    def dropped_now(self) -> int:
        count = ctypes.c_size_t(0)
        self.cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(count))
        return int(count.value)

    # -------------------------------------------------- records
    def offsets(self, raw: bytes) -> list[int]:
        """Record offsets in one copied buffer, walked by CUPTI itself (record sizes are CUPTI's business)."""
        buf = ctypes.create_string_buffer(raw, len(raw))
        base = ctypes.addressof(buf)
        record = ctypes.c_void_p(None)
        get_next = self.lib.cuptiActivityGetNextRecord
        out: list[int] = []
        while True:
            status = get_next(base, len(raw), ctypes.byref(record))
            if status == _ERROR_MAX_LIMIT_REACHED:
                return out
            if status != 0:
                raise RuntimeError(f"cuptiActivityGetNextRecord failed with CUPTI status {status}")
            out.append((record.value or 0) - base)

    def records(self) -> tuple[list[tuple[int, dict]], dict]:
        every: list[tuple[int, dict]] = []
        seen: dict[int, int] = {}
        for raw in self.raw:
            recs, kinds = cr.parse(raw, self.offsets(raw), self.layouts)
            every += recs
            for k, n in kinds.items():
                seen[k] = seen.get(k, 0) + n
        if self.recorder is not None:
            calls = self.recorder.records(os.getpid())
            every += calls
            for k, _r in calls:
                seen[k] = seen.get(k, 0) + 1
        return every, seen

    def trace(self, path: str, *, demangle_names: bool) -> tuple[str, dict]:
        """Writes the window's Kineto-style Chrome trace JSON to `path` (through a temporary file renamed into
        place) and returns (path, counts for the manifest); `convert` reads the rows from it."""
        names = Names(self.cupti, self.recorder, demangle_names)
        if self.writer is not None:
            windows = self.recorder.windows if self.recorder is not None else []
            try:
                seen, _events = self.writer.write(path, layouts=self.layouts, next_record=self.next_record(),
                                                  buffers=self.raw, windows=windows, text=names.text, pid=os.getpid())
                return path, self.counts(seen)
            except RuntimeError as exc:  # not a write error (OSError): the Python path may still save the trace
                self.writer = None
                self.trace_writer = f"Python (native trace writer failed: {exc})"
        trace, seen = self.kineto(names)
        convert.write_chrome_trace(trace, path)
        return path, self.counts(seen)

    def kineto(self, names: Names) -> tuple[dict, dict]:
        """The Python path: (Kineto-style trace as a dict, {kind: records seen})."""
        records, seen = self.records()
        trace = cr.chrome_trace(records, kernel_name=names.kernel, api_name_of=names.api, pid=os.getpid())
        return trace, seen

    def counts(self, seen: dict) -> dict:
        lost = self.recorder.lost if self.recorder is not None else 0
        return {"backend": self.name, "dropped_records": self.dropped + lost, "hw_trace": self.hw_trace,
                "per_thread_buffers": self.per_thread, "zeroed_buffers": self.zeroed_buffers,
                "api_recorder": self.api_mechanism, "api_records_lost": lost,
                "activity_kinds": [getattr(k, "name", str(k)) for k in self.kinds],
                "records": {self._kind_name(k): n for k, n in sorted(seen.items())},
                "buffers": self.buffers.requested, "buffer_bytes": self.buffers.size,
                "buffer_handling": self.buffers.mechanism,
                "completed_bytes": self.buffers.completed_bytes, "trace_writer": self.trace_writer}

    def _kind_name(self, kind: int) -> str:
        try:
            return str(getattr(self.cupti.ActivityKind(kind), "name", kind))
        except ValueError:  # a kind this cupti-python does not know: its number
            return str(kind)


class Names:
    """The text of kernel names (demangled unless asked not to), API calls and copy kinds, made once per key."""

    def __init__(self, cupti, recorder: api_recorder.Interposer | None, demangle_names: bool) -> None:
        self.cupti, self.recorder, self.demangle_names = cupti, recorder, demangle_names
        self.kernels: dict[int, str] = {}
        self.apis: dict[tuple[int, int], str] = {}

    def kernel(self, ptr: int) -> str:
        if ptr not in self.kernels:
            from madengine_rocprof.tracer.demangle import demangle

            text = ctypes.string_at(ptr).decode("utf-8", "replace") if ptr else "<unknown>"
            self.kernels[ptr] = demangle(text) if self.demangle_names else text
        return self.kernels[ptr]

    def api(self, kind: int, cbid: int) -> str:
        if (kind, cbid) not in self.apis:
            runtime = kind == cr.RUNTIME
            domain = self.cupti.CallbackDomain.RUNTIME_API if runtime else self.cupti.CallbackDomain.DRIVER_API
            try:
                self.apis[kind, cbid] = cr.api_name(str(self.cupti.get_callback_name(domain, cbid)))
            except Exception:  # noqa: BLE001 - an unknown id must not lose the record
                self.apis[kind, cbid] = f"cuda_{'runtime' if runtime else 'driver'}_cbid_{cbid}"
        return self.apis[kind, cbid]

    def text(self, table: int, key: int) -> str:
        """The JSON text of one key of the C writer's tables (cupti_json.T_*)."""
        cj = cupti_json
        if table == cj.T_COPY_ARGS:
            return cj.copy_args(key)
        if table == cj.T_KERNEL:
            name = self.kernel(key)
        elif table in (cj.T_RUNTIME, cj.T_DRIVER):
            name = self.api(cr.RUNTIME if table == cj.T_RUNTIME else cr.DRIVER, key)
        elif table == cj.T_FUNCTION:  # an interposed runtime function (a name of its own, as records() gives)
            name = (self.recorder.function(key) if self.recorder is not None else "") or self.api(cr.RUNTIME, 0)
        elif table == cj.T_COPY_NAME:
            name = cr.memcpy_name(key >> 32, (key >> 16) & 0xFFFF, key & 0xFFFF)
        elif table == cj.T_SET_NAME:
            name = cr.memset_name(key)
        else:
            raise ValueError(f"no text table {table}")
        return json.dumps(name)

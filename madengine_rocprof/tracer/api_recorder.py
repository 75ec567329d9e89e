"""An opt-in API recorder for the CUPTI backend (MADENGINE_ROCPROF_TRACER_API_RECORDER=callbacks): CUPTI's callback
API calling native code, instead of CUPTI's API activity records (the default).

CUPTI calls a C function (`native/api_recorder.c`) at the entry and exit of every call of the domain; it takes two
clock reads and writes one 32-byte record per call into a per-thread chunk. The records carry CUPTI's correlation
ids, so they join the kernel, memcpy and memset records exactly as CUPTI's own API records would (checked on an
H200: the same 68,491 calls, ids, callback ids and threads as CUPTI's records of the same window).

Why it is not the default (benchmarks/wrapper/README.md, section 0d): in a tight loop it adds half of what CUPTI's
activity records add per call (+51 against +104 ns), but in eager PyTorch CUPTI's callback dispatch alone, with a C
function that does nothing, costs more than the activity records do (+17% against +10-11% on TinyTransformer v1
B8 S128, which makes about 13,700 runtime calls per step, 11,000 of them cudaGetDevice).

The C file is compiled once per source version with the system's C compiler into a cache folder
(MADENGINE_ROCPROF_CACHE, else $XDG_CACHE_HOME/madengine-rocprof, else ~/.cache/madengine-rocprof, else a temporary
folder). Without a compiler, or when CUPTI refuses a second subscriber, the backend falls back to CUPTI's activity
records and says so in tracer_summary.json.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from madengine_rocprof.tracer.cupti_records import DRIVER, RUNTIME

SOURCE = Path(__file__).with_name("native") / "api_recorder.c"
ENV_RECORDER = "MADENGINE_ROCPROF_TRACER_API_RECORDER"
CHOICES = ("activity", "callbacks")
DOMAINS = {"driver": 1, "runtime": 2}  # CUpti_CallbackDomain
RECORD = struct.Struct("<QQIIII")  # api_record: start, end ticks; correlation, cbid, thread, domain
MIN_CALIBRATION_NS = 20_000_000  # a window shorter than this waits before its second pair: a steadier tick rate
_ERROR_MULTIPLE_SUBSCRIBERS = 39  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED


class Unavailable(RuntimeError):
    """The native recorder cannot be used here; the message says why (shown in the summary and by doctor)."""


def cache_dir() -> Path:
    if os.environ.get("MADENGINE_ROCPROF_CACHE"):
        return Path(os.environ["MADENGINE_ROCPROF_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "madengine-rocprof"
    return Path.home() / ".cache" / "madengine-rocprof"


def compiler(env=None) -> str | None:
    """The C compiler to build the recorder with: $CC, else cc, gcc or clang on PATH."""
    env = os.environ if env is None else env
    wanted = env.get("CC", "").split()
    for name in ([wanted[0]] if wanted else []) + ["cc", "gcc", "clang"]:
        path = shutil.which(name, path=env.get("PATH"))
        if path:
            return path
    return None


def build(source: Path = SOURCE, folder: Path | None = None) -> Path:
    """Path of the compiled recorder, compiling it if this source version has no build yet (raises Unavailable)."""
    if not source.is_file():  # e.g. the package runs from a zip archive
        raise Unavailable(f"the native API recorder's source is not a file here: {source}")
    key = hashlib.sha256(source.read_bytes() + os.uname().machine.encode()).hexdigest()[:16]
    name = f"api_recorder-{key}.so"
    places = [folder] if folder else [cache_dir(), Path(tempfile.gettempdir()) / f"madengine-rocprof-{os.getuid()}"]
    for place in places:
        if (place / name).exists():  # built before (or put there for a machine without a compiler)
            return place / name
    cc = compiler()
    if cc is None:
        raise Unavailable("no C compiler (cc, gcc or clang) to build the native API recorder")
    tried = []
    for place in places:
        target = place / name
        try:
            place.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".api_recorder-", suffix=".so", dir=place)
            os.close(fd)
        except OSError as exc:
            tried.append(f"{place}: {exc.strerror or exc}")
            continue
        try:
            done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-std=c11", "-D_GNU_SOURCE", "-o", tmp,
                                   str(source)], capture_output=True, text=True, timeout=120, check=False)
            if done.returncode != 0:
                raise Unavailable(f"{cc} could not build {source.name}: {done.stderr.strip()[-400:]}")
            os.replace(tmp, target)  # atomic: processes building at once each install a whole file
            return target
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise Unavailable("no writable folder for the native API recorder: " + "; ".join(tried))


def invariant_tsc(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True where the CPU's time-stamp counter ticks at one rate on every core in every power state."""
    machine = os.uname().machine
    if machine == "aarch64":
        return True  # the architected generic timer (cntvct_el0) has a fixed frequency by definition
    if machine != "x86_64":
        return False
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"constant_tsc", "nonstop_tsc"} <= flags
    except OSError:
        return False
    return False


class Window:
    """Raw records of one recording window and the line that maps its ticks to CUPTI's nanoseconds."""

    def __init__(self, raw: bytes, first: tuple[int, int], last: tuple[int, int]) -> None:
        self.raw = raw
        (t0, ns0), (t1, ns1) = first, last
        self.t0, self.ns0 = t0, ns0
        self.rate = (ns1 - ns0) / (t1 - t0) if t1 != t0 else 1.0

    def ns(self, tick: int) -> int:
        return self.ns0 + round((tick - self.t0) * self.rate)


class Recorder:
    """Subscribes the native callback to one CUPTI API domain; start()/stop() bracket a window."""

    def __init__(self, lib, domain: str, native_path: Path | None = None, *, tsc: bool | None = None) -> None:
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {', '.join(DOMAINS)}, not {domain!r}")
        self.lib = lib
        self.domain = domain
        self.native = ctypes.CDLL(str(native_path or build()))
        n = self.native
        n.api_recorder_pair.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64),
                                        ctypes.POINTER(ctypes.c_uint64)]
        n.api_recorder_pending.restype = ctypes.c_size_t
        n.api_recorder_take.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        n.api_recorder_take.restype = ctypes.c_size_t
        n.api_recorder_lost.restype = ctypes.c_uint64
        n.api_recorder_record_size.restype = ctypes.c_size_t
        if n.api_recorder_record_size() != RECORD.size:
            raise Unavailable(f"native API recorder writes {n.api_recorder_record_size()}-byte records, this module"
                              f" reads {RECORD.size}")
        self.tsc = invariant_tsc() if tsc is None else tsc
        n.api_recorder_use_tsc(1 if self.tsc else 0)
        self.callback = ctypes.cast(n.api_recorder_callback, ctypes.c_void_p)
        self.get_timestamp = ctypes.cast(lib.cuptiGetTimestamp, ctypes.c_void_p)
        self.subscriber = ctypes.c_void_p(None)
        self.windows: list[Window] = []
        self.first: tuple[int, int] | None = None

    @property
    def clock(self) -> str:
        return "time-stamp counter" if self.tsc else "CLOCK_MONOTONIC"

    def pair(self) -> tuple[int, int]:
        tick, ns = ctypes.c_uint64(), ctypes.c_uint64()
        status = self.native.api_recorder_pair(self.get_timestamp, 16, ctypes.byref(tick), ctypes.byref(ns))
        if status != 0:
            raise RuntimeError(f"cuptiGetTimestamp failed with CUPTI status {status}")
        return tick.value, ns.value

    def subscribe(self) -> None:
        if self.subscriber.value:
            return
        status = self.lib.cuptiSubscribe(ctypes.byref(self.subscriber), self.callback, None)
        if status != 0:
            self.subscriber = ctypes.c_void_p(None)
            why = " (another CUPTI subscriber is active)" if status == _ERROR_MULTIPLE_SUBSCRIBERS else ""
            raise Unavailable(f"cuptiSubscribe failed with CUPTI status {status}{why}")

    def start(self) -> None:
        self.subscribe()
        self.first = self.pair()
        status = self.lib.cuptiEnableDomain(1, self.subscriber, DOMAINS[self.domain])
        if status != 0:
            raise Unavailable(f"cuptiEnableDomain failed with CUPTI status {status}")

    def stop(self) -> None:
        self.lib.cuptiEnableDomain(0, self.subscriber, DOMAINS[self.domain])
        if self.first is None:
            return
        last = self.pair()
        if last[1] - self.first[1] < MIN_CALIBRATION_NS:
            time.sleep((MIN_CALIBRATION_NS - (last[1] - self.first[1])) / 1e9)
            last = self.pair()
        self.windows.append(Window(self.take(), self.first, last))
        self.first = None

    def take(self) -> bytes:
        pending = self.native.api_recorder_pending()
        if not pending:
            return b""
        buf = ctypes.create_string_buffer(pending * RECORD.size)
        n = self.native.api_recorder_take(buf, pending)
        return buf.raw[: n * RECORD.size]

    @property
    def lost(self) -> int:
        return int(self.native.api_recorder_lost())

    def records(self, pid: int) -> list[tuple[int, dict]]:
        """(CUpti_ActivityKind RUNTIME or DRIVER, fields) for every call recorded, as cupti_records parses them."""
        kinds = {1: DRIVER, 2: RUNTIME}
        out: list[tuple[int, dict]] = []
        for w in self.windows:
            for start, end, correlation, cbid, thread, domain in RECORD.iter_unpack(w.raw):
                out.append((kinds.get(domain, RUNTIME),
                            {"start": w.ns(start), "end": w.ns(end), "correlation_id": correlation, "cbid": cbid,
                             "process_id": pid, "thread_id": thread}))
        return out

    def close(self) -> None:
        if self.subscriber.value:
            self.lib.cuptiUnsubscribe(self.subscriber)
            self.subscriber = ctypes.c_void_p(None)


def describe(env) -> str:
    """One line for `doctor`: how a traced CUDA process would record API calls."""
    if (env.get(ENV_RECORDER) or "activity").strip().lower() != "callbacks":
        return (f"API trace recorder: CUPTI activity records (the default; {ENV_RECORDER}=callbacks selects native"
                " CUPTI callbacks, measured dearer on eager PyTorch)")
    cc = compiler(env)
    if cc is None:
        return (f"API trace recorder: CUPTI activity records ({ENV_RECORDER}=callbacks, but no C compiler builds"
                " the native recorder)")
    return f"API trace recorder: native CUPTI callbacks ({ENV_RECORDER}=callbacks; built with {cc} on first use)"

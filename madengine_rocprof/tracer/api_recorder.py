"""The native API recorder of the CUPTI backend: the libcudart interposer (`Interposer`, x86-64 Linux), the default
way --hip-trace records CUDA runtime calls (MADENGINE_ROCPROF_TRACER_API_RECORDER=interpose, or unset).

While a window is open, the GOT slots through which the loaded libraries call libcudart's cuda* functions point at
stubs in `native/api_recorder.c` that time each call with the time-stamp counter; no CUPTI callback runs on a runtime
call. A CUPTI callback on the driver's launch, copy and set calls only gives each launching call CUPTI's correlation
id (and records driver launches made outside libcudart.so, e.g. by cuBLAS, which links the runtime statically), so
every kernel joins a host call. Measured through the wrapper on eager v1 B8 S128 (benchmarks/tracer/README.md):
+17.8% per step against +27.9% with CUPTI's API activity records (=activity), on an H100.

Records are 32 bytes in per-thread chunks; Python maps their ticks to CUPTI's clock through calibration pairs. The
C file is compiled once per source version with the system's C compiler into a cache folder
(MADENGINE_ROCPROF_CACHE, else $XDG_CACHE_HOME/madengine-rocprof, else ~/.cache/madengine-rocprof, else a temporary
folder). When the interposer is unavailable, the backend falls back to CUPTI's activity records and says why in
tracer_summary.json.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from madengine_rocprof.tracer.cupti_records import DRIVER, RUNTIME, api_name

SOURCE = Path(__file__).with_name("native") / "api_recorder.c"
ENV_RECORDER = "MADENGINE_ROCPROF_TRACER_API_RECORDER"
CHOICES = ("interpose", "activity")
DEFAULT = "interpose"
CUDART = "libcudart.so"
LAUNCH_PREFIXES = ("cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset")
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


def _ours(place: Path) -> bool:
    """A folder this user owns and no one else can write. The library found there is loaded into the workload: a
    folder in the shared /tmp made by another user first could hold any code."""
    try:
        st = os.stat(place)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def build(source: Path = SOURCE, folder: Path | None = None) -> Path:
    """Path of the compiled native library (the recorder, or another C file of native/), compiling it if this source
    version has no build yet (raises Unavailable)."""
    text = read_source(source)
    key = hashlib.sha256(text + os.uname().machine.encode()).hexdigest()[:16]
    name = f"{source.stem}-{key}.so"
    places = [folder] if folder else [cache_dir(), Path(tempfile.gettempdir()) / f"madengine-rocprof-{os.getuid()}"]
    for place in places:
        # built before (or put there for a machine without a compiler); only from a folder no one else can write
        if _ours(place) and (place / name).is_file():
            return place / name
    cc = compiler()
    if cc is None:
        raise Unavailable(f"no C compiler (cc, gcc or clang) to build the native {source.stem}")
    tried = []
    for place in places:
        target = place / name
        try:
            place.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _ours(place):
                tried.append(f"{place}: not a folder of this user that only this user can write")
                continue
            fd, tmp = tempfile.mkstemp(prefix=f".{source.stem}-", suffix=".so", dir=place)
            os.close(fd)
        except OSError as exc:
            tried.append(f"{place}: {exc.strerror or exc}")
            continue
        c_file = tmp[:-3] + ".c"
        try:
            with open(c_file, "wb") as fh:  # a copy: the source may live inside the wrapper's zip archive
                fh.write(text)
            done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-std=c11", "-D_GNU_SOURCE", "-o", tmp,
                                   c_file], capture_output=True, text=True, timeout=120, check=False)
            if done.returncode != 0:
                raise Unavailable(f"{cc} could not build {source.name}: {done.stderr.strip()[-400:]}")
            os.replace(tmp, target)  # atomic: processes building at once each install a whole file
            return target
        finally:
            for left in (tmp, c_file):
                if os.path.exists(left):
                    os.unlink(left)
    raise Unavailable(f"no writable folder for the native {source.stem}: " + "; ".join(tried))


def open_built(source: Path) -> tuple[ctypes.CDLL | None, str]:
    """`source` built (once per source version) and loaded, or None and why not (no compiler, a failed build or
    load): the readers' native parts, which fall back to Python when it is None."""
    try:
        return ctypes.CDLL(str(build(source))), ""
    except (Unavailable, OSError) as exc:
        return None, str(exc) or type(exc).__name__


def load(source: Path, version_symbol: str, version: int, what: str, native_path: Path | None = None):
    """`source` built with the system's C compiler (or the library at `native_path`) and loaded, checked to be the
    version this module reads: its `version_symbol()` returns `version`. Raises Unavailable otherwise."""
    lib = ctypes.CDLL(str(native_path or build(source)))
    got = getattr(lib, version_symbol)()
    if got != version:
        raise Unavailable(f"{what} version {got}, this module reads {version}")
    return lib


def read_source(source: Path) -> bytes:
    """The C source's bytes, also from the wrapper's zip archive (madengine_rocprof_wrapper.pyz), where the package's
    files are no files on disk; raises Unavailable when it is in neither place."""
    if source.is_file():
        return source.read_bytes()
    get_data = getattr(globals().get("__loader__"), "get_data", None)
    if get_data is not None:
        try:
            return get_data(str(source))
        except OSError:
            pass
    raise Unavailable(f"the native {source.stem} source is not a file here: {source}")


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


class _Native:
    """The compiled recorder library and what both mechanisms do with it: clock pairs, windows, copying records."""

    def __init__(self, lib, native_path: Path | None, tsc: bool | None) -> None:
        self.lib = lib
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

    def _subscribe(self, callback) -> None:
        if self.subscriber.value:
            return
        status = self.lib.cuptiSubscribe(ctypes.byref(self.subscriber), callback, None)
        if status != 0:
            self.subscriber = ctypes.c_void_p(None)
            why = " (another CUPTI subscriber is active)" if status == _ERROR_MULTIPLE_SUBSCRIBERS else ""
            raise Unavailable(f"cuptiSubscribe failed with CUPTI status {status}{why}")

    def _close_window(self) -> None:
        """Takes the window's records with a second clock pair (after waiting, if the window was very short)."""
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

    def close(self) -> None:
        if self.subscriber.value:
            self.lib.cuptiUnsubscribe(self.subscriber)
            self.subscriber = ctypes.c_void_p(None)


def callback_ids(cupti, domain, prefixes: tuple[str, ...]) -> list[int]:
    """CUPTI's callback ids in `domain` (a cupti.CallbackDomain) of the functions whose names start with `prefixes`."""
    found = []
    for cbid in range(1, 2048):
        try:
            name = str(cupti.get_callback_name(domain, cbid))
        except Exception:  # noqa: BLE001 - an id CUPTI does not know
            continue
        if name.startswith(prefixes):
            found.append(cbid)
    return found


def launch_cbids(cupti) -> list[int]:
    """The driver API's callback ids of the calls that put work on the GPU (launch, graph launch, copy, set): the
    calls whose CUPTI correlation id the GPU records carry."""
    return callback_ids(cupti, cupti.CallbackDomain.DRIVER_API, LAUNCH_PREFIXES)


class Interposer(_Native):
    """The libcudart interposer (native/api_recorder.c): start() points the loaded libraries' calls into libcudart at
    recording stubs, stop() puts them back. With a CUPTI module, a callback on the driver's launch, copy and set calls
    gives the runtime call around each its correlation id, so kernels join their launch as with CUPTI's records."""

    def __init__(self, lib, cupti=None, native_path: Path | None = None, *, tsc: bool | None = None,
                 library: str | None = None) -> None:
        if os.uname().machine != "x86_64" or not sys.platform.startswith("linux"):
            raise Unavailable(f"the libcudart interposer is written for x86-64 Linux, not {os.uname().machine}")
        super().__init__(lib, native_path, tsc)
        if not self.tsc:
            raise Unavailable("the CPU's time-stamp counter is not invariant (the interposer's only clock)")
        n = self.native
        if not hasattr(n, "api_recorder_interpose") or not n.api_recorder_can_interpose():
            raise Unavailable("this build of the native recorder has no interposer")
        n.api_recorder_interpose.argtypes = [ctypes.c_char_p]
        n.api_recorder_interpose.restype = ctypes.c_long
        n.api_recorder_restore.restype = ctypes.c_long
        n.api_recorder_refresh.argtypes = [ctypes.c_char_p]
        n.api_recorder_refresh.restype = ctypes.c_long
        n.api_recorder_function.argtypes = [ctypes.c_uint32]
        n.api_recorder_function.restype = ctypes.c_char_p
        n.api_recorder_foreign_slots.restype = ctypes.c_uint64
        self.library = library or CUDART
        self.cbids = launch_cbids(cupti) if cupti is not None else []
        self.callback = ctypes.cast(n.api_recorder_launch_callback, ctypes.c_void_p)
        self.slots = 0

    def subscribe(self) -> None:
        if not self.cbids or self.subscriber.value:
            return
        self._subscribe(self.callback)
        for cbid in self.cbids:
            status = self.lib.cuptiEnableCallback(1, self.subscriber, DOMAINS["driver"], cbid)
            if status != 0:
                raise Unavailable(f"cuptiEnableCallback failed with CUPTI status {status} for driver callback {cbid}")

    def start(self) -> None:
        self.subscribe()
        self.first = self.pair()
        patched = self.native.api_recorder_interpose(self.library.encode())
        if patched == -1:
            self.first = None
            raise Unavailable(f"no {self.library}* is loaded in this process (is the CUDA runtime linked statically?)")
        if patched < 0:
            self.first = None
            raise Unavailable(f"could not write the GOT slots of {self.library} calls (status {patched})")
        self.slots = max(self.slots, patched)

    def refresh(self) -> None:
        """Patches libraries loaded since the window opened (cheap when none was)."""
        if self.first is not None:
            self.slots += max(0, self.native.api_recorder_refresh(self.library.encode()))

    def stop(self) -> None:
        self.native.api_recorder_restore()
        self._close_window()

    @property
    def foreign_slots(self) -> int:
        """GOT slots that held something other than libcudart's function (another interposer): left alone."""
        return int(self.native.api_recorder_foreign_slots())

    def function(self, index: int) -> str:
        """The API name of interposed function `index` (api_record.function)."""
        return function_name(self.native.api_recorder_function(index), index)

    def records(self, pid: int) -> list[tuple[int, dict]]:
        """RUNTIME records, named by the function; calls that put no work on the GPU get correlation ids above
        CUPTI's 32-bit range, so every row keeps a unique id as in rocprofv3."""
        names: dict[int, str] = {}
        out: list[tuple[int, dict]] = []
        spare = 1 << 32
        for w in self.windows:
            for start, end, correlation, func, thread, domain in RECORD.iter_unpack(w.raw):
                fields = {"start": w.ns(start), "end": w.ns(end), "correlation_id": correlation, "cbid": func,
                          "process_id": pid, "thread_id": thread}
                if domain == DOMAINS["driver"]:  # a driver launch/copy/set outside libcudart.so (cbid: CUPTI's)
                    out.append((DRIVER, fields))
                    continue
                if func not in names:
                    names[func] = self.function(func)
                if not correlation:
                    fields["correlation_id"], spare = spare, spare + 1
                out.append((RUNTIME, {**fields, "cbid": 0, "name": names[func]}))
        return out


def function_name(symbol: bytes | None, index: int) -> str:
    """The API name of an interposed symbol: nvcc's launch stubs call `__cudaLaunchKernel`, which CUPTI and the
    CUDA documentation call cudaLaunchKernel; a version suffix goes as in CUPTI's names."""
    if not symbol:
        return f"cuda_function_{index}"
    return api_name(symbol.decode().lstrip("_"))


def describe(env) -> str:
    """One line for `doctor`: how a traced CUDA process would record API calls."""
    choice = (env.get(ENV_RECORDER) or DEFAULT).strip().lower()
    if choice != "interpose":
        return (f"API trace recorder: CUPTI activity records ({ENV_RECORDER}={choice}; unset or =interpose selects"
                " the libcudart interposer, the default)")
    cc = compiler(env)
    if cc is None:
        return ("API trace recorder: CUPTI activity records (the libcudart interposer is the default, but no C"
                " compiler builds it)")
    if os.uname().machine != "x86_64":
        return (f"API trace recorder: CUPTI activity records (the libcudart interposer is written for x86-64, not"
                f" {os.uname().machine})")
    return (f"API trace recorder: libcudart interposer (the default; built with {cc} on first use; falls back to"
            f" CUPTI activity records where libcudart is not a shared library; {ENV_RECORDER}=activity selects"
            " CUPTI's records)")

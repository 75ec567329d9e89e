"""The CUPTI backend's libcudart interposer (MADENGINE_ROCPROF_TRACER_API_RECORDER=interpose), on CPU.

A fake `libcudart.so.13` and two application libraries that call it through their GOT are built with the machine's
compiler: one plainly (lazy binding: JUMP_SLOT relocations in a writable .got.plt) and one with -fno-plt and full
RELRO (GLOB_DAT relocations in a read-only GOT: the interposer has to mprotect around its writes). The fake's
cudaLaunchKernel calls back into Python, which plays the CUDA driver: a cuLaunchKernel through the fake CUPTI's
callback API (fakes/fake_cupti.py) and the kernel's activity record. What the tests check: arguments and results
pass through unchanged; every call of a window comes back once, named, on its thread, inside its own time span;
nothing is recorded outside windows and the GOT slots get their original values back; threads and full chunks lose
nothing; kernels join their cudaLaunchKernel (or __cudaLaunchKernel) through CUPTI's correlation id, or the driver
call that launched them outside libcudart, also in the rocprofv3 CSV files; a library loaded during a window is
patched at the next refresh(); and every way the interposer can be unavailable falls back to CUPTI's activity
records and says why.
"""
from __future__ import annotations

import collections
import csv
import ctypes
import json
import os
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from madengine_rocprof.tracer import api_recorder, convert, cupti_backend

from .fakes import fake_cupti
from .test_wrapper_cupti import _traced, kernel, written

pytestmark = pytest.mark.skipif(os.uname().machine != "x86_64" or api_recorder.compiler() is None,
                                reason="the interposer is x86-64 only and needs a C compiler (scripts/setup.sh)")
RUNTIME, DRIVER = fake_cupti.CallbackDomain.RUNTIME_API, fake_cupti.CallbackDomain.DRIVER_API
LAUNCH_CBIDS = {(int(DRIVER), 279), (int(DRIVER), 307), (int(DRIVER), 442)}  # the fake's cuMemcpy*/cuLaunch* ids
GLOB_DAT, JUMP_SLOT = 6, 7  # R_X86_64_*
CUDART_NAME, LAZY, NOW = "libcudart.so.13", "libapp_lazy.so", "libapp_now.so"

CUDART_C = r"""
#include <execinfo.h>
#include <stdint.h>
typedef struct { int x, y, z; } dim3;
typedef struct { long lo, hi; } two;
int cudaGetDevice(int *device) { *device = 7; return 0; }
int cudaGetLastError(void) { return 3; }
double cudaMany(long a, long b, long c, long d, long e, long f, long g, long h, double x, double y) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + x * y;
}
long cudaStructs(dim3 grid, dim3 block, void **args, unsigned long shared, void *stream) {
    *args = stream;
    return grid.x + grid.y * 10L + grid.z * 100L + block.x * 1000L + block.y * 10000L + block.z * 100000L
           + (long)shared * 1000000L;
}
two cudaTwo(long x) { two t = {x * 3, x * 5}; return t; }
typedef struct { long ptr, pitch, xsize, ysize; } pitched;  /* like cudaPitchedPtr and cudaExtent: by value, */
typedef struct { long width, height, depth; } extent;        /* 56 bytes on the stack, as cudaMemset3D takes them */
long cudaPitched(pitched p, int value, extent e, long stream) {
    return p.ptr + 2 * p.pitch + 3 * p.xsize + 4 * p.ysize + 5L * value + 6 * e.width + 7 * e.height + 8 * e.depth
           + 9 * stream;
}
int cudaNested(int (*f)(void)) { return f() + 1; }
int cudaFrames(void) { void *frames[512]; return backtrace(frames, 512); }  /* how deep the unwinder sees */
static int (*hook)(int);
void fake_set_hook(int (*h)(int)) { hook = h; }
int cudaLaunchKernel(int cbid) { return hook ? hook(cbid) : -1; }
int __cudaLaunchKernel(int cbid) { return hook ? hook(cbid) : -1; }  /* what nvcc's launch stubs call */
int __cudaRegisterFunction(int x) { return x + 1; }  /* an internal: not interposed, as CUPTI does not show it */
"""

APP_C = r"""
typedef struct { int x, y, z; } dim3;
typedef struct { long lo, hi; } two;
int cudaGetDevice(int *);
int cudaGetLastError(void);
double cudaMany(long, long, long, long, long, long, long, long, double, double);
long cudaStructs(dim3, dim3, void **, unsigned long, void *);
two cudaTwo(long);
typedef struct { long ptr, pitch, xsize, ysize; } pitched;
typedef struct { long width, height, depth; } extent;
long cudaPitched(pitched, int, extent, long);
int cudaNested(int (*)(void));
int cudaFrames(void);
int cudaLaunchKernel(int);
int __cudaLaunchKernel(int);
int __cudaRegisterFunction(int);
int app_get_device(void) { int d = -1; int s = cudaGetDevice(&d); return s * 100 + d; }
long app_loop(long n) { long t = 0; for (long i = 0; i < n; i++) t += cudaGetLastError(); return t; }
double app_many(long a, double x, double y) {  /* a + 6 and a + 7 go on the stack */
    return cudaMany(a, a + 1, a + 2, a + 3, a + 4, a + 5, a + 6, a + 7, x, y);
}
long app_structs(long stream) {
    void *out = 0;
    dim3 g = {1, 2, 3}, b = {4, 5, 6};
    long r = cudaStructs(g, b, &out, 7, (void *)stream);  /* `stream` is the 7th integer word: on the stack */
    return (long)out == stream ? r : -1;
}
long app_two(long x) { two t = cudaTwo(x); return t.lo * 1000 + t.hi; }  /* returned in rax:rdx */
long app_pitched(long k) {
    pitched p = {k, k + 1, k + 2, k + 3};
    extent e = {k + 4, k + 5, k + 6};
    return cudaPitched(p, 9, e, k + 7);
}
static int inner(void) { return cudaGetLastError(); }  /* called back from inside cudaNested */
int app_nested(void) { return cudaNested(inner); }
int app_frames(void) { return cudaFrames(); }
int app_launch(int cbid) { return cudaLaunchKernel(cbid); }
int app_stub_launch(int cbid) { return __cudaLaunchKernel(cbid); }
int app_register(int x) { return __cudaRegisterFunction(x); }
"""


def many(a: int, x: float, y: float) -> float:
    return sum((k + 1) * (a + k) for k in range(8)) + x * y


def pitched(k: int) -> int:
    return sum(w * v for w, v in enumerate([k, k + 1, k + 2, k + 3, 9, k + 4, k + 5, k + 6, k + 7], start=1))


# What each app function returns, with the arguments call_all passes; and the runtime calls recorded of them.
EXPECTED = (7, many(11, 1.5, -2.25), 7654321, 21035, 4, 12, 42, pitched(100))
CALLS = {"cudaGetDevice": 1, "cudaMany": 1, "cudaStructs": 1, "cudaTwo": 1, "cudaNested": 1, "cudaGetLastError": 5,
         "cudaPitched": 1}
# The libcudart symbols the apps import: all but __cudaRegisterFunction are interposed.
IMPORTED = set(CALLS) | {"cudaLaunchKernel", "__cudaLaunchKernel", "__cudaRegisterFunction", "cudaFrames"}
INTERPOSED = IMPORTED - {"__cudaRegisterFunction"}


def call_all(lib) -> tuple:
    return (lib.app_get_device(), lib.app_many(11, 1.5, -2.25), lib.app_structs(0x5150), lib.app_two(7),
            lib.app_nested(), lib.app_loop(4), lib.app_register(41), lib.app_pitched(100))


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
def _driver_call(cbid: int) -> int:
    """The fake cudaLaunchKernel's driver call: CUPTI's callbacks around it, and the kernel it launches."""
    return fake_cupti.api_call(DRIVER, cbid, launch_kernel if cbid in (307, 442) else None)


def _compile(source: str, target: Path, *flags: str) -> Path:
    src = target.parent / f"{target.name}.c"
    src.write_text(source)
    cc = api_recorder.compiler()
    assert cc is not None
    done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(target), str(src), *flags], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    return target


def _app(folder: Path, target: Path, *flags: str) -> Path:
    """An application library linked against the fake libcudart, found at run time through its rpath."""
    return _compile(APP_C, target, str(folder / CUDART_NAME), f"-Wl,-rpath,{folder}", *flags)


_DL = ctypes.CDLL(None)
_DL.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
_DL.dlopen.restype = ctypes.c_void_p


def _load_app(path: Path):
    """ctypes.CDLL binds every symbol at load (RTLD_NOW): dlopen with RTLD_LAZY leaves a lazy build's slots unbound."""
    handle = _DL.dlopen(str(path).encode(), os.RTLD_LAZY)
    assert handle, path
    lib = ctypes.CDLL(str(path), handle=handle)
    lib.app_loop.argtypes = [ctypes.c_long]
    lib.app_loop.restype = ctypes.c_long
    lib.app_many.argtypes = [ctypes.c_long, ctypes.c_double, ctypes.c_double]
    lib.app_many.restype = ctypes.c_double
    lib.app_structs.argtypes = [ctypes.c_long]
    lib.app_structs.restype = ctypes.c_long
    lib.app_two.argtypes = [ctypes.c_long]
    lib.app_two.restype = ctypes.c_long
    lib.app_pitched.argtypes = [ctypes.c_long]
    lib.app_pitched.restype = ctypes.c_long
    lib.app_launch.argtypes = [ctypes.c_int]
    lib.app_stub_launch.argtypes = [ctypes.c_int]
    lib.app_register.argtypes = [ctypes.c_int]
    return lib


class Libs:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cudart = ctypes.CDLL(str(folder / CUDART_NAME))
        self.cudart.fake_set_hook(_driver_call)
        self.lazy = _load_app(folder / LAZY)
        self.now = _load_app(folder / NOW)



def backends(native: Path, choice: str):
    """Body of a `backend` fixture: make(**options) -> a CuptiBackend on the fake CUPTI with this native recorder
    and API recorder choice; afterwards an open window is closed (an interposer puts the GOT back) and every backend
    gives up its CUPTI subscription."""
    made = []

    def make(**options):
        fake_cupti.reset()
        options.setdefault("api_recorder_choice", choice)
        b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=fake_cupti.FakeLib(), native_recorder=str(native),
                                       **options)
        made.append(b)
        return b
    yield make
    for b in made:
        if b.recorder is not None and b.recorder.first is not None:  # a test failed inside a window
            b.stop()
        b.close()


def launch_kernel(corr: int) -> None:
    fake_cupti.record(10, **kernel(corr, time.monotonic_ns()))


def api_rows(trace: dict, cat: str = "cuda_runtime") -> list[dict]:
    """The trace's API events in start order (the JSON holds them in record order: a call is recorded when it
    returns, so a nested call comes before the call around it; the CSV rows are sorted)."""
    return sorted((e for e in trace["traceEvents"] if e.get("cat") == cat), key=lambda e: e["ts"])


def trace_rows(out: Path) -> tuple[list[dict], list[dict]]:
    """(API rows, kernel rows) of the rocprofv3 CSV files the runtime wrote for this process under `out`."""
    tables = []
    for name in ("hip_api_trace", "kernel_trace"):
        with open(out / socket.gethostname() / f"{os.getpid()}_{name}.csv", newline="") as fh:
            tables.append(list(csv.DictReader(fh)))
    return tables[0], tables[1]

@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    return api_recorder.build(folder=tmp_path_factory.mktemp("native"))


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> Libs:
    folder = tmp_path_factory.mktemp("cudart").resolve()
    _compile(CUDART_C, folder / CUDART_NAME, f"-Wl,-soname,{CUDART_NAME}")
    _app(folder, folder / LAZY, "-Wl,-z,lazy")
    _app(folder, folder / NOW, "-fno-plt", "-Wl,-z,now", "-Wl,-z,relro")
    return Libs(folder)


@pytest.fixture
def backend(native, libs):
    yield from backends(native, "interpose")


# ------------------------------------------------------------------ GOT slots, read from the ELF file and memory
def got_relocations(path: Path) -> dict[tuple[str, int], int]:
    """(symbol, slot offset) -> relocation type of every JUMP_SLOT/GLOB_DAT relocation of a (__)cuda* symbol."""
    data = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # Elf64_Shdr: name, type, flags, addr, offset, size, link, info, addralign, entsize
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
    found = {}
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, _entsize in sections:
        if kind != 4:  # SHT_RELA
            continue
        symtab, strtab = sections[link], sections[sections[link][6]]
        for k in range(size // 24):
            r_offset, r_info, _addend = struct.unpack_from("<QQq", data, offset + 24 * k)
            if r_info & 0xFFFFFFFF not in (GLOB_DAT, JUMP_SLOT):
                continue
            (st_name,) = struct.unpack_from("<I", data, symtab[4] + 24 * (r_info >> 32))
            start = strtab[4] + st_name
            name = data[start:data.index(b"\0", start)].decode()
            if name.lstrip("_").startswith("cuda"):
                found[name, r_offset] = r_info & 0xFFFFFFFF
    return found


def mappings() -> list[tuple[int, int, int, str, str]]:
    """(start, end, file offset, permissions, path) of every mapping of this process."""
    out = []
    with open("/proc/self/maps", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            out.append((lo, hi, int(fields[2], 16), fields[1], fields[5].strip() if len(fields) > 5 else ""))
    return out


def mapping_of(address: int) -> tuple[str, str]:
    """(permissions, path) of the mapping holding an address."""
    return next((perms, path) for lo, hi, _off, perms, path in mappings() if lo <= address < hi)


def slot_addresses(path: Path) -> dict[str, int]:
    base = next(lo for lo, _hi, off, _perms, where in mappings() if where == str(path) and off == 0)
    return {name: base + offset for name, offset in got_relocations(path)}


def read_slots(path: Path) -> dict[str, int]:
    return {name: ctypes.c_void_p.from_address(at).value or 0 for name, at in slot_addresses(path).items()}


def span(trace: dict, e: dict) -> tuple[int, int]:
    base = trace["baseTimeNanoseconds"]
    return base + round(e["ts"] * 1000), base + round((e["ts"] + e["dur"]) * 1000)


def names_by_thread(b) -> dict[int, collections.Counter]:
    out: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for _kind, r in b.recorder.records(os.getpid()):
        out[r["thread_id"]][r["name"]] += 1
    return out


# ------------------------------------------------------------------ the tests
def test_arguments_and_results_pass_through_unchanged(backend, libs):
    before = [call_all(lib) for lib in (libs.lazy, libs.now)]
    b = backend()
    b.start()
    assert b.api_mechanism == "libcudart interposer (time-stamp counter)"
    during = [call_all(lib) for lib in (libs.lazy, libs.now)]
    b.stop()
    after = [call_all(lib) for lib in (libs.lazy, libs.now)]
    assert before == during == after == [EXPECTED, EXPECTED]
    # the calls did go through the stubs: each came back, from both libraries
    assert names_by_thread(b) == {threading.get_native_id(): collections.Counter({k: 2 * n for k, n in CALLS.items()})}


def test_an_unwinder_walks_through_the_stub_to_the_caller(backend, libs):
    outside = libs.now.app_frames()
    b = backend()
    b.start()
    inside = libs.now.app_frames()
    b.stop()
    assert outside > 5 and inside == outside + 1  # the stub's own frame, then every frame up to the top


def test_every_call_comes_back_once_named_on_its_thread_inside_its_span(backend, libs):
    b = backend()
    b.start()
    lib = libs.now
    spans = []
    for names, call in [(["cudaGetDevice"], lib.app_get_device), (["cudaMany"], lambda: lib.app_many(1, 2.0, 3.0)),
                        (["cudaStructs"], lambda: lib.app_structs(9)), (["cudaTwo"], lambda: libs.lazy.app_two(1)),
                        (["cudaNested", "cudaGetLastError"], libs.lazy.app_nested),
                        (["cudaLaunchKernel"], lambda: lib.app_launch(307)),
                        (["cudaLaunchKernel"], lambda: libs.lazy.app_stub_launch(442)),  # __cudaLaunchKernel
                        (["cudaGetLastError"] * 2, lambda: lib.app_loop(2))]:
        before = time.monotonic_ns()
        call()
        spans.append((names, before, time.monotonic_ns()))
    b.stop()
    trace, counts = written(b, demangle_names=False)
    rows = api_rows(trace)
    assert len(rows) == sum(1 for e in trace["traceEvents"] if e["cat"] != "kernel")  # all API rows are runtime rows
    assert [e["name"] for e in rows] == [name for names, _b, _a in spans for name in names]
    assert {(e["pid"], e["tid"]) for e in rows} == {(os.getpid(), threading.get_native_id())}
    rows_of_calls = iter(rows)
    for names, before, after in spans:
        for _name in names:
            start, end = span(trace, next(rows_of_calls))
            assert before - 20_000 <= start <= end <= after + 20_000  # to the calibration's precision
    outer, inner = (span(trace, e) for e in rows[4:6])
    assert outer[0] <= inner[0] <= inner[1] <= outer[1]  # the call back into libcudart lies inside cudaNested
    assert counts["records"] == {"CONCURRENT_KERNEL": 2, "RUNTIME": 10} and counts["api_records_lost"] == 0
    assert counts["activity_kinds"] == ["CONCURRENT_KERNEL", "MEMCPY", "MEMSET"]


def test_nothing_is_recorded_outside_windows(backend, libs):
    b = backend()
    libs.lazy.app_loop(5)
    libs.now.app_loop(5)
    b.start()
    libs.lazy.app_get_device()
    b.stop()
    libs.lazy.app_loop(6)  # between windows
    libs.now.app_nested()
    fake_cupti.api_call(DRIVER, 307)  # CUPTI still calls back between windows: not recorded either
    b.start()
    libs.now.app_two(7)
    inside = fake_cupti.api_call(DRIVER, 279)
    b.stop()
    libs.lazy.app_loop(7)  # after the last
    libs.now.app_get_device()
    fake_cupti.api_call(DRIVER, 442)
    assert b.recorder is not None and b.recorder.native.api_recorder_pending() == 0  # no stub on these paths
    trace, counts = written(b, demangle_names=False)
    assert [e["name"] for e in api_rows(trace)] == ["cudaGetDevice", "cudaTwo"]
    assert [e["args"]["correlation"] for e in api_rows(trace, "cuda_driver")] == [inside]
    assert counts["records"] == {"DRIVER": 1, "RUNTIME": 2}


def test_a_driver_call_that_straddles_a_windows_opening_is_not_recorded(backend, libs):
    b = backend()
    b.start()  # subscribes
    b.stop()
    fake_cupti.api_call(DRIVER, 307, lambda _corr: b.start())  # entered before the window, left inside it
    inside = fake_cupti.api_call(DRIVER, 307)
    libs.now.app_get_device()
    b.stop()
    trace, _counts = written(b, demangle_names=False)
    assert [e["args"]["correlation"] for e in api_rows(trace, "cuda_driver")] == [inside]
    assert all(r["start"] > 0 and r["end"] >= r["start"] for _k, r in b.records()[0])


def test_both_builds_are_patched_and_put_back(backend, libs, native, tmp_path):
    fresh = _app(libs.folder, tmp_path.resolve() / LAZY, "-Wl,-z,lazy")  # nothing called yet: unbound slots
    _load_app(fresh)
    lazy, now = libs.folder / LAZY, libs.folder / NOW
    assert set(got_relocations(lazy).values()) == {JUMP_SLOT}  # the builds exercise both kinds of slot
    assert set(got_relocations(now).values()) == {GLOB_DAT}
    assert set(read_slots(lazy)) == set(read_slots(now)) == set(read_slots(fresh)) == IMPORTED
    assert {mapping_of(value)[1] for value in read_slots(fresh).values()} == {str(fresh)}  # its own PLT
    relro = slot_addresses(now)
    assert all("w" not in mapping_of(at)[0] for at in relro.values())  # full RELRO: the GOT is read-only
    before = {path: read_slots(path) for path in (lazy, now, fresh)}
    b = backend()
    b.start()
    assert b.recorder is not None and b.recorder.slots >= 3 * len(INTERPOSED)
    for path in (lazy, now, fresh):
        for name, value in read_slots(path).items():
            if name in INTERPOSED:
                assert value != before[path][name]
                assert mapping_of(value)[1] == str(native.resolve()), name  # a stub of the recorder
            else:
                assert value == before[path][name], name
    assert all("w" not in mapping_of(at)[0] for at in relro.values())  # written, and read-only again
    libs.lazy.app_get_device()
    libs.now.app_get_device()
    b.stop()
    assert {path: read_slots(path) for path in (lazy, now, fresh)} == before
    assert all("w" not in mapping_of(at)[0] for at in relro.values())
    assert call_all(_load_app(fresh)) == EXPECTED  # the restored lazy slots still bind
    trace, _ = written(b, demangle_names=False)
    assert [e["name"] for e in api_rows(trace)] == ["cudaGetDevice", "cudaGetDevice"]
    assert b.recorder.foreign_slots == 0


def test_threads_lose_nothing_and_keep_their_own_ids(backend, libs):
    n = 70_000  # more than a chunk per thread: chunks are pushed while other threads push theirs
    b = backend()
    b.start()
    results: dict[int, tuple] = {}

    def worker(lib):
        # the thread's first recorded call makes its state (the stub saves every argument register around that)
        results[threading.get_native_id()] = (lib.app_many(3, 0.5, 8.0), lib.app_loop(n))

    threads = [threading.Thread(target=worker, args=(lib,)) for lib in (libs.lazy, libs.now, libs.lazy, libs.now)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    b.stop()
    assert len(results) == 4 and set(results.values()) == {(many(3, 0.5, 8.0), 3 * n)}
    expected = collections.Counter({"cudaMany": 1, "cudaGetLastError": n})
    assert names_by_thread(b) == {tid: expected for tid in results}
    _trace, counts = written(b, demangle_names=False)
    assert counts["api_records_lost"] == 0 and counts["dropped_records"] == 0


def test_full_chunks_come_back_whole_and_are_freed(backend, libs):
    n = 65_536 + 1_000
    b = backend()
    b.start()
    assert libs.now.app_loop(n) == 3 * n  # results survive the exit stub's call for a fresh chunk
    assert b.recorder is not None
    chunks = b.recorder.native.api_recorder_chunks()
    b.stop()
    assert b.recorder.native.api_recorder_chunks() < chunks  # the copied full chunk was freed
    assert b.recorder.native.api_recorder_pending() == 0
    assert names_by_thread(b) == {threading.get_native_id(): collections.Counter({"cudaGetLastError": n})}
    assert b.recorder.lost == 0


def test_kernels_join_their_launch_through_cuptis_correlation_id(backend, libs):
    b = backend()
    b.start()
    assert fake_cupti.STATE.cbids == LAUNCH_CBIDS  # launch, copy and set driver calls only
    assert fake_cupti.STATE.domains == set()  # no whole domain: the runtime's calls cost CUPTI nothing
    assert fake_cupti.STATE.enabled == {10, 1, 2}  # no RUNTIME (5) activity records
    launched = [libs.lazy.app_launch(307), libs.now.app_launch(442), libs.lazy.app_stub_launch(307)]
    copied = libs.now.app_launch(279)  # a copy: its correlation id too goes to the runtime call around it
    libs.now.app_launch(17)  # a driver call CUPTI does not call back for: no id to hand over
    libs.lazy.app_get_device()
    direct = fake_cupti.api_call(DRIVER, 307, launch_kernel)  # outside libcudart (a statically linked runtime)
    fake_cupti.api_call(DRIVER, 17)  # not a launch, copy or set: CUPTI does not call back
    libs.now.app_nested()
    b.stop()
    trace, _ = written(b, demangle_names=False)
    rows = api_rows(trace)
    assert [e["name"] for e in rows] == ["cudaLaunchKernel"] * 5 + ["cudaGetDevice", "cudaNested", "cudaGetLastError"]
    ids = [e["args"]["correlation"] for e in rows]
    assert ids[:4] == [*launched, copied] and all(0 < c < 2**32 for c in ids[:4])
    spare = ids[4:]
    assert all(c >= 2**32 for c in spare) and len(set(spare)) == len(spare)  # no GPU work: unique ids above CUPTI's
    tid = threading.get_native_id()
    # the driver calls inside a runtime call gave it their id; the one outside is a row of its own
    assert [(e["name"], e["args"]["correlation"], e["args"]["cbid"], e["pid"], e["tid"])
            for e in api_rows(trace, "cuda_driver")] == [("cuLaunchKernel", direct, 307, os.getpid(), tid)]
    kernels = convert.kernel_rows(trace)
    assert [r[8] for r in kernels] == [*launched, direct]
    assert [r[4] for r in kernels] == [tid] * 4  # each joined to the thread that launched it


def test_runtime_writes_joined_csv_files(monkeypatch, tmp_path, native, libs):
    (tmp_path / "lib").mkdir()
    late_path = _app(libs.folder, tmp_path.resolve() / "lib" / "libapp_step.so")
    monkeypatch.setenv("MADENGINE_ROCPROF_CACHE", str(native.parent))  # the module's build, no compile here
    t, _torch = _traced(monkeypatch, tmp_path, MADENGINE_ROCPROF_TRACER_API="1",
                        MADENGINE_ROCPROF_TRACER_API_RECORDER="interpose")
    try:
        corrs = [libs.lazy.app_launch(307)]
        late = _load_app(late_path)  # e.g. an extension module imported during the window
        late.app_get_device()  # not patched yet
        t._after_step()  # an optimizer step: the interposer patches what was loaded since
        corrs.append(late.app_launch(307))
        libs.now.app_get_device()
        corrs.append(libs.now.app_launch(442))
        t.finish()
    finally:
        t.prof.close()
    api, kernels = trace_rows(tmp_path)
    host, pid = tmp_path / socket.gethostname(), os.getpid()
    assert [r["Function"] for r in api] == ["cudaLaunchKernel", "cudaLaunchKernel", "cudaGetDevice",
                                            "cudaLaunchKernel"]
    assert {r["Domain"] for r in api} == {"CUDA_RUNTIME_API"}
    launches = {int(r["Correlation_Id"]): r for r in api if r["Function"] == "cudaLaunchKernel"}
    assert sorted(launches) == sorted(corrs)
    assert [int(r["Correlation_Id"]) for r in kernels] == corrs
    assert {r["Thread_Id"] for r in kernels} == {str(threading.get_native_id())}
    for r in kernels:  # each kernel starts after its launch call did, to the calibration's precision
        assert int(launches[int(r["Correlation_Id"])]["Start_Timestamp"]) - 20_000 <= int(r["Start_Timestamp"])
    summary = json.loads((host / f"{pid}_tracer_summary.json").read_text())
    assert summary["api_recorder"].startswith("libcudart interposer") and summary["dropped_records"] == 0


def test_refresh_patches_libraries_loaded_during_the_window(backend, libs, tmp_path):
    late_path = _app(libs.folder, tmp_path.resolve() / "libapp_late.so", "-Wl,-z,lazy")  # a writable .got.plt
    b = backend()
    b.start()
    assert b.recorder is not None
    slots = b.recorder.slots
    late = _load_app(late_path)
    assert late.app_get_device() == 7  # loaded after start(): not patched yet
    unbound = read_slots(late_path)["cudaGetLastError"]
    assert mapping_of(unbound)[1] == str(late_path)  # lazy binding: the library's own PLT
    b.refresh()
    assert b.recorder.slots == slots + len(INTERPOSED)
    assert late.app_loop(3) == 9
    # Nothing loaded since: refresh only compares the loader's count. A slot put back by hand stays put back.
    at = slot_addresses(late_path)["cudaGetDevice"]
    real = ctypes.cast(libs.cudart.cudaGetDevice, ctypes.c_void_p).value
    ctypes.c_void_p.from_address(at).value = real
    seen = {path: read_slots(path) for path in (late_path, libs.folder / LAZY, libs.folder / NOW)}
    assert b.recorder.native.api_recorder_refresh(b"libcudart.so") == 0
    b.refresh()
    assert {path: read_slots(path) for path in seen} == seen and b.recorder.slots == slots + len(INTERPOSED)
    assert late.app_get_device() == 7  # through the slot put back: not recorded
    b.stop()
    assert read_slots(late_path)["cudaGetLastError"] == unbound  # put back at stop
    trace, _ = written(b, demangle_names=False)
    assert [e["name"] for e in api_rows(trace)] == ["cudaGetLastError"] * 3


@pytest.mark.parametrize("case", ["no-libcudart", "driver-domain", "variable-tsc", "subscriber-taken"])
def test_unavailable_interposer_falls_back_to_activity_records(backend, libs, monkeypatch, case):
    options: dict = {}
    if case == "no-libcudart":
        monkeypatch.setattr(api_recorder, "CUDART", "libnotloaded.so")
        why = "interpose, but no libnotloaded.so* is loaded in this process"
    elif case == "driver-domain":
        options["api_domain"] = "driver"
        why = "interpose records runtime calls only"
    elif case == "variable-tsc":
        monkeypatch.setattr(api_recorder, "invariant_tsc", lambda cpuinfo="": False)
        why = "interpose, but the CPU's time-stamp counter is not invariant"
    else:
        why = "interpose, but cuptiSubscribe failed with CUPTI status 39 (another CUPTI subscriber is active)"
    b = backend(**options)
    if case == "subscriber-taken":
        fake_cupti.STATE.subscriber = object()  # e.g. the application's own profiler holds CUPTI's callbacks
    before = {path: read_slots(libs.folder / path) for path in (LAZY, NOW)}
    b.start()
    assert b.recorder is None and b.api_mechanism.startswith("CUPTI activity records")
    assert len(b.warnings) == 1 and why in b.warnings[0]
    assert {path: read_slots(libs.folder / path) for path in (LAZY, NOW)} == before  # nothing patched
    domain, cbid, name = (DRIVER, 307, "cuLaunchKernel") if case == "driver-domain" else (RUNTIME, 17, "cudaGetDevice")
    assert fake_cupti.STATE.enabled == {10, 1, 2, 4 if domain == DRIVER else 5}
    if case == "subscriber-taken":
        fake_cupti.STATE.subscriber = None
    else:
        assert fake_cupti.STATE.subscriber is None and fake_cupti.STATE.cbids == set()  # given back
    libs.lazy.app_get_device()  # not interposed: only CUPTI's record of the call below comes back
    corr = fake_cupti.api_call(domain, cbid)
    b.stop()
    trace, counts = written(b, demangle_names=False)
    rows = [e for e in trace["traceEvents"] if e["cat"] in ("cuda_runtime", "cuda_driver")]
    category = "cuda_driver" if domain == DRIVER else "cuda_runtime"
    assert [(e["cat"], e["name"], e["args"]["correlation"]) for e in rows] == [(category, name, corr)]
    assert counts["api_recorder"].startswith("CUPTI activity records")


def test_doctor_names_the_interposer_as_the_default():
    for env in ({api_recorder.ENV_RECORDER: "interpose", "PATH": os.environ["PATH"]}, {"PATH": os.environ["PATH"]}):
        assert api_recorder.describe(env).startswith("API trace recorder: libcudart interposer (the default; built"
                                                     " with")
        env["PATH"] = ""
        assert api_recorder.describe(env) == ("API trace recorder: CUPTI activity records (the libcudart interposer"
                                              " is the default, but no C compiler builds it)")
    assert api_recorder.describe({api_recorder.ENV_RECORDER: "activity"}).startswith(
        f"API trace recorder: CUPTI activity records ({api_recorder.ENV_RECORDER}=activity;")

"""Itanium C++ name demangling through the C++ runtime's own `__cxa_demangle` (what rocprofv3 and Kineto use).

CUPTI reports kernel names mangled (`_ZN2at6native...`); rocprofv3 prints them demangled unless --mangled-kernels.
Standard library only (ctypes); a name that does not demangle, or a system without libstdc++, keeps its spelling.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.lru_cache(maxsize=1)
def _runtime():
    """(__cxa_demangle, free) or None."""
    for name in ("libstdc++.so.6", ctypes.util.find_library("stdc++"), "libc++.so.1"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            fn = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        libc = ctypes.CDLL(None)
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free.restype = None
        return fn, libc.free
    return None


def available() -> bool:
    return _runtime() is not None


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """`_Z...` -> its C++ declaration; anything else (plain C names, failures) unchanged."""
    if not name.startswith("_Z"):
        return name
    runtime = _runtime()
    if runtime is None:
        return name
    fn, free = runtime
    status = ctypes.c_int(0)
    ptr = fn(name.encode("utf-8", "surrogateescape"), None, None, ctypes.byref(status))
    if not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace") if status.value == 0 else name
    finally:
        free(ptr)

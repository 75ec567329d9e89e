"""Diagnostic variants of the native API recorder, for overhead_alternating.py: where does a callback's cost go?

- `null`: CUPTI calls a C function that returns at once, for every runtime call (CUPTI's own dispatch cost).
- `no_launch`: the recorder on every runtime call except the kernel launches (cudaLaunch*), whose callbacks CUPTI
  fills with the kernel's symbol name.
- `launch_only`: the recorder on the kernel launches only.
Each patches api_recorder.Recorder in this process only (one variant per process).
"""
from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

NULL_CALLBACK = "void null_callback(void *u, int d, unsigned c, const void *p) {(void)u; (void)d; (void)c; (void)p;}"
MODES = ("null", "no_launch", "launch_only")


def launch_cbids(cupti) -> list[int]:
    """The runtime API's kernel launch calls (cudaLaunch*)."""
    from madengine_rocprof.tracer import api_recorder

    return api_recorder.callback_ids(cupti, cupti.CallbackDomain.RUNTIME_API, ("cudaLaunch",))


def patch(mode: str, cupti) -> dict:
    """Patches Recorder for `mode`; returns what was chosen (for the results)."""
    from madengine_rocprof.tracer import api_recorder

    if mode not in MODES:
        raise ValueError(mode)
    info: dict = {"mode": mode}
    if mode == "null":
        folder = Path(tempfile.mkdtemp())
        (folder / "null.c").write_text(NULL_CALLBACK)
        cc = api_recorder.compiler() or "cc"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(folder / "null.so"), str(folder / "null.c")],
                       check=True)
        null = ctypes.CDLL(str(folder / "null.so"))
        original_subscribe = api_recorder.Recorder.subscribe

        def subscribe(self):
            self.callback = ctypes.cast(null.null_callback, ctypes.c_void_p)
            original_subscribe(self)
        api_recorder.Recorder.subscribe = subscribe  # type: ignore[method-assign]
        return info
    launches = launch_cbids(cupti)
    info["launch_cbids"] = launches
    original_start = api_recorder.Recorder.start

    def start(self):
        original_start(self)
        enable = self.lib.cuptiEnableCallback
        enable.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
        if mode == "launch_only":
            self.lib.cuptiEnableDomain(0, self.subscriber, 2)
        for cbid in launches:
            status = enable(1 if mode == "launch_only" else 0, self.subscriber, 2, cbid)
            if status != 0:
                raise RuntimeError(f"cuptiEnableCallback({cbid}) failed with status {status}")
    api_recorder.Recorder.start = start  # type: ignore[method-assign]
    return info

"""CUPTI's own cost, for benchmarks/tracer/product_path.py: found first through PYTHONPATH, this enables the CUPTI
activity kinds the tracer enables, with the tracer's buffer settings, and a consumer that discards every completed
buffer in C (cupti_backend.NativeBuffers(keep=False)). Nothing else of the tracer runs: no wrapper, no import hook,
no optimizer hook (except for the `step`/`off` diagnostics), no records kept, no files written.

    MRT_FLOOR_KINDS   kernel: concurrent kernel, memcpy, memset (what --kernel-trace enables)
                      api:    the same plus CUDA runtime API records (what --hip-trace adds with activity records)
                      launchcb: `kernel` plus a CUPTI callback that does nothing, subscribed to the driver's launch,
                              copy and set calls the interposer joins kernels through (api_recorder.launch_cbids):
                              CUPTI's own cost for that join, under the interposer's part of --hip-trace
    MRT_FLOOR_WHEN    start (default): at interpreter start-up, before torch is imported and before any CUDA context
                      (what benchmarks/tracer/results measured); torch: right after `import torch`, before any CUDA
                      context, the moment the tracer starts (not yet measured); step: at the first optimizer step
                      (diagnostic: after the context and the warm-up's modules exist); off: at start-up, and disabled
                      again at the first optimizer step (diagnostic: what CUPTI leaves behind once its kinds are off)
"""
import os
import sys


def _enable():
    from cupti import cupti

    from madengine_rocprof.tracer import cupti_backend as cb

    lib = cb.open_lib(cupti)
    cupti.set_thread_id_type(cb.THREAD_ID_TYPE_SYSTEM)
    for attribute, value in ((cupti.ActivityAttribute.ATTR_PER_THREAD_BUFFER, 1),
                             (cupti.ActivityAttribute.ATTR_ZEROED_OUT_BUFFER, 0)):
        size, flag = cb.ctypes.c_size_t(1), cb.ctypes.c_uint8(value)
        lib.cuptiActivitySetAttribute(int(attribute), cb.ctypes.byref(size), cb.ctypes.byref(flag))
    buffers = cb.NativeBuffers(keep=False)
    buffers.prefill()
    callbacks = buffers.callbacks()
    status = lib.cuptiActivityRegisterCallbacks(*callbacks)
    if status != 0:
        raise RuntimeError(f"cuptiActivityRegisterCallbacks: CUPTI status {status}")
    ak = cupti.ActivityKind
    kinds = [ak.CONCURRENT_KERNEL, ak.MEMCPY, ak.MEMSET]
    if os.environ.get("MRT_FLOOR_KINDS") == "api":
        kinds.append(ak.RUNTIME)
    for kind in kinds:
        cupti.activity_enable(kind)
    if os.environ.get("MRT_FLOOR_KINDS") == "launchcb":
        callbacks += (_subscribe_do_nothing(cupti, lib, buffers),)
    return cupti, kinds, callbacks


def _subscribe_do_nothing(cupti, lib, buffers):
    """A CUPTI callback on the driver's launch/copy/set calls whose body is empty. The C function used is
    cupti_buffers_version (no arguments, returns a constant): on x86-64 a callee ignores arguments it does not take,
    so it is a do-nothing CUpti_CallbackFunc that never enters Python."""
    from madengine_rocprof.tracer import api_recorder as ar

    ctypes = ar.ctypes
    subscriber = ctypes.c_void_p(None)
    noop = ctypes.cast(buffers.native.cupti_buffers_version, ctypes.c_void_p)
    status = lib.cuptiSubscribe(ctypes.byref(subscriber), noop, None)
    if status != 0:
        raise RuntimeError(f"cuptiSubscribe: CUPTI status {status}")
    cbids = ar.launch_cbids(cupti)
    for cbid in cbids:
        status = lib.cuptiEnableCallback(1, subscriber, ar.DOMAINS["driver"], cbid)
        if status != 0:
            raise RuntimeError(f"cuptiEnableCallback({cbid}): CUPTI status {status}")
    print(f"[cupti floor] do-nothing callback on {len(cbids)} driver launch/copy/set calls", file=sys.stderr)
    return subscriber


def _after_first_step(action):
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    handles: list = []

    def hook(*_args, **_kwargs):
        handles.pop().remove()
        action()

    handles.append(register_optimizer_step_post_hook(hook))
    return torch


_STATE: list = []


def _start():
    kinds = os.environ.get("MRT_FLOOR_KINDS")
    if kinds not in ("kernel", "api", "launchcb"):
        return
    when = os.environ.get("MRT_FLOOR_WHEN", "start")
    try:
        if when == "torch":
            import torch  # noqa: F401 - loads torch's CUDA libraries first, as the tracer's import hook sees them
        if when == "step":
            _after_first_step(lambda: _STATE.append(_enable()))
            return
        _STATE.append(_enable())
        if when == "off":
            cupti, enabled, _ = _STATE[-1]
            _after_first_step(lambda: [cupti.activity_disable(k) for k in enabled])
    except Exception as exc:  # the benchmark row must show a failed floor, not a silently untraced process
        print(f"[cupti floor] error: {exc!r}", file=sys.stderr)
        raise SystemExit(3) from exc


_start()

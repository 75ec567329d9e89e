"""Embedded tracer control inside the workload process (armed by inject/sitecustomize.py).

Nothing happens until the app imports torch: an import hook then starts the backend (`select`): CUPTI through
cupti-python on a CUDA GPU when it imports (`cupti_backend`), else torch.profiler (GPU kernels only on a GPU, CPU
operators without one). The recording window is bounded by optimizer steps and seconds, both counted at
optimizer steps (a global torch.optim hook), and the files are written at the window's end, at exit (also after an
uncaught exception) or on SIGTERM. Environment (all optional):
  MADENGINE_ROCPROF_TRACER_OUT          output directory (set by the wrapper; unset = tracer off)
  MADENGINE_ROCPROF_TRACER_SKIP_STEPS   optimizer steps to let pass before recording (default 0)
  MADENGINE_ROCPROF_TRACER_STEPS        optimizer steps to record, 0 = no limit (default 0)
  MADENGINE_ROCPROF_TRACER_DELAY_S      seconds after torch import before recording starts (checked at steps)
  MADENGINE_ROCPROF_TRACER_MAX_SECONDS  seconds to record, 0 = no limit (checked at steps; default 0)
  MADENGINE_ROCPROF_TRACER_MAX_KERNELS  rows kept in kernel_trace.csv (default 2000000)
  MADENGINE_ROCPROF_TRACER_CPU          1: also record CPU operators on a GPU (more overhead)
  MADENGINE_ROCPROF_TRACER_SHAPES       1: record operator input shapes (torch.profiler record_shapes=True, CPU
                                        operators on; forces the torch.profiler backend: CUPTI records no
                                        operators). The Kineto JSON kept beside the CSVs then carries them, and
                                        `report` gives the per-operator efficiency table from it
  MADENGINE_ROCPROF_TRACER_TRUNCATE     1: function names only (rocprofv3 -T)
  MADENGINE_ROCPROF_TRACER_CORRELATION  1: keep Kineto's CPU-op (external) correlation on a GPU. Default 0: no CPU
                                        operators are recorded there, so it only costs time per launch
  MADENGINE_ROCPROF_TRACER_BACKEND      auto|cupti|torch (default auto: cupti on CUDA when cupti-python imports)
  MADENGINE_ROCPROF_TRACER_API          1: also write <pid>_hip_api_trace.csv (CUDA API calls; --hip-trace)
  MADENGINE_ROCPROF_TRACER_MEMCPY       1: also write <pid>_memory_copy_trace.csv (--memory-copy-trace)
  MADENGINE_ROCPROF_TRACER_STATS        1: with API rows, also <pid>_hip_api_stats.csv (--stats)
  MADENGINE_ROCPROF_TRACER_MANGLED      1: keep CUPTI's mangled kernel names (--mangled-kernels)
  MADENGINE_ROCPROF_TRACER_BUFFER_MB    CUPTI backend: size of one activity buffer in MiB (default 32)
  MADENGINE_ROCPROF_TRACER_API_DOMAIN   CUPTI backend, with API rows: `runtime` (default: every CUDA runtime call,
                                        like --hip-trace) or `driver` (the CUDA driver calls: launches, copies,
                                        allocations, without the runtime's bookkeeping calls; less overhead)
  MADENGINE_ROCPROF_TRACER_API_RECORDER CUPTI backend, with API rows: `interpose` (default: native stubs in the GOT
                                        slots of libcudart calls, built with the system's C compiler on first use;
                                        kernels of statically linked runtimes join their driver launch) or `activity`
                                        (CUPTI's API activity records: every call, dearer; the fallback, with a
                                        warning, where the interposer cannot run). benchmarks/tracer/README.md
  MADENGINE_ROCPROF_TRACER_GPU_ACTIVITIES  torch.profiler backend only: comma list of Kineto activity types
                                        to record on a GPU, e.g.
                                        CONCURRENT_KERNEL,GPU_MEMCPY,GPU_MEMSET,CUDA_RUNTIME (default: torch's whole
                                        CUDA set). Needs torch's per-group activity filters (newer torch); without
                                        them the whole set is recorded, with a warning. Kernels are always kept
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.util
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from madengine_rocprof.atomic import write_json
from madengine_rocprof.tracer import api_recorder, convert, native_rows, select
from madengine_rocprof.wrapper import rocprof_csv
from madengine_rocprof.wrapper import tracer_settings as settings

TAG = "[madengine-rocprof tracer]"
_LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch")


def gpu_activity_names(text: str) -> list[str]:
    """MADENGINE_ROCPROF_TRACER_GPU_ACTIVITIES -> Kineto activity names; kernels are always recorded."""
    names = [n.strip().upper() for n in text.split(",") if n.strip()]
    if names and "CONCURRENT_KERNEL" not in names:
        names.insert(0, "CONCURRENT_KERNEL")
    return names


class _Tracer:
    def __init__(self) -> None:
        self.out = os.environ.get("MADENGINE_ROCPROF_TRACER_OUT", "")
        # one table, the input layer's checks; a bad value is a warning and the default, never the app's failure
        values = settings.read(warn=lambda text: print(f"{TAG} warning: {text}", file=sys.stderr))
        self.skip_steps: int = values["skip_steps"]
        self.steps: int = values["steps"]
        self.delay_s: float = values["delay_s"]
        self.max_seconds: float = values["max_seconds"]
        self.max_kernels: int = values["max_kernels"]
        self.buffer_mb: float = values["buffer_mb"]
        self.want_cpu: bool = values["want_cpu"]
        self.shapes: bool = values["shapes"]
        self.truncate: bool = values["truncate"]
        self.correlation: bool = values["correlation"]
        self.gpu_activities = gpu_activity_names(os.environ.get("MADENGINE_ROCPROF_TRACER_GPU_ACTIVITIES", ""))
        self.api: bool = values["api"]
        self.memcpy: bool = values["memcpy"]
        self.stats: bool = values["stats"]
        self.mangled: bool = values["mangled"]
        self.backend: str = values["backend"]
        self.api_domain: str = values["api_domain"]
        # unset: the interposer, except for the driver domain (it records runtime calls only)
        self.api_recorder: str = values["api_recorder"] or ("activity" if self.api_domain == "driver"
                                                            else api_recorder.DEFAULT)
        self.pid = os.getpid()
        self.prof: Any = None  # the running backend (TorchBackend or cupti_backend.CuptiBackend)
        self.sync: Callable[[], None] | None = None  # waits for the GPU before the window closes
        self.why = ""
        self.cpu_mode = False
        self.t_import = time.monotonic()
        self.t_start = 0.0  # set by start(); read only while recording
        self.t_close = self.t_stopped = 0.0  # when finish() began, when the backend had stopped (the summary's timing)
        self.step = 0
        self.recorded_steps = 0
        self.finished = False
        self.lock = threading.RLock()  # SIGTERM's handler may run in this thread while it is inside finish()
        self.writer: int | None = None  # the thread writing the files
        self.exiting = False  # finish() called by atexit
        # a SIGTERM that came during the write: acted on once the files are complete
        self.deferred: Callable[[], None] | None = None

    # -------------------------------------------------- window control
    def on_torch(self) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook

        if self._needs_step_hook():
            register_optimizer_step_post_hook(self._after_step)
        atexit.register(self.finish_at_exit)
        self._catch_sigterm()
        if self.skip_steps == 0 and self.delay_s <= 0:
            self.start(torch)

    def _needs_step_hook(self) -> bool:
        """A window bounded by steps or seconds, a delayed start, or the interposer (which patches libraries loaded
        mid-window at steps) needs the optimizer hook; a whole-run window runs no Python at all per step."""
        bounded = self.skip_steps > 0 or self.delay_s > 0 or self.steps > 0 or self.max_seconds > 0
        return bounded or (self.api and self.api_recorder == "interpose")

    def start(self, torch) -> None:
        gpu = torch.cuda.is_available()
        self.cpu_mode = not gpu
        on_cuda = gpu and bool(getattr(torch.version, "cuda", None))
        # CPU operators and their shapes come from torch.profiler only: the CUPTI backend records no operators
        operators = "SHAPES" if self.shapes else "CPU" if self.want_cpu else ""
        cuda = on_cuda and not operators
        module, error = None, None
        if cuda:
            try:
                from madengine_rocprof.tracer import cupti_backend

                module = cupti_backend.load()
            except Exception as exc:  # ImportError, or a libcupti that does not load
                error = f"{type(exc).__name__}: {exc}"
        name, self.why, warning = select.choose(self.backend, cuda=cuda,
                                                cupti_error=error if cuda else "not CUDA")
        if on_cuda and operators:
            self.why = f"{settings.PREFIX}{operators}=1: CPU operators need torch.profiler (CUPTI records none)"
            if self.backend == "cupti":
                warning = f"{settings.PREFIX}BACKEND=cupti ignored: {self.why}"
        if warning:
            print(f"{TAG} warning: {warning}", file=sys.stderr)
        self.prof = None
        if name == "cupti":
            from madengine_rocprof.tracer import cupti_backend

            try:
                size = int(self.buffer_mb * (1 << 20)) or cupti_backend.BUFFER_BYTES
                buffers, buffer_warning = cupti_backend.make_buffers(size)
                backend = cupti_backend.CuptiBackend(module, api=self.api, buffers=buffers,
                                                     api_domain=self.api_domain,
                                                     api_recorder_choice=self.api_recorder)
                if buffer_warning:
                    backend.warnings.append(buffer_warning)
                self.sync = torch.cuda.synchronize
                backend.start()
                for text in backend.warnings:
                    print(f"{TAG} warning: {text}", file=sys.stderr)
                self.prof = backend
            except Exception as exc:  # broad: CUPTI raises its own types; the tracer falls back, never breaks the app
                self.sync = None
                print(f"{TAG} warning: CUPTI backend failed to start ({exc!r}); using torch.profiler",
                      file=sys.stderr)
                self.why = f"CUPTI backend failed to start ({exc!r}): torch.profiler"
        if self.prof is None:
            torch_backend = TorchBackend(self, torch, gpu)
            torch_backend.start()
            self.prof = torch_backend  # only a started profiler: a SIGTERM during start() finds nothing to stop
        self.t_start = time.monotonic()

    def _after_step(self, *_args, **_kwargs) -> None:
        if self.finished or os.getpid() != self.pid:
            return
        self.step += 1
        if self.prof is None:
            if self.step >= self.skip_steps and time.monotonic() - self.t_import >= self.delay_s:
                import torch

                self.start(torch)
            return
        self.recorded_steps += 1
        refresh = getattr(self.prof, "refresh", None)
        if refresh is not None:
            refresh()
        over_steps = self.steps > 0 and self.recorded_steps >= self.steps
        over_time = self.max_seconds > 0 and time.monotonic() - self.t_start >= self.max_seconds
        if over_steps or over_time:
            self.finish()

    def _catch_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_IGN:
            return

        def after_finish(signum, frame):
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

        def on_term(signum, frame):
            if self.writer == threading.get_ident():  # interrupted this thread's write: complete it first
                self.deferred = lambda: after_finish(signum, frame)
                return
            self.finish()
            after_finish(signum, frame)

        signal.signal(signal.SIGTERM, on_term)

    # -------------------------------------------------- output
    def finish_at_exit(self) -> None:
        self.exiting = True
        self.finish()

    def finish(self) -> None:
        with self.lock:
            if self.finished or os.getpid() != self.pid:
                return  # already written, or a forked child that inherited the tracer
            self.finished = True
            if self.prof is None:
                return
            self.writer = threading.get_ident()
            self.t_close = time.monotonic()
            try:
                with self._ctrl_c_held():
                    if self.sync is not None:
                        try:
                            self.sync()  # kernels launched in the window finish before it closes
                        except Exception as exc:  # e.g. a GPU error the app already hit: keep what was recorded
                            print(f"{TAG} warning: cannot wait for the GPU before stopping: {exc!r}",
                                  file=sys.stderr)
                    self.prof.stop()
                    self.t_stopped = time.monotonic()
                    self._write()
            except Exception as exc:  # broad: at exit the app's result must stand; the error is printed
                where = f" ({exc.strerror}: {exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
                print(f"{TAG} error: could not write the trace: {exc!r}{where}{_disk_full_hint(self.out)}",
                      file=sys.stderr)
            finally:
                self.writer = None
        if self.deferred:
            self.deferred()

    @contextlib.contextmanager
    def _ctrl_c_held(self):
        """While the files are written, Ctrl-C is noted instead of raised: a KeyboardInterrupt part way would
        abandon the trace (a second Ctrl-C while the first one's exit writes the files). It takes effect once
        the files are complete, or is dropped when the process is exiting anyway."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGINT)
        if previous in (signal.SIG_IGN, None):
            yield
            return
        held: list = []
        signal.signal(signal.SIGINT, lambda _signum, frame: held.append(frame))
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
        if not held:
            return
        if self.exiting:
            print(f"{TAG} Ctrl-C while the trace was written: the files were completed first", file=sys.stderr)
        elif callable(previous):
            previous(signal.SIGINT, held[0])
        else:
            os.kill(os.getpid(), signal.SIGINT)

    def _write(self) -> None:
        """The backend's Chrome trace first (torch.profiler's export, or the CUPTI backend's, renamed into place
        when complete), then kernel_trace.csv read from it, in whole lines (a kill or a full disk keeps the rows
        written so far), then the stats and the summary.

        The backend's `trace(path, demangle_names=...)` returns (source, counts); source is the path of the Kineto
        JSON it wrote to `path` (torch.profiler's export, or the CUPTI backend's own writer), or convert.Events
        (rows straight from records; no Chrome trace)."""
        stopped = self.t_stopped or time.monotonic()
        host_dir = os.path.join(self.out, socket.gethostname())
        os.makedirs(host_dir, exist_ok=True)
        prefix = rocprof_csv.file_prefix(self.pid)
        chrome = os.path.join(host_dir, prefix + "perfetto_trace.json")
        written: list[str] = []
        nothing_captured = False  # set once the trace was read and held no row: then no file stays
        try:
            source, counts = self.prof.trace(chrome, demangle_names=not self.mangled)
            t_trace = time.monotonic()
            counts["why"] = self.why
            counts["record_shapes"] = self.shapes and self.prof.name == "torch"  # the report looks here first
            options: dict[str, Any] = {"cpu": self.cpu_mode, "truncate": self.truncate, "max_rows": self.max_kernels,
                                       "api": self.api, "memcpy": self.memcpy, "stats": self.stats}
            if isinstance(source, convert.Events):  # rows made straight from a backend's records
                written, kernel_rows = convert.write_files(source, host_dir, prefix, **options), len(source)
            else:  # the Kineto JSON written to `chrome`: the native converter where it builds
                written, kernel_rows = convert.write_trace_file(source, host_dir, prefix, **options)
                counts["csv_writer"] = (f"python ({native_rows.why_not})" if native_rows.why_not
                                        else "native (C)")
            dropped = counts.get("dropped_records") or 0
            if written or dropped:
                counts["kernel_rows"] = kernel_rows
                # seconds from the window's close: the GPU wait and stop, the Chrome trace, the rows read and written
                counts["write_seconds"] = {"stop": round(stopped - (self.t_close or stopped), 3),
                                           "chrome_trace": round(t_trace - stopped, 3),
                                           "rows": round(time.monotonic() - t_trace, 3)}
                write_json(os.path.join(host_dir, prefix + SUMMARY_SUFFIX), counts, indent=1)
            if dropped:
                print(f"{TAG} error: CUPTI dropped {dropped} activity record(s) in pid {self.pid}: the trace is"
                      " incomplete", file=sys.stderr)
            if not written:
                nothing_captured = True  # no rows: no Chrome trace either, as when a window captured nothing
            if not written and not dropped:
                print(f"{TAG} no {'CPU operators' if self.cpu_mode else 'GPU kernels'} captured in pid {self.pid}:"
                      " no files written", file=sys.stderr)
        finally:
            leftovers = [chrome + ".tmp"]  # torch's exporter writes <path>.tmp first; a full disk leaves it
            if nothing_captured:
                leftovers.append(chrome)  # no rows: no files, as rocprofv3. A trace we failed to read stays
            for left in leftovers:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(left)


def _disk_full_hint(folder: str) -> str:
    try:
        st = os.statvfs(folder or ".")
    except OSError:
        return ""
    return " (no space left on the output file system)" if st.f_bavail * st.f_frsize < (1 << 20) else ""


class TorchBackend:
    """torch.profiler (Kineto): the fallback, and the only backend without CUDA (CPU operators, ROCm kernels)."""

    name = "torch"

    def __init__(self, tracer: _Tracer, torch, gpu: bool) -> None:
        self.tracer, self.torch, self.gpu = tracer, torch, gpu
        self.prof: Any = None  # a torch.profiler.profile once started

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        t, gpu = self.tracer, self.gpu
        activities = [ProfilerActivity.CUDA] if gpu else []
        if t.cpu_mode or t.want_cpu or t.shapes:
            activities.append(ProfilerActivity.CPU)
        extra: dict[str, Any] = {"record_shapes": True} if t.shapes else {}
        if gpu and not t.want_cpu and not t.shapes and not t.correlation:
            try:  # private API (torch >= 2.1): without it, tracing simply keeps the correlation
                from torch._C._profiler import _ExperimentalConfig

                extra["experimental_config"] = _ExperimentalConfig(disable_external_correlation=True)
            except (ImportError, TypeError):
                pass
        if gpu and t.gpu_activities:
            try:  # per-group filter {CUDA: [names]}: older torch rejects the dict, newer ones unknown names
                filtered = [{ProfilerActivity.CUDA: t.gpu_activities}] + activities[1:]
                prof = profile(activities=filtered, **extra)
                prof.start()
                self.prof = prof
                return
            except Exception as exc:  # broad: torch versions raise TypeError, ValueError or RuntimeError here
                print(f"{TAG} warning: cannot filter GPU activities to {t.gpu_activities} ({exc!r});"
                      " recording all of them", file=sys.stderr)
        self.prof = profile(activities=activities, **extra)
        self.prof.start()

    def stop(self) -> None:
        self.prof.stop()

    def trace(self, path: str, *, demangle_names: bool) -> tuple[str, dict]:
        """Kineto exports its JSON to `path` (it demangles names itself) and the path comes back for `convert`;
        dropped records are not reported by Kineto."""
        with kineto_path(path) as target:
            self.prof.export_chrome_trace(target)
        return path, {"backend": self.name, "dropped_records": None}


_UNSAFE_IN_JSON = re.compile(r'["\\\x00-\x1f]')


@contextlib.contextmanager
def kineto_path(path: str):
    """A name for `path` that Kineto can use. Kineto writes the path unescaped into the JSON (`traceName`) and
    turns backslashes into slashes when it renames its temporary file, so a folder with a quote or a backslash
    would lose the whole trace. Such a folder is reached through /proc/self/fd/N instead (same file system, so
    Kineto's rename still works); other paths are used as they are."""
    folder, name = os.path.split(path)
    if not _UNSAFE_IN_JSON.search(path):
        yield path
        return
    if _UNSAFE_IN_JSON.search(name):
        raise ValueError(f"trace file name {name!r} has a character Kineto cannot write")
    fd = os.open(folder or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        alias = f"/proc/self/fd/{fd}"
        if not os.path.isdir(alias):
            raise OSError(f"{folder!r} has a quote or backslash and /proc/self/fd is not available to reach it")
        yield os.path.join(alias, name)
    finally:
        os.close(fd)


SUMMARY_SUFFIX = "tracer_summary.json"
_TRACER: _Tracer | None = None


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Runs `callback` right after `import torch` finishes, whoever imports it."""

    def __init__(self, callback) -> None:
        self.callback = callback

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module
        callback = self.callback

        def exec_module(module):
            original(module)
            try:
                callback()
            except Exception as exc:  # broad: inside torch's import, a tracer error must not fail the app's import
                print(f"{TAG} error: cannot start torch.profiler: {exc!r}", file=sys.stderr)

        # wrapping the loader's method is the hook itself: torch's module body runs, then the callback
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _is_launcher() -> bool:
    argv = list(getattr(sys, "orig_argv", sys.argv))
    return os.path.basename(sys.argv[0] if sys.argv else "") == "torchrun" or any(a in _LAUNCHERS for a in argv[:4])


def arm() -> None:
    """Called from sitecustomize: start tracing as soon as torch is imported (launcher processes excluded)."""
    global _TRACER
    if _TRACER is not None or not os.environ.get("MADENGINE_ROCPROF_TRACER_OUT"):
        return
    _TRACER = _Tracer()

    def on_torch():
        if _is_launcher():
            return  # torchrun's own process runs no kernels; its workers are traced
        _TRACER.on_torch()

    if "torch" in sys.modules:
        on_torch()
    else:
        sys.meta_path.insert(0, _TorchImportHook(on_torch))

"""Run a plan: stream the app's output with profiler noise filtered, convert outputs, write manifest.json."""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from madengine_rocprof.atomic import write_json
from madengine_rocprof.wrapper import nvidia, outputs
from madengine_rocprof.wrapper.contracts import Manifest, WrapperOutcome
from madengine_rocprof.wrapper.planner import EXIT_FILE_ENV, Plan

SCHEMA_VERSION = 1
LINE_PIECE = 1 << 16   # the longest piece of a line read at once
TAIL_LINE = 2000       # what the profiler-error check keeps of each of the last lines
# Harmless profiler chatter: filtered from the console, kept in OUT/wrapper_filtered.log.
NOISE = (
    re.compile(r"sql text value", re.I),                                   # rocpd on ROCm 7
    re.compile(r"phasing out development and support for roctracer"),     # legacy rocprof banner
    re.compile(r"^(?:\x1b\[[0-9;]*m)*RPL: on '"),                        # legacy rocprof progress
    re.compile(r"^(?:\x1b\[[0-9;]*m)+\s*$"),                              # colour reset left by the banner
    re.compile(r"^==PROF== Profiling \""),                                # ncu: one line per replayed kernel
    re.compile(r"^(?:USDT|STAGE):\S+ \S+ \d+:\d+ \w+\.cpp:\d+\] "),             # Kineto start/stop chatter
)
# Messages that mean the profiler itself failed (not the app).
PROFILER_FAILURE = re.compile(
    r"invalid truth value|^rocprofv3: error:|usage: rocprofv3|Request exceeds the capabilities of the hardware"
    r"|No tracing options were enabled|conflicting value|^==ERROR==|\[madengine-rocprof tracer\] error"
    r"|File \"[^\"]*rocprofv3(?:\.py)?\", line \d+|^ROCPROFILER_ERROR|^\S*rocprof: error|^F\d{4} \d\d:\d\d:\d\d\.\d+ "
    r"+\d+ \S+\] ",
    re.M,
)


@dataclass
class Result:
    exit_code: int
    manifest: Manifest
    plan: Plan

    @property
    def outcome(self) -> WrapperOutcome:
        return self.manifest["outcome"]


class _Filter:
    """Copies one pipe to a stream line by line; noise lines go to the log instead, counted."""

    def __init__(self, pipe, stream, log: list, keep_all: bool):
        self.pipe, self.stream, self.log, self.keep_all = pipe, stream, log, keep_all
        self.tail: list[str] = []
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        # Lines are read in bounded pieces: an app printing a 200 MB line never makes the wrapper hold it.
        for raw in iter(lambda: self.pipe.readline(LINE_PIECE), b""):
            text = raw.decode("utf-8", "replace")
            self.tail = (self.tail + [text[:TAIL_LINE]])[-200:]
            if not self.keep_all and any(p.search(text) for p in NOISE):
                self.log.append(text)
                continue
            try:
                self.stream.write(raw)
                self.stream.flush()
            except (OSError, ValueError):
                pass
        self.pipe.close()


def _stream(name: str):
    std = getattr(sys, name)
    return getattr(std, "buffer", std)


def execute(plan: Plan, env=None) -> Result:
    env = dict(os.environ if env is None else env)
    env.update(plan.env_added)
    out = plan.output_dir
    os.makedirs(out, exist_ok=True)
    if plan.post:  # ncu and nsys do not create the folder of their --export/--output path
        os.makedirs(os.path.join(out, socket.gethostname()), exist_ok=True)
    exit_file = plan.env_added.get(EXIT_FILE_ENV)
    if exit_file and os.path.exists(exit_file):
        os.unlink(exit_file)  # a stale status from an earlier run must not be read as this one's
    before = outputs.snapshot(out)
    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.monotonic()
    noise: list[str] = []
    try:
        child = subprocess.Popen(plan.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 stdin=None)
    except OSError as exc:
        return _finish(plan, out, before, started, t0, 127, noise, "", f"cannot start {plan.argv[0]}: {exc}")
    keep_all = bool(plan.settings.get("no_filter"))
    pumps = [_Filter(child.stdout, _stream("stdout"), noise, keep_all),
             _Filter(child.stderr, _stream("stderr"), noise, keep_all)]
    received: list[int] = []
    previous = _forward_signals(child, received)
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for p in pumps:
        p.thread.join(timeout=10)
    if exit_file:
        code = _recorded_app_exit(exit_file, code)
    if code < 0:
        code = 128 - code  # killed by a signal: report it the way a shell does
    notes = [f"the wrapper received {signal.Signals(s).name} and passed it to the app" for s in dict.fromkeys(received)]
    if code > 128 and code - 128 in _SIGNAL_NUMBERS:
        notes.append(f"the app ended by {signal.Signals(code - 128).name} (exit {code})")
    return _finish(plan, out, before, started, t0, code, noise, "".join(pumps[1].tail + pumps[0].tail), None, notes)


_SIGNAL_NUMBERS = {s.value for s in signal.Signals}


def _recorded_app_exit(path: str, profiler_code: int) -> int:
    """The app's status written by the launcher (one line per pass; the first failure counts). Without it, or when
    every pass succeeded, the profiler's own status stands (it may report a profiling error)."""
    try:
        with open(path, encoding="utf-8") as fh:
            codes = [int(line) for line in fh if line.strip()]
        os.unlink(path)
    except (OSError, ValueError):
        return profiler_code
    return next((c for c in codes if c != 0), profiler_code)


def _forward_signals(child, received: list) -> dict:
    """SIGTERM/SIGINT/SIGHUP to the wrapper go to the app, so it (and its profiler) can write outputs."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}

    def forward(signum, _frame):
        received.append(signum)
        with contextlib.suppress(OSError):
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        previous[sig] = signal.signal(sig, forward)
    return previous


def _convert_and_log(plan: Plan, out: str, before: dict, noise: list, messages: list) -> None:
    if plan.post:
        suffix = {"ncu": ".ncu-rep", "nsys": ".sqlite"}[plan.post]
        new = [os.path.join(out, rel) for rel, st in outputs.snapshot(out).items()
               if rel.endswith(suffix) and before.get(rel) != st]
        if plan.post == "ncu":
            ncu_options = plan.argv[:len(plan.argv) - len(plan.app_argv)]  # the app may have its own --metrics
            nvidia.convert_ncu(new, plan.exe, messages, nvidia.requested_metrics(ncu_options))
        else:
            nvidia.convert_nsys(new, messages)
    if noise:
        messages.append(f"{len(noise)} profiler noise line(s) filtered into {outputs.FILTERED_LOG}")
        with open(os.path.join(out, outputs.FILTERED_LOG), "a", encoding="utf-8") as fh:
            fh.writelines(noise)


def _finish(plan: Plan, out: str, before: dict, started, t0: float, code: int, noise: list, tail: str,
            start_error: str | None, notes: list | None = None) -> Result:
    duration = round(time.monotonic() - t0, 3)  # the run's, before any conversion of its outputs
    messages = list(plan.messages)
    try:
        _convert_and_log(plan, out, before, noise, messages)
    except OSError as exc:  # a full disk: the app's result stands, what was written is kept
        messages.append(f"error: could not finish the outputs: {exc.filename or out}: {exc.strerror or exc}")
    messages.extend(notes or [])
    files, dispatches = outputs.collect(out, before)
    tracer = outputs.tracer_summary(out, files)
    outcome: WrapperOutcome
    if start_error:
        outcome = "profiler_failed"
        messages.append(start_error)
    elif code != 0 and (failure := PROFILER_FAILURE.search(tail)):
        outcome = "profiler_failed"
        messages.append("the profiler reported an error: " + failure.group(0))
    elif code != 0:
        outcome = "app_failed"
    elif not any(f["kind"] not in ("other",) for f in files):
        outcome = "no_output"
        messages.append("no profiler files were written: nothing was captured (no GPU work, or the work ran in"
                        " processes the profiler did not see)")
    elif tracer and tracer["dropped_records"]:
        outcome = "records_dropped"  # an incomplete trace is not a result
        messages.append(f"the tracer dropped {tracer['dropped_records']} activity record(s): the trace is incomplete")
    else:
        outcome = "ok"
    exit_code = code
    if outcome == "no_output" and plan.settings.get("fail_on_no_output"):
        exit_code = 3
    found = plan.profiler.to_json()
    manifest: Manifest = {
        "schema_version": SCHEMA_VERSION,
        "tool": "madengine-rocprof-wrapper",
        "profiler": {"name": found["name"], "path": found["path"], "version": found["version"], "why": found["why"]},
        "profile": plan.profile,
        "argv": plan.argv,
        "app_argv": plan.app_argv,
        "env_added": plan.env_added,
        "output_dir": out,
        "started_at": started.isoformat(timespec="seconds"),
        "duration_s": duration,
        "exit_code": exit_code,
        "app_exit_code": code,
        "outcome": outcome,
        "outputs": files,
        "dispatch_count": dispatches,
        "messages": messages,
    }
    if tracer:
        manifest["tracer"] = tracer
    _write_manifest(out, manifest)
    return Result(exit_code, manifest, plan)


def _write_manifest(out: str, manifest: Manifest) -> None:
    """The manifest is written whole or not at all; a full disk is a message, never a changed exit code."""
    try:
        write_json(os.path.join(out, outputs.MANIFEST), manifest)
    except OSError as exc:
        manifest["messages"].append(f"error: cannot write {os.path.join(out, outputs.MANIFEST)}: "
                                    f"{exc.strerror or exc} (the outputs above are kept)")


def no_profiler_manifest(out: str, app_argv: list[str], message: str) -> Result:
    """The run never started because the asked-for profiler is missing: still leave a manifest saying so."""
    from madengine_rocprof.wrapper.detect import EXIT_NO_PROFILER, Profiler

    manifest: Manifest = {
        "schema_version": SCHEMA_VERSION, "tool": "madengine-rocprof-wrapper",
        "profiler": {"name": None, "path": None, "version": None, "why": message}, "profile": None,
        "argv": [], "app_argv": app_argv, "env_added": {}, "output_dir": out,
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "duration_s": 0.0,
        "exit_code": EXIT_NO_PROFILER, "app_exit_code": None, "outcome": "no_profiler", "outputs": [],
        "dispatch_count": None, "messages": [message],
    }
    _write_manifest(out, manifest)
    return Result(EXIT_NO_PROFILER, manifest, Plan(Profiler("none"), [], app_argv, out))

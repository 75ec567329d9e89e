"""Sample GPU power or VRAM at a fixed rate into madengine's CSV, flushing every row, until told to stop.

Columns: madengine's first (`time` as %Y-%m-%d %H:%M:%S.%f, then `Power(Watt) GPU<i>` or `vram(%) GPU<i>`), then ours:
`elapsed_s` (monotonic seconds since start: immune to wall-clock jumps) and, for VRAM, used/total MiB per device.
Stop: SIGTERM/SIGINT, the stop file appearing, or --duration elapsing. The schedule is paced on the monotonic
clock (no drift), and the file is complete and closed after any of these.
"""
from __future__ import annotations

import csv
import datetime
import os
import signal
import time
from collections.abc import Callable
from typing import TextIO

from madengine_rocprof.samplers.backends import MIB, Backend

MODES = ("power", "vram")


def parse_devices(spec: str, count: int) -> list[int]:
    """'all' or '0,2-3' -> device indices; ValueError names a bad or out-of-range entry."""
    spec = spec.strip().lower()
    if spec in ("", "all"):
        return list(range(count))
    picked: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"bad device entry '{part}' (use 'all' or indices such as 0,2-3)")
        for i in range(int(lo), int(hi or lo) + 1):
            if i >= count:
                raise ValueError(f"device {i} does not exist (this machine has {count})")
            if i not in picked:
                picked.append(i)
    return picked


def header(mode: str, devices: list[int]) -> list[str]:
    if mode == "power":
        return ["time"] + [f"Power(Watt) GPU{i}" for i in devices] + ["elapsed_s"]
    return (["time"] + [f"vram(%) GPU{i}" for i in devices] + ["elapsed_s"]
            + [f"vram_used(MiB) GPU{i}" for i in devices] + [f"vram_total(MiB) GPU{i}" for i in devices])


def sample_row(backend: Backend, mode: str, devices: list[int], elapsed: float) -> list[str]:
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    if mode == "power":
        return [now] + [f"{backend.power_watts(i):.3f}" for i in devices] + [f"{elapsed:.6f}"]
    readings = [backend.vram_bytes(i) for i in devices]
    percent = [f"{100.0 * used / total:.3f}" if total else "" for used, total in readings]
    return ([now] + percent + [f"{elapsed:.6f}"] + [f"{used / MIB:.1f}" for used, _ in readings]
            + [f"{total / MIB:.1f}" for _, total in readings])


class StopFlag:
    """Set by SIGTERM/SIGINT; also true once `stop_file` exists."""

    def __init__(self, stop_file: str | None = None) -> None:
        self.stop_file = stop_file
        self.signalled = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        self.signalled = True

    def __call__(self) -> bool:
        return self.signalled or bool(self.stop_file and os.path.exists(self.stop_file))


def run(backend: Backend, mode: str, devices: list[int], rate_s: float, out: TextIO, stop: Callable[[], bool],
        duration_s: float | None = None, clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep) -> int:
    """Write the header and one row per period until `stop()`; returns the number of rows written."""
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}' (known: {', '.join(MODES)})")
    if rate_s <= 0:
        raise ValueError(f"sampling period must be > 0 seconds, got {rate_s}")
    writer = csv.writer(out)
    writer.writerow(header(mode, devices))
    out.flush()
    start = clock()
    rows = 0
    while not stop():
        elapsed = clock() - start
        if duration_s is not None and elapsed >= duration_s:
            break
        writer.writerow(sample_row(backend, mode, devices, elapsed))
        out.flush()  # incremental: a killed sampler still leaves every row it took
        rows += 1
        # Pace on the monotonic clock: the next tick is start + rows * rate, whatever the sampling cost.
        delay = start + rows * rate_s - clock()
        while delay > 0 and not stop():
            sleep(min(delay, 0.05))
            delay = start + rows * rate_s - clock()
    return rows

"""Plain data the readers produce and the analysis consumes.

Readers aggregate per kernel name while they stream, so memory grows with the number of distinct
kernels, never with the number of dispatches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madengine_rocprof.wrapper.contracts import Manifest, RunJson, WorkloadResult


@dataclass
class KernelStats:
    """Timing of one kernel name: durations in nanoseconds. min/max are None when the input lacks them."""

    calls: int = 0
    total_ns: float = 0
    min_ns: float | None = None
    max_ns: float | None = None
    self_ns: float | None = None  # exclusive time (CPU operators: total_ns less nested operators); None for kernels

    def merge(self, other: KernelStats) -> None:
        self.calls += other.calls
        self.total_ns += other.total_ns
        if self.self_ns is not None or other.self_ns is not None:
            self.self_ns = (self.self_ns or 0) + (other.self_ns or 0)
        self.min_ns = _pick(min, self.min_ns, other.min_ns)
        self.max_ns = _pick(max, self.max_ns, other.max_ns)

    @property
    def average_ns(self) -> float:
        return self.total_ns / self.calls if self.calls else 0.0


def _pick(fn, a, b):
    if a is None:
        return b
    if b is None:
        return a
    return fn(a, b)


@dataclass
class BusyTime:
    """Unions of interval lengths on one device over one window, in ns (definitions: docs/reports.md).

    Ours: busy = kernels and copies; compute = kernels other than communication and memory-copy kernels;
    communication = communication kernels; copies = memory-copy kernels and the copy engines' copies and memsets;
    overlap = time when compute and communication ran at once. HTA (Holistic Trace Analysis 0.5.0): communication =
    kernels named `nccl...Kernel...`; memory = copies and memsets (and kernels named Memcpy/Memset/dma...);
    compute = every other kernel, copy kernels on the SMs included.
    """

    busy_ns: int = 0  # union of every kernel, copy and memset
    compute_busy_ns: int = 0
    comm_busy_ns: int = 0
    copy_busy_ns: int = 0
    overlap_ns: int = 0  # compute and communication at once
    hta_compute_busy_ns: int = 0
    hta_comm_busy_ns: int = 0
    hta_overlap_ns: int = 0


@dataclass
class IterationTime(BusyTime):
    """Device time within one marked iteration's window [start_ns, end_ns): the host window (ProfilerStep span), or
    with launch links the device window of the work the iteration launched (dispatches._launch_windows)."""

    number: int = 0
    start_ns: int = 0
    end_ns: int = 0
    host_start_ns: int = 0
    host_end_ns: int = 0
    by_launch: bool = False  # kernels assigned by their launching call (True) or by their start (host-window cut)
    dispatches: int = 0  # kernels the iteration launched (without launch links: that start in the window)
    kernel_time_sum_ns: int = 0  # plain sum of those kernels' durations


@dataclass
class DeviceTime(BusyTime):
    """One device's timeline within one process: span and unions of kernel and copy intervals, in ns."""

    device: str = ""
    dispatches: int = 0  # kernels
    copies: int = 0  # copies and memsets of the copy engines (not kernels)
    span_ns: int = 0  # first start to last end (kernels and copies)
    kernel_time_sum_ns: int = 0  # plain sum of kernel durations (overlapping kernels counted in full)
    iterations: list[IterationTime] = field(default_factory=list)  # per marked iteration (TimingSource.iterations)


@dataclass(frozen=True)
class Iteration:
    """One marked training iteration (torch.profiler's ProfilerStep#N), host time span in ns."""

    number: int
    start_ns: int
    end_ns: int


@dataclass
class TimingSource:
    """Kernel timings read from one file (or one database)."""

    path: Path
    rel: str  # path relative to the run directory, shown as the origin
    fmt: str  # rocprofv3-csv, rocprofv3-stats, rocprofv3-json, rocprofv3-pftrace, rocpd, legacy-csv, legacy-stats
    process: str  # origin key: relative directory + per-process file prefix
    pass_id: str | None  # "pmc_2", "pass_1" or None for single-pass output
    kernels: dict[str, KernelStats] = field(default_factory=dict)
    dispatches: int = 0
    first_start_ns: int | None = None
    last_end_ns: int | None = None
    has_timeline: bool = False  # per-dispatch timestamps exist (a Perfetto trace can be drawn)
    cpu_operators: bool = False  # the embedded tracer without a GPU: rows are (nested) CPU operators
    devices: list[DeviceTime] = field(default_factory=list)  # busy time per device (sources with a timeline)
    # set when the dispatches were derived from a counter_collection file (no kernel trace for the process):
    # "gpu__time_duration.sum" (ncu), "timestamps" (End - Start of each dispatch) or "untimed" (no timestamps)
    counter_time: str | None = None
    rank: int | None = None  # distributed rank when the trace says (Kineto's distributedInfo)
    iterations: list[Iteration] = field(default_factory=list)  # marked iterations, in order (empty: none marked)
    # device copies and memsets of this process, per direction (Kineto gpu_memcpy / gpu_memset); discover adds them
    # to RunData.copies
    copies: dict[str, CopyStats] = field(default_factory=dict)
    # peak allocated memory per device ("GPU 0", "CPU") from the trace's memory events (Kineto `[memory]`)
    peak_memory_bytes: dict[str, int] = field(default_factory=dict)
    # trace_tables.TraceTables when the reader collected them in its pass (Kineto); trace_tables.load_tables reads
    tables: Any = field(default=None, compare=False, repr=False)
    # CPU operators: self time per training phase (reports/phases.py), None where the trace marks no phases
    phase_ns: dict[str, int] | None = None
    steps_marked: bool = False  # the phase markers include ProfilerStep#N windows


@dataclass
class CounterStats:
    """One hardware counter over many dispatches."""

    dispatches: int = 0
    total: float = 0.0
    min: float | None = None
    max: float | None = None

    def add(self, value: float) -> None:
        self.dispatches += 1
        self.total += value
        self.min = value if self.min is None or value < self.min else self.min
        self.max = value if self.max is None or value > self.max else self.max

    def merge(self, other: CounterStats) -> None:
        self.dispatches += other.dispatches
        self.total += other.total
        self.min = _pick(min, self.min, other.min)
        self.max = _pick(max, self.max, other.max)

    @property
    def mean(self) -> float:
        return self.total / self.dispatches if self.dispatches else 0.0


@dataclass
class CounterSource:
    """Counter values read from one counter_collection file or database view."""

    path: Path
    rel: str
    fmt: str
    process: str
    pass_id: str | None
    counters: dict[str, CounterStats] = field(default_factory=dict)
    # (kernel name, counter name) -> stats over that kernel's dispatches
    by_kernel: dict[tuple[str, str], CounterStats] = field(default_factory=dict)
    # kernel name -> [dispatches, total ns] of the dispatches the counters were read on (when timed)
    kernel_time: dict[str, list] = field(default_factory=dict)
    # the dispatches themselves (one per Dispatch_Id, else Correlation_Id), per kernel name, for processes
    # that have no kernel trace; time_from says where their durations came from (see TimingSource.counter_time)
    dispatch_kernels: dict[str, KernelStats] = field(default_factory=dict)
    time_from: str | None = None


@dataclass
class CopyStats:
    """Memory copies (SDMA/blit) from memory_copy_trace, per direction."""

    calls: int = 0
    total_ns: int = 0


@dataclass
class RunData:
    """Everything read from one RUN directory."""

    label: str
    path: Path
    timing: list[TimingSource] = field(default_factory=list)  # the sources whose kernels are counted
    skipped_timing: list[TimingSource] = field(default_factory=list)  # other passes / duplicate formats
    counters: list[CounterSource] = field(default_factory=list)
    copies: dict[str, CopyStats] = field(default_factory=dict)
    workload: WorkloadResult | None = None  # workload_result.json (as found: readers check each value)
    workload_path: str | None = None
    run_info: RunJson | None = None  # runner's run.json
    manifest: Manifest | None = None  # wrapper's manifest.json
    notes: list[str] = field(default_factory=list)

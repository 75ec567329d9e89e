"""Per rank and per marked iteration (ProfilerStep#N) device time, built from model objects as a trace reader would
fill them (TimingSource.rank, TimingSource.iterations, the dispatch and copy tables), checked against a nanosecond
count of each iteration's window."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from madengine_rocprof.cli.report import printable
from madengine_rocprof.reports import build_report, markdown
from madengine_rocprof.reports.dispatches import aggregate, frame
from madengine_rocprof.reports.model import Iteration, RunData, TimingSource

from .test_reports_busy_time import ADD, COPY, ENGINE_COPY, FILL, GEMM, NCCL, numbers, subset

STEP = 10_000  # ns per iteration window


def source(rank: int, seed: int, steps: int = 5, windows: list[tuple[int, int]] | None = None,
           offset: int = 0) -> tuple[TimingSource, list]:
    """A rank's kernels and copies on one device across `steps` marked iterations (and a bit before and after);
    `windows` replaces the iterations' (start, end); `offset` shifts every time (2^63: uint64 timestamps)."""
    rng = random.Random(seed)
    events = []
    t = 500
    while t < (steps + 1) * STEP + 1_000:
        name = rng.choice([GEMM, ADD, NCCL, COPY, FILL, ENGINE_COPY])
        start = t - rng.choice([0, 0, 200])
        end = start + rng.randint(0, 900)
        events.append((name, start, end))
        t = max(t, end) + rng.choice([0, 30, 400])
    events = [(n, s + offset, e + offset) for n, s, e in events]
    bounds = windows or [(STEP * (i + 1), STEP * (i + 2)) for i in range(steps)]
    src = TimingSource(
        path=Path(f"rank{rank}.json"), rel=f"rank{rank}.json", fmt="kineto", process=f"host/{rank}", pass_id=None,
        rank=rank,
        iterations=[Iteration(number=10 + i, start_ns=lo + offset, end_ns=hi + offset)
                    for i, (lo, hi) in enumerate(bounds)],
    )

    def table(rows):
        return frame({"name": [n for n, _, _ in rows], "start": [s for _, s, _ in rows],
                      "end": [e for _, _, e in rows], "device": ["cuda:0"] * len(rows)})

    kernels = [e for e in events if e[0] != ENGINE_COPY]
    copies = [("Memcpy DtoD (Device -> Device)", s, e) for n, s, e in events if n == ENGINE_COPY]
    aggregate(src, table(kernels), table(copies))
    return src, events


@pytest.mark.parametrize("seed", [1, 2])
def test_each_iteration_matches_a_nanosecond_count_of_its_window(seed):
    src, events = source(rank=3, seed=seed)
    run = RunData(label="r", path=Path("."), timing=[src])
    [row] = build_report([run])["runs"][0]["timeline"]
    assert row["rank"] == 3  # the reader's rank, not one guessed from a file name
    assert [r["iteration"] for r in row["iterations"]] == [10, 11, 12, 13, 14]
    for it, got in zip(src.iterations, row["iterations"], strict=True):
        want = numbers(events, it.start_ns, it.end_ns)
        assert subset(got, want) == want
        assert got["dispatches"] == sum(1 for n, s, _ in events if n != ENGINE_COPY and it.start_ns <= s < it.end_ns)
    summary = row["iteration_summary"]
    assert summary["steady_state"] is False and summary["iterations"] == [10, 11, 12, 13, 14]
    assert summary["busy_ns"] == sum(r["busy_ns"] for r in row["iterations"])
    # windows that tile the time: their busy sum is the busy time of the whole window, computed once
    assert summary["busy_ns"] == numbers(events, STEP, 6 * STEP)["busy_ns"]


def test_steady_state_drops_the_first_and_the_last_iteration():
    src, events = source(rank=0, seed=3)
    run = RunData(label="r", path=Path("."), timing=[src])
    report = build_report([run], steady_state=True)
    [row] = report["runs"][0]["timeline"]
    summary = row["iteration_summary"]
    assert summary["steady_state"] is True and summary["iterations"] == [11, 12, 13]
    middle = numbers(events, 2 * STEP, 5 * STEP)
    assert summary["busy_ns"] == middle["busy_ns"] and summary["idle_ns"] == 3 * STEP - middle["busy_ns"]
    assert summary["overlap_ns"] == middle["overlap_ns"]
    text = printable(markdown.render(report))
    assert "### Device time per iteration (steady state)" in text
    assert "| 10 (left out) |" in text and "| 14 (left out) |" in text and "| 12 |" in text
    assert "11-13 (3)" in text


def test_two_iterations_are_too_few_for_a_steady_state():
    src, _ = source(rank=0, seed=4, steps=2)
    report = build_report([RunData(label="r", path=Path("."), timing=[src])], steady_state=True)
    summary = report["runs"][0]["timeline"][0]["iteration_summary"]
    assert summary["steady_state"] is False and summary["iterations"] == [10, 11]


def test_per_rank_rows():
    sources = [source(rank=r, seed=10 + r)[0] for r in (1, 0)]
    report = build_report([RunData(label="r", path=Path("."), timing=sources)])
    assert [t["rank"] for t in report["runs"][0]["timeline"]] == [1, 0]
    text = markdown.render(report)
    assert "rank 0, `host/0`, device cuda:0:" in text and "rank 1, `host/1`, device cuda:0:" in text


def test_no_iterations_no_section():
    src, _ = source(rank=0, seed=5)
    src.devices[0].iterations = []
    report = build_report([RunData(label="r", path=Path("."), timing=[src])])
    assert report["runs"][0]["timeline"][0]["iteration_summary"] is None
    assert "Device time per iteration" not in markdown.render(report)


def test_peak_memory_from_the_traces_memory_events():
    """Without a workload figure, the trace's own peaks (TimingSource.peak_memory_bytes, set by the trace readers)."""
    runs = []
    for label, gpu in (("base", 2 * 2**30), ("new", 4 * 2**30)):
        src, _ = source(rank=0, seed=6)
        src.peak_memory_bytes = {"CPU": 2**30, "GPU 0": gpu}
        runs.append(RunData(label=label, path=Path(label), timing=[src]))
    report = build_report(runs)
    assert report["runs"][1]["summary"]["trace_peak_memory"] == [
        {"origin": "host/0", "device": "CPU", "bytes": 2**30},
        {"origin": "host/0", "device": "GPU 0", "bytes": 4 * 2**30},
    ]
    row = report["comparison"][1]
    assert (row["peak_memory_bytes"], row["peak_memory_kind"]) == (4 * 2**30, "trace")
    assert row["memory_saving"] == pytest.approx(0.5)
    text = markdown.render(report)
    assert "peak allocated memory in the trace (memory events): GPU 0 4.00 GiB" in text
    assert "host memory allocated while the profiler recorded, at most (memory events;" in text and "1.00 GiB" in text
    assert "| 4.00 (trace) | 0.50x |" in text


@pytest.mark.parametrize("windows,offset", [
    ([(STEP, 25_000), (20_000, 30_000), (22_000, 50_000)], 0),  # overlapping, in order: a kernel in several windows
    ([(40_000, 50_000), (STEP, 20_000), (15_000, 60_000)], 0),  # out of order: one window at a time
    ([(STEP, 11_000), (90_000, 91_000), (10**9, 10**9 + 5)], 0),  # gaps, and a window with nothing in it
    ([(STEP, 20_000), (20_000, 30_000), (30_000, 60_000)], 2**63),  # uint64 timestamps past the Int64 range
])
def test_iteration_windows_of_any_layout_match_a_nanosecond_count(windows, offset):
    """Windows computed all at once (in order) or one at a time (out of order) equal the independent count."""
    src, events = source(rank=0, seed=7, windows=windows, offset=offset)
    [row] = build_report([RunData(label="r", path=Path("."), timing=[src])])["runs"][0]["timeline"]
    assert len(row["iterations"]) == len(windows)
    for it, got in zip(src.iterations, row["iterations"], strict=True):
        want = numbers(events, it.start_ns, it.end_ns)
        assert subset(got, want) == want, (it, got)
        assert got["dispatches"] == sum(1 for n, s, _ in events if n != ENGINE_COPY and it.start_ns <= s < it.end_ns)


def launched_source(seed: int, steps: int = 5) -> tuple[TimingSource, list]:
    """Like `source`, each interval with the start of its launching call (up to 1.5 windows before it; None for
    some: no link), as a trace with launch links gives them."""
    rng = random.Random(seed)
    events = []
    t = STEP + 200
    while t < (steps + 1) * STEP + 3_000:
        name = rng.choice([GEMM, ADD, NCCL, COPY, ENGINE_COPY])
        start = t - rng.choice([0, 0, 200])
        end = start + rng.randint(0, 900)
        launch = None if rng.random() < 0.05 else start - rng.choice([0, 100, 2_000, 9_000, 15_000])
        events.append((name, start, end, launch))
        t = max(t, end) + rng.choice([0, 30, 400])
    src = TimingSource(path=Path("r.json"), rel="r.json", fmt="kineto", process="host/0", pass_id=None, rank=0,
                       iterations=[Iteration(number=i, start_ns=STEP * (i + 1), end_ns=STEP * (i + 2))
                                   for i in range(steps)])

    def table(rows):
        return frame({"name": [r[0] for r in rows], "start": [r[1] for r in rows], "end": [r[2] for r in rows],
                      "device": ["cuda:0"] * len(rows)}).with_columns(
            launch=pl.Series([r[3] for r in rows], dtype=pl.Int64))

    aggregate(src, table([e for e in events if e[0] != ENGINE_COPY]), table([e for e in events if e[0] == ENGINE_COPY]))
    return src, events


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_iterations_own_the_work_they_launched(seed):
    """With launch links, iteration i's device window runs from the later of its host start and the end of the work
    launched before it, to the later of its host end and the end of the work launched before that; its kernels are
    those it launched (without a link: those that start in its host window). Computed here by brute force."""
    src, events = launched_source(seed)
    [row] = build_report([RunData(label="r", path=Path("."), timing=[src])])["runs"][0]["timeline"]

    def key(e):
        return e[3] if e[3] is not None else e[1]

    def ended_by(t):
        return max([t] + [e[2] for e in events if key(e) < t])

    owned_total = 0
    for i, (it, got) in enumerate(zip(src.iterations, row["iterations"], strict=True)):
        lo = it.start_ns if i == 0 else ended_by(it.start_ns)
        hi = ended_by(it.end_ns)
        assert (got["start_ns"], got["end_ns"]) == (lo, hi)
        assert (got["host_start_ns"], got["host_end_ns"], got["assigned_by"]) == (it.start_ns, it.end_ns, "launch")
        want = numbers([e[:3] for e in events], lo, hi)
        assert subset(got, want) == want
        owned = [e for e in events if e[0] != ENGINE_COPY and it.start_ns <= key(e) < it.end_ns]
        assert got["dispatches"] == len(owned)
        assert got["kernel_time_sum_ns"] == sum(e[2] - e[1] for e in owned)
        assert all(e[2] <= hi for e in owned)  # no work the iteration launched ends after its window
        owned_total += len(owned)
    # every kernel launched inside the host windows belongs to one iteration, however late it ran
    launched_inside = [e for e in events if e[0] != ENGINE_COPY and STEP <= key(e) < 6 * STEP]
    assert owned_total == len(launched_inside)
    late = [e for e in launched_inside if e[1] >= 6 * STEP]
    assert late  # the trace has work that runs after the last host window: the host-window cut would lose it
    # host windows that tile give device windows that tile
    assert all(a["end_ns"] == b["start_ns"] for a, b in zip(row["iterations"], row["iterations"][1:], strict=False))
    summary = row["iteration_summary"]
    assert summary["busy_ns"] == numbers([e[:3] for e in events], row["iterations"][0]["start_ns"],
                                         row["iterations"][-1]["end_ns"])["busy_ns"]


def test_without_links_the_host_window_cut_stays():
    src, events = launched_source(24)
    plain, _ = source(rank=0, seed=24)
    assert all(it["assigned_by"] == "start" and it["start_ns"] == it["host_start_ns"]
               for it in build_report([RunData(label="r", path=Path("."), timing=[plain])])["runs"][0]
               ["timeline"][0]["iterations"])
    assert src.devices[0].iterations[0].by_launch

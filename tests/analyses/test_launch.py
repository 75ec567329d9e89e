"""Kernel-launch latency and queue length (reports/analyses/launch.py) against Holistic Trace Analysis 0.5.0 on the
fixture traces (values stored in tests/fixtures/kineto/hta_launch_values.json with the command that made them) and
against a plain computation over the trace's events."""

from __future__ import annotations

import hashlib
import json
import math

import polars as pl
import pytest

from madengine_rocprof.reports.analyses import launch

from .trace_frames import FIXTURES, frames

HTA = json.loads((FIXTURES / "kineto" / "hta_launch_values.json").read_text())
CASES = [(folder, rank, file) for folder, v in sorted(HTA["folders"].items()) for rank, file in v["files"].items()]
# traces whose times HTA holds exactly (integer or small microseconds); on the others HTA's float microseconds of
# large timestamps round each delay by up to 1 ns
EXACT = {"hta_two_ranks", "tracelens_h100_bert", "hta_mi250_minitoy"}


def digest(rows: list) -> dict:
    return {"count": len(rows), "sums": [sum(r[i] for r in rows) for i in range(len(rows[0]))] if rows else [],
            "sha256": hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()}


@pytest.mark.parametrize("folder,rank,file", CASES)
def test_launch_delays_equal_htas(folder, rank, file):
    f = frames(FIXTURES / "kineto" / folder / file)
    hta = HTA["folders"][folder]["ranks"][rank]["launch"]
    got = launch.launches(f["kernels"], f["copies"], f["runtime"], launch.HTA_LAUNCH_STATS)
    columns = got.select("correlation", "cpu_duration", "delay")
    rows = sorted([int(c), int(d), int(x)] for c, d, x in columns.iter_rows())
    ours = digest(rows)
    assert ours["count"] == hta["count"]
    if folder in EXACT:
        assert ours == {k: hta[k] for k in ("count", "sums", "sha256")}
    else:
        assert ours["sums"][:2] == hta["sums"][:2]  # correlation ids and call durations exact
        assert abs(ours["sums"][2] - hta["sums"][2]) <= ours["count"]  # delays to HTA's rounding, 1 ns each
    if rows:
        delays = sorted(r[2] for r in rows)
        assert abs(delays[0] - hta["min"]) <= (folder not in EXACT)
        assert abs(delays[-1] - hta["max"]) <= (folder not in EXACT)


@pytest.mark.parametrize("folder,rank,file", CASES)
def test_queue_lengths_equal_htas(folder, rank, file):
    f = frames(FIXTURES / "kineto" / folder / file)
    hta = HTA["folders"][folder]["ranks"][rank]["queue"]
    series = launch.queue_series(launch.launches(f["kernels"], f["copies"], f["runtime"], launch.HTA_QUEUE_CALLS))
    ours = {}
    for (stream,), part in series.group_by("stream"):
        lengths = [[int(v)] for v in part.sort("ts")["length"]]
        ours[str(stream)] = {"lengths": digest(lengths), "max_points": max(v for (v,) in lengths)}
    assert ours == {s: {"lengths": q["lengths"], "max_points": q["max_points"]} for s, q in hta.items()}
    assert hta  # every case has launches on some stream
    # ours adds cuLaunchKernelEx, which HTA 0.5.0 leaves out: NCCL 2.28's kernels (their own stream) on the DDP trace
    every = launch.queue_series(launch.launches(f["kernels"], f["copies"], f["runtime"]))
    extra = set(every["stream"].unique().to_list()) - set(series["stream"].unique().to_list())
    assert bool(extra) == (folder == "ours_h100_ddp_v1_2rank")


def plain_launches(f: dict, names) -> list[dict]:
    """Launch rows by loops over the trace's events: the call of each correlation id and its GPU operations."""
    calls = {r["correlation"]: r for r in f["rows"]["runtime"] if r["name"] in names}
    out = []
    for op in f["rows"]["kernels"] + f["rows"]["copies"]:
        call = calls.get(op["correlation"])
        if call is not None:
            out.append({"stream": op["stream"], "call_start": call["start"], "start": op["start"],
                        "cpu": call["end"] - call["start"], "delay": max(0, op["start"] - call["end"])})
    return out


def nearest_rank(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@pytest.mark.parametrize("folder", ["ours_h200_tt_v1", "hta_mi250_minitoy"])
def test_distribution_and_queue_equal_a_plain_count(folder):
    (path,) = (FIXTURES / "kineto" / folder).glob("*.json.gz")
    f = frames(path)
    rows = plain_launches(f, launch.LAUNCH_CALLS)
    got = launch.analyze(f["kernels"], f["copies"], f["runtime"])
    assert got is not None and got["launches"] == len(rows)
    delays = [r["delay"] for r in rows]
    assert got["delay"] | {"mean_ns": 0} == {
        "count": len(delays), "mean_ns": 0, "min_ns": min(delays), "max_ns": max(delays),
        "p50_ns": nearest_rank(delays, 0.5), "p90_ns": nearest_rank(delays, 0.9), "p99_ns": nearest_rank(delays, 0.99)}
    assert got["delay"]["mean_ns"] == pytest.approx(sum(delays) / len(delays))
    assert got["long_delays"] == sum(d > 100_000 for d in delays)
    assert got["long_calls"] == sum(r["cpu"] > 50_000 for r in rows)
    for stream in got["streams"]:
        events = sorted([(r["call_start"], 1) for r in rows if r["stream"] == stream["stream"]]
                        + [(r["start"], -1) for r in rows if r["stream"] == stream["stream"]])
        # the step function, evaluated at every event: time-weighted mean and time with nothing queued
        length, weighted, empty, peak = 0, 0, 0, 0
        for i, (t, d) in enumerate(events):
            length += d
            if i + 1 < len(events) and events[i + 1][0] != t:
                peak = max(peak, length)
                held = events[i + 1][0] - t
                weighted += held * length
                empty += held * (length == 0)
        span = events[-1][0] - events[0][0]
        assert stream["max"] == max(peak, length)
        assert stream["mean"] == pytest.approx(weighted / span)
        assert stream["empty_share"] == pytest.approx(empty / span)


def test_no_runtime_calls_no_launch_analysis():
    f = frames(next((FIXTURES / "kineto" / "ours_h200_tt_v1").glob("*.json.gz")))
    assert launch.analyze(f["kernels"], f["copies"], f["runtime"].clear()) is None
    assert launch.analyze(f["kernels"], f["copies"], f["runtime"].filter(pl.col("name") == "x")) is None

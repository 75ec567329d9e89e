"""The kernel-launch pictures (reports/views/launch_pictures.py) and the numbers they are drawn from
(reports/analyses/launch.py `series_min`, `series_end`, `delay_histogram`; reports/analyses/log_histogram.py):
the queue lanes' steps read back from the SVG equal a queue-length series worked out by hand, the histogram's bars
and percentile marks equal hand-counted bins, the pictures stay bounded on huge series, and names are escaped."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from madengine_rocprof.reports.analyses import launch, log_histogram
from madengine_rocprof.reports.views import launch as launch_view
from madengine_rocprof.reports.views import launch_pictures as pictures

I64 = pl.Int64

# a hand-made trace: (call name, call start, call end, correlation) and (device, stream, start, end, correlation)
CALLS = [("cudaLaunchKernel", 100, 110, 1), ("cudaLaunchKernel", 120, 130, 2), ("cudaLaunchKernel", 500, 505, 3),
         ("cudaLaunchKernel", 300, 310, 4), ("cudaMemcpyAsync", 200, 220, 5), ("cudaDeviceSynchronize", 600, 900, 6)]
KERNELS = [(0, 7, 150, 300, 1), (0, 7, 300, 400, 2), (0, 7, 504, 600, 3), (0, 7, 700, 800, 4)]
COPIES = [(1, 9, 250, 260, 5)]
# worked out by hand: +1 at each launch call's start, -1 at its operation's start, the value after each timestamp
# (at 300 kernel 2 starts and call 4 starts: -1 +1)
QUEUE = {(0, 7): [(100, 1), (120, 2), (150, 1), (300, 1), (500, 2), (504, 1), (700, 0)],
         (1, 9): [(200, 1), (250, 0)]}
# delays: 150-110, 300-130, 504-505 clipped to 0, 700-310, 250-220
DELAYS = [40, 170, 0, 390, 30]


def gpu_frame(rows):
    return pl.DataFrame(rows, schema={"device": I64, "stream": I64, "start": I64, "end": I64, "correlation": I64},
                        orient="row")


def hand_made() -> dict:
    runtime = pl.DataFrame(CALLS, schema={"name": pl.String, "start": I64, "end": I64, "correlation": I64},
                           orient="row")
    got = launch.analyze(gpu_frame(KERNELS), gpu_frame(COPIES), runtime)
    assert got is not None
    return got


def svg_root(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def path_steps(d: str) -> tuple[float, list[tuple[float, float]], float]:
    """A step area's path `M x base (H x V y)* H x_end V base Z` read back: base, [(x, y)], x_end."""
    tokens = re.findall(r"([MHVZ])([^MHVZ]*)", d)
    assert tokens[0][0] == "M" and tokens[-1][0] == "Z"
    base = float(tokens[0][1].split()[1])
    body = tokens[1:-1]
    steps = [(float(h), float(v)) for (hk, h), (vk, v) in zip(body[0::2], body[1::2], strict=True)
             if hk == "H" and vk == "V"]
    assert len(steps) * 2 == len(body)
    x_end, y_end = steps.pop()
    assert y_end == base
    return base, steps, x_end


def lanes(svg: str) -> list[dict]:
    """Each lane of a queue picture: its name, plot rectangle and the (t, value) steps of both paths, mapped back
    through the axis (t0 and t1 taken from the picture's first and last tick)."""
    root = svg_root(svg)
    out = []
    for g in root.iter("g"):
        rect = g.find("rect")
        paths = {p.get("class"): p.get("d") for p in g.iter("path")}
        if rect is None or not paths:
            continue
        x0, width = float(rect.get("x")), float(rect.get("width"))  # type: ignore[arg-type]
        top, lane = float(rect.get("y")), float(rect.get("height"))  # type: ignore[arg-type]
        peak = int(g.findall("text")[1].text)  # type: ignore[arg-type]
        out.append({"name": g.find("text").text, "title": g.find("title").text, "x0": x0, "width": width,  # type: ignore
                    "base": top + lane, "px_per": lane / peak,
                    "paths": {k: path_steps(d) for k, d in paths.items()}})  # type: ignore[arg-type]
    return out


def read_back(lane: dict, kind: str, t0: int, t1: int) -> list[tuple[float, int]]:
    base, steps, _ = lane["paths"][kind]
    scale = lane["width"] / (t1 - t0)
    return [(t0 + (x - lane["x0"]) / scale, round((base - y) / lane["px_per"])) for x, y in steps]


def test_json_series_equal_the_hand_worked_queue():
    got = hand_made()
    streams = {(s["device"], s["stream"]): s for s in got["streams"]}
    assert set(streams) == set(QUEUE)
    for key, expected in QUEUE.items():
        s = streams[key]
        assert s["series"] == [list(p) for p in expected]  # few events: one slice each
        assert s["series_min"] == [v for _, v in expected]
        assert s["series_end"] == expected[-1][0]


def test_queue_picture_steps_equal_the_series():
    got = hand_made()
    svg = pictures.queue_svg(sorted(got["streams"], key=lambda s: (s["device"], s["stream"])), "q")
    drawn = lanes(svg)
    assert [d["name"] for d in drawn] == ["device 0, stream 7", "device 1, stream 9"]
    t0, t1 = 100, 700  # the first event of all lanes, the last
    for lane, key in zip(drawn, [(0, 7), (1, 9)], strict=True):
        for kind in ("queue-max", "queue-min"):
            back = read_back(lane, kind, t0, t1)
            assert [v for _, v in back] == [v for _, v in QUEUE[key]]
            scale = lane["width"] / (t1 - t0)
            for (t, _), (t_hand, _) in zip(back, QUEUE[key], strict=True):
                assert abs(t - t_hand) <= 0.06 / scale  # x written to 0.1 px
        _, _, x_end = lane["paths"]["queue-max"]
        assert abs(x_end - lane["x0"] - (QUEUE[key][-1][0] - t0) * lane["width"] / (t1 - t0)) <= 0.06
    assert "max 2 queued" in drawn[0]["title"]


def test_pixel_columns_keep_the_range_and_the_last_value():
    """Three slices in one pixel column (values 3, 0, 1), then a slice 50 px later: the column shows 0..3 and the
    last slice's 1 holds from the column's end until the next slice, as the step function does."""
    series, lows = [[0, 3], [10, 0], [20, 1], [5000, 2]], [3, 0, 1, 2]
    xs, los, his = pictures.pixel_steps(series, lows, 0, 0.01, 60.0)
    assert xs == [0.0, 1.0, 50.0] and his == [3, 1, 2] and los == [0, 1, 2]
    # the last column merged, its end beyond the last event: no point past x_end
    xs, los, his = pictures.pixel_steps([[0, 3], [10, 0]], [3, 0], 0, 0.01, 0.1)
    assert xs == [0.0] and (los, his) == ([0], [3])


def test_histogram_bins_and_marks_equal_a_hand_count():
    got = hand_made()
    assert got["delay_histogram"] == [[0, 1, 1], [1, 100, 2], [100, 125, 0], [125, 160, 0], [160, 200, 1],
                                      [200, 250, 0], [250, 315, 0], [315, 400, 1]]
    assert sum(n for *_, n in got["delay_histogram"]) == got["launches"] == len(DELAYS)
    # nearest rank of [0, 30, 40, 170, 390]: p50 = 3rd, p90 = p99 = 5th
    assert (got["delay"]["p50_ns"], got["delay"]["p90_ns"], got["delay"]["p99_ns"]) == (40, 390, 390)
    root = svg_root(pictures.delay_svg(got["delay_histogram"], got["delay"], "d"))
    bars = [r for r in root.iter("rect") if r.get("class") == "bin"]
    assert [int(b.get("data-count")) for b in bars] == [n for *_, n in got["delay_histogram"]]  # type: ignore
    heights = [float(b.get("height")) for b in bars]  # type: ignore[arg-type]
    assert heights[1] == max(heights) and heights[2] == 0 and heights[0] == pytest.approx(heights[1] / 2, abs=0.1)
    marks = {m.get("data-ns"): float(m.get("x1")) for m in root.iter("line") if m.get("class") == "mark"}  # type: ignore
    assert set(marks) == {"40", "390"}
    slot = float(bars[1].get("x")) - float(bars[0].get("x"))  # type: ignore[arg-type]
    # 40 ns lies in the [1, 100) bin, log-placed: 0.801 of the way; 390 in [315, 400): 0.894 of the way
    assert marks["40"] == pytest.approx(float(bars[1].get("x")) - 0.5 + 0.801 * slot, abs=0.2)  # type: ignore
    assert marks["390"] == pytest.approx(float(bars[7].get("x")) - 0.5 + 0.894 * slot, abs=0.2)  # type: ignore


def test_log_histogram_grid():
    assert log_histogram.edges_up_to(0) == [0, 1]
    assert log_histogram.edges_up_to(99) == [0, 1, 100]
    assert log_histogram.edges_up_to(100) == [0, 1, 100, 125]
    assert log_histogram.edges_up_to(1000)[-3:] == [800, 1000, 1250]
    values = [0, 0, 5, 99, 100, 124, 125, 999, 1000, 12_345_678]
    bins = log_histogram.histogram(pl.Series(values))
    assert sum(n for *_, n in bins) == len(values)
    for lo, hi, n in bins:  # each bin counts exactly the values in [lo, hi)
        assert n == sum(lo <= v < hi for v in values)
    assert bins[0][:2] == [0, 1] and bins[-1][0] <= 12_345_678 < bins[-1][1]
    assert log_histogram.histogram(pl.Series([], dtype=I64)) == []


def evil_row(n_streams: int, points: int, rng: random.Random, origin: str) -> dict:
    """A launch row as the analysis writes it, with every stream at its most points (every slice a new column)."""
    streams = []
    for k in range(n_streams):
        ts = sorted(rng.sample(range(10**9), points))
        his = [rng.randint(0, 1000) for _ in ts]
        streams.append({"device": k % 4, "stream": k, "points": 10**6, "max": max(his), "mean": 1.5,
                        "empty_share": 0.1, "series": [[t, h] for t, h in zip(ts, his, strict=True)],
                        "series_min": [rng.randint(0, h) for h in his], "series_end": ts[-1] + 5})
    hist = log_histogram.histogram(pl.Series([rng.randint(0, 10**9) for _ in range(5000)]))
    delay = {"count": 5000, "mean_ns": 1e7, "min_ns": 0, "p50_ns": 1000, "p90_ns": 10**6, "p99_ns": 10**8,
             "max_ns": 10**9}
    return {"origin": origin, "rank": 0, "launches": 5000, "delay": delay, "delay_histogram": hist,
            "cpu_duration": delay, "long_calls": 0, "long_delays": 0, "streams": streams}


def test_pictures_stay_bounded_on_huge_series():
    rng = random.Random(32)
    rows = [evil_row(20, 2 * launch.SERIES_POINTS - 1, rng, f"p{n}") for n in range(12)]
    svgs = pictures.pictures(rows)
    for svg in svgs:
        svg_root(svg)
    total = sum(len(s) for s in svgs)
    drawn = sum(len(lanes(s)) for s in svgs)
    assert drawn == pictures.LANES_DRAWN
    assert total < 700_000, total
    per_lane = max(len(p.get("d")) for s in svgs for p in svg_root(s).iter("path"))  # type: ignore[arg-type]
    assert per_lane < 20_000  # at most two points per pixel column
    section = launch_view.section({"launch": {"processes": rows}}, 10)  # type: ignore[typeddict-item]
    assert section is not None and any("first 8 of 12 processes" in line for b in section.blocks
                                       for line in getattr(b, "lines", []))


def test_streams_without_a_device_or_stream_number_are_drawn():
    """A trace whose GPU operations name no device or stream (read as null): lanes in order, nulls last."""
    row = evil_row(3, 20, random.Random(3), "p")
    row["streams"][0]["device"] = None
    row["streams"][1]["stream"] = None
    for s in row["streams"]:
        s["points"] = 5  # a tie: the order falls to device and stream
    [_, queue] = pictures.pictures([row])
    assert [lane["name"] for lane in lanes(queue)] == ["device 1, stream None", "device 2, stream 2",
                                                       "device None, stream 0"]


def test_names_are_escaped():
    rng = random.Random(1)
    row = evil_row(1, 10, rng, "</svg><script>alert('&')</script>")
    svgs = pictures.pictures([row])
    assert len(svgs) == 2
    for svg in svgs:
        root = svg_root(svg)  # parses: nothing broke out of the element
        assert "<script" not in svg
        assert any("<script>" in (t.text or "") for t in root.iter("text"))


"""Pictures for the kernel-launch section (HTML only): the queue length over time per device and stream, and the
launch-delay histogram with its median, p90 and p99 marked.

Both are drawn from the JSON's `launch` rows (reports/analyses/launch.py), never from the trace: the queue length
from each stream's reduced `series` (up to ~800 slices, each with its least and greatest value), the histogram from
`delay_histogram` (log_histogram.py's fixed grid) and the exact percentiles of `delay`. Their size is bounded
whatever the trace's: slices are merged per pixel column, and a fixed number of processes and streams is drawn.
"""

from __future__ import annotations

from html import escape
from math import log10
from typing import Any

from madengine_rocprof.reports.formatting import number, shorten
from madengine_rocprof.reports.svg import CHAR_PX, FONT

QUEUE_MAX, QUEUE_MIN = "#56B4E9", "#0072B2"  # Okabe-Ito sky blue (the slice's greatest) over blue (its least)
BARS, MARKS = "#0072B2", "#D55E00"  # Okabe-Ito blue bars, vermilion percentile lines
PROCESSES_DRAWN = 8  # processes given a picture (the JSON has every one)
STREAMS_DRAWN = 8  # streams per process given a lane: those with the most queue events
LANES_DRAWN = 16  # queue lanes in all: each is up to ~30 KB of path
LABEL_CHARS = 22
TICKS = {0} | {10 ** k for k in range(2, 13)}  # histogram ticks


def label(row: dict[str, Any]) -> str:
    rank = f"rank {row['rank']}, " if row.get("rank") is not None else ""
    return f"{rank}{row['origin']}"


def _duration(ns: float) -> str:
    """A short duration for an axis: 250 ns, 1.6 us, 10 us, 1.3 ms, 2 s."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def _clip(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


# --- queue length over time ---------------------------------------------------------------------------------------

def pixel_steps(series: list[list[int]], lows: list[int], t0: int, scale: float, x_end: float
                ) -> tuple[list[float], list[int], list[int]]:
    """The step function at pixel resolution: (x, least, greatest) points, each held to the next point's x.

    A slice holds its range from its start to the next slice's start. Slices that start in one pixel column are
    merged into one point (their least and greatest) held to the column's end; from there the column's last slice
    holds on its own, until the next slice starts (or x_end, the last event). At most two points per pixel column,
    whatever the number of slices."""
    xs: list[float] = []
    his: list[int] = []
    los: list[int] = []
    column = -1  # the pixel column of the current point (none yet)
    merged = 0  # slices merged into the current column's point
    last = (0, 0)
    for (t, hi), lo in zip(series, lows, strict=True):
        x = (t - t0) * scale
        if merged and int(x) == column:
            his[-1] = max(his[-1], hi)
            los[-1] = min(los[-1], lo)
            merged += 1
        else:
            if merged > 1:  # the column's last slice goes on after the column
                xs.append(column + 1.0)
                los.append(last[0])
                his.append(last[1])
            column, merged = int(x), 1
            xs.append(x)
            his.append(hi)
            los.append(lo)
        last = (lo, hi)
    if merged > 1 and column + 1.0 < x_end:
        xs.append(column + 1.0)
        los.append(last[0])
        his.append(last[1])
    return xs, los, his


def _step_area(xs: list[float], values: list[int], x_end: float, left: float, base: float, px_per: float) -> str:
    """A closed step path: along the base, up to each value at its x, held to the next x, down at x_end."""
    d = [f"M{left + xs[0]:.1f} {base:.1f}"]
    for x, v in zip(xs, values, strict=True):
        d.append(f"H{left + x:.1f}V{base - v * px_per:.1f}")
    d.append(f"H{left + x_end:.1f}V{base:.1f}Z")
    return "".join(d)


def queue_svg(streams: list[dict[str, Any]], caption: str = "", width: int = 1000, lane: int = 44) -> str:
    """One lane per (device, stream) of one process, on one time axis from its first queue event to its last: the
    greatest queue length of each slice (light) over its least (dark); where they are equal the lane is dark."""
    streams = [s for s in streams if s.get("series") and len(s.get("series_min") or []) == len(s["series"])]
    if not streams:
        return ""
    t0 = min(s["series"][0][0] for s in streams)
    t1 = max(s.get("series_end", s["series"][-1][0]) for s in streams)
    label_w, right, gap, axis, head = LABEL_CHARS * CHAR_PX + 8, 70, 10, 40, 20
    plot_w = width - label_w - right
    scale = plot_w / max(t1 - t0, 1)
    height = head + gap + len(streams) * (lane + gap) + axis
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" {FONT}>',
             f'<text x="4" y="14" font-weight="bold">{escape(caption)}</text>']
    for n, s in enumerate(streams):
        top = head + gap + n * (lane + gap)
        base = top + lane
        peak = max(max(v for _, v in s["series"]), 1)
        px_per = lane / peak
        x_end = (s.get("series_end", s["series"][-1][0]) - t0) * scale
        xs, los, his = pixel_steps(s["series"], s["series_min"], t0, scale, x_end)
        name = f"device {s['device']}, stream {s['stream']}"
        mean = "–" if s.get("mean") is None else number(s["mean"])
        empty = "–" if s.get("empty_share") is None else f"{100 * s['empty_share']:.1f}%"
        title = f"{name}: max {s.get('max', peak)} queued, mean {mean}, nothing queued {empty} of the time"
        parts.append(f'<g><title>{escape(title)}</title>'
                     f'<text x="{label_w - 8:.1f}" y="{top + lane / 2 + 4:.1f}" text-anchor="end">'
                     f'{escape(_clip(name))}</text>'
                     f'<rect x="{label_w:.1f}" y="{top}" width="{plot_w:.1f}" height="{lane}" fill="#f6f8fa"/>'
                     f'<path class="queue-max" d="{_step_area(xs, his, x_end, label_w, base, px_per)}" '
                     f'fill="{QUEUE_MAX}"/>'
                     f'<path class="queue-min" d="{_step_area(xs, los, x_end, label_w, base, px_per)}" '
                     f'fill="{QUEUE_MIN}"/>'
                     f'<text x="{label_w + plot_w + 6:.1f}" y="{top + 10:.1f}">{peak}</text>'
                     f'<text x="{label_w + plot_w + 6:.1f}" y="{base:.1f}">0</text></g>')
    base = head + gap + len(streams) * (lane + gap)
    for n in range(6):  # a time axis from the first queue event
        t = t0 + (t1 - t0) * n / 5
        x = label_w + (t - t0) * scale
        parts.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 5}" stroke="#57606a"/>'
                     f'<text x="{x:.1f}" y="{base + 18}" text-anchor="middle">{number((t - t0) / 1e6)} ms</text>')
    parts.append(f'<text x="{label_w:.1f}" y="{base + 34}" fill="#57606a">operations queued (launched, not started) '
                 "per stream; light: the most in each pixel's time, dark: the fewest</text>")
    parts.append("</svg>")
    return "".join(parts)


# --- launch-delay histogram ---------------------------------------------------------------------------------------

def _slot(value: float, bins: list[list[int]]) -> float | None:
    """Where a value lies on the histogram's axis, in bins: its bin's index plus its log-scaled place inside (the
    0 bin: its middle). None outside the bins."""
    for i, (lo, hi, _) in enumerate(bins):
        if lo <= value < hi:
            if lo == 0:
                return i + 0.5
            return i + (log10(value) - log10(lo)) / (log10(hi) - log10(lo))
    return None


def delay_svg(histogram: list[list[int]], delay: dict[str, Any], caption: str = "", width: int = 1000,
              height: int = 270) -> str:
    """Bars of launches per delay bin, equal width per bin (a log axis from 100 ns on: ten bins per decade; one bin
    for 0 and one for 1-99 ns before it), with the median, p90 and p99 of the exact distribution marked."""
    if not histogram:
        return ""
    total = sum(n for *_, n in histogram) or 1
    tallest = max(n for *_, n in histogram) or 1
    left, right, up, down = 70, 20, 66, 40
    plot_w, plot_h = width - left - right, height - up - down
    slot_w = plot_w / len(histogram)
    base = up + plot_h
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" {FONT}>',
             f'<text x="4" y="14" font-weight="bold">{escape(caption)}</text>',
             f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#57606a"/>',
             f'<text x="{left - 6}" y="{up + 4}" text-anchor="end">{tallest:,}</text>',
             f'<text x="{left - 6}" y="{base}" text-anchor="end">0</text>']
    for i, (lo, hi, n) in enumerate(histogram):
        h = plot_h * n / tallest
        what = "0 ns" if lo == 0 else f"{_duration(lo)} to {_duration(hi)}"
        title = f"delay {what}: {n:,} launches ({100 * n / total:.1f}%)"
        parts.append(f'<rect class="bin" x="{left + i * slot_w + 0.5:.1f}" y="{base - h:.1f}" '
                     f'width="{max(slot_w - 1, 0.5):.1f}" height="{h:.1f}" fill="{BARS}" data-count="{n}">'
                     f"<title>{escape(title)}</title></rect>")
        if lo in TICKS:  # 0 and each decade from 100 ns
            at = left + (i + 0.5 if lo == 0 else i) * slot_w  # 0 under its bar, a decade at its bin's start
            # narrow bins: 100 ns, two bins after the 0, starts at its tick rather than over the 0
            anchor = "start" if lo == 100 and slot_w < 18 else "middle"
            parts.append(f'<line x1="{at:.1f}" y1="{base}" x2="{at:.1f}" y2="{base + 4}" stroke="#57606a"/>'
                         f'<text x="{at:.1f}" y="{base + 16}" text-anchor="{anchor}">'
                         f"{_duration(lo) if lo else 0}</text>")
    for n, (key, name) in enumerate((("p50_ns", "median"), ("p90_ns", "p90"), ("p99_ns", "p99"))):
        value = delay.get(key)
        where = None if value is None else _slot(value, histogram)
        if value is None or where is None:
            continue
        x = left + where * slot_w
        y = 30 + 13 * n  # one label line per mark: close percentiles stay readable
        anchor = "end" if x > left + plot_w * 0.8 else "start"
        parts.append(f'<g><title>{escape(f"{name} launch delay: {value:,} ns")}</title>'
                     f'<line class="mark" x1="{x:.1f}" y1="{y - 10}" x2="{x:.1f}" y2="{base}" stroke="{MARKS}" '
                     f'stroke-dasharray="4 3" stroke-width="1.5" data-ns="{value}"/>'
                     f'<text x="{x + (3 if anchor == "start" else -3):.1f}" y="{y}" fill="{MARKS}" '
                     f'text-anchor="{anchor}">{name} {_duration(value)}</text></g>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">launch delay (end of the '
                 "launching call to GPU start; ten bins per decade) — launches per bin</text>")
    parts.append("</svg>")
    return "".join(parts)


def _place(stream: dict[str, Any]) -> tuple:
    """A stream's order: by device, then stream; a null one (a trace that gave none) last, never compared to a
    number."""
    return tuple((stream.get(k) is None, stream.get(k) or 0) for k in ("device", "stream"))


def pictures(rows: list[dict[str, Any]]) -> list[str]:
    """The SVGs of the first PROCESSES_DRAWN processes: each one's delay histogram, then its queue lanes (the
    busiest STREAMS_DRAWN streams, LANES_DRAWN in all)."""
    out = []
    lanes_left = LANES_DRAWN
    for row in rows[:PROCESSES_DRAWN]:
        name = shorten(label(row), 60)
        out.append(delay_svg(row.get("delay_histogram") or [], row["delay"],
                             f"Launch delay, {name}: {row['delay']['count']:,} launches"))
        streams = sorted(row["streams"], key=lambda s: (-(s.get("points") or 0), *_place(s)))
        drawn = sorted(streams[:min(STREAMS_DRAWN, lanes_left)], key=_place)
        lanes_left -= len(drawn)
        shown = f" ({len(drawn)} busiest of {len(streams)} streams)" if len(streams) > len(drawn) else ""
        out.append(queue_svg(drawn, f"Queue length over time, {name}{shown}"))
    return [svg for svg in out if svg]

"""Small inline-SVG bar charts, generated as text (no plotting library).

Each function returns one `<svg>` element with a viewBox so the page can scale it; every bar has a
`<title>` so hovering shows the exact value and the full kernel name.
"""
from __future__ import annotations

from html import escape
from math import floor, log10, sqrt

from madengine_rocprof.reports.categories import CATEGORIES
from madengine_rocprof.reports.formatting import shorten

# Okabe-Ito palette: distinguishable with the common colour-vision deficiencies
# (Okabe-Ito; convolution and allocation/view take Paul Tol's teal and dark grey)
CATEGORY_COLORS = dict(zip(CATEGORIES, ("#0072B2", "#44AA99", "#E69F00", "#009E73", "#56B4E9", "#F0E442", "#882255",
                                         "#CC79A7", "#D55E00", "#555555", "#999999"), strict=True))
CHAR_PX = 7.5  # glyph width of the 12px monospace chart font (7.2 px) plus a margin, for laying out labels
FONT = 'font-family="ui-monospace,Menlo,Consolas,monospace" font-size="12"'


def _label_width(labels: list[str], max_chars: int) -> float:
    return min(max((len(s) for s in labels), default=4), max_chars) * CHAR_PX + 16


def _clip(text: str, max_chars: int) -> str:
    return shorten(text, max_chars)


def hbars(
    items: list[tuple[str, float, str, str, str]], width: int = 900, max_label_chars: int = 48, bar_height: int = 20
) -> str:
    """Horizontal bars: items are (label, value, value text, colour, hover title)."""
    if not items:
        return ""
    label_w = _label_width([i[0] for i in items], max_label_chars)
    value_w = max(len(i[2]) for i in items) * CHAR_PX + 12
    plot_w = max(width - label_w - value_w, 100)
    top = max(i[1] for i in items) or 1
    gap = 6
    height = len(items) * (bar_height + gap) + gap
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" {FONT}>']
    for n, (label, value, text, color, title) in enumerate(items):
        y = gap + n * (bar_height + gap)
        w = max(plot_w * value / top, 1 if value > 0 else 0)
        mid = y + bar_height / 2 + 4
        parts.append(
            f"<g><title>{escape(title)}</title>"
            f'<text x="{label_w - 8:.1f}" y="{mid:.1f}" '
            f'text-anchor="end">{escape(_clip(label, max_label_chars))}</text>'
            f'<rect x="{label_w:.1f}" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{color}" rx="2"/>'
            f'<text x="{label_w + w + 6:.1f}" y="{mid:.1f}">{escape(text)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def stacked_hbars(rows: list[tuple[str, list[tuple[str, float, str]]]], value_text: list[str], width: int = 900,
                  max_label_chars: int = 36, bar_height: int = 26, normalize: bool = False) -> str:
    """One bar per row made of segments (segment name, value, colour); a legend of segment names below."""
    if not rows:
        return ""
    label_w = _label_width([r[0] for r in rows], max_label_chars)
    value_w = max((len(t) for t in value_text), default=0) * CHAR_PX + 12
    plot_w = max(width - label_w - value_w, 100)
    totals = [sum(v for _, v, _ in segs) for _, segs in rows]
    top = max(totals) or 1
    gap = 8
    # legend in segment order (the order bars are stacked), only segments that appear somewhere
    legend_names = []
    for position in range(max(len(segs) for _, segs in rows)):
        for _, segs in rows:
            if position < len(segs) and segs[position][1] > 0 and segs[position][::2] not in legend_names:
                legend_names.append(segs[position][::2])
    # legend items laid out left to right, wrapping to a new line at the chart's width
    legend_pos, x, line = [], label_w, 0
    for name, color in legend_names:
        item_w = 16 + len(name) * CHAR_PX + 18
        if x + item_w > width and x > label_w:
            x, line = label_w, line + 1
        legend_pos.append((name, color, x, line))
        x += item_w
    legend_h = 20 * (line + 1) + 8
    height = len(rows) * (bar_height + gap) + gap + legend_h
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" {FONT}>']
    for n, ((label, segs), total, text) in enumerate(zip(rows, totals, value_text, strict=True)):
        y = gap + n * (bar_height + gap)
        scale = plot_w / (total if normalize and total else top)
        x = label_w
        parts.append(f'<text x="{label_w - 8:.1f}" y="{y + bar_height / 2 + 4:.1f}" text-anchor="end">'
                     f'{escape(_clip(label, max_label_chars))}</text>')
        for name, value, color in segs:
            if value <= 0:
                continue
            w = max(value * scale, 1.0)  # a tiny share stays visible
            share = value / total if total else 0
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{color}">'
                         f'<title>{escape(f"{label}: {name} {share:.1%}")}</title></rect>')
            if w > 42:
                parts.append(f'<text x="{x + w / 2:.1f}" y="{y + bar_height / 2 + 4:.1f}" text-anchor="middle" '
                             f'fill="#fff">{share:.0%}</text>')
            x += w
        parts.append(f'<text x="{x + 6:.1f}" y="{y + bar_height / 2 + 4:.1f}">{escape(text)}</text>')
    for name, color, x, line in legend_pos:
        y = height - legend_h + 16 + 20 * line
        parts.append(f'<rect x="{x:.1f}" y="{y - 10}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{x + 16:.1f}" y="{y}">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def roofline(points: list[tuple[str, float, float, float, str]], ceilings: list[tuple[str, float]],
             bandwidth_gbs: float, width: int = 900, height: int = 420) -> str:
    """A log-log roofline: the memory roof (TB/s x FLOP/byte) up to each compute ceiling, one circle per point
    (label, FLOP/byte, TFLOP/s, time share, hover title) sized by its share of GPU time."""
    points = [p for p in points if p[1] > 0 and p[2] > 0]
    if not points or not ceilings or bandwidth_gbs <= 0:
        return ""
    tbps = bandwidth_gbs / 1e3
    top = max(c for _, c in ceilings)
    xs = [p[1] for p in points] + [c / tbps for _, c in ceilings]
    ys = [p[2] for p in points] + [top]
    x0, x1 = 10 ** floor(log10(min(xs)) - 0.3), 10 ** (floor(log10(max(xs))) + 1.3)
    y0, y1 = 10 ** floor(log10(min(ys)) - 0.3), 10 ** (floor(log10(top)) + 1)
    left, right, up, down = 70, 20, 16, 44
    plot_w, plot_h = width - left - right, height - up - down

    def px(x: float) -> float:
        return left + plot_w * (log10(x) - log10(x0)) / (log10(x1) - log10(x0))

    def py(y: float) -> float:
        return up + plot_h * (1 - (log10(y) - log10(y0)) / (log10(y1) - log10(y0)))

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" {FONT}>',
             f'<rect x="{left}" y="{up}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#d0d7de"/>']
    for exp in range(round(log10(x0)), round(log10(x1)) + 1):
        parts.append(f'<text x="{px(10 ** exp):.1f}" y="{height - down + 16}" text-anchor="middle">1e{exp}</text>')
    for exp in range(round(log10(y0)), round(log10(y1)) + 1):
        parts.append(f'<text x="{left - 6}" y="{py(10 ** exp) + 4:.1f}" text-anchor="end">1e{exp}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">'
                 "arithmetic intensity (FLOP/byte)</text>")
    parts.append(f'<text x="14" y="{up + plot_h / 2:.1f}" transform="rotate(-90 14 {up + plot_h / 2:.1f})" '
                 'text-anchor="middle">TFLOP/s</text>')
    for n, (name, peak) in enumerate(sorted(ceilings, key=lambda c: -c[1])):
        ridge = peak / tbps
        colour = "#555555" if n == 0 else "#999999"
        start = max(x0, y0 / tbps)  # the memory roof enters the plot at its left or bottom edge
        parts.append(f'<g><title>{escape(f"{name}: {peak:,.1f} TFLOP/s, ridge at {ridge:,.1f} FLOP/byte")}</title>'
                     f'<line x1="{px(start):.1f}" y1="{py(start * tbps):.1f}" x2="{px(ridge):.1f}" '
                     f'y2="{py(peak):.1f}" stroke="{colour}" stroke-width="2"/>'
                     f'<line x1="{px(ridge):.1f}" y1="{py(peak):.1f}" x2="{px(x1):.1f}" y2="{py(peak):.1f}" '
                     f'stroke="{colour}" stroke-width="2"/>'
                     f'<text x="{px(x1) - 4:.1f}" y="{py(peak) - 4:.1f}" text-anchor="end">{escape(name)}</text></g>')
    parts.append(f'<text x="{left + 8}" y="{up + 16}" fill="#57606a">one circle per (operator, shape) group, its '
                 'area the GPU time; roofs: HBM bandwidth, then each dtype\'s peak (hover for values)</text>')
    for _label, x, y, share, title in sorted(points, key=lambda p: -p[3]):
        r = 3 + 12 * sqrt(max(share, 0.0))
        parts.append(f'<g><title>{escape(title)}</title><circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{r:.1f}" '
                     f'fill="#0072B2" fill-opacity="0.55" stroke="#0072B2"/></g>')
    parts.append("</svg>")
    return "".join(parts)

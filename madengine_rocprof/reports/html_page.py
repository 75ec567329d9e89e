"""Render the report's sections (sections.py) as one self-contained HTML page: inline CSS and SVG, no scripts,
no network."""
from __future__ import annotations

import re
from html import escape

from madengine_rocprof.reports import blocks, markdown, sections
from madengine_rocprof.reports.formatting import FORMATS, shorten
from madengine_rocprof.reports.svg import CATEGORY_COLORS, hbars, roofline, stacked_hbars
from madengine_rocprof.wrapper.contracts import Report

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1100px;
padding:0 16px;color:#1f2328}
h1{font-size:1.6em;margin-bottom:4px}h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:36px}
h3{margin-top:24px;font-size:1.05em}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f6f8fa}td.l,th.l{text-align:left}
td.name{text-align:left;font-family:ui-monospace,Menlo,Consolas,monospace;max-width:520px;word-break:break-all}
tr.base td{background:#fff8c5}.meta{color:#57606a;font-size:13px;margin:2px 0}.note{color:#9a6700;font-size:13px}
.fact{margin:4px 0}
.chart{max-width:100%;height:auto;display:block;margin:8px 0}
.swatch{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}
"""


def _inline(text: str) -> str:
    """Escaped text with the sections' `code` and **bold** spans as HTML."""
    html = escape(text)
    html = re.sub(r"`([^`]*)`", r"<code>\1</code>", html)
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html)


def _table(block: sections.Table, name_width: int) -> str:
    head = "".join(f'<th class="l">{escape(c.title)}</th>' if i == 0 or c.format in ("kernel", "text", "label")
                   else f"<th>{escape(c.title)}</th>" for i, c in enumerate(block.columns))
    body = []
    for n, row in enumerate(block.rows):
        cells = []
        for i, (column, value) in enumerate(zip(block.columns, row, strict=True)):
            if column.format == "kernel":
                cells.append(f'<td class="name" title="{escape(value)}">{escape(shorten(value, name_width))}</td>')
            else:
                text = escape(FORMATS[column.format](value))
                cells.append(
                    f'<td class="l">{text}</td>' if i == 0 or column.format in ("text", "label") else f"<td>{text}</td>"
                )
        row_class = ' class="base"' if block.marked and block.marked[n] else ""
        body.append(f"<tr{row_class}>{''.join(cells)}</tr>")
    note = f"<p class='meta'>{_inline(block.note)}</p>" if block.note else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"


def _lines(block: sections.Lines) -> str:
    cls = {"meta": "meta", "item": "fact", "note": "note"}[block.kind]
    return "\n".join(f"<p class='{cls}'>{_inline(line)}</p>" for line in block.lines)


def _colour(key: str) -> str:
    return CATEGORY_COLORS.get(key, key)


def _block(block: blocks.Block, name_width: int) -> str:
    if isinstance(block, sections.Table):
        return _table(block, name_width)
    if isinstance(block, sections.Lines):
        return _lines(block)
    if isinstance(block, blocks.Picture):
        return block.svg
    if isinstance(block, sections.Bars):
        chart = hbars([(label, value, text, _colour(key), title) for label, value, text, key, title in block.bars],
                      width=block.width, max_label_chars=block.max_label_chars)
        keys = [key for *_, key, _ in block.bars]
        if all(key in CATEGORY_COLORS for key in keys):  # bars coloured by category: a legend
            legend = [c for c in CATEGORY_COLORS if c in keys]
            chart += "<p class='meta'>" + " ".join(
                f"<span class='swatch' style='background:{CATEGORY_COLORS[c]}'></span>{escape(c)}&nbsp;&nbsp;"
                for c in legend) + "</p>"
        return chart
    if isinstance(block, blocks.Roofline):
        return roofline(block.points, block.ceilings, block.bandwidth_gbs)
    return stacked_hbars([(label, [(c, v, _colour(c)) for c, v in segments]) for label, segments in block.rows],
                         block.value_text, normalize=block.normalize)


def render(report: Report, top: int = 10, name_width: int = 240) -> str:
    runs = report["runs"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>Profiling report: {escape(', '.join(r['label'] for r in runs))}</title>"
        f"<style>{CSS}</style></head><body>",
        "<h1>Profiling report</h1>",
        f"<p class='meta'>{len(runs)} run(s), baseline <b>{escape(report['baseline'])}</b>, generated "
        f"{escape(report['generated_at'])} by madengine-rocprof report. Kernel time is the sum of kernel durations "
        "(overlapping kernels count in full); device busy time is the union of kernels, copies and memsets per device "
        "(definitions in the busy-time section).</p>",
    ]
    for section in sections.build(report, top):
        anchor = f" id='{escape(section.anchor)}'" if section.anchor else ""
        parts.append(f"<h{section.level}{anchor}>{escape(section.title)}</h{section.level}>")
        parts += [_block(block, name_width) for block in section.blocks]
    parts.append("</body></html>")
    # the one control-byte escaper, over the whole page and its inline SVG (as markdown.escape does for Markdown):
    # a NUL or ESC from a kernel, operator or device name is invalid in HTML and XML and drives a terminal that
    # shows the file; html.escape leaves both as they are
    return markdown.show_controls("\n".join(parts) + "\n")

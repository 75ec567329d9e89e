"""Render the report's sections (sections.py) as Markdown: what `madengine-rocprof report` prints by default.

Charts are left out (Markdown has none); everything else the HTML page shows is here too.
"""
from __future__ import annotations

import re

from madengine_rocprof.reports import sections
from madengine_rocprof.reports.formatting import FORMATS, display_name, shorten
from madengine_rocprof.wrapper.contracts import Report

# What a kernel name, a label or a path must not carry into a Markdown file: control bytes (ESC sequences drive a
# terminal that shows the file, NUL ends C strings) and the `<` that opens an HTML tag (`<script>`, `</td>`, and
# `<float>` too, which a Markdown viewer would drop as an unknown tag).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")


def show_controls(text: str) -> str:
    """Every control character except newline and tab shown as an escape (`\\x1b`): for files and the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def escape(document: str) -> str:
    """The one escaper of every Markdown document the commands write (report, compare, escalate, kernels): control
    characters shown as `\\xNN`, a tag-opening `<` as `&lt;` outside code spans (inside them nothing is HTML)."""
    document = show_controls(document)
    if "<" not in document:
        return document
    lines = []
    for line in document.split("\n"):
        parts = line.split("`")
        if len(parts) % 2 == 0:  # an unpaired backtick (a name holding one): no code span to trust on this line,
            parts = [line.replace("<", "&lt;").replace("`", "\\`")]  # so every `<` is text (`<\`a` too)
        lines.append("`".join(_TAG_OPEN.sub("&lt;", p) if i % 2 == 0 else p for i, p in enumerate(parts)))
    return "\n".join(lines)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _table(block: sections.Table, name_width: int) -> list[str]:
    def fmt(column: sections.Column, value) -> str:
        if column.format == "kernel":
            return shorten(display_name(value), name_width)
        return FORMATS[column.format](value)

    rows = [[fmt(c, v) for c, v in zip(block.columns, row, strict=True)] for row in block.rows]
    for row, marked in zip(rows, block.marked or [], strict=False):
        if marked:
            row[0] += " (baseline)"
    out = table([c.title for c in block.columns], rows)
    return out + [block.note, ""] if block.note else out


def _lines(block: sections.Lines) -> list[str]:
    if block.kind == "meta":
        return [" ".join(block.lines), ""]
    return [f"- {line}" for line in block.lines] + [""]


def render(report: Report, top: int = 10, name_width: int = 70) -> str:
    out = ["# Profiling report", ""]
    for section in sections.build(report, top):
        body: list[str] = []
        for block in section.blocks:
            if isinstance(block, sections.Table):
                body += _table(block, name_width)
            elif isinstance(block, sections.Lines):
                body += _lines(block)
        if not body:
            continue  # only charts
        out += ["#" * section.level + " " + section.title, ""] + body
    return escape("\n".join(out).rstrip() + "\n")

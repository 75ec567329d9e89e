"""The building blocks of a report section (prose lines, typed tables, charts) and the section itself.

They live apart from sections.py so that the modules that build sections (sections.py, multinode.py) and those
that render them (markdown.py, html_page.py) share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# how a column's values are shown: formatting.FORMATS maps each to a function; `kernel` is a full kernel name
# (Markdown shows a short display name, HTML the full name on hover), `label` a run label, `text` as given
Format = Literal["text", "label", "kernel", "count", "ms", "us", "pct", "number", "times", "gib"]


@dataclass(frozen=True)
class Column:
    title: str
    format: Format = "text"


@dataclass
class Table:
    columns: list[Column]
    rows: list[list]
    marked: list[bool] | None = None  # rows to highlight (the baseline): Markdown appends " (baseline)"
    note: str | None = None  # a line under the table


@dataclass
class Lines:
    """Prose lines; `kind` says how they look: meta (small print), item (a fact), note (a warning)."""

    lines: list[str]
    kind: Literal["meta", "item", "note"] = "item"


@dataclass
class Bars:
    """Horizontal bars (HTML only): (label, value, value text, category or colour, hover title) per bar."""

    bars: list[tuple[str, float, str, str, str]]
    width: int = 900
    max_label_chars: int = 48


@dataclass
class Stacked:
    """One bar per row stacked by category (HTML only): (label, [(category, value)]) rows, a text per row."""

    rows: list[tuple[str, list[tuple[str, float]]]]
    value_text: list[str]
    normalize: bool = False


@dataclass
class Picture:
    """A ready-made inline SVG (HTML only; Markdown leaves it out), e.g. the per-rank collectives timeline."""

    svg: str


@dataclass
class Roofline:
    """A roofline chart (HTML only): log-log achieved TFLOP/s against FLOPs per byte, under the device's ceilings.

    points: (label, intensity FLOP/byte, achieved TFLOP/s, GPU time share 0..1 for the marker size, hover title);
    ceilings: (name, peak TFLOP/s) compute roofs; bandwidth_gbs: the memory roof's slope."""

    points: list[tuple[str, float, float, float, str]]
    ceilings: list[tuple[str, float]]
    bandwidth_gbs: float


Block = Lines | Table | Bars | Stacked | Roofline | Picture


@dataclass
class Section:
    title: str
    level: int = 3  # 2: a run or the comparison; 3: a part of one
    blocks: list[Block] = field(default_factory=list)
    anchor: str | None = None

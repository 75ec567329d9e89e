"""Number and name formatting shared by the Markdown and HTML renderers."""
from __future__ import annotations

DASH = "–"


def ms(ns) -> str:
    return DASH if ns is None else f"{ns / 1e6:,.3f}"


def us(ns) -> str:
    return DASH if ns is None else f"{ns / 1e3:,.2f}"


def pct(fraction) -> str:
    return DASH if fraction is None else f"{100 * fraction:.1f}%"


def times(ratio) -> str:
    return DASH if ratio is None else f"{ratio:.2f}x"


def count(value) -> str:
    return DASH if value is None else f"{value:,}"


def number(value) -> str:
    if value is None:
        return DASH
    if isinstance(value, int) or (abs(value) >= 1000 and float(value).is_integer()):
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.4g}"


def gib(num_bytes) -> str:
    return DASH if num_bytes is None else f"{num_bytes / 2**30:.2f}"


def shorten(name: str, width: int) -> str:
    """Long C++ template names cut in the middle, keeping the start (what) and the end (arguments)."""
    name = " ".join(name.split())
    if width <= 0 or len(name) <= width:
        return name
    head = (width - 1) * 2 // 3
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]

"""Number and name formatting shared by the Markdown and HTML renderers."""
from __future__ import annotations

import re

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


def size(num_bytes) -> str:
    """Bytes with the binary unit that keeps them readable: 288 KiB, not 0.00 GiB."""
    if num_bytes is None:
        return DASH
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(num_bytes) >= scale:
            return f"{num_bytes / scale:.2f} {unit}"
    return f"{int(num_bytes)} B"


def text(value) -> str:
    return DASH if value is None else str(value)


# a table column's format (blocks.Format) -> how its values are written; `kernel` is the renderers' own
FORMATS = {
    "text": text,
    "label": text,
    "count": count,
    "ms": ms,
    "us": us,
    "pct": pct,
    "number": number,
    "times": times,
    "gib": gib,
}


def shorten(name: str, width: int) -> str:
    """Long C++ template names cut in the middle, keeping the start (what) and the end (arguments)."""
    name = " ".join(name.split())
    if width <= 0 or len(name) <= width:
        return name
    head = (width - 1) * 2 // 3
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


_QUALIFIER = re.compile(r"\(anonymous namespace\)::|\b[A-Za-z_]\w*::")
_PLAIN = (
    r"(?:(?:const |unsigned )?(?:float|double|half|Half|BFloat16|bfloat16|int|long|short|char|bool|\d+u?l?l?)\s*\**)"
)
_PLAIN_TEMPLATE = re.compile(rf"<{_PLAIN}(?:,\s*{_PLAIN})*>")


def display_name(name: str) -> str:
    """A C++ kernel name without `void `, namespaces and the argument list: what tells kernels apart.

    `void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, ...)` becomes
    `vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>`. Names without C++ syntax are kept as they are.
    """
    text = " ".join(name.split())
    if not (text.startswith("void ") or "<" in text or text.endswith(")")):
        return text  # not C++ syntax: `aten::mm`, `Cijk_...`, Triton names stay whole
    if text.startswith("void "):
        text = text[5:]
    if text.endswith(")") and "(" in text:
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                if i > 0:  # keep names that are entirely parenthesised
                    text = text[:i]
                break
    text = _QUALIFIER.sub("", text).strip()
    # template argument lists of plain types and numbers (`<float>`, `<char*, 3ul>`) say little: fold them
    text = _PLAIN_TEMPLATE.sub(lambda m: "<…>" if m.group(0) != "<…>" else m.group(0), text)
    return text or name

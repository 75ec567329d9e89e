"""The report's JSON text, as `json.dump(data, fh, indent=1, default=str, allow_nan=False)` writes it, only faster.

With an indent, Python's json module encodes in pure Python, a generator per value: 5 s for a report listing 100k
kernels (it lists every kernel the trace has), a minute for 1M. Here each dict of plain values (a kernel row) becomes
one string, its values encoded by the same functions json uses (the C string encoder, int and float repr), so the
text is the same byte for byte; anything else (keys that are not strings, values json converts with `default`) is
handed to json itself and indented to its place.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as _string  # json.dump's own string encoder (ensure_ascii)
from typing import IO, Any


def _float(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return json.dumps(value, allow_nan=False)  # raises json's own ValueError
    return float.__repr__(value)


# exact types only: a subclass (an IntEnum, a str subclass) goes the general way, as in json
_PLAIN = {
    str: _string,
    int: int.__repr__,
    float: _float,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}


def _by_json(value: Any, level: int) -> str:
    """json's own text for `value`, indented as if it stood `level` deep (JSON strings hold no raw line breaks)."""
    text = json.dumps(value, indent=1, default=str, allow_nan=False)
    return text.replace("\n", "\n" + " " * level) if level else text


def _flat_dict(value: dict, level: int) -> str | None:
    """A dict of plain values with string keys as one string; None when it holds anything else."""
    if not value:
        return "{}"
    parts = []
    for key, item in value.items():
        encode = _PLAIN.get(type(item))
        if encode is None or type(key) is not str:
            return None
        parts.append(_string(key) + ": " + encode(item))
    inner = "\n" + " " * (level + 1)
    return "{" + inner + ("," + inner).join(parts) + "\n" + " " * level + "}"


def chunks(value: Any, level: int = 0) -> Iterator[str]:
    """The JSON text of `value` in pieces (one per list item or dict entry at most)."""
    encode = _PLAIN.get(type(value))
    if encode is not None:
        yield encode(value)
    elif type(value) in (list, tuple):
        if not value:
            yield "[]"
            return
        inner = "\n" + " " * (level + 1)
        yield "[" + inner
        for i, item in enumerate(value):
            if i:
                yield "," + inner
            yield from chunks(item, level + 1)
        yield "\n" + " " * level + "]"
    elif type(value) is dict:
        flat = _flat_dict(value, level)
        if flat is not None:
            yield flat
            return
        if any(type(key) is not str for key in value):
            yield _by_json(value, level)
            return
        inner = "\n" + " " * (level + 1)
        yield "{" + inner
        for i, (key, item) in enumerate(value.items()):
            yield ("," + inner if i else "") + _string(key) + ": "
            yield from chunks(item, level + 1)
        yield "\n" + " " * level + "}"
    else:
        yield _by_json(value, level)


def dump(value: Any, fh: IO[str]) -> None:
    """Write `value` as `json.dump(value, fh, indent=1, default=str, allow_nan=False)` would."""
    batch: list[str] = []
    for piece in chunks(value):
        batch.append(piece)
        if len(batch) >= 4096:
            fh.write("".join(batch))
            batch.clear()
    fh.write("".join(batch))

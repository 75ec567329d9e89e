"""The report's JSON text, as `json.dump(data, fh, indent=1, default=str, allow_nan=False)` writes it, only faster.

With an indent, Python's json module encodes in pure Python, a generator per value: 5 s for a report listing 100k
kernels (it lists every kernel the trace has), a minute for 1M. Here each dict of plain values (a kernel row) becomes
one string, its values encoded by the same functions json uses (the C string encoder, int and float repr), so the
text is the same byte for byte; anything else (keys that are not strings, values json converts with `default`) is
handed to json itself and indented to its place.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring_ascii as _string  # json.dump's own string encoder (ensure_ascii)
from operator import itemgetter
from typing import IO, Any


def _float(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return json.dumps(value, allow_nan=False)  # raises json's own ValueError
    return float.__repr__(value)


# exact types only: a subclass (an IntEnum, a str subclass) goes the general way, as in json
_PLAIN: dict[type, Callable[[Any], str]] = {
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


def _plain(value: Any) -> str:
    return _PLAIN[type(value)](value)


def _same_rows(rows: list, level: int) -> str | None:
    """Dicts with the same string keys in the same order and plain values (the kernel rows), encoded a column at a
    time (one `map` of json's own encoder per key) and set in one format string per row; None for other lists."""
    first = rows[0]
    if type(first) is not dict or not first or any(type(key) is not str for key in first):
        return None
    keys = tuple(first)
    if any(type(row) is not dict or tuple(row) != keys for row in rows):
        return None
    columns = []
    for key in keys:
        column = list(map(itemgetter(key), rows))
        kinds = set(map(type, column))
        if not kinds <= _PLAIN.keys():
            return None
        if kinds == {str}:
            columns.append(list(map(_string, column)))
        elif kinds == {int}:
            columns.append(list(map(int.__repr__, column)))
        elif kinds == {float} and all(map(math.isfinite, column)):
            columns.append(list(map(float.__repr__, column)))
        elif kinds == {type(None)}:
            columns.append(["null"] * len(column))
        else:
            columns.append(list(map(_plain, column)))
    inner = "\n" + " " * (level + 1)
    fields = ("," + inner).join(_string(key).replace("{", "{{").replace("}", "}}") + ": {}" for key in keys)
    template = "{{" + inner + fields + "\n" + " " * level + "}}"
    return ("," + "\n" + " " * level).join(map(template.format, *columns))


_ROWS_AT_ONCE = 4096  # the column encoding holds this many rows' text at a time


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
        for start in range(0, len(value), _ROWS_AT_ONCE):
            part = value[start : start + _ROWS_AT_ONCE]
            if start:
                yield "," + inner
            rows = _same_rows(part, level + 1) if type(part[0]) is dict else None
            if rows is not None:
                yield rows
                continue
            for i, item in enumerate(part):
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
    size = 0
    for piece in chunks(value):
        batch.append(piece)
        size += len(piece)
        if size >= 1 << 20:  # written by the MiB: a report listing 1M kernels is ~500 MB of text
            fh.write("".join(batch))
            batch.clear()
            size = 0
    fh.write("".join(batch))

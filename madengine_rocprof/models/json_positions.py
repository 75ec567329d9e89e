"""Line and column of every value in a JSON text, by JSON path, so validation errors can point into the file.

Only used after json.loads accepted the text, so this scanner can assume well-formed input.
"""
from __future__ import annotations

import json
import re

_WS = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


def value_positions(text: str) -> dict[tuple, tuple[int, int]]:
    """{(key or index, ...): (line, column)} for the start of every value; () is the top level. 1-based."""
    positions: dict[tuple, tuple[int, int]] = {}
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(offset: int) -> tuple[int, int]:
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:  # last line start <= offset
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if line_starts[mid] <= offset else (lo, mid - 1)
        return lo + 1, offset - line_starts[lo] + 1

    def skip(i: int) -> int:
        blank = _WS.match(text, i)  # the pattern matches the empty string too: never None
        return blank.end() if blank else i

    def value(i: int, path: tuple) -> int:
        i = skip(i)
        positions[path] = where(i)
        if text[i] == "{":
            i = skip(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                key, i = _decoder.raw_decode(text, skip(i))
                i = skip(i) + 1  # the ':'
                i = skip(value(i, path + (key,)))
                if text[i] == "}":
                    return i + 1
                i += 1  # the ','
        if text[i] == "[":
            i = skip(i + 1)
            if text[i] == "]":
                return i + 1
            index = 0
            while True:
                i = skip(value(i, path + (index,)))
                index += 1
                if text[i] == "]":
                    return i + 1
                i += 1
        return _decoder.raw_decode(text, i)[1]

    value(0, ())
    return positions

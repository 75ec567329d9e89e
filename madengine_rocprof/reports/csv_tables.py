"""Read profiler CSV files by column name, streaming, with errors that name the file and line.

Column names are compared after lower-casing and dropping `_` and spaces, so `Kernel_Name`
(rocprofv3) and `KernelName` (legacy rocprof) are the same column. Extra columns (a leading
`Guid`/`Pid` from rocpd conversion, new columns in later ROCm) are ignored; missing required
columns and rows whose field count differs from the header are errors, never silently skipped.
"""
from __future__ import annotations

import csv
import decimal
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError

# Kernel names (C++ templates) can be long; the default 128 KiB field limit is kept but raised for safety.
csv.field_size_limit(16 * 1024 * 1024)


def normalize(column: str) -> str:
    return column.strip().lstrip("\ufeff").lower().replace("_", "").replace(" ", "")


def read_header(path: Path) -> list[str]:
    """The first row of a CSV file, or [] for an empty file (used to recognise legacy files)."""
    if not inputs.is_regular(path):
        return []
    try:
        with inputs.open_text(path, "CSV file", errors="replace") as fh:
            return next(csv.reader(fh), [])
    except (UserError, OSError, csv.Error):
        return []


def first_value(path: Path, column: str) -> str | None:
    """The value of `column` in the first data row (None if absent): a cheap look at what a file describes."""
    if not inputs.is_regular(path):
        return None
    try:
        with inputs.open_text(path, "CSV file", errors="replace") as fh:
            reader = csv.reader(fh)
            header = [normalize(h) for h in next(reader, [])]
            row = next(reader, None)
    except (UserError, OSError, csv.Error):
        return None
    if row is None or normalize(column) not in header or len(row) != len(header):
        return None
    return row[header.index(normalize(column))]


class Table:
    """An open CSV file: `index[name]` gives the position of a wanted column (or None if absent)."""

    def __init__(self, path: Path, reader, header: list[str], index: dict[str, int | None]) -> None:
        self.path = path
        self.reader = reader
        self.header = header
        self.ncols = len(header)
        self.index = index

    def rows(self) -> Iterator[list[str]]:
        """Rows with exactly as many fields as the header; anything else is a truncated or corrupt file."""
        ncols = self.ncols
        try:
            for row in self.reader:
                if len(row) != ncols:
                    if not row:
                        continue  # a blank line (some writers end with one)
                    raise self.error(
                        f"row has {len(row)} fields but the header has {ncols}",
                        fix="the file looks truncated or corrupt: re-run the profiler and let it exit normally",
                    )
                yield row
        except csv.Error as err:
            raise self.error(f"not valid CSV: {err}", fix="re-run the profiler; the file is corrupt") from None

    @property
    def line(self) -> int:
        return self.reader.line_num

    def error(self, what: str, fix: str | None = None) -> UserError:
        return UserError(what, file=str(self.path), line=self.line, fix=fix)


@contextmanager
def open_table(path: Path, required: dict[str, tuple[str, ...]], optional: dict[str, tuple[str, ...]] | None = None):
    """Open `path`, map each wanted column (by any of its aliases) to its position.

    `required` and `optional` map our name -> accepted header names (compared normalized).
    """
    with inputs.open_text(path, "CSV file", errors="replace") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
        except csv.Error as err:
            raise UserError(f"not valid CSV: {err}", file=str(path), line=1) from None
        if not header:
            raise UserError(
                "empty file: no CSV header",
                file=str(path),
                line=1,
                fix="the profiler was interrupted while writing; re-run it (rocprofv3 writes no file at all when "
                    "nothing was captured)",
            )
        positions = {normalize(name): i for i, name in reversed(list(enumerate(header)))}
        index: dict[str, int | None] = {}
        missing = []
        for key, aliases in required.items():
            pos = next((positions[normalize(a)] for a in aliases if normalize(a) in positions), None)
            if pos is None:
                missing.append(" or ".join(aliases))
            index[key] = pos
        if missing:
            raise UserError(
                f"missing column(s) {', '.join(missing)}; the header has: {', '.join(h.strip() for h in header)}",
                file=str(path),
                line=1,
                fix="pass a rocprofv3/rocprof output file of this kind, unedited",
            )
        for key, aliases in (optional or {}).items():
            index[key] = next((positions[normalize(a)] for a in aliases if normalize(a) in positions), None)
        yield Table(path, reader, header, index)


# No counter or duration reaches this; below it, sums of a trillion values still stay finite in a float.
MAX_NUMBER = 1e30
# What a number in a profiler's CSV looks like: ASCII digits, optional sign, fraction and exponent, surrounding
# blanks. Python's float()/int() accept more ("nan", "1_000", Arabic-Indic digits), which no profiler writes.
INTEGER = re.compile(r"[ \t]*[+-]?[0-9]+[ \t]*")
NUMBER = re.compile(r"[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*")


def parse_number(table: Table, text: str, column: str) -> float:
    """A finite number within +-MAX_NUMBER; anything else is an error naming the line and column."""
    value = float(text) if NUMBER.fullmatch(text) else math.nan
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        problem = "is not a number" if not NUMBER.fullmatch(text) else f"is out of range (over {MAX_NUMBER:g})"
        raise table.error(f"column {column}: {text[:60]!r} {problem}", fix="the file is corrupt; re-run the profiler")
    return value


def parse_int(table: Table, text: str, column: str, low: int = 0, high: int = inputs.INT64_MAX) -> int:
    """A whole number in [low, high] (counts: 0 .. 2^63-1; timestamps pass high=UINT64_MAX, see `parse_time`).
    Decimal notation ("1000.0", "1e3", a float writer's timestamp) is read exactly and truncated toward zero."""
    fix = "the file is corrupt; re-run the profiler"
    if INTEGER.fullmatch(text) and len(text) < 100:
        value = int(text)
    elif NUMBER.fullmatch(text) and len(text) < 10_000:
        try:
            number = decimal.Decimal(text.strip())
        except decimal.InvalidOperation:  # an exponent beyond what decimal represents (over 10^18 in size)
            raise table.error(f"column {column}: {text[:60]!r} has an exponent out of range", fix=fix) from None
        if not low - 1 < number < high + 1:  # before int(): 1e999999999 is an integer no memory holds
            raise _outside(table, text, column, low, high, number > high)
        value = int(number)  # toward zero, into [low, high]
    else:
        raise table.error(f"column {column}: {text[:60]!r} is not a whole number", fix=fix)
    if not low <= value <= high:
        raise _outside(table, text, column, low, high, value > high)
    return value


def _outside(table: Table, text: str, column: str, low: int, high: int, above: bool) -> UserError:
    return table.error(
        f"column {column}: {text.strip()[:60]} is outside [{low}, {high}]" + (
            " (over 2^64-1 ns, the largest unsigned 64-bit timestamp)" if above and high == inputs.UINT64_MAX
            else ""),
        fix="the file is corrupt; re-run the profiler")


def parse_time(table: Table, text: str, column: str) -> int:
    """A timestamp in ns: any unsigned 64-bit value, exactly."""
    return parse_int(table, text, column, high=inputs.UINT64_MAX)

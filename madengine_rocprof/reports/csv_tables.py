"""Read profiler CSV files by column name, streaming, with errors that name the file and line.

Column names are compared after lower-casing and dropping `_` and spaces, so `Kernel_Name`
(rocprofv3) and `KernelName` (legacy rocprof) are the same column. Extra columns (a leading
`Guid`/`Pid` from rocpd conversion, new columns in later ROCm) are ignored; missing required
columns and rows whose field count differs from the header are errors, never silently skipped.
"""
from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from madengine_rocprof.errors import UserError

# Kernel names (C++ templates) can be long; the default 128 KiB field limit is kept but raised for safety.
csv.field_size_limit(16 * 1024 * 1024)


def normalize(column: str) -> str:
    return column.strip().lstrip("\ufeff").lower().replace("_", "").replace(" ", "")


def read_header(path: Path) -> list[str]:
    """The first row of a CSV file, or [] for an empty file (used to recognise legacy files)."""
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            return next(csv.reader(fh), [])
    except (OSError, csv.Error):
        return []


def first_value(path: Path, column: str) -> str | None:
    """The value of `column` in the first data row (None if absent): a cheap look at what a file describes."""
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh)
            header = [normalize(h) for h in next(reader, [])]
            row = next(reader, None)
    except (OSError, csv.Error):
        return None
    if row is None or normalize(column) not in header or len(row) != len(header):
        return None
    return row[header.index(normalize(column))]


class Table:
    """An open CSV file: `index[name]` gives the position of a wanted column (or None if absent)."""

    def __init__(self, path: Path, reader, ncols: int, index: dict[str, int | None]) -> None:
        self.path = path
        self.reader = reader
        self.ncols = ncols
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
    try:
        # opened before the `with` so that only open() errors become "cannot read"
        fh = open(path, newline="", encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as err:
        raise UserError(f"cannot read: {err.strerror}", file=str(path)) from None
    with fh:
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
        yield Table(path, reader, len(header), index)


def parse_number(table: Table, text: str, column: str) -> float:
    """A numeric field; an empty or non-numeric value is an error naming the line and column."""
    try:
        return float(text)
    except ValueError:
        raise table.error(
            f"column {column}: {text!r} is not a number", fix="the file is corrupt; re-run the profiler"
        ) from None


def parse_int(table: Table, text: str, column: str) -> int:
    try:
        return int(text)
    except ValueError:
        value = parse_number(table, text, column)
        if value != value or value in (float("inf"), float("-inf")):
            raise table.error(f"column {column}: {text!r} is not a finite number") from None
        return int(value)

"""Columns of a large SQLite table (or view) as one polars DataFrame, read fast.

Python's sqlite3 builds a Python object per value: 10M rows x 4 columns take about 9 s on a 2-core machine before
polars sees them. With ADBC's SQLite driver (`adbc-driver-sqlite`, a pinned requirement) rows are decoded in C straight
into Arrow batches, which polars takes through the Arrow C stream interface; the driver releases the GIL, so the
table is read as ranges of its integer key, one connection and thread per range (measurements:
benchmarks/reports/README.md). Without the driver, the stdlib reader below gives the same frame, slower.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

try:
    import adbc_driver_manager
    import adbc_driver_sqlite

    ARROW = True
except ImportError:  # installed without it (pip --no-deps, a carried wheel set): the stdlib reader
    ARROW = False

BATCH = 100_000  # rows per batch (Arrow) or per fetchmany (stdlib)
RANGE_ROWS = 1_000_000  # key span below which one range is read: a thread and connection cost more than they save
MAX_RANGES = 4


def uri(path: Path) -> str:
    """A read-only SQLite URI; as_uri percent-encodes spaces, '?' and '#' in the path."""
    return path.resolve().as_uri() + "?mode=ro"


def fetch_rows(con: sqlite3.Connection, query: str, schema: dict) -> pl.DataFrame:
    """A query's rows through the stdlib, batch by batch into polars (small tables, and the fallback)."""
    cursor = con.execute(query)
    chunks = []
    try:
        while rows := cursor.fetchmany(BATCH):
            chunks.append(pl.DataFrame(rows, schema=schema, orient="row"))
    except (TypeError, pl.exceptions.PolarsError) as err:  # a value the schema's type cannot hold
        raise sqlite3.DatabaseError(f"unexpected value type: {err}") from None
    return pl.concat(chunks) if chunks else pl.DataFrame(schema=schema)


def _arrow_range(path: Path, query: str) -> pl.DataFrame:
    database = adbc_driver_sqlite.connect(uri(path))
    try:
        with adbc_driver_manager.AdbcConnection(database) as conn, adbc_driver_manager.AdbcStatement(conn) as stmt:
            stmt.set_sql_query(query)
            stmt.set_options(**{adbc_driver_sqlite.StatementOptions.BATCH_ROWS.value: str(BATCH)})
            stream, _ = stmt.execute_query()
            return pl.DataFrame(stream)
    finally:
        database.close()


def _ranges(con: sqlite3.Connection, source: str, key: str) -> list[tuple[int, int]] | None:
    """Half-open ranges covering [min, max] of an integer key, at most one per core; None: read in one go.

    Every row lies in exactly one range, also where the key repeats (a merged database); a NULL or text key lies in
    none, so then there are no ranges. min and max as separate queries: each is an index lookup through a view."""
    low = con.execute(f"SELECT min({key}) FROM {source}").fetchone()[0]
    high = con.execute(f"SELECT max({key}) FROM {source}").fetchone()[0]
    if not isinstance(low, int) or not isinstance(high, int):  # empty, or a text key (text sorts after numbers)
        return None
    count = min(MAX_RANGES, len(os.sched_getaffinity(0)), (high - low + 1) // RANGE_ROWS)
    if count < 2 or con.execute(f"SELECT EXISTS (SELECT 1 FROM {source} WHERE {key} IS NULL)").fetchone()[0]:
        return None
    bounds = [low + (high - low + 1) * i // count for i in range(count)] + [high + 1]
    return list(zip(bounds, bounds[1:], strict=False))


def read_columns(
    con: sqlite3.Connection, path: Path, source: str, columns: Sequence[str], schema: dict, key: str | None
) -> pl.DataFrame:
    """SELECT columns FROM source as a DataFrame of `schema` (output name -> dtype, in column order).

    key: an integer column (rocpd's `id`, its rowid) to split the read into ranges; every row lies in exactly one
    range, so a key that repeats (a merged database) still reads each row once. Errors are sqlite3.Error."""
    select = f"SELECT {', '.join(columns)} FROM {source}"
    if not ARROW:
        return fetch_rows(con, select, schema)
    ranges = _ranges(con, source, key) if key else None
    queries = [select] if ranges is None else [f"{select} WHERE {key} >= {lo} AND {key} < {hi}" for lo, hi in ranges]
    try:
        with ThreadPoolExecutor(len(queries)) as pool:
            parts = list(pool.map(lambda query: _arrow_range(path, query), queries))
        parts = [part.rename(dict(zip(part.columns, schema, strict=True))) for part in parts]
        for part in parts:
            _check_types(part, schema)
        return pl.concat([part.cast(schema) for part in parts])
    except (adbc_driver_manager.Error, pl.exceptions.PolarsError) as err:  # the stream's errors come via polars
        raise sqlite3.DatabaseError(str(err)) from None


def _check_types(part: pl.DataFrame, schema: dict) -> None:
    """What a cast would silently change is refused: a REAL where an integer is expected (5.5 as a timestamp would
    be truncated), a number where text is expected (a kernel name)."""
    for name, dtype in schema.items():
        column = part[name]
        if dtype == pl.String and column.dtype not in (pl.String, pl.Null) and column.null_count() < column.len():
            raise sqlite3.DatabaseError(f"column {name} holds {part[name].dtype} values where rocpd stores text")
        if dtype.is_integer() and not (column.dtype.is_numeric() or column.dtype == pl.Null) and \
                column.null_count() < column.len():
            raise sqlite3.DatabaseError(f"column {name} holds {column.dtype} values where rocpd stores integers")
        if dtype.is_integer() and part[name].dtype.is_float():
            column = part[name]
            if not column.drop_nulls().is_finite().all() or (column.drop_nulls() != column.drop_nulls().floor()).any():
                raise sqlite3.DatabaseError(f"column {name} holds a non-integer value where rocpd stores integers")

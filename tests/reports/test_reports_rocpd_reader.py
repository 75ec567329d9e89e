"""The rocpd reader's two ways of reading rocpd_kernel_dispatch (ADBC's Arrow driver in key ranges, the stdlib
sqlite3 fallback) give the same report as SQLite's own join through the `kernels` view, also for merged databases;
bad databases fail with the file named and exit 2."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import build_report, load_runs, sqlite_frames

from .reports_builders import expected_from_dispatches, report_one

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "reports"))
import make_rocpd  # noqa: E402


@pytest.fixture(params=["arrow", "stdlib"])
def reader(request, monkeypatch) -> str:
    """Run the test with each reader; the Arrow one splits even a small table into 4 key ranges."""
    if request.param == "stdlib":
        monkeypatch.setattr(sqlite_frames, "ARROW", False)
    elif not sqlite_frames.ARROW:
        pytest.skip("adbc-driver-sqlite is not installed here")
    else:
        monkeypatch.setattr(sqlite_frames, "RANGE_ROWS", 100)
        monkeypatch.setattr(sqlite_frames.os, "sched_getaffinity", lambda pid: set(range(8)))
    return request.param


def by_sqlite(path: Path) -> dict:
    """name -> (calls, total, min, max) from SQLite's join in the `kernels` view, aggregated in Python."""
    with sqlite3.connect(path) as con:
        return expected_from_dispatches(con.execute("SELECT name, start, `end` FROM kernels").fetchall())


def kernel_table(run) -> dict:
    return {k["name"]: (k["calls"], k["total_ns"], k["min_ns"], k["max_ns"]) for k in run["kernels"]}


def test_arrow_reader_is_installed():
    """requirements.txt pins adbc-driver-sqlite: a set-up machine (and CI) must use the fast reader."""
    assert sqlite_frames.ARROW, "adbc-driver-sqlite is missing: run 'bash scripts/setup.sh' (requirements changed)"


@pytest.mark.parametrize("agents", [1, 3])
def test_kernels_and_devices_match_sqlite_join(tmp_path, reader, agents):
    path = tmp_path / "run" / "n" / "4242_results.db"
    _, total = make_rocpd.write(path, 2_345, 40, agents, seed=agents)
    run = report_one(tmp_path / "run")
    assert kernel_table(run) == by_sqlite(path)
    assert (run["summary"]["dispatches"], run["summary"]["gpu_time_ns"]) == (2_345, total)
    assert [t["device"] for t in run["timeline"]] == [f"agent {a + 2}" for a in range(agents)]
    with sqlite3.connect(path) as con:
        per_agent = dict(con.execute("SELECT agent_id, count(*) FROM rocpd_kernel_dispatch GROUP BY agent_id"))
    assert [t["dispatches"] for t in run["timeline"]] == [per_agent[a + 1] for a in range(agents)]


def test_merged_database_joins_symbols_per_process(tmp_path, reader):
    """Three processes' tables under UNION ALL views: ids repeat per process and kernel id 1 names a different
    kernel in each, so a join that ignored the GUID, or a key range that read a row twice, would show."""
    path = tmp_path / "run" / "n" / "4242_results.db"
    _, total = make_rocpd.write(path, 3_001, 30, 2, seed=7, processes=3)
    run = report_one(tmp_path / "run")
    assert kernel_table(run) == by_sqlite(path)
    assert (run["summary"]["dispatches"], run["summary"]["gpu_time_ns"]) == (3_001, total)


def test_key_ranges_cover_every_key_once(tmp_path, monkeypatch):
    path = tmp_path / "1_results.db"
    make_rocpd.write(path, 1_000, 5, 1, seed=1)
    monkeypatch.setattr(sqlite_frames, "RANGE_ROWS", 100)
    monkeypatch.setattr(sqlite_frames.os, "sched_getaffinity", lambda pid: set(range(3)))
    with sqlite3.connect(path) as con:
        ranges = sqlite_frames._ranges(con, "rocpd_kernel_dispatch", "id")
        assert ranges is not None and len(ranges) == 3  # as many as cores
        assert ranges[0][0] == 1 and ranges[-1][1] == 1_001
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
        con.execute("CREATE TABLE t (id, v)")
        con.executemany("INSERT INTO t VALUES (?, 1)", [(i,) for i in range(1_000)] + [(None,)])
        assert sqlite_frames._ranges(con, "t", "id") is None  # a NULL key lies in no range: read in one go
        con.execute("UPDATE t SET id = 'x' WHERE id IS NULL")
        assert sqlite_frames._ranges(con, "t", "id") is None  # text sorts after numbers: max is not an integer


def test_dispatch_table_without_timestamps_uses_the_kernels_view(tmp_path, reader):
    """A schema whose dispatch table keeps timestamps elsewhere (start_id/end_id): read through `kernels`."""
    path = tmp_path / "run" / "n" / "4242_results.db"
    make_rocpd.write(path, 500, 10, 1, seed=2)
    with sqlite3.connect(path) as con:
        con.execute("DROP VIEW kernels")
        con.execute("DROP VIEW top_kernels")
        con.execute(f"ALTER TABLE rocpd_kernel_dispatch{make_rocpd.UUID} RENAME COLUMN start TO start_id")
        con.execute(
            "CREATE VIEW kernels AS SELECT D.id, S.display_name AS name, D.start_id AS start, D.end, "
            "2 AS agent_abs_index FROM rocpd_kernel_dispatch D JOIN rocpd_info_kernel_symbol S ON S.id = D.kernel_id"
        )
    assert kernel_table(report_one(tmp_path / "run")) == by_sqlite(path)


def test_path_with_space_hash_and_question_mark(tmp_path, reader):
    path = tmp_path / "run #1?" / "n" / "4242_results.db"
    _, total = make_rocpd.write(path, 300, 10, 1, seed=3)
    assert report_one(tmp_path / "run #1?")["summary"]["gpu_time_ns"] == total


def test_text_in_a_timestamp_column_is_a_clear_error(tmp_path, reader, capsys):
    path = tmp_path / "run" / "n" / "4242_results.db"
    make_rocpd.write(path, 500, 10, 1, seed=4)
    with sqlite3.connect(path) as con:
        con.execute(f"UPDATE rocpd_kernel_dispatch{make_rocpd.UUID} SET start = 'garbage' WHERE id = 400")
    with pytest.raises(UserError) as err:
        build_report(load_runs([tmp_path / "run"]))
    assert err.value.file == str(path) and "SQLite" in err.value.what and "rocpd" in (err.value.fix or "")
    assert main(["report", str(tmp_path / "run"), "-q"]) == 2
    assert str(path) in capsys.readouterr().err


def test_sqlite_file_that_is_not_rocpd(tmp_path, capsys):
    path = tmp_path / "run" / "4242_results.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    assert main(["report", str(tmp_path / "run"), "-q"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "rocpd_kernel_dispatch, kernels or top_kernels" in err  # the views it looked for

"""The exit-code contract, asserted: 0 ok, 1 a verdict, 2 bad input with the file and a fix; never a traceback, and
never the top-level handler's internal-error message (cli.BUG_MARK), which would mean a case nobody handled.

Also small writers of valid profiler files (rocprofv3 kernel_trace.csv, kernel_stats.csv, counter_collection.csv,
results.json, rocpd) whose exact numbers the tests compute independently (plain Python integers)."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from madengine_rocprof import cli as _cli
from madengine_rocprof.cli import main as cli_main

# getattr: these tests also run against older trees (to show that they fail there)
BUG_MARK: str = getattr(_cli, "BUG_MARK", "internal error (a bug in madengine-rocprof)")

REPO = Path(__file__).resolve().parents[2]

KT_HEADER = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
             "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
             "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
             "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
STATS_HEADER = ["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev"]
COUNTER_HEADER = ["Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Process_Id", "Thread_Id", "Grid_Size",
                  "Kernel_Id", "Kernel_Name", "Workgroup_Size", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
                  "Accum_VGPR_Count", "SGPR_Count", "Counter_Name", "Counter_Value", "Start_Timestamp",
                  "End_Timestamp"]


class Hung(Exception):
    """Raised by `time_limit` (an alarm): the command did not finish in time."""


@contextlib.contextmanager
def time_limit(seconds: int):
    def _alarm(signum, frame):
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cli(*argv: str | os.PathLike[str]) -> tuple[int, str, str]:
    """Run a command in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main([str(a) for a in argv])
        except SystemExit as stop:  # argparse
            code = int(stop.code or 0)
    return code, out.getvalue(), err.getvalue()


def assert_contract(code: int, err: str, allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    """The contract every command keeps: a known exit code, no traceback, no internal error; exit 2 says where
    and how to fix."""
    assert code in allowed, (code, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    assert BUG_MARK not in err, err[-3000:]
    if code == 2:
        assert err.startswith("error: ") or "usage:" in err, err[-2000:]


def cli_ok_or_refused(*argv: str | os.PathLike[str], allowed: tuple[int, ...] = (0, 1, 2)) -> tuple[int, str, str]:
    code, out, err = cli(*argv)
    assert_contract(code, err, allowed)
    return code, out, err


def cli_subprocess(*argv: str | os.PathLike[str], timeout: float = 60, memory_mb: int = 3000
                   ) -> tuple[int, str, str]:
    """A command in its own process with a memory cap and a time limit (special files: a hang or a runaway read
    must fail the test, not take the machine with it). A hang is reported as exit code -9."""
    code = ("import resource, sys\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({memory_mb} << 20, {memory_mb} << 20))\n"
            "from madengine_rocprof.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    try:
        done = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return -9, "", f"hung: still running after {timeout} s"
    return done.returncode, done.stdout, done.stderr


# ---------------------------------------------------------------- valid files and their exact numbers


def kt_row(name: str, start: int, end: int, agent: int = 4, queue: int = 1, n: int = 1) -> list:
    return ["KERNEL_DISPATCH", f"Agent {agent}", queue, queue, 4242, n, 7, name, n, start, end, 0, 0, 8, 0, 16, 64,
            1, 1, 1024, 1, 1]


def kernel_trace_text(rows: list[list]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    writer.writerow(KT_HEADER)
    writer.writerows(rows)
    return buf.getvalue()


def write_kernel_trace(run: Path, rows: list[list], text: str | None = None) -> Path:
    path = run / "node0" / "4242_kernel_trace.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kernel_trace_text(rows) if text is None else text)
    return path


def expected_kernels(rows: list[list]) -> dict[str, tuple[int, int]]:
    """name -> (calls, total ns), computed with Python integers from the rows as written."""
    out: dict[str, tuple[int, int]] = {}
    for row in rows:
        calls, total = out.get(row[7], (0, 0))
        out[row[7]] = (calls + 1, total + row[10] - row[9])
    return out


def report_json(run: Path, out: Path, *extra: str) -> tuple[int, dict | None, str]:
    """`report RUN --json OUT -q`: (exit code, the strictly parsed JSON or None, stderr); asserts the contract."""
    code, _, err = cli("report", run, "--json", out, "-q", *extra)
    assert_contract(code, err)
    if code != 0:
        return code, None, err
    return code, strict_json(out.read_text()), err


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, as strict JSON parsers (jq, browsers, Go) do."""
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def report_kernels(report: dict) -> dict[str, tuple[int, int]]:
    return {k["name"]: (k["calls"], k["total_ns"]) for k in report["runs"][0]["kernels"]}


def write_rocpd(path: Path, kernels: list[tuple] | None = None, top: list[tuple] | None = None,
                counters: list[tuple] | None = None) -> Path:
    """A minimal rocpd-shaped database: a `kernels` view's columns as a table, or only `top_kernels`, and/or
    `counters_collection`. Values go in as given (NULL, text, NaN...), as SQLite's dynamic typing allows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    with con:
        con.execute("CREATE TABLE rocpd_metadata (tag TEXT, value TEXT)")
        if kernels is not None:
            con.execute("CREATE TABLE kernels (name, start, `end`, agent_abs_index, queue_id)")
            con.executemany("INSERT INTO kernels VALUES (?, ?, ?, ?, ?)", kernels)
        if top is not None:
            con.execute("CREATE TABLE top_kernels (name, total_calls, total_duration)")
            con.executemany("INSERT INTO top_kernels VALUES (?, ?, ?)", top)
        if counters is not None:
            con.execute("CREATE TABLE counters_collection (kernel_name, counter_name, value, guid, dispatch_id, "
                        "start, `end`)")
            con.executemany("INSERT INTO counters_collection VALUES (?, ?, ?, ?, ?, ?, ?)", counters)
    con.close()
    return path

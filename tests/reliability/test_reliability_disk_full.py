"""Issue 14, item 3: a full disk gives a clear message and the app's exit code, leaves no temporary file, keeps
whatever fits, and never stops the copy of the workload's output (a workload blocked on its pipe)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from madengine_rocprof.tracer import convert
from madengine_rocprof.wrapper import rocprof_csv

from .reliability_helpers import REPO, start_run

FILL = "import sys; open(sys.argv[1], 'wb').write(b'x' * (2 << 20))"  # fails part way on a 1 MiB disk


def _wrap(out: Path, *app: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "madengine_rocprof", "wrap", "--profiler", "embedded",
                           "--kernel-trace", "-d", str(out), "--", *app],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def _temporary_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]


def test_wrap_on_a_full_disk_keeps_the_apps_exit_code_and_leaves_no_temporary_file(small_disk):
    out = small_disk / "out"
    done = _wrap(out, sys.executable, "-c", FILL, str(small_disk / "filler"))
    assert done.returncode == 1, done.stderr  # the app's own failure (its write hit the full disk) passes through
    assert "cannot write" in done.stderr and "manifest.json: No space left on device" in done.stderr
    done = _wrap(out, "bash", "-c", "echo app done; exit 0")
    assert done.returncode == 0, done.stderr
    assert "manifest.json" in done.stderr and "No space left on device" in done.stderr
    assert "Traceback" not in done.stderr
    assert not _temporary_files(small_disk)


def test_tracer_on_a_full_disk_leaves_no_temporary_file(small_disk):
    out = small_disk / "out"
    app = "import torch\nx = torch.ones(10)\nfor _ in range(20000): x = x * 1.0\nprint('app done')"
    done = _wrap(out, sys.executable, "-c", app)
    assert done.returncode == 0, done.stderr
    assert "app done" in done.stdout and "no space left" in done.stderr.lower()
    assert not _temporary_files(small_disk), _temporary_files(small_disk)


def test_run_on_a_full_disk_keeps_the_workload_moving_and_writes_the_results(models, small_disk):
    out = small_disk / "out"
    proc = start_run(models, out, "chatty_model", "--runner", "local", "--quiet", "--timeout", "60")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output
    assert "Traceback" not in output
    ws = out / "chatty_model__none"
    manifest = json.loads((ws / "run.json").read_text())
    assert manifest["steps"][0]["exit_code"] == 0  # the workload was never blocked on its pipe
    assert not any("timed out" in f for f in manifest["failures"])
    assert any("run.log incomplete: No space left on device" in f for f in manifest["failures"]), manifest["failures"]
    assert "the disk is full" in (ws / "logs" / "run.log").read_text()
    with open(out / "perf.csv", newline="") as fh:
        assert [r["status"] for r in csv.DictReader(fh)] == ["FAILURE"]
    assert not _temporary_files(out)


def test_run_reports_results_it_cannot_write(models, small_disk):
    """The results folder fills before run.json: a clear message per file, exit 1, no temporary file."""
    out = small_disk / "out"
    workload = models.parent / "scripts" / "ok" / "run.sh"
    workload.write_text(f"{sys.executable} -c \"{FILL}\" {small_disk / 'filler'} 2>/dev/null\n"
                        "echo 'performance: 7 things'\n")
    proc = start_run(models, out, "ok_model", "--runner", "local", "--quiet")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output
    assert "cannot write" in output and "run.json: No space left on device" in output
    assert "Traceback" not in output
    assert not _temporary_files(out)


def test_run_on_a_disk_full_before_the_run_starts_is_a_clear_exit_2_and_no_half_made_run_directory(models,
                                                                                                      small_disk):
    """Issue 25: the model scripts cannot be copied into the run directory. Was a raw list of Python error tuples
    and a run directory with empty folders."""
    (small_disk / "filler").write_bytes(b"x" * (1 << 20))  # the disk is full before `run` starts
    out = small_disk / "out"
    proc = start_run(models, out, "ok_model", "--runner", "local")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, output
    assert "cannot prepare the run directory: No space left on device" in output
    assert "fix: free space on the output file system" in output
    assert "Traceback" not in output and "[(" not in output and "Errno" not in output
    assert not (out / "ok_model__none").exists()
    assert not _temporary_files(small_disk)


def test_the_tracer_writer_on_a_full_disk_keeps_every_whole_row_and_leaves_no_temporary_file(small_disk):
    """Issue 25: the embedded tracer's kernel_trace.csv on a real full disk (tmpfs, ENOSPC)."""
    events = convert.Events(cpu=True)
    n = 40_000  # about 3 MB of rows: far more than the 1 MiB disk holds
    events.op_start, events.op_dur = [i * 1000 for i in range(n)], [500] * n
    events.op_tid, events.op_corr = [7] * n, list(range(1, n + 1))
    events.op_name = [f'op "{i % 13}", with a comma' for i in range(n)]
    with pytest.raises(OSError) as err:
        convert.write_files(events, str(small_disk), "1_", cpu=True)
    assert err.value.errno == 28  # ENOSPC
    assert sorted(p.name for p in small_disk.iterdir()) == ["1_kernel_trace.csv"]  # no stats, no temporary file
    text = (small_disk / "1_kernel_trace.csv").read_text()
    assert text.endswith("\n")
    rows = list(csv.reader(text.splitlines()))
    assert rows[0] == list(rocprof_csv.KERNEL_TRACE) and len(rows) > 1000
    assert all(len(r) == len(rocprof_csv.KERNEL_TRACE) for r in rows)
    assert [int(r[5]) for r in rows[1:]] == list(range(1, len(rows)))  # the first rows, in order, none missing
    assert rows[-1][7] == f'op "{(len(rows) - 2) % 13}", with a comma'


@pytest.mark.parametrize("native", [True, False])
def test_the_trace_file_converter_on_a_full_disk_keeps_every_whole_row(small_disk, tmp_path, monkeypatch, native):
    """Issues 25/26 item 5: torch.profiler's JSON to kernel_trace.csv on a real full disk (tmpfs, ENOSPC), by the
    native converter (tracer/native/kineto_rows.c) and by the Python path: the same error, whole rows only, the
    first rows in order, no stats file and no temporary file."""
    from madengine_rocprof.tracer import native_rows
    from tests.wrapper import kineto_files as kf

    monkeypatch.setenv(native_rows.ENV_SWITCH, "1" if native else "0")
    trace = tmp_path / "trace.json"
    kf.write(trace, 0, [kf.cpu_op(f'op "{i % 13}", with a comma', 7, i * 1000, 500, i) for i in range(1, 40_001)])
    with pytest.raises(OSError) as err:
        convert.write_trace_file(str(trace), str(small_disk), "1_", cpu=True, stats=True)
    assert err.value.errno == 28 and str(err.value) == "[Errno 28] No space left on device"  # ENOSPC
    assert (native_rows.why_not == "") is native
    assert sorted(p.name for p in small_disk.iterdir()) == ["1_kernel_trace.csv"]
    text = (small_disk / "1_kernel_trace.csv").read_text()
    assert text.endswith("\n")
    rows = list(csv.reader(text.splitlines()))
    assert rows[0] == list(rocprof_csv.KERNEL_TRACE) and len(rows) > 1000
    assert [int(r[5]) for r in rows[1:]] == list(range(1, len(rows)))
    assert rows[-1][7] == f'op "{(len(rows) - 1) % 13}", with a comma'  # op i is dispatch i

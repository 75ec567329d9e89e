"""Issue 14, items 8 and 9, and the output boundary: logs and app output are read in bounded pieces (memory flat
whatever the output size), a signal during tracer start-up is a signal (not a profiler failure), the terminal gets
no control bytes from kernel names, and generated command lines quote every path."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.cli import main as cli_main
from madengine_rocprof.runner import results
from madengine_rocprof.runner.lifecycle import RunOptions, run_models
from madengine_rocprof.wrapper.execute import PROFILER_FAILURE, _Filter

from ..runner.test_runner_lifecycle import FAKE_WRAPPER
from .reliability_helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "rocprofv3" / "docs-data"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.integers(0, 300), noise=st.sampled_from(["x", "performance: ", "performance: 1 ", "\n"]),
       value=st.from_regex(r"[0-9]{1,6}(\.[0-9]{1,3})?", fullmatch=True), metric=st.from_regex(r"[a-z_]{1,40}",
                                                                                               fullmatch=True))
def test_performance_found_in_pieces_is_the_first_match_of_the_whole_log(tmp_path_factory, monkeypatch, before,
                                                                         noise, value, metric):
    monkeypatch.setattr(results, "CHUNK", 64)  # small pieces: every cut position is exercised
    monkeypatch.setattr(results, "OVERLAP", 32)  # longer than "performance: <value> " here
    text = (noise * before)[:before] + f"\nperformance: {value} {metric}\nperformance: 9 later\n"
    log = tmp_path_factory.mktemp("log") / "run.log"
    log.write_text(text)
    assert results.find_performance(log) == results.parse_performance(text)


def test_reading_a_huge_log_keeps_memory_flat(tmp_path):
    log = tmp_path / "run.log"
    with open(log, "w") as fh:
        for _ in range(40):
            fh.write("y" * (1 << 20))  # 40 MB, one line
        fh.write("\nperformance: 5 things\n")
    tracemalloc.start()
    try:
        assert results.find_performance(log) == (5.0, "things")
        assert results.count_lines(log) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


def test_the_wrapper_never_holds_a_whole_long_line():
    read, write = os.pipe()

    class Sink:  # the terminal: counts what passes, keeps nothing
        size = 0

        def write(self, data: bytes) -> None:
            Sink.size += len(data)

        def flush(self) -> None:
            pass

    sink = Sink()

    def feed() -> None:
        with os.fdopen(write, "wb") as fh:
            for _ in range(40):
                fh.write(b"z" * (1 << 20))  # 40 MB without a newline
            fh.write(b"\n")

    tracemalloc.start()
    try:
        feeder = threading.Thread(target=feed)
        feeder.start()
        pump = _Filter(os.fdopen(read, "rb"), sink, [], keep_all=False)
        pump.thread.join(60)
        feeder.join(60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.size == (40 << 20) + 1  # everything passed through
    assert peak < 16 << 20, peak


SIGNAL_DURING_START = """
import os, signal, sys, time
import torch, torch.profiler
from madengine_rocprof.tracer import runtime
real_start = torch.profiler.profile.start
def start(self):
    os.kill(os.getpid(), signal.SIGTERM)  # a scheduler's SIGTERM arrives while the profiler starts
    time.sleep(2)
    real_start(self)
torch.profiler.profile.start = start
tracer = runtime._Tracer()
tracer._catch_sigterm()
tracer.start(torch)
print("not reached")
"""


def test_a_signal_during_tracer_start_up_is_not_a_profiler_failure(tmp_path):
    env = {**os.environ, "MADENGINE_ROCPROF_TRACER_OUT": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", SIGNAL_DURING_START], capture_output=True, text=True, env=env,
                          timeout=120, cwd=REPO)
    assert done.returncode == -15, done.stderr  # ended by the signal, as it would have been without the tracer
    assert PROFILER_FAILURE.search(done.stderr) is None, done.stderr
    assert "not reached" not in done.stdout


def test_report_shows_control_bytes_as_escapes(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    with open(FIXTURES / "kernel_trace.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["Kernel_Name"] = "evil\x1b]0;owned\x07\x1b[2J\rkernel"
    with open(run / "kernel_trace.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert cli_main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "\\x1b" in out and "kernel" in out


def test_generated_commands_quote_the_output_folder(tmp_path, monkeypatch):
    """An output folder with a space, a quote and `$( )`: one word to the wrapper, nothing runs."""
    plugin = tmp_path / "plugin"
    (plugin / "scripts").mkdir(parents=True)
    (plugin / "scripts" / "rocprof_wrapper.sh").write_text(textwrap.dedent(FAKE_WRAPPER))
    models = tmp_path / "repo" / "models.json"
    (models.parent / "scripts" / "ok").mkdir(parents=True)
    (models.parent / "scripts" / "ok" / "run.sh").write_text("echo 'performance: 3 things'\n")
    models.write_text(json.dumps([{"name": "ok_model", "dockerfile": "docker/x", "scripts": "scripts/ok/run.sh"}]))
    out = tmp_path / "it's a $(touch INJECTED) dir"
    monkeypatch.chdir(tmp_path)
    code = run_models(RunOptions(tags=["ok_model"], models_file=models, output_dir=out, runner="local", echo=False,
                                 repo=plugin, context_json=json.dumps({"tools": [{"name": "rocprofv3_lightweight"}]})))
    ws = out / "ok_model__rocprofv3_lightweight"
    assert code == 0, json.loads((ws / "run.json").read_text())["failures"]
    assert (ws / "profiler" / "manifest.json").is_file()
    assert not list(Path(tmp_path).rglob("INJECTED"))


# ---------------------------------------------------------------- outputs that are devices or pipes
def _null_device(folder: Path) -> Path:
    """A private /dev/null (character device 1,3) in `folder`: the real one is never put at risk by a test."""
    import stat as stat_

    import pytest

    node = folder / "null"
    try:
        os.mknod(node, stat_.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root (CI and the dev machine run as root)")
    return node


def test_an_output_that_is_a_device_is_written_through_not_replaced(tmp_path):
    """`--json /dev/null` as root replaced /dev/null with a regular file (the atomic writer renamed its temporary
    file over the device node); later readers of /dev/null got that file's text. A device, or a link to one, is now
    written straight through."""
    import stat as stat_

    from madengine_rocprof.atomic import write_json

    node = _null_device(tmp_path)
    link = tmp_path / "out.json"
    link.symlink_to(node)
    for target in (node, link):
        write_json(target, {"a": 1})
        assert stat_.S_ISCHR(os.stat(node).st_mode) and node.read_bytes() == b""
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["null", "out.json"]  # no temp file
    run = tmp_path / "run"
    (run / "n").mkdir(parents=True)
    (run / "n" / "1_kernel_trace.csv").write_bytes((FIXTURES / "kernel_trace.csv").read_bytes())
    code = cli_main(["report", str(run), "-q", "--json", str(node)])
    assert code == 0 and stat_.S_ISCHR(os.stat(node).st_mode)


def test_an_output_that_is_a_pipe_is_written_to_its_reader_and_refused_without_one(tmp_path):
    import pytest

    from madengine_rocprof.atomic import write_json

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="no reader"):  # not a wait for a reader that never comes
        write_json(fifo, {"a": 1})
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    for _ in range(200):  # the reader must have opened its end before the writer opens its own
        try:
            write_json(fifo, {"a": 1})
            break
        except OSError:
            threading.Event().wait(0.01)
    reader.join(10)
    assert json.loads(got[0]) == {"a": 1}

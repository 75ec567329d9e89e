"""Issue 33, classes 1 and 6: an output never replaces an input (refused with exit 2 before anything is read), and the
outputs of one command appear together or not at all, a stopping signal during the write included."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from madengine_rocprof.cli import main as cli_main

from ..insights.insights_builders import write_run
from .reliability_helpers import REPO

KERNELS = {"Cijk_gemm_kernel": [50_000, 52_000, 51_000], "elementwise_add": [8_000, 8_100, 7_900]}


def _run(root: Path) -> Path:
    return write_run(root, step_times=[10.0, 11.0, 10.5, 10.2], kernels=KERNELS)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("option", ["--json", "--markdown", "--html"])
@pytest.mark.parametrize("target", ["trace", "run_json", "link_to_trace", "new_file_inside"])
def test_report_never_replaces_an_input(tmp_path, capsys, option, target):
    run = _run(tmp_path / "run")
    trace = run / "profiler" / "node0" / "4242_kernel_trace.csv"
    paths = {"trace": trace, "run_json": run / "workload_result.json", "new_file_inside": run / "report.out"}
    if target == "link_to_trace":
        paths[target] = tmp_path / "link.csv"
        paths[target].symlink_to(trace)
    before = _snapshot(run)
    assert cli_main(["report", str(run), "-q", option, str(paths[target])]) == 2
    err = capsys.readouterr().err
    assert "input" in err and "fix:" in err and "internal error" not in err
    assert _snapshot(run) == before  # the profile is intact: the next report still reads it
    assert cli_main(["report", str(run), "-q"]) == 0


def test_report_refuses_a_hard_link_to_an_input_file_and_outputs_inside_inputs(tmp_path, capsys):
    run = _run(tmp_path / "run")
    rules = tmp_path / "rules.json"
    rules.write_text('{"rules": []}')
    twin = tmp_path / "twin.json"
    os.link(rules, twin)
    assert cli_main(["report", str(run), "-q", "--kernel-rules", str(rules), "--json", str(twin)]) == 2
    assert "replace the input" in capsys.readouterr().err
    assert cli_main(["report", str(run), "-q", "--perfetto", str(run / "traces")]) == 2
    assert "inside the input folder" in capsys.readouterr().err
    assert not (run / "traces").exists()


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_compare_never_replaces_an_input(tmp_path, capsys, option):
    base, new = _run(tmp_path / "base"), _run(tmp_path / "new")
    target = new / "workload_result.json"
    before = target.read_bytes()
    assert cli_main(["compare", str(base), str(new), "-q", option, str(target)]) == 2
    assert "input" in capsys.readouterr().err
    assert target.read_bytes() == before


def test_two_outputs_naming_one_file_and_a_link_loop_are_refused(tmp_path, capsys):
    run = _run(tmp_path / "run")
    out = tmp_path / "r.json"
    assert cli_main(["report", str(run), "-q", "--json", str(out), "--markdown", str(out)]) == 2
    assert "same file as --json" in capsys.readouterr().err
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    assert cli_main(["report", str(run), "-q", "--json", str(loop)]) == 2
    err = capsys.readouterr().err
    assert "symbolic link loop" in err and "fix:" in err and "internal error" not in err
    assert not out.exists()


def test_a_later_output_that_fails_leaves_no_earlier_one(tmp_path, capsys):
    run = _run(tmp_path / "run")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder is needed")
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.json").write_text("old")
    args = ["report", str(run), "-q", "--json", str(out / "kept.json"), "--markdown", str(out / "new.md"),
            "--html", str(blocker / "page.html")]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "fix:" in err and "internal error" not in err
    assert (out / "kept.json").read_text() == "old" and not (out / "new.md").exists()
    assert _leftovers(tmp_path) == []
    base, new = _run(tmp_path / "base"), _run(tmp_path / "new")
    assert cli_main(["compare", str(base), str(new), "-q", "--json", str(out / "c.json"),
                     "--markdown", str(blocker / "c.md")]) == 2
    assert not (out / "c.json").exists() and _leftovers(tmp_path) == []


def test_report_and_compare_write_every_output_when_all_can_be_written(tmp_path):
    run = _run(tmp_path / "run")
    out = tmp_path / "out"
    assert cli_main(["report", str(run), "-q", "--json", str(out / "r.json"), "--markdown", str(out / "r.md"),
                     "--html", str(out / "r.html"), "--perfetto", str(out / "traces")]) == 0
    assert {p.name for p in out.rglob("*") if p.is_file()} == {"r.json", "r.md", "r.html", "run.perfetto.json"}
    assert oct((out / "r.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


SIGNAL_DURING_WRITE = """
import os, signal, sys
from madengine_rocprof.reports import json_indented  # the report JSON's writer
real_dump = json_indented.dump
def dump(obj, fh, **kw):
    fh.write('{"partial": ')
    fh.flush()
    os.kill(os.getpid(), int(sys.argv[1]))
    real_dump(obj, fh, **kw)
json_indented.dump = dump
from madengine_rocprof.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopping_signal_during_the_write_leaves_no_temporary_file(tmp_path, sig):
    run = _run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", SIGNAL_DURING_WRITE, str(int(sig)), "report", str(run), "-q",
                           "--json", str(out / "r.json"), "--markdown", str(out / "r.md")],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          # the signals at their defaults, whatever this test inherited (under nohup SIGHUP is
                          # ignored, and the CLI rightly leaves an ignored SIGHUP ignored)
                          preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    assert proc.returncode == 128 + sig, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(os.listdir(out)) == []  # no .r.json.XXXX.tmp, and no r.md without its r.json


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_escalate_never_replaces_an_input(tmp_path, capsys, option):
    run = _run(tmp_path / "run")
    target = run / "workload_result.json"
    before = target.read_bytes()
    assert cli_main(["escalate", str(run), "--join-only", option, str(target)]) == 2
    assert "input" in capsys.readouterr().err
    assert target.read_bytes() == before and not (tmp_path / "run.escalate").exists()


def test_export_tools_writes_the_wrapper_and_tools_json_together_or_neither(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    assert cli_main(["export-tools", str(tmp_path / "tools.json"), "--wrapper-dir", str(blocker / "tools")]) == 2
    assert "fix:" in capsys.readouterr().err and sorted(os.listdir(tmp_path)) == ["blocker"]
    assert cli_main(["export-tools", str(blocker / "tools.json"), "--wrapper-dir", str(tmp_path / "tools")]) == 2
    assert sorted(os.listdir(tmp_path)) == ["blocker"]  # the wrapper was not placed for a tools.json never written
    assert cli_main(["export-tools", str(tmp_path / "tools.json"), "--wrapper-dir", str(tmp_path / "tools")]) == 0
    assert os.access(tmp_path / "tools" / "rocprof_wrapper.sh", os.X_OK)


def test_the_rules_file_in_force_is_an_input_too(tmp_path, capsys, monkeypatch):
    run = _run(tmp_path / "run")
    rules = tmp_path / "rules.json"
    rules.write_text('{"rules": []}')
    monkeypatch.setenv("MADENGINE_ROCPROF_KERNEL_RULES", str(rules))
    assert cli_main(["report", str(run), "-q", "--markdown", str(rules)]) == 2
    assert "replace the input" in capsys.readouterr().err and rules.read_text() == '{"rules": []}'


def test_a_failed_commit_puts_back_what_it_replaced(tmp_path, monkeypatch):
    from madengine_rocprof import atomic

    kept, link, new = tmp_path / "kept.json", tmp_path / "link.json", tmp_path / "new.json"
    kept.write_text("old")
    link.symlink_to(tmp_path / "elsewhere.json")
    renames = []

    def failing_third_rename(tmp, target):  # the disk fills at the last rename
        renames.append(target)
        if len(renames) == 3:
            raise OSError(28, "No space left on device", target)
        os.replace(tmp, target)

    monkeypatch.setattr(atomic, "_rename", failing_third_rename)
    with pytest.raises(OSError), atomic.FileSet() as files:
        for path in (kept, link, new):
            files.write_text(path, "new")
    assert kept.read_text() == "old" and os.readlink(link) == str(tmp_path / "elsewhere.json")
    assert sorted(os.listdir(tmp_path)) == ["kept.json", "link.json"]
